"""How much of the reward's variance is the judge's: the rollouts whose policy answer was judged more than once.

When the same policy answer is judged again (repeats over replayed policy answers: each repeat of a task replays
the same recorded answer and the judge, an LLM or any verifier, scores it anew), the rewards one answer got differ
only by the judge. The rewards then split, as in a one-way random-effects analysis of variance with the answers as
groups, into the variance *between* answers (the policy: tasks of different difficulty, and the policy's answers to
one task that differ) and the variance *within* an answer (the judge: the same answer scored again). Shapes:
``rewards[t][a][j]`` is the reward of judgment ``j`` of the policy's answer ``a`` to task ``t``.

With g answers, answer i judged k_i times (N = Σ k_i judgments), answer means ȳ_i and the grand mean ȳ
(Searle, Casella & McCulloch 1992, *Variance Components*, §3.5-3.6, the unbalanced one-way ANOVA estimators):

- SSB = Σ_i k_i (ȳ_i - ȳ)², MSB = SSB / (g - 1); SSW = Σ_i Σ_j (y_ij - ȳ_i)², MSW = SSW / (N - g);
- n0 = (N - Σ_i k_i² / N) / (g - 1) (k with equal k_i);
- the judge's variance σ²_judge = MSW, the answers' σ²_answer = max(0, (MSB - MSW) / n0);
- the judge's share of the reward's variance = σ²_judge / (σ²_answer + σ²_judge) = 1 - ICC(1) (Shrout & Fleiss
  1979, "Intraclass correlations: uses in assessing rater reliability", Psychol. Bull. 86(2), ICC(1,1)), with the
  F interval of the ICC (Searle 1971, *Linear Models*, §9.7; Shrout & Fleiss 1979, Table 3): F = MSB / MSW,
  F_L = F / F_{1-a/2}(g-1, N-g), F_U = F / F_{a/2}(g-1, N-g), share in [n0 / (F_U + n0 - 1), n0 / (F_L + n0 - 1)],
  clipped to [0, 1] (exact with equal k_i and normal errors, approximate otherwise, Donner 1986, Int. Stat. Rev.
  54(1));
- test-retest agreement: of the pairs of judgments of one answer, the share that gave the same reward (for 0/1
  rewards the observed agreement of Fleiss 1971; its chance-corrected form is close to the ICC above, Fleiss &
  Cuzick 1979).

**The judge's share of a gate's interval.** The mean reward's interval (:func:`~pytest_gym_eval.stats.intervals.
mean_interval`) has the variance SE² (CR1, clustered by task, T tasks). Judgments scattering independently around
their answer's reward add σ²_judge / N to the variance of the mean of N rewards, so the judge's share of the
interval's variance is s = (MSW / N) / SE² (a noise-free judge would leave an interval sqrt(1 - s) as wide). With one
answer a task judged k times, SE² = MSB / N exactly and s = MSW / MSB = 1 - ICC(1, k), estimating
s = σ²_judge / (k Var(M)), M a task's mean reward. The interval is *dominated by the judge* when the whole interval
of s lies above 1/2, *by the policy* when it lies below, and by neither as far as the rollouts tell otherwise.

**The interval of s, without normal errors** (:func:`interval_share_bounds`). The F interval s · [F_{a/2}(T-1, N-g),
F_{1-a/2}(T-1, N-g)] assumes normal answer effects and judge errors independent of them. A 0/1 judge breaks both:
with 2 judgments an answer that is judged twice alike lies far from the mean and one judged 0 and 1 lies on it, so
MSB and MSW are strongly negatively correlated, and near a mean of 0.9 or 0.1 the judge's disagreements are a
handful of rare events (no disagreement at all on 12 tasks is common, MSW = 0 and the F interval is [0, 0]).
Measured (``benchmarks/error_rates.py``), the F interval said "dominated by the policy" wrongly 4-15 % of the time at
the margin and "by the judge" up to 27 % at skewed means. The bounds used instead need only that the tasks are
independent and the rewards bounded: rewards rescaled to [0, 1], the identity Var(M) = μ (1 - μ) - E[M (1 - M)]
(μ = E[M]) turns s into means of bounded per-task quantities: with one answer a task judged k times,
s = E[w] / (k (μ (1 - μ) - E[e]) - (k - 1) E[w]) with w_t the answer's within variance in [0, k / (4 (k - 1))] and
e_t the mean of y (1 - y) over its judgments in [0, 1/4] (0 for a 0/1 judge: two means then, w and μ); otherwise
s = E[w] / (n (μ (1 - μ) - E[u])), u_t = M_t (1 - M_t) in [0, 1/4], n = N / T. Each mean gets a one-sided bound
at (1 - c) / 2 split over them (Bonferroni): Clopper-Pearson of the bounded mean for E[w], E[e] and E[u]
(Σ x / top successes in T trials: among variables in [0, top] with a given mean the 0/1 ones spread most, so
the binomial's bound serves, as the mean reward gate uses it for graded rewards), the task-clustered Clopper-Pearson
interval of the mean reward for μ (:func:`~pytest_gym_eval.stats.intervals.clustered_proportion_interval`). Then
s_high takes w_high, e_high (u_high) and the least μ (1 - μ) over μ's interval, s_low the other ends.
The union bound makes each side miss at most about (1 - c) / 2 whatever the shape of the rewards (0/1 or graded,
skewed or not); it is conservative, so the words come later: measured at 95 % (``benchmarks/error_rates.py``), each
wrong statement at the margin stays well under 2.5 %, and a steady judge (5 % flips) is named in about half the runs
of 40 tasks x 2 judgments, nearly all of 40 x 4, and never at 12 tasks (where even an exact binomial test of the
disagreements, with the mean known, could say it only with no disagreement at all). With several answers a task or
unequal repeats the bounds take n = N / T judgments every task (approximate). The judge's share of the reward's
variance (``share_low``/``share_high``) keeps its F interval: it is descriptive and no words are said of it.

Standard library only. It measures the judge's inconsistency, not its bias: a judge that scores an answer wrong
every time adds to the answer's variance, not to its own.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from pytest_gym_eval.stats.distributions import regularized_beta
from pytest_gym_eval.stats.intervals import (
    clopper_pearson_bounds,
    clustered_proportion_interval,
    clustered_standard_error,
)

Dominance = Literal["judge", "policy", "neither"]
"""Whose variance a gate's interval is mostly made of: the judge's, the policy's answers' (and the tasks'), or
neither as far as the rollouts tell."""

DOMINANT_SHARE = 0.5
"""The judge's share of the interval's variance above which the interval is the judge's."""


@dataclass(frozen=True)
class JudgeNoise:
    """The variance split of one summary's rewards by policy answer (see the module's docstring for the formulas).

    Counts: ``tasks`` T, ``answers`` g (distinct policy answers), ``judgments`` N (scored rollouts), ``repeated``
    answers judged more than once and ``rejudged`` the judgments of those. ``judge_variance`` (MSW) and
    ``answer_variance`` are in reward units squared; ``judge_share`` is the judge's share of the reward's variance
    with its interval ``share_low``/``share_high`` (nan when no reward varied at all); ``agreement`` the share of
    pairs of judgments of one answer that agree. ``interval_share`` is the judge's share of the mean reward
    interval's variance with ``interval_low``/``interval_high`` (None when the interval has no width, or fewer than
    two tasks); ``dominated_by`` what :data:`DOMINANT_SHARE` says of that interval (None without it);
    ``confidence`` the level of both intervals."""

    tasks: int
    answers: int
    judgments: int
    repeated: int
    rejudged: int
    judge_variance: float
    answer_variance: float
    judge_share: float
    share_low: float
    share_high: float
    agreement: float
    interval_share: float | None
    interval_low: float | None
    interval_high: float | None
    dominated_by: Dominance | None
    confidence: float = 0.95


def f_cdf(x: float, d1: float, d2: float) -> float:
    """P(F <= x) for Snedecor's F with ``d1``, ``d2`` > 0 degrees of freedom: I_{d1 x / (d1 x + d2)}(d1/2, d2/2)
    (Abramowitz & Stegun 26.6.2), x = inf gives 1. Raises ValueError for a degree of freedom <= 0 or x nan."""
    if not (d1 > 0.0 and d2 > 0.0):
        raise ValueError(f"degrees of freedom must be > 0, got {d1!r} and {d2!r}")
    if math.isnan(x):
        raise ValueError("x must not be NaN")
    if x <= 0.0:
        return 0.0
    if math.isinf(x):
        return 1.0
    return regularized_beta(d1 / 2.0, d2 / 2.0, d1 * x / (d1 * x + d2), d2 / (d1 * x + d2))


def f_ppf(p: float, d1: float, d2: float) -> float:
    """The quantile x with P(F <= x) = p of Snedecor's F with ``d1``, ``d2`` > 0 degrees of freedom: :func:`f_cdf`
    inverted by doubling a bracket and bisecting (to the float's precision). Raises ValueError for p outside (0, 1)
    or a degree of freedom <= 0."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"p must lie in (0, 1), got {p!r}")
    low, high = 0.0, 1.0
    while f_cdf(high, d1, d2) < p:
        low, high = high, 2.0 * high
    for _ in range(400):
        mid = 0.5 * (low + high)
        if mid in (low, high):
            break
        if f_cdf(mid, d1, d2) < p:
            low = mid
        else:
            high = mid
    return 0.5 * (low + high)


def _clip(value: float) -> float:
    return min(1.0, max(0.0, value))


def judge_noise(rewards: Sequence[Sequence[Sequence[float]]], confidence: float = 0.95) -> JudgeNoise | None:
    """The judge's share of the reward's variance and of the mean reward interval's, from ``rewards[t][a][j]``:
    judgment j of answer a to task t (empty answers and tasks are skipped). None when no answer was judged twice
    or there is a single answer (nothing to split). Raises ValueError for a reward that is not finite or a
    confidence outside (0, 1).

    E.g. one task per answer, answers judged [1, 0, 1], [0, 0] and [1]: MSB 5/12, MSW 2/9, n0 11/6, the judge's
    share of the reward's variance 44/65 = 0.68, agreement 2 of 4 pairs, and of the interval (SE² = 1/16)
    (2/9 / 6) / (1/16) = 16/27 = 0.59.
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence!r}")
    tasks = [[list(answer) for answer in task if answer] for task in rewards]
    tasks = [task for task in tasks if task]
    answers = [answer for task in tasks for answer in task]
    flat = [y for answer in answers for y in answer]
    if any(not math.isfinite(y) for y in flat):
        raise ValueError("rewards must be finite numbers (found NaN or infinity)")
    g, n = len(answers), len(flat)
    if g < 2 or n - g < 1:
        return None
    grand = math.fsum(flat) / n
    means = [math.fsum(answer) / len(answer) for answer in answers]
    ssb = math.fsum(len(answer) * (mean - grand) ** 2 for answer, mean in zip(answers, means, strict=True))
    ssw = math.fsum((y - mean) ** 2 for answer, mean in zip(answers, means, strict=True) for y in answer)
    msb, msw = ssb / (g - 1), ssw / (n - g)
    n0 = (n - math.fsum(len(answer) ** 2 for answer in answers) / n) / (g - 1)
    between = max(0.0, (msb - msw) / n0)
    alpha = 1.0 - confidence
    if msw == 0.0 and msb == 0.0:
        share, low, high = math.nan, math.nan, math.nan
    else:
        share = msw / (between + msw) if between + msw > 0.0 else 0.0
        f = msb / msw if msw > 0.0 else math.inf
        f_low = f / f_ppf(1.0 - alpha / 2.0, g - 1, n - g)
        f_high = f / f_ppf(alpha / 2.0, g - 1, n - g)
        low, high = (_clip(n0 / (bound + n0 - 1.0)) if math.isfinite(bound) else 0.0 for bound in (f_high, f_low))
    pairs = agreeing = 0
    for answer in answers:
        pairs += len(answer) * (len(answer) - 1) // 2
        agreeing += sum(c * (c - 1) // 2 for c in Counter(answer).values())
    interval = _interval_share(tasks, msw, n, confidence)
    return JudgeNoise(
        tasks=len(tasks),
        answers=g,
        judgments=n,
        repeated=sum(1 for answer in answers if len(answer) > 1),
        rejudged=sum(len(answer) for answer in answers if len(answer) > 1),
        judge_variance=msw,
        answer_variance=between,
        judge_share=share,
        share_low=low,
        share_high=high,
        agreement=agreeing / pairs,
        interval_share=None if interval is None else interval[0],
        interval_low=None if interval is None else interval[1],
        interval_high=None if interval is None else interval[2],
        dominated_by=None if interval is None else dominance(interval[1], interval[2]),
        confidence=confidence,
    )


def _bounded_mean_bounds(values: Sequence[float], top: float, alpha: float) -> tuple[float, float]:
    """One-sided ``alpha`` bounds (each side) of the mean of independent ``values`` in [0, ``top``]: Clopper-Pearson
    of sum / top successes in len(values) trials, times ``top``."""
    count = len(values)
    successes = min(float(count), max(0.0, math.fsum(values) / top))
    low, high = clopper_pearson_bounds(successes, count, 1.0 - 2.0 * alpha)
    return low * top, high * top


def _interval_share(
    tasks: Sequence[Sequence[Sequence[float]]], msw: float, n: int, confidence: float
) -> tuple[float, float, float] | None:
    """(estimate, low, high) of the judge's share of the mean reward interval's variance, each in [0, 1]; None with
    fewer than two tasks or an interval of no width. The bounds are :func:`interval_share_bounds`'."""
    by_task = [[y for answer in task for y in answer] for task in tasks]
    _, standard_error, count = clustered_standard_error(by_task)
    if count < 2 or not standard_error > 0.0:
        return None
    share = _clip(msw / n / standard_error**2)
    low, high = interval_share_bounds(tasks, confidence)
    return share, min(low, share), max(high, share)


def interval_share_bounds(tasks: Sequence[Sequence[Sequence[float]]], confidence: float = 0.95) -> tuple[float, float]:
    """Bounds of the judge's share s of the mean reward interval's variance from ``tasks[t][a][j]`` (at least two
    non-empty tasks, an answer judged twice), each side missing at most (1 - ``confidence``) / 2 of the time
    whatever the rewards' distribution (the module's docstring gives the argument). Raises ValueError with fewer
    than two tasks or no answer judged twice.

    Rewards are rescaled to [0, 1] (by their own least and greatest value when some lie outside). Per task t (n_t
    judgments): its mean M_t and (when it has an answer judged twice) w_t, its answers' pooled within variance, in
    [0, W] with W = max_t Σ k / (4 (n_t - g_t)). Var(M) = μ (1 - μ) - E[M (1 - M)] with μ = E[M], bounded by
    :func:`~pytest_gym_eval.stats.intervals.clustered_proportion_interval`; E[w] by a Clopper-Pearson bound of a
    bounded mean.

    - One answer a task, each judged k times: M (1 - M) = e + (k - 1) / k w with e_t the mean of y (1 - y) over the
      task's judgments (0 for 0/1 rewards), so s = E[w] / (k (μ (1 - μ) - E[e]) - (k - 1) E[w]), increasing in
      E[w] and decreasing in μ (1 - μ) - E[e]: high = w_high / (k (min μ (1 - μ) - e_high) - (k - 1) w_high), low
      the same with w_low, max μ (1 - μ) and e_low. Each bound at one side's (1 - confidence) / 2 split over the
      bounded means: two (E[w], μ) for 0/1 rewards, three (and E[e]) otherwise.
    - Otherwise (several answers a task, unequal repeats): u_t = M_t (1 - M_t) in [0, 1/4] gets its own bound and
      s = σ²_judge / (n Var(M)) with n = N / T: high = w_high / (n (min μ (1 - μ) - u_high)), low = w_low /
      (n (max μ (1 - μ) - u_low)), three bounded means (approximate: it takes n judgments every task).

    Clipped to [0, 1] (1 when a denominator is not positive).

    E.g. 40 tasks x 2 judgments that all agree, half at 1 and half at 0, at 95%: two bounds at 0.0125 a side,
    w_high = (1/2) (1 - 0.0125^(1/40)) = 0.05188, μ in [0.30838, 0.69162] (so μ (1 - μ) >= 0.21328):
    high = 0.05188 / (2 · 0.21328 - 0.05188) = 0.1385, low = 0 (dominated by the policy). The same on 12 tasks
    gives high = 1: 12 answers judged alike cannot show that the judge's disagreements are rare.
    """
    rows = [[list(answer) for answer in task if answer] for task in tasks]
    rows = [task for task in rows if task]
    flat = [y for task in rows for answer in task for y in answer]
    if len(rows) < 2 or not any(len(answer) > 1 for task in rows for answer in task):
        raise ValueError("need at least two tasks and an answer judged twice")
    least, greatest = min(flat), max(flat)
    if least < 0.0 or greatest > 1.0:
        spread = greatest - least if greatest > least else 1.0
        rows = [[[(y - least) / spread for y in answer] for answer in task] for task in rows]
    sizes = {len(answer) for task in rows for answer in task}
    single = all(len(task) == 1 for task in rows) and len(sizes) == 1
    binary = all(y in (0.0, 1.0) for task in rows for answer in task for y in answer)
    alpha = (1.0 - confidence) / (4.0 if single and binary else 6.0)
    judgments = [[y for answer in task for y in answer] for task in rows]
    per_task = len(flat) / len(rows)
    within: list[float] = []
    top = 0.0
    for task in rows:
        repeated = [answer for answer in task if len(answer) > 1]
        df = sum(len(answer) - 1 for answer in repeated)
        if df > 0:
            sum_squares = math.fsum((y - math.fsum(answer) / len(answer)) ** 2 for answer in repeated for y in answer)
            within.append(sum_squares / df)
            top = max(top, sum(len(answer) for answer in repeated) / (4.0 * df))
    w_low, w_high = _bounded_mean_bounds(within, top, alpha)
    mu = clustered_proportion_interval(judgments, 1.0 - 2.0 * alpha)
    mu_low, mu_high = max(0.0, mu.low), min(1.0, mu.high)
    least_pq = min(mu_low * (1.0 - mu_low), mu_high * (1.0 - mu_high))
    most_pq = 0.25 if mu_low <= 0.5 <= mu_high else max(mu_low * (1.0 - mu_low), mu_high * (1.0 - mu_high))
    if single:  # M (1 - M) = e + (k - 1) / k w: s = E[w] / (k (μ (1 - μ) - E[e]) - (k - 1) E[w])
        (k,) = sizes
        spreads = [math.fsum(y * (1.0 - y) for y in task) / len(task) for task in judgments]
        e_low, e_high = (0.0, 0.0) if binary else _bounded_mean_bounds(spreads, 0.25, alpha)
        high_den = k * (least_pq - e_high) - (k - 1) * w_high
        low_den = k * (most_pq - e_low) - (k - 1) * w_low
        high = 1.0 if high_den <= 0.0 else _clip(w_high / high_den)
        low = 1.0 if low_den <= 0.0 else _clip(w_low / low_den)
        return min(low, high), high
    spreads = [mean * (1.0 - mean) for mean in (math.fsum(task) / len(task) for task in judgments)]
    u_low, u_high = _bounded_mean_bounds(spreads, 0.25, alpha)
    high = 1.0 if least_pq - u_high <= 0.0 else _clip(w_high / (per_task * (least_pq - u_high)))
    low = 1.0 if most_pq - u_low <= 0.0 else _clip(w_low / (per_task * (most_pq - u_low)))
    return min(low, high), high


def dominance(low: float, high: float) -> Dominance:
    """``judge`` when the interval [low, high] of the judge's share of a gate interval's variance lies above
    :data:`DOMINANT_SHARE`, ``policy`` when it lies below, ``neither`` otherwise."""
    if low > DOMINANT_SHARE:
        return "judge"
    if high < DOMINANT_SHARE:
        return "policy"
    return "neither"
