"""MOVER on gains and losses (pytest_gym_eval.stats.paired_interval) against hand-worked values."""

from __future__ import annotations

import math

import pytest

from pytest_gym_eval.stats.distributions import student_t_ppf
from pytest_gym_eval.stats.intervals import Interval, clustered_proportion_interval
from pytest_gym_eval.stats.paired_interval import gain_loss_interval

# 10 tasks x 4 pairs: three tasks lose once, one twice, six never (5 of 40 pairs lost)
DROP = [[-1.0, 0.0, 0.0, 0.0]] * 3 + [[-1.0, -1.0, 0.0, 0.0]] + [[0.0] * 4] * 6


def test_without_gains_the_lower_bound_is_the_single_policy_bound_of_the_losses() -> None:
    # losses: 5 of 40, the mirror of clustered_proportion_interval's 35 of 40 example, [0.6877, 0.9708] -> [0.0292,
    # 0.3123]; gains: 0 of 40 without spread, n* = 40 (1.95996 / t_0.975,9)^2 = 30.0269, upper 1 - 0.025^(1/n*)
    n_star = 40 * (1.959964 / student_t_ppf(0.975, 9)) ** 2
    assert n_star == pytest.approx(30.0269, abs=1e-4)
    gain_high = 1 - 0.025 ** (1 / n_star)
    assert gain_high == pytest.approx(0.1156059, abs=1e-6)
    interval = gain_loss_interval(DROP)
    assert (interval.estimate, interval.n) == (pytest.approx(-0.125), 10)
    assert interval.low == pytest.approx(-0.3123040, abs=1e-6)
    assert interval.low == pytest.approx(clustered_proportion_interval([[1.0 + d for d in t] for t in DROP]).low - 1)
    # r = 0 (the gains have no spread): high = -0.125 + sqrt(0.1156059^2 + (0.125 - 0.0292215)^2)
    assert interval.high == pytest.approx(-0.125 + math.hypot(gain_high, 0.125 - 0.0292215), abs=1e-6)
    assert interval.high == pytest.approx(0.0251274, abs=1e-6)


def test_gains_and_losses_combine_with_their_correlation_over_tasks() -> None:
    # one clean task gains once: per-task mean gains 0 x 9, 0.25 (mean 0.025) and losses 0.25 x 3, 0.5, 0 x 6
    # (mean 0.125): sxy = 0 - 10 * 0.025 * 0.125 = -0.03125, sxx = 0.0625 - 0.00625 = 0.05625,
    # syy = 0.4375 - 0.15625 = 0.28125, r = -0.03125 / sqrt(0.05625 * 0.28125) = -0.2484520
    mixed = [*DROP[:9], [1.0, 0.0, 0.0, 0.0]]
    gain = clustered_proportion_interval([[max(d, 0.0) for d in t] for t in mixed])
    loss = clustered_proportion_interval([[max(-d, 0.0) for d in t] for t in mixed])
    assert (gain.low, gain.high) == pytest.approx((0.0001956, 0.1617250), abs=1e-6)
    assert (loss.low, loss.high) == pytest.approx((0.0292215, 0.3123040), abs=1e-6)
    r = -0.03125 / math.sqrt(0.05625 * 0.28125)
    assert r == pytest.approx(-0.2484520, abs=1e-6)
    a, b = 0.025 - gain.low, loss.high - 0.125
    low = -0.1 - math.sqrt(a * a + b * b - 2 * r * a * b)
    a, b = gain.high - 0.025, 0.125 - loss.low
    high = -0.1 + math.sqrt(a * a + b * b - 2 * r * a * b)
    interval = gain_loss_interval(mixed)
    assert (interval.estimate, interval.low, interval.high) == pytest.approx((-0.1, low, high))
    assert (interval.low, interval.high) == pytest.approx((-0.2949530, 0.0854033), abs=1e-6)


def test_the_interval_mirrors_when_gains_and_losses_swap() -> None:
    interval = gain_loss_interval(DROP)
    mirrored = gain_loss_interval([[-d for d in t] for t in DROP])
    assert (mirrored.estimate, mirrored.low, mirrored.high) == pytest.approx(
        (-interval.estimate, -interval.high, -interval.low)
    )


def test_bounds_stay_within_the_range_of_a_difference_and_fractional_differences_count() -> None:
    wide = gain_loss_interval([[1.0, -1.0], [-1.0], [1.0, 1.0]])  # 3 tasks, large spread
    assert -1.0 <= wide.low < wide.estimate < wide.high <= 1.0
    half = gain_loss_interval([[0.5, -0.25], [0.0, -0.5], [0.25], [0.0, 0.0]])
    assert half.estimate == pytest.approx((0.5 - 0.25 - 0.5 + 0.25) / 7)
    assert half.low < half.estimate < half.high


def test_edges_and_refusals() -> None:
    none = gain_loss_interval([[], []])
    assert math.isnan(none.estimate) and (none.low, none.high, none.n) == (-math.inf, math.inf, 0)
    assert gain_loss_interval([[0.0, -1.0]]) == Interval(-0.5, -math.inf, math.inf, 1)
    for bad in (1.5, -1.01, math.nan, math.inf):
        with pytest.raises(ValueError, match=r"\[-1, 1\]"):
            gain_loss_interval([[0.0], [bad]])
    with pytest.raises(ValueError, match="confidence"):
        gain_loss_interval(DROP, confidence=1.0)
