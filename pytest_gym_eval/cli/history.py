"""``python -m pytest_gym_eval history TARGET [runs | task ID | flaky | quarantined | drift | export --csv FILE]``:
read the history store (a SQLite file or a ``postgresql://`` URL) as plain text for CI logs; no browser needed.

Reading never writes: the store is opened read-only (:func:`~pytest_gym_eval.history.backends.open_store` with
``write=False``), so a file that is no history gets no table. Exit status: 0 when the history was read, 2 when it
cannot be (no such file, a file or database that is no history, one that cannot be reached, a malformed quarantine
file); the error is one line ``python -m pytest_gym_eval history: error: ...`` with any
password in the URL replaced by ``***``.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path

from pytest_gym_eval import cli
from pytest_gym_eval.core.files import write_text_atomic
from pytest_gym_eval.history.backends import open_store
from pytest_gym_eval.history.drift import series_drift
from pytest_gym_eval.history.quarantine import (
    DEFAULT_FILE,
    QuarantineError,
    read_quarantine,
    unmatched,
    unmatched_warning,
)
from pytest_gym_eval.history.stability import DEFAULT_WINDOW, TaskStability, assess_series
from pytest_gym_eval.history.store import (
    HistoryError,
    HistoryStore,
    RunRollouts,
    SeriesKey,
    redact_url,
)
from pytest_gym_eval.history.urls import is_postgres_url, target_problem

COMMAND = "history"
EXIT_CANNOT_READ = 2
CSV_COLUMNS = (
    "run_id",
    "started_at",
    "git_commit",
    "gym_version",
    "dataset",
    "digest",
    "task_id",
    "repeat",
    "model",
    "policy",
    "status",
    "reward",
    "metrics",
    "input_tokens",
    "output_tokens",
    "latency_s",
)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=cli.prog(COMMAND),
        description="Show the evaluation history (--gym-history): runs, a task's history, flaky and quarantined "
        "tasks, drift, or export it as CSV.",
    )
    parser.add_argument("target", metavar="TARGET", help="the history: a SQLite file or a postgresql:// URL")
    parser.add_argument(
        "--last",
        type=int,
        default=DEFAULT_WINDOW,
        metavar="N",
        help=f"how many recent runs of one dataset digest and model to judge (default {DEFAULT_WINDOW})",
    )
    views = parser.add_subparsers(dest="view", metavar="VIEW")
    views.add_parser("runs", help="list the runs, oldest first (the default)")
    task = views.add_parser("task", help="one task's outcomes per run, its pass rate and label")
    task.add_argument("task_id", metavar="ID")
    task.add_argument("--dataset", help="only this dataset (default: every dataset with such a task)")
    views.add_parser("flaky", help="tasks labelled flaky, with the evidence")
    quarantined = views.add_parser("quarantined", help="the quarantine file's entries and their tasks' history")
    quarantined.add_argument("--file", default=DEFAULT_FILE, help=f"the quarantine file (default {DEFAULT_FILE})")
    views.add_parser("drift", help="each dataset's mean reward over its runs and the drift alarm")
    export = views.add_parser("export", help="every rollout with its run as CSV")
    export.add_argument("--csv", required=True, metavar="FILE", help="the CSV file to write")
    return parser


def _open(target: str) -> HistoryStore:
    if (problem := target_problem(target)) is not None:
        raise HistoryError(problem)
    if not is_postgres_url(target) and not Path(target).is_file():
        shown = redact_url(target)
        raise HistoryError(f"no history at {shown} (a session writes it with --gym-history={shown})")
    return open_store(target, write=False)


def main(argv: Sequence[str]) -> int:
    """Run the command; returns the exit status (see the module docstring)."""
    args = _parser().parse_args(list(argv))
    if args.last < 1:
        cli.error(COMMAND, f"--last must be at least 1, got {args.last}")
        return EXIT_CANNOT_READ
    try:
        with _open(args.target) as store:
            lines = _view(store, args)
    except (HistoryError, QuarantineError) as error:
        cli.error(COMMAND, error)
        return EXIT_CANNOT_READ
    except OSError as error:
        cli.error(COMMAND, redact_url(str(error)))
        return EXIT_CANNOT_READ
    print("\n".join(lines))
    return 0


def _view(store: HistoryStore, args: argparse.Namespace) -> list[str]:
    view = args.view or "runs"
    if view == "runs":
        return runs_lines(store)
    if view == "task":
        return task_lines(store, args.task_id, dataset=args.dataset, last=args.last)
    if view == "flaky":
        return flaky_lines(store, last=args.last)
    if view == "quarantined":
        return quarantined_lines(store, Path(args.file), last=args.last)
    if view == "drift":
        return drift_lines(store, last=args.last)
    count = export_csv(store, Path(args.csv))
    return [f"wrote {count} rollouts to {args.csv}"]


def runs_lines(store: HistoryStore) -> list[str]:
    """One line per run, oldest first: id, start (UTC), commit, model, Gym version, rollouts, datasets."""
    runs = store.runs()
    if not runs:
        return [f"no runs in {store.target}"]
    lines = [f"{'run':>5}  {'started (UTC)':<19}  {'commit':<8}  {'gym':<7}  {'rollouts':>8}  model / datasets"]
    for run in runs:
        commit = (run.git_commit or "-")[:8]
        lines.append(
            f"{run.id:>5}  {run.started_at:%Y-%m-%d %H:%M:%S}  {commit:<8}  {run.gym_version:<7}  {run.rollouts:>8}"
            f"  {run.model} / {', '.join(run.datasets)}"
        )
    lines.append(f"{len(runs)} run{'s' if len(runs) != 1 else ''} in {store.target}")
    return lines


def _describe(result: TaskStability, series: str | None = None) -> str:
    rate = result.pass_rate
    return (
        f"{series or result.dataset}::{result.task_id}  {result.label}  {result.sparkline}"
        f"  pass rate {rate.estimate:.2f} [{rate.low:.2f}, {rate.high:.2f}]  ({result.evidence})"
    )


def _labelled(store: HistoryStore, last: int | None) -> list[tuple[SeriesKey, str, list[RunRollouts]]]:
    """Every series of :meth:`HistoryStore.latest_series` (its ``last`` runs; None: every run), each with its label:
    the dataset, with the policy and model when the dataset has more than one series (none is left out or mixed
    with another)."""
    found = store.latest_series(last)
    count: dict[str, int] = {}
    for key in found:
        count[key.dataset] = count.get(key.dataset, 0) + 1
    return [(key, _label(key, count[key.dataset] > 1), series) for key, series in found.items()]


def _label(key: SeriesKey, several: bool) -> str:
    if key.policy or not several:
        return key.label
    return f"{key.dataset} [{key.model or 'no model'}]"


def _stabilities(store: HistoryStore, last: int) -> list[tuple[str, TaskStability]]:
    return [(label, result) for _, label, series in _labelled(store, last) for result in assess_series(series)]


def task_lines(store: HistoryStore, task_id: str, *, dataset: str | None, last: int) -> list[str]:
    """A task's label and evidence, then its outcome in each run of the window. Raises HistoryError when no
    dataset's series has the task."""
    lines: list[str] = []
    for _, label, series in _labelled(store, last):
        found = [
            result
            for result in assess_series(series)
            if result.task_id == task_id and (dataset is None or result.dataset == dataset)
        ]
        if not found:
            continue
        [result] = found
        lines.append(_describe(result, label))
        started = {entry.run.id: entry.run for entry in series}
        for outcome in result.outcomes:
            run = started[outcome.run_id]
            lines.append(
                f"  run {run.id:>5}  {run.started_at:%Y-%m-%d %H:%M:%S}  {outcome.outcome:<5}"
                f"  passed {outcome.passed} of {outcome.scored}"
            )
    if not lines:
        where = f" of {dataset}" if dataset else ""
        raise HistoryError(f"no scored rollout of task {task_id!r}{where} in {store.target}")
    return lines


