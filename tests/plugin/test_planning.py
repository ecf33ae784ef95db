"""``python -m pytest_gym_eval plan``: tasks and repeats a paired comparison needs (pytest_gym_eval.stats.power)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from statistics import NormalDist
from typing import Any

import pytest

from pytest_gym_eval.stats.power import detectable, difference_variance, plan_lines, tasks_needed, variance_components


def report(rewards: dict[str, list[float]], dataset: str = "data/mcqa.jsonl") -> dict[str, Any]:
    rollouts = [
        {"nodeid": f"{dataset}::{task}[r{r}]", "dataset": dataset, "task_id": task, "repeat": r, "agent": "a",
         "status": "passed" if reward >= 1 else "failed", "reward": reward}
        for task, values in rewards.items() for r, reward in enumerate(values)
    ]  # fmt: skip
    return {"schema_version": 1, "meta": {}, "datasets": [], "rollouts": rollouts}


def test_variance_components_by_hand() -> None:
    # Task means 1, 0.5, 0: their variance 0.25; within-task variances 0, 0.5, 0 -> mean 1/6; K = 2.
    variance = variance_components([[1.0, 1.0], [1.0, 0.0], [0.0, 0.0]])
    assert variance.within == pytest.approx(1 / 6)
    assert variance.between == pytest.approx(0.25 - (1 / 6) / 2)
    assert (variance.tasks, variance.repeats) == (3, 2)
    with pytest.raises(ValueError, match="at least 2 tasks"):
        variance_components([[1.0]])


def test_tasks_needed_is_millers_formula() -> None:
    variance = variance_components([[1.0, 1.0], [1.0, 0.0], [0.0, 0.0]])
    omega2 = difference_variance(variance, 4, 0.5)
    assert omega2 == pytest.approx(2 * variance.between * 0.5 + 2 * (1 / 6) / 4)
    z = NormalDist().inv_cdf(0.975) + NormalDist().inv_cdf(0.8)
    assert tasks_needed(omega2, 0.05, 0.8, 0.05) == math.ceil(z * z * omega2 / 0.05**2)
    # More repeats never need more tasks; a larger drop needs fewer.
    counts = [tasks_needed(difference_variance(variance, k, 0.5), 0.05, 0.8, 0.05) for k in (1, 2, 4, 8)]
    assert counts == sorted(counts, reverse=True)
    assert tasks_needed(omega2, 0.1, 0.8, 0.05) < tasks_needed(omega2, 0.05, 0.8, 0.05)
    # What n tasks detect is the drop that needs exactly n.
    drop = detectable(omega2, 400, 0.8, 0.05)
    assert tasks_needed(omega2, drop, 0.8, 0.05) == 400


def test_plan_command_prints_the_table(tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    rewards = {f"t{i}": [1.0, 1.0] if i % 3 else [0.0, 1.0] for i in range(30)}
    path.write_text(json.dumps(report(rewards)))
    result = subprocess.run(
        [sys.executable, "-m", "pytest_gym_eval", "plan", str(path), "--detect-drop", "0.05", "--power", "0.9"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "detect a mean-reward drop of 0.05 (power 0.9" in out
    assert "data/mcqa.jsonl: 30 tasks x 2 repeats; between-task variance" in out
    rows = [line.split() for line in out.splitlines() if line.strip()[:1].isdigit()]
    assert [int(row[0]) for row in rows] == [1, 2, 4, 8, 16]
    assert "with its 30 tasks x 2 repeats it detects a drop of" in out
    assert "Miller 2024" in out and "arXiv:2411.00640" in out


def test_rewards_without_variance_give_no_plan() -> None:
    # Every reward 1.0: variance estimates of 0 would claim that 2 tasks detect any drop.
    lines = plan_lines(report({"a": [1.0, 1.0], "b": [1.0, 1.0], "c": [1.0, 1.0]}), 0.05)
    (said,) = [line for line in lines if line.startswith("data/mcqa.jsonl")]
    assert said.startswith("data/mcqa.jsonl: 3 tasks x 2 repeats, every reward 1 within its task and every task alike")
    assert "no variance to plan from" in said and not any("detects a drop" in line for line in lines)
    varied = plan_lines(report({"a": [1.0, 0.0], "b": [1.0, 1.0]}), 0.05)
    assert any("detects a drop of" in line for line in varied)


def test_plan_command_refuses_bad_input(tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    path.write_text("{}")
    argv = [sys.executable, "-m", "pytest_gym_eval", "plan", str(path)]
    bad = subprocess.run([*argv, "--detect-drop", "0.05"], capture_output=True, text=True, check=False)
    assert bad.returncode == 2 and "schema_version" in bad.stderr
    for drop in ("-1", "0", "nan", "inf"):
        refused = subprocess.run([*argv, "--detect-drop", drop], capture_output=True, text=True, check=False)
        assert refused.returncode == 2 and "--detect-drop must be a finite number > 0" in refused.stderr, drop
