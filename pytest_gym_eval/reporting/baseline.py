"""Comparing a run with an earlier report (``--gym-baseline``): per-task drops and a paired t-test per dataset
(Student 1908; Miller 2024, "Adding Error Bars to Evals", arXiv:2411.00640, §4) with the ``--gym-max-drop``
gate; and task-level regressions (a task that passed on every baseline repeat and fails on every current one)
with McNemar's exact test across tasks and the ``--gym-max-regressed-tasks`` gate.

Why both: the paired t-test sees a broad shift of the mean, but when exactly one task of n drops, the per-task
differences are one negative value and n - 1 zeros, whose t statistic is -1 whatever the drop and whatever n
(p about 0.33): a deterministic one-task regression never trips it. The task-level gate counts such tasks.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_gym_eval.reporting import fmt
from pytest_gym_eval.reporting.conclusion import BaselineComparison
from pytest_gym_eval.reporting.summary import MAX_LISTED, SCORED_STATUSES, RolloutResult, by_task, groups, scores
from pytest_gym_eval.stats.exact_tests import mcnemar_exact
from pytest_gym_eval.stats.intervals import PairedComparison, paired_difference

# --- Baseline comparison ----------------------------------------------------------------------------------


def compare_to_baseline(
    baseline: Mapping[str, Any], results: Sequence[RolloutResult], *, confidence: float = 0.95
) -> list[BaselineComparison]:
    """Compare this run's per-task mean rewards with those of ``baseline`` (a report from :func:`load_report`).

    For each dataset of ``results`` (each (dataset, agent) when a dataset has several agents, grouped as by
    :func:`summarize`), the tasks are those with at least one scored rollout in both runs, matched by dataset
    and task id; each task's value is the mean of its scored rewards. The change is
    :func:`~pytest_gym_eval.stats.intervals.paired_difference`, a paired t-test on those per-task means (Student 1908;
    Miller 2024, "Adding Error Bars to Evals", arXiv:2411.00640, §4): pairing by task removes the variation
    between tasks' difficulty, so it is much more sensitive than comparing two independent means. A dataset
    the baseline lacks gets a comparison over 0 tasks. Raises ValueError when ``baseline`` has no
    ``rollouts`` list or ``confidence`` is bad.
    """
    before = _baseline_means(baseline)
    verdicts_before = _baseline_verdicts(baseline)
    comparisons: list[BaselineComparison] = []
    for (dataset, agent), group in groups(results).items():
        now = _task_means(group)
        shared = [task for task in now if (dataset, task) in before]
        old = [before[(dataset, task)] for task in shared]
        new = [now[task] for task in shared]
        dropped = [(task, b, c) for task, b, c in zip(shared, old, new, strict=True) if c < b]
        dropped.sort(key=lambda drop: drop[2] - drop[1])
        comparison = paired_difference(old, new, confidence)
        verdicts_now = _task_verdicts(group)
        flips = [(task, verdicts_before.get((dataset, task)), verdicts_now.get(task)) for task in shared]
        regressed = tuple(task for task, was, now_is in flips if was is True and now_is is False)
        improved = tuple(task for task, was, now_is in flips if was is False and now_is is True)
        comparisons.append(
            BaselineComparison(
                dataset, agent, len(shared), comparison, dropped, confidence,
                regressed, improved, mcnemar_exact(len(regressed), len(improved)),
            )
        )  # fmt: skip
    return comparisons


def _task_means(results: Sequence[RolloutResult]) -> dict[str, float]:
    """Mean scored reward of each task with at least one scored rollout (first-seen order)."""
    means: dict[str, float] = {}
    for task, rollouts in by_task(results).items():
        rewards, _ = scores(rollouts)
        if rewards:
            means[task] = math.fsum(rewards) / len(rewards)
    return means


def _baseline_means(baseline: Mapping[str, Any]) -> dict[tuple[str, str], float]:
    """Mean scored reward per (dataset, task id) of a report's rollouts."""
    rollouts = baseline.get("rollouts")
    if not isinstance(rollouts, list):
        raise ValueError("the baseline report has no 'rollouts' list")
    rewards: dict[tuple[str, str], list[float]] = {}
    for rollout in rollouts:
        if not isinstance(rollout, Mapping) or rollout.get("status") not in SCORED_STATUSES:
            continue
        reward = rollout.get("reward")
        if isinstance(reward, bool) or not isinstance(reward, (int, float)) or not math.isfinite(reward):
            continue
        key = (str(rollout.get("dataset")), str(rollout.get("task_id")))
        rewards.setdefault(key, []).append(float(reward))
    return {key: math.fsum(values) / len(values) for key, values in rewards.items()}