def flaky_lines(store: HistoryStore, *, last: int) -> list[str]:
    """Every task labelled flaky over its window, with the evidence; then the count."""
    results = _stabilities(store, last)
    flaky = [_describe(result, label) for label, result in results if result.label == "flaky"]
    return [*flaky, f"{len(flaky)} flaky of {len(results)} tasks (last {last} runs)"]


def quarantined_lines(store: HistoryStore, path: Path, *, last: int) -> list[str]:
    """The quarantine file's active entries with each task's current label, then expired entries (gated again).
    Raises QuarantineError for a malformed or missing file."""
    quarantine = read_quarantine(path, today=datetime.now(timezone.utc).date())
    results = [result for _, result in _stabilities(store, last)]
    stored = store.tasks()
    lines = []
    for entry in unmatched(quarantine, stored):
        cli.warning(COMMAND, unmatched_warning(entry, sorted({dataset for dataset, _ in stored})))
    for entry in quarantine.active:
        seen = [result for result in results if entry.matches(result.dataset, result.task_id)]
        now = "; ".join(f"{result.label} {result.sparkline}" for result in seen) or "no history"
        lines.append(f"{entry.dataset}::{entry.task_id}  until {entry.expires}  {entry.reason}  [{now}]")
    for entry in quarantine.expired:
        cli.warning(COMMAND, f"{entry.source}: quarantine of task {entry.task_id!r} expired on {entry.expires}")
        lines.append(f"{entry.dataset}::{entry.task_id}  EXPIRED {entry.expires} (gated again)  {entry.reason}")
    lines.append(f"{len(quarantine.active)} quarantined, {len(quarantine.expired)} expired ({path})")
    return lines


