"""Gym's servers: starting ``gym env start`` (once more after Ray's start-up timeout), waiting until they are
ready, and recording every process started; what :class:`RunSettings` a run starts them with. Probing the model
endpoints before the start is :mod:`pytest_gym_eval.gym.model_probe`."""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_gym_eval.core.rundir import RunPaths
from pytest_gym_eval.gym import ray_head
from pytest_gym_eval.gym.config import ModelEndpoint
from pytest_gym_eval.gym.processes import GymProcess, tail
from pytest_gym_eval.gym.watchdog import Watchdog
from pytest_gym_eval.outcomes.causes import GYM_START, redact
from pytest_gym_eval.outcomes.server_logs import SERVER_EXITED as SERVER_EXITED
from pytest_gym_eval.outcomes.server_logs import exited_server, failure_reason
from pytest_gym_eval.provision import RAY_START_WAIT
from pytest_gym_eval.tasks.model_servers import ModelServerBinding
from pytest_gym_eval.tasks.models import Policy
from pytest_gym_eval.tasks.sampling import Sampling

READY_MARKER = "servers ready!"
"""What ``gym env start`` prints once every server answers (``All N / N servers ready!``)."""

RAY_START_TIMEOUT = "The current node timed out during startup"
"""What Ray raises inside ``gym env start`` when its node does not register in time, a transient failure on a
loaded machine (``ray/_private/node.py``); ``gym env start`` then exits with status 1."""

START_ATTEMPTS = 2
"""``gym env start`` is run at most this often: once, and once more after :data:`RAY_START_TIMEOUT`."""

STOP_GRACE = 0.5
"""Seconds Gym's commands get after SIGINT before everything left in their sessions is SIGKILLed. Gym's own stop
buys nothing worth waiting for: ``gym env start`` SIGKILLs each of its servers after 1 s itself (they never
stopped in time here), then shuts its Ray cluster down, 9 s on an idle machine and 20 s on a loaded one; a SIGKILL
of the whole session took 1 s and left no process, listening port or shared-memory file (only Ray's session
files under ``RAY_TMPDIR``, which is the run directory's or removed with the session)."""


class GymStartError(Exception):
    """Gym could not be started or reached; ``str()`` says why and names the log to read; ``failure_class`` is
    the class its items get (``gym_start``, or e.g. ``run_dir_full`` when the run directory's disk filled up)."""

    failure_class = GYM_START


class GymServersExited(GymStartError):
    """Gym's servers (``gym env start``) exited while ``gym eval run`` ran; ``log`` is the servers' log."""

    def __init__(self, message: str, log: str) -> None:
        super().__init__(message)
        self.log = log


def which_server_exited(log: Path) -> str | None:
    """Which of Gym's servers exited, from the last line of ``gym env start``'s ``log`` that says so (``server
    `mcqa` exited``, ``the head server exited``), or None when the log does not say (Gym itself was killed)."""
    name = exited_server(log)
    if name is None:
        return None
    return f"server `{name}` exited" if name else "the head server exited"


def quote_failure(log: Path, server_logs: Path | None = None, lines: int = 15) -> str:
    """What an error about a failed Gym command whose output is ``log`` quotes, to append to its first words: the
    line that says why with its file and line (:func:`~pytest_gym_eval.outcomes.server_logs.failure_reason`, from the
    dead server's own log in ``server_logs`` when a server died), or, when no line says, ``log``'s last ``lines`` lines
    (secrets redacted either way). The item's error names ``log`` itself (its run state's log)."""
    reason = failure_reason(log, server_logs)
    if reason is not None:
        return f": {redact(str(reason))}"
    return f"; last lines of {log}:\n{redact(tail(log, lines))}"


