"""Opening a history target as a :class:`~pytest_gym_eval.history.store.HistoryStore` (:func:`open_store`): a
``postgresql://`` (or ``postgres://``) URL through psycopg 3 (the ``postgres`` extra, imported only then), anything
else a SQLite file (standard library ``sqlite3``; WAL journal, a 30 s busy timeout, so several sessions on one
machine may write at once); the tables each backend creates (its identity column), read-only opening that never
writes, and the schema made or upgraded for writing.
"""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path

from pytest_gym_eval.history.store import SCHEMA_VERSION, HistoryStore, HistoryUnavailable
from pytest_gym_eval.history.urls import is_postgres_url, redact_url, scrub, target_problem

SQLITE_BUSY_TIMEOUT_S = 30.0
"""How long a SQLite writer waits for another's lock before failing (seconds)."""

POSTGRES_CONNECT_TIMEOUT_S = 10
"""How long connecting to PostgreSQL may take before the history is reported unavailable (seconds)."""

_POSTGRES_LOCK_KEY = 0x67796D68  # "gymh": the advisory lock that serialises schema creation on PostgreSQL


def _tables(identity: str) -> list[str]:
    return [
        "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)",
        f"""CREATE TABLE IF NOT EXISTS runs (
            id {identity},
            started_at TEXT NOT NULL,
            git_commit TEXT,
            model TEXT NOT NULL,
            gym_version TEXT NOT NULL,
            options TEXT NOT NULL,
            run_key TEXT)""",
        """CREATE TABLE IF NOT EXISTS run_datasets (
            run_id INTEGER NOT NULL REFERENCES runs(id),
            dataset TEXT NOT NULL,
            digest TEXT NOT NULL,
            PRIMARY KEY (run_id, dataset))""",
        """CREATE TABLE IF NOT EXISTS rollouts (
            run_id INTEGER NOT NULL REFERENCES runs(id),
            dataset TEXT NOT NULL,
            task_id TEXT NOT NULL,
            repeat INTEGER NOT NULL,
            model TEXT NOT NULL,
            status TEXT NOT NULL,
            reward DOUBLE PRECISION,
            metrics TEXT NOT NULL,
            input_tokens INTEGER,
            output_tokens INTEGER,
            latency_s DOUBLE PRECISION,
            policy TEXT NOT NULL DEFAULT '')""",
        "CREATE UNIQUE INDEX IF NOT EXISTS runs_by_key ON runs (run_key)",
        "CREATE INDEX IF NOT EXISTS rollouts_by_run ON rollouts (run_id, dataset)",
        "CREATE INDEX IF NOT EXISTS rollouts_by_task ON rollouts (dataset, task_id)",
        "CREATE INDEX IF NOT EXISTS run_datasets_by_digest ON run_datasets (dataset, digest)",
    ]


def open_store(target: str | Path, *, write: bool = True) -> HistoryStore:
    """Open the history at ``target``: a ``postgresql://`` URL or a SQLite file path. To ``write`` (the default)
    its folder is created and its schema created or upgraded; for reading (``write=False``) nothing is written:
    a SQLite file is opened read-only and must exist (one of an older schema is read through an upgraded copy in
    memory). Raises :class:`~pytest_gym_eval.history.store.HistoryUnavailable` when it cannot be reached or opened, is
    no history target (:func:`~pytest_gym_eval.history.urls.target_problem`: a URL of another scheme, a malformed
    PostgreSQL URL), or (reading) is no history; :class:`~pytest_gym_eval.history.store.SchemaMismatch` when a newer
    plugin wrote it, or (reading PostgreSQL) an older one that no write has upgraded yet."""
    text = str(target)
    if (problem := target_problem(text)) is not None:
        raise HistoryUnavailable(f"history: {problem}")
    if is_postgres_url(text):
        return _open_postgres(text, write)
    return _open_sqlite(Path(text), write)


