"""One Gym run: start (or attach to) Gym's servers, run every planned rollout in one ``gym eval run``, stop.

:class:`GymRun` is owned by exactly one process of a pytest session (the only process, or the pytest-xdist
controller). It works in a background thread and publishes its progress in the run directory's
``state.json`` (see :class:`~pytest_gym_eval.rollouts.RunState`); items in any process follow that file and
Gym's output files through a :class:`~pytest_gym_eval.rollouts.RolloutFeed`.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from glob import escape as glob_escape
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_gym_eval.causes import GYM_START, RUN_DIR_FULL, disk_full, redact
from pytest_gym_eval.dataset import DatasetError
from pytest_gym_eval.defaults import DEFAULT_STARTUP_TIMEOUT
from pytest_gym_eval.orphans import MARKER, Owner, find_leftovers
from pytest_gym_eval.plan import RunPlan, write_gym_input
from pytest_gym_eval.processes import GymProcess, free_port, tail
from pytest_gym_eval.provision import RAY_START_WAIT, GymCheckout, gym_environment
from pytest_gym_eval.rollouts import ROLLOUT_INDEX_KEY, TASK_INDEX_KEY, RunState, describe_error, record_stamp
from pytest_gym_eval.rundir import RunPaths
from pytest_gym_eval.sampling import Sampling
from pytest_gym_eval.watchdog import Watchdog

if TYPE_CHECKING:
    from pytest_gym_eval.waves import WavePlanner

READY_MARKER = "servers ready!"
"""What ``gym env start`` prints once every server answers (``All N / N servers ready!``)."""

RAY_START_TIMEOUT = "The current node timed out during startup"
"""What Ray raises inside ``gym env start`` when its node does not register in time, a transient failure on a
loaded machine (``ray/_private/node.py``); ``gym env start`` then exits with status 1."""

START_ATTEMPTS = 2
"""``gym env start`` is run at most this often: once, and once more after :data:`RAY_START_TIMEOUT`."""

FINISH_GRACE = 60.0
"""Seconds ``gym eval run`` gets to write its aggregate metrics after the last rollout arrived."""

FINISH_POLL = 0.05
"""Seconds between two looks for Gym's aggregate metrics file while :meth:`GymRun.let_finish` waits for it."""

STOP_GRACE = 0.5
"""Seconds Gym's commands get after SIGINT before everything left in their sessions is SIGKILLed. Gym's own stop
buys nothing worth waiting for: ``gym env start`` SIGKILLs each of its servers after 1 s itself (they never
stopped in time here), then shuts its Ray cluster down, 9 s on an idle machine and 20 s on a loaded one; a SIGKILL
of the whole session took 1 s and left no process, listening port or shared-memory file (only Ray's session
files under ``RAY_TMPDIR``, which is the run directory's or removed with the session)."""

NO_KEY = "no-key"
"""The API key Gym gets when the key's environment variable is unset (loopback and keyless vLLM servers)."""


class GymStartError(Exception):
    """Gym could not be started or reached; ``str()`` says why and names the log to read; ``failure_class`` is
    the class its items get (``gym_start``, or e.g. ``run_dir_full`` when the run directory's disk filled up)."""

    failure_class = GYM_START


class GymServersExited(GymStartError):
    """Gym's servers (``gym env start``) exited while ``gym eval run`` ran; ``log`` is the servers' log."""

    def __init__(self, message: str, log: str) -> None:
        super().__init__(message)
        self.log = log


SERVER_EXITED = re.compile(r"Process `(?P<name>[^`]+)` finished unexpectedly!|Head server finished unexpectedly!")
"""What ``gym env start`` prints when one of its servers exits (``nemo_gym/cli/env.py``, ``poll``)."""


def which_server_exited(log: Path) -> str | None:
    """Which of Gym's servers exited, from the last line of ``gym env start``'s ``log`` that says so (``server
    `mcqa` exited``, ``the head server exited``), or None when the log does not say (Gym itself was killed)."""
    found = None
    try:
        with log.open("rb") as handle:
            for raw in handle:
                match = SERVER_EXITED.search(raw.decode("utf-8", "replace"))
                found = match or found
    except OSError:
        pass
    if found is None:
        return None
    return f"server `{found['name']}` exited" if found["name"] else "the head server exited"