@dataclass(frozen=True)
class RunSettings:
    """What a :class:`GymRun` needs besides the plan.

    ``gym`` is the ``gym`` executable and ``env`` the full environment to run it with; ``cwd`` is the Gym
    checkout; ``head_server`` attaches to running servers (never started or stopped by the run);
    ``gym_configs`` are the Gym config files that define the plan's agents; timeouts are in seconds;
    ``sampling`` goes into every row of Gym's input (with ``policies``, the ``--gym-policy`` policies baseline
    first, each row gets its policy's own values over it: :func:`~pytest_gym_eval.tasks.plan.write_gym_input`);
    ``record_latency`` turns on Gym's model-call
    observability (see :func:`write_gym_config`).
    ``tag_repeats`` tags each input row with its repeat for the replay model (``--gym-replay``).
    ``ray_address`` is an existing Ray cluster for Gym's servers (``--gym-ray-address``), None for a private one.
    ``gym_configs`` are the Gym config files that define the plan's agents; timeouts are in seconds.
    ``server_blocks`` are the Gym config blocks that serve every policy but the first (``--gym-policy``) and the
    model servers ``--gym-model-server`` binds, written to their own file for ``gym env start`` only; empty for one
    policy model and no binding. ``model_servers`` are those bindings (their endpoints are waited for as the
    policy's is: Gym probes every model server's ``GET /models`` when it starts).
    ``attach``, when set, finds (or starts) the servers to attach to from the run's background thread: given the
    run's stop event and its ``on_event``, it returns the head server and the policy model they call (a warm
    Gym, :meth:`pytest_gym_eval.warm.WarmGym.acquire`), or raises :class:`GymStartError`. ``servers_gone``, when
    set, says why servers the run attached to went away (:meth:`pytest_gym_eval.warm.WarmGym.gone`), or None while
    they run; it is asked every half second while ``gym eval run`` runs, which is then stopped.
    """

    gym: Path
    env: dict[str, str]
    cwd: Path
    model: ModelEndpoint | None
    gym_configs: tuple[Path, ...]
    head_server: tuple[str, int] | None = None
    startup_timeout: float = 900.0
    concurrency: int | None = None
    stop_grace: float = STOP_GRACE
    sampling: Sampling | None = None
    policies: tuple[Policy, ...] = ()
    record_latency: bool = False
    tag_repeats: bool = False
    ray_address: str | None = None
    attach: Callable[[threading.Event, Callable[[str], None]], tuple[tuple[str, int], ModelEndpoint | None]] | None = (
        None
    )
    servers_gone: Callable[[], str | None] | None = None
    server_blocks: dict[str, Any] = field(default_factory=dict)
    model_servers: tuple[ModelServerBinding, ...] = ()


GYM_START_TIMEOUTS = ("server_spinup_timeout_seconds", "model_endpoint_readiness_timeout_seconds")
"""Gym's own bounds on its start, in seconds (both 600 by default): how long ``gym env start`` waits for its servers
to answer (Gym 0.7.0; 0.6.x has no such bound) and then for the model endpoints its config names (0.6.0 and 0.7.0),
before it gives up and exits. :func:`start_timeouts` sets both to ``--gym-startup-timeout``."""


def start_timeouts(startup_timeout: float) -> list[str]:
    """The ``gym env start`` overrides that set Gym's own start-up bounds (:data:`GYM_START_TIMEOUTS`) to
    ``startup_timeout`` seconds (``--gym-startup-timeout``, rounded up), so that Gym's 600 s default never cuts a
    longer one (the plugin's own deadline, counted from before Gym starts, ends first); at least 1 (Gym reads 0 as
    no bound). ``++``: they win over any config file. A release that does not read a key ignores it (a plain
    top-level value of Gym's config)."""
    seconds = max(1, math.ceil(startup_timeout))
    return [f"++{key}={seconds}" for key in GYM_START_TIMEOUTS]


