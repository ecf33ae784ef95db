"""The history store on both backends: SQLite (a file) and a real PostgreSQL server started for the session."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from pytest_gym_eval.history import backends
from pytest_gym_eval.history import store as store_module
from pytest_gym_eval.history.backends import open_store
from pytest_gym_eval.history.store import (
    HistoryUnavailable,
    RolloutRecord,
    RunRecord,
    SchemaMismatch,
    SeriesKey,
    redact_url,
)
from pytest_gym_eval.history.urls import is_postgres_url
from tests.support.postgres import PASSWORD, find_binaries, postgres_server

REPO = Path(__file__).resolve().parents[2]
T0 = datetime(2026, 11, 30, 12, 0, tzinfo=timezone.utc)


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A URL (with a password) of a real PostgreSQL server on 127.0.0.1, running for the whole session."""
    binaries = find_binaries()
    if binaries is None:
        pytest.skip("no PostgreSQL binaries (initdb, pg_ctl) on PATH or in /usr/lib/postgresql/*/bin")
    with postgres_server(binaries) as server:
        yield server.url


@pytest.fixture
def fresh_postgres(postgres_url: str) -> Iterator[str]:
    """``postgres_url`` with the history's tables dropped before the test."""
    import psycopg

    with psycopg.connect(postgres_url, autocommit=True) as connection:
        connection.execute("DROP TABLE IF EXISTS rollouts, run_datasets, runs, schema_version")
    yield postgres_url


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh history target of each backend."""
    if request.param == "sqlite":
        return str(tmp_path / "history" / "gym.db")
    url: str = request.getfixturevalue("fresh_postgres")
    return url


def _run(minutes: int = 0, model: str = "policy-a", digest: str = "d1") -> RunRecord:
    return RunRecord(
        started_at=T0 + timedelta(minutes=minutes),
        model=model,
        gym_version="0.7.0",
        datasets={"mcqa.jsonl": digest},
        git_commit="0123456789abcdef0123456789abcdef01234567",
        options={"repeats": 2, "temperature": 0.0},
    )


def _rollout(
    task: str,
    repeat: int,
    status: str = "passed",
    reward: float | None = 1.0,
    model: str = "policy-a",
    policy: str = "",
) -> RolloutRecord:
    return RolloutRecord(
        dataset="mcqa.jsonl",
        task_id=task,
        repeat=repeat,
        model=model,
        policy=policy,
        status=status,
        reward=reward,
        metrics={"extracted": "A"},
        input_tokens=120,
        output_tokens=7,
        latency_s=0.25,
    )


def test_a_run_and_its_rollouts_read_back_as_written(target: str) -> None:
    rollouts = [_rollout("1", 0), _rollout("1", 1, "failed", 0.0), _rollout("2", 0, "error", None)]
    with open_store(target) as store:
        run_id = store.append_run(_run(), rollouts)
        [run] = store.runs()
        back = store.rollouts([run_id])
    assert run.id == run_id
    assert run.started_at == T0
    assert (run.model, run.gym_version, run.rollouts) == ("policy-a", "0.7.0", 3)
    assert run.datasets == {"mcqa.jsonl": "d1"}
    assert run.git_commit == "0123456789abcdef0123456789abcdef01234567"
    assert run.options == {"repeats": 2, "temperature": 0.0}
    assert [(r.task_id, r.repeat, r.status, r.reward) for r in back] == [
        ("1", 0, "passed", 1.0),
        ("1", 1, "failed", 0.0),
        ("2", 0, "error", None),
    ]
    assert back[0].metrics == {"extracted": "A"}
    assert (back[0].input_tokens, back[0].output_tokens, back[0].latency_s) == (120, 7, 0.25)


def test_series_keeps_the_last_runs_of_one_digest_and_model_oldest_first(target: str) -> None:
    with open_store(target) as store:
        ids = [store.append_run(_run(minutes), [_rollout("1", 0)]) for minutes in range(5)]
        store.append_run(_run(10, model="policy-b"), [_rollout("1", 0, model="policy-b")])
        store.append_run(_run(11, digest="d2"), [_rollout("1", 0)])
        series = store.series(SeriesKey("mcqa.jsonl", "d1", "policy-a"), last=3)
        later = store.runs(last=2)
    assert [entry.run.id for entry in series] == ids[2:]
    assert all(len(entry.rollouts) == 1 for entry in series)
    assert [run.model for run in later] == ["policy-b", "policy-a"]


def test_a_failing_append_leaves_nothing_behind(target: str) -> None:
    with open_store(target) as store:
        with pytest.raises(ValueError, match="status"):
            store.append_run(_run(), [_rollout("1", 0), _rollout("2", 0, status="skipped")])
        assert store.runs() == []


_WRITER = textwrap.dedent(
    """
    import sys, time
    from datetime import datetime, timezone
    from pathlib import Path
    from pytest_gym_eval.history.backends import open_store
    from pytest_gym_eval.history.store import RolloutRecord, RunRecord

    target, name, go = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    deadline = time.monotonic() + 60
    while not go.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    with open_store(target) as store:
        for index in range(15):
            run = RunRecord(datetime.now(timezone.utc), name, "0.7.0", {"mcqa.jsonl": "d1"})
            rollouts = [RolloutRecord("mcqa.jsonl", str(task), 0, name, "passed", 1.0) for task in range(40)]
            store.append_run(run, rollouts)
    """
)


def test_two_processes_writing_at_once_lose_nothing(target: str, tmp_path: Path) -> None:
    go = tmp_path / "go"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    writers = [
        subprocess.Popen([sys.executable, "-c", _WRITER, target, name, str(go)], env=env, stderr=subprocess.PIPE)
        for name in ("first", "second")
    ]
    go.touch()
    errors = [writer.communicate(timeout=120)[1].decode() for writer in writers]
    assert [writer.returncode for writer in writers] == [0, 0], errors
    with open_store(target) as store:
        runs = store.runs()
        assert sorted({run.model for run in runs}) == ["first", "second"]
        assert len(runs) == 30
        assert [sum(run.model == name for run in runs) for name in ("first", "second")] == [15, 15]
        assert len(store.rollouts()) == 30 * 40


def test_sqlite_runs_in_wal_mode_with_a_busy_timeout(tmp_path: Path) -> None:
    with open_store(tmp_path / "gym.db") as store:
        assert store._rows("PRAGMA journal_mode")[0][0] == "wal"
        assert store._rows("PRAGMA busy_timeout")[0][0] == int(backends.SQLITE_BUSY_TIMEOUT_S * 1000)


def test_a_newer_schema_is_refused_naming_the_file_and_both_versions(target: str) -> None:
    with open_store(target) as store:
        store._execute("UPDATE schema_version SET version = 7")
    with pytest.raises(SchemaMismatch) as raised:
        open_store(target)
    message = str(raised.value)
    assert redact_url(target) in message
    assert "schema version 7" in message
    assert f"this plugin's {store_module.SCHEMA_VERSION}" in message
    assert PASSWORD not in message


def test_an_older_schema_is_upgraded_by_its_migrations(target: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with open_store(target) as store:
        store.append_run(_run(), [_rollout("1", 0)])
    # A layout 3 that adds a column: the file at version 2 is upgraded and keeps its data.
    monkeypatch.setattr(store_module, "SCHEMA_VERSION", 3)
    monkeypatch.setattr(
        store_module, "MIGRATIONS", {**store_module.MIGRATIONS, 2: ["ALTER TABLE runs ADD COLUMN note TEXT"]}
    )
    with open_store(target) as store:
        assert store.schema_version() == 3
        assert len(store.runs()) == 1
        assert store._rows("SELECT note FROM runs") == [(None,)]


def _downgrade_to_version_1(target: str) -> None:
    """The history at ``target`` as version 1 wrote it: no run key, no rollout policy."""
    with open_store(target) as store:
        for statement in (
            "DROP INDEX runs_by_key",
            "ALTER TABLE runs DROP COLUMN run_key",
            "ALTER TABLE rollouts DROP COLUMN policy",
            "UPDATE schema_version SET version = 1",
        ):
            store._execute(statement)


def test_a_version_1_history_is_upgraded_and_its_runs_stay_in_their_series(target: str) -> None:
    with open_store(target) as store:
        store.append_run(_run(0), [_rollout("1", 0)])
    _downgrade_to_version_1(target)
    if is_postgres_url(target):
        with pytest.raises(SchemaMismatch, match="older than this plugin's 2: reading does not upgrade it"):
            open_store(target, write=False)  # reading never writes, not even a migration
    else:  # a SQLite file is read through an upgraded copy in memory, and stays at version 1
        with open_store(target, write=False) as store:
            assert [(r.model, r.run_key) for r in store.runs()] == [("policy-a", None)]
            assert len(store.series(SeriesKey("mcqa.jsonl", "d1", "policy-a"))) == 1
        with sqlite3.connect(target) as connection:
            assert connection.execute("SELECT version FROM schema_version").fetchall() == [(1,)]
        connection.close()
    with open_store(target) as store:
        assert store.schema_version() == 2
        [old] = store.runs()
        assert old.run_key is None
        new = store.append_run(_run(1), [_rollout("1", 0, "failed", 0.0)])
        series = store.series(SeriesKey("mcqa.jsonl", "d1", "policy-a"))
    assert [entry.run.id for entry in series] == [old.id, new]
    assert [rollout.policy for entry in series for rollout in entry.rollouts] == ["", ""]


def test_a_run_is_stored_once_by_its_key(target: str) -> None:
    run = dataclasses.replace(_run(), run_key="sha256:abc")
    with open_store(target) as store:
        first = store.append_run(run, [_rollout("1", 0)])
        again = store.append_run(dataclasses.replace(run, started_at=T0 + timedelta(hours=1)), [_rollout("1", 0)])
        other = store.append_run(dataclasses.replace(run, run_key="sha256:def"), [_rollout("1", 0)])
        assert (again, store.run_with_key("sha256:abc"), store.run_with_key("nope")) == (first, first, None)
        assert [(r.id, r.run_key, r.rollouts) for r in store.runs()] == [
            (first, "sha256:abc", 1),
            (other, "sha256:def", 1),
        ]


def test_each_policy_of_a_run_is_a_series_of_its_own(target: str) -> None:
    rollouts = [_rollout("1", 0, model="m-a", policy="base"), _rollout("1", 0, "failed", 0.0, "m-b", "cand")]
    with open_store(target) as store:
        run_id = store.append_run(_run(0, model="m-a"), rollouts)
        found = store.latest_series()
    base, cand = SeriesKey("mcqa.jsonl", "d1", "m-a", "base"), SeriesKey("mcqa.jsonl", "d1", "m-b", "cand")
    assert sorted(found) == [base, cand]
    assert [(r.run_id, r.status, r.policy) for entry in found[base] for r in entry.rollouts] == [
        (run_id, "passed", "base")
    ]
    assert [(r.run_id, r.status, r.policy) for entry in found[cand] for r in entry.rollouts] == [
        (run_id, "failed", "cand")
    ]


def test_reading_a_sqlite_file_that_is_no_history_writes_nothing_and_says_so(tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE users (name TEXT)")
    connection.close()
    with pytest.raises(HistoryUnavailable, match=r"app\.db: not a pytest-gym-eval history \(no schema_version table\)"):
        open_store(path, write=False)
    with sqlite3.connect(path) as connection:
        tables = [row[0] for row in connection.execute("SELECT name FROM sqlite_master ORDER BY name")]
    connection.close()
    assert tables == ["users"]
    with pytest.raises(HistoryUnavailable, match="no such file"):
        open_store(tmp_path / "missing" / "gym.db", write=False)
    assert not (tmp_path / "missing").exists()


def test_a_sqlite_file_that_cannot_be_created_is_unavailable(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with pytest.raises(HistoryUnavailable, match="a-file"):
        open_store(blocker / "gym.db")


def test_a_file_that_is_not_a_database_is_unavailable_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "notes.db"
    path.write_text("not a database, just text\n" * 100)
    with pytest.raises(HistoryUnavailable, match=r"notes\.db"):
        open_store(path)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://gym:hunter2@db.example:5432/evals", "postgresql://gym:***@db.example:5432/evals"),
        ("postgres://gym:p%40ss@db/evals?sslmode=require", "postgres://gym:***@db/evals?sslmode=require"),
        ("postgresql://db/evals?user=gym&password=hunter2", "postgresql://db/evals?user=gym&password=***"),
        ("postgresql://gym@db/evals", "postgresql://gym@db/evals"),
        ("history/gym.db", "history/gym.db"),
    ],
)
def test_redact_url_hides_the_password_only(url: str, shown: str) -> None:
    assert redact_url(url) == shown


@pytest.mark.postgres
def test_a_wrong_password_is_unavailable_and_never_shown(postgres_url: str) -> None:
    wrong = postgres_url.replace(PASSWORD, "Wr0ng-Secret-Word")
    with pytest.raises(HistoryUnavailable) as raised:
        open_store(wrong)
    text = f"{raised.value} {raised.value!r} {raised.value.__cause__!r} {raised.value.__context__!r}"
    assert "Wr0ng-Secret-Word" not in text
    assert "gym:***@127.0.0.1" in text
    assert "password authentication failed" in text


@pytest.mark.postgres
def test_a_server_that_is_not_there_is_unavailable_without_the_password(postgres_url: str) -> None:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"postgresql://gym:{PASSWORD}@127.0.0.1:{port}/postgres"
    with pytest.raises(HistoryUnavailable) as raised:
        open_store(url)
    assert PASSWORD not in f"{raised.value} {raised.value!r}"
    assert f"127.0.0.1:{port}" in str(raised.value)


@pytest.mark.postgres
def test_the_store_repr_never_shows_the_password(fresh_postgres: str) -> None:
    with open_store(fresh_postgres) as store:
        assert PASSWORD not in repr(store)
        assert PASSWORD not in store.target


def test_without_psycopg_a_postgres_url_says_which_extra_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)
    with pytest.raises(HistoryUnavailable, match=r"pytest-gym-eval\[postgres\]") as raised:
        open_store("postgresql://gym:hunter2@127.0.0.1:1/evals")
    assert "hunter2" not in str(raised.value)


def test_postgres_binaries_are_found_on_path_or_under_debians_folder_else_none(tmp_path: Path) -> None:
    root = tmp_path / "postgresql"
    assert find_binaries(path="", root=root) is None
    for major in ("9", "15", "13"):
        folder = root / major / "bin"
        folder.mkdir(parents=True)
        for name in ("initdb", "pg_ctl"):
            (folder / name).write_text("")
    assert find_binaries(path="", root=root) == root / "15" / "bin"  # the newest, by number
    on_path = tmp_path / "bin"
    on_path.mkdir()
    for name in ("initdb", "pg_ctl"):
        (on_path / name).write_text("#!/bin/sh\n")
        (on_path / name).chmod(0o755)
    assert find_binaries(path=str(on_path), root=root) == on_path


def test_importing_the_store_does_not_import_psycopg() -> None:
    code = "import sys, pytest_gym_eval.history; print('psycopg' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(result.stdout.strip().lower()) is False


def test_five_runs_with_one_alternating_task_give_the_same_labels_on_each_backend(target: str) -> None:
    from pytest_gym_eval.history.stability import assess_series

    with open_store(target) as store:
        for index in range(5):
            alternating = "passed" if index % 2 == 0 else "failed"
            rollouts = [_rollout("1", 0), _rollout("2", 0, alternating, float(index % 2 == 0)), _rollout("3", 0)]
            store.append_run(_run(index), rollouts)
        series = store.latest_series()
    key = SeriesKey("mcqa.jsonl", "d1", "policy-a")
    assert list(series) == [key]
    labels = [(result.task_id, result.label, result.sparkline) for result in assess_series(series[key])]
    assert labels == [("1", "stable", "PPPPP"), ("2", "flaky", "PFPFP"), ("3", "stable", "PPPPP")]


@pytest.mark.postgres
def test_a_connection_lost_before_the_append_is_unavailable_and_writes_nothing(fresh_postgres: str) -> None:
    import psycopg

    store = open_store(fresh_postgres)
    try:
        [(backend,)] = store._rows("SELECT pg_backend_pid()")
        with psycopg.connect(fresh_postgres, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (backend,))
        with pytest.raises(HistoryUnavailable) as raised:
            store.append_run(_run(), [_rollout("1", 0)])
        assert PASSWORD not in f"{raised.value} {raised.value!r}"
        assert str(raised.value).startswith(f"history {redact_url(fresh_postgres)}: ")
    finally:
        store.close()
    with open_store(fresh_postgres) as again:
        assert again.runs() == []


class LockedFirst:
    """A SQLite connection whose first ``failures`` statements fail as a deadlocked WAL switch does."""

    def __init__(self, connection: sqlite3.Connection, failures: int, error: str = "database is locked") -> None:
        self.connection, self.failures, self.error = connection, failures, error
        self.tries = 0

    def execute(self, sql: str) -> sqlite3.Cursor:
        self.tries += 1
        if self.tries <= self.failures:
            raise sqlite3.OperationalError(self.error)
        return self.connection.execute(sql)


def test_a_wal_switch_sqlite_finds_locked_is_tried_again(tmp_path: Path) -> None:
    """Two sessions opening one new history file at the same moment: SQLite answers one WAL switch "database is
    locked" at once, without its busy timeout (1 in 15-30 such pairs here). It is tried again."""
    connection = sqlite3.connect(tmp_path / "h.db", isolation_level=None)
    try:
        locked = LockedFirst(connection, failures=3)
        backends._use_wal(locked, time.monotonic() + 30)  # type: ignore[arg-type]
        assert locked.tries == 4
        assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        with pytest.raises(sqlite3.OperationalError, match="locked"):  # past the deadline: SQLite's own error
            backends._use_wal(LockedFirst(connection, failures=99), time.monotonic())  # type: ignore[arg-type]
        other = LockedFirst(connection, failures=1, error="disk I/O error")
        with pytest.raises(sqlite3.OperationalError, match="disk I/O"):  # not a lock: at once
            backends._use_wal(other, time.monotonic() + 30)  # type: ignore[arg-type]
        assert other.tries == 1
    finally:
        connection.close()


