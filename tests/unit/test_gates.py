"""Tests of pytest_gym_eval.stats.gates: gate parsing, verdicts in both modes and evaluation of datasets."""

from __future__ import annotations

import math

import pytest

from pytest_gym_eval.stats.gates import (
    Gate,
    GateMode,
    GateResult,
    Verdict,
    evaluate,
    judge,
    parse_pass_at_k,
)
from pytest_gym_eval.stats.intervals import Interval

POINT, LOWER = GateMode.POINT, GateMode.LOWER_BOUND


def test_enum_values() -> None:
    assert [v.value for v in Verdict] == ["PASS", "FAIL", "INCONCLUSIVE"]
    assert GateMode("point") is POINT
    assert GateMode("lower-bound") is LOWER


# --- Gate ----------------------------------------------------------------------------------------------


def test_gate_labels() -> None:
    assert Gate("mean_reward", 0.7).label == "mean reward >= 0.70"
    assert Gate("pass_rate", 0.9).label == "pass rate >= 0.90"
    assert Gate("pass_at_k", 0.5, k=4).label == "pass@4 >= 0.50"
    assert Gate("mean_reward", 0.755).label == "mean reward >= 0.755"  # no silent rounding of the threshold
    assert Gate("mean_reward", 12.0).label == "mean reward >= 12.00"


@pytest.mark.parametrize(
    ("metric", "threshold", "k", "message"),
    [
        ("accuracy", 0.5, None, "unknown gate metric"),
        ("pass_at_k", 0.5, None, "k must be given"),
        ("mean_reward", 0.5, 2, "k must be given"),
        ("pass_at_k", 0.5, 0, "k must be an integer >= 1"),
        ("mean_reward", math.nan, None, "finite"),
        ("mean_reward", math.inf, None, "finite"),
        ("pass_rate", 1.5, None, r"\[0, 1\]"),
        ("pass_at_k", -0.1, 3, r"\[0, 1\]"),
    ],
)
def test_gate_validation(metric: str, threshold: float, k: int | None, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Gate(metric, threshold, k)


def test_mean_reward_threshold_may_leave_unit_interval() -> None:
    assert Gate("mean_reward", -2.5).threshold == -2.5


# --- parse_pass_at_k -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "k", "threshold"),
    [("4:0.5", 4, 0.5), ("1:1", 1, 1.0), (" 16 : 0.25 ", 16, 0.25), ("8:0", 8, 0.0), ("2:.9", 2, 0.9)],
)
def test_parse_pass_at_k(text: str, k: int, threshold: float) -> None:
    assert parse_pass_at_k(text) == Gate("pass_at_k", threshold, k=k)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "expected K:V"),
        ("4", "expected K:V"),
        ("0.5", "expected K:V"),
        ("4:", "expected K:V"),
        (":0.5", "expected K:V"),
        ("four:0.5", "expected K:V"),
        ("4.0:0.5", "expected K:V"),
        ("-1:0.5", "expected K:V"),
        ("4:0.5 extra", "expected K:V"),
        ("0:0.5", "K must be an integer >= 1"),
        ("4:half", "V must be a number"),
        ("4:0.5:1", "V must be a number"),
        ("4:1.5", r"V must lie in \[0, 1\]"),
        ("4:-0.1", r"V must lie in \[0, 1\]"),
        ("4:nan", r"V must lie in \[0, 1\]"),
    ],
)
def test_parse_pass_at_k_errors(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message) as caught:
        parse_pass_at_k(text)
    assert repr(text) in str(caught.value)  # the message quotes what the user typed


# --- judge ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("interval", "threshold", "expected"),
    [
        (Interval(0.80, 0.54, 1.00, 5), 0.70, Verdict.PASS),
        (Interval(0.70, 0.50, 0.90, 5), 0.70, Verdict.PASS),  # equality passes
        (Interval(0.69, 0.50, 0.90, 5), 0.70, Verdict.FAIL),
        (Interval(0.80, -math.inf, math.inf, 1), 0.70, Verdict.PASS),  # point mode ignores the bounds
        (Interval(math.nan, 0.0, 1.0, 0), 0.70, Verdict.INCONCLUSIVE),
    ],
)
def test_judge_point(interval: Interval, threshold: float, expected: Verdict) -> None:
    assert judge(interval, threshold, POINT) is expected