def launch_servers(
    settings: RunSettings, model_type: str, paths: RunPaths, log_path: Path, watchdog: Watchdog | None = None
) -> GymProcess:
    """Start ``gym env start`` with the run's Gym configs, model type and config file (``paths.config``).

    Gym's servers build missing venvs themselves (``+skip_venv_if_present=true`` keeps existing ones) and
    write per-server logs under ``paths.server_logs``; Gym's own start-up bounds are ``settings.startup_timeout``
    (:func:`start_timeouts`). The process is recorded in ``paths.processes`` and its session handed to
    ``watchdog``.
    """
    argv = [str(settings.gym), "env", "start"]
    for config in settings.gym_configs:
        argv += ["--config", str(config)]
    argv += ["--model-type", model_type, "--config", str(paths.config)]
    if settings.server_blocks:  # JSON, which Gym's YAML loader reads; not for `gym eval run` (see RunSettings)
        paths.servers_config.write_text(json.dumps(settings.server_blocks, indent=2) + "\n", encoding="utf-8")
        argv += ["--config", str(paths.servers_config)]
    argv += ["+skip_venv_if_present=true", f"+nemo_gym_log_dir={paths.server_logs}"]
    argv += start_timeouts(settings.startup_timeout)
    process = GymProcess(argv, env=settings.env, cwd=settings.cwd, log_path=log_path, name="gym env start")
    record_process(paths, process, watchdog)
    return process


def ray_start_timed_out(log_path: Path) -> bool:
    """Whether the end of a ``gym env start`` log shows Ray's node start-up timeout (:data:`RAY_START_TIMEOUT`)."""
    return RAY_START_TIMEOUT in tail(log_path, 200)


RAY_START_LOGS = ("raylet.out", "raylet.err", "gcs_server.out", "dashboard_agent.log", "dashboard.log")
"""Ray's own logs that say why its node did not start (the raylet's fatal error is in ``raylet.out``)."""


def keep_ray_logs(env: dict[str, str], dest: Path) -> Path | None:
    """Copy :data:`RAY_START_LOGS` of Ray's latest session under ``env["RAY_TMPDIR"]`` into ``dest`` (Ray's
    folder may be a temporary one, removed with the session) and return ``dest``; None when there are none."""
    source = Path(env.get("RAY_TMPDIR", "/tmp")) / "ray" / "session_latest" / "logs"
    copied = False
    for name in RAY_START_LOGS:
        try:
            data = (source / name).read_bytes()
        except OSError:
            continue
        dest.mkdir(parents=True, exist_ok=True)
        (dest / name).write_bytes(data)
        copied = True
    return dest if copied else None


def start_servers(
    settings: RunSettings,
    launch: Callable[[Path], GymProcess],
    logs: Path,
    deadline: float,
    stopping: threading.Event,
    on_event: Callable[[str], None],
    head: tuple[str, int] | None = None,
) -> GymProcess:
    """Start Gym's servers with ``launch`` (given the log path, it starts ``gym env start``: normally
    :func:`launch_servers`) and wait until they are ready (``deadline``, a ``time.monotonic()`` value, stands for
    ``settings.startup_timeout``; ``head``, the head server's ``(host, port)`` in the config ``launch`` starts
    them with, lets :func:`wait_until_ready` ask the servers itself); returns the ready process.

    When Ray's node times out during start-up (:data:`RAY_START_TIMEOUT`, a transient failure on a loaded
    machine), says so through ``on_event``, keeps Ray's logs of that start (``logs/ray-start-1/``), stops what
    it left and starts once more (``logs/gym-env-start-2.log``) within the same deadline. Raises
    :class:`GymStartError` (naming the log to read) when Gym exits early for any other reason, when the
    deadline passes or ``stopping`` is set, or when Ray times out again.
    """
    for attempt in range(1, START_ATTEMPTS + 1):
        log_path = RunPaths(logs.parent).start_log(attempt)
        on_ray = f" on the Ray cluster at {settings.ray_address}" if settings.ray_address else ""
        on_event(f"starting Gym's servers{on_ray} (log: {log_path})")
        servers = launch(log_path)
        try:
            server_logs = RunPaths(logs.parent).server_logs
            wait_until_ready(servers, deadline, stopping, settings.startup_timeout, head, server_logs)
            return servers
        except GymStartError as error:
            if stopping.is_set() or not ray_start_timed_out(log_path):
                raise
            ray_logs = keep_ray_logs(settings.env, RunPaths(logs.parent).ray_start_logs(attempt))
            if attempt == START_ATTEMPTS:
                raise GymStartError(f"{ray_timeout_advice(settings.env, ray_logs)}\n{error}") from None
            on_event(
                f"Ray's node timed out during start-up ({log_path}), a known transient failure on a loaded "
                "machine; retrying `gym env start` once"
            )
            servers.stop(settings.stop_grace)
    raise AssertionError("unreachable: the last attempt returns or raises")


