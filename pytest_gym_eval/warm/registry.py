"""The per-user registry of warm Gyms (``--gym-keep-alive``): where they are, who uses them, which are stale.

Layout, under ``$PYTEST_GYM_EVAL_WARM`` or else ``<cache>/warm`` (:func:`~pytest_gym_eval.provision.cache_root`),
every folder owner-only (0700) and every file too (0600)::

    <key>.lock           an fcntl lock per Gym configuration key (:mod:`pytest_gym_eval.gym.fingerprint`)
    <key>.json           the entry of the warm Gym serving that key (:class:`Entry`), written once it is ready
    gyms/<key12>-<time>/ one warm Gym's home: spec.json (what to start), gym-config.yaml, processes.jsonl,
                         logs/ (keeper.log, gym-env-start.log, gym-servers/, replay-model.jsonl), leases/,
                         keeper.json (its keeper, and since when it is idle), ray/

Whoever decides about a key holds its lock: a session looking for a warm Gym (it then attaches, or starts one
and holds the lock until that one is ready or failed, so no second session starts another for the key nor
attaches to a half-started one), and the keeper deciding to stop an idle Gym. A session using a warm Gym holds
a *lease*, ``leases/<pid>-<start>.json`` in its home, removed when the session ends (the keeper drops the lease
of a session that died). An entry is *stale* (:meth:`Entry.problem`) when the machine restarted since (its
boot id), its keeper or its servers are gone (PIDs checked with their start times), or its head server does not
answer ``GET /readyz``; :meth:`Registry.discard` stops what is left of it and removes it.

Nothing here holds an API key: the entry names the variable the key is read from, never its value.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pytest_gym_eval.core.files import write_json_atomic
from pytest_gym_eval.core.rundir import RunPaths
from pytest_gym_eval.gym.orphans import Owner, processes_of
from pytest_gym_eval.gym.processes import DEFAULT_GRACE, KILL_BOUND, is_running, stop_sessions
from pytest_gym_eval.outcomes.causes import TRIP_LINE, TRIP_MARKER, redact
from pytest_gym_eval.provision import cache_root

REGISTRY_ENV = "PYTEST_GYM_EVAL_WARM"
"""Environment variable naming the registry folder (default ``<cache>/warm``); tests give each its own."""

ENTRY_FORMAT = 1
HEALTH_TIMEOUT = 5.0
"""Seconds the head server gets to answer ``GET /readyz`` before its warm Gym counts as stale."""

LOCK_POLL = 0.1
"""Seconds between two tries of a key's lock (a wait for it can be interrupted between tries)."""

KEY_SHOWN = 12
"""Hex digits of a key shown on the terminal and in ``status`` (and the name prefix of a warm Gym's home)."""


class RegistryError(Exception):
    """The registry folder cannot be used (owned by another user, not a folder); ``str()`` says which."""


def registry_root() -> Path:
    """The registry folder: ``$PYTEST_GYM_EVAL_WARM``, else ``<cache>/warm``."""
    override = os.environ.get(REGISTRY_ENV)
    if override:
        return Path(os.path.abspath(os.path.expanduser(override)))
    return cache_root() / "warm"


def private_dir(path: Path) -> Path:
    """Make ``path`` (and missing parents) and leave it owner-only (0700); returns it. Raises
    :class:`RegistryError` when it is not a folder or belongs to another user."""
    try:
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
        info = os.stat(path)
    except OSError as error:
        raise RegistryError(f"{path}: cannot make the folder: {error.strerror or error}") from None
    if info.st_uid != os.getuid():
        raise RegistryError(f"{path} belongs to another user (uid {info.st_uid}); set ${REGISTRY_ENV} elsewhere")
    if info.st_mode & 0o777 != 0o700:
        os.chmod(path, 0o700)
    return path


def write_private(path: Path, data: object) -> None:
    """Write ``data`` as JSON to ``path`` atomically (a temporary file renamed into place), owner-only (0600)."""
    write_json_atomic(path, data, mode=0o600)


def read_json(path: Path) -> dict[str, Any] | None:
    """The JSON object in ``path``, or None when it is missing or not a JSON object."""
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def boot_id() -> str:
    """This boot of the machine (``/proc/sys/kernel/random/boot_id``; empty when unknown): PIDs and process
    start times of another boot mean nothing."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def head_answers(host: str, port: int, timeout: float = HEALTH_TIMEOUT) -> str | None:
    """None when Gym's head server at ``host:port`` answers ``GET /readyz`` with 2xx, else why not."""
    try:
        with urllib.request.urlopen(f"http://{host}:{port}/readyz", timeout=timeout) as response:
            return None if 200 <= response.status < 300 else f"HTTP {response.status}"
    except urllib.error.HTTPError as error:
        return f"HTTP {error.code}"
    except (urllib.error.URLError, OSError) as error:
        return str(getattr(error, "reason", error))


