"""The session's side of a warm Gym: :class:`WarmGym` attaches to one (or starts its keeper) and leases it; see
:mod:`pytest_gym_eval.warm`."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import select
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Any

from pytest_gym_eval.core.credentials import has_secret, redact_value, url_variable
from pytest_gym_eval.core.files import write_json_atomic
from pytest_gym_eval.core.rundir import RunPaths
from pytest_gym_eval.gym.fingerprint import GymConfiguration
from pytest_gym_eval.gym.orphans import MARKER, Owner
from pytest_gym_eval.gym.processes import DEFAULT_GRACE
from pytest_gym_eval.gym.run import (
    GymStartError,
    ModelEndpoint,
    probe_model,
)
from pytest_gym_eval.tasks.model_servers import (
    ModelServerBinding,
    binding_from_record,
    binding_record,
    url_environment,
)
from pytest_gym_eval.warm.registry import (
    KEY_SHOWN,
    Entry,
    Registry,
    RegistryError,
    add_lease,
    remove_lease,
    stop_warm,
)
from pytest_gym_eval.warm.spec import (
    HEAD_PATIENCE,
    KEEPER_MODULE,
    WarmSpec,
)


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
                f"`gym env start` (its logs: {RunPaths(entry.home).logs})"
            )
        return entry.head_server, self.model

    def gone(self) -> str | None:
        """Why the warm Gym this session attached to went away (stopped, its keeper or servers killed), or None
        while it runs (or before it is attached); polled while `gym eval run` runs against it."""
        entry = self.entry
        if entry is None or (why := entry.gone()) is None:
            return None
        return f"the warm Gym {entry.short} went away: {why} (its keeper log: {RunPaths(entry.home).keeper_log})"

    def release(self) -> None:
        """Give the lease back (idempotent): the warm Gym's idle clock starts when no session holds one."""
        if self.entry is not None:
            remove_lease(self.entry.home, self.owner)

    def _key_problem(self, entry: Entry) -> str | None:
        """Why ``entry``'s Gym would call the model, or a bound model server, with another API key (or URL
        password) than this session's, or None."""
        variable = self.spec.api_key_env
        try:
            environ = Path(f"/proc/{entry.keeper_owner.pid}/environ").read_bytes().split(b"\0")
        except OSError:
            return f"its environment cannot be read to compare ${variable}"
        if self.spec.replay:
            return _binding_key_problem([binding_from_record(r, {}) for r in self.spec.model_servers], environ)
        prefix = variable.encode() + b"="
        theirs = next((item[len(prefix) :] for item in environ if item.startswith(prefix)), b"")
        ours = os.environ.get(variable, "").encode()
        if theirs != ours:
            return f"it was started with another value of ${variable} (a warm Gym keeps the key it started with)"
        url = self.spec.model_url or ""
        prefix = url_variable().encode() + b"="
        theirs = next((item[len(prefix) :] for item in environ if item.startswith(prefix)), b"")
        if has_secret(url) and theirs != url.encode():
            return "it was started with another password in its model URL (a warm Gym keeps the one it started with)"
        return _binding_key_problem([binding_from_record(r, {}) for r in self.spec.model_servers], environ)

    def _start(self, stopping: threading.Event, deadline: float, on_event: Callable[[str], None]) -> Entry:
        """Start a keeper for the spec and wait until its Gym is ready; the entry. Holds the key's lock."""
        home = self.registry.new_home(self.spec.key)
        logs = RunPaths(home).logs
        logs.mkdir(mode=0o700)
        url = self.spec.model_url  # a password in it goes to the keeper in its environment, not in spec.json
        shown = redact_value(url) if url is not None else None
        bindings = [binding_from_record(record, {}) for record in self.spec.model_servers]
        servers = tuple(binding_record(binding, redact=True) for binding in bindings)
        spec = WarmSpec(
            **{**asdict(self.spec), "lease": self.owner.marker, "model_url": shown, "model_servers": servers}
        )
        spec.save(RunPaths(home).warm_spec)
        keeper_log_path = RunPaths(home).keeper_log
        on_event(f"starting warm Gym {self.spec.key[:KEY_SHOWN]} (home {home}; keeper log {keeper_log_path})")
        env = {key: value for key, value in os.environ.items() if key != MARKER}
        package_root = str(Path(__file__).resolve().parent.parent)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH", "")) if p)
        if url is not None and has_secret(url):
            env[url_variable()] = url
        env.update(url_environment(bindings))  # a bound URL's password too
        read_end, write_end = os.pipe()
        keeper_log = os.open(keeper_log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
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
            return self._wait_ready(starter.stdout, stopping, deadline + 60, on_event, keeper_log_path)
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
                from pytest_gym_eval.gym.processes import tail

                raise GymStartError(f"the warm Gym's keeper exited before its Gym was ready; last lines of {log}:\n"
                                    f"{tail(log, 15)}")  # fmt: skip
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:  # a pipe's lines as they come (not a file: no files.iter_json_lines)
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
        run, home = RunPaths(self.run_dir), RunPaths(entry.home)
        run.logs.mkdir(parents=True, exist_ok=True)
        links = [(run.server_logs, home.server_logs)]
        if self.spec.replay:
            links.append((run.replay_log, home.replay_log))
        for record in self.spec.model_servers:  # the keeper's replay servers of replay bindings log in its home
            if record.get("replay"):
                name = str(record["name"])
                links.append((run.model_server_replay_log(name), home.model_server_replay_log(name)))
        for link, target in links:
            if not link.exists() and not link.is_symlink():
                with contextlib.suppress(OSError):
                    link.symlink_to(target)
        write_json_atomic(
            run.warm,
            {
                "key": entry.key, "home": str(entry.home), "head_server": list(entry.head_server),
                "started": self.started, "attached": not self.started, "keeper": entry.keeper,
            },
        )  # fmt: skip


def _binding_key_problem(bindings: Sequence[ModelServerBinding], environ: Sequence[bytes]) -> str | None:
    """Why a keeper whose environment is ``environ`` (``VAR=value`` items) would call a bound model server with
    another key or URL password than this session's ``bindings``, or None. Names the variable, never a value."""
    for binding in bindings:
        pairs = [(binding.api_key_env, os.environ.get(binding.api_key_env or "", ""))] if binding.api_key_env else []
        if binding.url is not None and has_secret(binding.url):
            pairs.append((binding.url_variable(), binding.url))
        for variable, ours in pairs:
            assert variable is not None
            prefix = variable.encode() + b"="
            theirs = next((item[len(prefix) :] for item in environ if item.startswith(prefix)), b"")
            if theirs != ours.encode():
                return (
                    f"it was started with another value of ${variable} for the model server {binding.name} (a warm "
                    "Gym keeps the keys it started with)"
                )
    return None


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
    model_servers: Sequence[ModelServerBinding] = (),
    rewired: Mapping[str, Any] | None = None,
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
        record_latency=record_latency, model_servers=tuple(binding_record(b) for b in model_servers),
        rewired=dict(rewired or {}),
    )  # fmt: skip