def ray_timeout_advice(env: dict[str, str], ray_logs: Path | None) -> str:
    """What to tell the user when Ray's node timed out on every attempt (``env``: the environment Gym ran with;
    ``ray_logs``: where Ray's logs of the last attempt were kept, if anywhere)."""
    wait = env.get(RAY_START_WAIT) or "unset"
    see = f"; Ray's logs: {ray_logs} (raylet.out says why the raylet stopped)" if ray_logs else ""
    return (
        "Ray's node timed out during start-up twice (`gym env start` was retried once). Ray's daemons start "
        "slowly on a loaded machine: the raylet gives its dashboard agent at most 15 s, and Ray gives the "
        f"raylet at most {RAY_START_WAIT}={wait} s (never less than 30 s) to register{see}. Free some CPU, or "
        f"set {RAY_START_WAIT} higher."
    )


class ServerProbe:
    """Asks Gym's servers whether they answer, as ``gym env start`` asks them before it prints its readiness line,
    but without its 3 s between two rounds (``wait_for_spinup``, ``sleep_interval = 3`` in ``nemo_gym/cli/env.py``):
    up to 3 s of every cold session went to that sleep after the last server was listening.

    The servers are those the head server at ``head`` (``(host, port)``) lists at ``GET /server_instances``, which
    Gym fills once it has launched every one of them (asked until it lists them: the head server logs each request
    to ``gym env start``'s log, the servers do not); a server answers when ``GET <url>`` gets any HTTP response
    (Gym's own check: ``ServerClient.poll_for_status``). A head server that does not answer yet, lists no server, or
    lists one without a URL, means "not yet": the readiness line then decides."""

    TIMEOUT = 1.0
    """Seconds one request may take (a server that accepted the connection answers ``/`` in milliseconds)."""

    def __init__(self, head: tuple[str, int]) -> None:
        self.head = head
        self.urls: list[str] = []
        self.answered: set[str] = set()

    def all_answer(self) -> bool:
        """Whether every listed server answers now (each one that answered once is not asked again)."""
        import urllib.error  # here, not at the top: http.client and ssl cost every session's start ~15 ms
        import urllib.request

        if not self.urls:
            listing = f"http://{self.head[0]}:{self.head[1]}/server_instances"
            try:
                with urllib.request.urlopen(listing, timeout=self.TIMEOUT) as reply:
                    instances = json.loads(reply.read(1 << 22))
                urls = [str(instance["url"]) for instance in instances if instance.get("url")]
            except (OSError, ValueError, TypeError, KeyError, AttributeError):  # URLError, HTTPError: OSErrors
                return False
            if not urls or len(urls) != len(instances):
                return False
            self.urls = urls
        for url in self.urls:
            if url in self.answered:
                continue
            try:
                urllib.request.urlopen(url, timeout=self.TIMEOUT).close()
            except urllib.error.HTTPError:  # an answer all the same: "there may not be a route at /" (Gym)
                pass
            except OSError:
                return False
            self.answered.add(url)
        return True


