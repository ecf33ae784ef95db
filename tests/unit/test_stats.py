"""Tests of pytest_gym_eval.stats.intervals against hand-worked values from the published definitions."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from fractions import Fraction
from statistics import NormalDist, mean, stdev

import pytest

from pytest_gym_eval.stats.distributions import beta_ppf, student_t_cdf, student_t_ppf
from pytest_gym_eval.stats.intervals import (
    Interval,
    binomial_test_p,
    clopper_pearson_bounds,
    clopper_pearson_interval,
    clustered_proportion_interval,
    clustered_proportion_p,
    hall_t_bounds,
    mean_interval,
    paired_difference,
    pass_at_k,
    pass_at_k_interval,
    wilson_interval,
)
from pytest_gym_eval.stats.pass_at_k_bounds import clustered_pass_at_k_interval, pass_at_k_blocks, pass_at_k_by_task

Z95 = NormalDist().inv_cdf(0.975)  # 1.959963984540054


# --- Student t -----------------------------------------------------------------------------------------


def _cdf_df1(x: float) -> float:
    # Cauchy: F(x) = 1/2 + atan(x)/pi
    return 0.5 + math.atan(x) / math.pi


def _cdf_df2(x: float) -> float:
    # df = 2: F(x) = 1/2 + x / (2 sqrt(2 + x^2))
    return 0.5 + x / (2.0 * math.sqrt(2.0 + x * x))


def _cdf_df3(x: float) -> float:
    # df = 3: F(x) = 1/2 + (theta + sin(theta) cos(theta)) / pi with theta = atan(x / sqrt(3))
    theta = math.atan(x / math.sqrt(3.0))
    return 0.5 + (theta + math.sin(theta) * math.cos(theta)) / math.pi


def _cdf_df4(x: float) -> float:
    # df = 4: F(x) = 1/2 + (3/8) (x / s) (1 - x^2 / (12 s^2)) with s = sqrt(1 + x^2/4)
    s = math.sqrt(1.0 + x * x / 4.0)
    return 0.5 + 0.375 * (x / s) * (1.0 - x * x / (12.0 * s * s))


@pytest.mark.parametrize(("df", "closed_form"), [(1, _cdf_df1), (2, _cdf_df2), (3, _cdf_df3), (4, _cdf_df4)])
@pytest.mark.parametrize("x", [-30.0, -4.0, -1.5, -0.2, 0.0, 0.3, 1.0, 2.5, 7.0, 100.0])
def test_t_cdf_matches_closed_forms(df: int, closed_form: Callable[[float], float], x: float) -> None:
    assert student_t_cdf(x, df) == pytest.approx(closed_form(x), abs=1e-12)


@pytest.mark.parametrize("p", [1e-6, 0.01, 0.1, 0.3, 0.6, 0.9, 0.975, 0.999])
def test_t_ppf_cauchy_and_df2_closed_forms(p: float) -> None:
    # df = 1: t = tan(pi (p - 1/2)); df = 2: t = (2p - 1) / sqrt(2 p (1 - p))
    assert student_t_ppf(p, 1) == pytest.approx(math.tan(math.pi * (p - 0.5)), rel=1e-9)
    assert student_t_ppf(p, 2) == pytest.approx((2 * p - 1) / math.sqrt(2 * p * (1 - p)), rel=1e-9)


@pytest.mark.parametrize(
    ("p", "df", "table"),
    [
        # Critical values from standard Student t tables (e.g. NIST/SEMATECH e-Handbook §1.3.6.7.2).
        (0.975, 1, 12.7062),
        (0.975, 2, 4.3027),
        (0.975, 3, 3.1824),
        (0.975, 4, 2.7764),
        (0.975, 5, 2.5706),
        (0.975, 10, 2.2281),
        (0.975, 30, 2.0423),
        (0.975, 100, 1.9840),
        (0.95, 10, 1.8125),
        (0.99, 10, 2.7638),
        (0.995, 10, 3.1693),
    ],
)
def test_t_ppf_table_values(p: float, df: int, table: float) -> None:
    assert student_t_ppf(p, df) == pytest.approx(table, abs=5e-5)
    assert student_t_ppf(1 - p, df) == pytest.approx(-table, abs=5e-5)


@pytest.mark.parametrize("df", [0.5, 1, 1.5, 3, 7.25, 29, 250, 1e5])
@pytest.mark.parametrize("p", [1e-9, 0.001, 0.2, 0.5, 0.8, 0.999, 1 - 1e-9])
def test_t_ppf_inverts_cdf(df: float, p: float) -> None:
    x = student_t_ppf(p, df)
    assert student_t_cdf(x, df) == pytest.approx(p, rel=1e-9)
    assert student_t_ppf(1 - p, df) == pytest.approx(-x, rel=1e-6, abs=1e-12)


def test_t_large_df_approaches_normal() -> None:
    # Cornish-Fisher (Abramowitz & Stegun 26.7.5): t ≈ z + (z^3 + z) / (4 df); for df = 1e6:
    # 1.959963985 + (7.529 + 1.960) / 4e6 = 1.959963985 + 2.372e-6 = 1.959966357
    assert student_t_ppf(0.975, 1e6) == pytest.approx(Z95 + (Z95**3 + Z95) / 4e6, abs=1e-9)
    assert student_t_ppf(0.975, math.inf) == pytest.approx(Z95, abs=1e-12)
    assert student_t_cdf(1.0, 1e12) == pytest.approx(NormalDist().cdf(1.0), abs=1e-9)


def test_t_cdf_limits() -> None:
    assert student_t_cdf(math.inf, 3) == 1.0
    assert student_t_cdf(-math.inf, 3) == 0.0
    assert student_t_cdf(0.0, 7) == 0.5


@pytest.mark.parametrize("p", [0.0, 1.0, -0.1, 1.5, math.nan])
def test_t_ppf_rejects_bad_p(p: float) -> None:
    with pytest.raises(ValueError, match="p must lie in"):
        student_t_ppf(p, 5)


@pytest.mark.parametrize("df", [0.0, -1.0, math.nan])
def test_t_rejects_bad_df(df: float) -> None:
    with pytest.raises(ValueError, match="degrees of freedom"):
        student_t_ppf(0.9, df)
    with pytest.raises(ValueError, match="degrees of freedom"):
        student_t_cdf(1.0, df)


# --- Interval ------------------------------------------------------------------------------------------


def test_interval_contains() -> None:
    interval = Interval(0.5, 0.4, 0.6, 10)
    assert interval.contains(0.4)
    assert interval.contains(0.6)
    assert interval.contains(0.55)
    assert not interval.contains(0.39)
    assert not interval.contains(0.61)
    assert Interval(0.5, -math.inf, math.inf, 1).contains(1e9)


# --- Wilson --------------------------------------------------------------------------------------------


def test_wilson_seven_of_ten() -> None:
    # z = 1.959964, z^2 = 3.841459; centre = (7 + z^2/2) / (10 + z^2) = 8.920729 / 13.841459 = 0.644494
    # half = z sqrt(n p (1-p) + z^2/4) / (n + z^2) = 1.959964 * sqrt(2.1 + 0.960365) / 13.841459
    #      = 1.959964 * 1.749390 / 13.841459 = 0.247716
    # -> [0.396778, 0.892209] (published: 0.3968 to 0.8922)
    interval = wilson_interval(7, 10)
    assert interval.estimate == 0.7
    assert interval.n == 10
    assert interval.low == pytest.approx(0.396778, abs=1e-6)
    assert interval.high == pytest.approx(0.892209, abs=1e-6)
    assert (interval.low + interval.high) / 2 == pytest.approx(8.920729410347062 / 13.841458820694124)


def test_wilson_extremes() -> None:
    # 0 of 10: low 0, high = z^2 / (n + z^2) = 3.841459 / 13.841459 = 0.277533
    none = wilson_interval(0, 10)
    assert (none.estimate, none.low) == (0.0, 0.0)
    assert none.high == pytest.approx(3.841458820694124 / 13.841458820694124, abs=1e-12)
    # 10 of 10: high 1, low = n / (n + z^2) = 10 / 13.841459 = 0.722467
    every = wilson_interval(10, 10)
    assert (every.estimate, every.high) == (1.0, 1.0)
    assert every.low == pytest.approx(10 / 13.841458820694124, abs=1e-12)


def test_wilson_other_confidence() -> None:
    # 90%: z = 1.644854, z^2 = 2.705543; 1 of 4: centre = (1 + 1.352772) / 6.705543 = 0.350870
    # half = 1.644854 * sqrt(4 * 0.25 * 0.75 + 0.676386) / 6.705543 = 1.644854 * 1.194314 / 6.705543
    #      = 0.292962 -> [0.057908, 0.643832]
    interval = wilson_interval(1, 4, confidence=0.90)
    assert interval.estimate == 0.25
    assert interval.low == pytest.approx(0.057908, abs=2e-6)
    assert interval.high == pytest.approx(0.643832, abs=2e-6)


def test_wilson_no_trials() -> None:
    interval = wilson_interval(0, 0)
    assert math.isnan(interval.estimate)
    assert (interval.low, interval.high, interval.n) == (0.0, 1.0, 0)


@pytest.mark.parametrize(("successes", "n"), [(-1, 5), (6, 5), (0, -1), (1, 0)])
def test_wilson_bad_counts(successes: int, n: int) -> None:
    with pytest.raises(ValueError):
        wilson_interval(successes, n)


@pytest.mark.parametrize("confidence", [0.0, 1.0, 95.0, -0.5])
def test_bad_confidence(confidence: float) -> None:
    with pytest.raises(ValueError, match="confidence"):
        wilson_interval(1, 2, confidence)
    with pytest.raises(ValueError, match="confidence"):
        mean_interval([[1.0], [0.0]], confidence)


# --- mean_interval -------------------------------------------------------------------------------------


def test_mean_interval_equal_repeats_hand_worked() -> None:
    # per-task means 0.5, 1, 0, 0.75; grand mean 2.25 / 4 = 0.5625
    # deviations -0.0625, 0.4375, -0.5625, 0.1875 -> squares sum 0.546875; s^2 = 0.546875 / 3 = 0.1822917
    # se = sqrt(s^2 / 4) = 0.2134782; half = t_{0.975,3} * se = 3.182446 * 0.2134782 = 0.6793827
    interval = mean_interval([[1.0, 0.0], [1.0, 1.0], [0.0, 0.0], [1.0, 0.5]])
    assert interval.estimate == 0.5625
    assert interval.n == 4
    assert interval.low == pytest.approx(0.5625 - 0.6793827, abs=1e-6)
    assert interval.high == pytest.approx(0.5625 + 0.6793827, abs=1e-6)


@pytest.mark.parametrize(
    "rewards",
    [
        [[1.0, 0.0, 1.0], [0.2, 0.4, 0.9], [0.0, 0.0, 0.1], [1.0, 1.0, 0.7], [0.5, 0.3, 0.3]],
        [[3.0, -1.0], [2.5, 7.0], [0.0, 0.0], [10.0, -4.0], [1.0, 1.5], [2.0, 2.0]],
        [[0.1, 0.9, 0.4, 0.6]] * 2 + [[0.0, 1.0, 1.0, 1.0]],
    ],
)
@pytest.mark.parametrize("confidence", [0.8, 0.95, 0.99])
def test_mean_interval_reduces_to_t_interval_over_task_means(rewards: list[list[float]], confidence: float) -> None:
    # With R rollouts per task: sum_r (x_tr - mean) = R (m_t - mean) and N = T R, so
    # T/(T-1) * sum_t R^2 (m_t - mean)^2 / (T R)^2 = sum_t (m_t - mean)^2 / ((T-1) T) = s^2 / T.
    task_means = [mean(task) for task in rewards]
    t = len(task_means)
    half = student_t_ppf((1 + confidence) / 2, t - 1) * stdev(task_means) / math.sqrt(t)
    interval = mean_interval(rewards, confidence)
    assert interval.estimate == pytest.approx(mean(task_means), abs=1e-12)
    assert interval.low == pytest.approx(mean(task_means) - half, abs=1e-12)
    assert interval.high == pytest.approx(mean(task_means) + half, abs=1e-12)
    assert interval.n == t


def test_clip_keeps_intervals_in_the_unit_range_only_where_the_quantity_lives() -> None:
    rewards = [[1.0, 0.0], [1.0, 1.0], [0.0, 0.0], [1.0, 0.5]]  # t interval [-0.117, 1.242] (hand-worked above)
    clipped = mean_interval(rewards, clip=True)
    assert (clipped.estimate, clipped.low, clipped.high, clipped.n) == (0.5625, 0.0, 1.0, 4)
    # a reward outside [0, 1]: the mean may leave it too, so nothing is clipped
    scaled = [[2 * x for x in task] for task in rewards]
    assert mean_interval(scaled, clip=True) == mean_interval(scaled)
    assert mean_interval(scaled).low == pytest.approx(2 * (0.5625 - 0.6793827), abs=1e-6)
    # infinite bounds (one task: no interval) stay infinite
    assert mean_interval([[1.0, 0.0]], clip=True) == mean_interval([[1.0, 0.0]])
    # pass@k always lies in [0, 1]: per-task pass@1 1/2, 1, 0, 1/2 -> [-0.150, 1.150] clipped
    at1 = pass_at_k_interval([(2, 1), (2, 2), (2, 0), (2, 1)], 1, clip=True)
    assert (at1.estimate, at1.low, at1.high) == (0.5, 0.0, 1.0)
    assert pass_at_k_interval([(2, 1), (2, 2), (2, 0), (2, 1)], 1).low < 0


def test_mean_interval_unequal_repeats_hand_worked() -> None:
    # N = 6 rollouts, sum 4 -> estimate 2/3 (mean of all rollouts, not 5/9 = mean of task means 2/3, 0, 1)
    # cluster residual sums: A: 1 + 0 + 1 - 3 * 2/3 = 0; B: 0 - 2/3 = -2/3; C: 1 + 1 - 2 * 2/3 = 2/3
    # var = T/(T-1) * (0 + 4/9 + 4/9) / N^2 = 3/2 * 8/9 / 36 = 1/27; se = 0.19245009
    # half = t_{0.975,2} * se = 4.30265273 * 0.19245009 = 0.82804590
    interval = mean_interval([[1.0, 0.0, 1.0], [0.0], [1.0, 1.0]])
    assert interval.estimate == pytest.approx(2 / 3, abs=1e-15)
    assert interval.n == 3
    assert interval.low == pytest.approx(2 / 3 - 0.82804590, abs=1e-7)
    assert interval.high == pytest.approx(2 / 3 + 0.82804590, abs=1e-7)


def test_mean_interval_matches_miller_cross_term_form() -> None:
    # Miller 2024 §2 writes the clustered SE with cross terms:
    # SE^2 = (1/N^2) [sum_i (x_i - mean)^2 + sum_c sum_{i != j in c} (x_i - mean)(x_j - mean)];
    # here times T/(T-1), computed by brute force over ordered pairs of rollouts of each task.
    rewards = [[0.9, 0.1, 0.4], [0.3], [0.8, 0.8], [0.0, 0.2, 0.6, 1.0]]
    flat = [x for task in rewards for x in task]
    grand = sum(flat) / len(flat)
    total = sum((x - grand) ** 2 for x in flat)
    for task in rewards:
        for i, j in itertools.permutations(range(len(task)), 2):
            total += (task[i] - grand) * (task[j] - grand)
    t = len(rewards)
    se = math.sqrt(t / (t - 1) * total / len(flat) ** 2)
    half = student_t_ppf(0.975, t - 1) * se
    interval = mean_interval(rewards)
    assert interval.estimate == pytest.approx(grand, abs=1e-12)
    assert interval.low == pytest.approx(grand - half, abs=1e-12)
    assert interval.high == pytest.approx(grand + half, abs=1e-12)


def test_mean_interval_skips_empty_tasks() -> None:
    assert mean_interval([[1.0, 0.0], [], [1.0, 1.0]]) == mean_interval([[1.0, 0.0], [1.0, 1.0]])
    assert mean_interval([[1.0, 0.0], [], [1.0, 1.0]]).n == 2


def test_mean_interval_no_information() -> None:
    empty = mean_interval([])
    assert math.isnan(empty.estimate)
    assert (empty.low, empty.high, empty.n) == (-math.inf, math.inf, 0)
    assert math.isnan(mean_interval([[], []]).estimate)
    one = mean_interval([[1.0, 0.0, 0.0, 1.0]])
    assert (one.estimate, one.low, one.high, one.n) == (0.5, -math.inf, math.inf, 1)


def test_mean_interval_identical_rewards() -> None:
    assert mean_interval([[0.1, 0.1, 0.1], [0.1], [0.1, 0.1]]) == Interval(0.1, 0.1, 0.1, 3)


@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_mean_interval_rejects_non_finite(bad: float) -> None:
    with pytest.raises(ValueError, match="finite"):
        mean_interval([[1.0, bad], [0.0]])


# --- pass@k --------------------------------------------------------------------------------------------


def _pass_at_k_by_enumeration(n: int, c: int, k: int) -> Fraction:
    # Fraction of all k-subsets of the n rollouts (c of them passing) that contain at least one pass.
    rollouts = [True] * c + [False] * (n - c)
    subsets = list(itertools.combinations(range(n), k))
    return Fraction(sum(any(rollouts[i] for i in subset) for subset in subsets), len(subsets))


@pytest.mark.parametrize(
    ("n", "c", "k"), [(n, c, k) for n in range(1, 8) for c in range(n + 1) for k in range(1, n + 1)]
)
def test_pass_at_k_matches_enumeration(n: int, c: int, k: int) -> None:
    assert pass_at_k(n, c, k) == pytest.approx(float(_pass_at_k_by_enumeration(n, c, k)), abs=1e-12)


def test_pass_at_k_small_hand_values() -> None:
    # n = 4, c = 1, k = 2: 1 - C(3,2)/C(4,2) = 1 - 3/6 = 0.5; k = 1 reduces to c/n
    assert pass_at_k(4, 1, 2) == pytest.approx(0.5)
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3)
    assert pass_at_k(5, 0, 3) == 0.0
    assert pass_at_k(5, 3, 3) == 1.0  # n - c = 2 < k: every 3-subset contains a pass


def test_pass_at_k_large_n_is_stable() -> None:
    # Exact rational 1 - C(n-c, k)/C(n, k) with big integers; a naive float comb(200, 50) ratio also works
    # here, but the product form must agree to double precision.
    for n, c, k in [(200, 100, 50), (1000, 1, 1), (1000, 3, 100), (500, 250, 250)]:
        exact = 1 - Fraction(math.comb(n - c, k), math.comb(n, k))
        assert pass_at_k(n, c, k) == pytest.approx(float(exact), rel=1e-12, abs=1e-15)


@pytest.mark.parametrize(("n", "c", "k"), [(3, 1, 4), (3, 4, 1), (-1, 0, 1), (3, -1, 1), (3, 1, 0), (3, 1, -2)])
def test_pass_at_k_rejects_bad_arguments(n: int, c: int, k: int) -> None:
    with pytest.raises(ValueError):
        pass_at_k(n, c, k)


def test_pass_at_k_interval_hand_worked() -> None:
    # k = 2; (2, 1) is kept (n = k): 1 - C(1,2)/C(2,2) = 1; (1, 1) is excluded (n < k)
    # values: (4,1) -> 0.5, (4,0) -> 0, (4,4) -> 1, (2,1) -> 1; mean 2.5 / 4 = 0.625
    # deviations -0.125, -0.625, 0.375, 0.375 -> squares 0.015625 + 0.390625 + 0.140625 * 2 = 0.6875
    # s^2 = 0.6875 / 3 = 0.2291667; se = sqrt(0.2291667 / 4) = 0.2393568
    # half = t_{0.975,3} * se = 3.182446 * 0.2393568 = 0.761740
    interval = pass_at_k_interval([(4, 1), (4, 0), (4, 4), (2, 1), (1, 1)], k=2)
    assert interval.estimate == pytest.approx(0.625)
    assert interval.n == 4
    assert interval.low == pytest.approx(0.625 - 0.761740, abs=1e-6)
    assert interval.high == pytest.approx(0.625 + 0.761740, abs=1e-6)


def test_pass_at_k_interval_edges() -> None:
    nothing = pass_at_k_interval([(1, 1), (2, 0)], k=3)
    assert math.isnan(nothing.estimate)
    assert (nothing.low, nothing.high, nothing.n) == (-math.inf, math.inf, 0)
    one = pass_at_k_interval([(4, 1), (1, 0)], k=2)
    assert (one.estimate, one.low, one.high, one.n) == (0.5, -math.inf, math.inf, 1)
    same = pass_at_k_interval([(4, 4), (5, 5), (3, 3)], k=2)
    assert same == Interval(1.0, 1.0, 1.0, 3)
    with pytest.raises(ValueError):
        pass_at_k_interval([(3, 4)], k=1)
    with pytest.raises(ValueError):
        pass_at_k_interval([(3, 1)], k=0)


# 12 tasks x 8 repeats: 11 pass every rollout, one passes 4 of 8 (pass@4 = 1 - C(4,4)/C(8,4) = 69/70).
ALMOST_ALL_PASS = [(8, 8)] * 11 + [(8, 4)]


def test_clustered_pass_at_k_interval_caps_the_effective_sample_at_the_blocks_of_k() -> None:
    # mean = (11 + 69/70) / 12 = 1 - 1/840; one deviation d = 1/70: s² = d² (11/12) / 11 = d² / 12, se = d / 12;
    # n_eff = x̄ (1 - x̄) / se² = (839/840)(1/840)(70² · 144) = 839 (one task just short of 1 looks like 839
    # rollouts). Capped at the 12 x floor(8/4) = 24 disjoint blocks: n* = 24 (1.959964 / 2.200985)² = 19.03151,
    # bounds B(0.025; x̄ n*, n* - x̄ n* + 1) = 0.8216465 and 1 (x̄ n* = 19.00885 < n*: the upper bound rounds to 1).
    interval = clustered_pass_at_k_interval(ALMOST_ALL_PASS, 4)
    assert (interval.estimate, interval.n) == (pytest.approx(1.0 - 1.0 / 840.0, abs=1e-15), 12)
    n_star = 24 * (NormalDist().inv_cdf(0.975) / student_t_ppf(0.975, 11)) ** 2
    assert n_star == pytest.approx(19.03151, abs=1e-5)
    assert interval.low == pytest.approx(0.8216465, abs=1e-6)
    assert interval.high == pytest.approx(1.0, abs=1e-6)
    # before: the uncapped effective sample's bound cleared a true pass@4 of 0.992, the t interval's too
    assert clustered_proportion_interval(pass_at_k_by_task(ALMOST_ALL_PASS, 4)).low > 0.992
    assert pass_at_k_interval(ALMOST_ALL_PASS, 4, clip=True).low > 0.992


def test_clustered_pass_at_k_interval_of_tasks_that_all_pass_is_bounded_by_the_blocks() -> None:
    # every pass@4 is 1: the t interval is [1, 1] (a PASS at any threshold); now the 24 blocks bound it:
    # lower = B(0.025; n*, 1) = 0.025^(1/n*) = exp(-3.688879 / 19.03151) = 0.8237978
    interval = clustered_pass_at_k_interval([(8, 8)] * 12, 4)
    assert (interval.estimate, interval.high) == (1.0, 1.0)
    assert interval.low == pytest.approx(0.8237978, abs=1e-6)
    assert pass_at_k_interval([(8, 8)] * 12, 4).low == 1.0
    # and none passing: pass@k is 0 exactly when no rollout passed, the mirror image
    zeros = clustered_pass_at_k_interval([(8, 0)] * 12, 4)
    assert (zeros.estimate, zeros.low) == (0.0, 0.0)
    assert zeros.high == pytest.approx(1.0 - 0.8237978, abs=1e-6)


def test_clustered_pass_at_k_interval_below_the_cap_is_the_clustered_interval() -> None:
    # k = 2, 6 tasks x 4 repeats: estimates 1, 1, 1 - C(3,2)/C(4,2) = 0.5, 0, 1 - C(2,2)/C(4,2) = 5/6, 0.5; mean
    # 23/36 = 0.638889, squared deviations sum to 0.745370, se² = 0.745370 / 5 / 6 = 0.0248457, n_eff = 0.638889 x
    # 0.361111 / 0.0248457 = 9.2857 < the 12 blocks: the cap does not bind.
    counts = [(4, 4), (4, 3), (4, 1), (4, 0), (4, 2), (4, 1)]
    values = pass_at_k_by_task(counts, 2)
    assert [v for (v,) in values] == pytest.approx([1.0, 1.0, 0.5, 0.0, 5.0 / 6.0, 0.5])
    assert pass_at_k_blocks(counts, 2) == 12
    assert clustered_pass_at_k_interval(counts, 2) == clustered_proportion_interval(values)


def test_clustered_pass_at_k_interval_edges() -> None:
    nothing = clustered_pass_at_k_interval([(1, 1), (2, 0)], k=3)
    assert math.isnan(nothing.estimate)
    assert (nothing.low, nothing.high, nothing.n) == (-math.inf, math.inf, 0)
    one = clustered_pass_at_k_interval([(4, 1), (1, 0)], k=2)
    assert (one.estimate, one.low, one.high, one.n) == (0.5, -math.inf, math.inf, 1)
    assert pass_at_k_blocks([(4, 1), (5, 0), (1, 1)], 2) == 4  # 2 + 2; a task with n < k holds none
    with pytest.raises(ValueError):
        clustered_pass_at_k_interval([(3, 4)], k=1)
    with pytest.raises(ValueError):
        clustered_pass_at_k_interval([(3, 1)], k=0)
    with pytest.raises(ValueError):
        clustered_proportion_interval([[0.5], [1.0]], trials=0)


@pytest.mark.parametrize("threshold", [0.5, 0.7, 0.8, 0.95])
def test_clustered_proportion_p_with_a_cap_inverts_the_capped_interval(threshold: float) -> None:
    values = pass_at_k_by_task(ALMOST_ALL_PASS, 4)
    p = clustered_proportion_p(values, threshold, trials=24)
    interval = clustered_pass_at_k_interval(ALMOST_ALL_PASS, 4, 1.0 - 2.0 * p)
    assert interval.low == pytest.approx(threshold, abs=1e-7)


# --- paired difference ---------------------------------------------------------------------------------


def test_paired_difference_hand_worked() -> None:
    # d = [1, 2, 3, 6]: mean 3; squares of deviations 4 + 1 + 0 + 9 = 14; s^2 = 14/3
    # se = sqrt(s^2 / 4) = sqrt(14/12) = 1.0801234
    # t = 3 / 1.0801234 = 2.7774603; df 3; half = 3.1824463 * 1.0801234 = 3.4374349
    # p (df 3, closed form) = 1 - 2 (theta + sin theta cos theta) / pi, theta = atan(t / sqrt 3) = 1.0131975
    result = paired_difference([0.0, 0.0, 0.0, 0.0], [1.0, 2.0, 3.0, 6.0])
    theta = math.atan(2.7774603 / math.sqrt(3))
    p_closed = 1 - 2 * (theta + math.sin(theta) * math.cos(theta)) / math.pi
    assert result.n == 4
    assert result.mean_difference == 3.0
    assert result.t_statistic == pytest.approx(2.7774603, abs=1e-6)
    assert result.p_value == pytest.approx(p_closed, abs=1e-6)
    assert 0.05 < result.p_value < 0.1  # t = 2.78 lies between t_{0.95,3} = 2.353 and t_{0.975,3} = 3.182
    assert result.low == pytest.approx(3 - 3.4374349, abs=1e-6)
    assert result.high == pytest.approx(3 + 3.4374349, abs=1e-6)


def test_paired_difference_two_tasks_cauchy() -> None:
    # d = [1, 3]: mean 2, s = sqrt(2), se = 1, t = 2 on 1 df: p = 1 - 2 atan(2) / pi = 0.2951672
    # interval 2 ± 12.7062047 * 1
    result = paired_difference([0.5, 0.0], [1.5, 3.0])
    assert result.t_statistic == pytest.approx(2.0)
    assert result.p_value == pytest.approx(1 - 2 * math.atan(2.0) / math.pi, abs=1e-10)
    assert result.low == pytest.approx(2 - 12.7062047, abs=1e-6)
    assert result.high == pytest.approx(2 + 12.7062047, abs=1e-6)


def test_paired_difference_sign_and_symmetry() -> None:
    forward = paired_difference([0.6, 0.4, 0.9, 0.2, 0.5], [0.4, 0.3, 0.8, 0.3, 0.1])
    backward = paired_difference([0.4, 0.3, 0.8, 0.3, 0.1], [0.6, 0.4, 0.9, 0.2, 0.5])
    assert forward.mean_difference < 0  # current - baseline
    assert forward.t_statistic == pytest.approx(-backward.t_statistic)
    assert forward.p_value == pytest.approx(backward.p_value)
    assert (forward.low, forward.high) == pytest.approx((-backward.high, -backward.low))
    # the 95% interval excludes 0 exactly when p < 0.05
    assert (forward.high < 0) == (forward.p_value < 0.05)


def test_paired_difference_edges() -> None:
    short = paired_difference([0.5], [0.7])
    assert short.n == 1
    assert short.mean_difference == pytest.approx(0.2)
    assert math.isnan(short.t_statistic) and math.isnan(short.p_value)
    assert (short.low, short.high) == (-math.inf, math.inf)
    empty = paired_difference([], [])
    assert empty.n == 0 and math.isnan(empty.mean_difference)
    shifted = paired_difference([0.0, 1.0, 2.0], [0.5, 1.5, 2.5])
    assert (shifted.mean_difference, shifted.low, shifted.high, shifted.p_value) == (0.5, 0.5, 0.5, 0.0)
    assert shifted.t_statistic == math.inf
    same = paired_difference([0.2, 0.4], [0.2, 0.4])
    assert (same.mean_difference, same.low, same.high, same.p_value) == (0.0, 0.0, 0.0, 1.0)
    with pytest.raises(ValueError, match="values"):
        paired_difference([0.1, 0.2], [0.1])
    with pytest.raises(ValueError, match="finite"):
        paired_difference([0.1, math.nan], [0.1, 0.2])


@pytest.mark.parametrize(
    ("worse", "better", "p"),
    [
        (0, 0, 1.0),
        (1, 0, 1.0),  # one task flipped: no evidence of a direction
        (5, 0, 2 / 32),  # 2 * P(X <= 0), X ~ Bin(5, 1/2)
        (6, 0, 2 / 64),
        (3, 1, 2 * (1 + 4) / 16),
        (2, 10, 2 * (1 + 12 + 66) / 4096),  # symmetric in its arguments
        (10, 10, 1.0),  # 2 * P(X <= 10) > 1, capped
    ],
)
def test_mcnemar_exact_against_hand_worked_binomial_tails(worse: int, better: int, p: float) -> None:
    from pytest_gym_eval.stats.exact_tests import mcnemar_exact

    assert mcnemar_exact(worse, better) == pytest.approx(p, rel=1e-12)
    assert mcnemar_exact(better, worse) == pytest.approx(p, rel=1e-12)
    with pytest.raises(ValueError):
        mcnemar_exact(-1, 2)


# --- Hall's skewness-corrected t -------------------------------------------------------------------------


def _hall_g(t: float, a: float) -> float:
    """Hall (1992)'s transform g(T) = T + a T^2/3 + a^2 T^3/27 + a/6, written out as in the paper."""
    return t + a * t * t / 3 + a * a * t**3 / 27 + a / 6


