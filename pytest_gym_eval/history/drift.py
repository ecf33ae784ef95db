"""Drift: an alarm when a dataset's mean reward has moved down over several runs, though no single run failed.

Input: a series (every run of one dataset with one file digest and one policy model, oldest first); for each run,
each task's mean reward over its scored rollouts (:func:`task_means`). Output: each run's mean reward with its
task-clustered 95 % interval (:func:`pytest_gym_eval.stats.intervals.mean_interval`) and the CUSUM below.

The alarm (:func:`self_starting_cusum`, whose docstring has the rule of version :data:`RULE`, its sources, its
measured false-alarm rate and the alternatives rejected) is a self-starting lower CUSUM run once along the whole
series: a run's statistic depends only on the runs before it, so a later run never changes what an earlier run
said. What users see: docs/history.md.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pytest_gym_eval.history.store import RunRollouts
from pytest_gym_eval.stats.intervals import Interval, mean_interval

RULE = "self-starting-cusum-lower-2"
DEFAULT_REFERENCE_RUNS = 5
DEFAULT_K = 0.5
DEFAULT_H = 6.5
DEFAULT_MIN_TASK_SD = 0.1
DEFAULT_MIN_SKEW = -0.35
"""A run is judged only when a run's mean, as the runs before it describe it, is no more skewed to the left than
this (see :func:`run_mean_skewness`): rare failures make the mean's lower tail long, and the normal scale of the
CUSUM then raises false alarms (measured: 22 % of 100-run histories of 12 tasks that each fail 3 % of the time)."""
FALSE_ALARM_RUNS = 100
FALSE_ALARM_BOUND = 0.05
"""The share of stable histories of :data:`FALSE_ALARM_RUNS` watched runs in which the defaults may raise a false
alarm (measured in ``benchmarks/error_rates.py``; docs/benchmarks.md has the rows)."""


@dataclass(frozen=True)
class RunMean:
    """One run of the series: ``mean`` reward over its scored rollouts with the task-clustered ``interval``,
    ``tasks`` scored, the CUSUM ``statistic`` after it (None for a run that taught the scale or was not judged)."""

    run_id: int
    interval: Interval
    tasks: int
    statistic: float | None


@dataclass(frozen=True)
class Drift:
    """A dataset's drift check: ``points`` oldest first; ``task_sd`` (sqrt v, the scale at the last judged run;
    None before any); ``alarm_runs`` the ids of the runs at which the alarm fired, oldest first (the CUSUM is
    re-armed after each); ``alarm_run`` the latest of them while it stands (no run judged since: the alarm fired at
    the newest run, or the re-armed CUSUM is still learning its new reference), else None; ``evidence`` in words."""

    dataset: str
    points: tuple[RunMean, ...]
    task_sd: float | None
    alarm_run: int | None
    evidence: str
    alarm_runs: tuple[int, ...] = ()

    @property
    def alarm(self) -> bool:
        """Whether the level has moved down and the alarm still stands."""
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
    """The bare statistic: ``statistics[t]`` after run t (None for a run of a reference, and for one not judged:
    ``skipped``), ``alarms`` the indices of the runs at which it passed ``h`` (re-armed after each), ``task_sd`` =
    sqrt(v) at the last judged run (None: none judged), ``skewness`` the last skewness computed (None: none)."""

    statistics: tuple[float | None, ...]
    alarms: tuple[int, ...]
    task_sd: float | None
    skipped: tuple[int, ...] = ()
    skewness: float | None = None

    @property
    def alarm_index(self) -> int | None:
        """The first alarm's index (None: no alarm)."""
        return self.alarms[0] if self.alarms else None


