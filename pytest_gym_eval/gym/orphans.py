"""What a pytest session that died left running: finding it, reporting it, stopping it.

Every process a run starts carries :data:`MARKER`; :func:`run_processes` (its docstring has how a run's processes
are found, why that is safe, and how a warm Gym's processes are told apart) groups them by owner,
:func:`find_leftovers` lists a dead session's leftovers and :func:`stop_leftovers` stops them
(``python -m pytest_gym_eval cleanup``). Processes and threads: docs/how-it-works.md.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from pytest_gym_eval.core.rundir import RunPaths
from pytest_gym_eval.gym.feed import RunState
from pytest_gym_eval.gym.processes import DEFAULT_GRACE, marker_of, proc_stat, stop_sessions
from pytest_gym_eval.gym.processes import MARKER as MARKER

CLEANUP_COMMAND = "python -m pytest_gym_eval cleanup"
WATCHDOG_MODULE = "pytest_gym_eval.gym.watchdog"
"""The module the watchdog runs as (``python -m``), which names it in its command line."""


@dataclass(frozen=True)
class Owner:
    """The process that owns a run: ``pid``, its ``start`` time (clock ticks since boot, from
    ``/proc/<pid>/stat``) and the run directory."""

    pid: int
    start: int
    run_dir: Path

    @classmethod
    def current(cls, run_dir: Path) -> Owner:
        """This process as the owner of the run in ``run_dir``."""
        stat = proc_stat(os.getpid())
        return cls(os.getpid(), stat.start if stat else 0, Path(os.path.abspath(run_dir)))

    @classmethod
    def parse(cls, value: str) -> Owner | None:
        """The owner a :data:`MARKER` value names, or None when it is not one."""
        pid, _, rest = value.partition(":")
        start, _, run_dir = rest.partition(":")
        if not (pid.isdigit() and start.isdigit() and run_dir):
            return None
        return cls(int(pid), int(start), Path(run_dir))

    @property
    def marker(self) -> str:
        """The :data:`MARKER` value naming this owner."""
        return f"{self.pid}:{self.start}:{self.run_dir}"

    def alive(self) -> bool:
        """Whether the owner still runs: its PID is a live process that started when the owner did. (Without
        ``/proc``, whether the PID exists at all.)"""
        if self.start == 0:
            try:
                os.kill(self.pid, 0)
            except ProcessLookupError:
                return False
            except PermissionError:
                return True
            return True
        stat = proc_stat(self.pid)
        return stat is not None and stat.state != "Z" and stat.start == self.start


@dataclass(frozen=True)
class RunProcess:
    """A live process of some run: its PID, session id, short name (``/proc/<pid>/comm``) and command line."""

    pid: int
    sid: int
    name: str
    command: str


@dataclass(frozen=True)
class Leftovers:
    """The live processes of a run whose owner is gone."""

    owner: Owner
    processes: tuple[RunProcess, ...]

    @property
    def sessions(self) -> list[int]:
        """The process sessions the processes are in."""
        return sorted({process.sid for process in self.processes})

    def summary(self) -> str:
        """``"24 processes (12 python, gcs_server, raylet, ...)"``: how many, and their names by frequency."""
        counts = Counter(process.name for process in self.processes)
        names = ", ".join(name if count == 1 else f"{count} {name}" for name, count in counts.most_common())
        plural = "es" if len(self.processes) != 1 else ""
        return f"{len(self.processes)} process{plural} ({names})"

    @property
    def watchdog(self) -> int | None:
        """The PID of the run's watchdog when it still runs (it is then stopping the rest), else None."""
        for process in self.processes:
            if WATCHDOG_MODULE in process.command:
                return process.pid
        return None

    @property
    def warm(self) -> bool:
        """Whether these are a warm Gym's processes (``--gym-keep-alive``) whose keeper died (not a pytest's)."""
        # A warm Gym's home holds its spec: its processes are owned by its keeper, which runs on purpose after
        # every pytest session ended, so they are leftovers only once the keeper is gone.
        return RunPaths(self.owner.run_dir).warm_spec.is_file()

    def describe(self) -> str:
        """One sentence for the terminal: what is left, of which session, and how to stop it."""
        if self.warm:
            return (
                f"{self.summary()} of a warm Gym whose keeper (pid {self.owner.pid}) died are still running; its home "
                f"{self.owner.run_dir}; stop them with `python -m pytest_gym_eval stop` or `{CLEANUP_COMMAND}`"
            )
        left = f"{self.summary()} of an earlier pytest session (pid {self.owner.pid}, which died) are still running"
        if self.watchdog is not None:
            left += f" (its watchdog, pid {self.watchdog}, is stopping them)"
        return f"{left}; run directory {self.owner.run_dir}; stop them with `{CLEANUP_COMMAND}`"


@dataclass(frozen=True)
class _Seen:
    pid: int
    sid: int
    owner: Owner | None


def _marker_of(pid: int) -> Owner | None:
    value = marker_of(pid)
    return None if value is None else Owner.parse(value)


