"""Every wait is bounded, whatever dies: an exception in any of the plugin's threads reaches the items as an error
with its cause, at once (not when a start-up or rollout timeout runs out). Faults are injected into the
stand-in ``gym``'s runs; every wait here is bounded by a join or a deadline."""

from __future__ import annotations

import errno
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_gym_eval.gym import feed as feed_module
from pytest_gym_eval.gym import run
from pytest_gym_eval.gym.feed import STATE_RESERVE, Missing, RolloutFeed, RunState
from tests.support.fakes import FakeGym

STARTUP_TIMEOUT = 600
"""The start-up timeout of these runs: the items must error long before it (and its 120 s margin) passes."""
FAST = 60.0
"""Seconds a session whose Gym failed may take, start to end (the stand-in fails at once)."""


def two_tasks(pytester: pytest.Pytester) -> str:
    rows = [{"id": f"t{n}", "responses_create_params": {"input": f"Question {n}?"}} for n in (1, 2)]
    (pytester.path / "mcqa.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    return "mcqa.jsonl"


@pytest.fixture
def full_disk(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Iterator[threading.Event]:
    """A run directory (``runs/``) on a disk that fills once the event is set: from then on writing a new file there
    fails with ENOSPC, as on a real full disk (a file's existing blocks can still be overwritten)."""
    full = threading.Event()
    runs = pytester.path / "runs"

    def failing(original: Any) -> Any:
        def write(self: Path, *args: Any, **kwargs: Any) -> Any:
            if full.is_set() and runs in Path(self).absolute().parents:
                raise OSError(errno.ENOSPC, "No space left on device", str(self))
            return original(self, *args, **kwargs)

        return write

    monkeypatch.setattr(Path, "write_text", failing(Path.write_text))
    monkeypatch.setattr(Path, "write_bytes", failing(Path.write_bytes))
    yield full


def fill_once_gym_starts(monkeypatch: pytest.MonkeyPatch, full: threading.Event) -> None:
    launch = run.launch_servers

    def launch_then_fill(*args: Any, **kwargs: Any) -> Any:
        process = launch(*args, **kwargs)
        full.set()
        return process

    monkeypatch.setattr(run, "launch_servers", launch_then_fill)


def setup_errors(reprec: pytest.HookRecorder) -> dict[str, pytest.TestReport]:
    return {
        report.nodeid: report
        for report in reprec.getreports("pytest_runtest_logreport")
        if report.when == "setup" and report.failed
    }


@pytest.mark.parametrize("xdist", [[], ["-n", "2"]], ids=["one-process", "xdist"])
def test_a_disk_that_fills_while_gym_starts_errors_every_item_at_once_with_the_cause(
    pytester: pytest.Pytester,
    fake_gym: FakeGym,
    monkeypatch: pytest.MonkeyPatch,
    full_disk: threading.Event,
    xdist: list[str],
) -> None:
    # Ray times out; copying its logs into the full run directory fails; so does writing the failed state. (Under
    # xdist the controller starts Gym, and the workers learn from the state file.)
    monkeypatch.setenv("FAKE_GYM_START", "ray-timeout")
    fill_once_gym_starts(monkeypatch, full_disk)
    started = time.monotonic()
    reprec = pytester.inline_run(
        *fake_gym.args, *xdist, "--gym-run-dir=runs", f"--gym-startup-timeout={STARTUP_TIMEOUT}", two_tasks(pytester)
    )
    elapsed = time.monotonic() - started
    errors = setup_errors(reprec)
    assert sorted(errors) == ["mcqa.jsonl::t1[r0]", "mcqa.jsonl::t2[r0]"]
    assert elapsed < FAST, f"the items errored after {elapsed:.0f} s"
    first, second = (str(errors[nodeid].longrepr) for nodeid in sorted(errors))
    assert first.startswith("Gym would not start: OSError: [Errno 28] No space left on device: "), first
    assert "ray-start-1" in first.splitlines()[0] and len(first.splitlines()) <= 3, first
    assert "Traceback" not in first and "did not start within" not in first
    assert second.startswith("Gym would not start: OSError: [Errno 28] No space left on device")
    assert ("failure_class", "gym_start") in errors["mcqa.jsonl::t1[r0]"].user_properties
    (run_dir,) = (pytester.path / "runs").iterdir()
    state = RunState.read(run_dir / "state.json")  # published through the reserve, for xdist workers too
    assert state is not None and state.phase == "failed" and "No space left on device" in state.message


def test_a_state_that_cannot_be_written_at_all_still_ends_the_owners_waits(
    pytester: pytest.Pytester, fake_gym: FakeGym, monkeypatch: pytest.MonkeyPatch, full_disk: threading.Event
) -> None:
    monkeypatch.setenv("FAKE_GYM_START", "fail")
    fill_once_gym_starts(monkeypatch, full_disk)
    monkeypatch.setattr(RunState, "_write_reserved", lambda self, path: False)  # no room even for the reserve
    started = time.monotonic()
    reprec = pytester.inline_run(
        *fake_gym.args, "--gym-run-dir=runs", f"--gym-startup-timeout={STARTUP_TIMEOUT}", two_tasks(pytester)
    )
    assert time.monotonic() - started < FAST
    errors = setup_errors(reprec)
    assert len(errors) == 2
    message = str(errors["mcqa.jsonl::t1[r0]"].longrepr)
    assert message.startswith("Gym would not start: `gym env start` exited with status 3 before its servers were")
    (run_dir,) = (pytester.path / "runs").iterdir()
    assert RunState.read(run_dir / "state.json") == RunState("starting")  # what the file still says


def test_a_final_state_goes_into_the_reserve_when_no_new_file_can_be_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "state.json"
    RunState.reserve(path)
    RunState("starting").write(path)

    def no_space(self: Path, *args: Any, **kwargs: Any) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", str(self))

    monkeypatch.setattr(Path, "write_text", no_space)
    with pytest.raises(OSError):
        RunState("running").write(path)  # only a final state may use the reserve (it is there once)
    RunState("failed", "x" * 10_000, "log").write(path)
    state = RunState.read(path)
    assert state is not None and state.phase == "failed" and state.message.startswith("xxx")
    assert path.stat().st_size == STATE_RESERVE
    with pytest.raises(OSError):
        RunState("finished").write(path)  # the reserve is used up


def wait_in_thread(feed: RolloutFeed, stamp: int) -> object:
    """``feed.wait(stamp)`` without a timeout, in a thread joined within 10 s: what it returned, or "still waiting"."""
    found: list[object] = []
    waiter = threading.Thread(target=lambda: found.append(feed.wait(stamp, None)), daemon=True)
    waiter.start()
    waiter.join(10)
    return found[0] if found else "still waiting"


def test_a_feed_that_dies_ends_every_wait_with_its_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    output, failures, state = tmp_path / "out.jsonl", tmp_path / "fail.jsonl", tmp_path / "state.json"
    RunState("running").write(state)
    output.write_text(json.dumps({"_ng_task_index": 0, "reward": 1.0}) + "\n")

    def broken(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("a bug while reading a line")

    monkeypatch.setattr(feed_module, "parse_record", broken)
    feed = RolloutFeed(output, failures, state).start()
    try:
        found = wait_in_thread(feed, 0)
    finally:
        feed.stop()
    assert found == Missing("following Gym's output files failed: RuntimeError: a bug while reading a line")


def test_the_owners_failure_ends_a_wait_the_state_file_never_ends(tmp_path: Path) -> None:
    output, failures, state = tmp_path / "out.jsonl", tmp_path / "fail.jsonl", tmp_path / "state.json"
    RunState("starting").write(state)
    failure: list[RunState] = []
    feed = RolloutFeed(output, failures, state, owner_state=lambda: failure[0] if failure else None).start()
    try:
        failure.append(RunState("failed", "OSError: [Errno 28] No space left on device", "gym.log"))
        found = wait_in_thread(feed, 0)
    finally:
        feed.stop()
    assert found == Missing("OSError: [Errno 28] No space left on device", "gym.log")
