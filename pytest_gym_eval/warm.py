"""Keeping Gym warm between sessions (``--gym-keep-alive[=SECONDS]``).

A session with ``--gym-keep-alive`` looks up its Gym configuration's key (:mod:`pytest_gym_eval.fingerprint`) in
the per-user registry (:mod:`pytest_gym_eval.registry`), holding the key's lock:

- a live warm Gym of that key: the session takes a lease on it and attaches, as ``--gym-head-server`` does (no
  ``gym env start``; its run directory's ``warm.json`` says so, and ``logs/gym-servers`` links to the warm Gym's
  server logs so causes of failed rollouts are still found);
- a stale one (:meth:`~pytest_gym_eval.registry.Entry.problem`): it is stopped and unregistered, then as below;
- none: the session starts a *keeper*, ``python -m pytest_gym_eval.warm HOME`` (a process of its own, in a
  process session of its own), and waits, still holding the lock, until the keeper's Gym is ready; then it
  attaches to it like any later session.

The keeper owns the warm Gym. It starts the replay model server in its own process when the session replays
recordings (so the model outlives the session too), then ``gym env start`` exactly as a session does (same
config files, model, one retry of Ray's start-up timeout, 127.0.0.1 only); every process it starts carries its
own :data:`~pytest_gym_eval.orphans.MARKER`, so while it runs no session calls them a dead session's leftovers.
Once Gym is ready it writes the starting session's lease and the registry entry and reports the entry on its
standard output; until then, the end of its standard input (the starting session died or stopped) makes it stop
what it started and exit. Then it watches, once a second:

- *idle* means that no live session holds a lease: the idle clock starts when the last lease goes (a session
  ends, or the keeper finds its process gone), and a new lease stops it. After ``SECONDS`` idle, holding the
  key's lock (so a session attaching at that moment either gets in first or finds no entry), the keeper
  unregisters the Gym and stops it: SIGINT, the grace period, SIGKILL to what is left of each process session;
- its servers exiting (crash, kill) also unregisters and ends it;
- SIGTERM or SIGINT (``python -m pytest_gym_eval stop``) stops it at once.

The API key: neither the registry nor the keeper's spec holds it. The keeper inherits the starting session's
environment, and Gym's model server reads the key from the variable as always, so a warm Gym keeps the key it
started with. A session whose key differs (a rotated key, another account) compares its own value with the
value in the keeper's environment (``/proc/<pid>/environ``, readable by the same user only), and stops that warm
Gym and starts another instead of sending requests with the old key.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Any

from pytest_gym_eval.fingerprint import GymConfiguration
from pytest_gym_eval.options import DEFAULT_KEEP_ALIVE
from pytest_gym_eval.orphans import MARKER, Owner
from pytest_gym_eval.processes import DEFAULT_GRACE, GymProcess, free_port
from pytest_gym_eval.registry import (
    KEY_SHOWN,
    Entry,
    Registry,
    RegistryError,
    add_lease,
    boot_id,
    idle_since,
    live_leases,
    read_json,
    remove_lease,
    stop_warm,
    write_private,
)
from pytest_gym_eval.run import (
    GymStartError,
    ModelEndpoint,
    RunSettings,
    launch_servers,
    probe_model,
    ray_temp_dir,
    start_servers,
    write_gym_config,
)
from pytest_gym_eval.rundir import RunPaths

HEAD_PATIENCE = 10.0
"""Seconds a warm Gym's head server gets to answer ``GET /readyz`` before it counts as not answering: it answers
503 for a moment after Gym prints that its servers are ready (``mark_ready`` in Gym's ``server_utils.py``)."""

KEEPER_MODULE = "pytest_gym_eval.warm"
REPLAY_MODEL_NAME = "replay"
WATCH_EVERY = 1.0
"""Seconds between two looks of the keeper at its leases and its servers (the idle clock's resolution)."""
LOCK_FOR_IDLE_STOP = 5.0
"""Seconds a keeper stopping on a signal tries to take its key's lock to unregister itself (the one who asked,
``stop`` or a session discarding it, may hold the lock; it then unregisters the entry itself)."""


@dataclass(frozen=True)
class WarmSpec:
    """What a keeper starts: written by the session to ``<home>/spec.json`` (0600), never holding a key.

    ``configuration`` is the Gym configuration (its components) and ``key`` its key; ``checkout`` the Gym
    checkout; ``gym_configs`` the config files of the agents; ``model_type`` Gym's model server; either
    ``replay`` (recordings the keeper's own replay model serves) or ``model_url``/``model``/``api_key_env`` (an
    endpoint, the key read from that variable); times in seconds; ``lease`` the starting session's
    :data:`~pytest_gym_eval.orphans.MARKER` value (its lease is written when Gym is ready); ``record_latency``
    (``--gym-latency``) turns on the servers' model-call observability, which records each rollout's latency.
    """

    key: str
    configuration: dict[str, Any]
    registry: str
    checkout: str
    gym_configs: tuple[str, ...]
    model_type: str
    replay: tuple[str, ...] = ()
    model_url: str | None = None
    model: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    startup_timeout: float = 900.0
    idle_timeout: float = DEFAULT_KEEP_ALIVE
    stop_grace: float = DEFAULT_GRACE
    lease: str = ""
    record_latency: bool = False

    def save(self, path: Path) -> None:
        """Write the spec as JSON, owner-only."""
        write_private(path, asdict(self))

    @classmethod
    def load(cls, path: Path) -> WarmSpec:
        """Read a spec :meth:`save` wrote. Raises OSError, ValueError or TypeError for a bad file."""
        data = json.loads(path.read_text(encoding="utf-8"))
        data["gym_configs"] = tuple(data["gym_configs"])
        data["replay"] = tuple(data.get("replay") or ())
        return cls(**data)


# The keeper process.


class _Keeper:
    """The keeper's state (see the module docstring); ``run()`` is the whole process."""

    def __init__(self, home: Path, out: IO[str]) -> None:
        self.home = home
        self.spec = WarmSpec.load(home / "spec.json")
        self.registry = Registry(Path(self.spec.registry))
        self.owner = Owner.current(home)
        self.out: IO[str] | None = out
        self.stopping = threading.Event()
        self.ready = threading.Event()
        self.servers: GymProcess | None = None
        self.replay: Any = None
        self.entry: Entry | None = None

    def send(self, message: dict[str, Any]) -> None:
        """One JSON line to the starting session (until Gym is ready; afterwards the line goes to the log)."""
        line = json.dumps(message)
        if self.out is not None:
            try:
                self.out.write(line + "\n")
                self.out.flush()
                return
            except (BrokenPipeError, OSError):
                self.out = None
        log(line)

    def watch_starter(self, stream: int) -> None:
        """Until Gym is ready: the end of standard input means the starting session is gone; stop then."""
        while not self.ready.is_set():
            readable, _, _ = select.select([stream], [], [], 0.5)
            if readable and not os.read(stream, 4096):
                if not self.ready.is_set():
                    log("the starting session is gone before Gym was ready: stopping")
                    self.stopping.set()
                return

    def start(self) -> None:
        """Start the replay model (when replaying) and Gym's servers; raises GymStartError."""
        from pytest_gym_eval import provision

        spec = self.spec
        paths = RunPaths(self.home)
        paths.logs.mkdir(parents=True, exist_ok=True)
        if spec.replay:
            from pytest_gym_eval.replay import RecordingError, ReplayServer

            try:
                self.replay = ReplayServer(list(spec.replay), log_path=paths.replay_log, model_name=REPLAY_MODEL_NAME)
            except (RecordingError, OSError) as error:
                raise GymStartError(f"--gym-replay: {error}") from None
            self.replay.start()
            model = ModelEndpoint(self.replay.base_url, REPLAY_MODEL_NAME, spec.model_type, spec.api_key_env)
        else:
            assert spec.model_url and spec.model, "a warm Gym needs recordings or a model endpoint"
            model = ModelEndpoint(spec.model_url, spec.model, spec.model_type, spec.api_key_env)
        try:
            checkout = provision.load_checkout(Path(spec.checkout))
        except provision.ProvisionError as error:
            raise GymStartError(str(error)) from None
        ray_dir, _ = ray_temp_dir(self.home)
        head = ("127.0.0.1", free_port())
        write_gym_config(paths.config, model, head, paths.model_calls if spec.record_latency else None)
        settings = RunSettings(
            gym=checkout.gym_executable,
            env={**provision.gym_environment(checkout, ray_dir), MARKER: self.owner.marker},
            cwd=checkout.path,
            model=model,
            gym_configs=tuple(Path(config) for config in spec.gym_configs),
            startup_timeout=spec.startup_timeout,
            stop_grace=spec.stop_grace,
        )
        started = time.monotonic()

        def launch(log_path: Path) -> GymProcess:
            if self.stopping.is_set():
                raise GymStartError("the warm Gym was stopped before it started")
            self.servers = launch_servers(settings, model.model_type, paths, log_path)
            return self.servers

        servers = start_servers(
            settings, launch, paths.logs, started + spec.startup_timeout, self.stopping,
            lambda message: self.send({"event": message}),
        )  # fmt: skip
        self.entry = Entry(
            key=spec.key, home=self.home, head_server=head, keeper=self.owner.marker, boot=boot_id(),
            servers=servers.pid, idle_timeout=spec.idle_timeout, started=time.time(),
            ready_after=round(time.monotonic() - started, 1), configuration=spec.configuration,
            model={"url": model.url, "model": model.model, "model_type": model.model_type,
                   "api_key_env": model.api_key_env},
        )  # fmt: skip

    def run(self) -> int:
        """Start, report, keep, stop; the exit status (0, or 1 when Gym could not start)."""
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: self.stopping.set())
        threading.Thread(target=self.watch_starter, args=(sys.stdin.fileno(),), daemon=True).start()
        log(
            f"keeper pid {os.getpid()} of"
            f" warm Gym {self.spec.key[:KEY_SHOWN]}, idle timeout {self.spec.idle_timeout:g} s"
        )
        with contextlib.suppress(OSError):  # `status` lists a warm Gym that is starting by this file
            self._write_idle(None)
        try:
            try:
                self.start()
            except GymStartError as error:
                self.send({"failed": str(error)})
                return 1
            except Exception as error:  # a bug or an OS error: the session must hear of it, not wait
                self.send({"failed": f"the warm Gym's keeper failed: {type(error).__name__}: {error}"})
                raise
            if self.stopping.is_set():
                self.send({"failed": "the warm Gym was stopped before it was ready"})
                return 1
            assert self.entry is not None
            # Gym prints that its servers are ready a moment before its head server marks itself ready (it
            # answers /readyz with 503 until then): register only once it answers, or a session waiting on the
            # key's lock would find the new Gym "stale" and stop it.
            if (why := self.entry.head_problem(patience=HEAD_PATIENCE)) is not None:
                self.send({"failed": f"Gym said its servers were ready, but {why}"})
                return 1
            owner = Owner.parse(self.spec.lease)
            if owner is not None:
                add_lease(self.home, owner)
            self.registry.write(self.entry)
            self.ready.set()
            self.send({"ready": self.entry.to_json()})
            self.out = None  # from here on, lines go to the log: the session no longer reads them
            self.keep()
            return 0
        finally:
            self.shutdown()

    def keep(self) -> None:
        """Watch leases and servers until idle for the idle timeout, the servers exit, or a signal."""
        assert self.entry is not None and self.servers is not None
        idle: float | None = None
        while not self.stopping.wait(WATCH_EVERY):
            status = self.servers.poll()
            if status is not None:
                log(f"Gym's servers exited (status {status}): unregistering")
                return
            if live_leases(self.home, prune=True):
                if idle is not None:
                    idle = None
                    self._write_idle(None)
                continue
            if idle is None:
                idle = time.monotonic()
                self._write_idle(time.time())
                log("no session uses the warm Gym: idle")
            if time.monotonic() - idle < self.spec.idle_timeout:
                continue
            try:
                with self.registry.lock(self.spec.key, stopping=self.stopping):
                    if live_leases(self.home, prune=True):  # a session got in just before the lock
                        idle = None
                        self._write_idle(None)
                        continue
                    self.registry.remove(self.entry)
                    log(f"idle for {self.spec.idle_timeout:g} s: unregistered, stopping")
                    return
            except InterruptedError:
                return

    def _write_idle(self, since: float | None) -> None:
        write_private(self.home / "keeper.json", {"pid": os.getpid(), "keeper": self.owner.marker, "idle_since": since})

    def shutdown(self) -> None:
        """Unregister (when still registered), stop Gym's servers and the replay model, remove Ray's folder."""
        if self.entry is not None:
            self._unregister()
        if self.servers is not None:
            log("stopping Gym's servers")
            self.servers.stop(self.spec.stop_grace)
        if self.replay is not None:
            self.replay.stop()
        ray = self.home / "ray"
        if ray.is_symlink():
            shutil.rmtree(os.path.realpath(ray), ignore_errors=True)
            ray.unlink()
        elif ray.is_dir():
            shutil.rmtree(ray, ignore_errors=True)
        log("stopped")

    def _unregister(self) -> None:
        assert self.entry is not None
        stop = threading.Event()
        timer = threading.Timer(LOCK_FOR_IDLE_STOP, stop.set)
        timer.start()
        try:
            with self.registry.lock(self.spec.key, stopping=stop):
                self.registry.remove(self.entry)
        except (InterruptedError, RegistryError, OSError):
            pass  # the one holding the lock (stop, or a session discarding us) unregisters the entry itself
        finally:
            timer.cancel()