class _Reference:
    """What the runs of one armed stretch taught so far: their means and sizes, and per task the count, mean, sum
    of squared deviations (Welford) and sum of its per-run means."""

    def __init__(self) -> None:
        self.runs = 0
        self.total = 0.0
        self.inverse_sizes = 0.0
        self.tasks: dict[str, tuple[int, float, float, float]] = {}

    def add(self, tasks: Mapping[str, float], mean: float) -> None:
        self.runs += 1
        self.total += mean
        self.inverse_sizes += 1.0 / len(tasks)
        for task_id, value in tasks.items():
            count, task_mean, squares, total = self.tasks.get(task_id, (0, 0.0, 0.0, 0.0))
            count += 1
            delta = value - task_mean
            task_mean += delta / count
            self.tasks[task_id] = (count, task_mean, squares + delta * (value - task_mean), total + value)

    def variance(self, floor: float) -> float:
        """The pooled within-task variance of the tasks' run means, floored at ``floor**2``."""
        df = sum(count - 1 for count, _, _, _ in self.tasks.values())
        squares = math.fsum(squares for _, _, squares, _ in self.tasks.values())
        return max(squares / df if df else 0.0, floor**2)


def run_mean_skewness(per_task: Sequence[tuple[int, float]]) -> float:
    """The skewness of a run's mean reward that ``per_task`` (each task's ``(runs seen, sum of its run means)``,
    rewards scaled to [0, 1]) implies when each task passes or fails: ``sum_i q_i(1-q_i)(1-2q_i) / (sum_i
    q_i(1-q_i))**1.5``, ``q_i = (sum_i + 1/2) / (runs_i + 1)`` (Jeffreys' estimate, so that a task that passed every
    run so far still counts as one that may fail). A pass-or-fail outcome has the most variance and skew a reward of
    that mean can have, so this is the conservative reading of partial rewards. Negative: a long lower tail (rare
    failures). 0.0 for no task."""
    second = third = 0.0
    for runs, total in per_task:
        q = (total + 0.5) / (runs + 1)
        second += q * (1 - q)
        third += q * (1 - q) * (1 - 2 * q)
    return third / second**1.5 if second > 0 else 0.0


