"""How many tasks and repeats a paired comparison needs to detect a drop of D in mean reward, from an earlier
report's variance (the computation of ``python -m pytest_gym_eval plan``).

The formula (Miller 2024, Section 5) and its source are in :func:`difference_variance`'s docstring, the variance
estimates in :func:`variance_components`'s. What users see: docs/gates-and-statistics.md ("Planning tasks and
repeats").
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from statistics import NormalDist
from typing import Any, ClassVar, Protocol, TypeVar

from pytest_gym_eval.stats.intervals import Interval

REPEATS = (1, 2, 4, 8, 16)
"""Repeats per task the table lists (and the report's own, when it is not among them)."""


@dataclass(frozen=True)
class Variance:
    """A dataset's variance components (reward units squared) from ``tasks`` tasks with ``repeats`` rollouts
    each on average (the harmonic mean); ``within`` is None when no task had two scored rollouts."""

    tasks: int
    repeats: float
    between: float
    within: float | None


def variance_components(rewards_by_task: Sequence[Sequence[float]]) -> Variance:
    """sigma_b^2 and sigma_w^2 (see :func:`difference_variance`) from ``rewards_by_task[t][r]`` (tasks without a
    reward are skipped). Raises ValueError with fewer than 2 tasks.

    Estimates from the report's scored rollouts, per
    dataset: sigma_w^2 = the mean over tasks of the unbiased variance of their rewards (tasks with >= 2 rollouts),
    sigma_b^2 = Var(task means) - sigma_w^2 / K_h (K_h the harmonic mean of the rollouts per task; clipped at 0),
    the method-of-moments split of a one-way random-effects model.
    """
    tasks = [list(task) for task in rewards_by_task if task]
    if len(tasks) < 2:
        raise ValueError("needs at least 2 tasks with a scored rollout")
    means = [statistics.fmean(task) for task in tasks]
    spreads = [statistics.variance(task) for task in tasks if len(task) >= 2]
    within = statistics.fmean(spreads) if spreads else None
    repeats = statistics.harmonic_mean([len(task) for task in tasks])
    between = max(0.0, statistics.variance(means) - (within or 0.0) / repeats)
    return Variance(len(tasks), repeats, between, within)


def difference_variance(variance: Variance, repeats: float, correlation: float) -> float:
    """omega^2: the variance of one task's paired difference with ``repeats`` rollouts.

    The formula is the power analysis of Miller 2024, "Adding Error Bars to Evals: A Statistical Approach to
    Language Model Evaluations" (arXiv:2411.00640), Section 5 ("Power analysis"): comparing two models on the same n
    tasks with K repeats each, by the paired difference of per-task means, detects a true difference D at
    two-sided level alpha with probability ``power`` when

        n >= (z_{1 - alpha/2} + z_{power})^2 * omega^2 / D^2,
        omega^2 = Var(per-task difference) = 2 sigma_b^2 (1 - rho) + 2 sigma_w^2 / K

    where sigma_b^2 is the between-task variance (of the tasks' expected rewards), sigma_w^2 the within-task
    variance (of one rollout around its task's expected reward), and rho the correlation of the two models' task
    means (both models assumed to have the report's variances).
    """
    return 2.0 * variance.between * (1.0 - correlation) + 2.0 * (variance.within or 0.0) / repeats


def tasks_needed(omega2: float, drop: float, power: float, alpha: float) -> int:
    """The smallest n with (z_{1-alpha/2} + z_power)^2 omega^2 / drop^2 <= n (at least 2: a paired t-test needs
    two tasks). Raises ValueError for drop <= 0 or power/alpha outside (0, 1)."""
    if not drop > 0.0:
        raise ValueError(f"the drop must be > 0, got {drop!r}")
    z = _z(alpha, power)
    return max(2, math.ceil(z * z * omega2 / (drop * drop) - 1e-9))


def detectable(omega2: float, tasks: int, power: float, alpha: float) -> float:
    """The smallest drop ``tasks`` tasks detect: (z_{1-alpha/2} + z_power) sqrt(omega^2 / tasks)."""
    return _z(alpha, power) * math.sqrt(omega2 / tasks)


def _z(alpha: float, power: float) -> float:
    if not (0.0 < alpha < 1.0 and 0.0 < power < 1.0):
        raise ValueError(f"alpha and power must lie in (0, 1), got {alpha!r} and {power!r}")
    normal = NormalDist()
    return normal.inv_cdf(1.0 - alpha / 2.0) + normal.inv_cdf(power)


def rewards_by_dataset(report: Mapping[str, Any]) -> dict[str, list[list[float]]]:
    """Scored rewards of a report's rollouts, by dataset (``dataset (agent NAME)`` when a dataset has several
    agents) and task, in report order."""
    agents: dict[str, set[str]] = {}
    for rollout in report["rollouts"]:
        agents.setdefault(rollout["dataset"], set()).add(str(rollout.get("agent")))
    found: dict[str, dict[str, list[float]]] = {}
    for rollout in report["rollouts"]:
        reward = rollout.get("reward")
        if rollout.get("status") not in ("passed", "failed") or reward is None or not math.isfinite(reward):
            continue
        name = rollout["dataset"]
        if len(agents[name]) > 1:
            name = f"{name} (agent {rollout.get('agent')})"
        found.setdefault(name, {}).setdefault(rollout["task_id"], []).append(float(reward))
    return {name: list(tasks.values()) for name, tasks in found.items()}


def plan_lines(
    report: Mapping[str, Any], drop: float, power: float = 0.8, alpha: float = 0.05, correlation: float = 0.5
) -> list[str]:
    """The planner's output: per dataset its variance components, a table of the tasks needed per repeat count,
    and the drop the report's own tasks and repeats detect; then the formula's source."""
    lines = [
        f"tasks a paired comparison needs to detect a mean-reward drop of {drop:g} (power {power:g}, two-sided "
        f"alpha {alpha:g}, correlation of the two runs' task means {correlation:g})",
    ]
    for name, tasks in rewards_by_dataset(report).items():
        lines.append("")
        try:
            variance = variance_components(tasks)
        except ValueError as error:
            lines.append(f"{name}: {error}")
            continue
        if variance.between == 0.0 and not variance.within:
            values = sorted({reward for task in tasks for reward in task})
            lines.append(
                f"{name}: {variance.tasks} tasks x {variance.repeats:.3g} repeats, every reward "
                f"{' or '.join(f'{v:g}' for v in values[:2])}{'...' if len(values) > 2 else ''} within its task and "
                "every task alike: no variance to plan from (a variance of 0 would claim 2 tasks detect any drop); "
                "plan from a report whose rewards vary"
            )
            continue
        within = "unknown (one rollout a task: counted as 0)" if variance.within is None else f"{variance.within:.4g}"
        lines.append(
            f"{name}: {variance.tasks} tasks x {variance.repeats:.3g} repeats; between-task variance "
            f"{variance.between:.4g}, within-task variance {within}"
        )
        lines.append(f"  {'repeats':>7}  {'tasks needed':>12}  {'rollouts':>9}")
        own = round(variance.repeats)
        for repeats in sorted({*REPEATS, own}):
            needed = tasks_needed(difference_variance(variance, repeats, correlation), drop, power, alpha)
            mark = "  (more tasks than the dataset has)" if needed > variance.tasks else ""
            lines.append(f"  {repeats:>7}  {needed:>12,}  {needed * repeats:>9,}{mark}")
        omega2 = difference_variance(variance, variance.repeats, correlation)
        lines.append(
            f"  with its {variance.tasks} tasks x {variance.repeats:.3g} repeats it detects a drop of "
            f"{detectable(omega2, variance.tasks, power, alpha):.3g}"
        )
    lines += [
        "",
        "n = (z_{1-alpha/2} + z_power)^2 * (2 var_between (1 - correlation) + 2 var_within / repeats) / drop^2:",
        'Miller 2024, "Adding Error Bars to Evals", arXiv:2411.00640, Section 5 (power analysis).',
    ]
    return lines


# --- How much more data would decide a gate: the gate's own interval on a projected sample --------------------

MAX_PROJECTED = 20_000
"""The most tasks (rollouts for a share of rollouts) a hint projects to, or four times the observed ones when that is
more; beyond it the hint says "more than" (a projection's interval is computed, so this bounds the cost)."""


@dataclass(frozen=True)
class Hint:
    """How much more data would likely decide an INCONCLUSIVE gate at the observed effect (estimate - threshold)
    and spread, at the level it was judged at, with probability about the hint's power (:func:`basis_hint`).

    ``more`` more ``unit`` ("tasks": same repeats; "rollouts" for a share of rollouts such as the pass rate; None:
    the estimate is the threshold, too few tasks to extrapolate from, or more than :data:`MAX_PROJECTED` would be
    needed); ``repeats``: the repeats per task that would decide it on the same tasks (mean reward only), None when
    more repeats would not (the spread lies between tasks) or cannot be told (one rollout a task). ``text`` says it
    in words."""

    more: int | None
    unit: str
    repeats: int | None
    text: str


class Projectable(Protocol):
    """What :func:`basis_hint` reads of a gate's data (:class:`pytest_gym_eval.stats.gates.Basis`, a frozen
    dataclass it copies with :func:`dataclasses.replace`): the metric, the scored rewards and ``(scored, passes)``
    by task, the errored rollouts, and the interval of the metric's statistic at a confidence."""

    @property
    def metric(self) -> str: ...

    @property
    def rewards_by_task(self) -> tuple[tuple[float, ...], ...]: ...

    @property
    def counts(self) -> tuple[tuple[int, int], ...]: ...

    @property
    def errors(self) -> int: ...

    @property
    def k(self) -> int | None: ...

    @property
    def rollouts(self) -> int: ...

    __dataclass_fields__: ClassVar[dict[str, Any]]

    def interval(self, confidence: float) -> Interval: ...


def toward(interval: Interval, threshold: float, confidence: float, power: float) -> Interval:
    """``interval`` moved toward ``threshold`` by z_power of its estimate's standard errors (its width over
    2 z_{(1+c)/2}): where it lands when the estimate falls short of its expectation by as much as it does with
    probability 1 - ``power``. A projected sample's interval moved so decides the gate when the real interval
    would with probability about ``power`` (for a normal estimate this is the planner's
    n = (z_{1-alpha/2} + z_power)^2 var / effect^2 of :func:`tasks_needed`); infinite bounds are left as they are."""
    if not (math.isfinite(interval.low) and math.isfinite(interval.high)):
        return interval
    error = (interval.high - interval.low) / (2.0 * NormalDist().inv_cdf((1.0 + confidence) / 2.0))
    shift = math.copysign(NormalDist().inv_cdf(power) * error, threshold - interval.estimate)
    return Interval(interval.estimate + shift, interval.low + shift, interval.high + shift, interval.n)


def smallest_deciding(decides: Callable[[int], bool], start: int, limit: int = MAX_PROJECTED) -> int | None:
    """The smallest n in [``start``, ``limit``] with ``decides(n)``, None when none is found: doubling from
    ``start`` then bisection (``decides`` turns True once and stays so, up to the rounding of a projection), then
    stepping back while n - 1 still decides, so that ``decides(n)`` holds and ``decides(n - 1)`` does not."""
    low, high = start - 1, start  # decides(low) is taken as False
    while not decides(high):
        if high >= limit:
            return None
        low, high = high, min(limit, 2 * high)
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if decides(middle) else (middle, high)
    steps = 0
    while high > start and steps < 64 and decides(high - 1):
        high, steps = high - 1, steps + 1
    return high


T = TypeVar("T")


def grown(tasks: Sequence[T], values: Sequence[float], n: int) -> list[T]:
    """``tasks`` grown to ``n`` >= len(tasks) tasks by taking them again in turn (every task q times, then r more
    for n = q len(tasks) + r), so that the sample keeps the observed per-task spread and, up to one task's share
    of the r extra, the observed mean: the extra ones are taken in an order that keeps the running mean of
    ``values`` (one per task, e.g. its mean reward) near the overall one (the lowest left when above it, else
    the highest left)."""
    if not tasks:
        return []
    q, r = divmod(n, len(tasks))
    mean = math.fsum(values) / len(values)
    ranked = sorted(range(len(tasks)), key=lambda i: values[i])
    lo, hi, drift = 0, len(ranked) - 1, 0.0
    extra: list[T] = []
    while len(extra) < r:
        index = ranked[lo] if drift > 0.0 else ranked[hi]
        lo, hi = (lo + 1, hi) if drift > 0.0 else (lo, hi - 1)
        drift += values[index] - mean
        extra.append(tasks[index])
    return [task for _ in range(q) for task in tasks] + extra


def _task_means(rewards_by_task: Sequence[Sequence[float]]) -> list[float]:
    return [math.fsum(task) / len(task) if task else 0.0 for task in rewards_by_task]


def _more_text(more: int, unit: str) -> str:
    return f"about {more:,} more {unit if more > 1 else unit[:-1]} would likely decide it"


def _not_found(unit: str, have: int, limit: int) -> Hint:
    return Hint(None, unit, None, f"more than {limit - have:,} more {unit} would be needed to likely decide it")


def projected_hint(estimate: float, threshold: float, units: int, unit: str, decides_at: Callable[[int], bool]) -> Hint:
    """The :class:`Hint` of a gate judged on ``units`` ``unit`` (tasks, rollouts) whose ``decides_at(n)`` says
    whether the gate's own interval on the sample projected to n units decides it: "the estimate is the threshold"
    when they are equal, "too few" below two units, else about (smallest deciding n) - ``units`` more."""
    if estimate == threshold:
        return Hint(None, unit, None, "the estimate is the threshold: more data would not likely decide it")
    if units < 2 or math.isnan(estimate):
        return Hint(None, unit, None, f"too few {unit} to tell how much more data would decide it")
    limit = max(MAX_PROJECTED, 4 * units)
    needed = smallest_deciding(decides_at, units + 1, limit)
    if needed is None:
        return _not_found(unit, units, limit)
    return Hint(needed - units, unit, None, _more_text(needed - units, unit))


def basis_hint(
    basis: Projectable, threshold: float, confidence: float, decides: Callable[[Interval], bool], power: float
) -> Hint:
    """How much more data would likely decide an INCONCLUSIVE gate, from the gate's own interval (``basis``'s
    :meth:`~pytest_gym_eval.stats.gates.Basis.interval`, whatever its kind's statistic: the task-clustered
    Clopper-Pearson interval of a mean reward in [0, 1], Clopper-Pearson of the pass rate, ...).

    The observed data is projected to a larger sample at the observed effect and spread: more tasks by taking the
    observed tasks again in turn (:func:`grown`); for a share of rollouts (the pass rate, the error rate) more
    rollouts at the observed shares. The hint is the smallest projected size whose interval at ``confidence``,
    moved toward the threshold by z_power standard errors (:func:`toward`: so that the real interval would decide
    with probability about ``power``), satisfies ``decides`` (the gate's PASS or FAIL), less what was observed.
    It is the size *expected* to decide at the observed effect, not a guarantee: the effect is an estimate. For a
    kind with a repeats hint (the mean reward) also the repeats per task that would decide it on the same tasks:
    the task means drawn toward the overall mean as only the within-task part of their variance shrinks
    (:func:`variance_components`), None when :data:`MAX_REPEATS` repeats would not (the spread lies between
    tasks, or too few tasks for the interval's degrees of freedom) or with one rollout a task (the within-task
    spread is unknown)."""
    from pytest_gym_eval.stats import gate_kinds

    kind = gate_kinds.kind(basis.metric)
    estimate = basis.interval(confidence).estimate

    def at(grown_basis: Projectable) -> bool:
        return decides(toward(grown_basis.interval(confidence), threshold, confidence, power))

    if kind.proportion is not None:
        trials = kind.proportion(basis)[1]
        return projected_hint(estimate, threshold, trials, "rollouts", lambda n: at(_rollouts(basis, n)))
    kept = [i for i, task in enumerate(basis.rewards_by_task) if task]  # tasks with a scored rollout
    tasks = [(basis.rewards_by_task[i], basis.counts[i] if len(basis.counts) > i else (0, 0)) for i in kept]
    means = _task_means([rewards for rewards, _ in tasks])

    def at_tasks(n: int) -> bool:
        rewards, counts = zip(*grown(tasks, means, n), strict=True)
        return at(replace(basis, rewards_by_task=rewards, counts=counts))

    hint = projected_hint(estimate, threshold, len(tasks), "tasks", at_tasks)
    if hint.more is None or not kind.repeats_hint:
        return hint
    repeats = _repeats_needed(basis, at)  # 0: one rollout a task, the within-task spread is unknown
    text = hint.text + " (same repeats)"
    if repeats is None:
        text += "; more repeats alone would not: the spread lies between tasks"
    elif repeats:
        text += f", or about {repeats} repeats a task on the same tasks"
    return Hint(hint.more, hint.unit, repeats or None, text)


MAX_REPEATS = 1_000
"""The most repeats a task the repeats hint projects to (:func:`basis_hint`)."""


def _rollouts(basis: Projectable, n: int) -> Projectable:
    """``basis`` grown to n trials of its kind's share (scored rollouts; every rollout with a result when the kind
    judges the errored ones) at the observed shares of passes and errors, rounded to whole rollouts."""
    from pytest_gym_eval.stats import gate_kinds

    kind = gate_kinds.kind(basis.metric)
    scored, passes = sum(s for s, _ in basis.counts), sum(p for _, p in basis.counts)
    trials = kind.proportion(basis)[1]  # type: ignore[misc]  # a kind with a proportion
    errors = round(basis.errors * n / trials)
    scored_n = n - errors if kind.judges_errors else n
    passes_n = round(passes * scored_n / scored) if scored else 0
    counts = ((scored_n, passes_n),)
    return replace(basis, rewards_by_task=(), counts=counts, rollouts_given=scored_n + errors, errors=errors)


def _repeats_needed(basis: Projectable, at: Callable[[Projectable], bool]) -> int | None:
    """The repeats per task that would decide it on the same tasks (:func:`basis_hint`); 0 when it cannot be told
    (one rollout a task), None when more repeats alone would not."""
    tasks = [task for task in basis.rewards_by_task if task]
    variance = variance_components(tasks)  # >= 2 tasks: the caller had a standard error
    means = _task_means(tasks)
    observed = statistics.variance(means)
    within = variance.within
    if within is None:
        return 0
    if within == 0.0 or observed == 0.0:
        return None
    centre = statistics.fmean(means)

    def at_repeats(k: int) -> bool:
        shrink = math.sqrt(min(1.0, (variance.between + within / k) / observed))
        drawn = [centre + shrink * (m - centre) for m in means]
        rewards = tuple((m,) * k for m in drawn)
        counts = tuple((k, round(k * passes / scored)) for scored, passes in basis.counts if scored)
        return at(replace(basis, rewards_by_task=rewards, counts=counts))

    return smallest_deciding(at_repeats, math.floor(variance.repeats) + 1, MAX_REPEATS)


def interval_hint(interval: Interval, threshold: float, confidence: float, power: float) -> Hint:
    """:func:`basis_hint` (tasks only) from a Student t interval over ``interval.n`` tasks alone, for a gate whose
    data is not at hand (a custom metric's, whose interval is this t interval): the standard error is the wider
    half-width (the side clipping left alone) over t_{(1+c)/2, n-1}; m tasks give the t interval of the same
    estimate with it scaled by sqrt(n / m), judged moved by :func:`toward`. Approximate when both sides were
    clipped."""
    from pytest_gym_eval.stats.distributions import student_t_ppf

    estimate, n = interval.estimate, interval.n
    if not (math.isfinite(interval.low) and math.isfinite(interval.high)):
        n = min(n, 1)  # no spread to extrapolate from
    error = math.nan
    if n >= 2:
        error = max(estimate - interval.low, interval.high - estimate) / student_t_ppf((1.0 + confidence) / 2.0, n - 1)

    def decides_at(m: int) -> bool:
        half = student_t_ppf((1.0 + confidence) / 2.0, m - 1) * error * math.sqrt(n / m)
        moved = toward(Interval(estimate, estimate - half, estimate + half, m), threshold, confidence, power)
        return moved.low > threshold or moved.high < threshold

    return projected_hint(estimate, threshold, n, "tasks", decides_at)


Rewards = Mapping[tuple[str, int], float]
"""One model's rewards by (task id, repeat), as a policy comparison takes them."""


def paired_hint(
    baseline: Rewards,
    candidate: Rewards,
    threshold: float,
    confidence: float,
    decides: Callable[[Interval], bool],
    interval_of: Callable[[Rewards, Rewards, float], Interval],
    power: float,
) -> Hint:
    """:func:`basis_hint` for a policy comparison: the tasks with a pair (a (task, repeat) both models have) taken
    again in turn (:func:`grown`, ordered by their mean difference) to n tasks under fresh task ids, the comparison's
    own ``interval_of(baseline, candidate, confidence)`` (whatever interval the comparison judges) moved by
    :func:`toward`, and ``decides`` (the gate's PASS or FAIL) on it; about how many more tasks, the same repeats."""
    groups: dict[str, list[tuple[int, float, float]]] = {}
    for (task, repeat), reward in baseline.items():
        if (task, repeat) in candidate:
            groups.setdefault(task, []).append((repeat, reward, candidate[(task, repeat)]))
    tasks = list(groups.values())
    values = [statistics.fmean(c - b for _, b, c in task) for task in tasks]

    def at_tasks(n: int) -> bool:
        grown_baseline: dict[tuple[str, int], float] = {}
        grown_candidate: dict[tuple[str, int], float] = {}
        for index, task in enumerate(grown(tasks, values, n)):
            for repeat, b, c in task:
                grown_baseline[(str(index), repeat)], grown_candidate[(str(index), repeat)] = b, c
        return decides(toward(interval_of(grown_baseline, grown_candidate, confidence), threshold, confidence, power))

    estimate = interval_of(baseline, candidate, confidence).estimate
    return projected_hint(estimate, threshold, len(tasks), "tasks", at_tasks)