@pytest.mark.parametrize(
    ("interval", "threshold", "expected"),
    [
        (Interval(0.80, 0.74, 0.90, 30), 0.70, Verdict.PASS),
        (Interval(0.80, 0.70, 0.90, 30), 0.70, Verdict.PASS),  # low == threshold passes
        (Interval(0.50, 0.40, 0.60, 30), 0.70, Verdict.FAIL),
        (Interval(0.50, 0.40, 0.70, 30), 0.70, Verdict.INCONCLUSIVE),  # high == threshold: not below it
        (Interval(0.80, 0.54, 1.00, 5), 0.70, Verdict.INCONCLUSIVE),  # straddles, although estimate passes
        (Interval(0.60, 0.40, 0.75, 5), 0.70, Verdict.INCONCLUSIVE),  # straddles, although estimate fails
        (Interval(0.90, -math.inf, math.inf, 1), 0.70, Verdict.INCONCLUSIVE),
        (Interval(0.90, 0.90, 0.90, 4), 0.70, Verdict.PASS),  # zero width
        (Interval(0.50, 0.50, 0.50, 4), 0.70, Verdict.FAIL),
        (Interval(math.nan, 0.0, 1.0, 0), 0.0, Verdict.INCONCLUSIVE),  # no data, even if low >= threshold
    ],
)
def test_judge_lower_bound(interval: Interval, threshold: float, expected: Verdict) -> None:
    assert judge(interval, threshold, LOWER) is expected


def test_judge_rejects_nan_threshold() -> None:
    with pytest.raises(ValueError):
        judge(Interval(0.5, 0.4, 0.6, 3), math.nan, POINT)


# --- GateResult ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("verdict", "strict", "lenient"),
    [(Verdict.PASS, True, True), (Verdict.FAIL, False, False), (Verdict.INCONCLUSIVE, False, True)],
)
def test_gate_result_passed(verdict: Verdict, strict: bool, lenient: bool) -> None:
    result = GateResult(Gate("mean_reward", 0.7), Interval(0.8, 0.5, 1.0, 5), verdict, LOWER)
    assert result.passed(inconclusive_passes=False) is strict
    assert result.passed(inconclusive_passes=True) is lenient


@pytest.mark.parametrize(
    ("gate", "interval", "mode", "expected"),
    [
        (
            Gate("mean_reward", 0.7),
            Interval(0.8, 0.54, 1.0, 5),
            POINT,
            "mean reward 0.80 [0.54, 1.00] >= 0.70: PASS",
        ),
        (
            Gate("pass_rate", 0.9),
            Interval(0.85, 0.8, 0.9, 40),
            POINT,
            "pass rate 0.85 [0.80, 0.90] < 0.90: FAIL",
        ),
        (
            Gate("pass_at_k", 0.5, k=4),
            Interval(0.8, 0.62, 0.98, 12),
            LOWER,
            "pass@4 0.80 [0.62, 0.98]: lower bound 0.62 >= 0.50: PASS",
        ),
        (
            Gate("mean_reward", 0.7),
            Interval(0.5, 0.4, 0.6, 12),
            LOWER,
            "mean reward 0.50 [0.40, 0.60]: upper bound 0.60 < 0.70: FAIL",
        ),
        (
            Gate("mean_reward", 0.7),
            Interval(0.8, -math.inf, math.inf, 1),
            LOWER,
            "mean reward 0.80 [n/a, n/a]: interval straddles 0.70: INCONCLUSIVE",  # as the summary prints it
        ),
        (
            Gate("mean_reward", 0.1),
            Interval(0.0, -math.inf, math.inf, 1),
            POINT,
            "mean reward 0.00 [n/a, n/a] < 0.10: FAIL",
        ),
    ],
)
def test_describe(gate: Gate, interval: Interval, mode: GateMode, expected: str) -> None:
    result = GateResult(gate, interval, judge(interval, gate.threshold, mode), mode)
    assert result.describe() == expected


def test_describe_without_data() -> None:
    interval = Interval(math.nan, -math.inf, math.inf, 0)
    for mode in GateMode:
        text = GateResult(Gate("pass_at_k", 0.5, k=2), interval, judge(interval, 0.5, mode), mode).describe()
        assert text == "pass@2 n/a (no data), needs >= 0.50: INCONCLUSIVE"
        result = GateResult(Gate("pass_at_k", 0.5, k=2), interval, judge(interval, 0.5, mode), mode)
        assert not result.passed(inconclusive_passes=True)  # never judged: it cannot count as passing


# --- evaluate ------------------------------------------------------------------------------------------

