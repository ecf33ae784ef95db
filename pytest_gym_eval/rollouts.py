"""Following the files ``gym eval run`` writes, so each item reports as soon as its rollout lands.

Gym appends one JSON line per finished rollout to ``OUT.jsonl`` (successes) and to ``OUT_failures.jsonl``
(rollouts the agent or verifier marked with ``_ng_failure_class``), in completion order. A
:class:`RolloutFeed` reads both files as they grow, keeps for each rollout only what outcomes and reports need
(its reward and where its full record is), and wakes the items waiting for it. The run's owner publishes
its progress in a small state file (see :class:`RunState`), which the feed reads too: that is how an item
learns that its rollout will never come. The same code serves a single process and pytest-xdist workers.

Waits are bounded for the whole run, not per item. ``gym eval run`` spends some 20 s (more on a loaded machine)
before it dispatches its first rollout, and marks that moment by writing its materialised inputs: until then the
start-up timeout bounds the wait, counted from the run entering ``running``. From then on the rollout timeout
counts from the last *progress* Gym made: the materialised inputs written, or any rollout or failure landing in
its files. When the allowed time passes without progress the run is *stalled*: every rollout still pending is
given up at that moment (each waiting item gets a :class:`Missing` at once, not one timeout after another), and a
failure record Gym already wrote is final (Gym's resume, which could turn it into a success, needs the eval run
to end first).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pytest_gym_eval.causes import GYM_EXITED, GYM_START, ROLLOUT_TIMEOUT, SESSION_STOPPED
from pytest_gym_eval.usage import NO_USAGE, Usage, record_usage

TASK_INDEX_KEY = "_ng_task_index"
ROLLOUT_INDEX_KEY = "_ng_rollout_index"
FAILURE_CLASS_KEY = "_ng_failure_class"
FAILURE_MESSAGE_KEYS = ("_ng_failure_message", "failure_reason", "error")
POLL_INTERVAL = 0.01
"""Seconds between two looks at Gym's output files (the added latency of an item report is half this on
average). A look at files that did not grow is one ``stat`` call each."""
STATE_EVERY = 5
"""The run's state file is read on every fifth look only: it changes a few times a run, and an item waits for it
only when its rollout will never come."""
READ_CHUNK = 1024 * 1024
"""Bytes read from a followed file at a time, so memory stays bounded whatever the backlog (a 1 GB file that is
already there when following starts is read 1 MiB at a time, not at once)."""


@dataclass(frozen=True, slots=True)
class RolloutRecord:
    """What the plugin keeps of one line Gym wrote.

    ``reward`` is the raw value of the line's ``reward`` key (None when absent, any JSON type otherwise);
    ``path``/``line`` locate the full record (1-based line); ``failure_class`` is set for a line of the
    failures file (then there is no reward). ``offset``, the line's byte offset when known, lets
    :meth:`read_full` go straight to it instead of reading every line before it.
    """

    stamp: int
    reward: object
    path: Path
    line: int
    failure_class: str | None = None
    failure_message: str | None = None
    offset: int | None = field(default=None, compare=False, repr=False)
    usage: Usage = field(default=NO_USAGE, compare=False, repr=False)

    def numeric_reward(self) -> float | None:
        """The reward as a float, or None when it is missing, not a number, or NaN/infinite."""
        value = self.reward
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return None
        number = float(value)
        return number if math.isfinite(number) else None

    def read_full(self) -> dict[str, Any]:
        """The whole record, read again from its file (for failure messages and plugin hooks)."""
        with self.path.open("rb") as handle:
            if self.offset is not None:
                handle.seek(self.offset)
                raw = handle.readline()
                value = json.loads(raw) if raw else {}
                return value if isinstance(value, dict) else {}
            for number, raw in enumerate(handle, 1):
                if number == self.line:
                    value = json.loads(raw)
                    return value if isinstance(value, dict) else {}
        return {}


@dataclass(frozen=True)
class RunState:
    """Progress of the run, as its owner publishes it in ``state.json``.

    ``phase`` is ``starting`` (servers coming up), ``running`` (``gym eval run`` under way), ``finished``
    (Gym wrote everything it will write) or ``failed`` (Gym could not start, or died); ``message`` explains a
    failure and ``log`` names the log to read.
    """

    phase: str
    message: str = ""
    log: str = ""
    failure_class: str = ""  # of a failed run, when it is not the default (gym_exited), e.g. run_dir_full

    @property
    def done(self) -> bool:
        """Whether no more rollouts will arrive."""
        return self.phase in ("finished", "failed")

    def write(self, path: Path) -> None:
        """Publish atomically (temp file and rename), so a reader never sees half a state.

        On a full disk (no room for the temp file) the state is written over the old one in place, in the space
        that file already holds, so a failed run is still reported rather than left "running" for ever. Raises
        OSError when neither works."""
        data = json.dumps(asdict(self)).encode("utf-8")
        temp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
        try:
            temp.write_bytes(data)
            os.replace(temp, path)
        except OSError as error:
            with contextlib.suppress(OSError):
                temp.unlink()
            try:
                with path.open("r+b") as handle:  # no truncation first: the file's blocks stay its own
                    handle.write(data)
                    handle.truncate()
            except OSError:
                raise error from None

    @classmethod
    def read(cls, path: Path) -> RunState | None:
        """The published state, or None before the owner wrote one."""
        try:
            data = json.loads(path.read_bytes())
        except FileNotFoundError:
            return None
        except ValueError:  # half a state written in place on a full disk (see write): read it again later
            return None
        return cls(**data)


@dataclass(frozen=True)
class Missing:
    """Why a rollout is not there: ``reason`` is a sentence for the error report, ``log`` the log to read and
    ``failure_class`` one of :data:`pytest_gym_eval.causes.CLASSES` (``gym_exited``, ``rollout_timeout``,
    ``session_stopped``, ...)."""

    reason: str
    log: str = ""
    failure_class: str = GYM_EXITED


@dataclass(frozen=True)
class Skipped(Missing):
    """A rollout the run decided not to need (``--gym-adaptive``: its dataset's gates were decided by earlier
    waves); ``reason`` says why, e.g. ``not needed: mean-reward gate decided PASS after 2 repeats, ...``."""

    failure_class: str = "skipped"


@dataclass(frozen=True)
class Stall:
    """The run made no progress for ``timeout`` seconds: at ``at`` (``time.monotonic()``), ``rollouts`` had
    landed (successes and failures); ``dispatched`` says whether ``gym eval run`` had begun rolling out (if
    not, ``timeout`` was the start-up timeout)."""

    timeout: float
    at: float
    rollouts: int
    dispatched: bool = True

    def missing(self) -> Missing:
        """The :class:`Missing` every rollout still pending gets."""
        if not self.dispatched:
            return Missing(
                f"gym eval run did not begin rolling out within {self.timeout:g} s of starting "
                "(--gym-startup-timeout), so every rollout errors now",
                failure_class=GYM_START,
            )
        return Missing(
            f"no rollout landed for {self.timeout:g} s (--gym-rollout-timeout, counted from the last rollout Gym "
            f"wrote; {self.rollouts} had landed), so every rollout still pending errors now",
            failure_class=ROLLOUT_TIMEOUT,
        )


class _FollowedFile:
    """Complete lines appended to a file since the last look (handles a file that appears late or is replaced)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._inode: int | None = None
        self._offset = 0  # bytes read so far
        self._line = 0  # complete lines handed out so far
        self._line_start = 0  # byte offset of the line being read
        self._partial: list[bytes] = []  # the pieces read so far of an incomplete last line

    def new_lines(self) -> Iterator[tuple[int, int, bytes]]:
        """Yield ``(1-based line number, byte offset, raw line)`` for every complete line not seen before.

        Reads what the file holds now, :data:`READ_CHUNK` bytes at a time.
        """
        try:
            stat = os.stat(self.path)
            if stat.st_ino == self._inode and stat.st_size == self._offset:
                return  # nothing new
            handle = self.path.open("rb")
        except FileNotFoundError:
            return
        with handle:
            stat = os.fstat(handle.fileno())
            if stat.st_ino != self._inode or stat.st_size < self._offset:
                self._inode, self._offset, self._line, self._line_start = stat.st_ino, 0, 0, 0
                self._partial = []
            handle.seek(self._offset)
            while self._offset < stat.st_size:
                data = handle.read(min(READ_CHUNK, stat.st_size - self._offset))
                if not data:
                    return
                base, self._offset = self._offset, self._offset + len(data)
                start = 0
                while (end := data.find(b"\n", start)) >= 0:
                    raw = data[start:end]
                    if self._partial:
                        raw, self._partial = b"".join([*self._partial, raw]), []
                    self._line += 1
                    offset, self._line_start = self._line_start, base + end + 1
                    if raw.strip():
                        yield self._line, offset, raw
                    start = end + 1
                if start < len(data):
                    self._partial.append(data[start:])