def solid_verdict(passed: Sequence[bool]) -> bool | None:
    """A task's verdict over its scored repeats: True when every one passed, False when every one failed, None
    when they disagree (a flaky task) or there is none."""
    if not passed:
        return None
    if all(passed):
        return True
    return False if not any(passed) else None


def _task_verdicts(results: Sequence[RolloutResult]) -> dict[str, bool | None]:
    return {task: solid_verdict(scores(rollouts)[1]) for task, rollouts in by_task(results).items()}


def _baseline_verdicts(baseline: Mapping[str, Any]) -> dict[tuple[str, str], bool | None]:
    """:func:`solid_verdict` per (dataset, task id) of a report's scored rollouts."""
    passed: dict[tuple[str, str], list[bool]] = {}
    for rollout in baseline.get("rollouts") or ():
        if isinstance(rollout, Mapping) and rollout.get("status") in SCORED_STATUSES:
            key = (str(rollout.get("dataset")), str(rollout.get("task_id")))
            passed.setdefault(key, []).append(rollout.get("status") == "passed")
    return {key: solid_verdict(values) for key, values in passed.items()}


def max_regressed_gate(comparisons: Sequence[BaselineComparison], max_regressed: int) -> list[str]:
    """A failure line for each comparison with more than ``max_regressed`` regressed tasks (tasks that passed on
    every baseline repeat and fail on every current one), naming them. An empty list means the gate passes.
    Raises ValueError for a negative ``max_regressed``."""
    if max_regressed < 0:
        raise ValueError(f"max_regressed must be >= 0, got {max_regressed}")
    lines: list[str] = []
    for item in comparisons:
        if len(item.regressed) > max_regressed:
            shown = ", ".join(item.regressed[:MAX_LISTED])
            more = f", … and {len(item.regressed) - MAX_LISTED} more" if len(item.regressed) > MAX_LISTED else ""
            lines.append(
                f"{fmt.title(item.dataset, item.agent)}: {fmt.plural(len(item.regressed), 'task')} regressed "
                f"(passed on every baseline repeat, fail on every repeat now: {shown}{more}), more than the "
                f"allowed {max_regressed}"
            )
    return lines


def report_task_means(report: Mapping[str, Any]) -> dict[tuple[str, str], float]:
    """Mean scored reward of each (dataset, task id) in a report's rollouts (passed or failed, finite
    reward), the per-task values :func:`compare_to_baseline` pairs. Raises ValueError when ``report`` has no
    ``rollouts`` list."""
    return _baseline_means(report)


def _significant_drop(comparison: PairedComparison, max_drop: float) -> bool:
    return comparison.high < 0.0 and comparison.mean_difference < -max_drop


def max_drop_gate(comparisons: Sequence[BaselineComparison], max_drop: float) -> list[str]:
    """A failure line for each comparison whose mean reward fell significantly and by more than ``max_drop``.

    Significant: the upper bound of the interval of current - baseline is below 0; larger than ``max_drop``
    (reward units, >= 0): mean difference < -max_drop. An empty list means the gate passes. Raises
    ValueError when ``max_drop`` is negative or not finite.
    """
    if not math.isfinite(max_drop) or max_drop < 0.0:
        raise ValueError(f"max_drop must be a finite number >= 0, got {max_drop!r}")
    lines: list[str] = []
    for item in comparisons:
        paired = item.comparison
        if _significant_drop(paired, max_drop):
            lines.append(
                f"{fmt.title(item.dataset, item.agent)}: mean reward fell {fmt.number(-paired.mean_difference)} "
                f"vs the baseline (change {fmt.change(paired)}, {fmt.p_value(paired.p_value)}, "
                f"{fmt.plural(paired.n, 'task')}), more than the allowed {fmt.threshold(max_drop)}"
            )
    return lines