def _read_only(folder: Path) -> None:
    for path in folder.iterdir():
        path.chmod(0o444)
    folder.chmod(0o555)


@pytest.mark.parametrize("copy", ["writable", "read-only", "read-only with its writer's -wal"])
def test_reading_a_wal_history_leaves_nothing_beside_it_and_works_on_a_read_only_copy(
    tmp_path: Path, copy: str
) -> None:
    # A mode=ro reader of a WAL-mode file created its -shm and -wal files and left them (as root; anyone else got
    # "attempt to write a readonly database" from a read-only copy).
    source = tmp_path / "source"
    writer = open_store(source / "gym.db")
    writer.append_run(_run(), [_rollout("t1", 0)])
    folder = tmp_path / "copy"
    folder.mkdir()
    if copy == "read-only with its writer's -wal":  # the writer is still open: its commit is in the -wal only
        for name in ("gym.db", "gym.db-wal", "gym.db-shm"):
            (folder / name).write_bytes((source / name).read_bytes())
    writer.close()
    if copy != "read-only with its writer's -wal":
        (folder / "gym.db").write_bytes((source / "gym.db").read_bytes())
    if copy != "writable":
        _read_only(folder)
    before = sorted(path.name for path in folder.iterdir())
    try:
        with open_store(folder / "gym.db", write=False) as store:
            assert [run.model for run in store.runs()] == ["policy-a"]
        done = subprocess.run(
            [sys.executable, "-m", "pytest_gym_eval", "history", str(folder / "gym.db"), "runs"],
            capture_output=True, text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(REPO)},
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert sorted(path.name for path in folder.iterdir()) == before
    finally:
        folder.chmod(0o755)


