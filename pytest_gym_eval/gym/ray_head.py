"""A private Ray head for Gym's servers, started without Ray's dashboard.

``gym env start`` starts Ray itself with ``ray.init()``, which also starts Ray's dashboard: measured on these
2-core machines, Ray's start took 8.0-9.2 s with it and 4.1-4.2 s without it, and nothing of Gym or of this
plugin uses the dashboard. So a session that starts Gym itself first starts Ray's head in Gym's own venv with the
dashboard off (:data:`PROGRAM`: ``ray.init(include_dashboard=False)`` in a process that then waits), and hands its
address to Gym as ``ray_head_node_address``, the key ``--gym-ray-address`` sets for a user's cluster; Gym's
servers connect to it as to any cluster. Ray's processes stay in that process's session, which is recorded, watched
and stopped with Gym's (:class:`~pytest_gym_eval.gym.processes.GymProcess`).

Ray is Gym's dependency, never this plugin's: the program runs in Gym's venv, and a checkout whose venv has no
``ray`` command (a stand-in ``gym`` in tests) keeps Gym's own start of Ray, as does a head that fails to start
(with a note saying so).
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from pytest_gym_eval.gym.processes import GymProcess, tail

PROGRAM = """\
import signal, sys
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
import ray
ray.init(include_dashboard=False)
print("ray head ready at " + ray.get_runtime_context().gcs_address, flush=True)
try:
    signal.pause()
except KeyboardInterrupt:
    pass
"""
"""What runs in Gym's venv: a local Ray cluster without the dashboard, kept until SIGINT or SIGTERM (Ray's node
IP is 127.0.0.1 with Gym's environment, see :func:`pytest_gym_eval.provision.gym_environment`)."""

READY = re.compile(r"^ray head ready at (\S+:\d+)$", re.MULTILINE)
"""The line :data:`PROGRAM` prints once the cluster is up, with the GCS address (``HOST:PORT``)."""

NAME = "ray head"
"""The process's name in ``processes.jsonl`` and in messages."""


def ray_python(gym: Path) -> Path | None:
    """The Python of the venv that holds the ``gym`` executable ``gym``, when that venv also has Ray's ``ray``
    command (Gym's own venv does); else None."""
    bin_dir = gym.parent
    python = bin_dir / "python"
    return python if (bin_dir / "ray").exists() and python.exists() else None


class RayHeadFailed(Exception):
    """The Ray head did not start; ``str()`` says why and names its log."""


def start_ray_head(
    python: Path,
    env: Mapping[str, str],
    cwd: Path,
    log_path: Path,
    deadline: float,
    stopping: threading.Event,
    on_start: Callable[[GymProcess], None] = lambda process: None,
) -> tuple[GymProcess, str]:
    """Start :data:`PROGRAM` with ``python`` (``env``: Gym's full environment, ``RAY_TMPDIR`` included), its output
    appended to ``log_path``, and wait until it prints its address; returns the process (whose session holds Ray's
    processes; ``on_start`` gets it as soon as it runs, to record and watch it) and the GCS address ``HOST:PORT``.

    ``deadline`` is a ``time.monotonic()`` value. Raises :class:`RayHeadFailed` naming the log when the program exits
    first, and when ``stopping`` is set or the deadline passes (the process is then stopped).
    """
    process = GymProcess([str(python), "-c", PROGRAM], env=env, cwd=cwd, log_path=log_path, name=NAME)
    on_start(process)
    while True:
        found = READY.search(tail(log_path, 50))
        if found:
            return process, found.group(1)
        status = process.poll()
        if status is not None or stopping.is_set() or time.monotonic() > deadline:
            process.stop()
            why = f"exited with status {status}" if status is not None else "did not start in time"
            raise RayHeadFailed(f"Ray's head {why}; last lines of {log_path}:\n{tail(log_path, 10)}")
        stopping.wait(0.05)
