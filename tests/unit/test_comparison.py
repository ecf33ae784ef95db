"""The paired A/B comparison (pytest_gym_eval.stats.comparison) against hand-worked values."""

from __future__ import annotations

import math
import random

import pytest

from pytest_gym_eval.stats.comparison import (
    ComparisonGate,
    ComparisonResult,
    Hypothesis,
    Key,
    PairedSequence,
    compare,
    decided,
    flip_decomposition,
    gym_verdict,
    judge_comparison,
    margin_problem,
    no_spread_interval,
    paired_mean_difference,
    reason,
    simulate,
    task_passes,
)
from pytest_gym_eval.stats.exact_tests import mcnemar_exact
from pytest_gym_eval.stats.gates import Verdict
from pytest_gym_eval.stats.intervals import Interval, clustered_proportion_interval
from pytest_gym_eval.stats.paired_interval import gain_loss_interval
from pytest_gym_eval.stats.sequential import BettingSequence, RewardRange

ALPHA = 0.05
NON_INFERIOR = ComparisonGate(Hypothesis.NON_INFERIORITY, 0.1)
SUPERIOR = ComparisonGate(Hypothesis.SUPERIORITY)
LOOSE = ComparisonGate(Hypothesis.NON_INFERIORITY, 0.4)


def rewards(by_task: dict[str, list[float]]) -> dict[Key, float]:
    """``{task: [reward of repeat 0, 1, ...]}`` as the comparison's input, keyed by (task id, repeat)."""
    return {(task, repeat): reward for task, values in by_task.items() for repeat, reward in enumerate(values)}


# --- the paired difference -----------------------------------------------------------------------------------

BASE = rewards({"a": [1.0, 0.0], "b": [1.0, 1.0], "c": [0.0, 0.0]})
CAND = rewards({"a": [1.0, 1.0], "b": [1.0, 0.0], "c": [1.0, 1.0]})
# d = candidate - baseline per pair: a [0, 1], b [0, -1], c [1, 1]; N = 6 pairs, T = 3 tasks
# mean d = (1 - 1 + 2) / 6 = 1/3 = 5/6 (candidate) - 3/6 (baseline)
# per-task mean differences 1/2, -1/2, 1: deviations from 1/3 are 1/6, -5/6, 2/3, squares 1/36 + 25/36 + 16/36 = 7/6,
# s^2 = 7/12, se = sqrt(7/12 / 3) = sqrt(7) / 6 = 0.4409586
# (CR1 by task: deviation sums 1/3, -5/3, 4/3, squares 42/9; 3/2 * 42/9 / 36 = 7/36: the same se)
SE = math.sqrt(7) / 6


def shifted(by_key: dict[Key, float]) -> dict[Key, float]:
    """The same rollouts on a 1-2 scale: every difference as before, but rewards outside [0, 1] get the t interval."""
    return {key: reward + 1.0 for key, reward in by_key.items()}


def test_paired_difference_of_rewards_outside_the_unit_range_by_hand_at_50_percent() -> None:
    # df 2: F(x) = 1/2 + x / (2 sqrt(2 + x^2)) = 0.75 gives x^2 = 2/3, t = 0.8164966
    # half = sqrt(2/3) * sqrt(7) / 6 = 0.3600411: [1/3 - 0.3600411, 1/3 + 0.3600411] = [-0.0267078, 0.6933744]
    result = paired_mean_difference(shifted(BASE), shifted(CAND), confidence=0.5)
    half = math.sqrt(2 / 3) * SE
    assert result.interval.estimate == pytest.approx(1 / 3)
    assert (result.interval.low, result.interval.high) == pytest.approx((-0.0267078, 0.6933744), abs=1e-6)
    assert (result.interval.low, result.interval.high) == pytest.approx((1 / 3 - half, 1 / 3 + half))
    assert (result.interval.n, result.pairs, result.confidence) == (3, 6, 0.5)
    assert (result.baseline_mean, result.candidate_mean) == pytest.approx((1.5, 11 / 6))


