"""The INCONCLUSIVE hint comes from the gate's own interval (issue 38): the observed data projected to more tasks
(rollouts, repeats) at the observed effect and spread, judged by the interval the gate judges, moved toward the
threshold by z_power standard errors (what gives the hint its power). Hand-worked cases where the Student t
planner and the gate's own interval disagree, and checks that at the hinted size the projected sample decides and
one less does not."""

from __future__ import annotations

import math
import statistics
from statistics import NormalDist

import pytest

from pytest_gym_eval.stats import gates as g
from pytest_gym_eval.stats import power
from pytest_gym_eval.stats.comparison import ComparisonGate, Hypothesis, PairedBasis, compare
from pytest_gym_eval.stats.distributions import student_t_ppf
from pytest_gym_eval.stats.intervals import (
    Interval,
    clopper_pearson_interval,
    clustered_proportion_interval,
    clustered_standard_error,
)

Z = NormalDist().inv_cdf(0.975) + NormalDist().inv_cdf(0.8)  # the t planner's z_{1-alpha/2} + z_power


def _moved(interval: Interval, threshold: float) -> Interval:
    return power.toward(interval, threshold, 0.95, g.HINT_POWER)


# 12 tasks x 4 repeats near 0.9: six pass every repeat, six pass 3 of 4; mean 0.875, against a minimum of 0.8.
NEAR_ONE = [[1.0] * 4] * 6 + [[1.0, 1.0, 1.0, 0.0]] * 6


def _basis(rewards: list[list[float]], metric: str = "mean_reward") -> g.Basis:
    counts = tuple((len(task), sum(1 for r in task if r >= 1.0)) for task in rewards)
    return g.Basis(metric, tuple(tuple(task) for task in rewards), counts)


def _decides_on(tasks: list[list[float]], threshold: float) -> bool:
    return _moved(clustered_proportion_interval(tasks, 0.95), threshold).low >= threshold


def test_toward_moves_an_interval_by_z_power_standard_errors() -> None:
    # [0.4, 0.8] at 95%: standard error 0.4 / (2 * 1.95996) = 0.10204; z_0.8 = 0.84162: moved by 0.08588 toward 0.5.
    moved = _moved(Interval(0.6, 0.4, 0.8, 10), 0.5)
    assert (moved.estimate, moved.low, moved.high) == pytest.approx((0.6 - 0.0858813, 0.4 - 0.0858813, 0.8 - 0.0858813))
    assert _moved(Interval(0.6, 0.4, 0.8, 10), 0.9).low == pytest.approx(0.4 + 0.0858813)  # toward a higher one
    assert _moved(Interval(0.6, -math.inf, math.inf, 1), 0.5) == Interval(0.6, -math.inf, math.inf, 1)


def test_near_0_9_the_hint_is_the_gates_own_clopper_pearson_not_the_t_planners() -> None:
    # se^2 = 1/(12 * 11) * 6 (0.125^2 + 0.125^2) ... : the t planner's n = Z^2 se^2 12 / 0.075^2 = 24, 12 more.
    mean, error, tasks = clustered_standard_error(NEAR_ONE)
    assert (mean, tasks) == (0.875, 12)
    t_planner_more = math.ceil(Z * Z * error * error * tasks / (mean - 0.8) ** 2) - tasks
    assert t_planner_more == 12
    # The gate judges the task-clustered Clopper-Pearson interval, whose lower bound reaches further below a mean
    # near 1: at 12 + 12 tasks (the observed tasks twice) it does not decide, moved by z_power standard errors.
    assert not _decides_on(NEAR_ONE * 2, 0.8)
    hint = _basis(NEAR_ONE).hint(0.8, 0.95)
    assert hint.more is not None and hint.more > t_planner_more
    # At the hinted size the projected sample's own interval decides, one task less does not.
    at = 12 + hint.more
    assert _decides_on(power.grown(NEAR_ONE, [statistics.fmean(t) for t in NEAR_ONE], at), 0.8)
    assert not _decides_on(power.grown(NEAR_ONE, [statistics.fmean(t) for t in NEAR_ONE], at - 1), 0.8)
    assert hint.text.startswith(f"about {hint.more} more tasks would likely decide it (same repeats)")


