"""pytest-xdist support: one Gym for the whole run, owned by the controller.

Registered on the controller only (``-n``/``--dist`` active). The controller makes the run directory and
hands it to every worker (``workerinput``); each worker saves the plan of what it collected there (the same
on every worker) before it reports its collection; on the first collection the controller starts Gym and one
``gym eval run`` over that plan. Workers follow the run through its files, so every selected (task, repeat)
pair is rolled out exactly once whichever worker reports it, and the controller stops Gym at the end.
"""

from __future__ import annotations

from typing import Any

import pytest

from pytest_gym_eval.plan import RunPlan
from pytest_gym_eval.results import GATE_SUFFIX
from pytest_gym_eval.rollouts import RunState
from pytest_gym_eval.run import RunPaths
from pytest_gym_eval.session import RUN_DIR_INPUT, GymSession


class XdistController:
    """The controller's side of the run (an xdist plugin object; its methods are xdist hooks)."""

    def __init__(self, gym: GymSession) -> None:
        self.gym = gym
        self.started = False

    def pytest_configure_node(self, node: Any) -> None:
        """Hand every worker (also a replacement for a crashed one) this session's run directory."""
        node.workerinput[RUN_DIR_INPUT] = str(self.gym.make_run_dir())

    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        """Start Gym once, on the first worker's collection, for the plan that worker saved; note the selected
        ``gym-gate`` items (a JUnit file must show those the session ended before)."""
        self.gym.results.gates_expected.update(nodeid for nodeid in ids if nodeid.endswith(GATE_SUFFIX))
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
        if plan.rollouts:
            self.gym.plan = plan
            try:  # before any worker's item waits for Gym: a configuration error is one usage error here
                self.gym.check_before_start(plan)
            except pytest.UsageError as error:  # in an xdist hook a UsageError would be an internal error
                pytest.exit(str(error), returncode=pytest.ExitCode.USAGE_ERROR)
            self.gym.start_run(plan)

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.gym.flush_notes()


def register_if_controller(config: pytest.Config, gym: GymSession) -> None:
    """Register :class:`XdistController` when this process is the pytest-xdist controller."""
    if gym.is_controller:
        config.pluginmanager.register(XdistController(gym), "gym-eval-xdist")
