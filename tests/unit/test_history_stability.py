"""Stability labels, changes and pass-rate intervals against hand-worked series."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from pytest_gym_eval.history.stability import (
    RunOutcome,
    assess,
    assess_series,
    repeats_are_independent,
    task_outcomes,
)
from pytest_gym_eval.history.store import RunRollouts, StoredRollout, StoredRun
from pytest_gym_eval.stats.exact_tests import fisher_exact_less


def _outcomes(letters: str, repeats: int = 1) -> list[RunOutcome]:
    """``P`` all repeats passed, ``F`` none, ``M`` one of them (repeats >= 2)."""
    passed = {"P": repeats, "F": 0, "M": 1}
    return [RunOutcome(run_id, passed[letter], repeats) for run_id, letter in enumerate(letters, start=1)]


@pytest.mark.parametrize(
    ("letters", "label", "changes"),
    [
        ("PPPPP", "stable", 0),
        ("FFFFF", "broken", 0),  # always failing: not folded away with the stable ones
        ("P", "stable", 0),
        ("PFPFP", "flaky", 4),
        ("PPFPP", "flaky", 2),  # went and came back once
        ("PPPFF", "regressed", 1),  # deterministic, then failing: news at once
        ("PPPPF", "regressed", 1),
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


def test_a_stochastic_task_whose_pass_rate_fell_is_regressed_not_flaky() -> None:
    # 4 repeats a run, never deterministic: 3-4 of 4 for six runs, then 0-1 of 4 for four. The best split (after
    # run 6): 21/24 before, 2/16 after; one-sided Fisher p = P(X <= 2), X ~ Hypergeometric(40 trials, 23 passes, 16
    # drawn) = (C(17,16) + 23 C(17,15) + C(23,2) C(17,14)) / C(40,16) = (17 + 3128 + 172040) / 62852101650
    # = 2.787e-6; x9 splits = 2.5e-5 <= 0.05.
    passed = [4, 3, 4, 3, 4, 3, 1, 0, 1, 0]
    result = assess("mcqa.jsonl", "7", [RunOutcome(run, p, 4) for run, p in enumerate(passed, 1)])
    assert result.label == "regressed"
    assert "pass rate fell from 21/24 to 2/16 after run 6 (one-sided Fisher p 2.8e-06, x9 splits: 2.5e-05)" in (
        result.evidence
    )
    rising = assess("mcqa.jsonl", "7", [RunOutcome(run, 4 - p, 4) for run, p in enumerate(passed, 1)])
    assert rising.label == "fixed" and "pass rate rose from 3/24 to 14/16 after run 6" in rising.evidence
    # The same rollouts in no order: a steady 58 % task, flaky.
    steady = assess(
        "mcqa.jsonl", "7", [RunOutcome(run, p, 4) for run, p in enumerate([4, 0, 3, 1, 4, 0, 3, 1, 3, 4], 1)]
    )
    assert steady.label == "flaky" and "no significant change" in steady.evidence


def test_repeats_that_always_agree_count_once_a_run() -> None:
    # Replayed or greedy: two repeats that always agree are one trial a run; the interval is that of 3 of 5.
    outcomes = _outcomes("PFPFP", repeats=2)
    copies = assess("mcqa.jsonl", "7", outcomes, repeats_independent=False)
    assert copies.pass_rate.n == 5 and copies.pass_rate.low == pytest.approx(0.23072, abs=1e-5)
    assert copies.evidence.endswith("passed 3 of 5 runs (its repeats agree: copies, one trial a run)")
    assert assess("mcqa.jsonl", "7", outcomes).pass_rate.n == 10  # counted as independent: narrower


def test_evidence_and_wilson_interval_for_three_of_five() -> None:
    result = assess("mcqa.jsonl", "7", _outcomes("PFPFP"))
    # Wilson 95 % for 3/5 (z = 1.959964): centre 0.984146/1.768292 = 0.556549, half 0.576159/1.768292 = 0.325829
    assert result.pass_rate.estimate == pytest.approx(0.6)
    assert result.pass_rate.low == pytest.approx(0.23072, abs=1e-5)
    assert result.pass_rate.high == pytest.approx(0.88238, abs=1e-5)
    assert result.pass_rate.n == 5
    assert result.evidence == "outcomes P F P F P over 5 runs, 4 changes, passed 3 of 5 rollouts"
    # (the change test's smallest adjusted p here is 1: nothing to say about it)


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
    with pytest.raises(ValueError, match="alpha"):
        assess("mcqa.jsonl", "7", _outcomes("PP"), alpha=0.0)


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


def test_a_dataset_whose_repeats_never_disagree_counts_runs() -> None:
    assert repeats_are_independent([_outcomes("PFP", repeats=2), _outcomes("MPP", repeats=2)])
    assert not repeats_are_independent([_outcomes("PFP", repeats=2), _outcomes("PPP", repeats=2)])
    assert repeats_are_independent([_outcomes("PFP")])  # one repeat a run: nothing to tell
    series = []
    for run_id in range(1, 6):
        status = "passed" if run_id % 2 else "failed"
        rollouts = [_rollout(run_id, "1", 0, status), _rollout(run_id, "1", 1, status)]
        series.append(RunRollouts(_run(run_id), rollouts))
    (result,) = assess_series(series)
    assert result.pass_rate.n == 5


def test_fisher_exact_less_by_hand() -> None:
    # 4 of 4 before, 0 of 3 after: P(X <= 0) with X ~ Hypergeometric(7, 4, 3) = C(3,3) / C(7,3) = 1/35.
    assert fisher_exact_less((4, 4), (0, 3)) == pytest.approx(1 / 35)
    # 3 of 5 both sides: 1 - (C(6,4) C(4,1) + C(6,5)) / C(10,5) = 1 - 66/252.
    assert fisher_exact_less((3, 5), (3, 5)) == pytest.approx(1 - 66 / 252)
    assert fisher_exact_less((0, 3), (3, 3)) == 1.0
    with pytest.raises(ValueError, match="passed <= trials"):
        fisher_exact_less((4, 3), (0, 1))