def test_hall_bounds_hand_worked() -> None:
    # mean -0.1, se 0.05, skewness -1.5, 12 values: a = -1.5 / sqrt(12) = -0.4330127, q = t_{0.975, 11} = 2.2009852
    # g^-1(q): 1 + a (q - a/6) = 1 - 0.4330127 * 2.2731540 = 0.0156955, cube root 0.2503753, 3/a (0.2503753 - 1) =
    # 5.1935525, low = -0.1 - 0.05 * 5.1935525 = -0.3596776
    # g^-1(-q): 1 + a (-q - a/6) = 1.9218045, cube root 1.2432823, 3/a * 0.2432823 = -1.6855090, high = -0.0157245
    low, high = hall_t_bounds(-0.1, 0.05, -1.5, 12)
    assert (low, high) == pytest.approx((-0.3596776, -0.0157245), abs=1e-6)
    a, q = -1.5 / math.sqrt(12), student_t_ppf(0.975, 11)
    assert _hall_g((-0.1 - low) / 0.05, a) == pytest.approx(q)  # the bounds invert g at ±q
    assert _hall_g((-0.1 - high) / 0.05, a) == pytest.approx(-q)


def test_hall_bounds_without_skew_are_the_t_interval_and_skew_widens_its_long_side() -> None:
    t = student_t_ppf(0.975, 11) * 0.05
    assert hall_t_bounds(-0.1, 0.05, 0.0, 12) == pytest.approx((-0.1 - t, -0.1 + t))
    low, high = hall_t_bounds(0.0, 1.0, -0.8, 20)  # a long lower tail: the interval reaches further down
    mirrored = hall_t_bounds(0.0, 1.0, 0.8, 20)
    assert -low > high > 0.0
    assert mirrored == pytest.approx((-high, -low))
    assert hall_t_bounds(0.3, 0.0, -2.0, 5) == (0.3, 0.3)