def drift_lines(store: HistoryStore, *, last: int) -> list[str]:
    """Per dataset: the drift alarm's verdict (run along every run of the series), then the last ``last`` runs'
    mean reward with its interval and the CUSUM, a run at which the alarm fired marked ``ALARM``."""
    lines = []
    for key, label, series in _labelled(store, None):
        drift = series_drift(series, key.dataset)
        lines.append(f"{label}: {'DRIFT' if drift.alarm else 'ok'}: {drift.evidence}")
        if len(drift.points) > last:
            lines.append(f"  ({len(drift.points) - last} earlier runs not shown; --last N shows more)")
        for point in drift.points[-last:]:
            statistic = "-" if point.statistic is None else f"{point.statistic:.2f}"
            alarm = "  ALARM" if point.run_id in drift.alarm_runs else ""
            lines.append(
                f"  run {point.run_id:>5}  mean {point.interval.estimate:.3f}"
                f" [{point.interval.low:.3f}, {point.interval.high:.3f}]  tasks {point.tasks}  cusum {statistic}{alarm}"
            )
    return lines or [f"no runs in {store.target}"]


def export_csv(store: HistoryStore, path: Path) -> int:
    """Write every rollout with its run's columns (:data:`CSV_COLUMNS`) to ``path`` (atomically); returns how
    many rollouts were written. Raises OSError when the file cannot be written."""
    runs = {run.id: run for run in store.runs()}
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    rollouts = store.rollouts()
    for r in rollouts:
        run = runs[r.run_id]
        writer.writerow(
            [
                r.run_id,
                run.started_at.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
                run.git_commit or "",
                run.gym_version,
                r.dataset,
                run.datasets.get(r.dataset, ""),
                r.task_id,
                r.repeat,
                r.model,
                r.policy,
                r.status,
                "" if r.reward is None else repr(r.reward),
                json.dumps(r.metrics, sort_keys=True),
                "" if r.input_tokens is None else r.input_tokens,
                "" if r.output_tokens is None else r.output_tokens,
                "" if r.latency_s is None else repr(r.latency_s),
            ]
        )
    write_text_atomic(path, buffer.getvalue())
    return len(rollouts)
