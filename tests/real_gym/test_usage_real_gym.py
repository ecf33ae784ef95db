"""Token totals against real Gym's records (the stand-in's side: tests/plugin/test_usage.py)."""

from __future__ import annotations

import json
import shutil
from typing import Any

import pytest

from tests.support.real_gym import GymExample, SharedGym


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
    for line in (run_dir / "gym-output" / "rollouts.jsonl").read_text().splitlines():
        record = json.loads(line)
        by_agent.setdefault(record["agent_ref"]["name"], []).append(record)
    for example in gym_examples.values():
        usages = [record["response"]["usage"] for record in by_agent[example.agent]]
        expected = {key: sum(u[f"{key}_tokens"] for u in usages) for key in ("input", "output", "total")}
        (summary,) = [d for d in report["datasets"] if d["dataset"] == f"datasets/{example.name}.jsonl"]
        assert summary["tokens"] == {**expected, "rollouts": len(usages)}
        assert expected["output"] > 0
        result.stdout.fnmatch_lines([f"*tokens*{expected['total']:,} total: {expected['input']:,} in*"])