@dataclass(frozen=True)
class ModelEndpoint:
    """The policy model Gym's servers call: ``url`` is an OpenAI-style base URL ending in ``/v1``.

    ``api_key_env`` names the environment variable holding the key; the key itself is never stored here.
    """

    url: str
    model: str
    model_type: str
    api_key_env: str

    def api_key(self) -> str | None:
        """The key from the environment, or None when the variable is unset or empty."""
        return os.environ.get(self.api_key_env) or None


@dataclass(frozen=True)
class RunSettings:
    """What a :class:`GymRun` needs besides the plan.

    ``gym`` is the ``gym`` executable and ``env`` the full environment to run it with; ``cwd`` is the Gym
    checkout; ``head_server`` attaches to running servers (never started or stopped by the run);
    ``gym_configs`` are the Gym config files that define the plan's agents; timeouts are in seconds;
    ``sampling`` goes into every row of Gym's input; ``record_latency`` turns on Gym's model-call
    observability (see :func:`write_gym_config`).
    ``tag_repeats`` tags each input row with its repeat for the replay model (``--gym-replay``).
    ``ray_address`` is an existing Ray cluster for Gym's servers (``--gym-ray-address``), None for a private one.
    ``gym_configs`` are the Gym config files that define the plan's agents; timeouts are in seconds.
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
    record_latency: bool = False
    tag_repeats: bool = False
    ray_address: str | None = None
    attach: Callable[[threading.Event, Callable[[str], None]], tuple[tuple[str, int], ModelEndpoint | None]] | None = (
        None
    )
    servers_gone: Callable[[], str | None] | None = None


RAY_SOCKET_SUFFIX = len("/ray/session_2026-11-30_04-17-08_264037_4194304/sockets/plasma_store")
AF_UNIX_PATH_MAX = 107


def ray_temp_dir(run_dir: Path) -> tuple[Path, bool]:
    """A folder for Ray's files (``RAY_TMPDIR``) and whether it was made outside ``run_dir``.

    Ray puts Unix sockets under it, and a socket path may not exceed 107 bytes, so a deep run directory gets
    a short folder under the system temp dir instead, linked from ``<run_dir>/ray``; remove it at the end.
    """
    inside = run_dir / "ray"
    if len(str(inside)) + RAY_SOCKET_SUFFIX <= AF_UNIX_PATH_MAX:
        inside.mkdir(parents=True, exist_ok=True)
        return inside, False
    short = Path(tempfile.mkdtemp(prefix="gym-ray-", dir="/tmp" if os.path.isdir("/tmp") else None))
    inside.symlink_to(short, target_is_directory=True)
    return short, True


def find_agent_config(checkout: Path, agent: str, resources_server: str | None = None) -> Path | None:
    """The Gym config file in ``checkout`` that defines ``agent`` as a top-level key, or None.

    Looks in ``resources_servers/*/configs/*.yaml`` first, then in ``benchmarks/`` and ``environments/``; with
    ``resources_server`` only in that resources server's ``configs/`` folder, or, named as Gym names one flavor
    (``format_verification/citation_format``), only in that config. Configs are found by the agent they define,
    so one not named after its folder (``equivalence_rule/configs/lc.yaml``) is found too.
    """
    pattern = re.compile(rf"^{re.escape(agent)}:\s*(#.*)?$", re.MULTILINE)
    server, _, flavor = (resources_server or "").partition("/")
    globs = (
        (f"resources_servers/{glob_escape(server)}/configs/{glob_escape(flavor) if flavor else '*'}.yaml",)
        if resources_server
        else ("resources_servers/*/configs/*.yaml", "benchmarks/**/*.yaml", "environments/**/*.yaml")
    )
    for glob in globs:
        for path in sorted(checkout.glob(glob)):
            try:
                if pattern.search(path.read_text(encoding="utf-8", errors="replace")):
                    return path
            except OSError:
                continue
    return None