@pytest.mark.parametrize(
    ("n", "se", "skew", "confidence"),
    [(1, 0.1, 0.0, 0.95), (5, -0.1, 0.0, 0.95), (5, 0.1, math.nan, 0.95), (5, 0.1, 0.0, 1.0)],
)
def test_hall_bounds_reject_bad_input(n: int, se: float, skew: float, confidence: float) -> None:
    with pytest.raises(ValueError):
        hall_t_bounds(0.0, se, skew, n, confidence)


def test_skew_corrected_mean_interval_widens_only_a_skewed_side() -> None:
    # Per-task means 0 (eight tasks), -1/2 and -1 (a rare one-sided drop, two repeats): mean -0.15; deviations 0.15
    # (x8), -0.35, -0.85: s^2 = (8 * 0.0225 + 0.1225 + 0.7225) / 9 = 0.1138889, se = sqrt(0.1138889 / 10) = 0.1067187;
    # m3 = (8 * 0.003375 - 0.042875 - 0.614125) / 10 = -0.063, skewness = -0.063 / 0.1138889^1.5 = -1.6391
    tasks = [[0.0, 0.0]] * 8 + [[0.0, -1.0], [-1.0, -1.0]]
    plain = mean_interval(tasks)
    corrected = mean_interval(tasks, skew_corrected=True)
    skewness = -0.063 / 0.1138889**1.5
    assert skewness == pytest.approx(-1.6391, abs=1e-4)
    hall = hall_t_bounds(-0.15, math.sqrt(0.1138889 / 10), skewness, 10)
    assert (corrected.low, corrected.high) == pytest.approx((hall[0], plain.high), abs=1e-6)
    assert corrected.low < plain.low - 0.1
    # symmetric per-task means keep the t interval exactly; under SKEW_MIN_TASKS (10) tasks no correction at all
    symmetric = [[0.0], [1.0], [0.5], [0.25], [0.75]] * 2
    assert mean_interval(symmetric, skew_corrected=True) == mean_interval(symmetric)
    assert mean_interval(tasks[2:], skew_corrected=True) == mean_interval(tasks[2:])