def test_the_repeats_hint_shrinks_only_the_within_task_spread() -> None:
    # Task means 1 and 0.75 (mean 0.875); within-task variance (0 + 1/4) / 2 = 1/8; the task means' variance
    # 12/11 * 0.125^2 = 0.01705 is below within / 4 = 1/32, so the between-task part is 0: K repeats give task means
    # 0.875 +- 0.125 s, s = sqrt(min(1, (1/8) / K / 0.01705)).
    hint = _basis(NEAR_ONE).hint(0.8, 0.95)
    assert hint.repeats is not None
    observed = statistics.variance([1.0] * 6 + [0.75] * 6)

    def shrunk(k: int) -> list[list[float]]:
        s = math.sqrt(min(1.0, 0.125 / k / observed))
        return [[0.875 + s * 0.125] * k] * 6 + [[0.875 - s * 0.125] * k] * 6

    assert _decides_on(shrunk(hint.repeats), 0.8)
    assert not _decides_on(shrunk(hint.repeats - 1), 0.8)
    assert hint.text.endswith(f", or about {hint.repeats} repeats a task on the same tasks")


def test_repeats_alone_do_not_decide_what_four_tasks_cannot() -> None:
    # Task means 0.5, 0.5, 1, 0 against 0.2: the z planner said 60 repeats on these 4 tasks, but the gate's own
    # interval has 3 degrees of freedom: the between-task variance 1/6 - 1/8 = 1/24 alone leaves its lower bound
    # below 0.2 at any number of repeats (se^2 -> 1/24 / 4, n_eff -> 24, n* = 24 (1.96 / t_{0.975,3})^2 = 9.1:
    # Clopper-Pearson's lower bound of 4.55 of 9.1 is 0.19, before it is moved by z_power standard errors).
    hint = _basis([[1, 0], [1, 0], [1, 1], [0, 0]]).hint(0.2, 0.95)
    assert hint.repeats is None and hint.more is not None
    assert hint.text.endswith("; more repeats alone would not: the spread lies between tasks")


def test_the_pass_rate_hint_is_clopper_pearson_over_rollouts() -> None:
    # 6 of 10 against 0.5: n rollouts decide when the moved Clopper-Pearson lower bound of round(0.6 n) of n
    # reaches 0.5 (the rounding could make a size below the hint decide by luck).
    hint = g.Basis("pass_rate", (), ((10, 6),)).hint(0.5, 0.95)
    assert hint.unit == "rollouts" and hint.more is not None
    assert hint.text == f"about {hint.more} more rollouts would likely decide it"
    at = 10 + hint.more
    assert _moved(clopper_pearson_interval(round(0.6 * at), at, 0.95), 0.5).low >= 0.5
    assert _moved(clopper_pearson_interval(round(0.6 * (at - 1)), at - 1, 0.95), 0.5).low < 0.5
    assert math.ceil(Z * Z * 0.24 / 0.01) - 10 == 179 < hint.more  # the normal planner's, too few at 0.6


def test_an_error_rate_hint_counts_every_rollout_with_a_result() -> None:
    # 3 errored of 20 against a maximum of 0.3: decided once the moved Wilson upper bound of 15% of n is <= 0.3.
    basis = g.Basis("error_rate", ((1.0,),) * 17, ((17, 17),), None, 20, 3)
    hint = basis.hint(0.3, 0.95)
    assert hint.unit == "rollouts" and hint.more is not None
    from pytest_gym_eval.stats.intervals import wilson_interval

    at = 20 + hint.more
    assert _moved(wilson_interval(round(0.15 * at), at, 0.95), 0.3).high <= 0.3
    assert _moved(wilson_interval(round(0.15 * (at - 1)), at - 1, 0.95), 0.3).high > 0.3


def test_grown_takes_every_task_before_any_twice_and_keeps_the_mean() -> None:
    tasks = ["a", "b", "c", "d"]
    values = [1.0, 1.0, 1.0, 0.0]  # mean 0.75
    grown = power.grown(tasks, values, 10)
    assert sorted(grown[:8]) == sorted(tasks * 2) and len(grown) == 10
    assert grown[8:] == ["c", "d"]  # a highest one, then (the running mean above 0.75) the lowest
    assert power.grown(tasks, values, 4) == tasks


def test_smallest_deciding_finds_the_first_size_that_decides() -> None:
    assert power.smallest_deciding(lambda n: n >= 137, 5) == 137
    assert power.smallest_deciding(lambda n: n >= 5, 5) == 5
    assert power.smallest_deciding(lambda n: False, 5, 1_000) is None


