"""A finished run (a session's, or ``merge``'s merged run) appended to the history and judged against it.

:func:`run_records` turns a report's facts (``meta``, as the JSON report holds them) and its rollouts into the
history's records; :func:`remember` appends them and reads back each dataset's stability and drift
(:mod:`pytest_gym_eval.history.summary`). A history that cannot be reached or is refused never raises here: the
result carries one line saying so (the target's password redacted), and the evaluation goes on unchanged.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pytest_gym_eval.history.backends import open_store
from pytest_gym_eval.history.drift import Drift
from pytest_gym_eval.history.records import RolloutRecord, RunRecord
from pytest_gym_eval.history.stability import DEFAULT_WINDOW
from pytest_gym_eval.history.store import HistoryError
from pytest_gym_eval.history.summary import (
    DatasetHistory,
    git_commit,
    run_series,
    summarize,
    summary_json,
    summary_lines,
)
from pytest_gym_eval.history.urls import redact_url
from pytest_gym_eval.outcomes.causes import GYM_START
from pytest_gym_eval.reporting.summary import RolloutResult
from pytest_gym_eval.tasks.models import policy_of

RESULT_OPTIONS = ("gate_mode", "sampling.")
"""The ``meta`` keys (or key prefixes, ending in ``.``) kept as the run's options that change results."""

TREND_RUNS = 10
"""Runs whose mean reward the trend line shows (the JSON report carries the whole window)."""

_DIGEST_PREFIX = "dataset_sha256."
RUN_KEY_FACTS = ("session_id", "run_dir", "created", "head_server")
"""The ``meta`` facts of a session that tell its run from every other (:func:`run_key`): its ``session_id`` (a
random id each session draws), and for reports written before there was one, where and when it ran."""


@dataclass(frozen=True)
class Remembered:
    """What :func:`remember` did: ``run_id`` (None when nothing was written), ``histories`` (each dataset's
    judgement, empty when the history could not be read) and ``message`` (one line to say when the history was
    unavailable, "" otherwise)."""

    target: str
    run_id: int | None = None
    histories: tuple[DatasetHistory, ...] = ()
    message: str = ""

    stored_before: bool = False
    """The run (its key) was in the history already: nothing was written again."""

    def lines(self) -> list[str]:
        """The terminal's lines: the message, or where the run was written and the history's summary."""
        if self.message:
            return [self.message]
        said = (
            f"gym history: run {self.run_id} is in {self.target} already (the same reports): not written again"
            if self.stored_before
            else f"gym history: run {self.run_id} appended to {self.target}"
        )
        lines = [said, *summary_lines(self.histories)]
        for history in self.histories:
            means = " ".join(
                "n/a" if point.interval.estimate != point.interval.estimate else f"{point.interval.estimate:.2f}"
                for point in history.drift.points[-TREND_RUNS:]
            )
            lines.append(f"  {history.label} mean reward, last {min(history.runs, TREND_RUNS)} runs: {means}")
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


def run_key(metas: Sequence[Mapping[str, object]]) -> str:
    """The key of the run made of the sessions whose report ``meta`` are ``metas`` (one session, or every shard a
    merge read, in any order): a sha256 of their :data:`RUN_KEY_FACTS`. The same reports give the same key (a
    retried merge job), and a merge of one unsharded report the key its session wrote."""
    facts = sorted(json.dumps([meta.get(name) for name in RUN_KEY_FACTS], default=str) for meta in metas)
    return "sha256:" + hashlib.sha256("\n".join(facts).encode()).hexdigest()


def policy_meta(policies: Sequence[tuple[str, str | None]]) -> dict[str, object]:
    """``policy.<name>.model`` for each ``(name, served model)`` of a session comparing policies: the model each
    policy's rollouts are stored under in the history (a series per model and policy)."""
    return {f"policy.{name}.model": model for name, model in policies if model}


def run_records(
    results: Sequence[RolloutResult],
    meta: Mapping[str, object],
    *,
    repository: str | Path | None = None,
    policies: Sequence[str] = (),
    run_id: str | None = None,
) -> tuple[RunRecord, list[RolloutRecord]]:
    """The history's records of one run: its time (``meta["created"]`` when it is an ISO time, else now, UTC),
    the git commit of ``repository`` (None outside one), the policy model (``meta["model"]``, "" when there is
    none, e.g. a run attached to servers), Gym's version, each dataset's sha256 (``meta["dataset_sha256.NAME"]``;
    "" when the report has none), :data:`RESULT_OPTIONS`, its key (``run_id``, else :func:`run_key` of ``meta``); and
    per rollout its dataset, task, repeat, status, reward, the custom metrics its test recorded
    (``rollout.record_metric``: name -> value), tokens and latency (seconds), and with ``policies`` (names,
    baseline first) the policy that rolled it out (:func:`~pytest_gym_eval.tasks.models.policy_of`) and that policy's
    model (``meta["policy.NAME.model"]``, else ``meta["model"]``)."""
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
        options={name: value for name, value in meta.items() if value is not None and _changes_results(name)},
        run_key=run_id if run_id is not None else run_key([meta]),
    )
    policy = {r.agent: policy_of(r.agent, policies) if policies else "" for r in results}
    rollouts = [
        RolloutRecord(
            dataset=r.dataset,
            task_id=str(r.task_id),
            repeat=r.repeat,
            model=str(meta.get(f"policy.{policy[r.agent]}.model") or model) if policy[r.agent] else model,
            policy=policy[r.agent],
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


def never_started(results: Sequence[RolloutResult]) -> bool:
    """Whether Gym never started for these results: no rollout, or every one an error of failure class
    ``gym_start`` (:data:`pytest_gym_eval.outcomes.causes.GYM_START`). Such a run says nothing of the policy model."""
    return all(r.status == "error" and r.failure_class == GYM_START for r in results)


NEVER_STARTED = (
    "gym history: not written: Gym never started (no rollout was rolled out), and a run without outcomes would "
    "count in no task's stability yet start every series' window"
)
"""What a session (or merge) whose Gym never started says instead of writing the run."""


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
            before = store.run_with_key(run.run_key) if run.run_key is not None else None
            run_id = before if before is not None else store.append_run(run, rollouts)
            histories = summarize(store, run_series(run, rollouts), last=last)
    except HistoryError as error:
        return Remembered(shown, message=f"gym history: not written: {error}")
    except ValueError as error:  # a record the schema cannot hold (a bug of ours, not the evaluation's)
        return Remembered(shown, message=f"gym history {shown}: not written: {error}")
    return Remembered(shown, run_id, tuple(histories), stored_before=before is not None)
