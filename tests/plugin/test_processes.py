"""SIGTERM handled as Ctrl-C while Gym runs (:class:`pytest_gym_eval.processes.SigtermAsCtrlC`), and Gym's
commands stopped by SIGINT also when pytest ignores it (:class:`pytest_gym_eval.processes.GymProcess`).

These tests change this process's SIGTERM (or SIGINT) handler and put the previous one back.
``signal.raise_signal`` runs the Python handler before it returns, so no waiting is needed.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_gym_eval.processes import CtrlCKillsGym, GymProcess, SigtermAsCtrlC


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
