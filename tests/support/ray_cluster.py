"""A real two-node Ray cluster on this machine, every process of it listening on 127.0.0.1 only, started with
the ``ray`` of Gym's own venv (the Ray version Gym's processes run), for the ``--gym-ray-address`` test.

- head node: ``ray start --head --node-ip-address=127.0.0.1 --port=P ...`` with
  ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` (Ray then keeps every address on loopback), its own ``--temp-dir``,
  ``--resources`` and ports;
- second node: the same ``ray start --address=127.0.0.1:P --node-ip-address=127.0.0.1 ...`` with its own
  ``--temp-dir``, ``--resources`` and ports, through ``tests/support/ray_second_node.py``: with that variable
  at 0 plain ``ray start`` refuses a second node, and with it at 1 the node listens on every interface (the
  script's docstring says what it changes).

Every port is chosen free on 127.0.0.1 beforehand. Each ``ray start`` runs in a process session of its own,
which every process of that node stays in (Ray's workers make process groups of their own, not sessions), so
:meth:`RayCluster.stop` ends exactly the cluster's processes and nothing else. ``ray stop`` is never used: it
stops every Ray process on the machine (it finds them by name), other users' clusters included.

Run as a script (``python tests/support/ray_cluster.py GYM_CHECKOUT``) it starts a cluster, prints its
status and what it listens on, and stops it.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_gym_eval.gym.processes import free_port, session_members

SECOND_NODE = Path(__file__).with_name("ray_second_node.py")

START_ATTEMPTS = 5
"""``ray start`` attempts per node: on a loaded machine a node can miss one of Ray's fixed start-up deadlines:
its raylet waits a hard-coded 15 s for the dashboard agent's port file and then exits (ray-project/ray issue
#65983), and the agent's imports alone took 24 s here at a load average of 20."""

RAY_ENV = {
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0",
    "PYTHONUNBUFFERED": "1",
    # The dashboard's modules get 30 s to start by default; a loaded machine needs more.
    "RAY_DASHBOARD_SUBPROCESS_MODULE_WAIT_READY_TIMEOUT": "300",
}


def end_session(sid: int, grace: float = 30.0) -> None:
    """SIGTERM every process of session ``sid``, wait up to ``grace`` seconds, SIGKILL what is left."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 10.0)):
        for pid in session_members(sid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + wait
        while session_members(sid) and time.monotonic() < deadline:
            time.sleep(0.2)
        if not session_members(sid):
            return


PRIORITY = -15
"""Scheduling priority (``nice``) a node's processes start with, when allowed (as root), so that they meet
Ray's fixed start-up deadlines on a machine other work keeps busy; once the node is up they go back to the
default (0), where they then run, as do the processes the session under test starts."""


def _raise_priority() -> None:
    """In the child before ``ray start`` runs: ask for :data:`PRIORITY` (ignored when not permitted)."""
    with contextlib.suppress(OSError):
        os.setpriority(os.PRIO_PROCESS, 0, PRIORITY)


def _default_priority(sid: int) -> None:
    """Put every process of session ``sid`` back at the default priority (0)."""
    for pid in session_members(sid):
        with contextlib.suppress(OSError):
            if os.getpriority(os.PRIO_PROCESS, pid) < 0:
                os.setpriority(os.PRIO_PROCESS, pid, 0)


def node_ports() -> list[str]:
    """Every port a node opens, chosen free now (Ray would otherwise pick some at random, and the metrics
    port defaults to a fixed one that a second node on the machine would collide with)."""
    return [
        f"--node-manager-port={free_port()}", f"--object-manager-port={free_port()}",
        f"--dashboard-agent-listen-port={free_port()}", f"--dashboard-agent-grpc-port={free_port()}",
        f"--runtime-env-agent-port={free_port()}", f"--metrics-export-port={free_port()}",
        f"--min-worker-port={free_port()}", "--max-worker-port=0",
    ]  # fmt: skip


WARM_UP = """
import importlib, pkgutil
import ray.scripts.scripts, ray.dashboard.dashboard, ray.dashboard.head, ray.dashboard.agent
import ray._private.log_monitor, ray.autoscaler._private.monitor, ray._private.runtime_env.agent.main
import ray.dashboard.modules as modules
for found in pkgutil.walk_packages(modules.__path__, modules.__name__ + "."):
    try:
        importlib.import_module(found.name)
    except Exception:
        pass
