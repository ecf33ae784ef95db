"""The history store: every run and its rollouts, appended to a SQLite file or a PostgreSQL database.

One interface, :class:`HistoryStore`, opened by :func:`~pytest_gym_eval.history.backends.open_store` from a
*target*: a ``postgresql://`` (or ``postgres://``) URL selects PostgreSQL, anything else is a SQLite file path
(:mod:`pytest_gym_eval.history.backends`). Both backends run the same SQL (``?`` placeholders become ``%s`` for
psycopg).

:class:`HistoryStore`'s docstring has the schema (version :data:`SCHEMA_VERSION`) and the guarantees (one
transaction per run, migrations, :class:`SchemaMismatch`, :class:`HistoryUnavailable`, :func:`redact_url`). What
users see: docs/history.md.
"""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from datetime import datetime, timezone
from typing import Any, Protocol

from pytest_gym_eval.history.records import (
    RolloutRecord,
    RunRecord,
    RunRollouts,
    SeriesKey,
    StoredRollout,
    StoredRun,
)
from pytest_gym_eval.history.urls import redact_url, scrub

__all__ = [
    "MIGRATIONS",
    "SCHEMA_VERSION",
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
    "redact_url",
]

SCHEMA_VERSION = 2
"""The layout this code reads and writes; bump it with an entry in :data:`MIGRATIONS`."""

MIGRATIONS: dict[int, list[str]] = {
    1: [
        # 2: a run's key (a run is stored once), each rollout's policy (one series per model and policy). Runs of
        # version 1 keep no key (NULL: the unique index allows many) and their rollouts the policy "".
        "ALTER TABLE runs ADD COLUMN run_key TEXT",
        "CREATE UNIQUE INDEX IF NOT EXISTS runs_by_key ON runs (run_key)",
        "ALTER TABLE rollouts ADD COLUMN policy TEXT NOT NULL DEFAULT ''",
    ],
}
"""``version -> statements`` that upgrade a database at ``version`` to ``version + 1`` (the same SQL for SQLite and
PostgreSQL)."""


STATUSES = ("passed", "failed", "error")


class HistoryError(Exception):
    """Any problem with the history store; the message names the (redacted) target."""


class HistoryUnavailable(HistoryError):
    """The store cannot be reached or opened (no server, no driver, a file that cannot be created or read)."""


class SchemaMismatch(HistoryError):
    """The store was written by a newer version of the plugin (its schema version is above ours)."""


# --- The store ----------------------------------------------------------------------------------------------


class _Connection(Protocol):
    def execute(self, sql: str, parameters: Sequence[Any] = ...) -> Any: ...

    def close(self) -> None: ...


def _utc_text(moment: datetime) -> str:
    if moment.tzinfo is None:
        raise ValueError(f"started_at must be timezone-aware, got {moment!r}")
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _parse_utc(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc)