def test_paired_difference_of_rewards_in_the_unit_range_is_mover_on_gains_and_losses() -> None:
    # the same differences a [0, 1], b [0, -1], c [1, 1] from rewards in [0, 1]: gains a [0, 1], b [0, 0], c [1, 1]
    # (mean 1/2), losses a [0, 0], b [0, 1], c [0, 0] (mean 1/6); per-task mean gain 1/2, 0, 1 and loss 0, 1/2, 0:
    # deviations (0, -1/2, 1/2) and (-1/6, 1/3, -1/6), r = (-1/6 - 1/12) / sqrt(1/2 * 1/6) = -0.8660254
    result = paired_mean_difference(BASE, CAND, confidence=0.5)
    gain = clustered_proportion_interval([[0.0, 1.0], [0.0, 0.0], [1.0, 1.0]], 0.5)
    loss = clustered_proportion_interval([[0.0, 0.0], [0.0, 1.0], [0.0, 0.0]], 0.5)
    r = -math.sqrt(3) / 2
    a, b = 0.5 - gain.low, loss.high - 1 / 6
    low = 1 / 3 - math.sqrt(a * a + b * b - 2 * r * a * b)
    a, b = gain.high - 0.5, 1 / 6 - loss.low
    high = 1 / 3 + math.sqrt(a * a + b * b - 2 * r * a * b)
    assert result.interval == Interval(pytest.approx(1 / 3), pytest.approx(low), pytest.approx(high), 3)
    assert result.interval == gain_loss_interval([[0.0, 1.0], [0.0, -1.0], [1.0, 1.0]], 0.5)
    assert (result.baseline_mean, result.candidate_mean) == pytest.approx((0.5, 5 / 6))
    # a rare one-sided drop (every pair 0 or -1): the lower bound is the single-policy bound of the losses
    by_task = {f"t{i}": [0.0, 1.0, 1.0, 1.0] for i in range(3)} | {"t3": [0.0, 0.0, 1.0, 1.0]}
    by_task |= {f"t{i}": [1.0] * 4 for i in range(4, 10)}
    drop = paired_mean_difference(rewards({t: [1.0] * 4 for t in by_task}), rewards(by_task)).interval
    assert drop.estimate == pytest.approx(-0.125)  # 5 of 40 pairs lost: 35 of 40 passing, [0.6877, 0.9708] alone
    assert drop.low == pytest.approx(clustered_proportion_interval(list(by_task.values())).low - 1.0)
    assert (drop.low, drop.high) == pytest.approx((-0.3123040, 0.0251274), abs=1e-6)
    # the price: no gain at all leaves the gains' interval that of 0 in N pairs (up to 0.39 in 10), however small
    # the losses; 0.02 or 0.04 lost on every one of 10 tasks: [-0.0385, 0.3583] (the t interval: [-0.0375, -0.0225])
    lower = rewards({f"t{i}": [0.98 - 0.02 * (i % 2)] for i in range(10)})
    slight = paired_mean_difference(rewards({f"t{i}": [1.0] for i in range(10)}), lower).interval
    assert (slight.low, slight.high) == pytest.approx((-0.0385304, 0.3583014), abs=1e-6)


def test_paired_difference_at_95_percent_is_clipped_to_the_range_of_a_difference() -> None:
    # df 2: x / sqrt(2 + x^2) = 0.95 gives x^2 = 1.805 / 0.0975, t = 4.3026527; half = 4.3026527 * 0.4409586 = 1.897292
    # [1/3 - 1.897292, 1/3 + 1.897292] = [-1.563959, 2.230625] for the t interval on a 1-2 scale; the bounds of rewards
    # in [0, 1] never leave [-1, 1], where a difference of two such means lives
    t = math.sqrt(1.805 / 0.0975)
    assert t == pytest.approx(4.3026527, abs=1e-6)
    unclipped = paired_mean_difference(shifted(BASE), shifted(CAND)).interval
    assert (unclipped.low, unclipped.high) == pytest.approx((-1.563959, 2.230625), abs=1e-5)
    clipped = paired_mean_difference(BASE, CAND).interval
    assert -1.0 <= clipped.low < clipped.high <= 1.0
    # the same rollouts on a 0-2 scale double every difference and are not clipped
    doubled = paired_mean_difference({k: 2 * v for k, v in BASE.items()}, {k: 2 * v for k, v in CAND.items()}).interval
    assert doubled.estimate == pytest.approx(2 / 3)
    assert (doubled.low, doubled.high) == pytest.approx((2 / 3 - 2 * t * SE, 2 / 3 + 2 * t * SE))
    assert doubled.low == pytest.approx(2 * -1.563959, abs=1e-5)