def write_gym_config(
    path: Path,
    model: ModelEndpoint | None,
    head_server: tuple[str, int],
    capture_dir: Path | None = None,
    ray_address: str | None = None,
) -> None:
    """Write the Gym config for this run (JSON, which Gym's YAML loader reads).

    The API key enters only as the interpolation ``${oc.env:<VAR>}``, resolved inside Gym's processes from
    their environment, so it never appears in argv, in this file or in Gym's printed config. With
    ``capture_dir`` (an absolute folder) Gym's model-call observability is on (``observability_enabled``,
    ``model_call_capture_dir``): Gym then records each rollout's latency (``ng_perf.total_latency_ms``).

    ``ray_address`` (``HOST:PORT`` of an existing cluster's GCS) becomes Gym's ``ray_head_node_address``: Gym
    0.7.0's ``initialize_ray`` (``nemo_gym/server_utils.py``) then calls ``ray.init(address=...)`` to join
    that cluster instead of starting its own, and hands the address to every server that uses Ray; at exit
    it shuts down only a cluster it started itself (``maybe_ray_cluster_exit``), so the cluster outlives
    the run.
    """
    config: dict[str, object] = {"head_server": {"host": head_server[0], "port": head_server[1]}}
    if capture_dir is not None:
        config["observability_enabled"] = True
        config["model_call_capture_dir"] = str(capture_dir.resolve())
    if ray_address is not None:
        config["ray_head_node_address"] = ray_address
    if model is not None:
        config["policy_base_url"] = model.url
        config["policy_model_name"] = model.model
        config["policy_api_key"] = f"${{oc.env:{model.api_key_env}}}" if model.api_key() else NO_KEY
    path.write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")


PROBE_NOTE_EVERY = 60.0
"""Seconds between two notes that the model endpoint still does not answer."""


def unlisted_model(name: str, body: bytes) -> str | None:
    """What to say when ``GET /models`` answered ``body`` (OpenAI's ``{"data": [{"id": ...}]}``) without ``name``
    among its ids, or None (listed, or a body of another shape). Some servers answer any model name with the one
    they serve (llama.cpp does), so a typo would credit every report to a model that never ran."""
    try:
        listed = [str(entry["id"]) for entry in json.loads(body)["data"]]
    except (ValueError, KeyError, TypeError):
        return None
    if not listed or name in listed:
        return None
    shown = ", ".join(listed[:5]) + (f" and {len(listed) - 5} more" if len(listed) > 5 else "")
    return f"does not list the model {name!r} (--gym-model) in GET /models ({shown}); the reports name {name!r}"


def probe_model(
    model: ModelEndpoint,
    deadline: float,
    stopping: threading.Event,
    on_wait: Callable[[str], None] | None = None,
) -> None:
    """Wait until ``GET <url>/models`` answers 2xx (retrying refused connections until ``deadline``, a
    ``time.monotonic()`` value). While it does not, ``on_wait`` gets a note (what went wrong, how long this
    waits at most) after the first try and then every :data:`PROBE_NOTE_EVERY` seconds, so a mistyped URL
    does not look like a hang. Raises :class:`GymStartError` on a 401/403 or when the deadline passes."""
    import urllib.error  # here: importing urllib.request (http.client, ssl) took ~15 ms of every session's start
    import urllib.request

    request = urllib.request.Request(model.url.rstrip("/") + "/models")
    key = model.api_key()
    if key:
        request.add_header("Authorization", f"Bearer {key}")
    last = ""
    next_note = time.monotonic()
    shown = redact(model.url)  # the terminal, JUnit and the reports show these messages: no password or query
    while not stopping.is_set():
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                if 200 <= response.status < 300:
                    if on_wait is not None and (unlisted := unlisted_model(model.model, response.read(1 << 20))):
                        on_wait(f"warning: the model endpoint {shown} {unlisted}")
                    return
                last = f"HTTP {response.status}"
        except urllib.error.HTTPError as error:
            if error.code in (401, 403):
                raise GymStartError(
                    f"the model endpoint {shown} refused the API key (HTTP {error.code}); "
                    f"is ${model.api_key_env} set to a valid key?"
                ) from None
            last = f"HTTP {error.code}"
        except (urllib.error.URLError, OSError) as error:
            last = str(getattr(error, "reason", error))
        now = time.monotonic()
        if now >= deadline:
            raise GymStartError(f"the model endpoint {shown} did not answer GET /models ({last})")
        if on_wait is not None and now >= next_note:
            on_wait(
                f"the model endpoint {shown} does not answer GET /models yet ({last}); "
                f"waiting up to {deadline - now:.0f} s more (--gym-startup-timeout)"
            )
            next_note = now + PROBE_NOTE_EVERY
        stopping.wait(1.0)


def launch_servers(
    settings: RunSettings, model_type: str, paths: RunPaths, log_path: Path, watchdog: Watchdog | None = None
) -> GymProcess:
    """Start ``gym env start`` with the run's Gym configs, model type and config file (``paths.config``).

    Gym's servers build missing venvs themselves (``+skip_venv_if_present=true`` keeps existing ones) and
    write per-server logs under ``paths.logs/gym-servers``. The process is recorded in ``paths.processes`` and
    its session handed to ``watchdog``.
    """
    argv = [str(settings.gym), "env", "start"]
    for config in settings.gym_configs:
        argv += ["--config", str(config)]
    argv += ["--model-type", model_type, "--config", str(paths.config)]
    argv += ["+skip_venv_if_present=true", f"+nemo_gym_log_dir={paths.logs / 'gym-servers'}"]
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


