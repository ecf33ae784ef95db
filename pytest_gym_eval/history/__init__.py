"""Memory across runs: a store of every run's rollouts, each task's measured stability, a quarantine list and a
drift alarm on each dataset's mean reward.

The evaluation layer: these modules import only the standard library, the leaf modules (``stats``) and, when a
``postgresql://`` URL is used, psycopg. ``store`` keeps the data (``backends`` opens it); ``stability``, ``quarantine``
and ``drift`` are pure functions over what it returns.
"""

from __future__ import annotations

from pytest_gym_eval.history.backends import open_store
from pytest_gym_eval.history.store import (
    HistoryError,
    HistoryStore,
    HistoryUnavailable,
    RolloutRecord,
    RunRecord,
    RunRollouts,
    SchemaMismatch,
    SeriesKey,
    StoredRollout,
    StoredRun,
    redact_url,
)

__all__ = [
    "HistoryError",
    "HistoryStore",
    "HistoryUnavailable",
    "RolloutRecord",
    "RunRecord",
    "RunRollouts",
    "SchemaMismatch",
    "SeriesKey",
    "StoredRollout",
    "StoredRun",
    "open_store",
    "redact_url",
]