def record_stamp(task_index: object, rollout_index: object, row_repeats: int = 1) -> int | None:
    """The plan stamp of a Gym record with these ``_ng_task_index`` and ``_ng_rollout_index`` values, or None
    when it belongs to no planned rollout.

    ``row_repeats`` is the run's ``--num-repeats`` (:attr:`~pytest_gym_eval.plan.RunPlan.row_repeats`): with 1
    (one input row per rollout) the stamp is the task index; with R > 1 (one row per task, Gym numbering its
    rollouts 0..R-1) it is ``task_index * R + rollout_index``, for a rollout index in 0..R-1 only.
    """
    if not isinstance(task_index, int) or isinstance(task_index, bool):
        return None
    if row_repeats == 1:
        return task_index
    if not isinstance(rollout_index, int) or isinstance(rollout_index, bool) or not 0 <= rollout_index < row_repeats:
        return None
    return task_index * row_repeats + rollout_index


def parse_record(
    raw: bytes, path: Path, line: int, failures: bool, offset: int | None = None, row_repeats: int = 1
) -> RolloutRecord | None:
    """The :class:`RolloutRecord` of one raw line (starting at byte ``offset``), keyed by its plan stamp
    (:func:`record_stamp` with ``row_repeats``), or None for a line that is no planned rollout's."""
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(value, dict):
        return None
    stamp = record_stamp(value.get(TASK_INDEX_KEY), value.get(ROLLOUT_INDEX_KEY), row_repeats)
    if stamp is None:
        return None
    failure_class = value.get(FAILURE_CLASS_KEY)
    if failures or failure_class:
        message = next((str(value[k]) for k in FAILURE_MESSAGE_KEYS if value.get(k)), "")
        return RolloutRecord(
            stamp, None, path, line, str(failure_class or "unknown"), message, offset, record_usage(value)
        )
    return RolloutRecord(stamp, value.get("reward"), path, line, offset=offset, usage=record_usage(value))


