"""The session's lines on the terminal (:class:`Notes`): progress notes queued from any thread and written from
the main thread only (pytest's terminal writer is not thread-safe), and the run's progress tail
(:mod:`pytest_gym_eval.session.progress`) while an item waits. No pytest session here: it takes a ``get_plugin`` that
finds pytest's terminal reporter and capture manager by name (``config.pluginmanager.get_plugin``)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import Any, Protocol

from pytest_gym_eval.gym.feed import RunState
from pytest_gym_eval.session.progress import Counts, Progress


class FeedLike(Protocol):
    """What the progress reads of the run (:class:`pytest_gym_eval.gym.feed.RolloutFeed`)."""

    @property
    def state(self) -> RunState | None: ...

    def counts(self) -> tuple[int, int]: ...

    def skipped_count(self) -> int: ...


class Notes:
    """One process's terminal lines: ``events`` (every note so far, in order) and ``progress`` (the progress
    tail, None until the run starts or without a terminal reporter)."""

    def __init__(self, get_plugin: Callable[[str], Any]) -> None:
        self.get_plugin = get_plugin
        self.events: list[str] = []
        self.progress: Progress | None = None
        self._printed = 0  # how many of ``events`` were written
        self._lock = threading.Lock()

    def note(self, message: str) -> None:
        """Queue a progress line for the terminal; lines are written from the main thread only, at once when this
        is it, else at the next :meth:`flush`."""
        with self._lock:
            self.events.append(message)
        if threading.current_thread() is threading.main_thread():
            self.flush()

    def flush(self) -> None:
        """Write queued lines to the terminal as ``gym: <line>`` (call from the main thread); the progress tail is
        erased first. Without a terminal reporter the lines are only dropped from the queue."""
        with self._lock:
            pending, self._printed = self.events[self._printed :], len(self.events)
        reporter = self.get_plugin("terminalreporter")
        if reporter is None or not pending:
            return
        self.end_progress()
        capture = self.get_plugin("capturemanager")
        with capture.global_and_fixture_disabled() if capture is not None else contextlib.nullcontext():
            for line in pending:
                reporter.write_line(f"gym: {line}")

    def on_run_event(self, message: str) -> None:
        """A message from the run (any thread): a note for the terminal, and the progress's start-up phase."""
        if self.progress is not None:
            self.progress.phase(message)
        self.note(message)

    @property
    def showing(self) -> bool:
        """Whether the progress is shown at all (a terminal reporter, not ``-q``)."""
        return self.progress is not None and self.progress.enabled

    def end_progress(self) -> None:
        """Erase the progress tail (a no-op when none is shown)."""
        if self.progress is not None:
            self.progress.clear()

    def show_rollouts(self, feed: FeedLike, planned: int) -> None:
        """Notes waiting to be written, then the rollouts done of ``planned`` (main thread, while an item waits);
        ``--gym-adaptive``'s skipped pairs never come, so they do not count."""
        assert self.progress is not None
        self.flush()
        done, errors = feed.counts()
        self.progress.tick(Counts(done, planned - feed.skipped_count(), errors))

    def show_run(self, feed: FeedLike, planned: int) -> None:
        """The run's progress once, for the process that owns the run yet runs no item (the pytest-xdist
        controller): the start-up phase and time while Gym starts, then the rollouts done; nothing once the run is
        over."""
        if not self.showing:
            return
        assert self.progress is not None
        self.flush()
        state = feed.state
        if state is not None and state.done:
            self.end_progress()
        elif state is None or state.phase == "starting":
            self.progress.tick()
        else:
            self.progress.running()
            self.show_rollouts(feed, planned)
