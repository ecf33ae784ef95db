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
import os
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from pytest_gym_eval.core.files import LineFollower
from pytest_gym_eval.outcomes.causes import GYM_EXITED, GYM_START, ROLLOUT_TIMEOUT, SESSION_STOPPED
from pytest_gym_eval.outcomes.records import FAILURE_CLASS_KEY as FAILURE_CLASS_KEY
from pytest_gym_eval.outcomes.records import FAILURE_MESSAGE_KEYS as FAILURE_MESSAGE_KEYS
from pytest_gym_eval.outcomes.records import ROLLOUT_INDEX_KEY as ROLLOUT_INDEX_KEY
from pytest_gym_eval.outcomes.records import TASK_INDEX_KEY as TASK_INDEX_KEY
from pytest_gym_eval.outcomes.records import Missing as Missing
from pytest_gym_eval.outcomes.records import RolloutRecord as RolloutRecord
from pytest_gym_eval.outcomes.records import Skipped as Skipped
from pytest_gym_eval.outcomes.records import parse_record as parse_record
from pytest_gym_eval.outcomes.records import record_stamp as record_stamp

POLL_INTERVAL = 0.01
"""Seconds between two looks at Gym's output files (the added latency of an item report is half this on
average). A look at files that did not grow is one ``stat`` call each."""
STATE_EVERY = 5
"""The run's state file is read on every fifth look only: it changes a few times a run, and an item waits for it
only when its rollout will never come."""
STATE_RESERVE = 4096
"""Bytes set aside beside the state file for a final state published on a full disk (:meth:`RunState.reserve`)."""


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

        A final state (``finished``, ``failed``) that cannot be written as a new file (the disk is full) goes into
        the space :meth:`reserve` set aside, so that the items of every process still learn that the run ended;
        raises OSError when that fails too (or when there is no reserve)."""
        # Not files.write_text_atomic: published on every progress step (no fsync wanted) and, on a full disk,
        # falls back to the reserve below, which a fresh temporary file could not use.
        temp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
        try:
            temp.write_text(json.dumps(asdict(self)), encoding="utf-8")
            os.replace(temp, path)
        except OSError:
            with contextlib.suppress(OSError):
                temp.unlink()
            if not self.done or not self._write_reserved(path):
                raise

    @staticmethod
    def reserve(path: Path) -> None:
        """Set :data:`STATE_RESERVE` bytes aside beside ``path`` for a final state that must be published on a full
        disk (overwriting a file's own blocks needs no free space); best effort (a disk already full: nothing)."""
        with contextlib.suppress(OSError):
            _reserve_path(path).write_bytes(b" " * STATE_RESERVE)

    def _write_reserved(self, path: Path) -> bool:
        """Write this state into the reserve beside ``path`` (JSON, padded with spaces) and rename it to ``path``;
        whether that worked. The message is cut so that it fits."""
        reserve = _reserve_path(path)
        state, data = self, json.dumps(asdict(self)).encode()
        while len(data) > STATE_RESERVE:
            state = replace(state, message=state.message[: len(state.message) // 2], log=state.log[:1024])
            data = json.dumps(asdict(state)).encode()
        try:
            fd = os.open(reserve, os.O_WRONLY)
        except OSError:
            return False
        try:
            os.pwrite(fd, data.ljust(STATE_RESERVE), 0)
            os.replace(reserve, path)
        except OSError:
            return False
        finally:
            os.close(fd)
        return True

    @classmethod
    def read(cls, path: Path) -> RunState | None:
        """The published state, or None before the owner wrote one."""
        try:
            data = json.loads(path.read_bytes())
        except FileNotFoundError:
            return None
        except ValueError:  # not a whole state (a file another tool truncated): as if none yet, read it again later
            return None
        return cls(**data)


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


def describe_error(error: BaseException) -> str:
    """One line naming an unexpected exception: ``OSError: [Errno 28] No space left on device: '/x'``."""
    return f"{type(error).__name__}: {error}".splitlines()[0] if str(error) else type(error).__name__


def _reserve_path(state: Path) -> Path:
    return state.with_name(f".{state.name}.reserve")


WAKE_EVERY = 0.1
"""Seconds a thread waiting for a rollout sleeps at most between two checks. Python runs a signal's handler in
the main thread only, and only when that thread runs Python code: Ctrl-C or SIGTERM delivered to another thread
(the kernel picks any) reached a waiting item up to a whole wait later (1 s, more on a loaded machine), so a
stopped session wrote its reports that much later."""


class RolloutFeed:
    """Follows ``output`` and ``failures`` (and the run's ``state`` file) in a background thread.

    ``waves`` (``--gym-adaptive``), when given, is the run's wave log (:mod:`pytest_gym_eval.gym.waves`): each wave's
    output and failures files are followed too from the moment the log names them, and a rollout the log skips is
    waited for no longer (:meth:`wait` returns :class:`Skipped`).

    ``materialized`` (Gym's materialised inputs), when given, marks when Gym began dispatching rollouts: until
    then ``startup_timeout`` (seconds, None: the rollout timeout) bounds the wait, counted from the run entering
    ``running``; without it, the rollout timeout counts from ``running``. ``stride`` is the plan's rollouts per
    task index (:attr:`~pytest_gym_eval.tasks.plan.RunPlan.stride`): records are keyed by their plan stamp
    (:func:`record_stamp`). ``reused`` is a file of records in
    Gym's format taken from an earlier run (``--gym-resume``), followed like ``output``. ``owner_state`` (in the
    process that owns the run) returns the run's final state when the run ended without publishing it in ``state``
    (see :attr:`pytest_gym_eval.gym.run.GymRun.failure`), else None.

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
        stride: int = 1,
        reused: Path | None = None,
        owner_state: Callable[[], RunState | None] | None = None,
    ) -> None:
        self._stride = stride
        self._owner_state = owner_state
        self._files = [(LineFollower(output), False), (LineFollower(failures), True)]
        self._waves = LineFollower(waves) if waves is not None else None
        self._skipped: dict[int, str] = {}
        if reused is not None:  # --gym-resume: records reused from an earlier run (pytest_gym_eval.gym.resume)
            self._files.append((LineFollower(reused), False))
        self._materialized = materialized  # written when Gym begins dispatching; any change is progress
        self._materialized_seen: tuple[int, int, int] | None = None  # (inode, size, mtime_ns)
        self._dispatched = materialized is None
        self._startup_timeout = startup_timeout
        self._state_path = state
        self._poll_interval = poll_interval
        self._records: dict[int, RolloutRecord] = {}
        self._landed: dict[int, float] = {}  # time.time() when each stamp's record (the one kept) was seen
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

    def landed(self) -> dict[int, float]:
        """When each rollout seen so far landed, by stamp: ``time.time()`` of the look that found the record kept for it
        (within ``poll_interval`` of Gym writing it while the feed runs; a rollout reused from an earlier run lands at
        the first look)."""
        with self._changed:
            return dict(self._landed)

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
        next_tick = time.monotonic() + every
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
                remaining = WAKE_EVERY
                if limit is not None and self._progress_at is not None:
                    remaining = min(remaining, self._progress_at + limit - time.monotonic())
                woken = self._changed.wait(max(remaining, 0.0))
                if not woken and on_wait is not None and time.monotonic() >= next_tick:
                    next_tick = time.monotonic() + every
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
        """Look at the files until stopped. Should a look fail (an unreadable file, a bug), the run counts as failed
        with that error: every wait then ends at once with it, instead of waiting for lines no one reads."""
        try:
            self._follow_files()
        except Exception as error:
            with self._changed:
                self._state = RunState("failed", f"following Gym's output files failed: {describe_error(error)}")
                self._changed.notify_all()

    def _follow_files(self) -> None:
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
                    (LineFollower(Path(entry["output"])), False),
                    (LineFollower(Path(entry["failures"])), True),
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
        if read_state and (state is None or not state.done) and self._owner_state is not None:
            state = self._owner_state() or state  # the owner's run ended, yet could not publish it (a full disk)
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
                record = parse_record(raw, followed.path, line, failures, offset, self._stride)
                if record is not None:
                    found.append(record)
        if not found and not grew and not skipped and state == self._state:
            return
        now = time.time()
        with self._changed:
            self._skipped.update(skipped)
            for record in found:
                earlier = self._records.get(record.stamp)
                if earlier is None or earlier.failure_class is not None:
                    self._records[record.stamp] = record
                    self._landed[record.stamp] = now
                    self._failed += (record.failure_class is not None) - (earlier is not None)
            if state is not None and not (self._state is not None and self._state.done and not state.done):
                self._state = state
            running = self._state is not None and self._state.phase != "starting"
            if running and (found or grew or self._progress_at is None):
                self._progress_at = time.monotonic()
            if running and (found or grew):
                self._dispatched = True
            self._changed.notify_all()
