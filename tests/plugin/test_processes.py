"""SIGTERM handled as Ctrl-C while Gym runs (:class:`pytest_gym_eval.gym.processes.SigtermAsCtrlC`), and Gym's
commands stopped by SIGINT also when pytest ignores it (:class:`pytest_gym_eval.gym.processes.GymProcess`).

These tests change this process's SIGTERM (or SIGINT) handler and put the previous one back.
``signal.raise_signal`` runs the Python handler before it returns, so no waiting is needed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_gym_eval.gym import processes
from pytest_gym_eval.gym.processes import (
    MARKER,
    CtrlCKillsGym,
    GymProcess,
    SigtermAsCtrlC,
    proc_stat,
    sessions_of_run,
    stop_sessions,
)


@pytest.fixture(autouse=True)
def default_sigterm() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signal handlers can only be set in the main thread")
    previous = signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_sigterm_raises_keyboard_interrupt_until_teardown_then_default_again() -> None:
    sigterm = SigtermAsCtrlC()
    sigterm.install()
    assert sigterm.installed
    with pytest.raises(KeyboardInterrupt, match="SIGTERM"):
        signal.raise_signal(signal.SIGTERM)
    with pytest.raises(KeyboardInterrupt):  # a second one too, while the session is still being unwound
        signal.raise_signal(signal.SIGTERM)
    sigterm.teardown()
    signal.raise_signal(signal.SIGTERM)  # ignored: Gym is being stopped and nothing may cut that short
    sigterm.restore()
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL and not sigterm.installed


def test_a_handler_already_in_place_is_left_alone() -> None:
    received: list[int] = []

    def users_handler(signum: int, frame: object) -> None:
        received.append(signum)

    signal.signal(signal.SIGTERM, users_handler)
    sigterm = SigtermAsCtrlC()
    sigterm.install()
    assert not sigterm.installed
    signal.raise_signal(signal.SIGTERM)
    assert received == [signal.SIGTERM]
    sigterm.restore()
    assert signal.getsignal(signal.SIGTERM) is users_handler


def test_restore_leaves_a_handler_set_after_install() -> None:
    sigterm = SigtermAsCtrlC()
    sigterm.install()
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the code under test took SIGTERM over
    sigterm.restore()
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN


def test_outside_the_main_thread_nothing_changes() -> None:
    sigterm = SigtermAsCtrlC()
    thread = threading.Thread(target=sigterm.install)
    thread.start()
    thread.join()
    assert not sigterm.installed and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


@pytest.mark.parametrize("pytest_sigint", ["ignored", "handled"])
def test_a_command_ends_by_the_sigint_of_stop_even_when_pytest_ignores_sigint(
    tmp_path: Path, pytest_sigint: str
) -> None:
    """pytest started as a shell's background job ignores SIGINT, and an ignored signal stays ignored across
    exec: Gym's commands must still get SIGINT at its default, or every stop waits out the grace period and
    SIGKILLs Gym. The command is started from a worker thread, as the plugin starts `gym eval run`."""
    disposition = signal.SIG_IGN if pytest_sigint == "ignored" else signal.default_int_handler
    previous = signal.signal(signal.SIGINT, disposition)
    started: list[GymProcess] = []
    try:
        worker = threading.Thread(
            target=lambda: started.append(
                GymProcess(["sleep", "600"], env={}, cwd=tmp_path, log_path=tmp_path / "sleep.log", name="sleep")
            )
        )
        worker.start()
        worker.join()
        (command,) = started
        command.stop(grace=20)
        assert command.poll() == -signal.SIGINT  # SIGINT ended it, not the SIGKILL after the grace period
        assert signal.getsignal(signal.SIGINT) is disposition  # pytest's own disposition is left as it was
    finally:
        for command in started:
            command.stop(grace=0)
        signal.signal(signal.SIGINT, previous)


def test_ctrl_c_while_stopping_calls_kill_now_instead_of_raising() -> None:
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    killed: list[bool] = []
    try:
        ctrl_c = CtrlCKillsGym(lambda: killed.append(True))
        ctrl_c.install()
        assert ctrl_c.installed
        signal.raise_signal(signal.SIGINT)  # no KeyboardInterrupt: the handler kills Gym instead
        assert killed == [True]
        ctrl_c.restore()
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        with pytest.raises(KeyboardInterrupt):
            signal.raise_signal(signal.SIGINT)
    finally:
        signal.signal(signal.SIGINT, previous)


def test_ctrl_c_kills_gym_leaves_another_sigint_handler_alone() -> None:
    for other in (signal.SIG_IGN, lambda *_: None):
        previous = signal.signal(signal.SIGINT, other)
        try:
            ctrl_c = CtrlCKillsGym(lambda: None)
            ctrl_c.install()
            assert not ctrl_c.installed and signal.getsignal(signal.SIGINT) is other
            ctrl_c.restore()
            assert signal.getsignal(signal.SIGINT) is other
        finally:
            signal.signal(signal.SIGINT, previous)


# Session ids that may have been given to someone else.


def sleeper(marker: str | None) -> subprocess.Popen[bytes]:
    """``sleep 600`` in a session of its own, carrying ``MARKER=marker`` (or no marker)."""
    env = {key: value for key, value in os.environ.items() if key != MARKER}
    if marker is not None:
        env[MARKER] = marker
    return subprocess.Popen(["sleep", "600"], env=env, start_new_session=True)


def test_stop_sessions_stops_only_sessions_that_still_hold_the_runs_marker() -> None:
    """A session id recorded long ago (``processes.jsonl``, a watchdog's list, a warm Gym's entry) may now name a
    stranger's session: Linux reuses PIDs, and with them session ids. Only the run's own are stopped."""
    ours, stranger, other_run = sleeper("1:2:/run"), sleeper(None), sleeper("1:2:/another-run")
    try:
        assert sessions_of_run([ours.pid, stranger.pid, other_run.pid], "1:2:/run") == {ours.pid}
        assert stop_sessions([ours.pid, stranger.pid, other_run.pid], "1:2:/run", grace=0) == []
        assert ours.wait(10) == -signal.SIGINT
        assert stranger.poll() is None and other_run.poll() is None
    finally:
        for process in (ours, stranger, other_run):
            process.kill()
            process.wait()


def test_a_command_stays_unreaped_until_stop_has_emptied_its_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While the command is unreaped its PID, and so its session id, cannot be given to another process; once
    stop() has reaped it, stop(), kill() and interrupt() signal nothing any more."""
    command = GymProcess(
        ["sh", "-c", "exit 3"], env={}, cwd=tmp_path, log_path=tmp_path / "exit.log", name="exit"
    )  # fmt: skip
    assert command.wait(60) == 3
    assert command.poll() == 3
    stat = proc_stat(command.pid)
    assert stat is not None and stat.state == "Z"  # exited, not reaped: the PID is still held
    command.stop(grace=0)
    assert proc_stat(command.pid) is None  # reaped
    assert command.poll() == 3

    def no_signals(*args: object) -> list[int]:
        raise AssertionError("a reaped command's session id was signalled")

    monkeypatch.setattr(processes, "session_members", no_signals)
    monkeypatch.setattr(processes, "_signal_group", no_signals)
    command.stop(grace=0)
    command.kill()
    command.interrupt()


def test_wait_gives_the_exit_status_of_a_signal_and_none_while_running(tmp_path: Path) -> None:
    command = GymProcess(["sleep", "600"], env={}, cwd=tmp_path, log_path=tmp_path / "sleep.log", name="sleep")
    try:
        assert command.wait(0.01) is None and command.poll() is None
        os.kill(command.pid, signal.SIGKILL)
        assert command.wait() == -signal.SIGKILL
        assert command.wait(0.01) == -signal.SIGKILL
    finally:
        command.stop(grace=0)
