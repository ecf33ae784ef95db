"""The records the history holds: a run and its rollouts as written (:class:`RunRecord`, :class:`RolloutRecord`) and
as read back (:class:`StoredRun`, :class:`StoredRollout`, :class:`RunRollouts`). Plain frozen dataclasses."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


@dataclass(frozen=True)
class RunRecord:
    """One session (or one merged run) as written to the history.

    ``started_at`` is timezone-aware (converted to UTC when stored); ``datasets`` maps each dataset name to its
    file's sha256; ``options`` holds only options that change results (JSON-serialisable values); ``run_key``
    identifies the run (the same reports give the same key, :func:`pytest_gym_eval.reporting.run_history.run_key`):
    a history holds a run of one key once. ``model`` is the run's policy model as the reports name it (with
    several policies, the baseline's); each rollout carries its own model and policy.
    """

    started_at: datetime
    model: str
    gym_version: str
    datasets: Mapping[str, str]
    git_commit: str | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    run_key: str | None = None


@dataclass(frozen=True)
class RolloutRecord:
    """One rollout: ``status`` is "passed", "failed" or "error"; ``reward`` None for an error; ``metrics`` the
    custom metrics the rollout's test recorded (``rollout.record_metric``: name -> float); tokens counts of the
    policy model; ``latency_s`` in seconds; ``policy`` the ``--gym-policy`` name that rolled it out ("" without
    policies) and ``model`` that policy's model."""

    dataset: str
    task_id: str
    repeat: int
    model: str
    status: str
    reward: float | None = None
    metrics: Mapping[str, Any] = field(default_factory=dict)
    input_tokens: int | None = None
    output_tokens: int | None = None
    latency_s: float | None = None
    policy: str = ""


@dataclass(frozen=True)
class StoredRun:
    """A run read back: :class:`RunRecord`'s fields with its ``id`` and the number of its ``rollouts``."""

    id: int
    started_at: datetime
    model: str
    gym_version: str
    datasets: dict[str, str]
    git_commit: str | None
    options: dict[str, Any]
    rollouts: int
    run_key: str | None = None


@dataclass(frozen=True)
class StoredRollout:
    """A rollout read back, with the ``run_id`` it belongs to."""

    run_id: int
    dataset: str
    task_id: str
    repeat: int
    model: str
    status: str
    reward: float | None
    metrics: dict[str, Any]
    input_tokens: int | None
    output_tokens: int | None
    latency_s: float | None
    policy: str = ""


@dataclass(frozen=True, order=True)
class SeriesKey:
    """What makes runs comparable: one ``dataset`` file (its ``digest``) rolled out by one policy ``model`` under
    one ``policy`` name ("" without ``--gym-policy``). A run holds one series per (dataset, model, policy)."""

    dataset: str
    digest: str
    model: str
    policy: str = ""

    @property
    def label(self) -> str:
        """The dataset, with the policy and model when there is a policy (``mcqa.jsonl [cand: gpt-x]``)."""
        return f"{self.dataset} [{self.policy}: {self.model}]" if self.policy else self.dataset


@dataclass(frozen=True)
class RunRollouts:
    """One run of a series with its rollouts of one dataset (the input of stability and drift)."""

    run: StoredRun
    rollouts: list[StoredRollout]
