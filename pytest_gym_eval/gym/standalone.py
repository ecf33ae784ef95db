"""Gym's servers started on their own (``gym env start``), for sessions to attach to with ``--gym-head-server``.

:func:`serving` is what a test tier or a script uses to start Gym once and run many sessions against it; a
session's own run starts its servers through :class:`~pytest_gym_eval.gym.run.GymRun` instead. Both start them the same
way (:mod:`pytest_gym_eval.gym.servers`).
"""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from pytest_gym_eval.core.defaults import DEFAULT_STARTUP_TIMEOUT
from pytest_gym_eval.core.rundir import RunPaths
from pytest_gym_eval.gym.config import ModelEndpoint, find_agent_config, ray_temp_dir, write_gym_config
from pytest_gym_eval.gym.orphans import MARKER, Owner
from pytest_gym_eval.gym.processes import GymProcess, free_port
from pytest_gym_eval.gym.servers import GymStartError, RunSettings, launch_servers, start_private_ray, start_servers
from pytest_gym_eval.gym.watchdog import Watchdog
from pytest_gym_eval.provision import GymCheckout, gym_environment


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
    watchdog = Watchdog.start(owner, paths.watchdog_log, settings.stop_grace)
    started: list[GymProcess] = []  # Ray's head (when one started), then each `gym env start`

    def launch(log_path: Path) -> GymProcess:
        started.append(launch_servers(settings, model.model_type, paths, log_path, watchdog))
        return started[-1]

    try:
        deadline = time.monotonic() + timeout
        address = start_private_ray(settings, paths, deadline, threading.Event(), on_event, started.append, watchdog)
        write_gym_config(paths.config, model, head, ray_address=address)
        start_servers(settings, launch, paths.logs, deadline, threading.Event(), on_event, head)
        yield head
    finally:
        for process in reversed(started):  # Gym's servers first, then the Ray head they use
            process.stop()
        watchdog.release()
        if made:
            shutil.rmtree(ray_dir, ignore_errors=True)
