"""Token totals against real Gym's records (the stand-in's side: tests/plugin/test_usage_session.py)."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.support.real_gym import GymExample, SharedGym, with_environment

if TYPE_CHECKING:
    from pytest_gym_eval import provision


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def counts(usage: dict[str, Any]) -> tuple[int, int, int]:
    return usage["input_tokens"], usage["output_tokens"], usage["total_tokens"]


def test_replayed_token_totals_equal_the_sums_over_real_gyms_records(
    pytester: pytest.Pytester, shared_gym: SharedGym, gym_examples: dict[str, GymExample]
) -> None:
    datasets = []
    for example in gym_examples.values():
        target = pytester.path / "datasets" / f"{example.name}.jsonl"
        target.parent.mkdir(exist_ok=True)
        shutil.copy(example.dataset, target)
        datasets.append(f"datasets/{example.name}.jsonl")
    result = pytester.runpytest(*shared_gym.args, *datasets, "--gym-run-dir=runs", "--gym-report=report.json")
    (run_dir,) = (pytester.path / "runs").iterdir()
    report = json.loads((pytester.path / "report.json").read_text())
    rows = sum(len(example.dataset.read_text().splitlines()) for example in gym_examples.values())
    assert len(report["rollouts"]) == rows, result.stdout.str()[-3000:]
    by_agent: dict[str, list[dict[str, Any]]] = {}
    for record in read_jsonl(run_dir / "gym-output" / "rollouts.jsonl"):
        by_agent.setdefault(record["agent_ref"]["name"], []).append(record)
    for example in gym_examples.values():
        usages = [record["response"]["usage"] for record in by_agent[example.agent]]
        # each row was answered by its one recording, so Gym's records carry the recordings' usage (a multi-turn
        # rollout's once, not once per model turn)
        recorded = [recording["response"]["usage"] for recording in read_jsonl(example.recordings)]
        assert Counter(map(counts, usages)) == Counter(map(counts, recorded)), example.name
        expected = {key: sum(u[f"{key}_tokens"] for u in usages) for key in ("input", "output", "total")}
        (summary,) = [d for d in report["datasets"] if d["dataset"] == f"datasets/{example.name}.jsonl"]
        assert summary["tokens"] == {**expected, "rollouts": len(usages)}
        assert expected["output"] > 0
        result.stdout.fnmatch_lines([f"*tokens*{expected['total']:,} total: {expected['input']:,} in*"])


@pytest.fixture(scope="module")
def multi_step_example(gym_checkout: provision.GymCheckout) -> GymExample:
    """Gym's example_multi_step (5 tasks, each recording 4-5 model turns), its server venv provisioned now."""
    checkout = with_environment(gym_checkout, "example_multi_step")
    return GymExample(checkout.path, "example_multi_step", "example_multi_step_simple_agent")


@pytest.mark.parametrize("model_type", ["openai_model", "vllm_model"])
def test_a_replayed_multi_turn_session_reports_its_recordings_tokens(
    pytester: pytest.Pytester, multi_step_example: GymExample, model_type: str
) -> None:
    """Every recording of Gym's example_multi_step holds several model turns and its whole usage once. Replayed
    through either model type (Responses API or chat completions), each rollout, the summary (tokens and cost), the
    JSON report and the HTML page report the recording's tokens: not that usage once per model turn, nor 0."""
    example = multi_step_example
    target = pytester.path / "datasets" / f"{example.name}.jsonl"
    target.parent.mkdir()
    shutil.copy(example.dataset, target)
    result = pytester.runpytest_subprocess(
        f"--gym-checkout={example.checkout}", f"--gym-replay={example.recordings}", f"--gym-model-type={model_type}",
        f"datasets/{example.name}.jsonl", "--gym-run-dir=runs", "--gym-report=report.json",
        "--gym-html=report.html", "--gym-price-per-mtok=1:10", "-p", "no:cacheprovider",
    )  # fmt: skip
    recorded = [counts(recording["response"]["usage"]) for recording in read_jsonl(example.recordings)]
    report = json.loads((pytester.path / "report.json").read_text())
    rollouts = [(r["input_tokens"], r["output_tokens"], r["total_tokens"]) for r in report["rollouts"]]
    assert Counter(rollouts) == Counter(recorded), result.stdout.str()[-3000:]
    assert all(r["reward"] == 1.0 for r in report["rollouts"])
    total_in, total_out, total = (sum(column) for column in zip(*recorded, strict=True))
    (summary,) = report["datasets"]
    assert summary["tokens"] == {"input": total_in, "output": total_out, "total": total, "rollouts": len(recorded)}
    assert summary["cost"] == pytest.approx(total_in / 1e6 + total_out * 10 / 1e6)
    result.stdout.fnmatch_lines([f"*tokens*{total:,} total: {total_in:,} in, {total_out:,} out*"])
    html = (pytester.path / "report.html").read_text()
    assert all(f'"input_tokens":{tokens[0]},"output_tokens":{tokens[1]}' in html for tokens in recorded)