# Four tasks of two rollouts; a rollout passes when its reward is 1.
REWARDS = [[1.0, 0.0], [1.0, 1.0], [0.0, 0.0], [1.0, 0.5]]
PASSED = [[r == 1.0 for r in task] for task in REWARDS]


def test_evaluate_uses_the_matching_statistic() -> None:
    gates = [Gate("mean_reward", 0.5), Gate("pass_rate", 0.5), Gate("pass_at_k", 0.5, k=2)]
    mean, rate, at2 = evaluate(gates, REWARDS, PASSED, POINT)
    assert [r.gate for r in (mean, rate, at2)] == gates
    # mean reward: 4.5 / 8 = 0.5625 over all rollouts, every reward in [0, 1]: the task-clustered Clopper-Pearson
    # interval. se^2 = 4/3 * (0.125^2 + 0.875^2 + 1.125^2 + 0.375^2) / 64 = 0.0455729 (the t interval's, see
    # test_stats); n_eff = 0.5625 * 0.4375 / 0.0455729 = 5.4; n* = 5.4 (1.959964 / 3.182446)^2 = 5.4 * 0.379292
    # = 2.048178; x = 0.5625 n* = 1.152100; bounds B(0.025; x, n* - x + 1), B(0.975; x + 1, n* - x) (scipy's
    # beta.ppf: 0.0222340, 0.9925612)
    assert mean.interval.estimate == 0.5625 and mean.interval.n == 4
    assert mean.interval.low == pytest.approx(0.0222340, abs=1e-6)
    assert mean.interval.high == pytest.approx(0.9925612, abs=1e-6)
    # pass rate: 4 passes of 8 rollouts, Clopper-Pearson over the rollouts: B(0.025; 4, 5), B(0.975; 5, 4)
    # (statsmodels' proportion_confint(4, 8, method="beta"): 0.1570128, 0.8429872)
    assert rate.interval.estimate == 0.5 and rate.interval.n == 8
    assert rate.interval.low == pytest.approx(0.1570128, abs=1e-6)
    assert rate.interval.high == pytest.approx(0.8429872, abs=1e-6)
    # pass@2 per task (n=2): c=1 -> 1, c=2 -> 1, c=0 -> 0, c=1 -> 1; mean 0.75
    assert at2.interval.estimate == 0.75 and at2.interval.n == 4
    assert all(r.verdict is Verdict.PASS for r in (mean, rate, at2))
    assert all(r.mode is POINT for r in (mean, rate, at2))


def test_evaluate_modes_differ() -> None:
    gate = Gate("mean_reward", 0.5)
    # point: 0.5625 >= 0.5 passes; lower bound 0.022 < 0.5 < upper bound 0.993: inconclusive
    assert evaluate([gate], REWARDS, PASSED, POINT)[0].verdict is Verdict.PASS
    assert evaluate([gate], REWARDS, PASSED, LOWER)[0].verdict is Verdict.INCONCLUSIVE
    # a gate far above every reward fails in both modes: upper bound 0.993 < 1.5
    high = Gate("mean_reward", 1.5)
    assert evaluate([high], REWARDS, PASSED, LOWER)[0].verdict is Verdict.FAIL


def test_evaluate_confidence_is_passed_through() -> None:
    gates = [Gate("mean_reward", 0.2), Gate("pass_rate", 0.2), Gate("pass_at_k", 0.2, k=1)]
    # 12 tasks, so that no interval reaches 0 or 1 and gets clipped
    rewards, passed = REWARDS * 3, PASSED * 3
    wide = evaluate(gates, rewards, passed, LOWER, confidence=0.99)
    default = evaluate(gates, rewards, passed, LOWER)
    narrow = evaluate(gates, rewards, passed, LOWER, confidence=0.80)
    for w, d, n in zip(wide, default, narrow, strict=True):
        assert w.interval.low < d.interval.low < n.interval.low < n.interval.high < d.interval.high
        assert d.interval.high < w.interval.high


def test_evaluate_pass_at_k_without_enough_rollouts_is_inconclusive() -> None:
    result = evaluate([Gate("pass_at_k", 0.1, k=4)], REWARDS, PASSED, POINT)[0]
    assert result.interval.n == 0
    assert result.verdict is Verdict.INCONCLUSIVE


