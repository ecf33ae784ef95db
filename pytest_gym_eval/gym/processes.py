"""Starting and stopping the ``gym`` commands the plugin runs, each in a session of its own.

Gym is stopped the way the Gym notes measured works: SIGINT to its process group (Gym then stops its servers
and Ray itself, ~9 s), a grace period, then SIGKILL to every process still in the session we created (Ray's
idle workers sit in process groups of their own inside that session, so a group kill alone misses them).
Only processes in sessions this module started are ever signalled; :func:`stop_sessions` does the same for
sessions started by a pytest process that died (for the watchdog and ``python -m pytest_gym_eval cleanup``).

A session id names our session only while that session exists. Once its last process has been reaped, Linux may
give the number to a new process that starts a session of its own: ``pid_max`` is 32,768 on many machines, and a
long run or a test suite goes round it in minutes. So a :class:`GymProcess` leaves its command unreaped (a zombie
holds its PID, and with it the session id) until :meth:`GymProcess.stop` has emptied the session, and
:func:`stop_sessions`, given ids recorded earlier, signals only the sessions that still hold a process carrying
the run's :data:`MARKER`.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

MARKER = "PYTEST_GYM_EVAL_RUN"
"""Environment variable carried by every process a run starts: ``<owner pid>:<owner start>:<run dir>`` (the
owner is :class:`pytest_gym_eval.gym.orphans.Owner`)."""

DEFAULT_GRACE = 30.0
"""Seconds a SIGINT'd Gym gets to shut down before the rest of its session is killed."""


def grace_seconds(text: str) -> float:
    """``--grace`` of the command-line tools: seconds >= 0 (a finite number). Raises ValueError otherwise, which
    argparse reports as a usage error naming the option."""
    value = float(text)
    if not value >= 0 or value == float("inf"):
        raise ValueError(text)
    return value


grace_seconds.__name__ = "seconds >= 0"  # argparse's error names the type by its function's name


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on ``host`` that was free a moment ago (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


@dataclass(frozen=True)
class ProcStat:
    """What ``/proc/<pid>/stat`` says of a process: its state letter (``Z`` for a zombie), process group,
    session and start time (clock ticks since boot, which tells a process from a later one with its pid)."""

    state: str
    pgid: int
    sid: int
    start: int


def proc_stat(pid: int) -> ProcStat | None:
    """The :class:`ProcStat` of ``pid``, or None when there is no such process (Linux only)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return None
    # Fields after the command name, which sits in parentheses and may contain spaces: state is field 3 of
    # proc(5), so field N is at index N - 3 here.
    fields = stat[stat.rfind(b")") + 2 :].split()
    try:
        return ProcStat(fields[0].decode(), int(fields[2]), int(fields[3]), int(fields[19]))
    except (IndexError, ValueError):
        return None


def session_members(sid: int) -> list[int]:
    """PIDs of every live (not zombie) process whose session id is ``sid`` (read from ``/proc``; Linux only)."""
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        stat = proc_stat(int(entry))
        if stat is not None and stat.state != "Z" and stat.sid == sid:
            members.append(int(entry))
    return members


def is_running(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie has ended: it only waits for its parent to reap it)."""
    stat = proc_stat(pid)
    return stat is not None and stat.state != "Z"


KILL_BOUND = 10.0
"""Seconds spent at most SIGKILLing what is left of sessions (a process in uninterruptible sleep takes a while)."""


def marker_of(pid: int) -> str | None:
    """The :data:`MARKER` value in the environment of ``pid``; None when it has none, has ended or is another
    user's. (A few of Ray's processes overwrite the memory ``/proc/<pid>/environ`` shows with their process title:
    those read as having none.)"""
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            environ = handle.read()
    except OSError:
        return None
    prefix = MARKER.encode() + b"="
    for entry in environ.split(b"\0"):
        if entry.startswith(prefix):
            return entry[len(prefix) :].decode("utf-8", "replace")
    return None


def sessions_of_run(sids: Collection[int], marker: str) -> set[int]:
    """The sessions among ``sids`` that still belong to the run whose :data:`MARKER` value is ``marker``: those
    holding a live process that carries it (the rule by which :func:`pytest_gym_eval.gym.orphans.run_processes` finds
    a run's processes). A recorded session id that now names someone else's session is left out (see the module
    docstring)."""
    return {sid for sid in sids if any(marker_of(pid) == marker for pid in session_members(sid))}


def kill_sessions(sids: Collection[int]) -> list[int]:
    """SIGKILL every process of the sessions ``sids`` until none is left, for at most :data:`KILL_BOUND`
    seconds; returns the PIDs still there at the end (normally none). ``sids`` must be sessions just found to be
    the run's (:func:`sessions_of_run`, or the sessions of processes carrying its marker): a session keeps its id
    while it has members, so killing until it is empty is safe."""
    deadline = time.monotonic() + KILL_BOUND
    while True:
        members = [pid for sid in sids for pid in session_members(sid)]
        if not members or time.monotonic() > deadline:
            return members
        for pid in members:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.05)


