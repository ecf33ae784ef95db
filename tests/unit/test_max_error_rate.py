"""The error-rate gate (``--gym-max-error-rate``): its statistic, its judgement in both modes and on a confidence
sequence, and what it does to the dataset's verdict and the session's exit status."""

from __future__ import annotations

import pytest

from pytest_gym_eval.reporting.summary import RolloutResult, summarize
from pytest_gym_eval.reporting.verdicts import session_verdict
from pytest_gym_eval.stats.gates import Gate, GateMode, Verdict, evaluate
from pytest_gym_eval.stats.intervals import wilson_interval
from pytest_gym_eval.stats.sequential import judge_waves

REWARDS, PASSED = [[1.0]] * 9, [[True]] * 9  # nine scored rollouts, and one that errored


def results(errors: int) -> list[RolloutResult]:
    """Ten rollouts of ten tasks, the last ``errors`` of which errored, the others passed."""
    return [
        RolloutResult(
            f"d.jsonl::t{i}[r0]",
            "d.jsonl",
            f"t{i}",
            0,
            "a",
            *(("error", None) if i >= 10 - errors else ("passed", 1.0)),
        )
        for i in range(10)
    ]


def test_the_statistic_is_the_wilson_interval_of_the_errored_share_of_rollouts() -> None:
    (result,) = evaluate([Gate("error_rate", 0.2)], REWARDS, PASSED, GateMode.POINT, rollouts=10, errors=1)
    assert result.interval == wilson_interval(1, 10)
    assert result.verdict is Verdict.PASS and result.describe() == "error rate 0.10 [0.02, 0.40] <= 0.20: PASS"
    (result,) = evaluate([Gate("error_rate", 0.05)], REWARDS, PASSED, GateMode.POINT, rollouts=10, errors=1)
    assert result.verdict is Verdict.FAIL and result.describe() == "error rate 0.10 [0.02, 0.40] > 0.05: FAIL"


@pytest.mark.parametrize(
    ("threshold", "verdict", "text"),
    [
        (0.5, Verdict.PASS, "upper bound 0.40 <= 0.50: PASS"),
        (0.2, Verdict.INCONCLUSIVE, "interval straddles 0.20: INCONCLUSIVE"),
        (0.01, Verdict.FAIL, "lower bound 0.02 > 0.01: FAIL"),
    ],
)
def test_bound_mode_judges_the_upper_bound(threshold: float, verdict: Verdict, text: str) -> None:
    mode = GateMode.LOWER_BOUND
    (result,) = evaluate([Gate("error_rate", threshold)], REWARDS, PASSED, mode, rollouts=10, errors=1)
    assert result.verdict is verdict and text in result.describe()


def test_a_threshold_outside_zero_one_is_refused() -> None:
    with pytest.raises(ValueError, match=r"error_rate threshold must lie in \[0, 1\]"):
        Gate("error_rate", 1.5)


def test_its_confidence_sequence_passes_a_dataset_with_no_error_once_the_upper_bound_is_low() -> None:
    rewards, passed = [[1.0] * 8 for _ in range(20)], [[True] * 8 for _ in range(20)]
    (decided,) = judge_waves([Gate("error_rate", 0.2)], rewards, passed, [2, 4, 8])
    assert decided.verdict is Verdict.PASS and decided.interval.high <= 0.2
    (early,) = judge_waves([Gate("error_rate", 0.2)], rewards[:2], passed[:2], [1])
    assert early.verdict is Verdict.INCONCLUSIVE  # two rollouts cannot show it


@pytest.mark.parametrize(("threshold", "status"), [(0.2, 0), (0.05, 1)])
def test_errors_judged_by_the_gate_do_not_fail_the_session_by_themselves(threshold: float, status: int) -> None:
    gates = {"d.jsonl": [Gate("error_rate", threshold), Gate("pass_rate", 0.8)]}
    (summary,) = summarize(results(1), thresholds={}, gates=gates, mode=GateMode.POINT, selected={"d.jsonl": {"a": 10}})
    _, passes = summary.gates
    assert passes.verdict is Verdict.PASS and not passes.note  # judged on the scored rollouts, not cut short
    assert summary.verdict is (Verdict.PASS if status == 0 else Verdict.FAIL)
    assert session_verdict([summary], inconclusive_passes=False)[0] == status


def test_without_the_gate_an_error_fails_the_session() -> None:
    (summary,) = summarize(results(1), thresholds={}, gates={"d.jsonl": [Gate("pass_rate", 0.8)]}, mode=GateMode.POINT)
    (passes,) = summary.gates
    assert passes.verdict is Verdict.INCONCLUSIVE and passes.note == "judged on 9 of 10 selected rollouts"
    assert summary.verdict is Verdict.FAIL
    status, reason = session_verdict([summary], inconclusive_passes=True)
    assert status == 1 and "1 rollout errored" in reason


def test_rollouts_that_never_reported_still_cut_the_gates_short() -> None:
    """The gate judges errors, not missing rollouts (-x, Ctrl-C): 10 selected, 9 reported, one of them errored."""
    gates = {"d.jsonl": [Gate("error_rate", 0.5)]}
    (summary,) = summarize(
        results(1)[1:], thresholds={}, gates=gates, mode=GateMode.POINT, selected={"d.jsonl": {"a": 10}}
    )
    (rate,) = summary.gates
    assert rate.verdict is Verdict.INCONCLUSIVE and rate.note == "judged on 9 of 10 selected rollouts"
    assert session_verdict([summary], inconclusive_passes=True)[0] == 1