# --- Clopper-Pearson, exact binomial test, the task-clustered Clopper-Pearson (Korn & Graubard 1998) ----------


def test_beta_ppf_matches_scipy() -> None:
    # scipy.stats.beta.ppf(0.3, 2.5, 7.25) and beta.ppf(0.975, 0.5, 0.5)
    assert beta_ppf(0.3, 2.5, 7.25) == pytest.approx(0.17173070563432893, abs=1e-12)
    assert beta_ppf(0.975, 0.5, 0.5) == pytest.approx(0.9984586668665639, abs=1e-12)
    with pytest.raises(ValueError):
        beta_ppf(1.0, 1.0, 1.0)
    with pytest.raises(ValueError):
        beta_ppf(0.5, 0.0, 1.0)


def test_clopper_pearson_hand_worked_and_statsmodels() -> None:
    # No success in 12: the upper bound solves (1 - p)^12 = 0.025, p = 1 - 0.025^(1/12) = 0.2646485 (the "rule of
    # three"'s exact form); all 12: its mirror.
    assert clopper_pearson_bounds(0, 12) == (0.0, pytest.approx(1 - 0.025 ** (1 / 12), abs=1e-12))
    assert clopper_pearson_bounds(12, 12) == (pytest.approx(0.025 ** (1 / 12), abs=1e-12), 1.0)
    # statsmodels' proportion_confint(7, 20, method="beta") and (46, 48): the published exact interval.
    assert clopper_pearson_bounds(7, 20) == pytest.approx((0.15390920478454112, 0.5921885345328282), abs=1e-12)
    interval = clopper_pearson_interval(46, 48)
    assert (interval.estimate, interval.n) == (46 / 48, 48)
    assert (interval.low, interval.high) == pytest.approx((0.8574590267986226, 0.994913532069967), abs=1e-12)
    assert clopper_pearson_interval(0, 0).n == 0
    with pytest.raises(ValueError):
        clopper_pearson_bounds(3.0, 2.0)
    with pytest.raises(ValueError):
        clopper_pearson_interval(-1, 4)


