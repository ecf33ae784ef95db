"""One Gym run: start (or attach to) Gym's servers, run every planned rollout in one ``gym eval run``, stop.

:class:`GymRun` is owned by exactly one process of a pytest session (the only process, or the pytest-xdist
controller). It works in a background thread and publishes its progress in the run directory's
``state.json`` (see :class:`~pytest_gym_eval.gym.feed.RunState`); items in any process follow that file and
Gym's output files through a :class:`~pytest_gym_eval.gym.feed.RolloutFeed`.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Collection
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_gym_eval.core.files import iter_json_lines
from pytest_gym_eval.core.rundir import RunPaths
from pytest_gym_eval.gym.config import ModelEndpoint as ModelEndpoint
from pytest_gym_eval.gym.config import find_agent_config as find_agent_config
from pytest_gym_eval.gym.config import ray_temp_dir as ray_temp_dir
from pytest_gym_eval.gym.config import write_gym_config as write_gym_config
from pytest_gym_eval.gym.feed import ROLLOUT_INDEX_KEY, TASK_INDEX_KEY, RunState, describe_error, record_stamp
from pytest_gym_eval.gym.model_probe import bound_endpoints
from pytest_gym_eval.gym.model_probe import probe_model as probe_model
from pytest_gym_eval.gym.model_probe import unlisted_model as unlisted_model
from pytest_gym_eval.gym.orphans import MARKER, Owner, find_leftovers
from pytest_gym_eval.gym.processes import GymProcess, free_port
from pytest_gym_eval.gym.servers import RAY_START_TIMEOUT as RAY_START_TIMEOUT
from pytest_gym_eval.gym.servers import GymServersExited as GymServersExited
from pytest_gym_eval.gym.servers import GymStartError as GymStartError
from pytest_gym_eval.gym.servers import RunSettings as RunSettings
from pytest_gym_eval.gym.servers import launch_servers as launch_servers
from pytest_gym_eval.gym.servers import quote_failure
from pytest_gym_eval.gym.servers import record_process as record_process
from pytest_gym_eval.gym.servers import start_private_ray as start_private_ray
from pytest_gym_eval.gym.servers import start_servers as start_servers
from pytest_gym_eval.gym.servers import wait_until_ready as wait_until_ready
from pytest_gym_eval.gym.servers import which_server_exited as which_server_exited
from pytest_gym_eval.gym.watchdog import Watchdog
from pytest_gym_eval.outcomes.causes import RUN_DIR_FULL, disk_full
from pytest_gym_eval.tasks.dataset import DatasetError
from pytest_gym_eval.tasks.plan import RunPlan, write_gym_input

if TYPE_CHECKING:
    from pytest_gym_eval.gym.waves import WavePlanner

FINISH_GRACE = 60.0
"""Seconds ``gym eval run`` gets to write its aggregate metrics after the last rollout arrived."""

FINISH_POLL = 0.05
"""Seconds between two looks for Gym's aggregate metrics file while :meth:`GymRun.let_finish` waits for it."""


