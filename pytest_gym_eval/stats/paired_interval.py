"""The interval of a paired difference of rewards in [0, 1] from its gains and losses (issue 38, item 3).

Shapes: ``differences_by_task[t][r]`` is the difference candidate - baseline of pair r of task t, in [-1, 1].
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from pytest_gym_eval.stats.intervals import Interval, clustered_proportion_interval


def _correlation(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Pearson's correlation of two equally long samples; 0 when either has no spread."""
    mean_x, mean_y = math.fsum(xs) / len(xs), math.fsum(ys) / len(ys)
    sxx = math.fsum((x - mean_x) ** 2 for x in xs)
    syy = math.fsum((y - mean_y) ** 2 for y in ys)
    if sxx <= 0.0 or syy <= 0.0:
        return 0.0
    sxy = math.fsum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True))
    return max(-1.0, min(1.0, sxy / math.sqrt(sxx * syy)))


def gain_loss_interval(differences_by_task: Sequence[Sequence[float]], confidence: float = 0.95) -> Interval:
    """The mean of paired differences d in [-1, 1] over all pairs, with the MOVER interval of its gains and losses
    (Zou & Donner 2008, "Construction of confidence limits about effect measures: a general approach", Statistics
    in Medicine 27(10), 1693-1702; its paired-proportion case, with Wilson intervals and no clustering, is
    Newcombe 1998's method 10, "Improved confidence intervals for the difference between binomial proportions
    based on paired data", Statistics in Medicine 17(22), 2635-2650).

    Each difference is a gain minus a loss, d = g - l with g = max(d, 0) and l = max(-d, 0), both in [0, 1], so the
    mean difference is Ĝ - L̂, the mean gain minus the mean loss over all pairs. Each gets the task-clustered
    Clopper-Pearson interval of a mean in [0, 1]
    (:func:`~pytest_gym_eval.stats.intervals.clustered_proportion_interval`, Korn & Graubard 1998), [g₁, g₂] and
    [l₁, l₂], whose asymmetry near 0 follows the binomial variance of a rare gain or loss;
    MOVER recovers the variance of each from its bound and combines them:

        low  = (Ĝ - L̂) - sqrt((Ĝ - g₁)² + (l₂ - L̂)² - 2 r (Ĝ - g₁)(l₂ - L̂))
        high = (Ĝ - L̂) + sqrt((g₂ - Ĝ)² + (L̂ - l₁)² - 2 r (g₂ - Ĝ)(L̂ - l₁))

    with r the correlation over tasks of the per-task mean gain and mean loss (0 when either has no spread), the
    tasks being the independent units. Without gains (a rare one-sided drop: every d 0 or -1) the lower bound is
    minus the upper bound of the losses' own interval, the single-policy interval of a rare failure. Bounds are
    clipped to [-1, 1]. E.g. 10 tasks x 4 pairs, five differences -1 (three tasks with one, one with two, six
    with none) and no gain, at 95%: L̂ = 0.125 with losses [0.0292, 0.3123] (the mirror of the single-policy
    example 35 of 40), Ĝ = 0 with gains [0, 0.1156] (0 of n* = 40 (1.95996 / 2.26216)² = 30.03), r = 0, so
    [-0.3123, -0.125 + sqrt(0.1156² + 0.0958²)] = [-0.3123, 0.0251]. With one of the six clean tasks gaining once
    (Ĝ = 0.025, gains [0.0002, 0.1617], r = -0.2485): [-0.2950, 0.0854] around -0.1.
    T = 0 tasks gives estimate nan and bounds ±inf, T = 1 infinite bounds (``n`` of the result: T; empty tasks
    are skipped). Raises ValueError for a difference outside [-1, 1] (or NaN) or a confidence outside (0, 1).
    """
    tasks = [list(task) for task in differences_by_task if len(task) > 0]
    if any(not -1.0 <= d <= 1.0 for task in tasks for d in task):
        raise ValueError("paired differences must lie in [-1, 1] (found one outside, NaN or infinity)")
    gains = [[max(d, 0.0) for d in task] for task in tasks]
    losses = [[max(-d, 0.0) for d in task] for task in tasks]
    gain = clustered_proportion_interval(gains, confidence)
    loss = clustered_proportion_interval(losses, confidence)
    estimate = gain.estimate - loss.estimate
    if len(tasks) < 2:
        return Interval(estimate, -math.inf, math.inf, len(tasks))
    r = _correlation([math.fsum(t) / len(t) for t in gains], [math.fsum(t) / len(t) for t in losses])

    def reach(a: float, b: float) -> float:
        return math.sqrt(max(0.0, a * a + b * b - 2.0 * r * a * b))

    low = estimate - reach(gain.estimate - gain.low, loss.high - loss.estimate)
    high = estimate + reach(gain.high - gain.estimate, loss.estimate - loss.low)
    return Interval(estimate, max(low, -1.0), min(high, 1.0), len(tasks))