def test_only_pairs_count_and_the_mean_weighs_rollouts() -> None:
    # task a: 1 pair, d = [1]; task b: 3 pairs, d = [0, 0, 0]; the unpaired rollouts (a, 1), (b, 3) and task z are out
    base = {("a", 0): 0.0, ("a", 1): 1.0, ("b", 0): 1.0, ("b", 1): 0.0, ("b", 2): 1.0, ("b", 3): 0.0}
    cand = {("a", 0): 1.0, ("b", 0): 1.0, ("b", 1): 0.0, ("b", 2): 1.0, ("z", 0): 1.0}
    # N = 4, mean d = 1/4 (per rollout, like the mean reward; the mean of the per-task means would be 1/2)
    # CR1: deviation sums a: 1 - 1/4 = 3/4, b: 3 * (0 - 1/4) = -3/4; 2/1 * (9/16 + 9/16) / 16 = 9/64, se = 3/8
    # df 1 (Cauchy): t_0.75 = tan(pi/4) = 1, so at 50%: 1/4 -+ 3/8 = [-1/8, 5/8]
    result = paired_mean_difference(shifted(base), shifted(cand), confidence=0.5)
    assert (result.pairs, result.interval.n) == (4, 2)
    assert result.interval.estimate == pytest.approx(0.25)
    assert (result.interval.low, result.interval.high) == pytest.approx((-0.125, 0.625))
    assert (result.baseline_mean, result.candidate_mean) == pytest.approx((1.5, 1.75))
    assert paired_mean_difference(base, cand, confidence=0.5).interval.estimate == pytest.approx(0.25)


def test_paired_difference_edges() -> None:
    none = paired_mean_difference({("a", 0): 1.0}, {("a", 1): 1.0})  # no (task, repeat) on both sides
    assert none.pairs == 0 and math.isnan(none.interval.estimate) and math.isnan(none.baseline_mean)
    assert (none.interval.low, none.interval.high, none.interval.n) == (-math.inf, math.inf, 0)
    one = paired_mean_difference(rewards({"a": [0.0, 1.0]}), rewards({"a": [1.0, 1.0]}))  # one task: no spread
    assert one.interval == Interval(0.5, -math.inf, math.inf, 1)
    with pytest.raises(ValueError, match="finite"):
        paired_mean_difference({("a", 0): math.nan}, {("a", 0): 1.0})
    with pytest.raises(ValueError, match="confidence"):
        paired_mean_difference(BASE, CAND, confidence=1.0)


def test_no_spread_between_tasks_gives_no_zero_width_interval() -> None:
    """Every task's mean difference equal: the t interval would be [d, d], a "certain" verdict. Instead q = 1 -
    0.025^(1/T) of the tasks may differ by up to the range unseen: [d - q (d + w), d + q (w - d)], w = 1."""
    q3, q2 = 1 - 0.025 ** (1 / 3), 1 - 0.025 ** (1 / 2)
    assert (q3, q2) == pytest.approx((0.7075982, 0.8418861))
    # 3 tasks x 2 repeats, every pair disagrees (+1 then -1): each task's mean difference is 0
    base, cand = rewards({t: [1.0, 0.0] for t in "abc"}), rewards({t: [0.0, 1.0] for t in "abc"})
    disagreeing = paired_mean_difference(base, cand).interval
    assert (disagreeing.estimate, disagreeing.n) == (0.0, 3)
    assert (disagreeing.low, disagreeing.high) == pytest.approx((-q3, q3))
    gates = [ComparisonGate(Hypothesis.NON_INFERIORITY, 0.1), ComparisonGate(Hypothesis.SUPERIORITY, 0.0)]
    assert [r.verdict for r in compare(base, cand, gates).results] == [Verdict.INCONCLUSIVE] * 2
    same = paired_mean_difference(BASE, BASE).interval  # two identical models
    assert (same.low, same.high) == pytest.approx((-q3, q3))
    shifted = paired_mean_difference(rewards({"a": [0.5, 0.25], "b": [0.0]}), rewards({"a": [0.75, 0.5], "b": [0.25]}))
    assert shifted.interval.estimate == 0.25  # every difference 0.25: [0.25 - 1.25 q, 0.25 + 0.75 q]
    assert (shifted.interval.low, shifted.interval.high) == pytest.approx((0.25 - 1.25 * q2, 0.25 + 0.75 * q2))
    # differences vary within a task but every task's mean difference is 0: no spread between tasks
    cancelling = paired_mean_difference(rewards({"a": [0.0, 1.0], "b": [1.0]}), rewards({"a": [1.0, 0.0], "b": [1.0]}))
    assert (cancelling.interval.low, cancelling.interval.high) == pytest.approx((-q2, q2))
    # 100 equal tasks: q = 1 - 0.025^(1/100) = 0.0362167, narrow but not zero
    hundred = paired_mean_difference(
        rewards({f"t{i}": [1.0] for i in range(100)}), rewards({f"t{i}": [1.0] for i in range(100)})
    )
    assert hundred.interval.high == pytest.approx(0.0362167, abs=1e-7)
    # rewards outside [0, 1]: w is the span of the rewards seen (here 2), none at all leaves the bounds open
    wide = paired_mean_difference(rewards({"a": [3.0], "b": [1.0]}), rewards({"a": [3.0], "b": [1.0]})).interval
    assert (wide.low, wide.high) == pytest.approx((-2 * q2, 2 * q2))
    flat = paired_mean_difference(rewards({"a": [3.0], "b": [3.0]}), rewards({"a": [3.0], "b": [3.0]})).interval
    assert (flat.estimate, flat.low, flat.high) == (0.0, -math.inf, math.inf)
    assert no_spread_interval(0.0, 3, 1.0) == Interval(0.0, pytest.approx(-q3), pytest.approx(q3), 3)
    with pytest.raises(ValueError, match="tasks"):
        no_spread_interval(0.0, 0, 1.0)