class GymRun:
    """Start Gym's servers (unless attaching), run the plan's rollouts in one ``gym eval run``, publish state.

    ``start()`` returns at once; the work happens in a thread. ``stop()`` ends every process the run started
    (also mid-start, and when Gym already died) and is idempotent. ``on_event`` receives one-line progress
    messages for the terminal. With ``waves`` (``--gym-adaptive``) the plan is rolled out in the waves the
    planner decides, one ``gym eval run`` each, through the same servers; ``plan`` and the files are then the
    current wave's.

    The process that makes a ``GymRun`` owns it: every process the run starts carries the owner's marker
    (:data:`~pytest_gym_eval.gym.orphans.MARKER`), and a :class:`~pytest_gym_eval.gym.watchdog.Watchdog` stops them
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
        self.ray: GymProcess | None = None  # the Ray head Gym's servers use, when this run started one
        self.eval_started: float | None = None  # time.time() when the first `gym eval run` started
        self.exit_statuses: list[int] = []
        self.watchdog: Watchdog | None = None
        self._servers_log = paths.start_log()
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

    def has_every_rollout(self, known: Collection[int] = ()) -> bool:
        """Whether Gym's files hold a line (rollout or failure) for every planned rollout. ``known``: plan stamps
        already seen in them (the session's :class:`~pytest_gym_eval.gym.feed.RolloutFeed` has read every record):
        when they cover the plan, Gym's files (every record parsed again) are not read."""
        known = set(known)
        if all(rollout.stamp in known for rollout in self.plan.rollouts):
            return True
        done = self._stamps_done()
        return all(rollout.stamp in done for rollout in self.plan.rollouts)

    def let_finish(self, timeout: float = FINISH_GRACE, known: Collection[int] = ()) -> None:
        """Let ``gym eval run`` write Gym's aggregate metrics (which the reports show) when every rollout is in
        (``known``: as for :meth:`has_every_rollout`): it does so within ~0.5 s of the last rollout, and then
        takes ~2 s more to exit (its interpreter's shutdown), which nothing needs, so this returns once the metrics
        are written or the run ended, at most ``timeout`` seconds later; at once when rollouts are missing, or when
        :meth:`kill` ends the run."""
        if not (self._thread.is_alive() and not self._stopping.is_set() and self.has_every_rollout(known)):
            return
        deadline = time.monotonic() + timeout
        while self._thread.is_alive() and not self._aggregate_metrics_written():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            self._thread.join(min(FINISH_POLL, remaining))

    def judge_last_wave(self, known: Collection[int] = ()) -> None:
        """``--gym-adaptive``: judge the current wave now (:meth:`~pytest_gym_eval.gym.waves.WavePlanner.judge`) when
        Gym's files hold every rollout of it (``known``: as for :meth:`has_every_rollout`), so that the wave log
        says how every group stopped before the reports read it. The run's thread judges a wave only once ``gym
        eval run`` exited, which may be after the reports (:meth:`let_finish` returns once Gym's metrics are
        written); whichever comes first judges it, once. Nothing without waves, or with a rollout of the wave
        missing (a run cut short)."""
        wave = self._wave
        if self.waves is None or wave is None:
            return
        stamps = [rollout.stamp for rollout in wave.plan.rollouts]
        if not all(stamp in known for stamp in stamps):
            stride = wave.plan.stride
            done = _stamps_in(wave.output, stride) | _stamps_in(wave.failures, stride)
            if not all(stamp in done or stamp in known for stamp in stamps):
                return
        self.waves.judge(wave)

    def _aggregate_metrics_written(self) -> bool:
        """Whether ``gym eval run`` wrote its aggregate metrics (a whole JSON file) after its last rollout."""
        metrics = self.paths.aggregate_metrics
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
            processes = [p for p in (self.eval, self.servers, self.ray) if p is not None]
        for process in processes:  # at once: the eval run, the servers and Ray share one grace period
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
        """SIGKILL the eval run, the servers and the Ray head this run started, now (Ctrl-C during :meth:`stop`; see
        :class:`~pytest_gym_eval.gym.processes.CtrlCKillsGym`). Takes no lock: a signal handler calls it."""
        for process in (self.eval, self.servers, self.ray):
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
        return self.paths.eval_log

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
        log = self.paths.watchdog_log
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
        write_gym_input(
            self.plan, self.input, settings.sampling, tag_repeats=settings.tag_repeats, policies=settings.policies
        )
        if settings.model is not None:
            probe_model(settings.model, deadline, self._stopping, self.on_event)
            for binding in settings.model_servers:
                for endpoint in bound_endpoints([binding], settings.model.model_type):
                    probe_model(endpoint, deadline, self._stopping, self.on_event, server=binding.name)
        if settings.head_server is not None:
            host, port = settings.head_server
            self.on_event(f"attaching to Gym's head server at {host}:{port}")
            return
        assert settings.model is not None, "starting Gym needs a model endpoint"
        model_type = settings.model.model_type
        if settings.ray_address is None and (address := self._start_ray_head(deadline)) is not None:
            write_gym_config(self.paths.config, settings.model, self.head_server, capture, address)

        def launch(log_path: Path) -> GymProcess:
            with self._lock:
                if self._stopping.is_set():
                    raise GymStartError("the session stopped before Gym started")
                self._servers_log = log_path
                self.servers = launch_servers(settings, model_type, self.paths, log_path, self.watchdog)
                return self.servers

        start_servers(settings, launch, self.paths.logs, deadline, self._stopping, self.on_event, self.head_server)
        self.on_event(f"Gym's servers are ready after {settings.startup_timeout - (deadline - time.monotonic()):.0f} s")

    def _start_ray_head(self, deadline: float) -> str | None:
        """:func:`~pytest_gym_eval.gym.servers.start_private_ray` for this run (kept as :attr:`ray`, stopped with the
        servers); its address, or None (then Gym starts Ray itself)."""

        def started(process: GymProcess) -> None:
            with self._lock:
                self.ray = process

        settings = self.settings
        return start_private_ray(settings, self.paths, deadline, self._stopping, self.on_event, started, self.watchdog)

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
        ``leftovers`` (the report of earlier sessions' leftovers) is joined once the first run is under way. With no
        rollout planned (Gym serves on-demand rollouts only) no ``gym eval run`` runs: the servers stay up until
        :meth:`stop`."""
        if not self.plan.rollouts:
            return []
        statuses = self._run_eval(leftovers)
        while self.waves is not None and self._wave is not None and not self._stopping.is_set():
            self._wave = self.waves.after(self._wave)
            if self._wave is None:
                break
            wave = self._wave
            self.plan, self.input, self.output, self.failures = wave.plan, wave.input, wave.output, wave.failures
            settings = self.settings
            write_gym_input(
                self.plan, self.input, settings.sampling, tag_repeats=settings.tag_repeats, policies=settings.policies
            )
            self.on_event(f"wave {wave.number}: {len(wave.plan.rollouts)} rollouts")
            statuses = self._run_eval()
        return statuses

    def _run_eval(self, leftovers: threading.Thread | None = None) -> list[int]:
        """Run ``gym eval run``; resume it once when it exits before writing every rollout. ``leftovers`` (the
        report of earlier sessions' leftovers) is joined once the run is under way."""
        statuses: list[int] = []
        for attempt in (0, 1):
            if self._stopping.is_set() or (attempt and not self._needs_resume(statuses[-1])):
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
            self.eval.stop(self.settings.stop_grace)  # it has exited: end what it left in its session, reap it
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
                    f"exited with status {servers_status})"
                    f"{quote_failure(self._servers_log, self.paths.server_logs, 10)}",
                    str(self._servers_log),
                )

    def _needs_resume(self, status: int) -> bool:
        if status == 0:
            return False
        done = self._stamps_done()
        return any(rollout.stamp not in done for rollout in self.plan.rollouts)

    def _stamps_done(self) -> set[int]:
        """The plan stamps Gym's files hold a line (rollout or failure) for."""
        stride = self.plan.stride
        return _stamps_in(self.output, stride) | _stamps_in(self.failures, stride)

    def _finished_message(self, statuses: list[int]) -> str:
        if not statuses:
            return "gym eval run did not run"
        described = ", then ".join(_describe_status(s) for s in statuses)
        resumed = " (resumed once with --resume)" if len(statuses) > 1 else ""
        why = quote_failure(self._eval_log, None, 8)
        return f"gym eval run wrote no rollout for this item: it {described}{resumed}{why}"


def _describe_status(status: int) -> str:
    if status < 0:
        return f"was killed by signal {-status}"
    return f"exited with status {status}"


def _stamps_in(path: Path, stride: int = 1) -> set[int]:
    """The plan stamps (:func:`~pytest_gym_eval.gym.feed.record_stamp`) of every complete line of a Gym output
    file."""
    stamps: set[int] = set()
    try:
        for _, value in iter_json_lines(path, growing=True, skip_invalid=True):
            if not isinstance(value, dict):
                continue
            stamp = record_stamp(value.get(TASK_INDEX_KEY), value.get(ROLLOUT_INDEX_KEY), stride)
            if stamp is not None:
                stamps.add(stamp)
    except FileNotFoundError:
        pass
    return stamps
