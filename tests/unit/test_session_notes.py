"""The session's terminal lines (:class:`pytest_gym_eval.session.notes.Notes`) without a pytest session: a stand-in
terminal reporter, capture manager, progress tail and feed."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

from pytest_gym_eval.gym.feed import RunState
from pytest_gym_eval.session.notes import Notes
from pytest_gym_eval.session.progress import Counts


class Reporter:
    def __init__(self, log: list[str]) -> None:
        self.log = log

    def write_line(self, line: str) -> None:
        self.log.append(line)


class Capture:
    def __init__(self, log: list[str]) -> None:
        self.log = log

    @contextlib.contextmanager
    def global_and_fixture_disabled(self) -> Iterator[None]:
        self.log.append("capture off")
        yield
        self.log.append("capture on")


class Tail:
    """A progress tail that records what it was asked."""

    def __init__(self, log: list[Any], enabled: bool = True) -> None:
        self.log = log
        self.enabled = enabled

    def tick(self, counts: Counts | None = None) -> None:
        self.log.append(("tick", counts))

    def clear(self) -> None:
        self.log.append("clear")

    def running(self) -> None:
        self.log.append("running")

    def phase(self, event: str) -> None:
        self.log.append(("phase", event))


class Feed:
    def __init__(self, state: RunState | None, counts: tuple[int, int] = (0, 0), skipped: int = 0) -> None:
        self.state = state
        self._counts = counts
        self._skipped = skipped

    def counts(self) -> tuple[int, int]:
        return self._counts

    def skipped_count(self) -> int:
        return self._skipped


def notes_with(log: list[Any], terminal: bool = True) -> Notes:
    plugins = {"terminalreporter": Reporter(log), "capturemanager": Capture(log)} if terminal else {}
    return Notes(plugins.get)


def test_a_note_from_the_main_thread_is_written_at_once_with_capture_off() -> None:
    log: list[Any] = []
    notes = notes_with(log)
    notes.note("run directory: /tmp/x")
    assert log == ["capture off", "gym: run directory: /tmp/x", "capture on"]
    assert notes.events == ["run directory: /tmp/x"]


def test_a_note_from_another_thread_waits_for_the_main_threads_flush_and_is_written_once() -> None:
    log: list[Any] = []
    notes = notes_with(log)
    thread = threading.Thread(target=notes.note, args=("Gym's servers are up",))
    thread.start()
    thread.join(timeout=10)
    assert log == []
    notes.flush()
    notes.flush()
    assert log == ["capture off", "gym: Gym's servers are up", "capture on"]


def test_writing_notes_erases_the_progress_tail_first() -> None:
    log: list[Any] = []
    notes = notes_with(log)
    notes.progress = Tail(log)  # type: ignore[assignment]
    notes.on_run_event("starting the servers (log: /x/servers.log)")
    assert log == [("phase", "starting the servers (log: /x/servers.log)"), "clear", "capture off",
                   "gym: starting the servers (log: /x/servers.log)", "capture on"]  # fmt: skip


def test_without_a_terminal_reporter_notes_are_kept_but_not_written() -> None:
    notes = notes_with([], terminal=False)
    notes.note("a")
    notes.flush()
    assert notes.events == ["a"]


def test_the_rollouts_progress_leaves_out_the_pairs_adaptive_skipped() -> None:
    log: list[Any] = []
    notes = notes_with(log)
    notes.progress = Tail(log)  # type: ignore[assignment]
    notes.show_rollouts(Feed(RunState("running"), counts=(3, 1), skipped=2), planned=10)
    assert log == [("tick", Counts(3, 8, 1))]


def test_the_controllers_progress_follows_the_runs_phase() -> None:
    log: list[Any] = []
    notes = notes_with(log)
    notes.progress = Tail(log)  # type: ignore[assignment]
    notes.show_run(Feed(None), planned=4)
    notes.show_run(Feed(RunState("starting")), planned=4)
    notes.show_run(Feed(RunState("running"), counts=(1, 0)), planned=4)
    notes.show_run(Feed(RunState("finished")), planned=4)
    assert log == [("tick", None), ("tick", None), "running", ("tick", Counts(1, 4, 0)), "clear"]


def test_a_progress_turned_off_shows_nothing() -> None:
    log: list[Any] = []
    notes = notes_with(log)
    notes.progress = Tail(log, enabled=False)  # type: ignore[assignment]
    notes.show_run(Feed(RunState("running"), counts=(1, 0)), planned=4)
    assert not notes.showing and log == []
