"""Confidence intervals and tests for evaluation rewards (standard library only).

Shapes used throughout: ``rewards_by_task[t][r]`` is the reward (a float, any scale) of rollout ``r``
of task ``t``; tasks are the independent units, the rollouts of one task are not independent.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

from pytest_gym_eval.stats.distributions import beta_ppf, regularized_beta, student_t_ppf, t_upper_tail

SKEW_MIN_TASKS = 10
"""Fewest tasks for which ``mean_interval(..., skew_corrected=True)`` corrects for skewness: Hall's correction is a
1/sqrt(n) expansion, and below 10 tasks the sample's skewness is too noisy to estimate (4 tasks at -1, -1, -1,
-0.5 would widen the upper bound from -0.48 to +0.73)."""


@dataclass(frozen=True)
class Interval:
    """A point estimate with a two-sided confidence interval; ``n`` counts the independent units."""

    estimate: float
    low: float
    high: float
    n: int

    def contains(self, threshold: float) -> bool:
        """True when ``low <= threshold <= high`` (the data cannot tell ``threshold`` apart)."""
        return self.low <= threshold <= self.high


@dataclass(frozen=True)
class PairedComparison:
    """Result of :func:`paired_difference`; ``mean_difference`` is current minus baseline."""

    n: int
    mean_difference: float
    low: float
    high: float
    t_statistic: float
    p_value: float


def _check_confidence(confidence: float) -> None:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence!r}")


def _check_counts(successes: int, n: int, p0: float | None = None) -> None:
    """Raise ValueError unless 0 <= successes <= n (and, when given, ``p0`` lies in [0, 1])."""
    if n < 0 or not 0 <= successes <= n:
        raise ValueError(f"need 0 <= successes <= n, got successes={successes}, n={n}")
    if p0 is not None and not 0.0 <= p0 <= 1.0:
        raise ValueError(f"p0 must lie in [0, 1], got {p0!r}")


def wilson_interval(successes: int, n: int, confidence: float = 0.95) -> Interval:
    """Wilson score interval for a binomial proportion (Wilson 1927; Agresti & Coull 1998).

    estimate = successes / n; bounds (p̂ + z²/2n ± z·sqrt(p̂(1-p̂)/n + z²/4n²)) / (1 + z²/n), clamped to
    [0, 1], with z = Φ⁻¹((1 + confidence) / 2). n == 0 gives estimate nan and bounds [0, 1]; ``n`` of
    the result counts trials. Raises ValueError when n < 0, successes outside [0, n] or a bad confidence.
    """
    _check_confidence(confidence)
    _check_counts(successes, n)
    if n == 0:
        return Interval(math.nan, 0.0, 1.0, 0)
    z = NormalDist().inv_cdf((1.0 + confidence) / 2.0)
    p = successes / n
    denominator = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1.0 - p) / n + z * z / (4 * n * n)) / denominator
    # The bounds are exactly 0 (no successes) and 1 (no failures); elsewhere clamp rounding noise.
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == n else min(1.0, centre + half)
    return Interval(p, low, high, n)


def _t_bounds(estimate: float, standard_error: float, df: int, confidence: float) -> tuple[float, float]:
    if standard_error == 0.0:
        return estimate, estimate
    half = student_t_ppf((1.0 + confidence) / 2.0, df) * standard_error
    return estimate - half, estimate + half


def _mean_t_interval(values: Sequence[float], confidence: float) -> Interval:
    """Student t interval over independent values: mean ± t_{(1+c)/2, n-1} · s / sqrt(n)."""
    n = len(values)
    if n == 0:
        return Interval(math.nan, -math.inf, math.inf, 0)
    mean = math.fsum(values) / n
    if n < 2:
        return Interval(mean, -math.inf, math.inf, n)
    if all(v == values[0] for v in values):
        return Interval(values[0], values[0], values[0], n)
    variance = math.fsum((v - mean) ** 2 for v in values) / (n - 1)
    low, high = _t_bounds(mean, math.sqrt(variance / n), n - 1, confidence)
    return Interval(mean, low, high, n)


def hall_t_bounds(
    estimate: float, standard_error: float, skewness: float, n: int, confidence: float = 0.95
) -> tuple[float, float]:
    """Bounds of a mean from Hall's skewness-corrected t (P. Hall 1992, "On the removal of skewness by
    transformation", JRSS B 54(1), 221-228; after N. J. Johnson 1978, JASA 73, 536-544).

    T = (x̄ - μ) / se is skewed when the values are (a rare one-sided drop: T's right tail is long). Hall's
    monotone transform g(T) = T + a T²/3 + a² T³/27 + a/6 with a = skew / sqrt(n) (skew: the values' skewness) is
    nearly Student t (n-1 df; Student rather than normal keeps the symmetric case as wide as the plain t
    interval), and g⁻¹(x) = (3/a) ((1 + a (x - a/6))^(1/3) - 1), so μ lies in
    [x̄ - se · g⁻¹(q), x̄ - se · g⁻¹(-q)] with q = t_{(1+c)/2, n-1}. skew = 0 gives the t interval. E.g. x̄ = -0.1,
    se = 0.05, skew = -1.5, n = 12, 95%: [-0.3597, -0.0157] (the t interval: [-0.2100, 0.0100]). Raises ValueError
    for n < 2, a negative or non-finite standard error or skewness, or a bad confidence.
    """
    _check_confidence(confidence)
    if n < 2 or not (math.isfinite(standard_error) and standard_error >= 0.0 and math.isfinite(skewness)):
        raise ValueError(
            f"need n >= 2, a finite standard error >= 0 and skewness, got {n}, {standard_error}, {skewness}"
        )
    q = student_t_ppf((1.0 + confidence) / 2.0, n - 1)
    a = skewness / math.sqrt(n)

    def inverse(x: float) -> float:
        if abs(a) < 1e-12:
            return x
        v = 1.0 + a * (x - a / 6.0)
        return 3.0 / a * (math.copysign(abs(v) ** (1.0 / 3.0), v) - 1.0)

    return estimate - standard_error * inverse(q), estimate - standard_error * inverse(-q)


def mean_interval(
    rewards_by_task: Sequence[Sequence[float]],
    confidence: float = 0.95,
    *,
    clip: bool = False,
    skew_corrected: bool = False,
) -> Interval:
    """Mean reward over all rollouts with a task-clustered confidence interval.

    ``rewards_by_task[t][r]``: reward of rollout r of task t (tasks may have different repeat counts;
    empty tasks are skipped). estimate = mean over ALL N rollouts (the mean NeMo Gym reports). Standard
    error = sqrt(T/(T-1) · Σ_t (Σ_r (x_tr - x̄))² / N²), the cluster-robust (CR1) error clustered by task
    (Miller 2024, "Adding Error Bars to Evals", arXiv:2411.00640, §2), with Student t on T-1 df, T =
    tasks with >= 1 rollout (= ``n`` of the result). With equal repeats this is exactly the t interval
    over per-task means. T < 2 gives infinite bounds (T = 0 also estimate nan); identical rewards give a
    zero-width interval. With ``clip``, when every reward lies in [0, 1] (a verifier's usual range, so the mean
    cannot leave it) finite bounds are clipped to [0, 1]. With ``skew_corrected`` each bound is the wider of the t
    interval's and :func:`hall_t_bounds`' (the skewness m3 / s³ of the task totals u_t = Σ_r (x_tr - x̄), m3 =
    Σ u³ / T, s² = Σ u² / (T-1); with equal repeats that of the per-task means) when T >= :data:`SKEW_MIN_TASKS`:
    a skewed sample widens its long side, a symmetric one keeps the t interval. Raises ValueError for non-finite
    rewards or a bad confidence.
    """
    _check_confidence(confidence)
    tasks = [list(task) for task in rewards_by_task if len(task) > 0]
    flat = [x for task in tasks for x in task]
    if any(not math.isfinite(x) for x in flat):
        raise ValueError("rewards must be finite numbers (found NaN or infinity)")
    n_tasks, n_rollouts = len(tasks), len(flat)
    if n_tasks == 0:
        return Interval(math.nan, -math.inf, math.inf, 0)
    mean = math.fsum(flat) / n_rollouts
    if n_tasks < 2:
        interval = Interval(mean, -math.inf, math.inf, n_tasks)
    elif all(x == flat[0] for x in flat):
        interval = Interval(flat[0], flat[0], flat[0], n_tasks)
    else:
        cluster_sum_squares = math.fsum(math.fsum(x - mean for x in task) ** 2 for task in tasks)
        variance = n_tasks / (n_tasks - 1) * cluster_sum_squares / n_rollouts**2
        low, high = _t_bounds(mean, math.sqrt(variance), n_tasks - 1, confidence)
        if skew_corrected and n_tasks >= SKEW_MIN_TASKS:
            totals = [math.fsum(x - mean for x in task) for task in tasks]
            spread = math.sqrt(math.fsum(u * u for u in totals) / (n_tasks - 1))
            skewness = math.fsum(u**3 for u in totals) / n_tasks / spread**3 if spread > 0.0 else 0.0
            hall_low, hall_high = hall_t_bounds(mean, math.sqrt(variance), skewness, n_tasks, confidence)
            low, high = min(low, hall_low), max(high, hall_high)
        interval = Interval(mean, low, high, n_tasks)
    return _clipped(interval) if clip and all(0.0 <= x <= 1.0 for x in flat) else interval


def clopper_pearson_bounds(successes: float, n: float, confidence: float = 0.95) -> tuple[float, float]:
    """The Clopper-Pearson ("exact") interval of a proportion (Clopper & Pearson 1934, Biometrika 26(4)):
    [B(alpha/2; x, n - x + 1), B(1 - alpha/2; x + 1, n - x)] with B the Beta quantile (:func:`beta_ppf`), 0 when
    x = 0 and 1 when x = n. x and n may be fractional (an effective sample, :func:`clustered_proportion_interval`).
    Each side misses a binomial proportion at most alpha/2 of the time. E.g. 7 of 20 at 95%: [0.1539, 0.5922].
    Raises ValueError for n <= 0, x outside [0, n] or a bad confidence."""
    _check_confidence(confidence)
    if not (n > 0.0 and 0.0 <= successes <= n):
        raise ValueError(f"need n > 0 and 0 <= successes <= n, got successes={successes!r}, n={n!r}")
    alpha = 1.0 - confidence
    low = 0.0 if successes == 0.0 else beta_ppf(alpha / 2.0, successes, n - successes + 1.0)
    high = 1.0 if successes == n else beta_ppf(1.0 - alpha / 2.0, successes + 1.0, n - successes)
    return low, high


def clopper_pearson_interval(successes: int, n: int, confidence: float = 0.95) -> Interval:
    """:func:`clopper_pearson_bounds` as an :class:`Interval` of the proportion ``successes / n`` (``n`` of the result:
    the trials). n == 0 gives estimate nan and bounds [0, 1]. Raises ValueError for successes outside [0, n] or a
    bad confidence."""
    _check_confidence(confidence)
    _check_counts(successes, n)
    if n == 0:
        return Interval(math.nan, 0.0, 1.0, 0)
    low, high = clopper_pearson_bounds(successes, n, confidence)
    return Interval(successes / n, low, high, n)


def binomial_test_p(successes: int, n: int, p0: float) -> float:
    """One-sided p-value of the exact binomial test of a proportion against ``p0``, in the direction of the estimate:
    P(X >= successes) when successes / n > p0, P(X <= successes) when below, X ~ Binomial(n, p0) (computed as
    I_{p0}(x, n - x + 1) and 1 - I_{p0}(x + 1, n - x)); the test the Clopper-Pearson interval inverts, so it excludes
    p0 at confidence c exactly when 2 p <= 1 - c. E.g. 46 of 48 against 0.8: P(X >= 46) = 0.001862. 0.5 for an
    estimate on p0, 1.0 for n == 0; p0 of 0 or 1 gives 0.0 when the estimate differs from it. Raises ValueError as
    :func:`clopper_pearson_interval`, or for p0 outside [0, 1]."""
    _check_counts(successes, n, p0)
    if n == 0:
        return 1.0
    estimate = successes / n
    if estimate == p0:
        return 0.5
    if p0 in (0.0, 1.0):
        return 0.0
    if estimate > p0:
        return regularized_beta(successes, n - successes + 1.0, p0, 1.0 - p0)
    return 1.0 - regularized_beta(successes + 1.0, n - successes, p0, 1.0 - p0)


MAX_EFFECTIVE_N = 1e6
"""The largest effective sample :func:`clustered_proportion_interval` uses: fractional rewards that hardly vary
(0.970 to 0.971) give a tiny standard error and an effective sample far beyond the rollouts; capped, the bounds are
still within about 0.001 of the mean, and the incomplete beta function stays within its range."""


def _effective_sample(
    values_by_task: Sequence[Sequence[float]], trials: float | None = None
) -> tuple[float, float, int, float]:
    """(mean, effective rollouts n_eff, tasks, rollouts) of :func:`clustered_proportion_interval`; ``trials`` (when
    given, > 0) caps n_eff and stands in for the rollouts when there is no spread."""
    tasks = [list(task) for task in values_by_task if len(task) > 0]
    flat = [x for task in tasks for x in task]
    if any(not (math.isfinite(x) and 0.0 <= x <= 1.0) for x in flat):
        raise ValueError("values must lie in [0, 1] (found one outside, NaN or infinity)")
    if trials is not None and not trials > 0.0:
        raise ValueError(f"trials must be > 0, got {trials!r}")
    mean, error, n_tasks = clustered_standard_error(tasks)
    rollouts = float(len(flat)) if trials is None else trials
    if n_tasks >= 2 and 0.0 < mean < 1.0 and error > 1e-9 * math.sqrt(mean * (1.0 - mean) / rollouts):
        cap = MAX_EFFECTIVE_N if trials is None else min(trials, MAX_EFFECTIVE_N)
        return mean, min(mean * (1.0 - mean) / (error * error), cap), n_tasks, rollouts
    return mean, rollouts, n_tasks, rollouts  # no spread between tasks (up to rounding): the rollouts themselves


def clustered_proportion_interval(
    values_by_task: Sequence[Sequence[float]], confidence: float = 0.95, *, trials: float | None = None
) -> Interval:
    """The mean of values in [0, 1] (rewards, or 0/1 pass flags) over all rollouts, with a Clopper-Pearson interval
    on the task-clustered effective sample (Korn & Graubard 1998, "Confidence intervals for proportions with small
    expected number of positive counts estimated from survey data", Survey Methodology 24(2), 193-201).

    ``values_by_task[t][r]``: value of rollout r of task t (empty tasks skipped). With x̄ the mean over all N
    rollouts and se its CR1 standard error clustered by task (:func:`clustered_standard_error`, the mean reward's
    t interval's), the effective sample is n_eff = x̄ (1 - x̄) / se² (N / the design effect: the rollouts a
    binomial sample would need for the same precision; N when se is 0 or x̄ is 0 or 1; at most
    :data:`MAX_EFFECTIVE_N`), shrunk for the T - 1
    degrees of freedom of se: n* = n_eff (z_{(1+c)/2} / t_{(1+c)/2, T-1})²; the bounds are
    :func:`clopper_pearson_bounds` of x̄ n* successes in n*. Near 0 or 1 its binomial variance x̄ (1 - x̄) makes
    the bound on the far side reach further than the t interval's (rare failures: the lower bound), where the t
    interval's errs up to twice its alpha/2; a set of rollouts that all agree gets a bound from its N rollouts
    rather than a zero width. E.g. 10 tasks x 4 repeats, 35 of 40 passing (three tasks with one failure, one with
    two, six with none) at 95%: x̄ = 0.875, se = 0.0559 (se² = 0.003125), n_eff = 35, n* = 35 (1.95996 / 2.26216)²
    = 26.274, bounds [0.6877, 0.9708] (the t interval: [0.7485, 1.0015]). T = 0 gives estimate nan
    and bounds ±inf, T = 1 infinite bounds (``n`` of the result: T). ``trials``: the most independent 0/1 trials the
    values stand for (pass@k's disjoint blocks of k rollouts:
    :func:`~pytest_gym_eval.stats.pass_at_k_bounds.clustered_pass_at_k_interval`), which then caps n_eff and
    replaces N when there is no spread; None: the rollouts, uncapped. Raises ValueError for a value outside [0, 1],
    ``trials`` <= 0 or a bad confidence.
    """
    _check_confidence(confidence)
    mean, n_eff, n_tasks, _ = _effective_sample(values_by_task, trials)
    if n_tasks < 2:
        return Interval(mean, -math.inf, math.inf, n_tasks)
    z = NormalDist().inv_cdf((1.0 + confidence) / 2.0)
    n_star = n_eff * (z / student_t_ppf((1.0 + confidence) / 2.0, n_tasks - 1)) ** 2
    low, high = clopper_pearson_bounds(min(n_star, max(0.0, mean * n_star)), n_star, confidence)
    return Interval(mean, low, high, n_tasks)


def clustered_mean_interval(values_by_task: Sequence[Sequence[float]], confidence: float = 0.95) -> Interval:
    """The mean over all rollouts of values by task, with the task-clustered Clopper-Pearson interval
    (:func:`clustered_proportion_interval`) when every value lies in [0, 1], else Student t with the standard error
    clustered by task (:func:`mean_interval`: a mean of values on any scale has no binomial variance to borrow).
    ``values_by_task[t][r]`` as :func:`mean_interval`'s. Raises ValueError for non-finite values or a bad
    confidence."""
    if all(0.0 <= x <= 1.0 for task in values_by_task for x in task):
        return clustered_proportion_interval(values_by_task, confidence)
    return mean_interval(values_by_task, confidence)


def clustered_proportion_p(
    values_by_task: Sequence[Sequence[float]], threshold: float, *, trials: float | None = None
) -> float:
    """One-sided p-value of :func:`clustered_proportion_interval` against ``threshold``, in the direction of the
    estimate: half the largest alpha at which the interval at confidence 1 - alpha still reaches the threshold
    (both n* and the bounds depend on alpha; found by bisection on the t quantile, to about 1e-10), so the
    interval at confidence c excludes the threshold exactly when 2 p <= 1 - c. 0.5 for an estimate on the
    threshold, 1.0 (no evidence) for fewer than two tasks, 0.0 for a threshold outside [0, 1] (no interval reaches
    it). ``trials`` as the interval's. Raises ValueError as the interval does, or for a NaN threshold."""
    if math.isnan(threshold):
        raise ValueError("threshold must not be NaN")
    mean, n_eff, n_tasks, _ = _effective_sample(values_by_task, trials)
    if n_tasks < 2:
        return 1.0
    if not 0.0 <= threshold <= 1.0:
        return 0.0
    if mean == threshold:
        return 0.5
    if mean < threshold:  # the mirror image: Clopper-Pearson is symmetric under x -> n - x
        mean, threshold = 1.0 - mean, 1.0 - threshold
    df = n_tasks - 1

    def excludes(q: float) -> tuple[bool, float]:
        half_alpha = t_upper_tail(q, df)
        n_star = n_eff * (-NormalDist().inv_cdf(max(half_alpha, 1e-300)) / q) ** 2
        x = min(n_star, mean * n_star)
        if threshold <= 0.0:
            return x > 0.0, half_alpha
        # the lower bound B(alpha/2; x, n* - x + 1) reaches past the threshold: I_threshold(x, n* - x + 1) <= alpha/2
        return regularized_beta(x, n_star - x + 1.0, threshold, 1.0 - threshold) <= half_alpha, half_alpha

    low, high = 1e-6, 1e8  # t quantiles: alpha from nearly 1 to nearly 0
    if not excludes(low)[0]:
        return 0.5
    if excludes(high)[0]:
        return excludes(high)[1]
    for _ in range(100):
        mid = math.sqrt(low * high)
        if excludes(mid)[0]:
            low = mid
        else:
            high = mid
        if high / low < 1.0 + 1e-12:
            break
    return excludes(low)[1]


def _clipped(interval: Interval) -> Interval:
    """``interval`` with finite bounds moved into [0, 1] (infinite bounds, meaning no interval could be
    estimated, stay as they are)."""
    if not (math.isfinite(interval.low) and math.isfinite(interval.high)):
        return interval
    return Interval(interval.estimate, max(interval.low, 0.0), min(interval.high, 1.0), interval.n)


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from n rollouts of which c passed (Chen et al. 2021, arXiv:2107.03374, eq. 1).

    1 - C(n-c, k) / C(n, k), evaluated as 1 - Π_{i=n-c+1}^{n} (1 - k/i) to stay stable for large n.
    Raises ValueError when any argument is negative, k < 1, k > n or c > n.
    """
    if n < 0 or c < 0 or k < 1:
        raise ValueError(f"need n >= 0, c >= 0 and k >= 1, got n={n}, c={c}, k={k}")
    if k > n or c > n:
        raise ValueError(f"need k <= n and c <= n, got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))


def pass_at_k_interval(
    counts: Sequence[tuple[int, int]], k: int, confidence: float = 0.95, *, clip: bool = False
) -> Interval:
    """Mean over tasks of pass@k with a Student t interval over the per-task values (T-1 df).

    ``counts[t] = (n, c)``: rollouts and passes of task t. Tasks with n < k are excluded; ``n`` of the
    result is the number of tasks used. None used gives estimate nan and infinite bounds; one gives
    infinite bounds. With ``clip`` finite bounds are clipped to [0, 1], the range of pass@k. Raises ValueError
    on invalid counts or k < 1.
    """
    _check_confidence(confidence)
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    for n, c in counts:
        if n < 0 or not 0 <= c <= n:
            raise ValueError(f"need 0 <= c <= n for every task, got n={n}, c={c}")
    interval = _mean_t_interval([pass_at_k(n, c, k) for n, c in counts if n >= k], confidence)
    return _clipped(interval) if clip else interval


def paired_difference(
    baseline: Sequence[float], current: Sequence[float], confidence: float = 0.95
) -> PairedComparison:
    """Paired t-test on per-task values given in the same task order (Student 1908; Miller 2024 §4).

    d_t = current[t] - baseline[t]; t = mean(d) / (s_d / sqrt(n)) on n-1 df; interval mean(d) ± t_{(1+c)/2}
    · s_d / sqrt(n); p_value two-sided. n < 2: nan statistic and p, infinite bounds (n = 0 also nan mean).
    All differences equal: zero-width interval, t ±inf and p 0.0 (or t 0.0 and p 1.0 when they are 0).
    Raises ValueError when the lengths differ, a value is not finite or the confidence is bad.
    """
    _check_confidence(confidence)
    if len(baseline) != len(current):
        raise ValueError(f"baseline has {len(baseline)} values but current has {len(current)}")
    diffs = [b - a for a, b in zip(baseline, current, strict=True)]
    if any(not math.isfinite(d) for d in diffs):
        raise ValueError("per-task values must be finite numbers")
    n = len(diffs)
    mean = math.fsum(diffs) / n if n else math.nan
    if n < 2:
        return PairedComparison(n, mean, -math.inf, math.inf, math.nan, math.nan)
    if all(d == diffs[0] for d in diffs):
        mean = diffs[0]
        t_stat = math.copysign(math.inf, mean) if mean != 0.0 else 0.0
        return PairedComparison(n, mean, mean, mean, t_stat, 0.0 if mean != 0.0 else 1.0)
    standard_error = math.sqrt(math.fsum((d - mean) ** 2 for d in diffs) / (n - 1) / n)
    low, high = _t_bounds(mean, standard_error, n - 1, confidence)
    t_stat = mean / standard_error
    p_value = min(1.0, 2.0 * t_upper_tail(abs(t_stat), n - 1))
    return PairedComparison(n, mean, low, high, t_stat, p_value)


def t_test_p(estimate: float, threshold: float, standard_error: float, df: float) -> float:
    """One-sided p-value of Student's t test of ``estimate`` against ``threshold``, in the direction the estimate
    lies: P(T_df >= |estimate - threshold| / standard_error). A gate's two-sided interval at confidence c excludes
    the threshold exactly when 2 p <= 1 - c. ``standard_error`` 0 (identical values) gives 0.0, or 1.0 when the
    estimate is the threshold; a nan estimate or df < 1 (fewer than two tasks) gives 1.0 (no evidence). Raises
    ValueError for a negative standard error."""
    if standard_error < 0.0:
        raise ValueError(f"standard error must be >= 0, got {standard_error!r}")
    if math.isnan(estimate) or not df >= 1:
        return 1.0
    effect = abs(estimate - threshold)
    if standard_error == 0.0:
        return 0.0 if effect > 0.0 else 1.0
    return t_upper_tail(effect / standard_error, df)


def score_test_p(successes: int, n: int, p0: float) -> float:
    """One-sided p-value of the score test of a binomial proportion against ``p0``, in the direction of the
    estimate: P(Z >= |successes/n - p0| / sqrt(p0 (1 - p0) / n)) (the test the Wilson interval inverts, so the
    Wilson interval at confidence c excludes p0 exactly when 2 p <= 1 - c). n == 0 gives 1.0; p0 of 0 or 1 gives
    0.0 when the estimate differs from it, else 1.0. Raises ValueError as :func:`wilson_interval`, or for p0
    outside [0, 1]."""
    _check_counts(successes, n, p0)
    if n == 0:
        return 1.0
    effect = abs(successes / n - p0)
    if p0 in (0.0, 1.0):
        return 0.0 if effect > 0.0 else 1.0
    return 1.0 - NormalDist().cdf(effect / math.sqrt(p0 * (1.0 - p0) / n))


def holm_levels(p_values: Sequence[float], alpha: float) -> list[float]:
    """The level each of m hypotheses is judged at under Holm's step-down procedure (Holm 1979, "A simple
    sequentially rejective multiple test procedure", Scand. J. Statist. 6(2)), in the order given: sorted by p, the
    i-th smallest (i = 1..m) is tested at alpha / (m - i + 1) while every smaller one was rejected; from the first
    that is not rejected on, each is judged at that first one's level (so none of them is rejected: their p is at
    least as large). Rejecting exactly the hypotheses with p <= their level keeps the chance of rejecting any true
    one at most alpha, whatever their dependence. Ties keep the given order. Raises ValueError for alpha outside
    (0, 1)."""
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha!r}")
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    levels = [0.0] * m
    stopped: float | None = None
    for rank, index in enumerate(order):
        level = alpha / (m - rank) if stopped is None else stopped
        if stopped is None and p_values[index] > level:
            stopped = level
        levels[index] = level
    return levels


def clustered_standard_error(rewards_by_task: Sequence[Sequence[float]]) -> tuple[float, float, int]:
    """(mean, standard error, tasks) of :func:`mean_interval`: the mean over all rollouts and its CR1 standard
    error clustered by task (nan when fewer than two tasks); empty tasks are skipped. With one value per task it
    is the plain s / sqrt(n)."""
    tasks = [list(task) for task in rewards_by_task if len(task) > 0]
    flat = [x for task in tasks for x in task]
    if not tasks:
        return math.nan, math.nan, 0
    mean = math.fsum(flat) / len(flat)
    if len(tasks) < 2:
        return mean, math.nan, len(tasks)
    cluster_sum_squares = math.fsum(math.fsum(x - mean for x in task) ** 2 for task in tasks)
    variance = len(tasks) / (len(tasks) - 1) * cluster_sum_squares / len(flat) ** 2
    return mean, math.sqrt(variance), len(tasks)