def _open_sqlite(path: Path, write: bool = True) -> HistoryStore:
    try:
        if write:
            path.parent.mkdir(parents=True, exist_ok=True)
            connection = sqlite3.connect(path, timeout=SQLITE_BUSY_TIMEOUT_S, isolation_level=None)
        else:
            if not path.is_file():
                raise HistoryUnavailable(f"history {path}: no such file (a session writes it with --gym-history)")
            connection = sqlite3.connect(
                sqlite_read_uri(path), timeout=SQLITE_BUSY_TIMEOUT_S, isolation_level=None, uri=True
            )
            connection.execute("PRAGMA query_only = ON")  # (mode=rw below: no statement may write)
    except (OSError, sqlite3.Error) as error:
        raise HistoryUnavailable(f"history {path}: cannot open the SQLite file: {error}") from None
    store = HistoryStore(
        connection,
        target=str(path),
        placeholder="?",
        begin="BEGIN IMMEDIATE",
        errors=(sqlite3.Error,),
        raw_target=str(path),
    )
    try:
        with store._failures():
            connection.execute(f"PRAGMA busy_timeout = {int(SQLITE_BUSY_TIMEOUT_S * 1000)}")
            if not write:  # an older history is read through an upgraded copy in memory
                if (found := store._check_readable("read")) < SCHEMA_VERSION:
                    store._read_upgraded_copy(found)
                return store
            _use_wal(connection, time.monotonic() + SQLITE_BUSY_TIMEOUT_S)
            connection.execute("PRAGMA foreign_keys = ON")
        store._ensure_schema(_tables("INTEGER PRIMARY KEY AUTOINCREMENT"), lock=None)
    except BaseException:
        store.close()
        raise
    return store


def _writable(path: Path) -> bool:
    """Whether this process may write ``path`` and its mode says anyone may (a copy made read-only with
    ``chmod a-w`` is read-only for root too, who ``os.access`` says may write anything)."""
    try:
        return os.access(path, os.W_OK) and bool(path.stat().st_mode & 0o222)
    except OSError:
        return False


def sqlite_read_uri(path: Path) -> str:
    """The SQLite URI that reads the history file ``path`` without leaving anything beside it. A WAL-mode file's
    readers share its ``-shm`` (and ``-wal``) file: a ``mode=ro`` reader creates them and cannot remove them (they
    stayed after every ``history`` command), and fails where it cannot create them. So:

    - a file this process may write, in a folder it may write: ``mode=rw``, read with ``PRAGMA query_only`` (SQLite
      removes the side files when its last connection closes, as after a session's write);
    - a read-only copy (the file or its folder not writable) without a ``-wal`` file: ``immutable=1`` (no lock, no
      side file: nothing writes a read-only copy, and without a ``-wal`` the file holds every committed run);
    - a read-only copy with a ``-wal`` file (its writer never closed): ``mode=ro``, which reads the runs committed
      to that WAL (and works when a ``-shm`` file is there, or can be made)."""
    uri = path.resolve().as_uri()
    if _writable(path) and _writable(path.resolve().parent):
        return f"{uri}?mode=rw"
    if not path.with_name(f"{path.name}-wal").exists():
        return f"{uri}?immutable=1"
    return f"{uri}?mode=ro"


def _use_wal(connection: sqlite3.Connection, deadline: float) -> None:
    """Put the SQLite file in WAL mode (it stays so). A new file's switch takes an exclusive lock, and when two
    sessions open the same new file at the same moment their switches deadlock: SQLite then tells one of them
    "database is locked" at once, without waiting its busy timeout (measured: 1 in 15-30 pairs of sessions meeting
    on a new file). So a locked switch is tried again, 10 ms later and doubling to 0.5 s, until ``deadline`` (a
    ``time.monotonic()`` value); raises sqlite3.Error as SQLite does after that."""
    delay = 0.01
    while True:
        try:
            connection.execute("PRAGMA journal_mode = WAL").fetchall()
            return
        except sqlite3.OperationalError as error:
            if "locked" not in str(error) or time.monotonic() + delay > deadline:
                raise
        time.sleep(delay)
        delay = min(delay * 2, 0.5)


def _open_postgres(url: str, write: bool = True) -> HistoryStore:
    shown = redact_url(url)
    try:
        import psycopg
    except ImportError:
        raise HistoryUnavailable(
            f"history {shown}: a PostgreSQL history needs psycopg: pip install 'pytest-gym-eval[postgres]'"
        ) from None
    try:
        connection = psycopg.connect(url, connect_timeout=POSTGRES_CONNECT_TIMEOUT_S, autocommit=True)
    except psycopg.Error as error:
        reason = " ".join(scrub(str(error), url).split())  # one line: libpq adds a hint on a second
        raise HistoryUnavailable(f"history {shown}: cannot connect: {reason}") from None
    store = HistoryStore(
        connection,
        target=url,
        placeholder="%s",
        begin="BEGIN",
        errors=(psycopg.Error,),
        raw_target=url,
    )
    try:
        if not write:
            with store._failures():
                connection.execute("SET default_transaction_read_only = on")
                store._check_readable("refuse")
            return store
        store._ensure_schema(
            _tables("BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY"),
            lock=f"SELECT pg_advisory_xact_lock({_POSTGRES_LOCK_KEY})",
        )
    except BaseException:
        store.close()
        raise
    return store