"""
"""Imports every process of a node makes at start-up, run once beforehand with the cluster's bytecode cache
(:attr:`RayCluster.pycache`): the node's dozen Python processes then load compiled modules instead of each
compiling Ray's sources (3-4x less CPU each)."""


@dataclass
class RayCluster:
    """A started two-node cluster: ``address`` is the head's GCS (``127.0.0.1:PORT``, what Gym connects to),
    ``dashboard`` its dashboard URL (Ray's state API), ``sessions`` the process sessions of its nodes.

    ``pycache`` is where its Python processes keep compiled bytecode (``PYTHONPYCACHEPREFIX``): Gym's venv has
    none of its own, and where ``PYTHONDONTWRITEBYTECODE`` is set every Ray process would compile Ray anew."""

    ray: Path
    root: Path
    pycache: Path | None = None
    address: str = ""
    dashboard: str = ""
    sessions: list[int] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)

    def start(self) -> RayCluster:
        """Start the head, then the second node (each up to :data:`START_ATTEMPTS` times). Raises
        RuntimeError with ``ray start``'s output when a node will not start; what did start is stopped."""
        self.env = {**os.environ, **RAY_ENV, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
        if self.pycache is not None:
            self.env.pop("PYTHONDONTWRITEBYTECODE", None)
            self.env["PYTHONPYCACHEPREFIX"] = str(self.pycache)
            subprocess.run(
                [str(self.ray.parent / "python"), "-c", WARM_UP], env=self.env, capture_output=True, timeout=600
            )
        gcs, dash = free_port(), free_port()
        self.address, self.dashboard = f"127.0.0.1:{gcs}", f"http://127.0.0.1:{dash}"
        head = [
            str(self.ray), "start", "--head", "--node-ip-address=127.0.0.1", f"--port={gcs}",
            f"--temp-dir={self.root / 'head'}", "--num-cpus=1", '--resources={"head_node": 1}',
            "--dashboard-host=127.0.0.1", f"--dashboard-port={dash}", f"--ray-client-server-port={free_port()}",
            "--disable-usage-stats",
        ]  # fmt: skip
        second = [
            str(self.ray.parent / "python"), str(SECOND_NODE), "start", f"--address={self.address}",
            "--node-ip-address=127.0.0.1", f"--temp-dir={self.root / 'node2'}", "--num-cpus=1",
            '--resources={"second_node": 1}', "--disable-usage-stats",
        ]  # fmt: skip
        try:
            self._start_node("head", head, nodes=1)
            self._start_node("node2", second, nodes=2)
        except BaseException:
            self.stop()
            raise
        return self

    def _start_node(self, name: str, argv: list[str], nodes: int) -> None:
        """Run ``ray start`` for one node until the cluster shows ``nodes`` live nodes. ``ray start`` gives up
        after 30 s without the node registered, but leaves its processes running, and on a loaded machine the
        node often registers a little later: so a node that comes up counts whatever ``ray start`` said; one
        that does not is stopped and started again."""
        log = self.root / f"ray-start-{name}.log"
        for attempt in range(1, START_ATTEMPTS + 1):
            with log.open("a") as out:
                out.write(f"--- attempt {attempt}: {' '.join(argv)}\n")
                out.flush()
                process = subprocess.Popen(
                    [*argv, *node_ports()], env=self.env, stdout=out, stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL, start_new_session=True, preexec_fn=_raise_priority,
                )  # fmt: skip
                self.sessions.append(process.pid)  # from now on stop() ends it, also after Ctrl-C
                try:
                    status = process.wait(timeout=600)
                except subprocess.TimeoutExpired:
                    status = None
            try:
                if status != 0 and not self._raylet_alive(process.pid):
                    raise RuntimeError("its raylet is not running (see raylet.out in the node's --temp-dir)")
                self.wait_for_nodes(nodes, timeout=300 if status == 0 else 180)
            except RuntimeError as error:
                with log.open("a") as out:
                    out.write(f"--- `ray start` exited with {status}; {error}\n")
                end_session(process.pid, grace=10.0)
                self.sessions.remove(process.pid)
                continue
            _default_priority(process.pid)
            return
        raise RuntimeError(f"`ray start` of the {name} node failed {START_ATTEMPTS} times:\n{log.read_text()[-4000:]}")

    @staticmethod
    def _raylet_alive(sid: int) -> bool:
        """Whether session ``sid`` holds a running raylet (a node whose raylet died never comes up)."""
        for pid in session_members(sid):
            try:
                if Path(f"/proc/{pid}/comm").read_text().strip() == "raylet":
                    return True
            except OSError:
                continue
        return False

    def ray_cli(self, *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
        """Run Gym's ``ray`` CLI against this cluster (its environment, never argv secrets)."""
        return subprocess.run(
            [str(self.ray), *args], env=self.env,
            capture_output=True, text=True, timeout=timeout,
        )  # fmt: skip

    def state(self, kind: str) -> list[dict[str, Any]]:
        """``ray list <kind> --format json`` through the dashboard (Ray's state API): actors, jobs, nodes, ..."""
        result = self.ray_cli("list", kind, f"--address={self.dashboard}", "--format=json", "--detail", "--limit=10000")
        if result.returncode != 0:
            raise RuntimeError(f"ray list {kind} failed: {result.stdout[-2000:]}{result.stderr[-2000:]}")
        if result.stdout.strip() == "No resource in the cluster":  # what it prints for an empty list
            return []
        data: list[dict[str, Any]] = json.loads(result.stdout)
        return data

    def alive_nodes(self) -> list[dict[str, Any]]:
        return [node for node in self.state("nodes") if node.get("state") == "ALIVE"]

    def wait_for_nodes(self, count: int, timeout: float) -> None:
        """Wait until the state API shows ``count`` live nodes (the dashboard takes a while to come up)."""
        deadline = time.monotonic() + timeout
        last: Exception | None = None
        while time.monotonic() < deadline:
            try:
                if len(self.alive_nodes()) >= count:
                    return
            except (RuntimeError, ValueError, subprocess.TimeoutExpired) as error:
                last = error
            time.sleep(2.0)
        raise RuntimeError(f"the cluster did not show {count} live nodes within {timeout:g} s: {last}")

    def processes(self) -> list[int]:
        """Every live process of the cluster's nodes."""
        return [pid for sid in self.sessions for pid in session_members(sid)]

    def stop(self) -> None:
        """End every process of the cluster's sessions (SIGTERM, then SIGKILL after 30 s)."""
        for sid in self.sessions:
            end_session(sid)


def listening_addresses(pids: set[int]) -> set[str]:
    """The local addresses (without ports) ``pids`` listen on, TCP and UDP, from ``ss``."""
    out = subprocess.run(["ss", "-ltunpH"], capture_output=True, text=True, timeout=30).stdout
    found = set()
    for line in out.splitlines():
        if any(f"pid={pid}," in line for pid in pids):
            found.add(line.split()[4].rsplit(":", 1)[0])
    return found


def main(argv: list[str]) -> int:
    checkout = Path(argv[0])
    with tempfile.TemporaryDirectory(prefix="ray-", dir="/tmp") as root:
        cluster = RayCluster(checkout / ".venv" / "bin" / "ray", Path(root), Path(root) / "pycache")
        started = time.monotonic()
        cluster.start()
        try:
            print(f"started in {time.monotonic() - started:.0f} s: {cluster.address}, dashboard {cluster.dashboard}")
            print(cluster.ray_cli("status", f"--address={cluster.address}").stdout)
            print(json.dumps([(n["node_ip"], n["resources_total"]) for n in cluster.alive_nodes()]))
            print("listening on:", sorted(listening_addresses(set(cluster.processes()))))
        finally:
            cluster.stop()
        print("left running:", cluster.processes())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
