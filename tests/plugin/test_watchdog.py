"""No orphans, even when pytest is SIGKILLed: the watchdog (:mod:`pytest_gym_eval.gym.watchdog`) and the report and
clean-up of what a dead session left (:mod:`pytest_gym_eval.gym.orphans`), against the stand-in ``gym``
(tests/support/fake_gym.py, whose ``FAKE_GYM_WORKER=1`` child ignores SIGINT in a process group of its own, as
Ray's idle workers do). The same with real Gym and Ray: tests/real_gym/test_gym_lifecycle.py.

Every wait polls ``/proc`` against a deadline; nothing sleeps to synchronise.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from pytest_gym_eval.gym.feed import RunState
from pytest_gym_eval.gym.orphans import MARKER, Leftovers, Owner, find_leftovers, run_processes
from pytest_gym_eval.gym.processes import GymProcess, is_running, session_members
from pytest_gym_eval.gym.watchdog import Watchdog, stop_run
from tests.support.children import child_pytest_argv, stop_dead_runs, stranger_and_dead_owner, wait_until
from tests.support.fakes import FakeGym, make_fake_checkout


def fake_env_start(checkout: Path, run_dir: Path, owner: Owner) -> GymProcess:
    """The stand-in's ``gym env start`` (with its SIGINT-proof worker), marked as ``owner``'s."""
    env = {**os.environ, MARKER: owner.marker, "FAKE_GYM_WORKER": "1"}
    return GymProcess(
        [str(checkout / ".venv" / "bin" / "gym"), "env", "start"], env=env, cwd=run_dir,
        log_path=run_dir / "logs" / "gym-env-start.log", name="gym env start",
    )  # fmt: skip


def watchdog_pid(run_dir: Path) -> int:
    """The watchdog's PID, from the first line of its log."""
    log = run_dir / "logs" / "watchdog.log"
    wait_until(lambda: log.exists() and "watchdog pid" in log.read_text(), f"the watchdog's first line in {log}")
    found = re.search(r"watchdog pid (\d+)", log.read_text())
    assert found is not None
    return int(found.group(1))


# The owner's identity.


def test_an_owner_is_alive_only_while_its_pid_runs_the_same_process(tmp_path: Path) -> None:
    owner = Owner.current(tmp_path)
    assert owner.alive()
    assert Owner.parse(owner.marker) == owner
    assert not replace(owner, start=owner.start + 1).alive()  # the pid now runs a later process
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    assert not replace(owner, pid=ended.pid).alive()
    assert Owner.parse("not a marker") is None and Owner.parse("12:x:/tmp") is None


# The watchdog, owned by a small script that can be SIGKILLed.

OWNER_SCRIPT = """
import json, os, sys, time
from pathlib import Path
from pytest_gym_eval.gym.orphans import MARKER, Owner
from pytest_gym_eval.gym.processes import GymProcess
from pytest_gym_eval.gym.feed import RunState
from pytest_gym_eval.gym.run import record_process
from pytest_gym_eval.core.rundir import RunPaths
from pytest_gym_eval.gym.watchdog import Watchdog

run_dir, checkout = Path(sys.argv[1]), Path(sys.argv[2])
owner = Owner.current(run_dir)
RunState("running").write(run_dir / "state.json")
watchdog = Watchdog.start(owner, run_dir / "logs" / "watchdog.log", grace=5)
gym = GymProcess(
    [str(checkout / ".venv" / "bin" / "gym"), "env", "start"],
    env={**os.environ, MARKER: owner.marker, "FAKE_GYM_WORKER": "1"}, cwd=run_dir,
    log_path=run_dir / "logs" / "gym-env-start.log", name="gym env start",
)
record_process(RunPaths(run_dir), gym, watchdog)
print(json.dumps({"gym": gym.pid, "watchdog": watchdog.pid}), flush=True)
time.sleep(3600)
"""


@dataclass
class OwnedGym:
    """A stand-in Gym started by an owner process (``owner``) that a test can SIGKILL."""

    owner: subprocess.Popen[str]
    gym: int
    watchdog: int
    run_dir: Path