def log(message: str) -> None:
    """A timestamped line on standard error (the keeper's log, ``logs/keeper.log`` in its home)."""
    print(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {message}", file=sys.stderr, flush=True)


def keeper_main(argv: Sequence[str]) -> int:
    """``python -m pytest_gym_eval.warm HOME``: the keeper of the warm Gym whose spec is ``HOME/spec.json``.

    Forks once so that the session that started it is not its parent (nothing to reap), then runs until the
    warm Gym stops. Exit status 0, or 1 when Gym could not start (its reason went to standard output)."""
    if len(argv) != 1:
        print("usage: python -m pytest_gym_eval.warm HOME", file=sys.stderr)
        return 2
    if os.fork() > 0:
        os._exit(0)
    os.umask(0o077)  # everything the keeper and its Gym write in the home is owner-only
    keeper = _Keeper(Path(argv[0]), sys.stdout)
    return keeper.run()


# The session's side.


@dataclass
class WarmGym:
    """One session's use of a warm Gym: :meth:`acquire` (attach, or start one), :meth:`release` at the end.

    ``spec`` describes the Gym the session needs (its ``lease`` is filled in here); ``owner`` is the session as
    the run's owner; ``run_dir`` the session's run directory.
    """

    spec: WarmSpec
    owner: Owner
    run_dir: Path
    registry: Registry
    entry: Entry | None = None
    started: bool = False

    @property
    def model(self) -> ModelEndpoint | None:
        """The policy model the warm Gym's servers call (once acquired)."""
        if self.entry is None:
            return None
        model = self.entry.model
        return ModelEndpoint(model["url"], model["model"], model["model_type"], model["api_key_env"])

    def acquire(
        self, stopping: threading.Event, on_event: Callable[[str], None]
    ) -> tuple[tuple[str, int], ModelEndpoint | None]:
        """Attach to the warm Gym of the spec's key, starting it first when there is none (or only a stale one),
        and take a lease on it; returns its head server and policy model. Raises :class:`GymStartError` when it
        cannot start (with the reason and the log to read) or the session stops meanwhile."""
        spec = self.spec
        deadline = time.monotonic() + spec.startup_timeout
        if not spec.replay and spec.model_url and spec.model:  # a bad URL or key says so before any start
            probe_model(ModelEndpoint(spec.model_url, spec.model, spec.model_type, spec.api_key_env),
                        deadline, stopping, on_event)  # fmt: skip
        try:
            with self.registry.lock(spec.key, stopping, deadline, on_event):
                entry = self.registry.read(spec.key)
                if entry is not None:
                    problem = (
                        entry.problem(check_head=False)
                        or self._key_problem(entry)
                        or entry.head_problem(patience=HEAD_PATIENCE)
                    )
                    if problem is None:
                        add_lease(entry.home, self.owner)
                        self.entry = entry
                    else:
                        on_event(f"warm Gym {entry.short}: {problem}; stopping it and starting another")
                        stop_warm(entry, self.registry, spec.stop_grace)
                if self.entry is None:
                    self.entry = self._start(stopping, deadline, on_event)
                    self.started = True
        except RegistryError as error:
            raise GymStartError(f"--gym-keep-alive: {error}") from None
        except (TimeoutError, InterruptedError) as error:
            raise GymStartError(f"--gym-keep-alive: {error}") from None
        entry = self.entry
        self._link(entry)
        host, port = entry.head_server
        if self.started:
            on_event(
                f"started warm Gym {entry.short} in {entry.ready_after:.0f} s (head server {host}:{port}); it stays up "
                f"{spec.idle_timeout:g} s after the last session using it ends (`python -m pytest_gym_eval status`, "
                "`... stop`)"
            )
        else:
            age = time.time() - entry.started
            on_event(
                f"attached to warm Gym {entry.short} (head server {host}:{port}, up {age / 60:.0f} min): no "
                f"`gym env start` (its logs: {entry.home / 'logs'})"
            )
        return entry.head_server, self.model

    def gone(self) -> str | None:
        """Why the warm Gym this session attached to went away (stopped, its keeper or servers killed), or None
        while it runs (or before it is attached); polled while `gym eval run` runs against it."""
        entry = self.entry
        if entry is None or (why := entry.gone()) is None:
            return None
        return f"the warm Gym {entry.short} went away: {why} (its keeper log: {entry.home / 'logs' / 'keeper.log'})"

    def release(self) -> None:
        """Give the lease back (idempotent): the warm Gym's idle clock starts when no session holds one."""
        if self.entry is not None:
            remove_lease(self.entry.home, self.owner)

    def _key_problem(self, entry: Entry) -> str | None:
        """Why ``entry``'s Gym would call the model with another API key than this session's, or None."""
        if self.spec.replay:
            return None
        variable = self.spec.api_key_env
        try:
            environ = Path(f"/proc/{entry.keeper_owner.pid}/environ").read_bytes().split(b"\0")
        except OSError:
            return f"its environment cannot be read to compare ${variable}"
        prefix = variable.encode() + b"="
        theirs = next((item[len(prefix) :] for item in environ if item.startswith(prefix)), b"")
        ours = os.environ.get(variable, "").encode()
        if theirs != ours:
            return f"it was started with another value of ${variable} (a warm Gym keeps the key it started with)"
        return None

    def _start(self, stopping: threading.Event, deadline: float, on_event: Callable[[str], None]) -> Entry:
        """Start a keeper for the spec and wait until its Gym is ready; the entry. Holds the key's lock."""
        home = self.registry.new_home(self.spec.key)
        logs = home / "logs"
        logs.mkdir(mode=0o700)
        spec = WarmSpec(**{**asdict(self.spec), "lease": self.owner.marker})
        spec.save(home / "spec.json")
        on_event(f"starting warm Gym {self.spec.key[:KEY_SHOWN]} (home {home}; keeper log {logs / 'keeper.log'})")
        env = {key: value for key, value in os.environ.items() if key != MARKER}
        package_root = str(Path(__file__).resolve().parent.parent)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH", "")) if p)
        read_end, write_end = os.pipe()
        keeper_log = os.open(logs / "keeper.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            starter = subprocess.Popen(
                [sys.executable, "-m", KEEPER_MODULE, str(home)], stdin=read_end, stdout=subprocess.PIPE,
                stderr=keeper_log, env=env, cwd="/", start_new_session=True, close_fds=True,
            )  # fmt: skip
        except OSError:
            os.close(write_end)
            raise
        finally:
            os.close(read_end)
            os.close(keeper_log)
        starter.wait()  # the keeper forked at once: this was its parent
        assert starter.stdout is not None
        try:
            return self._wait_ready(starter.stdout, stopping, deadline + 60, on_event, logs / "keeper.log")
        finally:
            os.close(write_end)  # before ready, this tells the keeper to stop; after, nothing
            starter.stdout.close()

    def _wait_ready(
        self, out: IO[bytes], stopping: threading.Event, deadline: float, on_event: Callable[[str], None], log: Path
    ) -> Entry:
        pending = b""
        fd = out.fileno()
        while True:
            if stopping.is_set():
                raise GymStartError("the session stopped while the warm Gym was starting")
            if time.monotonic() > deadline:
                raise GymStartError(f"the warm Gym's keeper did not report within the start-up timeout; see {log}")
            readable, _, _ = select.select([fd], [], [], 0.2)
            if not readable:
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                from pytest_gym_eval.processes import tail

                raise GymStartError(f"the warm Gym's keeper exited before its Gym was ready; last lines of {log}:\n"
                                    f"{tail(log, 15)}")  # fmt: skip
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                try:
                    message = json.loads(line)
                except ValueError:
                    continue
                if "event" in message:
                    on_event(str(message["event"]))
                elif "failed" in message:
                    raise GymStartError(str(message["failed"]))
                elif "ready" in message:
                    entry = Entry.from_json(message["ready"])
                    if entry is None:
                        raise GymStartError(f"the warm Gym's keeper reported an unreadable entry; see {log}")
                    return entry

    def _link(self, entry: Entry) -> None:
        """Point the run directory at the warm Gym: ``warm.json``, and links to its server and replay logs."""
        logs = self.run_dir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        for name in ("gym-servers", "replay-model.jsonl") if self.spec.replay else ("gym-servers",):
            link = logs / name
            if not link.exists() and not link.is_symlink():
                with contextlib.suppress(OSError):
                    link.symlink_to(entry.home / "logs" / name)
        (self.run_dir / "warm.json").write_text(
            json.dumps(
                {
                    "key": entry.key, "home": str(entry.home), "head_server": list(entry.head_server),
                    "started": self.started, "attached": not self.started, "keeper": entry.keeper,
                },
                indent=2,
            )
            + "\n",
            encoding="utf-8",
        )  # fmt: skip


def warm_spec(
    configuration: GymConfiguration,
    registry: Registry,
    checkout: Path,
    gym_configs: Sequence[Path],
    model_type: str,
    *,
    replay: Sequence[Path] = (),
    model_url: str | None = None,
    model: str | None = None,
    api_key_env: str,
    startup_timeout: float,
    idle_timeout: float,
    stop_grace: float = DEFAULT_GRACE,
    record_latency: bool = False,
) -> WarmSpec:
    """The :class:`WarmSpec` of a session's Gym (see its fields). Its key is the sha256 of the configuration's key
    and this plugin's version (another version may start Gym differently), and of ``record_latency`` when set (Gym's
    servers record latencies only when started so)."""
    from pytest_gym_eval import __version__

    latency = ":latency" if record_latency else ""
    key = hashlib.sha256(f"{configuration.key}:{__version__}{latency}".encode()).hexdigest()
    return WarmSpec(
        key=key, configuration=dict(configuration.components), registry=str(registry.root),
        checkout=str(checkout), gym_configs=tuple(str(c) for c in gym_configs), model_type=model_type,
        replay=tuple(str(p) for p in replay), model_url=model_url, model=model, api_key_env=api_key_env,
        startup_timeout=startup_timeout, idle_timeout=idle_timeout, stop_grace=stop_grace,
        record_latency=record_latency,
    )  # fmt: skip


# Command line: status and stop.


def describe(entry: Entry, now: float | None = None) -> list[str]:
    """The lines ``status`` prints for one warm Gym."""
    now = time.time() if now is None else now
    problem = entry.problem()
    if problem is not None:
        state = f"stale: {problem}"
    else:
        users = live_leases(entry.home)
        since = idle_since(entry.home)
        if users:
            pids = ", ".join(str(user.pid) for user in users)
            state = f"in use by {len(users)} session{'s' if len(users) != 1 else ''} (pid {pids})"
        elif since is not None:
            left = max(0.0, entry.idle_timeout - (now - since))
            state = f"idle for {_minutes(now - since)}, stops in {_minutes(left)}"
        else:
            state = "idle"
    config = entry.configuration
    model = entry.model
    if (config.get("model") or {}).get("replay") is not None:
        model_text = f"{model['model_type']}, replay model at {model['url']}"
    else:
        model_text = f"{model['model_type']} {model['model']!r} at {model['url']} (key from ${model['api_key_env']})"
    host, port = entry.head_server
    return [
        f"{entry.short}  {state}",
        f"    head server {host}:{port}; keeper pid {entry.keeper_owner.pid}; up {_minutes(now - entry.started)} "
        f"(started in {entry.ready_after:.0f} s); idle timeout {entry.idle_timeout:g} s",
        _gym_line(config),
        f"    model: {model_text}",
        f"    home: {entry.home}",
    ]


def _gym_line(config: dict[str, Any]) -> str:
    """The ``status`` line naming a warm Gym's release, checkout and agent config files."""
    return f"    Gym {config.get('gym_version')} at {config.get('gym_checkout')}; configs: " + ", ".join(
        sorted(config.get("configs") or {})
    )


def _minutes(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"


def starting(registry: Registry) -> list[tuple[Path, WarmSpec, Owner]]:
    """The warm Gyms of ``registry`` that are starting: ``(home, spec, keeper)`` of every home whose keeper runs
    (its ``keeper.json``) and that no entry names yet (an entry is written once Gym is ready), oldest first."""
    gyms = registry.root / "gyms"
    if not gyms.is_dir():
        return []
    registered = {entry.home for entry in registry.entries()}
    found = []
    for home in sorted(gyms.iterdir()):
        if home in registered:
            continue
        keeper = Owner.parse(str((read_json(home / "keeper.json") or {}).get("keeper", "")))
        if keeper is None or not keeper.alive():
            continue
        try:
            spec = WarmSpec.load(home / "spec.json")
        except (OSError, ValueError, TypeError, KeyError):
            continue
        found.append((home, spec, keeper))
    return sorted(found, key=lambda found: found[0].stat().st_mtime)


def describe_starting(home: Path, spec: WarmSpec, keeper: Owner, now: float | None = None) -> list[str]:
    """The lines ``status`` prints for a warm Gym that is starting."""
    now = time.time() if now is None else now
    config = spec.configuration
    return [
        f"{spec.key[:KEY_SHOWN]}  starting for {_minutes(now - home.stat().st_mtime)} (its Gym is not ready yet)",
        f"    keeper pid {keeper.pid}; log: {home / 'logs' / 'keeper.log'}; start-up timeout "
        f"{spec.startup_timeout:g} s; idle timeout {spec.idle_timeout:g} s",
        _gym_line(config),
        f"    home: {home}",
    ]


if __name__ == "__main__":
    sys.exit(keeper_main(sys.argv[1:]))