# Leases: which sessions use a warm Gym.


def _lease_path(home: Path, owner: Owner) -> Path:
    return RunPaths(home).leases / f"{owner.pid}-{owner.start}.json"


def add_lease(home: Path, owner: Owner) -> None:
    """Record that the session ``owner`` uses the warm Gym in ``home``."""
    private_dir(RunPaths(home).leases)
    write_private(_lease_path(home, owner), {"owner": owner.marker, "since": time.time()})


def remove_lease(home: Path, owner: Owner) -> None:
    """The session ``owner`` no longer uses the warm Gym in ``home`` (idempotent)."""
    with contextlib.suppress(FileNotFoundError):
        _lease_path(home, owner).unlink()


def live_leases(home: Path, prune: bool = False) -> list[Owner]:
    """The sessions holding a lease on the warm Gym in ``home`` whose process still runs; with ``prune`` the
    leases of sessions that died are removed."""
    found = []
    try:
        paths = sorted(RunPaths(home).leases.glob("*.json"))
    except OSError:
        return []
    for path in paths:
        data = read_json(path)
        owner = Owner.parse(str(data.get("owner", ""))) if data else None
        if owner is not None and owner.alive():
            found.append(owner)
        elif prune and data is not None:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
    return found


def idle_since(home: Path) -> float | None:
    """Since when (seconds since the epoch) the warm Gym in ``home`` has had no session, as its keeper last
    wrote it in ``keeper.json``; None while in use (or before its keeper wrote it)."""
    data = read_json(RunPaths(home).keeper) or {}
    value = data.get("idle_since")
    return float(value) if isinstance(value, (int, float)) else None


# Entries.


@dataclass(frozen=True)
class Entry:
    """A registered warm Gym.

    ``key`` is its configuration's key and ``configuration`` the configuration itself
    (:mod:`pytest_gym_eval.gym.fingerprint`); ``home`` its folder; ``head_server`` ``(host, port)``; ``keeper`` the
    :data:`~pytest_gym_eval.gym.orphans.MARKER` value of its keeper process (``<pid>:<start>:<home>``) and ``boot``
    the boot id it started in; ``servers`` the PID (= process session) of its ``gym env start``; ``model`` the
    policy model its servers call (``url``, ``model``, ``model_type``, ``api_key_env``: a variable's name, never
    a key); ``idle_timeout`` seconds; ``started`` seconds since the epoch; ``ready_after`` the seconds its
    start-up took.
    """

    key: str
    home: Path
    head_server: tuple[str, int]
    keeper: str
    boot: str
    servers: int
    model: dict[str, str]
    idle_timeout: float
    started: float
    ready_after: float = 0.0
    configuration: dict[str, Any] = field(default_factory=dict)

    @property
    def short(self) -> str:
        """The key's first :data:`KEY_SHOWN` hex digits."""
        return self.key[:KEY_SHOWN]

    @property
    def keeper_owner(self) -> Owner:
        """The keeper as the owner of the warm Gym's processes (they carry its marker)."""
        owner = Owner.parse(self.keeper)
        assert owner is not None, f"not a keeper marker: {self.keeper!r}"
        return owner

    def to_json(self) -> dict[str, Any]:
        """The entry as written to ``<key>.json``."""
        data = asdict(self)
        data.update(format=ENTRY_FORMAT, home=str(self.home), head_server=list(self.head_server))
        data["started_at"] = datetime.fromtimestamp(self.started, timezone.utc).isoformat(timespec="seconds")
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Entry | None:
        """The entry ``data`` describes, or None when it is not one (another format, a field missing)."""
        try:
            if data.get("format") != ENTRY_FORMAT:
                return None
            host, port = data["head_server"]
            entry = cls(
                key=str(data["key"]), home=Path(data["home"]), head_server=(str(host), int(port)),
                keeper=str(data["keeper"]), boot=str(data["boot"]), servers=int(data["servers"]),
                model={str(k): str(v) for k, v in dict(data["model"]).items()},
                idle_timeout=float(data["idle_timeout"]), started=float(data["started"]),
                ready_after=float(data.get("ready_after", 0.0)), configuration=dict(data.get("configuration", {})),
            )  # fmt: skip
        except (KeyError, TypeError, ValueError):
            return None
        return entry if Owner.parse(entry.keeper) is not None else None

    def problem(self, check_head: bool = True) -> str | None:
        """Why this warm Gym cannot serve a session (it is stale), or None when it can: the machine restarted
        since it started, its keeper or its servers are gone, a model client of its servers stopped calling its
        endpoint (:func:`tripped_model_client`), or (``check_head``) its head server does not answer
        ``GET /readyz`` within :data:`HEALTH_TIMEOUT` seconds."""
        if (gone := self.gone()) is not None:
            return gone
        if (tripped := tripped_model_client(RunPaths(self.home).server_logs)) is not None:
            return tripped
        return self.head_problem() if check_head else None

    def gone(self) -> str | None:
        """Why this warm Gym's processes are gone (the machine restarted, its keeper or its servers exited), or
        None while they run. Reads ``/proc`` only: cheap enough to poll while a session uses the Gym."""
        if self.boot and self.boot != boot_id():
            return "the machine restarted since it started"
        owner = self.keeper_owner
        if not owner.alive():
            return f"its keeper (pid {owner.pid}) is gone"
        if not is_running(self.servers):
            return f"its servers (`gym env start`, pid {self.servers}) are gone"
        return None

    def head_problem(self, patience: float = 0.0) -> str | None:
        """Why the head server does not answer ``GET /readyz`` with 2xx, or None when it does; asked again for up
        to ``patience`` seconds before giving up (a head server answers 503 for a moment after Gym says its servers
        are ready, until it marks itself ready)."""
        deadline = time.monotonic() + patience
        while (why := head_answers(*self.head_server)) is not None and time.monotonic() < deadline:
            time.sleep(0.25)
        if why is None:
            return None
        return f"its head server {self.head_server[0]}:{self.head_server[1]} does not answer ({why})"