def test_a_hint_beyond_the_projection_limit_says_more_than() -> None:
    hint = power.projected_hint(0.6, 0.5, 10, "tasks", lambda n: False)
    assert hint.more is None
    assert hint.text == f"more than {power.MAX_PROJECTED - 10:,} more tasks would be needed to likely decide it"
    # beyond the limit's tasks already: four times the observed ones
    hint = power.projected_hint(0.6, 0.5, 30_000, "rollouts", lambda n: n >= 100_000)
    assert hint == power.Hint(70_000, "rollouts", None, "about 70,000 more rollouts would likely decide it")
    assert "more than 90,000 more" in power.projected_hint(0.6, 0.5, 30_000, "tasks", lambda n: False).text


def test_the_comparisons_hint_uses_the_interval_it_is_given() -> None:
    # A stand-in interval that decides from 50 tasks on: the hint is 50 - 6 more, whatever the t interval says.
    baseline = {(f"t{i}", 0): 1.0 for i in range(6)}
    candidate = {(f"t{i}", 0): 1.0 if i % 3 else 0.5 for i in range(6)}

    def stand_in(b: power.Rewards, c: power.Rewards, confidence: float) -> Interval:
        tasks = len({task for task, _ in b})
        return Interval(-0.17, -0.05 if tasks >= 50 else -0.4, 0.07, tasks)

    def decides(interval: Interval) -> bool:
        return interval.low >= -0.1

    hint = power.paired_hint(baseline, candidate, -0.1, 0.95, decides, stand_in, g.HINT_POWER)
    assert hint.more == 44 and hint.unit == "tasks"


def test_the_comparisons_hint_decides_at_the_hinted_size_on_its_own_interval() -> None:
    # 6 tasks, the candidate 0 or 0.5 worse a task, against a margin of 0.3: INCONCLUSIVE.
    baseline = {(f"t{i}", 0): 1.0 for i in range(6)}
    candidate = {(f"t{i}", 0): 1.0 if i % 3 else 0.5 for i in range(6)}
    gate = ComparisonGate(Hypothesis.NON_INFERIORITY, 0.3)
    (result,) = compare(baseline, candidate, [gate]).results
    assert result.verdict is g.Verdict.INCONCLUSIVE and result.hint is not None and result.hint.more is not None
    differences = [candidate[(f"t{i}", 0)] - 1.0 for i in range(6)]
    tasks = [[(f"t{i}", 0)] for i in range(6)]

    def decides(n: int) -> bool:
        keys = power.grown(tasks, differences, n)
        b = {(str(j), 0): baseline[key[0]] for j, key in enumerate(keys)}
        c = {(str(j), 0): candidate[key[0]] for j, key in enumerate(keys)}
        return _moved(PairedBasis(b, c).interval(0.95), -0.3).low >= -0.3

    assert decides(6 + result.hint.more) and not decides(5 + result.hint.more)


def test_a_custom_metrics_hint_is_its_t_interval_grown() -> None:
    # 10 tasks, estimate 0.6, standard error 0.1, against 0.5: n tasks decide when 0.6 - t_{0.975, n-1} se_n, moved
    # by z_0.8 se_n t_{0.975, n-1} / z_0.975 (se_n = 0.1 sqrt(10 / n)), reaches 0.5; the z planner's
    # ceil(Z^2 0.1 / 0.01) = 79 ignores the t's degrees of freedom.
    def decides(n: int) -> bool:
        t = student_t_ppf(0.975, n - 1)
        return 0.6 - t * 0.1 * math.sqrt(10 / n) * (1 + NormalDist().inv_cdf(0.8) / NormalDist().inv_cdf(0.975)) > 0.5

    needed = next(n for n in range(11, 1000) if decides(n))
    half = student_t_ppf(0.975, 9) * 0.1
    hint = g.interval_hint(Interval(0.6, 0.6 - half, 0.8, 10), 0.5, 0.95)
    assert hint == g.Hint(needed - 10, "tasks", None, f"about {needed - 10} more tasks would likely decide it")
    assert math.ceil(Z * Z * 0.1 / 0.01) - 10 == 69 != hint.more


def test_a_task_without_a_scored_rollout_is_no_task_of_the_projection() -> None:
    with_empty = g.Basis("mean_reward", (*_basis(NEAR_ONE).rewards_by_task, ()), (*_basis(NEAR_ONE).counts, (0, 0)))
    assert with_empty.hint(0.8, 0.95) == _basis(NEAR_ONE).hint(0.8, 0.95)
