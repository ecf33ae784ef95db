"""A finished run (a session's, or ``merge``'s merged run) appended to the history and judged against it.

:func:`run_records` turns a report's facts (``meta``, as the JSON report holds them) and its rollouts into the
history's records; :func:`remember` appends them and reads back each dataset's stability and drift
(:mod:`pytest_gym_eval.history.summary`). A history that cannot be reached or is refused never raises here: the
result carries one line saying so (the target's password redacted), and the evaluation goes on unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pytest_gym_eval.history.drift import Drift
from pytest_gym_eval.history.records import RolloutRecord, RunRecord
from pytest_gym_eval.history.stability import DEFAULT_WINDOW
from pytest_gym_eval.history.store import HistoryError, open_store
from pytest_gym_eval.history.summary import DatasetHistory, git_commit, summarize, summary_json, summary_lines
from pytest_gym_eval.history.urls import redact_url
from pytest_gym_eval.reporting.summary import RolloutResult

RESULT_OPTIONS = ("gate_mode", "sampling.")
"""The ``meta`` keys (or key prefixes, ending in ``.``) kept as the run's options that change results."""

TREND_RUNS = 10
"""Runs whose mean reward the trend line shows (the JSON report carries the whole window)."""

_DIGEST_PREFIX = "dataset_sha256."


@dataclass(frozen=True)
class Remembered:
    """What :func:`remember` did: ``run_id`` (None when nothing was written), ``histories`` (each dataset's
    judgement, empty when the history could not be read) and ``message`` (one line to say when the history was
    unavailable, "" otherwise)."""

    target: str
    run_id: int | None = None
    histories: tuple[DatasetHistory, ...] = ()
    message: str = ""

    def lines(self) -> list[str]:
        """The terminal's lines: the message, or where the run was written and the history's summary."""
        if self.message:
            return [self.message]
        lines = [f"gym history: run {self.run_id} appended to {self.target}", *summary_lines(self.histories)]
        for history in self.histories:
            means = " ".join(
                "n/a" if point.interval.estimate != point.interval.estimate else f"{point.interval.estimate:.2f}"
                for point in history.drift.points[-TREND_RUNS:]
            )
            lines.append(f"  {history.dataset} mean reward, last {min(history.runs, TREND_RUNS)} runs: {means}")
        return lines

    def report_block(self) -> dict[str, Any]:
        """The JSON report's ``history``: the target (redacted), the run's id (null when not written), the
        error (null) and :func:`~pytest_gym_eval.history.summary.summary_json`'s per-dataset block."""
        return {
            "target": self.target,
            "run_id": self.run_id,
            "error": self.message or None,
            **summary_json(self.histories),
        }

    def drifts(self) -> list[Drift]:
        """Each dataset's drift check (for the pages' trend line)."""
        return [history.drift for history in self.histories]


def run_records(
    results: Sequence[RolloutResult], meta: Mapping[str, object], *, repository: str | Path | None = None
) -> tuple[RunRecord, list[RolloutRecord]]:
    """The history's records of one run: its time (``meta["created"]`` when it is an ISO time, else now, UTC),
    the git commit of ``repository`` (None outside one), the policy model (``meta["model"]``, "" when there is
    none, e.g. a replay), Gym's version, each dataset's sha256 (``meta["dataset_sha256.NAME"]``; "" when the
    report has none), :data:`RESULT_OPTIONS`; and per rollout its dataset, task, repeat, status, reward, the
    custom metrics its test recorded (``rollout.record_metric``: name -> value), tokens and latency (seconds)."""
    model = str(meta.get("model") or "")
    started = _started(meta.get("created"))
    datasets = {r.dataset: str(meta.get(_DIGEST_PREFIX + r.dataset) or "") for r in results}
    for key, value in meta.items():
        if key.startswith(_DIGEST_PREFIX):
            datasets.setdefault(key.removeprefix(_DIGEST_PREFIX), str(value))
    run = RunRecord(
        started_at=started,
        model=model,
        gym_version=str(meta.get("gym_version") or ""),
        datasets=datasets,
        git_commit=git_commit(repository) if repository is not None else None,
        options={key: value for key, value in meta.items() if value is not None and _changes_results(key)},
    )
    rollouts = [
        RolloutRecord(
            dataset=r.dataset,
            task_id=str(r.task_id),
            repeat=r.repeat,
            model=model,
            status=r.status if r.status in ("passed", "failed") else "error",
            reward=r.reward if r.status != "error" else None,
            metrics=dict(r.metrics),
            input_tokens=r.usage.input_tokens,
            output_tokens=r.usage.output_tokens,
            latency_s=r.usage.latency,
        )
        for r in results
    ]
    return run, rollouts


def _changes_results(key: str) -> bool:
    return any(key.startswith(option) if option.endswith(".") else key == option for option in RESULT_OPTIONS)


def _started(created: object) -> datetime:
    if isinstance(created, str):
        try:
            moment = datetime.fromisoformat(created)
        except ValueError:
            moment = None
        if moment is not None and moment.tzinfo is not None:
            return moment
    return datetime.now(timezone.utc)


def remember(
    target: str, run: RunRecord, rollouts: Sequence[RolloutRecord], *, last: int = DEFAULT_WINDOW
) -> Remembered:
    """Append ``run`` with its ``rollouts`` to the history at ``target`` (one transaction) and judge each of its
    datasets over the last ``last`` runs with the same digest and model. Never raises for the history: a store
    that cannot be reached, a schema from a newer plugin or a failure while reading gives a :class:`Remembered`
    whose ``message`` says so once, naming the target with its password redacted."""
    shown = redact_url(target)
    try:
        with open_store(target) as store:
            run_id = store.append_run(run, rollouts)
            histories = summarize(store, {name: d for name, d in run.datasets.items() if d}, run.model, last=last)
    except HistoryError as error:
        return Remembered(shown, message=f"gym history: not written: {error}")
    except ValueError as error:  # a record the schema cannot hold (a bug of ours, not the evaluation's)
        return Remembered(shown, message=f"gym history {shown}: not written: {error}")
    return Remembered(shown, run_id, tuple(histories))
