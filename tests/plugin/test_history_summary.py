"""What a session calls at its end: record_run, git_commit, summarize and its words and JSON."""

from __future__ import annotations

import json
import subprocess
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from pytest_gym_eval.history.backends import open_store
from pytest_gym_eval.history.store import RolloutRecord, RunRecord, SeriesKey
from pytest_gym_eval.history.summary import git_commit, record_run, summarize, summary_json, summary_lines

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=timezone.utc)


def _append(target: Path, outcomes: dict[str, str]) -> None:
    """Append one run per position of the outcome strings (``P``/``F``), one rollout per task."""
    runs = len(next(iter(outcomes.values())))
    for index in range(runs):
        rollouts = [
            RolloutRecord(
                "mcqa.jsonl",
                task,
                0,
                "policy-a",
                "passed" if letters[index] == "P" else "failed",
                1.0 if letters[index] == "P" else 0.0,
            )
            for task, letters in outcomes.items()
        ]
        run = RunRecord(T0 + timedelta(hours=index), "policy-a", "0.7.0", {"mcqa.jsonl": "d1"})
        run_id, message = record_run(target, run, rollouts)
        assert (run_id, message) == (index + 1, None)


def test_record_run_says_once_what_went_wrong_instead_of_raising(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    run = RunRecord(T0, "m", "0.7.0", {})
    run_id, message = record_run(blocker / "history.db", run, [])
    assert run_id is None
    assert message is not None
    assert message.startswith(f"history not written: history {blocker / 'history.db'}: cannot open")


def test_git_commit_inside_and_outside_a_repository(tmp_path: Path) -> None:
    assert git_commit(tmp_path) is None
    env = ["-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    subprocess.run(["git", *env, "-C", str(tmp_path), "commit", "-q", "--allow-empty", "-m", "x"], check=True)
    head = subprocess.run(["git", "-C", str(tmp_path), "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    assert git_commit(tmp_path) == head.strip()


def test_new_flakes_and_new_failures_are_those_the_latest_run_made(tmp_path: Path) -> None:
    target = tmp_path / "history.db"
    _append(target, {"1": "PPPPP", "2": "PPPFP", "3": "PPPPF", "4": "PFPFP"})
    with open_store(target) as store:
        [history] = summarize(store, [SeriesKey("mcqa.jsonl", "d1", "policy-a")])
    assert history.runs == 5
    assert [(t.task_id, t.label) for t in history.tasks] == [
        ("1", "stable"),
        ("2", "flaky"),
        ("3", "regressed"),
        ("4", "flaky"),
    ]
    assert history.new_flaky == ("2",)  # 4 was flaky already before the latest run
    assert history.new_failing == ("3",)
    lines = summary_lines([history])
    assert lines[0] == "history mcqa.jsonl: 5 runs, 1 regressed, 2 flaky, 1 stable; no drift"
    assert lines[1] == "  new flaky task 2: outcomes P P P F P over 5 runs, 2 changes, passed 4 of 5 rollouts"
    assert lines[2].startswith(
        "  newly regressed task 3: outcomes P P P P F over 5 runs, 1 change, failing since run 5"
    )
    report = summary_json([history])
    text = json.dumps(report, allow_nan=False)  # strict JSON: no infinity
    block = json.loads(text)["datasets"]["mcqa.jsonl"]
    assert block["tasks"]["4"]["sparkline"] == "PFPFP"
    assert block["tasks"]["4"]["runs"] == [1, 2, 3, 4, 5]
    assert [run["run"] for run in block["drift"]["runs"]] == [1, 2, 3, 4, 5]
    assert block["drift"]["alarm"] is False


def test_a_dataset_with_another_digest_or_model_has_no_series(tmp_path: Path) -> None:
    target = tmp_path / "history.db"
    _append(target, {"1": "PP"})
    with open_store(target) as store:
        assert summarize(store, [SeriesKey("mcqa.jsonl", "other", "policy-a")]) == []
        assert summarize(store, [SeriesKey("mcqa.jsonl", "d1", "policy-b")]) == []


@pytest.mark.parametrize("runs", [1, 2])
def test_one_task_gives_null_bounds_not_infinity(tmp_path: Path, runs: int) -> None:
    target = tmp_path / "history.db"
    _append(target, {"1": "P" * runs})
    with open_store(target) as store:
        report = summary_json(summarize(store, [SeriesKey("mcqa.jsonl", "d1", "policy-a")]))
    point = report["datasets"]["mcqa.jsonl"]["drift"]["runs"][0]
    assert (point["mean"], point["low"], point["high"]) == (1.0, None, None)
    json.dumps(report, allow_nan=False)