# --- flips and McNemar -------------------------------------------------------------------------------------------


def test_flip_decomposition_by_hand() -> None:
    base = rewards(
        {
            "t1": [1.0, 1.0],  # baseline passes, candidate 1 of 2 (mean 0.5, not above 0.5): lost
            "t2": [1.0, 1.0],  # both pass
            "t3": [0.0, 0.0],  # candidate gained it
            "t4": [0.0, 1.0, 1.0],  # the third repeat has no candidate pair: baseline 0.5 over the pairs, neither
            "t5": [1.0, 1.0],
            "t6": [1.0, 0.0, 1.0],  # 2 of 3 pass: passes
            "t7": [1.0, 1.0],
        }
    )
    cand = rewards(
        {
            "t1": [1.0, 0.0],
            "t2": [1.0, 1.0],
            "t3": [1.0, 1.0],
            "t4": [0.0, 0.0],
            "t5": [0.0, 0.0],
            "t6": [0.0, 0.0, 1.0],
            "t7": [0.0, 0.0],
            "t8": [1.0],  # no baseline: not a task of the comparison
        }
    )
    flips = flip_decomposition(base, cand)
    assert flips.both == ("t2",)
    assert flips.only_baseline == ("t1", "t5", "t6", "t7")
    assert flips.only_candidate == ("t3",)
    assert flips.neither == ("t4",)
    assert flips.tasks == 7 and flips.binary
    # 4 lost, 1 gained: n = 5 discordant tasks, P(X <= 1) = (1 + 5) / 32, p = 2 * 6 / 32 = 0.375
    assert flips.p_value == pytest.approx(0.375, rel=1e-12)
    assert flips.p_value == mcnemar_exact(4, 1)


def test_a_task_passes_above_one_half() -> None:
    assert task_passes([0.6]) and task_passes([1.0, 0.0, 1.0])
    assert not task_passes([0.5]) and not task_passes([1.0, 0.0])
    with pytest.raises(ValueError):
        task_passes([])
    fractional = flip_decomposition(rewards({"a": [0.6], "b": [0.4]}), rewards({"a": [0.4], "b": [0.4]}))
    assert fractional.only_baseline == ("a",) and fractional.neither == ("b",) and not fractional.binary
    assert fractional.p_value == 1.0  # one discordant task: 2 * P(X <= 0) = 2 * 1/2
    empty = flip_decomposition({}, {})
    assert empty.tasks == 0 and empty.p_value == 1.0


