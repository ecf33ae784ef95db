"""Progress while pytest waits for Gym: the text, the terminal's status tail, the once-a-minute line for logs
(with an injected clock, no sleeping), ``-q`` (a real pseudo-terminal run against the stand-in ``gym``:
tests/plugin/test_progress_session.py)."""

from __future__ import annotations

from pytest_gym_eval.session.progress import Counts, Progress, rollouts_text


class Clock:
    """A stand-in ``time.monotonic``: seconds move only when the test says so."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Screen:
    """Records what progress writes: whole lines, and the raw text with backspaces applied to a line buffer."""

    def __init__(self, line: str = "data.jsonl ..F", width: int = 80) -> None:
        self.lines: list[str] = []
        self.buffer = list(line)
        self.cursor = len(line)
        self.base = line
        self.width = width

    def write_raw(self, text: str) -> None:
        for char in text:
            if char == "\b":
                self.cursor -= 1
            else:
                if self.cursor < len(self.buffer):
                    self.buffer[self.cursor] = char
                else:
                    self.buffer.append(char)
                self.cursor += 1

    def write_line(self, text: str) -> None:
        self.lines.append(text)

    def room(self) -> int:
        return self.width - len(self.base)

    @property
    def shown(self) -> str:
        return "".join(self.buffer).rstrip()


def test_rollouts_text_has_done_total_errors_rate_and_eta() -> None:
    assert rollouts_text(Counts(6, 24, 1), 12.0) == "6/24 rollouts, 1 error, 0.5/s, ETA 36.0 s"
    assert rollouts_text(Counts(0, 24, 0), 5.0) == "0/24 rollouts, 0 errors"
    assert rollouts_text(Counts(24, 24, 2), 48.0) == "24/24 rollouts, 2 errors, 0.5/s"
    # No rollout for a minute (Gym retrying a reset connection without end): no ETA from the old throughput.
    assert (
        rollouts_text(Counts(11, 12, 11), 100.0, stalled=120.0)
        == "11/12 rollouts, 11 errors, 0.11/s, no rollout for 2m 00s"
    )
    assert rollouts_text(Counts(0, 12, 0), 90.0, stalled=90.0) == "0/12 rollouts, 0 errors, no rollout for 1m 30s"


def test_a_run_without_new_rollouts_for_a_minute_says_so() -> None:
    clock, screen = Clock(), Screen()
    progress = Progress(screen, tty=False, clock=clock)
    progress.running()
    clock.now += 30.0
    progress.tick(Counts(11, 12, 11))  # the counts first seen: the clock of the stall starts now
    clock.now += 59.0
    assert progress.text(Counts(11, 12, 11)).endswith("ETA 8.1 s")  # 89 s for 11 rollouts
    clock.now += 1.0
    assert progress.text(Counts(11, 12, 11)).endswith("no rollout for 1m 00s")
    assert progress.text(Counts(12, 12, 11)) == "12/12 rollouts, 11 errors, 0.13/s"


def test_log_lines_come_at_most_once_a_minute() -> None:
    clock, screen = Clock(), Screen()
    progress = Progress(screen, tty=False, clock=clock)
    progress.phase("starting Gym's servers (log: /tmp/run/logs/gym-env-start.log)")
    for _ in range(59):
        clock.now += 1.0
        progress.tick()
    assert screen.lines == []  # 59 s: nothing yet
    clock.now += 1.0
    progress.tick()
    assert screen.lines == ["gym: progress: starting Gym's servers, 1m 00s"]
    progress.running()
    for _ in range(119):
        clock.now += 0.5
        progress.tick(Counts(3, 10, 0))
    assert len(screen.lines) == 1  # 59.5 s since the last line
    clock.now += 0.5
    progress.tick(Counts(4, 10, 1))
    assert screen.lines[-1] == "gym: progress: 4/10 rollouts, 1 error, 0.067/s, ETA 1m 30s"
    for _ in range(4800):  # ten more minutes of ticks every 0.125 s (exact in binary): ten more lines
        clock.now += 0.125
        progress.tick(Counts(5, 10, 1))
    assert len(screen.lines) == 12
    assert screen.buffer == list("data.jsonl ..F")  # nothing raw on a log


def test_the_status_tail_is_drawn_after_pytests_line_and_erased_without_a_trace() -> None:
    clock, screen = Clock(), Screen()
    progress = Progress(screen, tty=True, clock=clock)
    progress.phase("starting Gym's servers (log: x)")
    clock.now += 42.0
    progress.tick()
    assert screen.shown == "data.jsonl ..F [gym: starting Gym's servers, 42.0 s]"
    progress.running()
    clock.now += 10.0
    progress.tick(Counts(5, 20, 0))
    assert screen.shown == "data.jsonl ..F [gym: 5/20 rollouts, 0 errors, 0.5/s, ETA 30.0 s]"
    progress.clear()
    assert screen.shown == "data.jsonl ..F" and screen.cursor == len("data.jsonl ..F")
    assert screen.lines == []


def test_the_tail_is_trimmed_to_the_line_and_left_out_without_room() -> None:
    clock = Clock()
    narrow = Screen(width=50)
    Progress(narrow, tty=True, clock=clock).tick()
    assert len(narrow.shown) <= 49 and narrow.shown.startswith("data.jsonl ..F [gym: starting")
    full = Screen(line="x" * 70, width=80)
    Progress(full, tty=True, clock=clock).tick()
    assert full.shown == "x" * 70


def test_quiet_shows_nothing() -> None:
    clock, screen = Clock(), Screen()
    progress = Progress(screen, tty=False, enabled=False, clock=clock)
    clock.now += 3600
    progress.tick(Counts(1, 2, 0))
    assert screen.lines == [] and screen.shown == "data.jsonl ..F"
