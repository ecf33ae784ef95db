"""A judge environment replayed end to end with no key and no model: Gym's equivalence_llm_judge (its judge is the
policy model) with the policy's recorded answers and the judge's calls taken from the same rollouts
(``python -m pytest_gym_eval judge-recordings``), one judge call left out (the unit tier:
tests/unit/test_judge_recordings.py). Gym's example rollouts are read from the provisioned checkout at test time;
a judge that is a model server of its own, replayed with ``--gym-model-server NAME=replay:FILE``:
tests/real_gym/test_model_servers_real_gym.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_gym_eval.replay.judge_recordings import judge_recordings
from tests.support.real_gym import with_environment

if TYPE_CHECKING:
    from pytest_gym_eval import provision

ENVIRONMENT = "equivalence_llm_judge"


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture(scope="module")
def judge_checkout(gym_checkout: provision.GymCheckout) -> provision.GymCheckout:
    """The provisioned Gym with equivalence_llm_judge's server venv (built now when missing)."""
    return with_environment(gym_checkout, ENVIRONMENT)


def test_a_judge_environment_replays_its_policy_and_judge_and_names_a_missing_judge_answer(
    pytester: pytest.Pytester, judge_checkout: provision.GymCheckout
) -> None:
    recordings = judge_checkout.path / "resources_servers" / ENVIRONMENT / "data" / "example_rollouts.jsonl"
    recorded = read_jsonl(recordings)
    rows = [{"responses_create_params": {"input": r["responses_create_params"]["input"]},
             "expected_answer": r["expected_answer"]} for r in recorded]  # fmt: skip
    (pytester.path / f"{ENVIRONMENT}.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    calls = judge_recordings([recordings])
    assert len(calls) == len(recorded) == 5
    left_out = calls.pop(0)  # the judge's answer for the first row is not recorded
    (pytester.path / "judge.jsonl").write_text("".join(json.dumps(call) + "\n" for call in calls))
    result = pytester.runpytest_subprocess(
        f"--gym-checkout={judge_checkout.path}", f"--gym-replay={recordings}", "--gym-replay=judge.jsonl",
        f"{ENVIRONMENT}.jsonl", "--gym-run-dir=runs", "--gym-report=report.json", "-p", "no:cacheprovider",
    )  # fmt: skip
    output = result.stdout.str()
    report = json.loads((pytester.path / "report.json").read_text())
    rollouts = sorted(report["rollouts"], key=lambda r: r["task_id"])
    assert len(rollouts) == 5, output[-3000:]
    # The first row's judge request has no recording: an error (never a reward of 0) naming the request.
    errored = [r for r in rollouts if r["status"] == "error"]
    assert len(errored) == 1, output[-3000:]
    assert errored[0]["failure_class"] == "judge_failed"
    # Gym's judge call is retried, so the one missing answer is missed more than once (3 times on Gym 0.7.0).
    assert "judge model server policy_model (replayed) has no recorded answer for " in output
    assert "no recorded answer: the conversation" in output
    # Every other rollout's reward is the recorded one, its judge answered from the judge's recordings.
    scored = [r for r in rollouts if r["status"] != "error"]
    assert sorted(r["reward"] for r in scored) == sorted(r["reward"] for r in recorded[1:])
    assert "verifier flips against the recording: none" in output
    usage = [call["response"]["usage"] for call in calls]
    (summary,) = report["datasets"]
    assert summary["tokens"]["judge"]["input"] == sum(u["input_tokens"] for u in usage)
    assert summary["tokens"]["judge"]["rollouts"] == 4
    assert left_out["judge_of"].endswith(":1 judge_evaluations[0]")