# --- verdicts --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("low", "high", "non_inferiority", "superiority"),
    [
        (-0.05, 0.10, Verdict.PASS, Verdict.INCONCLUSIVE),
        (-0.30, -0.15, Verdict.FAIL, Verdict.FAIL),
        (-0.20, 0.05, Verdict.INCONCLUSIVE, Verdict.INCONCLUSIVE),
        (-0.10, 0.00, Verdict.PASS, Verdict.FAIL),  # lower bound at -delta: the claim allows it; not better than 0
        (0.00, 0.00, Verdict.PASS, Verdict.FAIL),  # two identical models
        (0.00, 0.10, Verdict.PASS, Verdict.INCONCLUSIVE),  # superiority needs the lower bound above 0
        (0.01, 0.20, Verdict.PASS, Verdict.PASS),
        (-math.inf, math.inf, Verdict.INCONCLUSIVE, Verdict.INCONCLUSIVE),  # one task
        (0.10, -0.10, Verdict.INCONCLUSIVE, Verdict.INCONCLUSIVE),  # an empty sequence
    ],
)
def test_verdicts_against_the_margin(low: float, high: float, non_inferiority: Verdict, superiority: Verdict) -> None:
    interval = Interval(0.0, low, high, 5)
    assert judge_comparison(interval, NON_INFERIOR) is non_inferiority
    assert judge_comparison(interval, SUPERIOR) is superiority


def test_no_data_is_inconclusive_and_margins_are_checked() -> None:
    nothing = Interval(math.nan, -math.inf, math.inf, 0)
    assert judge_comparison(nothing, NON_INFERIOR) is Verdict.INCONCLUSIVE
    assert judge_comparison(nothing, SUPERIOR) is Verdict.INCONCLUSIVE
    for bad in (-0.1, math.nan, math.inf):
        with pytest.raises(ValueError, match="margin"):
            ComparisonGate(Hypothesis.NON_INFERIORITY, bad)
    assert NON_INFERIOR.threshold == -0.1 and ComparisonGate(Hypothesis.SUPERIORITY, 0.05).threshold == 0.05
    assert NON_INFERIOR.label == "non-inferiority: candidate - baseline >= -0.10"
    assert SUPERIOR.label == "superiority: candidate - baseline > 0.00"


def test_results_in_gyms_words_and_in_one_line() -> None:
    def result(gate: ComparisonGate, low: float, high: float) -> ComparisonResult:
        interval = Interval((low + high) / 2, low, high, 10)
        return ComparisonResult(gate, interval, judge_comparison(interval, gate))

    warned = result(NON_INFERIOR, -0.08, -0.02)  # a real drop (the interval excludes 0), but within delta
    assert warned.verdict is Verdict.PASS and gym_verdict(warned) == "WARN"
    assert warned.describe() == (
        "non-inferiority: candidate - baseline -0.05 [-0.08, -0.02], lower bound -0.08 >= -0.10: PASS"
    )
    assert gym_verdict(result(NON_INFERIOR, -0.05, 0.1)) == "PASS"
    failed = result(NON_INFERIOR, -0.3, -0.15)
    assert gym_verdict(failed) == "FAIL"
    assert failed.describe().endswith("upper bound -0.15 < -0.10: FAIL")
    assert gym_verdict(result(NON_INFERIOR, -0.2, 0.05)) == "INCONCLUSIVE"
    assert gym_verdict(result(SUPERIOR, 0.02, 0.2)) == "PASS"
    assert result(SUPERIOR, -0.1, 0.1).describe().endswith("interval straddles 0.00: INCONCLUSIVE")
    empty = ComparisonResult(SUPERIOR, Interval(math.nan, -math.inf, math.inf, 0), Verdict.INCONCLUSIVE)
    assert empty.describe() == "superiority: candidate - baseline n/a (no paired rollouts): INCONCLUSIVE"


def test_compare_puts_the_pieces_together() -> None:
    comparison = compare(BASE, CAND, [LOOSE, SUPERIOR], confidence=0.5)
    assert comparison.difference == paired_mean_difference(BASE, CAND, 0.5)
    assert comparison.flips == flip_decomposition(BASE, CAND)
    # a: baseline [1, 0] (mean 0.5 does not pass), candidate [1, 1]: gained; b: [1, 1] -> [1, 0]: lost; c: gained
    assert (comparison.flips.only_candidate, comparison.flips.only_baseline) == (("a", "c"), ("b",))
    assert comparison.flips.both == comparison.flips.neither == ()
    assert comparison.flips.p_value == 1.0  # 1 lost, 2 gained: 2 * P(X <= 1) = 2 * 4/8 > 1, capped
    # [-0.3386, 0.8278] at 50%: lower bound above -0.40 (PASS), straddles 0 (superiority INCONCLUSIVE)
    assert (comparison.difference.interval.low, comparison.difference.interval.high) == pytest.approx(
        (-0.3385940, 0.8277784), abs=1e-6
    )
    assert [r.verdict for r in comparison.results] == [Verdict.PASS, Verdict.INCONCLUSIVE]
    assert not any(r.sequential for r in comparison.results)