def test_binomial_test_p_is_the_exact_tail_and_inverts_clopper_pearson() -> None:
    # scipy: binomtest(46, 48, 0.8, alternative="greater").pvalue; binom.cdf(3, 20, 0.4)
    assert binomial_test_p(46, 48, 0.8) == pytest.approx(0.0018621122240773111, rel=1e-9)
    assert binomial_test_p(3, 20, 0.4) == pytest.approx(0.01596116279000825, rel=1e-9)
    assert binomial_test_p(3, 20, 0.15) == 0.5 and binomial_test_p(0, 0, 0.5) == 1.0
    assert binomial_test_p(3, 20, 0.0) == 0.0
    p = binomial_test_p(46, 48, 0.8)
    assert clopper_pearson_interval(46, 48, 1.0 - 2.0 * p).low == pytest.approx(0.8, abs=1e-9)


# 10 tasks x 4 repeats, 35 of 40 passing: three tasks with one failure, one with two, six with none.
TEN_TASKS = [[1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 1.0, 0.0], [1.0, 1.0, 1.0, 1.0], [1.0, 0.0, 1.0, 1.0], [1.0] * 4,
             [0.0, 1.0, 1.0, 1.0], [1.0] * 4, [1.0] * 4, [1.0, 1.0, 0.0, 0.0], [1.0] * 4]  # fmt: skip