@contextmanager
def serving(
    checkout: GymCheckout,
    model: ModelEndpoint,
    agents: Sequence[str],
    root: Path,
    timeout: float = DEFAULT_STARTUP_TIMEOUT,
    on_event: Callable[[str], None] = lambda message: None,
) -> Iterator[tuple[str, int]]:
    """Gym's servers for ``agents`` against ``model``, for sessions to attach to with ``--gym-head-server``.

    Writes the config, logs and process list under ``root`` (as :class:`RunPaths`), starts ``gym env start``
    with the config files that define ``agents`` (once more after Ray's start-up timeout, see
    :func:`start_servers`; ``on_event`` gets the one-line notes), waits at most ``timeout`` seconds until they
    are ready, and yields the head server's ``(host, port)`` (127.0.0.1 and a free port). On leaving, also after
    an error or Ctrl-C, it stops the whole process group and removes Ray's folder; a watchdog does the same
    should this process die first. Raises :class:`GymStartError` when an agent has no config in ``checkout`` or
    the servers do not become ready.
    """
    paths = RunPaths(root)
    paths.logs.mkdir(parents=True, exist_ok=True)
    configs = []
    for agent in agents:
        config = find_agent_config(checkout.path, agent)
        if config is None:
            raise GymStartError(f"no Gym config in {checkout.path} defines the agent {agent!r}")
        configs.append(config)
    head = ("127.0.0.1", free_port())
    write_gym_config(paths.config, model, head)
    ray_dir, made = ray_temp_dir(root)
    owner = Owner.current(root)
    settings = RunSettings(
        gym=checkout.gym_executable,
        env={**gym_environment(checkout, ray_dir), MARKER: owner.marker},
        cwd=checkout.path,
        model=model,
        gym_configs=tuple(configs),
        startup_timeout=timeout,
    )
    watchdog = Watchdog.start(owner, paths.logs / "watchdog.log", settings.stop_grace)
    started: list[GymProcess] = []

    def launch(log_path: Path) -> GymProcess:
        started.append(launch_servers(settings, model.model_type, paths, log_path, watchdog))
        return started[-1]

    try:
        start_servers(settings, launch, paths.logs, time.monotonic() + timeout, threading.Event(), on_event)
        yield head
    finally:
        for servers in started:
            servers.stop()
        watchdog.release()
        if made:
            shutil.rmtree(ray_dir, ignore_errors=True)


def start_servers(
    settings: RunSettings,
    launch: Callable[[Path], GymProcess],
    logs: Path,
    deadline: float,
    stopping: threading.Event,
    on_event: Callable[[str], None],
) -> GymProcess:
    """Start Gym's servers with ``launch`` (given the log path, it starts ``gym env start``: normally
    :func:`launch_servers`) and wait until they are ready (``deadline``, a ``time.monotonic()`` value, stands for
    ``settings.startup_timeout``); returns the ready process.

    When Ray's node times out during start-up (:data:`RAY_START_TIMEOUT`, a transient failure on a loaded
    machine), says so through ``on_event``, keeps Ray's logs of that start (``logs/ray-start-1/``), stops what
    it left and starts once more (``logs/gym-env-start-2.log``) within the same deadline. Raises
    :class:`GymStartError` (naming the log to read) when Gym exits early for any other reason, when the
    deadline passes or ``stopping`` is set, or when Ray times out again.
    """
    for attempt in range(1, START_ATTEMPTS + 1):
        log_path = logs / ("gym-env-start.log" if attempt == 1 else f"gym-env-start-{attempt}.log")
        on_ray = f" on the Ray cluster at {settings.ray_address}" if settings.ray_address else ""
        on_event(f"starting Gym's servers{on_ray} (log: {log_path})")
        servers = launch(log_path)
        try:
            wait_until_ready(servers, deadline, stopping, settings.startup_timeout)
            return servers
        except GymStartError as error:
            if stopping.is_set() or not ray_start_timed_out(log_path):
                raise
            ray_logs = keep_ray_logs(settings.env, logs / f"ray-start-{attempt}")
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