def wait_until_ready(
    servers: GymProcess,
    deadline: float,
    stopping: threading.Event,
    timeout: float,
    head: tuple[str, int] | None = None,
    server_logs: Path | None = None,
) -> None:
    """Wait until Gym's servers are ready: ``servers`` printed Gym's readiness line (``All N / N servers
    ready!``), or, given the ``head`` server's ``(host, port)``, every server it lists answers (:class:`ServerProbe`,
    which sees it up to 3 s sooner).

    ``deadline`` is a ``time.monotonic()`` value and ``timeout`` the seconds it stands for (for the message).
    Raises :class:`GymStartError` when Gym exits first (quoting the line that says why, :func:`quote_failure`,
    from the dead server's own log in ``server_logs`` when a server died), when ``stopping`` is set, or when the
    deadline passes (with the log's last lines).
    """
    probe = ServerProbe(head) if head is not None else None
    offset = 0
    seen = ""
    while True:
        try:
            with servers.log_path.open("rb") as log:
                log.seek(offset)
                chunk = log.read()
        except FileNotFoundError:
            chunk = b""
        offset += len(chunk)
        # Search what was read whole (Gym prints a long server table right after the marker, often in the same
        # read), keeping only a marker's length of it for a marker split between two reads.
        seen += chunk.decode("utf-8", "replace")
        if READY_MARKER in seen:
            return
        seen = seen[-len(READY_MARKER) :]
        if probe is not None and probe.all_answer():
            return
        status = servers.poll()
        if status is not None:
            raise GymStartError(
                f"`gym env start` exited with status {status} before its servers were ready"
                f"{quote_failure(servers.log_path, server_logs)}"
            )
        if stopping.is_set():
            raise GymStartError("the session stopped while Gym was starting")
        if time.monotonic() > deadline:
            raise GymStartError(
                f"Gym's servers were not ready within {timeout:g} s (--gym-startup-timeout); "
                f"last lines of {servers.log_path}:\n{servers.tail(15)}"
            )
        stopping.wait(0.2)


def start_private_ray(
    settings: RunSettings,
    paths: RunPaths,
    deadline: float,
    stopping: threading.Event,
    on_event: Callable[[str], None],
    on_start: Callable[[GymProcess], None] = lambda process: None,
    watchdog: Watchdog | None = None,
) -> str | None:
    """Start a Ray head without Ray's dashboard for Gym's servers (:mod:`pytest_gym_eval.gym.ray_head`), before
    ``gym env start``, whoever starts Gym (a session, a warm Gym's keeper,
    :func:`~pytest_gym_eval.gym.standalone.serving`).

    The head runs with ``settings``' environment (``RAY_TMPDIR`` included), logs to ``paths.logs/ray-head.log``, is
    recorded in ``paths.processes`` and handed to ``watchdog`` like Gym's servers; ``on_start`` gets its process as
    soon as it runs (the caller stops it after the servers). Returns the GCS address ``HOST:PORT`` to write into
    Gym's config as ``ray_head_node_address``, or None when Gym's venv has no Ray or the head did not
    start by ``deadline`` (a ``time.monotonic()`` value): ``on_event`` then gets a warning and Gym starts Ray itself,
    as without this. Raises :class:`GymStartError` when ``stopping`` is set while it starts.
    """
    python = ray_head.ray_python(settings.gym)
    if python is None:
        return None

    def started(process: GymProcess) -> None:
        on_start(process)
        record_process(paths, process, watchdog)

    log = paths.ray_head_log
    try:
        _, address = ray_head.start_ray_head(python, settings.env, settings.cwd, log, deadline, stopping, started)
    except ray_head.RayHeadFailed as error:
        if stopping.is_set():
            raise GymStartError("the session stopped while Gym was starting") from None
        on_event(f"warning: {error}\nGym starts Ray itself instead")
        return None
    return address


def record_process(paths: RunPaths, process: GymProcess, watchdog: Watchdog | None = None) -> None:
    """Append ``{name, pid, sid}`` of a started process to ``paths.processes`` (what to check or clean up) and
    hand its session to ``watchdog``, which stops it should this process die."""
    if watchdog is not None:
        watchdog.watch(process.pid)
    with paths.processes.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps({"name": process.name, "pid": process.pid, "sid": process.pid}) + "\n")