def _finite_or_none(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else float(value)


class HistoryStore:
    """A connection to one history database; use :func:`~pytest_gym_eval.history.backends.open_store`, and close it (or
    use ``with``).

    ``target`` is the redacted target (safe to print). Methods raise :class:`HistoryUnavailable` when the
    database fails underneath (its message redacted) and ValueError for a record the schema cannot hold.

    Schema (version :data:`SCHEMA_VERSION`, kept in table ``schema_version``):

    - ``runs``: ``id`` (ascending in order of insertion), ``started_at`` (ISO 8601 UTC text,
      ``YYYY-MM-DDTHH:MM:SS.ffffffZ``), ``git_commit`` (40 hex digits or NULL outside a repository), ``model``,
      ``gym_version``, ``options`` (JSON object of the options that change results), ``run_key`` (unique; NULL
      for runs written before version 2).
    - ``run_datasets``: ``(run_id, dataset, digest)``: the sha256 of each dataset file the run evaluated.
    - ``rollouts``: ``run_id, dataset, task_id, repeat, model, status`` ("passed", "failed" or "error"), ``reward``
      (NULL for an error), ``metrics`` (JSON object of the custom metrics the rollout's test recorded, name ->
      number), ``input_tokens``, ``output_tokens`` (policy model tokens or NULL), ``latency_s`` (seconds or NULL),
      ``policy`` (the ``--gym-policy`` name, "" without).

    A *series* (:class:`SeriesKey`) is the runs with rollouts of one dataset digest, model and policy.

    Guarantees: :meth:`HistoryStore.append_run` writes a run, its datasets and all its rollouts in one transaction
    (all or nothing; concurrent writers serialise on the database's own lock, none is lost), and a run whose
    ``run_key`` is already stored not again (a retried merge of the same reports). A file or database with
    an older schema is upgraded in place by :data:`MIGRATIONS`; a newer one is refused (:class:`SchemaMismatch`,
    naming the target and both versions) rather than written with an older layout. A target that cannot be reached
    raises :class:`HistoryUnavailable`; every message and ``repr`` carries the target through :func:`redact_url`, so
    a password never leaves this module. A store opened for reading (``open_store(target, write=False)``) never
    writes: no table created, no migration.
    """

    def __init__(
        self,
        connection: _Connection,
        *,
        target: str,
        placeholder: str,
        begin: str,
        errors: tuple[type[BaseException], ...],
        raw_target: str,
    ) -> None:
        self._connection = connection
        self.target = redact_url(target)
        self._placeholder = placeholder
        self._begin = begin
        self._errors = errors
        self._raw_target = raw_target

    def __repr__(self) -> str:
        return f"HistoryStore({self.target!r})"

    def __enter__(self) -> HistoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection (idempotent)."""
        with suppress(*self._errors):
            self._connection.close()

    # -- plumbing

    def _sql(self, sql: str) -> str:
        return sql.replace("?", self._placeholder) if self._placeholder != "?" else sql

    def _execute(self, sql: str, parameters: Sequence[Any] = ()) -> Any:
        return self._connection.execute(self._sql(sql), tuple(parameters))

    def _rows(self, sql: str, parameters: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._failures():
            return list(self._execute(sql, parameters).fetchall())

    @contextmanager
    def _failures(self) -> Iterator[None]:
        try:
            yield
        except self._errors as error:
            raise HistoryUnavailable(
                f"history {self.target}: {scrub(str(error), self._raw_target) or type(error).__name__}"
            ) from None

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        with self._failures():
            self._execute(self._begin)
            try:
                yield
            except BaseException:
                self._execute("ROLLBACK")
                raise
            self._execute("COMMIT")

    # -- schema

    def _check_readable(self, older: str) -> int:
        """For a store opened for reading: its schema version. Refuses, without writing anything, a database that is
        no history (no ``schema_version`` table, or no version in it), a newer one, and an older one unless ``older``
        is "read" (the caller reads an upgraded copy); "refuse" says that reading does not upgrade it."""
        try:
            rows = list(self._execute("SELECT version FROM schema_version").fetchall())
        except self._errors as error:
            if "schema_version" not in str(error) and "not a database" not in str(error):
                raise
            raise HistoryUnavailable(
                f"history {self.target}: not a pytest-gym-eval history (no schema_version table); "
                "a session writes one with --gym-history"
            ) from None
        if not rows:
            raise HistoryUnavailable(f"history {self.target}: not a pytest-gym-eval history (no schema version)")
        found = int(max(row[0] for row in rows))
        if found > SCHEMA_VERSION:
            raise SchemaMismatch(
                f"history {self.target} has schema version {found}, newer than this plugin's "
                f"{SCHEMA_VERSION}: upgrade pytest-gym-eval to read it"
            )
        if found < SCHEMA_VERSION and older != "read":
            raise SchemaMismatch(
                f"history {self.target} has schema version {found}, older than this plugin's {SCHEMA_VERSION}: "
                "reading does not upgrade it; the next session (or merge) writing to it with --gym-history does"
            )
        return found

    def _read_upgraded_copy(self, found: int) -> None:
        """Read from here on an in-memory copy of this SQLite history, upgraded from version ``found`` by
        :data:`MIGRATIONS`: the file stays as it is (reading never writes) and the views read the current layout."""
        copy = sqlite3.connect(":memory:", isolation_level=None)
        self._connection.backup(copy)  # type: ignore[attr-defined]
        self._connection.close()
        self._connection = copy
        for version in range(found, SCHEMA_VERSION):
            for statement in MIGRATIONS.get(version, []):
                self._execute(statement)

    def _ensure_schema(self, tables: list[str], lock: str | None) -> None:
        """Create the tables of an empty database, upgrade an older one, refuse a newer one."""
        with self._transaction():
            if lock:
                self._execute(lock)
            for statement in tables[:1]:
                self._execute(statement)
            rows = list(self._execute("SELECT version FROM schema_version").fetchall())
            if not rows:
                for statement in tables[1:]:
                    self._execute(statement)
                self._execute("INSERT INTO schema_version (version) VALUES (?)", (SCHEMA_VERSION,))
                return
            found = int(max(row[0] for row in rows))
            if found > SCHEMA_VERSION:
                raise SchemaMismatch(
                    f"history {self.target} has schema version {found}, newer than this plugin's "
                    f"{SCHEMA_VERSION}: upgrade pytest-gym-eval to write to it, or name another history"
                )
            for version in range(found, SCHEMA_VERSION):
                for statement in MIGRATIONS.get(version, []):
                    self._execute(statement)
            if found < SCHEMA_VERSION:
                self._execute("UPDATE schema_version SET version = ?", (SCHEMA_VERSION,))

    def schema_version(self) -> int:
        """The schema version the database holds now."""
        return int(self._rows("SELECT max(version) FROM schema_version")[0][0])

    # -- writing

    def run_with_key(self, run_key: str) -> int | None:
        """The id of the stored run whose key is ``run_key``, or None."""
        rows = self._rows("SELECT id FROM runs WHERE run_key = ?", (run_key,))
        return int(rows[0][0]) if rows else None

    def append_run(self, run: RunRecord, rollouts: Sequence[RolloutRecord]) -> int:
        """Append ``run``, its datasets and ``rollouts`` in one transaction; returns the run's id. A run whose
        ``run_key`` is stored already is not written again: its id is returned. Raises ValueError for a status
        outside :data:`STATUSES`, a naive ``started_at`` or a value JSON cannot hold."""
        for rollout in rollouts:
            if rollout.status not in STATUSES:
                raise ValueError(f"rollout status must be one of {STATUSES}, got {rollout.status!r}")
        started = _utc_text(run.started_at)
        options = json.dumps(dict(run.options), sort_keys=True)
        rows = [
            (
                r.dataset,
                str(r.task_id),
                int(r.repeat),
                r.model,
                r.status,
                _finite_or_none(r.reward),
                json.dumps(dict(r.metrics), sort_keys=True),
                r.input_tokens,
                r.output_tokens,
                _finite_or_none(r.latency_s),
                r.policy,
            )
            for r in rollouts
        ]
        with self._transaction():
            if run.run_key is not None:
                found = list(self._execute("SELECT id FROM runs WHERE run_key = ?", (run.run_key,)).fetchall())
                if found:
                    return int(found[0][0])
            cursor = self._execute(
                "INSERT INTO runs (started_at, git_commit, model, gym_version, options, run_key)"
                " VALUES (?, ?, ?, ?, ?, ?)" + (" RETURNING id" if self._placeholder != "?" else ""),
                (started, run.git_commit, run.model, run.gym_version, options, run.run_key),
            )
            run_id = int(cursor.fetchone()[0] if self._placeholder != "?" else cursor.lastrowid)
            for dataset, digest in sorted(run.datasets.items()):
                self._execute(
                    "INSERT INTO run_datasets (run_id, dataset, digest) VALUES (?, ?, ?)", (run_id, dataset, digest)
                )
            if rows:
                self._executemany(
                    "INSERT INTO rollouts (run_id, dataset, task_id, repeat, model, status, reward, metrics,"
                    " input_tokens, output_tokens, latency_s, policy) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [(run_id, *row) for row in rows],
                )
        return run_id

    def _executemany(self, sql: str, rows: list[tuple[Any, ...]]) -> None:
        executemany: Callable[..., Any] | None = getattr(self._connection, "executemany", None)
        if executemany is not None:
            executemany(self._sql(sql), rows)
        else:  # psycopg's Connection has no executemany; its cursor does
            with self._connection.cursor() as cursor:  # type: ignore[attr-defined]
                cursor.executemany(self._sql(sql), rows)

    # -- reading

    _RUN_COLUMNS = (
        "runs.id, runs.started_at, runs.model, runs.gym_version, runs.git_commit, runs.options,"
        " (SELECT count(*) FROM rollouts WHERE rollouts.run_id = runs.id), runs.run_key"
    )

    def _runs_from(self, rows: list[tuple[Any, ...]]) -> list[StoredRun]:
        if not rows:
            return []
        ids = [int(row[0]) for row in rows]
        datasets: dict[int, dict[str, str]] = {run_id: {} for run_id in ids}
        marks = ", ".join("?" for _ in ids)
        for run_id, dataset, digest in self._rows(
            f"SELECT run_id, dataset, digest FROM run_datasets WHERE run_id IN ({marks})", ids
        ):
            datasets[int(run_id)][dataset] = digest
        return [
            StoredRun(
                id=int(row[0]),
                started_at=_parse_utc(row[1]),
                model=row[2],
                gym_version=row[3],
                git_commit=row[4],
                options=json.loads(row[5]),
                datasets=dict(sorted(datasets[int(row[0])].items())),
                rollouts=int(row[6]),
                run_key=row[7],
            )
            for row in rows
        ]

    def runs(self, last: int | None = None) -> list[StoredRun]:
        """Runs oldest first (by start time, then id); only the ``last`` most recent when given."""
        sql = f"SELECT {self._RUN_COLUMNS} FROM runs ORDER BY runs.started_at DESC, runs.id DESC"
        rows = self._rows(sql + (f" LIMIT {int(last)}" if last is not None else ""))
        return list(reversed(self._runs_from(rows)))

    def rollouts(
        self,
        run_ids: Sequence[int] | None = None,
        *,
        dataset: str | None = None,
        model: str | None = None,
        policy: str | None = None,
    ) -> list[StoredRollout]:
        """Rollouts of the given runs (all runs when None), optionally of one dataset, model and policy, in run,
        dataset, task, repeat order."""
        clauses: list[str] = []
        parameters: list[object] = []
        if run_ids is not None:
            if not run_ids:
                return []
            clauses.append(f"run_id IN ({', '.join('?' for _ in run_ids)})")
            parameters += [int(run_id) for run_id in run_ids]
        for column, value in (("dataset", dataset), ("model", model), ("policy", policy)):
            if value is not None:
                clauses.append(f"{column} = ?")
                parameters.append(value)
        where = f" WHERE {' AND '.join(clauses)}" if clauses else ""
        rows = self._rows(
            "SELECT run_id, dataset, task_id, repeat, model, status, reward, metrics, input_tokens, output_tokens,"
            f" latency_s, policy FROM rollouts{where} ORDER BY run_id, dataset, task_id, repeat, policy",
            parameters,
        )
        return [
            StoredRollout(
                run_id=int(row[0]),
                dataset=row[1],
                task_id=row[2],
                repeat=int(row[3]),
                model=row[4],
                status=row[5],
                reward=None if row[6] is None else float(row[6]),
                metrics=json.loads(row[7]),
                input_tokens=row[8],
                output_tokens=row[9],
                latency_s=None if row[10] is None else float(row[10]),
                policy=row[11],
            )
            for row in rows
        ]

    def tasks(self) -> set[tuple[str, str]]:
        """Every ``(dataset, task_id)`` any stored run has a rollout of."""
        return {(row[0], row[1]) for row in self._rows("SELECT DISTINCT dataset, task_id FROM rollouts")}

    def series(self, key: SeriesKey, *, last: int | None = 20) -> list[RunRollouts]:
        """The ``last`` runs (oldest first; None: every run) of the series ``key``: those that evaluated its dataset
        with its file digest and have rollouts of it by its model and policy, each with those rollouts only: the
        window of :mod:`.stability`, and (every run) the series :mod:`.drift` runs along."""
        if last is not None and last < 1:
            raise ValueError(f"last must be at least 1, got {last}")
        limit = "" if last is None else f" LIMIT {int(last)}"
        rows = self._rows(
            f"SELECT {self._RUN_COLUMNS} FROM runs JOIN run_datasets ON run_datasets.run_id = runs.id"
            " WHERE run_datasets.dataset = ? AND run_datasets.digest = ? AND EXISTS (SELECT 1 FROM rollouts"
            " WHERE rollouts.run_id = runs.id AND rollouts.dataset = ? AND rollouts.model = ? AND rollouts.policy = ?)"
            f" ORDER BY runs.started_at DESC, runs.id DESC{limit}",
            (key.dataset, key.digest, key.dataset, key.model, key.policy),
        )
        runs = list(reversed(self._runs_from(rows)))
        by_run: dict[int, list[StoredRollout]] = {run.id: [] for run in runs}
        for rollout in self.rollouts([run.id for run in runs], dataset=key.dataset, model=key.model, policy=key.policy):
            by_run[rollout.run_id].append(rollout)
        return [RunRollouts(run, by_run[run.id]) for run in runs]

    def latest_series(self, last: int | None = 20) -> dict[SeriesKey, list[RunRollouts]]:
        """Every series of the history's latest dataset files, sorted: per (dataset, model, policy) the series of
        the digest its most recent run evaluated (a dataset whose file changed starts a new series), with its
        ``last`` runs (None: every run; :meth:`series`). Every model and policy keeps its own series: none is left
        out."""
        rows = self._rows(
            "SELECT DISTINCT run_datasets.dataset, run_datasets.digest, rollouts.model, rollouts.policy, runs.id,"
            " runs.started_at FROM run_datasets JOIN runs ON runs.id = run_datasets.run_id JOIN rollouts"
            " ON rollouts.run_id = runs.id AND rollouts.dataset = run_datasets.dataset"
            " ORDER BY runs.started_at, runs.id"
        )
        newest = {(dataset, model, policy): digest for dataset, digest, model, policy, _, _ in rows}
        keys = sorted(SeriesKey(dataset, digest, model, policy) for (dataset, model, policy), digest in newest.items())
        return {key: self.series(key, last=last) for key in keys}