def _describe(pid: int) -> tuple[str, str]:
    try:
        with open(f"/proc/{pid}/comm", "rb") as handle:
            name = handle.read().decode("utf-8", "replace").strip()
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            command = handle.read().rstrip(b"\0").replace(b"\0", b" ").decode("utf-8", "replace")
    except OSError:
        return "?", ""
    return name, command


def run_processes() -> dict[Owner, list[RunProcess]]:
    """Every live process of every run of this user, by the run's owner.

    Reads ``/proc`` (Linux only): a few milliseconds for a few hundred processes. Leaves out this process's own
    session and other users' processes.

    Every process the plugin starts for a run gets the environment variable :data:`MARKER`,
    ``<pid>:<start>:<run dir>``, naming the process that owns the run (pytest, or the pytest-xdist controller) by
    its PID and its start time (so that a later process given the same PID is not taken for it) and the run
    directory. Children inherit it, so Gym's head, its servers' shells, uvicorn and tee and Ray's daemons carry it
    too; :class:`~pytest_gym_eval.gym.processes.GymProcess` starts each command in a session of its own.

    A few of Ray's processes overwrite the memory ``/proc/<pid>/environ`` shows (their process title), so a run's
    processes are found per session: every process of a session in which some process carries the run's marker
    belongs to the run. That is safe because a session only ever holds descendants of the process that created
    it, and Linux does not give a session's id to a new process while the session has members. Processes of other
    users, and the session of the process looking, are never considered. A run whose owner is gone while such
    processes live is a dead session's leftovers: :func:`find_leftovers` lists them, :func:`stop_leftovers` stops
    them (``python -m pytest_gym_eval cleanup``), and the watchdog (:mod:`pytest_gym_eval.gym.watchdog`) normally does
    that by itself the moment the owner dies.

    A warm Gym (``--gym-keep-alive``, :mod:`pytest_gym_eval.warm`) runs on after every session on purpose: its
    processes carry the marker of its *keeper*, a process that lives as long as the warm Gym, with the warm Gym's
    home as the run directory. While the keeper runs they are nobody's leftovers; once it is gone (killed) they are,
    and :class:`Leftovers` says whose (:attr:`Leftovers.warm`).
    """
    uid = os.getuid()
    own_session = os.getsid(0)
    seen: list[_Seen] = []
    if not os.path.isdir("/proc"):
        return {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        pid = int(entry)
        stat = proc_stat(pid)
        if stat is None or stat.state == "Z" or stat.sid == own_session or stat.sid == 0:
            continue
        try:
            if os.stat(f"/proc/{pid}").st_uid != uid:
                continue
        except OSError:
            continue
        seen.append(_Seen(pid, stat.sid, _marker_of(pid)))
    sessions: dict[int, Owner] = {}
    for process in seen:
        if process.owner is not None:
            sessions.setdefault(process.sid, process.owner)
    found: dict[Owner, list[RunProcess]] = {}
    for process in seen:
        owner = process.owner or sessions.get(process.sid)
        if owner is not None:
            found.setdefault(owner, []).append(RunProcess(process.pid, process.sid, *_describe(process.pid)))
    return found


def _same_dir(a: Path, b: Path) -> bool:
    return os.path.abspath(a) == os.path.abspath(b)


def find_leftovers(run_dir: Path | None = None) -> list[Leftovers]:
    """The leftovers of every run whose owner is gone (only the run in ``run_dir``, when given), oldest owner
    first."""
    found = []
    for owner, processes in run_processes().items():
        if owner.alive() or (run_dir is not None and not _same_dir(owner.run_dir, run_dir)):
            continue
        found.append(Leftovers(owner, tuple(sorted(processes, key=lambda p: p.pid))))
    return sorted(found, key=lambda leftovers: leftovers.owner.start)


def processes_of(owner: Owner) -> list[RunProcess]:
    """The live processes of the run ``owner`` owns."""
    return run_processes().get(owner, [])


def mark_failed(run_dir: Path, message: str) -> bool:
    """Publish ``failed`` with ``message`` in the run's ``state.json`` unless the run had ended (``finished``
    or ``failed``) or never published a state; returns whether it did."""
    path = RunPaths(run_dir).state
    try:
        state = RunState.read(path)
    except (OSError, ValueError, TypeError):
        return False
    if state is None or state.done:
        return False
    try:
        RunState("failed", message, state.log).write(path)
    except OSError:
        return False
    return True


def stop_leftovers(leftovers: Leftovers, grace: float = DEFAULT_GRACE) -> list[RunProcess]:
    """Stop a dead session's processes (:func:`~pytest_gym_eval.gym.processes.stop_sessions`: SIGINT to Gym,
    ``grace`` seconds, SIGKILL to the rest of each session) and mark its ``state.json`` failed when it still
    says the run is going. Returns the processes still there afterwards (normally none)."""
    stop_sessions(leftovers.sessions, leftovers.owner.marker, grace)
    still = processes_of(leftovers.owner)
    mark_failed(
        leftovers.owner.run_dir,
        f"the pytest process died (pid {leftovers.owner.pid}) before the run ended; "
        f"`{CLEANUP_COMMAND}` stopped the {leftovers.summary()} it left running",
    )
    return still