@pytest.fixture
def owned_gym(tmp_path: Path) -> Iterator[OwnedGym]:
    run_dir = tmp_path / "run"
    (run_dir / "logs").mkdir(parents=True)
    script = tmp_path / "owner.py"
    script.write_text(OWNER_SCRIPT)
    checkout = make_fake_checkout(tmp_path)
    owner = subprocess.Popen(
        [sys.executable, str(script), str(run_dir), str(checkout)], stdout=subprocess.PIPE, text=True
    )
    assert owner.stdout is not None
    started = json.loads(owner.stdout.readline())
    try:
        # The worker is up once Gym's session holds more than Gym itself.
        wait_until(lambda: len(session_members(started["gym"])) >= 2, "the stand-in Gym started its worker")
        yield OwnedGym(owner, started["gym"], started["watchdog"], run_dir)
    finally:
        owner.kill()
        owner.wait()
        stop_dead_runs(run_dir)


def test_sigkill_of_the_owner_stops_gyms_whole_session_and_marks_the_run_failed(owned_gym: OwnedGym) -> None:
    owned_gym.owner.kill()
    owned_gym.owner.wait()
    wait_until(lambda: not session_members(owned_gym.gym), "Gym's session (the SIGINT-proof worker too) is empty")
    wait_until(lambda: not is_running(owned_gym.watchdog), "the watchdog exited")
    state = RunState.read(owned_gym.run_dir / "state.json")
    assert state is not None and state.phase == "failed"
    assert state.message.startswith(f"the pytest process died (pid {owned_gym.owner.pid}) before the run ended")
    log = (owned_gym.run_dir / "logs" / "watchdog.log").read_text()
    assert f"pytest pid {owned_gym.owner.pid} is gone" in log and "stopped 1 process session (" in log


def test_a_dead_watchdog_leaves_gym_to_the_next_session(owned_gym: OwnedGym) -> None:
    os.kill(owned_gym.watchdog, signal.SIGKILL)
    owned_gym.owner.kill()
    owned_gym.owner.wait()
    wait_until(lambda: not is_running(owned_gym.watchdog), "the watchdog died")
    (leftovers,) = find_leftovers(owned_gym.run_dir)
    assert leftovers.owner.pid == owned_gym.owner.pid
    assert leftovers.sessions == [owned_gym.gym]
    assert {p.pid for p in leftovers.processes} == set(session_members(owned_gym.gym))
    assert leftovers.watchdog is None and "is stopping them" not in leftovers.describe()


def test_leftovers_whose_watchdog_still_runs_say_so(owned_gym: OwnedGym) -> None:
    # The run as a later session would see it in the instant after its owner died, the watchdog still at work.
    processes = run_processes()
    (owner,) = [owner for owner in processes if owner.run_dir == owned_gym.run_dir]
    leftovers = Leftovers(owner, tuple(processes[owner]))
    assert leftovers.watchdog == owned_gym.watchdog
    assert f"(its watchdog, pid {owned_gym.watchdog}, is stopping them)" in leftovers.describe()


# The watchdog in this process.


@pytest.fixture
def watched(tmp_path: Path) -> Iterator[tuple[Watchdog, GymProcess]]:
    owner = Owner.current(tmp_path)
    watchdog = Watchdog.start(owner, tmp_path / "logs" / "watchdog.log", grace=5)
    gym = fake_env_start(make_fake_checkout(tmp_path), tmp_path, owner)
    watchdog.watch(gym.pid)
    try:
        yield watchdog, gym
    finally:
        gym.stop(grace=5)
        watchdog.release()


def test_released_the_watchdog_exits_and_leaves_gym_to_its_owner(watched: tuple[Watchdog, GymProcess]) -> None:
    watchdog, gym = watched
    watchdog.release()
    assert watchdog.process.wait(30) == 0
    assert gym.poll() is None and session_members(gym.pid)


def test_release_returns_once_the_watchdog_has_written_its_last_line(tmp_path: Path) -> None:
    # Released before it has even started Python: after release() the run directory is no longer written to.
    log = tmp_path / "logs" / "watchdog.log"
    watchdog = Watchdog.start(Owner.current(tmp_path), log, grace=5)
    watchdog.release()
    assert watchdog.process.poll() == 0
    assert "released: pytest stopped Gym itself" in log.read_text()