class RolloutFeed:
    """Follows ``output`` and ``failures`` (and the run's ``state`` file) in a background thread.

    ``waves`` (``--gym-adaptive``), when given, is the run's wave log (:mod:`pytest_gym_eval.waves`): each wave's
    output and failures files are followed too from the moment the log names them, and a rollout the log skips is
    waited for no longer (:meth:`wait` returns :class:`Skipped`).

    ``materialized`` (Gym's materialised inputs), when given, marks when Gym began dispatching rollouts: until
    then ``startup_timeout`` (seconds, None: the rollout timeout) bounds the wait, counted from the run entering
    ``running``; without it, the rollout timeout counts from ``running``. ``row_repeats`` is the run's
    ``--num-repeats`` (the plan's mode): records are keyed by their plan stamp (:func:`record_stamp`).
    ``reused`` is a file of records in
    Gym's format taken from an earlier run (``--gym-resume``), followed like ``output``.

    :meth:`wait` blocks until a rollout arrives, Gym is done without it, or the run stalls (see the module's
    docstring). A success recorded after a failure of the same rollout (Gym's resume retries failures)
    replaces it.
    """

    def __init__(
        self,
        output: Path,
        failures: Path,
        state: Path,
        poll_interval: float = POLL_INTERVAL,
        materialized: Path | None = None,
        startup_timeout: float | None = None,
        waves: Path | None = None,
        row_repeats: int = 1,
        reused: Path | None = None,
    ) -> None:
        self._row_repeats = row_repeats
        self._files = [(_FollowedFile(output), False), (_FollowedFile(failures), True)]
        self._waves = _FollowedFile(waves) if waves is not None else None
        self._skipped: dict[int, str] = {}
        if reused is not None:  # --gym-resume: records reused from an earlier run (pytest_gym_eval.resume)
            self._files.append((_FollowedFile(reused), False))
        self._materialized = materialized  # written when Gym begins dispatching; any change is progress
        self._materialized_seen: tuple[int, int, int] | None = None  # (inode, size, mtime_ns)
        self._dispatched = materialized is None
        self._startup_timeout = startup_timeout
        self._state_path = state
        self._poll_interval = poll_interval
        self._records: dict[int, RolloutRecord] = {}
        self._failed = 0  # records in _records that are failures
        self._state: RunState | None = None
        self._progress_at: float | None = None  # monotonic time of the last progress, once the run is running
        self._stall: Stall | None = None
        self._changed = threading.Condition()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._follow, name="gym-rollout-feed", daemon=True)

    def start(self) -> RolloutFeed:
        """Start following; returns self."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop following (idempotent); one last look collects what was written until now."""
        self._stopping.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join()

    @property
    def state(self) -> RunState | None:
        """The run state last read."""
        return self._state

    @property
    def last_progress(self) -> float | None:
        """``time.monotonic()`` of the last progress seen (the run entering ``running``, a rollout or failure
        landing); None before the run runs."""
        with self._changed:
            return self._progress_at

    @property
    def stall(self) -> Stall | None:
        """The stall that ended the waits, once one happened (see the module's docstring)."""
        with self._changed:
            return self._stall

    def records(self) -> dict[int, RolloutRecord]:
        """A snapshot of every rollout seen so far, by stamp."""
        with self._changed:
            return dict(self._records)

    def counts(self) -> tuple[int, int]:
        """``(rollouts seen, failures among them)`` so far, without copying the records (for progress)."""
        with self._changed:
            return len(self._records), self._failed

    def skipped_count(self) -> int:
        """Rollouts the wave log skipped so far (``--gym-adaptive``)."""
        with self._changed:
            return len(self._skipped)

    def wait(
        self,
        stamp: int,
        timeout: float | None,
        on_wait: Callable[[], None] | None = None,
        every: float = 0.5,
    ) -> RolloutRecord | Missing:
        """The rollout stamped ``stamp``; or, when it never comes, a :class:`Missing` once the run is done
        without it, or once the run made no progress for ``timeout`` seconds (None: no limit). The clock runs
        from the last progress of the whole run, not from this call: after a stall every wait for a pending
        rollout returns at once. A failure record is returned once the run is done or stalled; :class:`Skipped` as
        soon as the wave log (``--gym-adaptive``) skips the rollout. ``on_wait`` (the
        session's progress display) is called about every ``every`` seconds while this waits, in this thread."""
        with self._changed:
            while True:
                if stamp in self._skipped:
                    return Skipped(self._skipped[stamp])
                record = self._records.get(stamp)
                if record is not None and (record.failure_class is None or self._done() or self._stall):
                    return record
                if self._done():
                    return record or self._missing_reason()
                if self._stopping.is_set() and not self._thread.is_alive():
                    return record or Missing(
                        "the session stopped before this rollout arrived", failure_class=SESSION_STOPPED
                    )
                limit = self._limit(timeout)
                if self._stall is None and limit is not None and self._progress_at is not None:
                    now = time.monotonic()
                    if now - self._progress_at >= limit:
                        self._stall = Stall(limit, now, len(self._records), self._dispatched)
                if self._stall is not None:
                    return record or self._stall.missing()
                remaining = 1.0 if on_wait is None else every
                if limit is not None and self._progress_at is not None:
                    remaining = min(remaining, self._progress_at + limit - time.monotonic())
                if not self._changed.wait(max(remaining, 0.0)) and on_wait is not None:
                    on_wait()

    def _limit(self, timeout: float | None) -> float | None:
        """Seconds without progress that stall the run now: the rollout ``timeout`` once Gym dispatches,
        before that the start-up timeout when it is longer (or when ``timeout`` is None: no limit)."""
        if self._dispatched or self._startup_timeout is None:
            return timeout
        return self._startup_timeout if timeout is None else max(timeout, self._startup_timeout)

    def wait_all(self, stamps: list[int], timeout: float | None) -> dict[int, RolloutRecord | Missing]:
        """:meth:`wait` for each of ``stamps``; bounded as one wait is (a stall ends them all at once)."""
        return {stamp: self.wait(stamp, timeout) for stamp in stamps}

    def _done(self) -> bool:
        return self._state is not None and self._state.done

    def _missing_reason(self) -> Missing:
        state = self._state
        assert state is not None
        if state.phase == "failed":
            return Missing(state.message or "Gym failed", state.log, state.failure_class or GYM_EXITED)
        return Missing(state.message or "gym eval run finished without this rollout", state.log)

    def _follow(self) -> None:
        looks = 0
        while True:
            stopping = self._stopping.is_set()
            self._look(read_state=stopping or looks % STATE_EVERY == 0)
            looks += 1
            if stopping or self._done():
                with self._changed:
                    self._changed.notify_all()
                if stopping:
                    return
            self._stopping.wait(self._poll_interval)

    def _read_waves(self) -> dict[int, str]:
        """New lines of the wave log: follow each new wave's files; return the stamps newly skipped (with why)."""
        skipped: dict[int, str] = {}
        if self._waves is None:
            return skipped
        for _, _, raw in self._waves.new_lines():
            try:
                entry = json.loads(raw)
            except ValueError:
                continue
            if not isinstance(entry, dict):
                continue
            if isinstance(entry.get("output"), str) and isinstance(entry.get("failures"), str):
                self._files += [
                    (_FollowedFile(Path(entry["output"])), False),
                    (_FollowedFile(Path(entry["failures"])), True),
                ]
            if isinstance(entry.get("skip"), list):
                reason = str(entry.get("reason") or "not needed")
                skipped.update((stamp, reason) for stamp in entry["skip"] if isinstance(stamp, int))
        return skipped

    def look(self) -> None:
        """Look at the files once now (the background thread does so every ``poll_interval`` seconds)."""
        self._look()

    def _look(self, read_state: bool = True) -> None:
        # Read the state first: once it says "finished", every line Gym wrote before it is in the files.
        state = RunState.read(self._state_path) if read_state else self._state
        found: list[RolloutRecord] = []
        grew = False
        if self._materialized is not None and read_state:
            try:
                stat = os.stat(self._materialized)
                seen: tuple[int, int, int] | None = (stat.st_ino, stat.st_size, stat.st_mtime_ns)
            except OSError:
                seen = None
            grew = seen is not None and seen != self._materialized_seen
            self._materialized_seen = seen or self._materialized_seen
        skipped = self._read_waves() if read_state else {}
        for followed, failures in self._files:
            for line, offset, raw in followed.new_lines():
                record = parse_record(raw, followed.path, line, failures, offset, self._row_repeats)
                if record is not None:
                    found.append(record)
        if not found and not grew and not skipped and state == self._state:
            return
        with self._changed:
            self._skipped.update(skipped)
            for record in found:
                earlier = self._records.get(record.stamp)
                if earlier is None or earlier.failure_class is not None:
                    self._records[record.stamp] = record
                    self._failed += (record.failure_class is not None) - (earlier is not None)
            if state is not None and not (self._state is not None and self._state.done and not state.done):
                self._state = state
            running = self._state is not None and self._state.phase != "starting"
            if running and (found or grew or self._progress_at is None):
                self._progress_at = time.monotonic()
            if running and (found or grew):
                self._dispatched = True
            self._changed.notify_all()