def self_starting_cusum(
    runs: Sequence[Mapping[str, Sequence[float]]],
    *,
    reference_runs: int = DEFAULT_REFERENCE_RUNS,
    k: float = DEFAULT_K,
    h: float = DEFAULT_H,
    min_task_sd: float = DEFAULT_MIN_TASK_SD,
    min_skew: float = DEFAULT_MIN_SKEW,
) -> Cusum:
    """The lower self-starting CUSUM, run once along ``runs`` (each ``{task_id: [rewards]}``, oldest first, each with
    at least one task with a reward). Raises ValueError for ``reference_runs < 2``, ``k < 0``, ``h <= 0``,
    ``min_task_sd < 0`` or a run without rewards.

    The alarm is Page's one-sided (lower) CUSUM (E. S. Page, "Continuous inspection schemes", Biometrika 41, 1954),
    in its self-starting form (D. M. Hawkins, "Self-starting CUSUM charts for location and scale", The Statistician
    36, 1987): each run is compared with the mean of all runs before it, not with a level fixed by a few reference
    runs, whose own error would otherwise raise the false alarms several-fold. It runs once along the whole series:
    run t's statistic uses runs 1..t only, so no later run re-decides it (a window refitted after every run, rule
    version 1, showed DRIFT at some point in 31 % of stable 12-task histories within 50 runs, and the alarm of one
    past run came and went as the window moved). Rule version :data:`RULE`:

    - ``x_t`` = the mean over tasks of the task means of run t (``n_t`` tasks scored); the first ``reference_runs``
      (m, default 5) runs only teach the scale.
    - Scale: the same tasks run every time, so a run's mean varies only by each task's own run-to-run variation.
      ``v`` = the pooled variance of each task's mean over all runs before t (``sum_i (m_i - 1) var_i / sum_i (m_i -
      1)``; it keeps learning), floored at ``min_task_sd**2`` (default 0.1², for rewards in [0, 1]).
    - Innovation of run t > m: ``z_t = (x_t - mean(x_1..x_{t-1})) / sqrt(v / n_t + v / (t-1)² · sum_{j<t} 1/n_j)``;
      for a stable series with a symmetric enough run mean these are close to independent standard normals (Hawkins
      1987, §2).
    - Skew: a run is judged only when :func:`run_mean_skewness` of the runs before it is at least ``min_skew``
      (default -0.35); otherwise its statistic is None and S holds. Rare failures give a run mean a long lower tail
      that the normal scale does not know (12 tasks failing 3 % of the time: 22 % false alarms); those datasets are
      told so instead of alarmed on.
    - Statistic: ``S_m = 0``, ``S_t = max(0, S_{t-1} - z_t - k)``; an alarm at the first run with ``S_t > h``,
      after which the CUSUM is re-armed: the next ``reference_runs`` runs teach a new reference (the level after
      the move), and the watch goes on from there. Defaults ``k = 0.5`` (tuned to a drop of one run standard
      deviation) and ``h = 6.5``: Siegmund's approximation of the in-control average run length, ARL0 = (e^{2kb} -
      2kb - 1) / (2k²) with b = h + 1.166 (D. Siegmund, *Sequential Analysis*, 1985), is about 4,300 runs.

    Measured (``benchmarks/error_rates.py``, rows in docs/benchmarks.md): stable histories of 100 watched runs raise
    a false alarm in at most :data:`FALSE_ALARM_BOUND` of them for 3 to 40 tasks, pass probabilities spread over
    [0, 1], mostly deterministic, or skewed; a drop of 0.15 in every task's pass probability is caught within 10
    runs in most 40-task histories and about half of 12-task ones (the rows give the numbers). Only a decline is
    watched: a rise is good news, not an alarm.

    Alternatives rejected: comparing each run with the previous one (what ``--gym-baseline`` does) misses a decline
    of a fraction of a standard deviation per run; a reference fixed by the first m runs raises false alarms through
    its own error; winsorising the innovations instead of the skew check still left 9 % false alarms on rare
    failures.
    """
    if reference_runs < 2 or k < 0 or h <= 0 or min_task_sd < 0:
        raise ValueError(
            f"need reference_runs >= 2, k >= 0, h > 0, min_task_sd >= 0; got {reference_runs}, {k}, {h}, {min_task_sd}"
        )
    task_means_by_run = [{t: math.fsum(r) / len(r) for t, r in tasks.items() if r} for tasks in runs]
    if any(not tasks for tasks in task_means_by_run):
        raise ValueError("every run needs at least one task with a reward")
    low, high = 0.0, 1.0  # rewards scaled to [0, 1] for the skew: their range so far where it is wider
    statistics: list[float | None] = []
    alarms: list[int] = []
    skipped: list[int] = []
    reference = _Reference()
    statistic, task_sd, skewness = 0.0, None, None
    for index, tasks in enumerate(task_means_by_run):
        mean = math.fsum(tasks.values()) / len(tasks)
        if reference.runs < reference_runs:
            statistics.append(None)
        else:
            per_task = [
                (count, (total - count * low) / (high - low)) for count, _, _, total in reference.tasks.values()
            ]
            skewness = run_mean_skewness(per_task)
            if skewness < min_skew:
                statistics.append(None)
                skipped.append(index)
            else:
                variance = reference.variance(min_task_sd)
                task_sd = math.sqrt(variance)
                before = reference.runs
                spread = variance / len(tasks) + variance * reference.inverse_sizes / before**2
                innovation = (mean - reference.total / before) / math.sqrt(spread)
                statistic = max(0.0, statistic - innovation - k)
                statistics.append(statistic)
                if statistic > h:
                    alarms.append(index)
                    reference, statistic = _Reference(), 0.0  # re-armed: the runs after the alarm teach anew
                    continue
        reference.add(tasks, mean)
        low, high = min(low, *tasks.values()), max(high, *tasks.values())
    return Cusum(tuple(statistics), tuple(alarms), task_sd, tuple(skipped), skewness)


