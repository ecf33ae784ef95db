"""pytest-xdist support: one Gym for the whole run, owned by the controller.

Registered on the controller only (``-n``/``--dist`` active). The controller makes the run directory and
hands it to every worker (``workerinput``); each worker saves the plan of what it collected there (the same
on every worker) before it reports its collection; on the first collection the controller starts Gym and one
``gym eval run`` over that plan. Workers follow the run through its files, so every selected (task, repeat)
pair is rolled out exactly once whichever worker reports it, and the controller stops Gym at the end.

:class:`XdistController` (hooks on the controller), :class:`ProgressTicker` (its docstring: how the controller's
terminal shows progress), :func:`register_if_controller`. What users see: docs/xdist-and-sharding.md.
"""

from __future__ import annotations

import threading
from collections.abc import Generator
from typing import Any

import pytest

from pytest_gym_eval.core.rundir import RunPaths
from pytest_gym_eval.gym.feed import RunState
from pytest_gym_eval.session.gym_session import PROGRESS_TICK, RUN_DIR_INPUT, GymSession
from pytest_gym_eval.session.item_reports import GATE_SUFFIX
from pytest_gym_eval.tasks.plan import RunPlan

PROGRESS_EVENT = "gym_eval_progress"
"""The name of the controller's progress event in pytest-xdist's queue (handled by ``worker_<name>``)."""


class ProgressTicker:
    """Puts a progress event on pytest-xdist's event queue every ``every`` seconds until :meth:`stop`, so that the
    controller's main thread (which waits on that queue) calls ``show``. Not started when this pytest-xdist has no
    such queue (nothing shows then, as before).

    The controller's terminal shows the run's progress as one process does (:mod:`pytest_gym_eval.session.progress`):
    its main thread waits on pytest-xdist's event queue, so a ticker thread puts a progress event there every
    :data:`~pytest_gym_eval.session.gym_session.PROGRESS_TICK` seconds, which the main thread handles between the
    workers' events; the progress is erased before each hook that writes to the terminal.
    """

    def __init__(self, dsession: Any, show: Any, every: float = PROGRESS_TICK) -> None:
        self._queue = getattr(dsession, "queue", None)
        self._every = every
        self._stopping = threading.Event()
        if self._queue is not None:
            setattr(dsession, f"worker_{PROGRESS_EVENT}", lambda **_: show())
        self._thread = threading.Thread(target=self._tick, name="gym-xdist-progress", daemon=True)

    def start(self) -> ProgressTicker:
        if self._queue is not None:
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()

    def _tick(self) -> None:
        while not self._stopping.wait(self._every):
            self._queue.put((PROGRESS_EVENT, {}))  # type: ignore[union-attr]


class XdistController:
    """The controller's side of the run (an xdist plugin object; its methods are xdist hooks)."""

    def __init__(self, gym: GymSession) -> None:
        self.gym = gym
        self.started = False
        self.ticker: ProgressTicker | None = None

    def pytest_configure_node(self, node: Any) -> None:
        """Hand every worker (also a replacement for a crashed one) this session's run directory."""
        node.workerinput[RUN_DIR_INPUT] = str(self.gym.make_run_dir())

    @pytest.hookimpl(tryfirst=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        """Start Gym once, on the first worker's collection, for the plan that worker saved; note the selected
        ``gym-gate`` items (a JUnit file must show those the session ended before); show its progress."""
        self.gym.results.gates_expected.update(nodeid for nodeid in ids if nodeid.endswith(GATE_SUFFIX))
        self.gym.hide_progress()
        if self.started or self.gym.config.option.collectonly:
            return
        self.started = True
        paths = RunPaths(self.gym.make_run_dir())
        try:
            plan = RunPlan.load(paths.plan)
        except FileNotFoundError:
            return  # no Gym item was selected
        except (OSError, ValueError) as error:
            RunState("failed", f"the workers' plan could not be read: {error}").write(paths.state)
            return
        if plan.needs_gym:
            self.gym.plan = plan
            try:  # before any worker's item waits for Gym: a configuration error is one usage error here
                self.gym.check_before_start(plan)
            except pytest.UsageError as error:  # in an xdist hook a UsageError would be an internal error
                pytest.exit(str(error), returncode=pytest.ExitCode.USAGE_ERROR)
            reporter = self.gym.config.pluginmanager.get_plugin("terminalreporter")
            if reporter is not None and reporter._tw.width_of_current_line:
                reporter._tw.line()  # below pytest-xdist's status line ("ready: 2/2 workers"), which it rewrites
            self.gym.start_run(plan)
            dsession = self.gym.config.pluginmanager.get_plugin("dsession")
            self.ticker = ProgressTicker(dsession, self.gym.show_progress).start()

    # pytest's and pytest-xdist's terminal reporters write in these hooks: the progress is erased first.

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logstart(self) -> None:
        self.gym.hide_progress()

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_logreport(self) -> Generator[None, None, None]:
        """Erase the progress before the report is written, and write the run's notes after it."""
        self.gym.hide_progress()
        yield
        self.gym.flush_notes()

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logfinish(self) -> None:
        self.gym.hide_progress()

    @pytest.hookimpl(tryfirst=True)
    def pytest_collectreport(self) -> None:
        self.gym.hide_progress()

    @pytest.hookimpl(tryfirst=True)
    def pytest_warning_recorded(self) -> None:
        self.gym.hide_progress()

    @pytest.hookimpl(tryfirst=True)
    def pytest_testnodedown(self) -> None:
        self.gym.hide_progress()

    @pytest.hookimpl(tryfirst=True)
    def pytest_internalerror(self) -> None:
        self.gym.hide_progress()

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self) -> None:
        if self.ticker is not None:
            self.ticker.stop()
        self.gym.hide_progress()


def register_if_controller(config: pytest.Config, gym: GymSession) -> None:
    """Register :class:`XdistController` when this process is the pytest-xdist controller."""
    if gym.is_controller:
        config.pluginmanager.register(XdistController(gym), "gym-eval-xdist")