def wait_until_ready(servers: GymProcess, deadline: float, stopping: threading.Event, timeout: float) -> None:
    """Wait for ``servers`` to print Gym's readiness line (``All N / N servers ready!``).

    ``deadline`` is a ``time.monotonic()`` value and ``timeout`` the seconds it stands for (for the message).
    Raises :class:`GymStartError` with the log's last lines when Gym exits first, when ``stopping`` is set, or
    when the deadline passes.
    """
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
        status = servers.poll()
        if status is not None:
            raise GymStartError(
                f"`gym env start` exited with status {status} before its servers were ready; "
                f"last lines of {servers.log_path}:\n{servers.tail(15)}"
            )
        if stopping.is_set():
            raise GymStartError("the session stopped while Gym was starting")
        if time.monotonic() > deadline:
            raise GymStartError(
                f"Gym's servers were not ready within {timeout:g} s (--gym-startup-timeout); "
                f"last lines of {servers.log_path}:\n{servers.tail(15)}"
            )
        stopping.wait(0.2)


def record_process(paths: RunPaths, process: GymProcess, watchdog: Watchdog | None = None) -> None:
    """Append ``{name, pid, sid}`` of a started process to ``paths.processes`` (what to check or clean up) and
    hand its session to ``watchdog``, which stops it should this process die."""
    if watchdog is not None:
        watchdog.watch(process.pid)
    with paths.processes.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps({"name": process.name, "pid": process.pid, "sid": process.pid}) + "\n")


