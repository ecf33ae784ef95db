"""A watchdog process that stops a run's Gym processes when the pytest process owning the run dies, however it
dies (SIGKILL included, which no handler can catch).

Gym's processes live in sessions of their own (so a Ctrl-C at the terminal reaches pytest alone and Gym is
stopped in order), so nothing ends them when pytest dies abruptly; Linux's parent-death signal
(``PR_SET_PDEATHSIG``) reaches only a direct child, and not its children. The owner therefore starts
``python -m pytest_gym_eval.gym.watchdog`` in a session of its own, with the read end of a pipe as its standard
input; only the owner holds the write end (a pipe's ends are not inheritable, PEP 446, so no ``gym`` command the
owner starts gets it). The owner writes ``watch <sid>`` for each process session it starts and ``release``
when it has stopped Gym itself. When the pipe reaches end-of-file without ``release``, or the owner's PID no
longer runs the owner (checked every second, in case a forked child kept the write end open), the owner is
gone: the watchdog stops every session it was told of, recorded in ``processes.jsonl``, or holding a process
that carries the run's marker (:mod:`pytest_gym_eval.gym.orphans`), as long as it still holds one (a session that
ended long ago may have given its id to someone else's), the way
:meth:`~pytest_gym_eval.gym.processes.GymProcess.stop` does (SIGINT to Gym, a grace period, SIGKILL to the rest of
each session), marks ``state.json`` failed, and exits. Its log is ``logs/watchdog.log`` in the run directory.
"""

from __future__ import annotations

import argparse
import os
import select
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from pytest_gym_eval.core.files import iter_json_lines
from pytest_gym_eval.core.rundir import RunPaths
from pytest_gym_eval.gym.orphans import MARKER, WATCHDOG_MODULE, Owner, mark_failed, processes_of
from pytest_gym_eval.gym.processes import DEFAULT_GRACE, kill_sessions, stop_sessions

OWNER_CHECK_EVERY = 1.0
"""Seconds between two checks that the owner's PID still runs the owner."""

RELEASE_WAIT = 15.0
"""Seconds :meth:`Watchdog.release` waits for the watchdog to exit, so that nothing writes to the run directory
once the session has ended (a watchdog started moments earlier may still be starting Python)."""


class Watchdog:
    """The owner's side of a running watchdog (see the module docstring). Thread-safe."""

    def __init__(self, process: subprocess.Popen[bytes], pipe: int, owner: Owner) -> None:
        self.process = process
        self.owner = owner
        self._pipe: int | None = pipe
        self._lock = threading.Lock()

    @property
    def pid(self) -> int:
        """The watchdog's PID."""
        return self.process.pid

    @classmethod
    def start(
        cls, owner: Owner, log_path: Path, grace: float = DEFAULT_GRACE, env: Mapping[str, str] | None = None
    ) -> Watchdog:
        """Start a watchdog for ``owner`` (normally :meth:`Owner.current`), logging to ``log_path``.

        ``grace`` is the seconds Gym gets after SIGINT once the owner is gone; ``env`` the environment to run the
        watchdog with (default: this process's), to which the run's marker is added. Raises OSError when the
        watchdog cannot be started.
        """
        env = {**(os.environ if env is None else env), MARKER: owner.marker}
        package_root = str(Path(__file__).resolve().parent.parent)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH", "")) if p)
        argv = [
            sys.executable, "-m", WATCHDOG_MODULE,
            "--owner", owner.marker, "--grace", f"{grace:g}",
        ]  # fmt: skip
        read_end, write_end = os.pipe()  # both non-inheritable (PEP 446)
        try:
            log_path.parent.mkdir(parents=True, exist_ok=True)
            with log_path.open("ab") as log:
                process = subprocess.Popen(
                    argv, stdin=read_end, stdout=log, stderr=subprocess.STDOUT, env=env, cwd="/",
                    start_new_session=True, close_fds=True,
                )  # fmt: skip
        except BaseException:
            os.close(write_end)
            raise
        finally:
            os.close(read_end)
        return cls(process, write_end, owner)

    def watch(self, sid: int) -> None:
        """Tell the watchdog about a process session the owner started (stopped should the owner die)."""
        self._send(f"watch {sid}\n")

    def release(self, wait: float = RELEASE_WAIT) -> None:
        """The owner stopped Gym itself: let the watchdog exit without touching anything, and wait up to ``wait``
        seconds for it to have exited (its last log line written). Should it take longer, a daemon thread reaps
        it later. Idempotent."""
        self._send("release\n")
        with self._lock:
            if self._pipe is None:
                return
            os.close(self._pipe)
            self._pipe = None
        try:
            self.process.wait(wait)
        except subprocess.TimeoutExpired:
            threading.Thread(target=self.process.wait, name="gym-watchdog-reaper", daemon=True).start()

    def _send(self, line: str) -> None:
        with self._lock:
            if self._pipe is None:
                return
            try:
                os.write(self._pipe, line.encode())
            except OSError:  # the watchdog died (someone killed it): nothing to tell any more
                os.close(self._pipe)
                self._pipe = None


