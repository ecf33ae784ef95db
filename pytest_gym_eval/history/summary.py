"""What a session does with its history at its end: append the run, then judge each dataset's series.

The two calls a session (or ``merge``) makes, after its reports' results are known:

1. :func:`record_run` appends the run; it never raises for a database problem but returns the one line to say
   (the evaluation's exit status is not changed by the history).
2. :func:`summarize` reads back each series of the run (:func:`run_series`: same dataset digest, same model, same
   policy; last N runs) and returns per series each task's stability, the tasks that became flaky or started
   failing with this run, and the drift check; :func:`summary_lines` words it for the terminal,
   :func:`summary_json` for the JSON report.
"""

from __future__ import annotations

import math
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_gym_eval.history.backends import open_store
from pytest_gym_eval.history.drift import Drift, series_drift
from pytest_gym_eval.history.stability import DEFAULT_WINDOW, LABELS, RULE, TaskStability, assess_series
from pytest_gym_eval.history.store import (
    HistoryError,
    HistoryStore,
    RolloutRecord,
    RunRecord,
    SeriesKey,
)


def git_commit(directory: str | Path) -> str | None:
    """The commit checked out in ``directory`` (40 hex digits), or None outside a git repository or without git."""
    try:
        result = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=directory, capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    commit = result.stdout.strip()
    return commit if result.returncode == 0 and len(commit) == 40 else None


def record_run(target: str | Path, run: RunRecord, rollouts: Sequence[RolloutRecord]) -> tuple[int | None, str | None]:
    """Append ``run`` and ``rollouts`` to the history at ``target``: ``(run_id, None)``, or ``(None, message)`` when
    the history is unavailable or refused (the message names the redacted target; say it once and go on)."""
    try:
        with open_store(target) as store:
            return store.append_run(run, rollouts), None
    except HistoryError as error:
        return None, f"history not written: {error}"


def run_series(run: RunRecord, rollouts: Sequence[RolloutRecord]) -> list[SeriesKey]:
    """The series a run adds to, sorted: one per (dataset, model, policy) its rollouts have, with the dataset's
    digest (a dataset without a digest, e.g. a report without one, is in no series)."""
    keys = {
        SeriesKey(r.dataset, digest, r.model, r.policy) for r in rollouts if (digest := run.datasets.get(r.dataset))
    }
    return sorted(keys)


@dataclass(frozen=True)
class DatasetHistory:
    """One series as judged after the latest run: ``runs`` in the window, ``tasks`` (each task's stability),
    ``new_flaky`` and ``new_failing`` (task ids whose label became so with the latest run), ``drift``. ``policy``
    is the ``--gym-policy`` name ("" without)."""

    dataset: str
    digest: str
    model: str
    runs: int
    tasks: tuple[TaskStability, ...]
    new_flaky: tuple[str, ...]
    new_failing: tuple[str, ...]
    drift: Drift
    policy: str = ""

    @property
    def label(self) -> str:
        """The series as the terminal names it: the dataset, with its policy and model when it has a policy."""
        return SeriesKey(self.dataset, self.digest, self.model, self.policy).label

    def labelled(self, label: str) -> list[TaskStability]:
        """The tasks with this label."""
        return [task for task in self.tasks if task.label == label]


def summarize(store: HistoryStore, keys: Sequence[SeriesKey], *, last: int = DEFAULT_WINDOW) -> list[DatasetHistory]:
    """Judge each series of the run just appended (:func:`run_series`): its last ``last`` runs with the same
    dataset digest, model and policy. A task is *newly* flaky when it is flaky now but was not without the latest
    run; *newly regressed* when it is labelled "regressed" now, was not without the latest run, and ran in it."""
    result = []
    for key in keys:
        dataset, digest, model = key.dataset, key.digest, key.model
        series = store.series(key, last=last)
        if not series:
            continue
        now = assess_series(series)
        before = {task.task_id: task.label for task in assess_series(series[:-1])}
        latest = series[-1].run.id
        new_flaky = tuple(t.task_id for t in now if t.label == "flaky" and before.get(t.task_id) != "flaky")
        new_failing = tuple(
            t.task_id
            for t in now
            if t.label == "regressed" and t.outcomes[-1].run_id == latest and before.get(t.task_id) != "regressed"
        )
        # The drift alarm runs along every run of the series, not the window: a past run's verdict never moves.
        drift = series_drift(store.series(key, last=None), dataset)
        result.append(
            DatasetHistory(dataset, digest, model, len(series), tuple(now), new_flaky, new_failing, drift, key.policy)
        )
    return result


def summary_lines(histories: Sequence[DatasetHistory]) -> list[str]:
    """One line per dataset for the terminal summary, then one per new flake, new failure and drift alarm."""
    lines = []
    for history in histories:
        counts = ", ".join(f"{len(history.labelled(label))} {label}" for label in LABELS if history.labelled(label))
        drift = "DRIFT" if history.drift.alarm else "no drift"
        lines.append(f"history {history.label}: {history.runs} runs, {counts or 'no scored task'}; {drift}")
        by_id = {task.task_id: task for task in history.tasks}
        lines += [f"  new flaky task {t}: {by_id[t].evidence}" for t in history.new_flaky]
        lines += [f"  newly regressed task {t}: {by_id[t].evidence}" for t in history.new_failing]
        if history.drift.alarm:
            lines.append(f"  drift: {history.drift.evidence}")
    return lines


def _finite(value: float) -> float | None:
    """JSON has no infinity or NaN: an unbounded side (one task) or no estimate becomes null."""
    return value if math.isfinite(value) else None


def summary_json(histories: Sequence[DatasetHistory]) -> dict[str, Any]:
    """The history block of the JSON report: per series (keyed by its label: the dataset, with the policy and
    model when it has a policy) its dataset, policy, the window, each task's label, evidence, pass rate and
    sparkline (outcomes oldest first), and the drift check with each run's mean and CUSUM statistic; bounds that
    do not exist are null (strict JSON)."""
    return {
        "rule": RULE,
        "datasets": {
            history.label: {
                "dataset": history.dataset,
                "policy": history.policy,
                "digest": history.digest,
                "model": history.model,
                "runs": history.runs,
                "new_flaky": list(history.new_flaky),
                "new_failing": list(history.new_failing),
                "tasks": {
                    task.task_id: {
                        "label": task.label,
                        "evidence": task.evidence,
                        "changes": task.changes,
                        "pass_rate": _finite(task.pass_rate.estimate),
                        "pass_rate_low": _finite(task.pass_rate.low),
                        "pass_rate_high": _finite(task.pass_rate.high),
                        "sparkline": task.sparkline,
                        "runs": [entry.run_id for entry in task.outcomes],
                    }
                    for task in history.tasks
                },
                "drift": {  # its runs: the window's (the alarm ran along every run of the series)
                    "alarm": history.drift.alarm,
                    "alarm_run": history.drift.alarm_run,
                    "alarm_runs": list(history.drift.alarm_runs),
                    "evidence": history.drift.evidence,
                    "runs": [
                        {
                            "run": point.run_id,
                            "mean": _finite(point.interval.estimate),
                            "low": _finite(point.interval.low),
                            "high": _finite(point.interval.high),
                            "tasks": point.tasks,
                            "cusum": point.statistic,
                        }
                        for point in history.drift.points[-DEFAULT_WINDOW:]
                    ],
                },
            }
            for history in histories
        },
    }
