"""A real two-node Ray cluster on this machine, on loopback addresses only, started with the ``ray`` CLI of
Gym's own venv (the Ray version Gym's processes run), for the ``--gym-ray-address`` test.

- head node: ``ray start --head --node-ip-address=127.0.0.1 --port=P ...`` with
  ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` (Ray then never swaps a loopback address for the machine's network
  address), its own ``--temp-dir`` and ``--resources``;
- second node: ``ray start --address=[::ffff:127.0.0.1]:P --node-ip-address=127.0.0.2 ...``, its own ports,
  ``--temp-dir`` and ``--resources``. ``ray start`` refuses a second node when
  ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``, and with it on, it rewrites the addresses ``127.0.0.1`` and
  ``localhost`` to the machine's network address (``resolve_ip_for_localhost``): the head's GCS is therefore
  named by the IPv4-mapped spelling of 127.0.0.1, and the node takes the loopback address 127.0.0.2.

Every port is chosen free on 127.0.0.1 beforehand. Each ``ray start`` runs in a process session of its own,
which every process of that node stays in (Ray's workers make process groups of their own, not sessions), so
:meth:`RayCluster.stop` ends exactly the cluster's processes and nothing else. ``ray stop`` is never used: it
stops every Ray process on the machine (it finds them by name), other users' clusters included.

Run as a script (``python tests/support/ray_cluster.py GYM_CHECKOUT``) it starts a cluster, prints its
status and stops it.
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

from pytest_gym_eval.processes import free_port, session_members

START_ATTEMPTS = 3
"""``ray start`` attempts per node: on a loaded machine a node can miss one of Ray's fixed start-up deadlines
(its raylet waits 15 s for the dashboard agent, whose imports alone took 24 s at a load average of 20)."""

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


def node_ports() -> list[str]:
    """Every port a node opens, chosen free now (Ray would otherwise pick some at random, and the metrics
    port defaults to a fixed one that a second node on the machine would collide with)."""
    return [
        f"--node-manager-port={free_port()}", f"--object-manager-port={free_port()}",
        f"--dashboard-agent-listen-port={free_port()}", f"--dashboard-agent-grpc-port={free_port()}",
        f"--runtime-env-agent-port={free_port()}", f"--metrics-export-port={free_port()}",
        f"--min-worker-port={free_port()}", "--max-worker-port=0",
    ]  # fmt: skip


@dataclass
class RayCluster:
    """A started two-node cluster: ``address`` is the head's GCS (``127.0.0.1:PORT``, what Gym connects to),
    ``dashboard`` its dashboard URL (Ray's state API), ``sessions`` the process sessions of its nodes."""

    ray: Path
    root: Path
    address: str = ""
    dashboard: str = ""
    sessions: list[int] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)

    def start(self) -> RayCluster:
        """Start the head, then the second node (each up to :data:`START_ATTEMPTS` times). Raises
        RuntimeError with ``ray start``'s output when a node will not start; what did start is stopped."""
        self.env = {**os.environ, **RAY_ENV}
        gcs, dash = free_port(), free_port()
        self.address, self.dashboard = f"127.0.0.1:{gcs}", f"http://127.0.0.1:{dash}"
        head = [
            str(self.ray), "start", "--head", "--node-ip-address=127.0.0.1", f"--port={gcs}",
            f"--temp-dir={self.root / 'head'}", "--num-cpus=1", '--resources={"head_node": 1}',
            "--dashboard-host=127.0.0.1", f"--dashboard-port={dash}", f"--ray-client-server-port={free_port()}",
            "--disable-usage-stats",
        ]  # fmt: skip
        second = [
            str(self.ray), "start", f"--address=[::ffff:127.0.0.1]:{gcs}", "--node-ip-address=127.0.0.2",
            f"--temp-dir={self.root / 'node2'}", "--num-cpus=1", '--resources={"second_node": 1}',
            "--disable-usage-stats",
        ]  # fmt: skip
        try:
            self._start_node("head", head, {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"})
            self._start_node("node2", second, {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "1"})
            self.wait_for_nodes(2, timeout=300)
        except BaseException:
            self.stop()
            raise
        return self

    def _start_node(self, name: str, argv: list[str], extra_env: dict[str, str]) -> None:
        log = self.root / f"ray-start-{name}.log"
        for attempt in range(1, START_ATTEMPTS + 1):
            with log.open("a") as out:
                out.write(f"--- attempt {attempt}: {' '.join(argv)}\n")
                out.flush()
                process = subprocess.Popen(
                    [*argv, *node_ports()], env={**self.env, **extra_env}, stdout=out, stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL, start_new_session=True,
                )  # fmt: skip
                try:
                    status = process.wait(timeout=600)
                except subprocess.TimeoutExpired:
                    status = None
            if status == 0:
                self.sessions.append(process.pid)
                return
            end_session(process.pid, grace=10.0)
        raise RuntimeError(f"`ray start` of the {name} node failed {START_ATTEMPTS} times:\n{log.read_text()[-4000:]}")

    def ray_cli(self, *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
        """Run Gym's ``ray`` CLI against this cluster (its environment, never argv secrets)."""
        return subprocess.run(
            [str(self.ray), *args], env={**self.env, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"},
            capture_output=True, text=True, timeout=timeout,
        )  # fmt: skip

    def state(self, kind: str) -> list[dict[str, Any]]:
        """``ray list <kind> --format json`` through the dashboard (Ray's state API): actors, jobs, nodes, ..."""
        result = self.ray_cli("list", kind, f"--address={self.dashboard}", "--format=json", "--detail", "--limit=10000")
        if result.returncode != 0:
            raise RuntimeError(f"ray list {kind} failed: {result.stdout[-2000:]}{result.stderr[-2000:]}")
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


def main(argv: list[str]) -> int:
    checkout = Path(argv[0])
    with tempfile.TemporaryDirectory(prefix="ray-", dir="/tmp") as root:
        cluster = RayCluster(checkout / ".venv" / "bin" / "ray", Path(root))
        started = time.monotonic()
        cluster.start()
        try:
            print(f"started in {time.monotonic() - started:.0f} s: {cluster.address}, dashboard {cluster.dashboard}")
            print(cluster.ray_cli("status", f"--address={cluster.address}").stdout)
            print(json.dumps([(n["node_ip"], n["resources_total"]) for n in cluster.alive_nodes()]))
        finally:
            cluster.stop()
        print("left running:", cluster.processes())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
