"""Real Gym and Ray: nothing survives a SIGKILLed pytest, a dead session's leftovers are cleaned on request, and
Ray's node start-up timeout is retried once.

The stand-in versions of these (fast, for the error paths) are in tests/plugin/test_watchdog.py and
tests/plugin/test_run.py. Every wait polls ``/proc`` or a file against a deadline; nothing sleeps to synchronise.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_gym_eval.gym.feed import RunState
from pytest_gym_eval.gym.orphans import find_leftovers, run_processes
from pytest_gym_eval.gym.processes import is_running, session_members
from pytest_gym_eval.gym.run import RAY_START_TIMEOUT
from pytest_gym_eval.replay import ReplayServer
from tests.support.children import (
    child_pytest_argv,
    gym_commands,
    interrupt_once_reported,
    started_processes,
    stop_dead_runs,
    wait_until,
)
from tests.support.real_gym import GymExample

TEARDOWN_DEADLINE = 120.0
"""Seconds the watchdog may take to stop real Gym (SIGINT, Gym's own shutdown of ~9 s, SIGKILL of the rest)."""


def copy_example(path: Path, example: GymExample) -> str:
    target = path / "datasets" / f"{example.name}.jsonl"
    target.parent.mkdir(exist_ok=True)
    shutil.copy(example.dataset, target)
    return f"datasets/{example.name}.jsonl"


def only_run_dir(root: Path) -> Path:
    (run_dir,) = [p for p in root.iterdir() if p.is_dir()]
    return run_dir


def left_of(run_dir: Path) -> list[int]:
    """Every live process of the run: in the sessions it recorded, or carrying its marker."""
    sessions = [process["sid"] for process in started_processes(run_dir)]
    marked = [p.pid for owner, processes in run_processes().items() if owner.run_dir == run_dir for p in processes]
    return sorted({pid for sid in sessions for pid in session_members(sid)} | set(marked))


def watchdog_pid(run_dir: Path) -> int:
    log = run_dir / "logs" / "watchdog.log"
    wait_until(lambda: log.exists() and "watchdog pid" in log.read_text(), f"the watchdog's first line in {log}")
    found = re.search(r"watchdog pid (\d+)", log.read_text())
    assert found is not None
    return int(found.group(1))


@pytest.fixture
def slow_replay(gym_example: GymExample, tmp_path: Path) -> Iterator[ReplayServer]:
    """The recorded answers, each held back 2 s: rollouts stay in flight long enough to kill pytest mid-run."""
    with ReplayServer([gym_example.recordings], delay=2.0, log_path=tmp_path / "slow-replay.jsonl") as server:
        yield server


def slow_run_args(example: GymExample, replay: ReplayServer, dataset: str) -> list[str]:
    return [
        f"--gym-checkout={example.checkout}", f"--gym-model-url={replay.base_url}", "--gym-model=replay",
        "--gym-concurrency=1", "--gym-run-dir=runs", "-p", "no:cacheprovider", "-v", dataset,
    ]  # fmt: skip


def reported(line: str) -> bool:
    return " PASSED" in line or " FAILED" in line


def test_gyms_servers_run_on_the_sessions_own_ray_head(pytester: pytest.Pytester, gym_example: GymExample) -> None:
    # The session starts Ray's head without its dashboard (pytest_gym_eval/gym/ray_head.py) and Gym connects to it
    # instead of starting Ray itself; only a head that Ray's own start-up timeout stopped (a loaded machine) leaves
    # Ray to Gym, with a note.
    dataset = copy_example(pytester.path, gym_example)
    result = pytester.runpytest_subprocess(
        f"--gym-checkout={gym_example.checkout}", f"--gym-replay={gym_example.recordings}", dataset,
        "--gym-run-dir=runs", "-p", "no:cacheprovider",
    )  # fmt: skip
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed") and not outcomes.get("errors"), result.stdout.str()[-3000:]
    run_dir = only_run_dir(pytester.path / "runs")
    assert [p["name"] for p in started_processes(run_dir)][:2] == ["ray head", "gym env start"]
    head_log = (run_dir / "logs" / "ray-head.log").read_text()
    servers_log = (run_dir / "logs" / "gym-env-start.log").read_text()
    address = json.loads((run_dir / "gym-config.yaml").read_text()).get("ray_head_node_address")
    if address is None:
        assert RAY_START_TIMEOUT in head_log, head_log[-3000:]
        result.stdout.fnmatch_lines(["*Gym starts Ray itself instead"])
    else:
        assert f"ray head ready at {address}" in head_log
        assert f"Connecting to Ray cluster at specified address: {address}" in servers_log
        assert "starting a new Ray cluster" not in servers_log
    assert not left_of(run_dir)


def test_sigkill_of_pytest_mid_run_leaves_nothing_running(
    pytester: pytest.Pytester, gym_example: GymExample, slow_replay: ReplayServer
) -> None:
    args = slow_run_args(gym_example, slow_replay, copy_example(pytester.path, gym_example))
    returncode, output = interrupt_once_reported(pytester.path, args, reported, signal.SIGKILL, timeout=300)
    assert returncode == -signal.SIGKILL, output[-3000:]
    run_dir = only_run_dir(pytester.path / "runs")
    assert gym_commands(run_dir) == ["gym env start", "gym eval run"]
    assert left_of(run_dir)  # Gym, its servers and Ray were running when pytest died
    watchdog = watchdog_pid(run_dir)
    wait_until(lambda: not left_of(run_dir), "every process of the run is gone", TEARDOWN_DEADLINE)
    wait_until(lambda: not is_running(watchdog), "the watchdog exited")
    state = RunState.read(run_dir / "state.json")
    assert state is not None and state.phase == "failed"
    assert re.match(r"the pytest process died \(pid \d+\) before the run ended", state.message), state.message


def test_cleanup_stops_what_a_dead_session_left_of_gym_and_ray(
    pytester: pytest.Pytester, gym_example: GymExample, slow_replay: ReplayServer
) -> None:
    args = slow_run_args(gym_example, slow_replay, copy_example(pytester.path, gym_example))
    child = subprocess.Popen(
        child_pytest_argv(*args), cwd=pytester.path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )  # fmt: skip
    assert child.stdout is not None
    run_dir: Path | None = None
    try:
        seen = []
        for line in child.stdout:
            seen.append(line)
            if reported(line):
                break
        else:
            pytest.fail("".join(seen)[-3000:])
        run_dir = only_run_dir(pytester.path / "runs")
        sessions = [process["sid"] for process in started_processes(run_dir)]
        watchdog = watchdog_pid(run_dir)
        os.kill(watchdog, signal.SIGKILL)  # what a session SIGKILLed together with its watchdog leaves
        wait_until(lambda: not is_running(watchdog), "the watchdog died")
        child.kill()
        child.communicate()

        (leftovers,) = find_leftovers(run_dir)
        assert leftovers.owner.pid == child.pid
        members = {pid for sid in sessions for pid in session_members(sid)}
        assert {p.pid for p in leftovers.processes} == members  # Ray's too, whatever their environ shows
        names = {p.name for p in leftovers.processes}
        assert {"gcs_server", "raylet"} <= names, names

        done = subprocess.run(
            [sys.executable, "-m", "pytest_gym_eval", "cleanup", "--run-dir", str(run_dir)],
            capture_output=True, text=True, timeout=TEARDOWN_DEADLINE,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        assert not left_of(run_dir)
        state = RunState.read(run_dir / "state.json")
        assert state is not None and state.phase == "failed"
        assert "`python -m pytest_gym_eval cleanup` stopped the" in state.message
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate()
        if run_dir is not None:
            stop_dead_runs(run_dir)


# A first start that Ray's own fault injection makes time out (the GCS answers the raylet's registration only
# after 300 s; with RAY_raylet_start_wait_time_s=1, Ray gives up after its hard-coded 30 s), a second one
# untouched.
FIRST_START_TIMES_OUT = """
import dataclasses
from pytest_gym_eval.gym import ray_head
from pytest_gym_eval.gym import run

ray_head.ray_python = lambda gym: None  # Gym starts Ray itself, as when the session's own Ray head fails
_launch = run.launch_servers
_starts = []


def first_start_times_out(settings, *args, **kwargs):
    _starts.append(settings)
    if len(_starts) == 1:
        delay = "NodeInfoGcsService.grpc_server.RegisterNode=300000000:300000000"
        env = {**settings.env, "RAY_testing_asio_delay_us": delay, "RAY_raylet_start_wait_time_s": "1"}
        settings = dataclasses.replace(settings, env=env)
    return _launch(settings, *args, **kwargs)


run.launch_servers = first_start_times_out
"""


def test_a_ray_start_timeout_is_retried_once(pytester: pytest.Pytester, gym_example: GymExample) -> None:
    pytester.makeconftest(FIRST_START_TIMES_OUT)
    dataset = copy_example(pytester.path, gym_example)
    result = pytester.runpytest_subprocess(
        f"--gym-checkout={gym_example.checkout}", f"--gym-replay={gym_example.recordings}", dataset,
        "--gym-run-dir=runs", "-p", "no:cacheprovider",
    )  # fmt: skip
    result.stdout.fnmatch_lines(
        [
            "gym: Ray's node timed out during start-up (*gym-env-start.log), a known transient failure on a loaded "
            "machine; retrying `gym env start` once",
            "gym: starting Gym's servers (log: *gym-env-start-2.log)",
        ]
    )
    run_dir = only_run_dir(pytester.path / "runs")
    assert RAY_START_TIMEOUT in (run_dir / "logs" / "gym-env-start.log").read_text()
    kept = run_dir / "logs" / "ray-start-1"  # Ray's logs of the failed start, which show the injected fault
    assert "Delaying method NodeInfoGcsService.grpc_server.RegisterNode" in (kept / "gcs_server.out").read_text()
    assert (kept / "raylet.out").stat().st_size > 0
    assert gym_commands(run_dir)[:2] == ["gym env start", "gym env start"]
    assert not left_of(run_dir)
    outcomes = result.parseoutcomes()
    if RAY_START_TIMEOUT in (run_dir / "logs" / "gym-env-start-2.log").read_text():
        # The untouched second start timed out too: this machine is loaded right now (it happens). Then every item
        # errors with the one clear message, and there was no third start.
        assert outcomes.get("errors") == 5, result.stdout.str()[-3000:]
        result.stdout.fnmatch_lines(["*Gym would not start: Ray's node timed out during start-up twice*"])
        assert len(started_processes(run_dir)) == 2
    else:
        assert outcomes.get("passed", 0) + outcomes.get("failed", 0) == 5, result.stdout.str()[-3000:]
        result.stdout.fnmatch_lines(["gym: Gym's servers are ready after * s"])
        rows = (run_dir / "gym-output" / "rollouts.jsonl").read_text().splitlines()
        assert len(rows) == 5
