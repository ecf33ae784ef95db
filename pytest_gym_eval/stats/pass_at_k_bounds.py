"""pass@k's interval: the mean over tasks of the unbiased per-task pass@k estimates (Chen et al. 2021) with the
task-clustered Clopper-Pearson interval (:func:`~pytest_gym_eval.stats.intervals.clustered_proportion_interval`), its
effective sample capped at the disjoint blocks of k rollouts the tasks hold. ``counts[t] = (n, c)``: the scored
rollouts and passes of task t throughout.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from pytest_gym_eval.stats.intervals import Interval, clustered_proportion_interval, pass_at_k


def pass_at_k_by_task(counts: Sequence[tuple[int, int]], k: int) -> list[list[float]]:
    """One value per task with at least k rollouts, ``[[pass@k]]``
    (:func:`~pytest_gym_eval.stats.intervals.pass_at_k`), as the clustered intervals take values by task. Raises
    ValueError on invalid counts or k < 1."""
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    for n, c in counts:
        if n < 0 or not 0 <= c <= n:
            raise ValueError(f"need 0 <= c <= n for every task, got n={n}, c={c}")
    return [[pass_at_k(n, c, k)] for n, c in counts if n >= k]


def pass_at_k_blocks(counts: Sequence[tuple[int, int]], k: int) -> int:
    """The disjoint blocks of k rollouts the tasks with at least k rollouts hold: Σ_t floor(n_t / k). A task's
    pass@k estimate is the U-statistic over its C(n, k) blocks, whose variance is at most that of the mean over its
    floor(n / k) disjoint blocks (Hoeffding 1963, "Probability inequalities for sums of bounded random variables",
    JASA 58, §5), so the estimates are worth at least these many independent 0/1 trials."""
    return sum(n // k for n, _ in counts if n >= k)


def clustered_pass_at_k_interval(counts: Sequence[tuple[int, int]], k: int, confidence: float = 0.95) -> Interval:
    """Mean over tasks of pass@k with the task-clustered Clopper-Pearson interval
    (:func:`~pytest_gym_eval.stats.intervals.clustered_proportion_interval`) on the per-task estimates
    (:func:`pass_at_k_by_task`), its effective sample capped at the disjoint blocks of k rollouts
    (:func:`pass_at_k_blocks`), which it also uses when every task has the same estimate.

    Without the cap a few tasks just short of 1 (pass@4 = 1 - 1/70 from 4 failures in 8) give a tiny standard error
    and an effective sample far beyond the rollouts (839 from 12 tasks x 8 repeats): the bound then clears a true
    pass@4 of 0.992 15-26% of the time (the Student t interval, zero-width when every task's pass@k is 1, 20-90%).
    E.g. k = 4, 12 tasks x 8 repeats, 11 passing every rollout and one 4 of 8: estimates 1 (11 times) and 69/70,
    mean 0.99881, se = (1/70) / 12, n_eff = 839, capped at 12 x 2 = 24 blocks, n* = 24 (1.95996 / 2.20099)² = 19.03,
    bounds [0.8216, 1] (uncapped [0.9922, 1.0000]; the t interval [0.9962, 1]); all 12 passing every rollout: the
    24 blocks, lower bound 0.025^(1 / 19.03) = 0.8238. ``n`` of the result: the tasks used; none gives estimate nan
    and infinite bounds, one infinite bounds. Raises ValueError on invalid counts, k < 1 or a bad confidence."""
    values = pass_at_k_by_task(counts, k)
    if not values:
        if not 0.0 < confidence < 1.0:
            raise ValueError(f"confidence must lie in (0, 1), got {confidence!r}")
        return Interval(math.nan, -math.inf, math.inf, 0)
    return clustered_proportion_interval(values, confidence, trials=pass_at_k_blocks(counts, k))