class GymRun:
    """Start Gym's servers (unless attaching), run the plan's rollouts in one ``gym eval run``, publish state.

    ``start()`` returns at once; the work happens in a thread. ``stop()`` ends every process the run started
    (also mid-start, and when Gym already died) and is idempotent. ``on_event`` receives one-line progress
    messages for the terminal. With ``waves`` (``--gym-adaptive``) the plan is rolled out in the waves the
    planner decides, one ``gym eval run`` each, through the same servers; ``plan`` and the files are then the
    current wave's.

    The process that makes a ``GymRun`` owns it: every process the run starts carries the owner's marker
    (:data:`~pytest_gym_eval.orphans.MARKER`), and a :class:`~pytest_gym_eval.watchdog.Watchdog` stops them
    should the owner die without ``stop()`` (SIGKILL). Before starting anything, the run reports through
    ``on_event`` what earlier sessions that died left running.
    """

    def __init__(
        self,
        plan: RunPlan,
        paths: RunPaths,
        settings: RunSettings,
        on_event: Callable[[str], None] = lambda message: None,
        waves: WavePlanner | None = None,
    ) -> None:
        self.plan = plan
        self.paths = paths
        self.waves = waves
        self.input, self.output, self.failures = paths.input, paths.output, paths.failures
        self._wave = waves.first() if waves is not None else None
        if self._wave is not None:
            self.plan, self.input, self.output, self.failures = (
                self._wave.plan, self._wave.input, self._wave.output, self._wave.failures,
            )  # fmt: skip
        self.owner = Owner.current(paths.root)
        self.settings = replace(settings, env={**settings.env, MARKER: self.owner.marker})
        self.on_event = on_event
        self.head_server = settings.head_server or ("127.0.0.1", free_port())
        self.servers: GymProcess | None = None
        self.eval: GymProcess | None = None
        self.eval_started: float | None = None  # time.time() when the first `gym eval run` started
        self.exit_statuses: list[int] = []
        self.watchdog: Watchdog | None = None
        self._servers_log = paths.logs / "gym-env-start.log"
        self._stopping = threading.Event()
        self._stopped = False
        self._failure: RunState | None = None
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._work, name="gym-run", daemon=True)

    def start(self) -> GymRun:
        """Publish ``starting`` and begin in the background; returns self."""
        self.paths.logs.mkdir(parents=True, exist_ok=True)
        self.paths.output.parent.mkdir(parents=True, exist_ok=True)
        RunState.reserve(self.paths.state)  # room for the final state, should the disk fill meanwhile
        RunState("starting").write(self.paths.state)
        self._thread.start()
        return self

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the work to end; whether it has."""
        self._thread.join(timeout)
        return not self._thread.is_alive()

    @property
    def stopped(self) -> bool:
        """Whether :meth:`stop` was called (it may still be under way in another thread)."""
        return self._stopped

    def has_every_rollout(self) -> bool:
        """Whether Gym's files hold a line (rollout or failure) for every planned rollout."""
        done = self._stamps_done()
        return all(rollout.stamp in done for rollout in self.plan.rollouts)

    def let_finish(self, timeout: float = FINISH_GRACE) -> None:
        """Let ``gym eval run`` write Gym's aggregate metrics (which the reports show) when every rollout is in:
        it does so within ~0.5 s of the last rollout, and then takes ~2 s more to exit (its interpreter's
        shutdown), which nothing needs, so this returns once the metrics are written or the run ended, at most
        ``timeout`` seconds later; at once when rollouts are missing, or when :meth:`kill` ends the run."""
        if not (self._thread.is_alive() and not self._stopping.is_set() and self.has_every_rollout()):
            return
        deadline = time.monotonic() + timeout
        while self._thread.is_alive() and not self._aggregate_metrics_written():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            self._thread.join(min(FINISH_POLL, remaining))

    def _aggregate_metrics_written(self) -> bool:
        """Whether ``gym eval run`` wrote its aggregate metrics (a whole JSON file) after its last rollout."""
        metrics = self.paths.output.with_name(self.paths.output.stem + "_aggregate_metrics.json")
        try:
            last_rollout = max(
                (p.stat().st_mtime for p in (self.paths.output, self.paths.failures) if p.exists()), default=0.0
            )
            if metrics.stat().st_mtime < last_rollout:
                return False
            json.loads(metrics.read_bytes())
        except (OSError, ValueError):
            return False
        return True

    def finish(self, timeout: float = FINISH_GRACE) -> None:
        """:meth:`let_finish`, then :meth:`stop`."""
        try:
            self.let_finish(timeout)
        finally:
            self.stop()

    def stop(self) -> None:
        """Stop the eval run and the servers this run started (never attached ones); idempotent (a second call
        returns at once: each stop scans ``/proc`` for what is left in Gym's sessions)."""
        self._stopping.set()
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
            processes = [p for p in (self.eval, self.servers) if p is not None]
        for process in processes:  # at once: the eval run and the servers share one grace period
            process.interrupt()
        deadline = time.monotonic() + self.settings.stop_grace
        for process in processes:
            process.stop(max(0.0, deadline - time.monotonic()))
        self._thread.join(timeout=self.settings.stop_grace + 30)
        with self._lock:
            watchdog = self.watchdog
        if watchdog is not None:
            watchdog.release()
        self.abandon()

    def abandon(self) -> None:
        """Nothing more is wanted from the run (the session was interrupted, or :meth:`stop` ended it): publish
        ``failed`` unless the run had ended, so that whatever still waits for a rollout (a pytest-xdist worker's
        item) stops waiting at once. Stops no process: :meth:`stop` does, after the session's reports."""
        self._stopping.set()
        state = RunState.read(self.paths.state)
        if state is None or not state.done:
            with contextlib.suppress(OSError):  # a full disk: the session's own feed stops anyway
                RunState("failed", "the session ended before Gym finished").write(self.paths.state)

    def kill(self) -> None:
        """SIGKILL the eval run and the servers this run started, now (Ctrl-C during :meth:`stop`; see
        :class:`~pytest_gym_eval.processes.CtrlCKillsGym`). Takes no lock: a signal handler calls it."""
        for process in (self.eval, self.servers):
            if process is not None:
                process.kill()

    # The work, in the background thread.

    @property
    def failure(self) -> RunState | None:
        """The run's ``failed`` state once its thread ended with an error, else None. Also set when ``state.json``
        could not be written (a full disk): the owner's waits read it here (:class:`RolloutFeed`'s
        ``owner_state``)."""
        with self._lock:
            return self._failure

    def _work(self) -> None:
        """The run's thread. Whatever ends it, every waiter learns: an exception becomes a ``failed`` state with its
        cause, kept in :attr:`failure` too in case ``state.json`` cannot be written."""
        try:
            # Reading /proc takes ~10 ms (more on a busy machine): alongside Gym's start, reported before its
            # rollouts (joined once `gym eval run` is under way, so it never delays it).
            leftovers = threading.Thread(target=self._report_leftovers, name="gym-leftovers", daemon=True)
            leftovers.start()
            self._start_watchdog()
            self._start_servers()
            statuses = self._run_waves(leftovers)
        except GymStartError as error:
            log = error.log if isinstance(error, GymServersExited) else self._log_hint()
            self._publish(RunState("failed", str(error), log))
            return
        except DatasetError as error:
            self._publish(RunState("failed", f"cannot write Gym's input: {error}"))
            return
        except Exception as error:  # a bug or an OS error (a full disk): report it on every item rather than hang them
            self._publish(RunState("failed", describe_error(error), self._log_hint()))
            return
        if self._stopping.is_set():
            return
        failed = any(status != 0 for status in statuses)
        self._publish(RunState("finished", self._finished_message(statuses), str(self._eval_log)), failed)

    def _publish(self, state: RunState, failed: bool = True) -> None:
        """Write the run's final ``state``. When the run directory's disk is full, a run that ``failed`` (a failed
        state, or a `gym eval run` that exited non-zero) fails with one error naming the path (class
        ``run_dir_full``) instead of whatever Gym or the plugin tripped over. A failure is also kept in
        :attr:`failure` first, so that the owner's items end with it even when ``state.json`` cannot be written
        (then a note says so)."""
        if failed and (full := disk_full(self.paths.root)):
            state = RunState("failed", f"{full}: Gym could not write its rollouts and logs there", "", RUN_DIR_FULL)
        if state.phase == "failed":
            with self._lock:
                self._failure = state
        try:
            state.write(self.paths.state)
        except OSError as error:
            if state.phase != "failed":
                with self._lock:
                    self._failure = RunState("failed", f"cannot publish the run's end: {describe_error(error)}")
            self.on_event(f"warning: cannot write {self.paths.state}: {describe_error(error)}")

    @property
    def _eval_log(self) -> Path:
        return self.paths.logs / "gym-eval-run.log"

    def _log_hint(self) -> str:
        for log in (self._eval_log, self._servers_log):
            if log.exists():
                return str(log)
        return ""

    def _report_leftovers(self) -> None:
        """Say on the terminal what earlier pytest sessions that died left running (never stops anything)."""
        try:
            everything = find_leftovers()
        except OSError:  # no /proc: nothing can be found, and nothing is lost
            return
        for leftovers in everything:
            self.on_event(f"warning: {leftovers.describe()}")

    def _start_watchdog(self) -> None:
        log = self.paths.logs / "watchdog.log"
        try:
            watchdog = Watchdog.start(self.owner, log, self.settings.stop_grace)
        except OSError as error:
            self.on_event(f"warning: no watchdog ({error}): should pytest be killed, Gym's processes stay running")
            return
        with self._lock:
            self.watchdog = watchdog

    def _start_servers(self) -> None:
        settings = self.settings
        deadline = time.monotonic() + settings.startup_timeout
        if settings.attach is not None:  # servers found or started elsewhere, e.g. a warm Gym
            head, model = settings.attach(self._stopping, self.on_event)
            self.head_server = head
            self.settings = settings = replace(settings, head_server=head, model=model, attach=None)
        capture = self.paths.model_calls if settings.record_latency else None
        write_gym_config(self.paths.config, settings.model, self.head_server, capture, settings.ray_address)
        write_gym_input(self.plan, self.input, settings.sampling, tag_repeats=settings.tag_repeats)
        if settings.model is not None:
            probe_model(settings.model, deadline, self._stopping, self.on_event)
        if settings.head_server is not None:
            host, port = settings.head_server
            self.on_event(f"attaching to Gym's head server at {host}:{port}")
            return
        assert settings.model is not None, "starting Gym needs a model endpoint"
        model_type = settings.model.model_type

        def launch(log_path: Path) -> GymProcess:
            with self._lock:
                if self._stopping.is_set():
                    raise GymStartError("the session stopped before Gym started")
                self._servers_log = log_path
                self.servers = launch_servers(settings, model_type, self.paths, log_path, self.watchdog)
                return self.servers

        start_servers(settings, launch, self.paths.logs, deadline, self._stopping, self.on_event)
        self.on_event(f"Gym's servers are ready after {settings.startup_timeout - (deadline - time.monotonic()):.0f} s")

    def _eval_argv(self, resume: bool) -> list[str]:
        argv = [
            str(self.settings.gym), "eval", "run", "--no-serve",
            "--input", str(self.input),
            "--output", str(self.output),
            "--num-repeats", str(self.plan.row_repeats),
            "--config", str(self.paths.config),
        ]  # fmt: skip
        if self.settings.concurrency:
            argv += ["--concurrency", str(self.settings.concurrency)]
        if resume:
            argv.append("--resume")
        return [*argv, "+route_failures_to_sidecar=true"]

    def _run_waves(self, leftovers: threading.Thread | None = None) -> list[int]:
        """Run the plan, or (``--gym-adaptive``) each wave the planner decides on; the last wave's statuses.
        ``leftovers`` (the report of earlier sessions' leftovers) is joined once the first run is under way."""
        statuses = self._run_eval(leftovers)
        while self.waves is not None and self._wave is not None and not self._stopping.is_set():
            self._wave = self.waves.after(self._wave)
            if self._wave is None:
                break
            wave = self._wave
            self.plan, self.input, self.output, self.failures = wave.plan, wave.input, wave.output, wave.failures
            write_gym_input(self.plan, self.input, self.settings.sampling, tag_repeats=self.settings.tag_repeats)
            self.on_event(f"wave {wave.number}: {len(wave.plan.rollouts)} rollouts")
            statuses = self._run_eval()
        return statuses

    def _run_eval(self, leftovers: threading.Thread | None = None) -> list[int]:
        """Run ``gym eval run``; resume it once when it exits before writing every rollout. ``leftovers`` (the
        report of earlier sessions' leftovers) is joined once the run is under way."""
        statuses: list[int] = []
        for attempt in (0, 1):
            if attempt and not self._needs_resume(statuses[-1]):
                break
            if self._stopping.is_set():
                break
            verb = "resuming" if attempt else "running"
            self.on_event(f"{verb} {len(self.plan.rollouts)} rollouts with `gym eval run` (log: {self._eval_log})")
            with self._lock:
                if self._stopping.is_set():
                    break
                if self.eval_started is None:
                    self.eval_started = time.time()
                self.eval = GymProcess(
                    self._eval_argv(resume=bool(attempt)),
                    env=self.settings.env,
                    cwd=self.settings.cwd,
                    log_path=self._eval_log,
                    name="gym eval run",
                )
                record_process(self.paths, self.eval, self.watchdog)
                if not attempt:
                    RunState("running", log=str(self._eval_log)).write(self.paths.state)
            if leftovers is not None:
                leftovers.join()
            status = self._wait_eval(self.eval)
            statuses.append(status)
            self.exit_statuses = list(statuses)
        return statuses

    def _wait_eval(self, process: GymProcess) -> int:
        while True:
            status = process.wait(0.5)
            if status is not None:
                return status
            gone = self.settings.servers_gone
            if self.servers is None and gone is not None and (why := gone()) is not None:
                process.stop(self.settings.stop_grace)
                raise GymServersExited(f"Gym's servers went away during the run: {why}", str(self._servers_log))
            if self.servers is not None and (servers_status := self.servers.poll()) is not None:
                process.stop(self.settings.stop_grace)
                crashed = which_server_exited(self._servers_log)
                raise GymServersExited(
                    f"Gym's servers exited during the run{f': {crashed}' if crashed else ''} (`gym env start` "
                    f"exited with status {servers_status}); last lines of {self._servers_log}:\n"
                    f"{self.servers.tail(10)}",
                    str(self._servers_log),
                )

    def _needs_resume(self, status: int) -> bool:
        if status == 0:
            return False
        done = self._stamps_done()
        return any(rollout.stamp not in done for rollout in self.plan.rollouts)

    def _stamps_done(self) -> set[int]:
        """The plan stamps Gym's files hold a line (rollout or failure) for."""
        repeats = self.plan.row_repeats
        return _stamps_in(self.output, repeats) | _stamps_in(self.failures, repeats)

    def _finished_message(self, statuses: list[int]) -> str:
        if not statuses:
            return "gym eval run did not run"
        described = ", then ".join(_describe_status(s) for s in statuses)
        resumed = " (resumed once with --resume)" if len(statuses) > 1 else ""
        return (
            f"gym eval run wrote no rollout for this item: it {described}{resumed}; "
            f"last lines of {self._eval_log}:\n{tail(self._eval_log, 8)}"
        )


def _describe_status(status: int) -> str:
    if status < 0:
        return f"was killed by signal {-status}"
    return f"exited with status {status}"


def _stamps_in(path: Path, row_repeats: int = 1) -> set[int]:
    """The plan stamps (:func:`~pytest_gym_eval.rollouts.record_stamp`) of every complete line of a Gym output
    file."""
    stamps: set[int] = set()
    try:
        with path.open("rb") as handle:
            for raw in handle:
                if not raw.endswith(b"\n"):
                    break
                try:
                    value = json.loads(raw)
                except ValueError:
                    continue
                if not isinstance(value, dict):
                    continue
                stamp = record_stamp(value.get(TASK_INDEX_KEY), value.get(ROLLOUT_INDEX_KEY), row_repeats)
                if stamp is not None:
                    stamps.add(stamp)
    except FileNotFoundError:
        pass
    return stamps
