"""Stability labels, changes and pass-rate intervals against hand-worked series."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from pytest_gym_eval.history.stability import RunOutcome, assess, assess_series, task_outcomes
from pytest_gym_eval.history.store import RunRollouts, StoredRollout, StoredRun


def _outcomes(letters: str, repeats: int = 1) -> list[RunOutcome]:
    """``P`` all repeats passed, ``F`` none, ``M`` one of them (repeats >= 2)."""
    passed = {"P": repeats, "F": 0, "M": 1}
    return [RunOutcome(run_id, passed[letter], repeats) for run_id, letter in enumerate(letters, start=1)]


@pytest.mark.parametrize(
    ("letters", "label", "changes"),
    [
        ("PPPPP", "stable", 0),
        ("FFFFF", "stable", 0),
        ("P", "stable", 0),
        ("PFPFP", "flaky", 4),
        ("PPFPP", "flaky", 2),  # went and came back once
        ("PPPFF", "newly failing", 1),
        ("PPPPF", "newly failing", 1),
        ("FFPPP", "fixed", 1),
    ],
)
def test_labels_follow_the_changes_between_runs(letters: str, label: str, changes: int) -> None:
    result = assess("mcqa.jsonl", "7", _outcomes(letters))
    assert (result.label, result.changes, result.sparkline) == (label, changes, letters)


def test_repeats_that_disagree_within_a_run_make_a_task_flaky_without_any_change() -> None:
    result = assess("mcqa.jsonl", "7", _outcomes("MMM", repeats=2))
    assert (result.label, result.changes) == ("flaky", 0)
    assert "repeats disagreed in 3 runs" in result.evidence


def test_below_a_higher_flaky_threshold_the_last_change_decides() -> None:
    # P P F P P: 2 changes, under flaky_changes=3: labelled by its last change (fail -> pass), never "stable".
    result = assess("mcqa.jsonl", "7", _outcomes("PPFPP"), flaky_changes=3)
    assert (result.label, result.changes) == ("fixed", 2)
    assert "passing since run 4" in result.evidence
    assert assess("mcqa.jsonl", "7", _outcomes("PFPPF"), flaky_changes=4).label == "newly failing"


def test_evidence_and_wilson_interval_for_three_of_five() -> None:
    result = assess("mcqa.jsonl", "7", _outcomes("PFPFP"))
    # Wilson 95 % for 3/5 (z = 1.959964): centre 0.984146/1.768292 = 0.556549, half 0.576159/1.768292 = 0.325829
    assert result.pass_rate.estimate == pytest.approx(0.6)
    assert result.pass_rate.low == pytest.approx(0.23072, abs=1e-5)
    assert result.pass_rate.high == pytest.approx(0.88238, abs=1e-5)
    assert result.pass_rate.n == 5
    assert result.evidence == "outcomes P F P F P over 5 runs, 4 changes, passed 3 of 5 rollouts"


def test_newly_failing_names_the_run_it_started_failing_in() -> None:
    result = assess("mcqa.jsonl", "7", _outcomes("PPPFF"))
    assert "failing since run 4" in result.evidence
    fixed = assess("mcqa.jsonl", "7", _outcomes("FPP"))
    assert "passing since run 2" in fixed.evidence


def test_bad_input_is_refused() -> None:
    with pytest.raises(ValueError, match="no run"):
        assess("mcqa.jsonl", "7", [])
    with pytest.raises(ValueError, match="scored"):
        assess("mcqa.jsonl", "7", [RunOutcome(1, 0, 0)])
    with pytest.raises(ValueError, match="flaky_changes"):
        assess("mcqa.jsonl", "7", _outcomes("PP"), flaky_changes=1)


def _rollout(run_id: int, task: str, repeat: int, status: str) -> StoredRollout:
    reward = {"passed": 1.0, "failed": 0.0}.get(status)
    return StoredRollout(run_id, "mcqa.jsonl", task, repeat, "m", status, reward, {}, None, None, None)


def _run(run_id: int) -> StoredRun:
    moment = datetime(2026, 11, 30, 12, run_id, tzinfo=timezone.utc)
    return StoredRun(run_id, moment, "m", "0.7.0", {"mcqa.jsonl": "d1"}, None, {}, 0)


def test_errors_are_not_outcomes() -> None:
    rollouts = [_rollout(1, "1", 0, "error"), _rollout(1, "1", 1, "passed"), _rollout(1, "2", 0, "error")]
    assert task_outcomes(rollouts) == {"1": (1, 1)}


def test_a_series_of_five_runs_with_one_alternating_task() -> None:
    series = []
    for run_id in range(1, 6):
        alternating = "passed" if run_id % 2 else "failed"
        rollouts = [_rollout(run_id, "10", 0, "passed"), _rollout(run_id, "2", 0, alternating)]
        rollouts.append(_rollout(run_id, "3", 0, "error" if run_id == 3 else "passed"))
        series.append(RunRollouts(_run(run_id), rollouts))
    results = assess_series(series)
    assert [(r.task_id, r.label, r.sparkline) for r in results] == [
        ("2", "flaky", "PFPFP"),
        ("3", "stable", "PPPP"),  # run 3's error is no outcome
        ("10", "stable", "PPPPP"),
    ]
    assert [entry.run_id for entry in results[1].outcomes] == [1, 2, 4, 5]