def cusum_drift(
    dataset: str,
    runs: Sequence[tuple[int, Mapping[str, Sequence[float]]]],
    *,
    reference_runs: int = DEFAULT_REFERENCE_RUNS,
    k: float = DEFAULT_K,
    h: float = DEFAULT_H,
    min_task_sd: float = DEFAULT_MIN_TASK_SD,
    min_skew: float = DEFAULT_MIN_SKEW,
) -> Drift:
    """:func:`self_starting_cusum` over ``runs`` (``[(run_id, {task_id: rewards})]``, every run of the series, oldest
    first; runs without a reward are skipped), with each run's mean and interval and the evidence in words: the
    standing alarm, else why the newest run was not judged (a reference still being learnt, or a run mean too
    skewed), else the CUSUM's value, with any earlier alarm. Raises ValueError as :func:`self_starting_cusum`."""
    scored = [(run_id, {t: list(r) for t, r in tasks.items() if r}) for run_id, tasks in runs]
    scored = [(run_id, tasks) for run_id, tasks in scored if tasks]
    cusum = self_starting_cusum(
        [tasks for _, tasks in scored],
        reference_runs=reference_runs, k=k, h=h, min_task_sd=min_task_sd, min_skew=min_skew,
    )  # fmt: skip
    points = tuple(
        RunMean(run_id, mean_interval(list(tasks.values()), clip=True), len(tasks), statistic)
        for (run_id, tasks), statistic in zip(scored, cusum.statistics, strict=True)
    )
    means = [math.fsum(math.fsum(r) / len(r) for r in tasks.values()) / len(tasks) for _, tasks in scored]
    alarm_runs = tuple(scored[index][0] for index in cusum.alarms)
    earlier = ""
    if cusum.alarms:
        index = cusum.alarms[-1]
        start = cusum.alarms[-2] + 1 if len(cusum.alarms) > 1 else 0
        level = math.fsum(means[start:index]) / (index - start)
        said = (
            f"mean reward moved down: {means[index]:.3f} at run {scored[index][0]} against {level:.3f} over the"
            f" {index - start} runs before, CUSUM {cusum.statistics[index]:.2f} > h={h:g}"
        )
        judged_since = any(statistic is not None for statistic in cusum.statistics[index + 1 :])
        if not judged_since:
            after = len(scored) - index - 1
            relearn = f"; re-armed: the runs after it teach the new level ({reference_runs - after} to go)"
            return Drift(dataset, points, cusum.task_sd, scored[index][0], said + relearn, alarm_runs)
        earlier = f"; earlier alarm{'s' if len(alarm_runs) > 1 else ''} at run {', '.join(map(str, alarm_runs))}"
    last = len(scored) - 1
    if not scored or cusum.statistics[last] is None:
        if scored and last in cusum.skipped:
            evidence = (
                f"not judged: a run's mean is too skewed to the left (skewness {cusum.skewness:.2f} < {min_skew:g}:"
                " rare failures on few tasks) for the alarm's stated false-alarm rate"
            )
        else:
            learnt = _reference_runs_so_far(cusum, len(scored))
            evidence = (
                f"{len(scored)} runs: the alarm needs {reference_runs} runs to learn the scale and one more"
                f" ({reference_runs + 1 - learnt} to go)"
            )
        return Drift(dataset, points, cusum.task_sd, None, evidence + earlier, alarm_runs)
    evidence = f"no drift: mean reward {means[-1]:.3f} at the last run, CUSUM {cusum.statistics[last]:.2f} <= h={h:g}"
    return Drift(dataset, points, cusum.task_sd, None, evidence + earlier, alarm_runs)


def _reference_runs_so_far(cusum: Cusum, runs: int) -> int:
    """How many runs the current reference holds: the runs since the latest alarm (all runs without one)."""
    return runs - (cusum.alarms[-1] + 1 if cusum.alarms else 0)


def series_drift(series: Sequence[RunRollouts], dataset: str, *, h: float = DEFAULT_H) -> Drift:
    """:func:`cusum_drift` of a stored series (see :meth:`HistoryStore.series`) with the default parameters."""
    return cusum_drift(dataset, task_means(series, dataset), h=h)