# --- the anytime-valid paired sequence ----------------------------------------------------------------------------


def test_the_sequence_is_the_betting_sequence_on_rescaled_differences() -> None:
    base = rewards({"a": [1.0, 0.0], "b": [1.0, 1.0], "c": [0.0, 1.0], "d": [0.0, 0.0]})
    cand = rewards({"a": [1.0, 1.0], "b": [0.0, 1.0], "c": [1.0, 1.0], "d": [1.0, 0.0]})
    # differences task by task: a [0, 1], b [-1, 0], c [1, 0], d [1, 0]; rescaled x = (d + 1) / 2 to [0, 1]
    unit = BettingSequence(ALPHA).add_wave([0.5, 1.0, 0.0, 0.5, 1.0, 0.5, 1.0, 0.5])
    sequence = PairedSequence([NON_INFERIOR], ALPHA)
    results = sequence.add_wave(base, cand, 2)
    interval = results[0].interval
    assert interval.estimate == pytest.approx(0.25)  # (0 + 1 - 1 + 0 + 1 + 0 + 1 + 0) / 8
    assert (interval.low, interval.high) == pytest.approx((2 * unit.low - 1, 2 * unit.high - 1))
    assert interval.n == 4 and results[0].sequential
    assert -1.0 < interval.low < 0.25 < interval.high < 1.0
    # the whole range [0, 1] of x at first, then narrower: a 95% sequence on 8 values cannot decide delta 0.1
    assert results[0].verdict is Verdict.INCONCLUSIVE and not decided(results)


def test_a_sequence_before_any_wave_and_its_refusals() -> None:
    sequence = PairedSequence([NON_INFERIOR, SUPERIOR])
    interval = sequence.interval()
    assert math.isnan(interval.estimate) and (interval.low, interval.high) == (-1.0, 1.0)
    assert not decided(sequence.results()) and not decided([])
    base, cand = rewards({"a": [1.0, 0.0], "b": [1.0, 1.0]}), rewards({"a": [1.0, 1.0], "b": [1.0]})
    with pytest.raises(ValueError, match="repeats 0 to 1"):
        sequence.add_wave(base, cand, 2)  # b's repeat 1 has no candidate reward
    sequence.add_wave(base, cand, 1)
    with pytest.raises(ValueError, match="end after repeat 1"):
        sequence.add_wave(base, cand, 1)
    with pytest.raises(ValueError, match="tasks of the first wave"):
        sequence.add_wave({**base, ("c", 1): 1.0}, {**cand, ("b", 1): 1.0, ("c", 1): 1.0}, 2)
    with pytest.raises(ValueError, match="outside the declared range"):
        sequence.add_wave(base, {**cand, ("b", 1): 1.5}, 2)
    wide = PairedSequence([NON_INFERIOR], reward_range=RewardRange(0.0, 2.0))
    assert wide.add_wave(base, {**cand, ("b", 1): 1.5}, 2)[0].interval.low >= -2.0


def test_equal_models_decide_non_inferiority_and_say_why() -> None:
    # 100 tasks, 4 repeats, the candidate's rewards equal the baseline's: every difference is 0
    base = rewards({f"t{t}": [float((t + r) % 3 == 0) for r in range(4)] for t in range(100)})
    sequence = PairedSequence([NON_INFERIOR, SUPERIOR])
    sequence.add_wave(base, base, 2)
    results = sequence.add_wave(base, base, 4)
    assert [r.verdict for r in results] == [Verdict.PASS, Verdict.INCONCLUSIVE]  # 0 is in the sequence
    assert -0.1 <= results[0].interval.low < 0.0 < results[0].interval.high
    assert not decided(results) and decided(results[:1])
    text = reason(results[:1], 4)
    assert text.startswith("not needed: non-inferiority comparison decided PASS after 4 repeats, lower bound -0.")
    assert text.endswith(" >= -0.10")


# --- simulation: wrong verdicts stay within the stated error rate -------------------------------------------------

TASKS = 20
BASELINE = [0.8 if t % 2 else 0.3 for t in range(TASKS)]  # tasks of differing difficulty