def test_a_pass_at_k_gate_on_tasks_that_all_pass_is_bounded_by_the_blocks_of_k() -> None:
    # 12 tasks x 8 repeats, every rollout passing: every pass@4 is 1. The t interval was [1, 1] and PASSED a gate
    # at 0.95 (or any threshold); the 24 disjoint blocks of 4 bound it at 0.025^(1/19.03) = 0.8238 (test_stats).
    rewards, passed = [[1.0] * 8 for _ in range(12)], [[True] * 8 for _ in range(12)]
    (result,) = evaluate([Gate("pass_at_k", 0.95, k=4)], rewards, passed, GateMode.LOWER_BOUND)
    assert result.verdict is Verdict.INCONCLUSIVE
    assert result.interval.low == pytest.approx(0.8237978, abs=1e-6)
    # its p-value (what Holm judges) inverts the same interval: the two-sided p at 0.8237978 is 0.05
    assert result.basis is not None
    assert result.basis.p_value(0.8237978) == pytest.approx(0.05, abs=1e-5)


def test_evaluate_without_gates_or_data() -> None:
    assert evaluate([], REWARDS, PASSED, POINT) == []
    results = evaluate([Gate("mean_reward", 0.5), Gate("pass_rate", 0.5)], [], [], LOWER)
    assert [r.verdict for r in results] == [Verdict.INCONCLUSIVE, Verdict.INCONCLUSIVE]


@pytest.mark.parametrize(
    "passed",
    [[[True, False]] * 3, [[True, False], [True], [False, False], [True, True]]],
)
def test_evaluate_rejects_mismatched_shapes(passed: list[list[bool]]) -> None:
    with pytest.raises(ValueError, match="same tasks and rollouts"):
        evaluate([Gate("mean_reward", 0.5)], REWARDS, passed, POINT)


def test_a_gate_judged_on_part_of_the_selected_rollouts_is_at_best_inconclusive() -> None:
    from pytest_gym_eval.stats.gates import incomplete

    interval = Interval(0.9, 0.8, 1.0, 3)
    passing = GateResult(Gate("mean_reward", 0.5), interval, Verdict.PASS, GateMode.POINT)
    failing = GateResult(Gate("mean_reward", 0.95), interval, Verdict.FAIL, GateMode.POINT)
    assert incomplete([passing, failing], reported=4, selected=4) == [passing, failing]
    cut = incomplete([passing, failing], reported=3, selected=10)
    assert [r.verdict for r in cut] == [Verdict.INCONCLUSIVE, Verdict.FAIL]
    assert all(r.note == "judged on 3 of 10 selected rollouts" for r in cut)
    assert (
        cut[0].describe() == "mean reward 0.90 [0.80, 1.00] >= 0.50: INCONCLUSIVE (judged on 3 of 10 selected rollouts)"
    )


def test_gates_near_one_keep_their_level() -> None:
    """Issue 38: near 1 the t interval's lower bound sat too high (a wrong PASS at the threshold) and Wilson's upper
    bound too low (a wrong FAIL); the mean reward's task-clustered Clopper-Pearson and the pass rate's Clopper-Pearson
    reach far enough."""
    ones = [[1.0] * 4 for _ in range(12)]
    passed = [[True] * 4 for _ in range(12)]
    # 48 rollouts that all pass: the t interval was [1, 1] and PASSED any threshold; now the lower bound is 0.9076.
    (certain,) = evaluate([Gate("mean_reward", 0.95)], ones, passed, LOWER)
    assert certain.verdict is Verdict.INCONCLUSIVE and certain.interval.low == pytest.approx(0.907633, abs=1e-6)
    # one failure in 48: the t interval's lower bound 0.933 PASSED a gate at 0.9; the clustered one reaches 0.869.
    rewards = [[0.0 if (t, r) == (3, 0) else 1.0 for r in range(4)] for t in range(12)]
    flags = [[x == 1.0 for x in task] for task in rewards]
    (mean,) = evaluate([Gate("mean_reward", 0.9)], rewards, flags, LOWER)
    assert mean.verdict is Verdict.INCONCLUSIVE and mean.interval.low == pytest.approx(0.868983, abs=1e-6)
    # 39 of 48 passing against 0.9: Wilson's upper bound 0.8981 FAILED it; Clopper-Pearson's reaches 0.9105.
    flags = [[t * 4 + r < 39 for r in range(4)] for t in range(12)]
    (rate,) = evaluate([Gate("pass_rate", 0.9)], [[float(f) for f in task] for task in flags], flags, LOWER)
    assert rate.verdict is Verdict.INCONCLUSIVE and rate.interval.high == pytest.approx(0.910502, abs=1e-6)
