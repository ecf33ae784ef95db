"""How many tasks and repeats a paired comparison needs to detect a drop of D in mean reward, from an earlier
report's variance (the computation of ``python -m pytest_gym_eval plan``).

The formula (Miller 2024, Section 5) and its source are in :func:`difference_variance`'s docstring, the variance
estimates in :func:`variance_components`'s. What users see: docs/gates-and-statistics.md ("Planning tasks and
repeats").
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

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