def _verdicts(candidate: list[float], gate: ComparisonGate, runs: int, seed: int) -> tuple[dict[Verdict, int], float]:
    rng = random.Random(seed)
    counts = dict.fromkeys(Verdict, 0)
    spent = 0
    for _ in range(runs):
        results, pairs = simulate(BASELINE, candidate, [gate], 2, 8, rng)
        counts[results[0].verdict] += 1
        spent += pairs
    return counts, spent / runs


def _slack(rate: float, runs: int) -> float:
    return 3 * math.sqrt(rate * (1 - rate) / runs)  # three Monte Carlo standard errors


def test_at_the_margin_the_adaptive_comparison_errs_within_its_rate() -> None:
    """2,000 paired runs of 20 tasks whose candidate is exactly delta = 0.1 worse on average (half the tasks unchanged,
    half 0.2 worse), in waves of 2, 4, 8 repeats judged after each. Neither verdict is established by such data: a
    PASS is the non-inferiority test's type I error at its worst case, and the sequence bounds each side by alpha/2
    (the hedge halves alpha), both together by alpha, however many waves look."""
    candidate = [p - (0.0 if t % 4 < 2 else 0.2) for t, p in enumerate(BASELINE)]
    assert sum(candidate) / TASKS - sum(BASELINE) / TASKS == pytest.approx(-0.1)
    runs = 2000
    counts, spent = _verdicts(candidate, NON_INFERIOR, runs, seed=20261202)
    assert counts[Verdict.PASS] / runs <= ALPHA / 2 + _slack(ALPHA / 2, runs)  # <= 3.5%
    assert counts[Verdict.FAIL] / runs <= ALPHA / 2 + _slack(ALPHA / 2, runs)
    assert (counts[Verdict.PASS] + counts[Verdict.FAIL]) / runs <= ALPHA + _slack(ALPHA, runs)
    assert spent > 0.9 * TASKS * 8  # too close to tell: nearly every run goes to the ceiling


def test_clear_differences_are_decided_early_and_rarely_wrong() -> None:
    runs = 500
    regressed = [max(0.0, p - 0.4) for p in BASELINE]  # 0.35 worse on average: well beyond delta
    counts, spent = _verdicts(regressed, NON_INFERIOR, runs, seed=1)
    assert counts[Verdict.PASS] / runs <= ALPHA / 2 + _slack(ALPHA / 2, runs)  # the wrong verdict
    assert counts[Verdict.FAIL] / runs >= 0.9 and spent < 0.75 * TASKS * 8
    improved = [min(1.0, p + 0.15) for p in BASELINE]  # 0.125 better on average
    counts, spent = _verdicts(improved, NON_INFERIOR, runs, seed=2)
    assert counts[Verdict.FAIL] / runs <= ALPHA / 2 + _slack(ALPHA / 2, runs)
    assert counts[Verdict.PASS] / runs >= 0.9 and spent < 0.75 * TASKS * 8
    counts, _ = _verdicts(BASELINE, SUPERIOR, runs, seed=3)  # equal models: "better" is the wrong verdict
    assert counts[Verdict.PASS] / runs <= ALPHA / 2 + _slack(ALPHA / 2, runs)


def test_a_margin_must_lie_below_the_width_of_the_reward_range() -> None:
    """A difference of two mean rewards in [lo, hi] lies in [-(hi - lo), hi - lo]: at a margin of the width or more
    non-inferiority holds for every candidate and superiority for none."""
    unit, wide = RewardRange(), RewardRange(-1.0, 2.0)
    assert margin_problem(ComparisonGate(Hypothesis.NON_INFERIORITY, 0.99), unit) is None
    assert margin_problem(ComparisonGate(Hypothesis.NON_INFERIORITY, 1.5), unit) == (
        "a margin of 1.5 is not below the width 1 of the reward range [0, 1]: every candidate would pass "
        "non-inferiority whatever it scores"
    )
    assert margin_problem(ComparisonGate(Hypothesis.SUPERIORITY, 1.0), unit) == (
        "a margin of 1 is not below the width 1 of the reward range [0, 1]: no candidate could pass superiority "
        "whatever it scores"
    )
    assert margin_problem(ComparisonGate(Hypothesis.NON_INFERIORITY, 1.5), wide) is None  # width 3
    assert margin_problem(ComparisonGate(Hypothesis.SUPERIORITY, 3.0), wide) is not None