def pipe_fds(pid: int, inode: int) -> list[int]:
    """The open flags of each file descriptor of ``pid`` on the pipe ``inode``."""
    flags = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") == f"pipe:[{inode}]":
                info = Path(f"/proc/{pid}/fdinfo/{fd}").read_text()
                flags.append(int(re.search(r"flags:\s*(\d+)", info).group(1), 8))  # type: ignore[union-attr]
        except OSError:
            continue
    return flags


def test_only_the_owner_holds_the_pipes_write_end(watched: tuple[Watchdog, GymProcess]) -> None:
    watchdog, gym = watched
    assert watchdog._pipe is not None
    inode = os.fstat(watchdog._pipe).st_ino
    wait_until(lambda: len(session_members(gym.pid)) >= 2, "the stand-in Gym started its worker")
    for pid in session_members(gym.pid):
        assert pipe_fds(pid, inode) == [], f"Gym's process {pid} holds the watchdog's pipe"
    (read_only,) = pipe_fds(watchdog.pid, inode)
    assert read_only & os.O_ACCMODE == os.O_RDONLY


# Through the plugin: a pytest session SIGKILLed mid-run.


def dataset(path: Path) -> str:
    def row(task_id: str, **fake: object) -> dict[str, object]:
        request = {"input": [{"role": "user", "content": task_id}]}
        return {"id": task_id, "responses_create_params": request, "fake": fake}

    rows = [row("quick"), row("held", hold=True)]
    (path / "mcqa.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    return "mcqa.jsonl"


@dataclass
class KilledSession:
    """A child pytest session on the stand-in Gym, SIGKILLed while one rollout was still held."""

    pid: int
    run_dir: Path
    gym_sessions: list[int]
    watchdog: int


def kill_mid_run(pytester: pytest.Pytester, fake_gym: FakeGym, also_the_watchdog: bool) -> KilledSession:
    """Run pytest on the stand-in in a child process, wait until the first item passed (the second is held by
    the stand-in ``gym eval run``), then SIGKILL it (after its watchdog, when ``also_the_watchdog``)."""
    args = [*fake_gym.args, "-v", "--gym-run-dir=runs", dataset(pytester.path)]
    process = subprocess.Popen(
        child_pytest_argv(*args), cwd=pytester.path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1", "FAKE_GYM_WORKER": "1"},
    )  # fmt: skip
    assert process.stdout is not None
    seen = []
    for line in process.stdout:
        seen.append(line)
        if " PASSED" in line:
            break
    else:
        pytest.fail("".join(seen))
    (run_dir,) = (pytester.path / "runs").iterdir()
    watchdog = watchdog_pid(run_dir)
    if also_the_watchdog:
        os.kill(watchdog, signal.SIGKILL)
        wait_until(lambda: not is_running(watchdog), "the watchdog died")
    process.kill()
    process.communicate()
    sessions = sorted({int(call["sid"]) for call in fake_gym.calls()})  # type: ignore[call-overload]
    return KilledSession(process.pid, run_dir, sessions, watchdog)


def test_sigkill_of_pytest_leaves_nothing_running(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    killed = kill_mid_run(pytester, fake_gym, also_the_watchdog=False)
    assert len(killed.gym_sessions) == 2  # gym env start and gym eval run
    wait_until(lambda: not any(session_members(sid) for sid in killed.gym_sessions), "Gym's sessions are empty")
    wait_until(lambda: not is_running(killed.watchdog), "the watchdog exited")
    state = RunState.read(killed.run_dir / "state.json")
    assert state is not None and state.phase == "failed"
    assert f"the pytest process died (pid {killed.pid})" in state.message
    assert find_leftovers(killed.run_dir) == []


@pytest.fixture
def dead_session(pytester: pytest.Pytester, fake_gym: FakeGym) -> Iterator[KilledSession]:
    """A session SIGKILLed together with its watchdog: its stand-in Gym stays behind (stopped at teardown)."""
    killed = kill_mid_run(pytester, fake_gym, also_the_watchdog=True)
    try:
        yield killed
    finally:
        stop_dead_runs(killed.run_dir)


def test_the_next_session_names_what_a_dead_one_left_and_touches_nothing(
    pytester: pytest.Pytester, fake_gym: FakeGym, dead_session: KilledSession
) -> None:
    (leftovers,) = find_leftovers(dead_session.run_dir)
    assert leftovers.owner.pid == dead_session.pid
    assert leftovers.sessions == dead_session.gym_sessions
    before = {p.pid for p in leftovers.processes}
    assert len(before) >= 3  # gym env start, its worker, gym eval run

    (pytester.path / "later").mkdir()
    (pytester.path / "later" / "mcqa.jsonl").write_text(
        json.dumps({"id": "x", "responses_create_params": {"input": [{"role": "user", "content": "x"}]}}) + "\n"
    )
    result = pytester.runpytest(*fake_gym.args, "later/mcqa.jsonl")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            f"gym: warning: {len(before)} processes (*) of an earlier pytest session (pid {dead_session.pid}, which "
            f"died) are still running; run directory {dead_session.run_dir}; stop them with "
            "`python -m pytest_gym_eval cleanup`"
        ]
    )
    assert {p.pid for p in find_leftovers(dead_session.run_dir)[0].processes} == before  # reported, not stopped