def recorded_sessions(run_dir: Path) -> set[int]:
    """The session ids in the run's ``processes.jsonl`` (what the owner recorded starting)."""
    sessions: set[int] = set()
    try:
        entries = [entry for _, entry in iter_json_lines(RunPaths(run_dir).processes, skip_invalid=True)]
    except OSError:
        return sessions
    for entry in entries:
        sid = entry.get("sid") if isinstance(entry, dict) else None
        if isinstance(sid, int) and sid > 1:
            sessions.add(sid)
    return sessions


def wait_for_owner_death(owner: Owner, stream: int, told: set[int]) -> bool:
    """Read ``watch``/``release`` lines from the file descriptor ``stream`` (adding watched sessions to
    ``told``) until the pipe ends or the owner is gone; True when the owner died, False when it released us."""
    pending = b""
    while True:
        ready, _, _ = select.select([stream], [], [], OWNER_CHECK_EVERY)
        if not ready:
            if not owner.alive():
                return True
            continue
        chunk = os.read(stream, 4096)
        if not chunk:
            return True
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            word, _, value = line.decode("ascii", "replace").strip().partition(" ")
            if word == "release":
                return False
            if word == "watch" and value.isdigit():
                told.add(int(value))


def stop_run(owner: Owner, told: set[int], grace: float) -> str:
    """Stop every session of the owner's run (told, recorded, or holding a marked process) that still holds a
    marked process (:func:`~pytest_gym_eval.gym.processes.stop_sessions`), then any marked process left; mark
    ``state.json`` failed. Returns what was done, for the log."""
    marked = processes_of(owner)
    sessions = told | recorded_sessions(owner.run_dir) | {process.sid for process in marked}
    sessions.discard(os.getsid(0))
    left = stop_sessions(sessions, owner.marker, grace)
    stray = processes_of(owner)  # anything that left its session (never this process's own session)
    if stray:
        left += kill_sessions({p.sid for p in stray})
    mark_failed(
        owner.run_dir,
        f"the pytest process died (pid {owner.pid}) before the run ended; its watchdog stopped Gym's processes "
        f"({len(marked)} of them)",
    )
    plural = "s" if len(sessions) != 1 else ""
    done = f"stopped {len(sessions)} process session{plural} ({len(marked)} processes)"
    return done + (f"; {len(left)} would not die: {left}" if left else "")


def main(argv: Sequence[str] | None = None) -> int:
    """The watchdog process: ``python -m pytest_gym_eval.gym.watchdog --owner MARKER [--grace S]``, the pipe on
    standard input. Exit status 0."""
    parser = argparse.ArgumentParser(prog="python -m pytest_gym_eval.gym.watchdog")
    parser.add_argument("--owner", required=True, help=f"the run's {MARKER} value: <pid>:<start>:<run dir>")
    parser.add_argument("--grace", type=float, default=DEFAULT_GRACE)
    args = parser.parse_args(argv)
    owner = Owner.parse(args.owner)
    if owner is None:
        parser.error(f"--owner: not a {MARKER} value: {args.owner!r}")
    stamp = time.strftime("%H:%M:%S")
    print(f"{stamp} watchdog pid {os.getpid()}: watching pytest pid {owner.pid} (run {owner.run_dir})", flush=True)
    told: set[int] = set()
    if not wait_for_owner_death(owner, sys.stdin.fileno(), told):
        print(f"{time.strftime('%H:%M:%S')} released: pytest stopped Gym itself", flush=True)
        return 0
    print(f"{time.strftime('%H:%M:%S')} pytest pid {owner.pid} is gone; stopping its Gym processes", flush=True)
    print(f"{time.strftime('%H:%M:%S')} {stop_run(owner, told, args.grace)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
