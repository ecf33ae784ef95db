"""How far the Gym run is, shown while pytest waits for it.

While Gym starts (the first item's setup) and while an item waits for its rollout, the session's main thread
ticks a :class:`Progress` a few times a second. :class:`Progress` (its docstring: what it shows, on a terminal and
in a CI log, and why it runs in the main thread), :class:`TerminalScreen`, :func:`progress_for`. What users see:
docs/reports.md.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, TextIO

import pytest

from pytest_gym_eval.reporting import fmt

LOG_EVERY = 60.0
"""Seconds between two progress lines when the output is not a terminal."""
REDRAW_EVERY = 0.5
"""Seconds between two redraws of the status tail on a terminal."""
MIN_ROOM = 20
"""Fewest free columns the status tail needs on the current line; with less it is not shown."""


class Screen(Protocol):
    """Where progress goes (the session adapts pytest's terminal reporter to this)."""

    def write_raw(self, text: str) -> None:
        """Write ``text`` as is, without moving pytest's idea of the current line (terminal only)."""

    def write_line(self, text: str) -> None:
        """Write ``text`` as a line of its own (pytest's ``write_line``)."""

    def room(self) -> int:
        """Columns left on the current line."""


@dataclass(frozen=True)
class Counts:
    """Rollouts of the run so far: ``done`` (scored or failed lines Gym wrote) of ``total``, ``errors`` among them."""

    done: int
    total: int
    errors: int


STALLED_AFTER = 60.0
"""Seconds without a new rollout after which the progress says so instead of an ETA: Gym retries some endpoint
failures (a connection reset) without end, and an ETA from the earlier throughput would say the run is nearly done."""


def rollouts_text(counts: Counts, seconds: float, stalled: float = 0.0) -> str:
    """``7/24 rollouts, 1 error, 0.42/s, ETA 40.0 s`` after ``seconds`` of ``gym eval run``: the throughput is
    ``done / seconds`` and the ETA ``(total - done) / throughput`` (both left out before the first rollout).
    When no rollout arrived for ``stalled`` >= :data:`STALLED_AFTER` seconds, ``no rollout for 2m 00s`` instead of
    the ETA."""
    text = f"{counts.done}/{counts.total} rollouts, {fmt.plural(counts.errors, 'error')}"
    if counts.done and seconds > 0:
        text += f", {counts.done / seconds:.2g}/s"
    if counts.done < counts.total:
        if stalled >= STALLED_AFTER:
            text += f", no rollout for {fmt.duration(stalled)}"
        elif counts.done and seconds > 0:
            text += f", ETA {fmt.duration((counts.total - counts.done) * seconds / counts.done)}"
    return text


class Progress:
    """The run's progress on ``screen``; ``tty`` picks the status tail (True) or a line a minute (False);
    ``enabled`` False (``-q``) shows nothing. ``clock`` is ``time.monotonic`` or a test's stand-in (seconds).

    Call :meth:`phase` with each run event, :meth:`running` when the rollouts start, :meth:`tick` while
    waiting, and :meth:`clear` before writing anything else to the terminal.

    What it shows:

    - during start-up, the phase (the run's latest event, e.g. "starting Gym's servers") and the elapsed time;
    - during the rollouts, done/total, the errors so far, the throughput (rollouts per second since ``gym eval
      run`` started) and an ETA (the rollouts left at that throughput).

    On a terminal the text is a *status tail*: written after whatever pytest's current line holds (its per-item
    progress, e.g. ``data.jsonl ..F.``), redrawn in place, and erased (backspaces, spaces, backspaces) before
    anything else writes, so pytest's own output and its idea of the line are untouched. Not on a terminal (a CI
    log) it is a whole line, at most one per :data:`LOG_EVERY` seconds. ``-q`` turns it off.

    Everything here runs in the main thread (pytest's terminal writer is not thread-safe); the clock is injected so
    the once-a-minute rule is tested without sleeping.
    """

    def __init__(
        self,
        screen: Screen,
        *,
        tty: bool,
        enabled: bool = True,
        clock: Callable[[], float] = time.monotonic,
        log_every: float = LOG_EVERY,
    ) -> None:
        self.screen = screen
        self.tty = tty
        self.enabled = enabled
        self.clock = clock
        self.log_every = log_every
        self.started = clock()
        self._phase = "starting"
        self._running_since: float | None = None
        self._shown = ""  # the status tail now on the terminal
        self._last_draw = -REDRAW_EVERY
        self._last_line = self.started
        self._last_change = (-1, self.started)  # (rollouts done, when that count was first seen)

    def phase(self, event: str) -> None:
        """Take the run's latest event as the start-up phase (its ``(log: ...)`` tail left out)."""
        self._phase = event.split(" (log:", 1)[0].strip() or self._phase

    def running(self) -> None:
        """The rollouts have started (``gym eval run`` is running); the throughput counts from now."""
        if self._running_since is None:
            self._running_since = self.clock()

    def text(self, counts: Counts | None) -> str:
        """What to show now: the rollouts' progress once they run and ``counts`` are known, else the phase and
        the time since start-up began."""
        now = self.clock()
        if self._running_since is not None and counts is not None:
            self._note(counts, now)
            return rollouts_text(counts, now - self._running_since, now - self._last_change[1])
        return f"{self._phase}, {fmt.duration(now - self.started)}"

    def tick(self, counts: Counts | None = None) -> None:
        """Show the progress (terminal: redraw the tail at most every :data:`REDRAW_EVERY` s; log: a line when
        :data:`LOG_EVERY` seconds passed since the last one, or since start)."""
        if not self.enabled:
            return
        now = self.clock()
        if self._running_since is not None and counts is not None:
            self._note(counts, now)
        if self.tty:
            if now - self._last_draw < REDRAW_EVERY:
                return
            self._last_draw = now
            self._draw(" [gym: " + self.text(counts) + "]")
        elif now - self._last_line >= self.log_every:
            self._last_line = now
            self.screen.write_line("gym: progress: " + self.text(counts))

    def _note(self, counts: Counts, now: float) -> None:
        """Remember when the count of rollouts done last changed (a stall is measured from then; before the first
        rollout, from the start of the rollouts)."""
        if counts.done != self._last_change[0]:
            first = self._last_change[0] < 0 and counts.done == 0
            start = self._running_since
            self._last_change = (counts.done, start if first and start is not None else now)

    def clear(self) -> None:
        """Erase the status tail, leaving the cursor where pytest left it (no-op when nothing is shown)."""
        if self._shown:
            width = len(self._shown)
            self.screen.write_raw("\b" * width + " " * width + "\b" * width)
            self._shown = ""
            self._last_draw = -REDRAW_EVERY

    def _draw(self, tail: str) -> None:
        room = self.screen.room() - 1  # pytest's idea of the line does not include the tail
        if room < MIN_ROOM:
            self.clear()
            return
        tail = fmt.trim_end(tail, room)
        if tail == self._shown:
            return
        old = len(self._shown)
        pad = max(0, old - len(tail))
        self.screen.write_raw("\b" * old + tail + " " * pad + "\b" * pad)
        self._shown = tail


class TerminalScreen:
    """:class:`Screen` on pytest's terminal reporter. Writes happen with pytest's output capture suspended
    (items' setups run captured) and raw text goes to the reporter's file, beside its terminal writer, so the
    writer's idea of the current line (its per-item progress) does not change."""

    def __init__(self, config: pytest.Config, reporter: pytest.TerminalReporter) -> None:
        self._reporter = reporter
        self._capture = config.pluginmanager.get_plugin("capturemanager")

    def _uncaptured(self) -> contextlib.AbstractContextManager[object]:
        if self._capture is None:
            return contextlib.nullcontext()
        suspended: contextlib.AbstractContextManager[object] = self._capture.global_and_fixture_disabled()
        return suspended

    def write_raw(self, text: str) -> None:
        writer = self._reporter._tw
        stream: TextIO = getattr(writer, "_file", None) or sys.stdout
        with self._uncaptured():
            stream.write(text)
            stream.flush()

    def write_line(self, text: str) -> None:
        with self._uncaptured():
            self._reporter.write_line(text)

    def room(self) -> int:
        writer = self._reporter._tw
        return int(writer.fullwidth - writer.width_of_current_line)


def progress_for(config: pytest.Config, clock: Callable[[], float] = time.monotonic) -> Progress | None:
    """The session's :class:`Progress` on pytest's terminal (None without a terminal reporter): a status tail
    when the output is a terminal, a line a minute otherwise; off with ``-q``."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None:
        return None
    return Progress(
        TerminalScreen(config, reporter),
        tty=bool(getattr(reporter, "isatty", False)),
        enabled=config.get_verbosity() >= 0,
        clock=clock,
    )
