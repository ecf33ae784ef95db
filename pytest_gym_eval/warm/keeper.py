"""The keeper process (``python -m pytest_gym_eval.warm HOME``): owns one warm Gym until it is idle too long,
its servers exit, or it is told to stop; see :mod:`pytest_gym_eval.warm` and the ``_Keeper`` docstring."""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import signal
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from pytest_gym_eval.core.credentials import redact_value, url_variable
from pytest_gym_eval.core.rundir import RunPaths
from pytest_gym_eval.gym.orphans import MARKER, Owner
from pytest_gym_eval.gym.processes import GymProcess, free_port
from pytest_gym_eval.gym.run import (
    GymStartError,
    ModelEndpoint,
    RunSettings,
    launch_servers,
    ray_temp_dir,
    start_private_ray,
    start_servers,
    write_gym_config,
)
from pytest_gym_eval.tasks.model_servers import (
    ModelServerBinding,
    ModelServerSpecError,
    binding_from_record,
    served_blocks,
    url_environment,
)
from pytest_gym_eval.warm.registry import (
    KEY_SHOWN,
    Entry,
    Registry,
    RegistryError,
    add_lease,
    boot_id,
    live_leases,
    write_private,
)
from pytest_gym_eval.warm.spec import (
    HEAD_PATIENCE,
    LOCK_FOR_IDLE_STOP,
    REPLAY_MODEL_NAME,
    WATCH_EVERY,
    WarmSpec,
)


class _Keeper:
    """The keeper's state; ``run()`` is the whole process.

    The keeper owns the warm Gym. It starts the replay model server in its own process when the session replays
    recordings (so the model outlives the session too), then ``gym env start`` exactly as a session does (same
    config files, model, one retry of Ray's start-up timeout, 127.0.0.1 only); every process it starts carries its
    own :data:`~pytest_gym_eval.gym.orphans.MARKER`, so while it runs no session calls them a dead session's leftovers.
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

    def __init__(self, home: Path, out: IO[str]) -> None:
        self.home = home
        self.spec = WarmSpec.load(RunPaths(home).warm_spec)
        self.registry = Registry(Path(self.spec.registry))
        self.owner = Owner.current(home)
        self.out: IO[str] | None = out
        self.stopping = threading.Event()
        self.ready = threading.Event()
        self.servers: GymProcess | None = None
        self.ray: GymProcess | None = None  # the Ray head of Gym's servers, when the keeper started one
        self.replay: Any = None
        self.model_server_replays: list[Any] = []  # the replay servers of replay bindings
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
            url = os.environ.get(url_variable()) or spec.model_url  # spec.json holds a URL's password redacted
            model = ModelEndpoint(url, spec.model, spec.model_type, spec.api_key_env)
        try:
            checkout = provision.load_checkout(Path(spec.checkout))
        except provision.ProvisionError as error:
            raise GymStartError(str(error)) from None
        ray_dir, _ = ray_temp_dir(self.home)
        head = ("127.0.0.1", free_port())
        bindings = self.serve_bindings(paths)
        try:
            blocks = served_blocks(checkout.path, bindings, spec.model_type, os.environ)
        except ModelServerSpecError as error:
            raise GymStartError(str(error)) from None
        env = {**provision.gym_environment(checkout, ray_dir), **model.environment(), **url_environment(bindings)}
        settings = RunSettings(
            gym=checkout.gym_executable,
            env={**env, MARKER: self.owner.marker},
            cwd=checkout.path,
            model=model,
            gym_configs=tuple(Path(config) for config in spec.gym_configs),
            startup_timeout=spec.startup_timeout,
            stop_grace=spec.stop_grace,
            server_blocks={**blocks, **spec.rewired},
            model_servers=bindings,
        )
        started = time.monotonic()

        def ray_started(process: GymProcess) -> None:
            self.ray = process

        def on_event(message: str) -> None:
            self.send({"event": message})

        deadline = started + spec.startup_timeout
        address = start_private_ray(settings, paths, deadline, self.stopping, on_event, ray_started)
        write_gym_config(paths.config, model, head, paths.model_calls if spec.record_latency else None, address)

        def launch(log_path: Path) -> GymProcess:
            if self.stopping.is_set():
                raise GymStartError("the warm Gym was stopped before it started")
            self.servers = launch_servers(settings, model.model_type, paths, log_path)
            return self.servers

        servers = start_servers(
            settings, launch, paths.logs, deadline, self.stopping, on_event, head
        )  # fmt: skip
        self.entry = Entry(
            key=spec.key, home=self.home, head_server=head, keeper=self.owner.marker, boot=boot_id(),
            servers=servers.pid, idle_timeout=spec.idle_timeout, started=time.time(),
            ready_after=round(time.monotonic() - started, 1), configuration=spec.configuration,
            model={"url": redact_value(model.url), "model": model.model, "model_type": model.model_type,
                   "api_key_env": model.api_key_env},
        )  # fmt: skip

    def serve_bindings(self, paths: RunPaths) -> tuple[ModelServerBinding, ...]:
        """The spec's bound model servers, each ``NAME=replay:FILE`` one served by a replay model server started
        here (it outlives the session as the warm Gym does; its log :meth:`RunPaths.model_server_replay_log` of
        the warm Gym's home). Raises GymStartError for a record or recordings it cannot use."""
        from pytest_gym_eval.replay import RecordingError, ReplayServer

        served = []
        for record in self.spec.model_servers:
            try:
                binding = binding_from_record(record, os.environ)
            except (KeyError, TypeError) as error:
                raise GymStartError(f"the warm Gym's spec has a bad model server binding: {error!r}") from None
            if binding.replay is None:
                served.append(binding)
                continue
            try:
                replay = ReplayServer(
                    [binding.replay], log_path=paths.model_server_replay_log(binding.name), model_name=REPLAY_MODEL_NAME
                )
            except (RecordingError, OSError) as error:
                raise GymStartError(f"--gym-model-server {binding.name}=replay:{binding.replay}: {error}") from None
            replay.start()
            self.model_server_replays.append(replay)
            served.append(
                ModelServerBinding(binding.name, url=replay.base_url, model=REPLAY_MODEL_NAME, api=binding.api)
            )
        return tuple(served)

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
        state = {"pid": os.getpid(), "keeper": self.owner.marker, "idle_since": since}
        write_private(RunPaths(self.home).keeper, state)

    def shutdown(self) -> None:
        """Unregister (when still registered), stop Gym's servers and the replay model, remove Ray's folder."""
        if self.entry is not None:
            self._unregister()
        if self.servers is not None:
            log("stopping Gym's servers")
            self.servers.stop(self.spec.stop_grace)
        if self.ray is not None:
            self.ray.stop(self.spec.stop_grace)
        if self.replay is not None:
            self.replay.stop()
        while self.model_server_replays:
            self.model_server_replays.pop().stop()
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