def test_clustered_proportion_interval_hand_worked() -> None:
    # x̄ = 0.875; task sums minus 4 x̄: 0.5 x 6, -0.5 x 3, -1.5: Σ = 6 * 0.25 + 3 * 0.25 + 2.25 = 4.5, se² = 10/9 *
    # 4.5 / 1600 = 0.003125 (the t interval's); n_eff = 0.875 * 0.125 / 0.003125 = 35; n* = 35 (1.959964 /
    # 2.262157)^2 = 26.27355; x = 0.875 n* = 22.98935; bounds B(0.025; x, n* - x + 1) and B(0.975; x + 1, n* - x)
    # (scipy's beta.ppf: 0.6876959803972379, 0.9707785099002374). The t interval: [0.7485, 1.0015].
    interval = clustered_proportion_interval(TEN_TASKS)
    assert (interval.estimate, interval.n) == (0.875, 10)
    assert (interval.low, interval.high) == pytest.approx((0.6876959803972379, 0.9707785099002374), abs=1e-10)
    t = mean_interval(TEN_TASKS)
    assert (t.low, t.high) == pytest.approx((0.7485415702048789, 1.001458429795121), abs=1e-10)


def test_clustered_proportion_interval_with_one_rollout_a_task_is_clopper_pearson_on_fewer_rollouts() -> None:
    # One rollout a task: se² = p (1 - p) / (T - 1), so n_eff = T - 1, then n* = (T - 1) (z / t_{T-1})^2.
    values = [[1.0]] * 14 + [[0.0]] * 6
    n_star = 19 * (NormalDist().inv_cdf(0.975) / student_t_ppf(0.975, 19)) ** 2
    interval = clustered_proportion_interval(values)
    assert (interval.low, interval.high) == pytest.approx(clopper_pearson_bounds(0.7 * n_star, n_star), abs=1e-12)