def cleanup(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest_gym_eval", "cleanup", *args], capture_output=True, text=True, timeout=120
    )


def test_cleanup_stops_a_dead_sessions_processes_and_nothing_else(dead_session: KilledSession) -> None:
    unrelated = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True,
        env={k: v for k, v in os.environ.items() if k != MARKER},
    )  # fmt: skip
    try:
        listed = cleanup("--dry-run", "--run-dir", str(dead_session.run_dir))
        assert listed.returncode == 0, listed.stderr
        assert f"pytest session pid {dead_session.pid} (gone), run directory {dead_session.run_dir}:" in listed.stdout
        for sid in dead_session.gym_sessions:
            assert f"session {sid:>7}" in listed.stdout
            assert session_members(sid)  # a dry run stops nothing

        done = cleanup("--run-dir", str(dead_session.run_dir), "--grace", "5")
        assert done.returncode == 0, done.stderr
        assert "stopped" in done.stdout
        assert not any(session_members(sid) for sid in dead_session.gym_sessions)
        state = RunState.read(dead_session.run_dir / "state.json")
        assert state is not None and state.phase == "failed"
        assert "`python -m pytest_gym_eval cleanup` stopped the" in state.message
        assert find_leftovers(dead_session.run_dir) == []
        assert unrelated.poll() is None and unrelated.pid not in {
            p.pid for processes in run_processes().values() for p in processes
        }
    finally:
        unrelated.kill()
        unrelated.wait()


def test_cleanup_with_nothing_left_says_so(tmp_path: Path) -> None:
    RunState("finished", "").write(tmp_path / "state.json")
    done = cleanup("--run-dir", str(tmp_path))
    assert done.returncode == 0 and f"nothing left running in {tmp_path} by a pytest session that died" in done.stdout


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["--run-dir", "/nonexistent"], "--run-dir /nonexistent: no such directory"),
        (["--run-dir", "."], "--run-dir .: not a run directory (no state.json, processes.jsonl or manifest)"),
        (["--grace", "-5"], "argument --grace: invalid seconds >= 0 value: '-5'"),
    ],
)
def test_cleanup_refuses_what_it_cannot_mean(tmp_path: Path, args: list[str], error: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pytest_gym_eval", "cleanup", *args], capture_output=True, text=True, timeout=120,
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 2 and done.stderr.splitlines()[-1].endswith(f"error: {error}"), done.stderr


# Recorded session ids that Linux has since given to someone else.


def test_the_watchdog_leaves_a_recorded_session_that_is_now_someone_elses(tmp_path: Path) -> None:
    stranger, owner = stranger_and_dead_owner(tmp_path)
    try:
        assert stop_run(owner, {stranger.pid}, grace=0) == "stopped 1 process session (0 processes)"
        assert stranger.poll() is None
    finally:
        stranger.kill()
        stranger.wait()
