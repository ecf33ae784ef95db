"""Drift: an alarm when a dataset's mean reward has moved down over several runs, though no single run failed.

Input: a series (the runs of one dataset with one file digest and one policy model, oldest first); for each run,
each task's mean reward over its scored rollouts (:func:`task_means`). Output: each run's mean reward with its
task-clustered 95 % interval (:func:`pytest_gym_eval.stats.mean_interval`) and the CUSUM below.

The alarm (:func:`self_starting_cusum`, whose docstring has the rule of version :data:`RULE`, its sources, its
measured false-alarm bound and the alternative rejected) is a self-starting lower CUSUM. What users see:
docs/history.md.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pytest_gym_eval.history.store import RunRollouts
from pytest_gym_eval.stats import Interval, mean_interval

RULE = "self-starting-cusum-lower-1"
DEFAULT_REFERENCE_RUNS = 5
DEFAULT_K = 0.5
DEFAULT_H = 5.0
DEFAULT_MIN_TASK_SD = 0.1
FALSE_ALARM_BOUND = 0.05
"""The false-alarm probability over a 20-run stable history that the defaults stay under (see the docstring)."""


@dataclass(frozen=True)
class RunMean:
    """One run of the series: ``mean`` reward over its scored rollouts with the task-clustered ``interval``,
    ``tasks`` scored, the CUSUM ``statistic`` after it (None for a reference run)."""

    run_id: int
    interval: Interval
    tasks: int
    statistic: float | None


@dataclass(frozen=True)
class Drift:
    """A dataset's drift check: ``points`` oldest first; ``task_sd`` (sqrt v, the scale; None with too few runs);
    ``alarm_run`` the id of the first run whose statistic passed ``h`` (None: no alarm); ``evidence`` in words."""

    dataset: str
    points: tuple[RunMean, ...]
    task_sd: float | None
    alarm_run: int | None
    evidence: str

    @property
    def alarm(self) -> bool:
        """Whether the level has moved down (the CUSUM passed ``h``)."""
        return self.alarm_run is not None


def task_means(series: Sequence[RunRollouts], dataset: str) -> list[tuple[int, dict[str, list[float]]]]:
    """``[(run_id, {task_id: [reward of each scored rollout]})]`` of ``dataset``, oldest first: a rollout is
    scored when it passed or failed with a finite reward."""
    result = []
    for entry in series:
        rewards: dict[str, list[float]] = {}
        for rollout in entry.rollouts:
            if rollout.dataset != dataset or rollout.status not in ("passed", "failed"):
                continue
            if rollout.reward is None or not math.isfinite(rollout.reward):
                continue
            rewards.setdefault(rollout.task_id, []).append(rollout.reward)
        result.append((entry.run.id, rewards))
    return result


@dataclass(frozen=True)
class Cusum:
    """The bare statistic: ``statistics[t]`` after run t (None for the first ``reference_runs``), ``alarm_index``
    the first index whose statistic passed ``h`` (None: no alarm), ``task_sd`` = sqrt(v) (None: too few runs)."""

    statistics: tuple[float | None, ...]
    alarm_index: int | None
    task_sd: float | None


def self_starting_cusum(
    runs: Sequence[Mapping[str, Sequence[float]]],
    *,
    reference_runs: int = DEFAULT_REFERENCE_RUNS,
    k: float = DEFAULT_K,
    h: float = DEFAULT_H,
    min_task_sd: float = DEFAULT_MIN_TASK_SD,
) -> Cusum:
    """The lower self-starting CUSUM over ``runs`` (each ``{task_id: [rewards]}``, oldest first, each with at least
    one task with a reward). Raises ValueError for ``reference_runs < 2``, ``k < 0``, ``h <= 0``,
    ``min_task_sd < 0`` or a run without rewards.

    The alarm is Page's one-sided (lower) CUSUM (E. S. Page, "Continuous inspection schemes", Biometrika 41, 1954),
    in its self-starting form (D. M. Hawkins, "Self-starting CUSUM charts for location and scale", The Statistician
    36, 1987): each run is compared with the mean of all runs before it, not with a level fixed by a few reference
    runs, whose own error would otherwise raise the false alarms several-fold (measured: 9-11 % instead of 2 % over 15
    watched runs). Rule version :data:`RULE`:

    - ``x_t`` = the mean over tasks of the task means of run t (``n_t`` tasks scored); the first ``reference_runs``
      (m, default 5) runs only teach the scale.
    - Scale: the same tasks run every time, so a run's mean varies only by each task's own run-to-run variation.
      ``v`` = the pooled variance, over the first m runs, of each task's mean (``sum_i (m_i - 1) var_i /
      sum_i (m_i - 1)`` over tasks seen in >= 2 of them), floored at ``min_task_sd**2`` (default 0.1², for rewards in
      [0, 1]: a reference in which every task repeated itself exactly would otherwise make one flip an alarm).
    - Innovation of run t > m: ``z_t = (x_t - mean(x_1..x_{t-1})) / sqrt(v / n_t + v / (t-1)² · sum_{j<t} 1/n_j)``;
      for a stable series these are independent with unit variance (Hawkins 1987, §2).
    - Statistic: ``S_m = 0``, ``S_t = max(0, S_{t-1} - z_t - k)``; the alarm is raised at the first run with
      ``S_t > h``. Defaults ``k = 0.5`` (tuned to a drop of one run standard deviation) and ``h = 5``: the in-control
      average run length is about 930 runs (Siegmund's approximation ARL0 = (e^{2kb} - 2kb - 1) / (2k²), b = h +
      1.166; D. Siegmund, *Sequential Analysis*, 1985), so about 15/930 = 1.6 % of stable 20-run histories (15
      watched runs) raise a false alarm.

    Bound (checked by seeded simulation in ``tests/unit/test_history_drift.py``): on stable series of 20 runs (40 tasks
    of fixed pass probabilities, one rollout each) the alarm fires in at most :data:`FALSE_ALARM_BOUND` (5 %) of
    histories (measured over 2,000: 0.55 % with pass probabilities spread over [0, 1], 1.1 % with most tasks never
    varying); a decline of 0.02 per run from run 6 is caught in all of 200 histories, at run 14 on average. Only a
    decline is watched: a rise is good news, not an alarm.

    Alternative rejected: comparing each run with the previous one (what ``--gym-baseline`` does) misses a decline
    of a fraction of a standard deviation per run; the CUSUM adds those small steps up.
    """
    if reference_runs < 2 or k < 0 or h <= 0 or min_task_sd < 0:
        raise ValueError(
            f"need reference_runs >= 2, k >= 0, h > 0, min_task_sd >= 0; got {reference_runs}, {k}, {h}, {min_task_sd}"
        )
    task_means_by_run = [{t: math.fsum(r) / len(r) for t, r in tasks.items() if r} for tasks in runs]
    if any(not tasks for tasks in task_means_by_run):
        raise ValueError("every run needs at least one task with a reward")
    if len(runs) <= reference_runs:
        return Cusum((None,) * len(runs), None, None)
    per_task: dict[str, list[float]] = {}
    for tasks in task_means_by_run[:reference_runs]:
        for task_id, value in tasks.items():
            per_task.setdefault(task_id, []).append(value)
    repeated = [values for values in per_task.values() if len(values) > 1]
    squares = math.fsum(math.fsum((y - math.fsum(ys) / len(ys)) ** 2 for y in ys) for ys in repeated)
    df = sum(len(ys) - 1 for ys in repeated)
    variance = max(squares / df if df else 0.0, min_task_sd**2)
    means = [math.fsum(tasks.values()) / len(tasks) for tasks in task_means_by_run]
    sizes = [len(tasks) for tasks in task_means_by_run]
    statistics: list[float | None] = [None] * reference_runs
    statistic, alarm_index = 0.0, None
    total, inverse_sizes = math.fsum(means[:reference_runs]), math.fsum(1.0 / n for n in sizes[:reference_runs])
    for index in range(reference_runs, len(runs)):
        before = index  # runs 0..index-1
        spread = variance / sizes[index] + variance * inverse_sizes / before**2
        innovation = (means[index] - total / before) / math.sqrt(spread)
        statistic = max(0.0, statistic - innovation - k)
        statistics.append(statistic)
        if alarm_index is None and statistic > h:
            alarm_index = index
        total += means[index]
        inverse_sizes += 1.0 / sizes[index]
    return Cusum(tuple(statistics), alarm_index, math.sqrt(variance))


def cusum_drift(
    dataset: str,
    runs: Sequence[tuple[int, Mapping[str, Sequence[float]]]],
    *,
    reference_runs: int = DEFAULT_REFERENCE_RUNS,
    k: float = DEFAULT_K,
    h: float = DEFAULT_H,
    min_task_sd: float = DEFAULT_MIN_TASK_SD,
) -> Drift:
    """:func:`self_starting_cusum` over ``runs`` (``[(run_id, {task_id: rewards})]``, oldest first; runs without a
    reward are skipped), with each run's mean and interval and the evidence in words. Fewer than
    ``reference_runs + 1`` runs: no statistic, no alarm (the evidence says how many more runs it needs). Raises
    ValueError as :func:`self_starting_cusum`."""
    scored = [(run_id, {t: list(r) for t, r in tasks.items() if r}) for run_id, tasks in runs]
    scored = [(run_id, tasks) for run_id, tasks in scored if tasks]
    cusum = self_starting_cusum(
        [tasks for _, tasks in scored], reference_runs=reference_runs, k=k, h=h, min_task_sd=min_task_sd
    )
    points = tuple(
        RunMean(run_id, mean_interval(list(tasks.values()), clip=True), len(tasks), statistic)
        for (run_id, tasks), statistic in zip(scored, cusum.statistics, strict=True)
    )
    means = [math.fsum(math.fsum(r) / len(r) for r in tasks.values()) / len(tasks) for _, tasks in scored]
    if cusum.task_sd is None:
        missing = reference_runs + 1 - len(scored)
        evidence = (
            f"{len(scored)} runs: the alarm needs {reference_runs} runs to learn the scale and one more"
            f" ({missing} to go)"
        )
        return Drift(dataset, points, None, None, evidence)
    if cusum.alarm_index is not None:
        index = cusum.alarm_index
        earlier = math.fsum(means[:index]) / index
        evidence = (
            f"mean reward moved down: {means[index]:.3f} at run {scored[index][0]} against {earlier:.3f} over the"
            f" {index} runs before, CUSUM {cusum.statistics[index]:.2f} > h={h:g}"
        )
        return Drift(dataset, points, cusum.task_sd, scored[index][0], evidence)
    last = cusum.statistics[-1]
    evidence = f"no drift: mean reward {means[-1]:.3f} at the last run, CUSUM {last:.2f} <= h={h:g}"
    return Drift(dataset, points, cusum.task_sd, None, evidence)


def series_drift(series: Sequence[RunRollouts], dataset: str, *, h: float = DEFAULT_H) -> Drift:
    """:func:`cusum_drift` of a stored series (see :meth:`HistoryStore.series`) with the default parameters."""
    return cusum_drift(dataset, task_means(series, dataset), h=h)