def test_a_sample_that_all_agrees_is_not_certain() -> None:
    # 12 tasks x 4 repeats all 1: the t interval is [1, 1], so a lower-bound gate at 0.99 PASSED on 48 rollouts.
    # Now the rollouts bound it: n* = 48 (1.959964 / 2.200985)^2 = 38.06, lower bound 0.025^(1/n*) = 0.907633.
    ones = [[1.0] * 4 for _ in range(12)]
    assert mean_interval(ones).low == 1.0
    interval = clustered_proportion_interval(ones)
    assert interval.high == 1.0
    assert interval.low == pytest.approx(0.9076330964290057, abs=1e-10)
    zeros = clustered_proportion_interval([[0.0] * 4 for _ in range(12)])
    assert (zeros.low, zeros.high) == (0.0, pytest.approx(1.0 - 0.9076330964290057, abs=1e-10))


def test_clustered_proportion_interval_edges_and_errors() -> None:
    assert math.isnan(clustered_proportion_interval([]).estimate)
    one = clustered_proportion_interval([[1.0, 0.0], []])
    assert (one.estimate, one.low, one.high, one.n) == (0.5, -math.inf, math.inf, 1)
    with pytest.raises(ValueError):
        clustered_proportion_interval([[0.5], [1.5]])
    with pytest.raises(ValueError):
        clustered_proportion_interval([[0.5], [math.nan]])
    # fractional rewards that hardly vary: a huge effective sample, capped, and a narrow interval around the mean
    narrow = clustered_proportion_interval([[0.97, 0.9701], [0.9702, 0.97]] * 6)
    assert 0.9695 < narrow.low < narrow.estimate < narrow.high < 0.9705


@pytest.mark.parametrize("threshold", [0.5, 0.7, 0.8, 0.95, 0.99])
def test_clustered_proportion_p_inverts_the_interval(threshold: float) -> None:
    p = clustered_proportion_p(TEN_TASKS, threshold)
    assert 0.0 < p < 0.5
    interval = clustered_proportion_interval(TEN_TASKS, 1.0 - 2.0 * p)
    assert min(abs(interval.low - threshold), abs(interval.high - threshold)) < 1e-8


def test_clustered_proportion_p_edges() -> None:
    assert clustered_proportion_p(TEN_TASKS, 0.875) == 0.5
    assert clustered_proportion_p([[1.0]], 0.5) == 1.0
    assert clustered_proportion_p(TEN_TASKS, 1.5) == 0.0
    with pytest.raises(ValueError):
        clustered_proportion_p(TEN_TASKS, math.nan)
