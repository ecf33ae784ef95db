"""Following Gym's output files (:class:`pytest_gym_eval.rollouts.RolloutFeed`) directly, without a session."""

from __future__ import annotations

import json
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_gym_eval.rollouts import Missing, RolloutFeed, RolloutRecord, RunState


@pytest.fixture
def feed(tmp_path: Path) -> Iterator[RolloutFeed]:
    feed = RolloutFeed(tmp_path / "rollouts.jsonl", tmp_path / "rollouts_failures.jsonl", tmp_path / "state.json")
    RunState("running").write(tmp_path / "state.json")
    feed.start()
    yield feed
    feed.stop()


def append(path: Path, record: dict[str, object]) -> None:
    with path.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(record) + "\n")


def test_wait_returns_a_rollout_written_while_it_waits(tmp_path: Path, feed: RolloutFeed) -> None:
    writer = threading.Thread(target=append, args=(tmp_path / "rollouts.jsonl", {"_ng_task_index": 3, "reward": 0.5}))
    writer.start()
    record = feed.wait(3, timeout=60)
    writer.join()
    assert isinstance(record, RolloutRecord) and record.reward == 0.5 and record.line == 1


def test_wait_for_a_rollout_gym_finished_without_is_missing(tmp_path: Path, feed: RolloutFeed) -> None:
    append(tmp_path / "rollouts.jsonl", {"_ng_task_index": 0, "reward": 1.0})
    RunState("finished", "gym eval run exited with status 0").write(tmp_path / "state.json")
    assert isinstance(feed.wait(0, timeout=60), RolloutRecord)
    missing = feed.wait(1, timeout=60)
    assert isinstance(missing, Missing) and missing.reason == "gym eval run exited with status 0"


def in_wait(thread_id: int) -> bool:
    frame = sys._current_frames().get(thread_id)
    while frame is not None:
        if frame.f_code.co_name == "wait" and frame.f_code.co_filename.endswith("rollouts.py"):
            return True
        frame = frame.f_back
    return False


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(), reason="signals reach the main thread")
def test_ctrl_c_while_waiting_raises_keyboard_interrupt_and_the_feed_goes_on(tmp_path: Path, feed: RolloutFeed) -> None:
    # Items wait in the main thread, where Ctrl-C lands: it must come out as KeyboardInterrupt (pytest then
    # ends the session and stops Gym), never as another error, and the feed must still work afterwards.
    main = threading.main_thread().ident
    assert main is not None

    def press_ctrl_c_once_waiting() -> None:
        while not in_wait(main):
            time.sleep(0.001)  # watching the main thread's stack, not timing it
        signal.pthread_kill(main, signal.SIGINT)

    presser = threading.Thread(target=press_ctrl_c_once_waiting)
    presser.start()
    with pytest.raises(KeyboardInterrupt):
        feed.wait(7, timeout=None)
    presser.join()
    append(tmp_path / "rollouts.jsonl", {"_ng_task_index": 7, "reward": 1.0})
    record = feed.wait(7, timeout=60)
    assert isinstance(record, RolloutRecord) and record.reward == 1.0
