"""Following Gym's output files (:class:`pytest_gym_eval.gym.feed.RolloutFeed`) directly, without a session."""

from __future__ import annotations

import json
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_gym_eval.gym.feed import Missing, RolloutFeed, RolloutRecord, RunState


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
    """Whether the thread is inside :meth:`RolloutFeed.wait` (its code object, wherever the module lives)."""
    frame = sys._current_frames().get(thread_id)
    while frame is not None:
        if frame.f_code is RolloutFeed.wait.__code__:
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
        deadline = time.monotonic() + 60
        while not in_wait(main):
            if time.monotonic() > deadline:  # never saw the wait: end it, so that the test fails, not hangs
                feed.stop()
                return
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


# Bounded waits: the rollout timeout counts from the last progress of the whole run, not from each wait.


def test_the_timeout_counts_from_the_last_rollout_that_landed(tmp_path: Path, feed: RolloutFeed) -> None:
    append(tmp_path / "rollouts.jsonl", {"_ng_task_index": 0, "reward": 1.0})
    assert isinstance(feed.wait(0, timeout=60), RolloutRecord)
    landed = feed.last_progress
    assert landed is not None
    missing = feed.wait(1, timeout=0.3)
    assert isinstance(missing, Missing) and missing.failure_class == "rollout_timeout"
    assert "no rollout landed for 0.3 s (--gym-rollout-timeout" in missing.reason
    stall = feed.stall
    assert stall is not None and stall.at - landed >= 0.3 and stall.rollouts == 1


def test_after_a_stall_every_pending_rollout_is_given_up_at_once(feed: RolloutFeed) -> None:
    first = feed.wait(1, timeout=0.3)
    start = time.monotonic()
    # Without the stall each of these would wait its own 60 s: one timeout after another.
    rest = feed.wait_all([2, 3, 4], timeout=60)
    assert time.monotonic() - start < 30
    assert isinstance(first, Missing) and first.failure_class == "rollout_timeout"
    assert all(isinstance(m, Missing) and m.reason == first.reason for m in rest.values())


def test_a_failure_record_is_final_once_the_run_stalls(tmp_path: Path, feed: RolloutFeed) -> None:
    # Gym's resume can turn a failure into a success, so a failure waits for the run to end; a stalled run never
    # ends, so the failure Gym recorded is what the item reports (its real cause, not a timeout).
    failure = {"_ng_task_index": 5, "_ng_failure_class": "agent_run_error", "_ng_failure_message": "HTTP 500"}
    append(tmp_path / "rollouts_failures.jsonl", failure)
    record = feed.wait(5, timeout=0.3)
    assert isinstance(record, RolloutRecord) and record.failure_class == "agent_run_error"


def test_no_stall_while_gym_is_still_starting(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    RunState("starting").write(state)
    feed = RolloutFeed(tmp_path / "rollouts.jsonl", tmp_path / "rollouts_failures.jsonl", state).start()
    try:
        result: list[RolloutRecord | Missing] = []
        waiter = threading.Thread(target=lambda: result.append(feed.wait(0, timeout=0.2)))
        waiter.start()
        waiter.join(timeout=1.0)  # five timeouts pass while Gym starts: the wait must still be waiting
        assert waiter.is_alive() and feed.last_progress is None
        RunState("running").write(state)
        waiter.join(timeout=60)
        assert isinstance(result[0], Missing) and result[0].failure_class == "rollout_timeout"
    finally:
        feed.stop()


def test_gym_writing_its_materialised_inputs_is_progress(tmp_path: Path) -> None:
    # Gym spends ~20 s after `gym eval run` starts before it dispatches; its materialised inputs mark that moment.
    state, materialized = tmp_path / "state.json", tmp_path / "rollouts_materialized_inputs.jsonl"
    RunState("running").write(state)
    feed = RolloutFeed(
        tmp_path / "rollouts.jsonl", tmp_path / "rollouts_failures.jsonl", state, materialized=materialized
    )  # not started: each look below is one the background thread would make
    feed.look()
    running = feed.last_progress
    feed.look()
    assert running is not None and feed.last_progress == running  # nothing new: no progress
    append(materialized, {"_ng_task_index": 0})
    feed.look()
    dispatched = feed.last_progress
    assert dispatched is not None and dispatched > running
    append(tmp_path / "rollouts.jsonl", {"_ng_task_index": 0, "reward": 1.0})
    feed.look()
    landed = feed.last_progress
    assert landed is not None and landed > dispatched


def test_before_gym_dispatches_the_startup_timeout_bounds_the_wait(tmp_path: Path) -> None:
    # `gym eval run` boots for ~20 s (longer under load) before its first rollout: a short rollout timeout must not
    # cut that short, yet a boot that never ends must not hang the session either.
    state, materialized = tmp_path / "state.json", tmp_path / "rollouts_materialized_inputs.jsonl"
    RunState("running").write(state)
    feed = RolloutFeed(
        tmp_path / "rollouts.jsonl", tmp_path / "rollouts_failures.jsonl", state,
        materialized=materialized, startup_timeout=0.6,
    ).start()  # fmt: skip
    try:
        missing = feed.wait(0, timeout=0.1)
        stall = feed.stall
        assert isinstance(missing, Missing) and missing.failure_class == "gym_start"
        assert "did not begin rolling out within 0.6 s of starting (--gym-startup-timeout)" in missing.reason
        assert stall is not None and stall.timeout == 0.6 and not stall.dispatched
    finally:
        feed.stop()


def test_the_run_finishing_without_a_rollout_names_gym_not_a_timeout(tmp_path: Path, feed: RolloutFeed) -> None:
    RunState("failed", "Gym's servers exited (status -9) during the run", "log.txt").write(tmp_path / "state.json")
    missing = feed.wait(9, timeout=60)
    assert isinstance(missing, Missing) and missing.failure_class == "gym_exited" and missing.log == "log.txt"


def test_each_rollout_lands_when_the_feed_first_sees_the_record_it_keeps(tmp_path: Path) -> None:
    """A failure then Gym's retried success: the rollout lands with the success (the record kept)."""
    output, failures = tmp_path / "rollouts.jsonl", tmp_path / "rollouts_failures.jsonl"
    feed = RolloutFeed(output, failures, tmp_path / "state.json")
    RunState("running").write(tmp_path / "state.json")
    append(failures, {"_ng_task_index": 0, "_ng_failure_class": "agent_run_error"})
    before = time.time()
    feed.look()
    failed_at = feed.landed()[0]
    append(output, {"_ng_task_index": 1, "reward": 1.0})
    feed.look()
    assert before <= failed_at <= feed.landed()[1]
    append(output, {"_ng_task_index": 0, "reward": 1.0})
    feed.look()
    landed = feed.landed()
    assert landed[0] >= landed[1] >= failed_at and set(landed) == {0, 1}