def test_a_read_only_copy_is_read_by_a_user_who_cannot_write_it(tmp_path: Path) -> None:
    # Root may write anything: the read-only copy of a user who may not, run as nobody (the system Python: the
    # store needs only the standard library).
    python, setpriv = Path("/usr/bin/python3"), Path("/usr/bin/setpriv")
    if os.geteuid() != 0 or not python.exists() or not setpriv.exists():
        pytest.skip("needs root, /usr/bin/setpriv and /usr/bin/python3 to read as another user")
    with open_store(tmp_path / "source" / "gym.db") as writer:
        writer.append_run(_run(), [_rollout("t1", 0)])
    shared = Path(tempfile.mkdtemp(prefix="gym-history-ro-"))  # a folder nobody can reach (tmp_path is root's)
    try:
        (shared / "gym.db").write_bytes((tmp_path / "source" / "gym.db").read_bytes())
        _read_only(shared)
        code = "import sys; from pytest_gym_eval.history.backends import open_store; "
        code += "print(len(open_store(sys.argv[1], write=False).runs()))"
        done = subprocess.run(
            [str(setpriv), "--reuid=65534", "--regid=65534", "--clear-groups", str(python), "-c", code,
             str(shared / "gym.db")],
            capture_output=True, text=True, timeout=60, env={"PYTHONPATH": str(REPO)},
        )  # fmt: skip
        if "No module named" in done.stderr or "Permission denied" in done.stderr:
            pytest.skip(f"nobody cannot import the package from {REPO}: {done.stderr.strip()[-200:]}")
        assert (done.returncode, done.stdout.strip()) == (0, "1"), done.stderr
        assert sorted(path.name for path in shared.iterdir()) == ["gym.db"]
    finally:
        shared.chmod(0o755)
        shutil.rmtree(shared)