def stop_sessions(sids: Collection[int], marker: str, grace: float = DEFAULT_GRACE) -> list[int]:
    """Stop process sessions this process did not start itself (a dead pytest's, a warm Gym's), as
    :meth:`GymProcess.stop` stops its own: SIGINT to the process group of each session leader still running (Gym
    then stops its servers and Ray), up to ``grace`` seconds for those leaders to end, then SIGKILL to everything
    left in the sessions. Only the sessions that still hold a process carrying the run's :data:`MARKER` value
    ``marker`` are touched (:func:`sessions_of_run`): ``sids`` may have been recorded long ago. Returns the PIDs
    that would not die (normally none)."""
    owned = sessions_of_run(sids, marker)
    leaders = [sid for sid in owned if sid in session_members(sid)]
    for sid in leaders:
        _signal_group(sid, signal.SIGINT)
    deadline = time.monotonic() + grace
    while any(is_running(sid) for sid in leaders) and time.monotonic() < deadline:
        time.sleep(0.1)
    return kill_sessions(owned)


class GymProcess:
    """One command run in a new session, stdout and stderr appended to ``log_path``.

    ``stop()`` ends the command and everything it started (see the module docstring); it is idempotent and
    safe to call from any thread, also when the command already exited by itself. The command is reaped only
    once ``stop()`` has emptied its session: until then its PID, and so the session id that ``stop()`` and
    ``kill()`` signal, cannot be given to another process.
    """

    def __init__(self, argv: Sequence[str], *, env: Mapping[str, str], cwd: Path, log_path: Path, name: str) -> None:
        self.argv = list(argv)
        self.name = name
        self.log_path = log_path
        self._lock = threading.Lock()
        self._interrupted = False
        self._reaped = False
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with log_path.open("ab") as log:
            self._popen = subprocess.Popen(
                self.argv,
                cwd=cwd,
                env=dict(env),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_default_sigint if signal.getsignal(signal.SIGINT) is signal.SIG_IGN else None,
            )
        self.pid = self._popen.pid

    def poll(self) -> int | None:
        """The exit status (negative for a signal) once the command has exited, else None. Does not reap it."""
        if self._popen.returncode is not None:
            return self._popen.returncode
        try:
            info = os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:  # reaped already (stop() did, in another thread)
            return self._popen.poll()
        if info is None:
            return None
        return -info.si_status if info.si_code in (os.CLD_KILLED, os.CLD_DUMPED) else info.si_status

    def wait(self, timeout: float | None = None) -> int | None:
        """Wait up to ``timeout`` seconds (None: forever); the exit status, or None if still running. Does not
        reap the command."""
        if timeout is None:
            with contextlib.suppress(ChildProcessError):
                os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOWAIT)
            return self.poll()
        if (status := self.poll()) is not None:
            return status
        try:
            exited = os.pidfd_open(self.pid)
        except (AttributeError, OSError):  # no pidfd (Linux < 5.3): look every 50 ms
            deadline = time.monotonic() + timeout
            while self.poll() is None and time.monotonic() < deadline:
                time.sleep(min(0.05, max(deadline - time.monotonic(), 0)))
            return self.poll()
        try:
            select.select([exited], [], [], timeout)  # readable once the command has exited
        finally:
            os.close(exited)
        return self.poll()

    def interrupt(self) -> None:
        """SIGINT the process group, once (:meth:`stop` then sends no second one, which would cut the command's own
        shutdown short): to stop several commands at once, interrupt each, then :meth:`stop` each."""
        with self._lock:
            if not self._interrupted and self.poll() is None:
                self._interrupted = True
                _signal_group(self.pid, signal.SIGINT)

    def stop(self, grace: float = DEFAULT_GRACE) -> None:
        """SIGINT the process group (unless :meth:`interrupt` did), wait up to ``grace`` seconds, then SIGKILL
        whatever is left in the session; once the session is empty, reap the command."""
        with self._lock:
            if self._reaped:
                return
            if self.poll() is None:
                if not self._interrupted:
                    self._interrupted = True
                    _signal_group(self.pid, signal.SIGINT)
                self.wait(grace)
            deadline = time.monotonic() + KILL_BOUND
            while members := session_members(self.pid):
                for pid in members:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                if self.poll() is None:
                    self.wait(0.5)
                if time.monotonic() > deadline:
                    return  # still there (uninterruptible sleep): keep the PID, so a later stop() may try again
                time.sleep(0.05)
            if self.poll() is not None:
                self._popen.wait()
                self._reaped = True  # from here on, the PID and the session id may be someone else's

    def kill(self) -> None:
        """SIGKILL every process of the command's session now, without a grace period (Ctrl-C while the plugin
        stops Gym, see :class:`CtrlCKillsGym`). Takes no lock, so a signal handler may call it while
        :meth:`stop` waits in the same thread; :meth:`stop` then finds the session gone."""
        if self._reaped:
            return
        for pid in session_members(self.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def tail(self, lines: int = 20) -> str:
        """The last ``lines`` lines of the log (for error messages)."""
        return tail(self.log_path, lines)


def _default_sigint() -> None:
    """In a command's child process before it runs the command: SIGINT back to its default action.

    Used only when this process ignores SIGINT (pytest started as a shell's background job, ``cmd &``, or by a
    runner that ignores it): an ignored signal stays ignored across ``exec``, so Gym would ignore the SIGINT that
    :meth:`GymProcess.stop` sends and every stop would wait the whole grace period before SIGKILL, skipping
    Gym's own shutdown. (A handler, unlike SIG_IGN, is reset to the default by ``exec``, so otherwise nothing is
    needed.) It only sets one signal's disposition, which is safe in the forked child even when other threads
    ran in the parent."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, sig)


def tail(path: Path, lines: int = 20, max_bytes: int = 64 * 1024) -> str:
    """The last ``lines`` lines of the text file ``path`` (reads at most ``max_bytes`` from its end)."""
    try:
        with path.open("rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - max_bytes))
            data = handle.read()
    except OSError:
        return ""
    text = data.decode("utf-8", "replace").replace("\r", "\n")
    return "\n".join([line for line in text.splitlines() if line.strip()][-lines:])


class SigtermAsCtrlC:
    """Handle SIGTERM as Ctrl-C while Gym runs, so that ``timeout``, a CI runner cancelling a job or ``docker
    stop`` ends the pytest session with Gym's teardown instead of leaving Gym's servers (in sessions of their
    own) running: Python dies on SIGTERM without running any finalizer.

    After :meth:`install`, SIGTERM raises KeyboardInterrupt in the main thread, so pytest ends the session as
    after Ctrl-C (exit status 2) and the plugin writes its reports, then stops Gym. After :meth:`teardown` (the
    session is ending) SIGTERM no longer interrupts anything, so a second one cannot cut the reports short: it
    calls the ``kill_now`` given to :meth:`teardown` (Gym's processes are killed at once, as a runner that sends
    SIGTERM twice wants), or is ignored without one; SIGKILL still ends everything (the watchdog then stops
    Gym). :meth:`restore` puts the default back.

    Signal handlers are global, so :meth:`install` changes nothing outside the main thread or when SIGTERM
    already has a handler other than the default (the user's, or the code under test's).
    """

    MESSAGE = "gym: SIGTERM while stopping Gym: killing its processes now (SIGKILL, no grace period)\n"

    def __init__(self) -> None:
        self.installed = False
        self._interrupting = True
        self._kill_now: Callable[[], None] | None = None
        self._handler = self._on_sigterm  # one bound method, so getsignal() can be compared by identity

    def install(self) -> None:
        """Take over SIGTERM when that is safe (main thread, default handler); otherwise do nothing."""
        if threading.current_thread() is not threading.main_thread():
            return
        if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
            return
        signal.signal(signal.SIGTERM, self._handler)
        self.installed = True

    def teardown(self, kill_now: Callable[[], None] | None = None) -> None:
        """From now on SIGTERM no longer interrupts (the teardown it would ask for is under way): it calls
        ``kill_now`` (e.g. :meth:`GymProcess.kill` of each of the run's commands), or is ignored without one."""
        self._interrupting = False
        self._kill_now = kill_now

    def restore(self) -> None:
        """Put SIGTERM's default handler back, if this one is still in place."""
        if not self.installed or threading.current_thread() is not threading.main_thread():
            return
        if signal.getsignal(signal.SIGTERM) is self._handler:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
        self.installed = False

    def _on_sigterm(self, signum: int, frame: object) -> None:
        if self._interrupting:
            raise KeyboardInterrupt("SIGTERM")
        if self._kill_now is not None:
            with contextlib.suppress(OSError):
                os.write(2, self.MESSAGE.encode())
            self._kill_now()


class CtrlCKillsGym:
    """Ctrl-C while the plugin stops Gym kills Gym's processes at once instead of raising KeyboardInterrupt.

    Stopping Gym can take its grace period and more; a user who presses Ctrl-C again meanwhile wants it over
    now, and a KeyboardInterrupt in the middle of pytest's sessionfinish would end pytest with a traceback,
    no reward summary, no reports and no resume command (the plugin installs this from the start of
    sessionfinish, while it writes the reports, until Gym is stopped). While installed (:meth:`install` to
    :meth:`restore`), SIGINT writes one line to stderr and calls ``kill_now`` (e.g. :meth:`GymProcess.kill` of
    each of the run's commands); the stop then goes on without waiting, and the session ends as after one
    Ctrl-C. Changes nothing outside the main thread, or when SIGINT has a handler other than Python's own (the
    user's, or ignored).
    """

    MESSAGE = "gym: Ctrl-C while stopping Gym: killing its processes now (SIGKILL, no grace period)\n"

    def __init__(self, kill_now: Callable[[], None]) -> None:
        self._kill_now = kill_now
        self._handler = self._on_sigint  # one bound method, so getsignal() can be compared by identity
        self.installed = False

    def install(self) -> None:
        """Take over SIGINT when that is safe (main thread, Python's default handler); otherwise do nothing."""
        if threading.current_thread() is not threading.main_thread():
            return
        if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
            return
        signal.signal(signal.SIGINT, self._handler)
        self.installed = True

    def restore(self) -> None:
        """Put Python's handler back, if this one is still in place."""
        if not self.installed or threading.current_thread() is not threading.main_thread():
            return
        if signal.getsignal(signal.SIGINT) is self._handler:
            signal.signal(signal.SIGINT, signal.default_int_handler)
        self.installed = False

    def _on_sigint(self, signum: int, frame: object) -> None:
        with contextlib.suppress(OSError):
            os.write(2, self.MESSAGE.encode())
        self._kill_now()
