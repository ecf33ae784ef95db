"""A real PostgreSQL server for the tests: ``initdb`` in a temporary folder, ``pg_ctl start`` on 127.0.0.1 at a
free port, password authentication (scram-sha-256) for one user, stopped by its PID at the end.

Debian's ``postgresql`` package (``scripts/setup.sh`` installs it) puts the binaries in
``/usr/lib/postgresql/<major>/bin``; ``initdb`` and ``pg_ctl`` on PATH are used first. PostgreSQL refuses to run as
root, so under root the server runs as the unprivileged ``postgres`` user the package creates (``runuser``).
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

USER = "gym"
PASSWORD = "s3cret-Pa55word"
START_TIMEOUT_S = 60


def find_binaries(path: str | None = None, root: Path = Path("/usr/lib/postgresql")) -> Path | None:
    """The folder holding ``initdb`` and ``pg_ctl``: found on ``path`` (default: PATH) first, then the newest
    ``root/<major>/bin``; None when PostgreSQL is not installed (the only reason the postgres tests skip)."""
    on_path = shutil.which("pg_ctl", path=path)
    if on_path and shutil.which("initdb", path=path):
        return Path(os.path.realpath(on_path)).parent
    candidates = sorted(
        root.glob("*/bin"),
        key=lambda folder: int(folder.parent.name) if folder.parent.name.isdigit() else 0,
    )
    for folder in reversed(candidates):
        if (folder / "initdb").exists() and (folder / "pg_ctl").exists():
            return folder
    return None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class PostgresServer:
    """A running server: ``url`` carries the password (``postgresql://gym:...@127.0.0.1:PORT/postgres``)."""

    folder: Path
    port: int
    pid: int
    url: str
    log: Path


def _runner() -> tuple[list[str], int | None, int | None]:
    """The command prefix that runs a PostgreSQL binary as a non-root user, and that user's uid/gid to own the
    folder (None when we are not root)."""
    if os.geteuid() != 0:
        return [], None, None
    try:
        entry = pwd.getpwnam("postgres")
    except KeyError:
        raise RuntimeError("running as root and there is no 'postgres' user to run PostgreSQL as") from None
    return ["runuser", "-u", "postgres", "--"], entry.pw_uid, entry.pw_gid


@contextlib.contextmanager
def postgres_server(binaries: Path) -> Iterator[PostgresServer]:
    """Start a throw-away server from ``binaries`` and stop it (by its PID) on exit; the folder is removed."""
    prefix, uid, gid = _runner()
    folder = Path(tempfile.mkdtemp(prefix="gym-history-pg-"))
    data, log, password_file = folder / "data", folder / "server.log", folder / "password"
    password_file.write_text(PASSWORD + "\n")
    if uid is not None and gid is not None:
        os.chown(folder, uid, gid)
        os.chown(password_file, uid, gid)
    pid = 0
    try:
        subprocess.run(
            [
                *prefix,
                str(binaries / "initdb"),
                "-D",
                str(data),
                "-U",
                USER,
                "--auth=scram-sha-256",
                f"--pwfile={password_file}",
                "--encoding=UTF8",
                "--no-instructions",
            ],
            check=True,
            capture_output=True,
            timeout=START_TIMEOUT_S,
        )
        port = _free_port()
        options = f"-h 127.0.0.1 -p {port} -k {folder} -c fsync=off"
        subprocess.run(
            [*prefix, str(binaries / "pg_ctl"), "-D", str(data), "-l", str(log), "-o", options, "-w", "start"],
            check=True,
            capture_output=True,
            timeout=START_TIMEOUT_S,
        )
        pid = int((data / "postmaster.pid").read_text().split("\n", 1)[0])
        yield PostgresServer(folder, port, pid, f"postgresql://{USER}:{PASSWORD}@127.0.0.1:{port}/postgres", log)
    finally:
        if pid:
            _stop(pid)
        shutil.rmtree(folder, ignore_errors=True)


def _stop(pid: int) -> None:
    """Fast shutdown (SIGINT to the postmaster), then SIGKILL if it has not gone within the bound."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGINT)
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