def tripped_model_client(logs: Path) -> str | None:
    """Why a Gym whose server logs are in ``logs`` (``<server>.log``) can no longer reach its model, or None: the
    first server whose model client stopped calling its endpoint (:data:`~pytest_gym_eval.outcomes.causes.TRIP_LINE`),
    with
    the URL (redacted) and HTTP status. A warm Gym keeps that state for every later session, so it is retired."""
    for log in sorted(logs.glob("*.log")):
        try:
            data = log.read_bytes()
        except OSError:
            continue
        at = data.find(TRIP_MARKER)
        if at < 0:
            continue
        end = data.find(b"\n", at)
        line = data[at : end if end >= 0 else len(data)].decode("utf-8", "replace")
        found = TRIP_LINE.search(line)
        url, status = (redact(found["url"]), found["status"]) if found else ("its endpoint", "?")
        return (
            f"its {log.stem} server stopped calling {url} after HTTP {status} (Gym's model client refuses every "
            "later request once an endpoint says the key is invalid or the quota spent, until Gym restarts)"
        )
    return None


class Registry:
    """The registry folder ``root`` (default :func:`registry_root`); see the module docstring."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = root if root is not None else registry_root()

    def ensure(self) -> Registry:
        """Make the folder (owner-only); returns self. Raises :class:`RegistryError`."""
        private_dir(self.root)
        return self

    def entry_path(self, key: str) -> Path:
        return self.root / f"{key}.json"

    @contextlib.contextmanager
    def lock(
        self,
        key: str,
        stopping: threading.Event | None = None,
        deadline: float | None = None,
        on_wait: Callable[[str], None] | None = None,
    ) -> Iterator[None]:
        """Hold the exclusive lock of ``key`` (an ``fcntl.flock`` on ``<key>.lock``, released when this process
        dies too). Waits for another holder, trying every :data:`LOCK_POLL` s; ``on_wait`` is told once that it
        waits. Raises TimeoutError when ``deadline`` (a ``time.monotonic()`` value) passes first, InterruptedError
        when ``stopping`` is set first."""
        import fcntl  # POSIX only, as in provision/: never imported when the plugin loads

        self.ensure()
        fd = os.open(self.root / f"{key}.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            told = False
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    pass
                if stopping is not None and stopping.is_set():
                    raise InterruptedError("stopped while waiting for the warm Gym registry's lock")
                if deadline is not None and time.monotonic() > deadline:
                    raise TimeoutError(f"another session held the lock {self.root / key}.lock too long")
                if on_wait is not None and not told:
                    on_wait(
                        f"waiting for another session that is starting or stopping the warm Gym {key[:KEY_SHOWN]} "
                        f"(lock {self.root / key}.lock)"
                    )
                    told = True
                time.sleep(LOCK_POLL)
            yield
        finally:
            os.close(fd)  # releases the lock; the file stays (unlinking lock files races)

    def read(self, key: str) -> Entry | None:
        """The entry of ``key``, or None."""
        data = read_json(self.entry_path(key))
        return Entry.from_json(data) if data is not None else None

    def entries(self) -> list[Entry]:
        """Every readable entry, oldest first."""
        if not self.root.is_dir():
            return []
        found = []
        for path in sorted(self.root.glob("*.json")):
            data = read_json(path)
            entry = Entry.from_json(data) if data is not None else None
            if entry is not None:
                found.append(entry)
        return sorted(found, key=lambda entry: entry.started)

    def write(self, entry: Entry) -> None:
        """Register ``entry`` (its keeper does, once its Gym is ready; the session that started it holds the
        key's lock meanwhile)."""
        self.ensure()
        write_private(self.entry_path(entry.key), entry.to_json())

    def remove(self, entry: Entry) -> bool:
        """Remove ``entry``'s registration if it is still that entry (same keeper); whether it did."""
        current = self.read(entry.key)
        if current is None or current.keeper != entry.keeper:
            return False
        with contextlib.suppress(FileNotFoundError):
            self.entry_path(entry.key).unlink()
        return True

    def new_home(self, key: str) -> Path:
        """A fresh, owner-only home folder for a warm Gym of ``key`` under ``gyms/``."""
        gyms = private_dir(self.root / "gyms")
        stamp = time.strftime("%Y%m%d-%H%M%S")
        home = gyms / f"{key[:KEY_SHOWN]}-{stamp}-{os.getpid()}"
        suffix = 0
        while True:
            candidate = home if not suffix else home.with_name(f"{home.name}-{suffix}")
            try:
                candidate.mkdir(mode=0o700)
                return private_dir(candidate)
            except FileExistsError:
                suffix += 1

    def owns(self, path: Path) -> bool:
        """Whether ``path`` lies in this registry's ``gyms/`` folder (a warm Gym's home)."""
        gyms = os.path.abspath(self.root / "gyms")
        return os.path.abspath(path).startswith(gyms + os.sep)


def stop_warm(entry: Entry, registry: Registry, grace: float = DEFAULT_GRACE) -> list[int]:
    """Stop the warm Gym of ``entry`` now and unregister it: its keeper, when it runs, gets SIGTERM and stops
    Gym itself (SIGINT, ``grace`` seconds, SIGKILL to the rest of each session, see
    :meth:`~pytest_gym_eval.gym.processes.GymProcess.stop`) and its replay model; when the keeper is gone, or still
    runs ``grace`` + 30 s later, what is left (the sessions its home's ``processes.jsonl`` records or that hold
    a process carrying its marker, each only while it still holds one) is stopped the same way from here.
    Returns the PIDs that would not die (normally none). Call it holding the key's lock, or not at all
    concurrently with a session starting it."""
    owner = entry.keeper_owner
    if entry.boot == boot_id() and owner.alive():
        with contextlib.suppress(ProcessLookupError):
            os.kill(owner.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace + 30
        while owner.alive() and time.monotonic() < deadline:
            time.sleep(0.1)
        if owner.alive():
            with contextlib.suppress(ProcessLookupError):
                os.kill(owner.pid, signal.SIGKILL)
    left: list[int] = []
    if entry.boot == boot_id():
        from pytest_gym_eval.gym.watchdog import recorded_sessions

        sessions = recorded_sessions(entry.home) | {process.sid for process in processes_of(owner)}
        if entry.servers > 1:  # its `gym env start` leads a session of its own (signalled only while it is Gym's)
            sessions.add(entry.servers)
        sessions.discard(os.getsid(0))
        left = stop_sessions(sessions, owner.marker, grace) if sessions else []
    registry.remove(entry)
    ray = entry.home / "ray"
    if ray.is_symlink():  # a short folder under /tmp (a deep home): remove it, the link stays
        import shutil

        shutil.rmtree(os.path.realpath(ray), ignore_errors=True)
    return left


def wait_for_exit(pid_alive: Callable[[], bool], timeout: float = KILL_BOUND) -> bool:
    """Poll ``pid_alive`` every 0.1 s for at most ``timeout`` seconds; whether it turned false."""
    deadline = time.monotonic() + timeout
    while pid_alive():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True
