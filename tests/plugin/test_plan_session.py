"""The run plan in pytest sessions against the stand-in ``gym`` (the plan alone: tests/unit/test_plan.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.support.fakes import FakeGym


def gym_input_shape(pytester: pytest.Pytester, *args: str) -> tuple[int, str]:
    """Run a session against the stand-in gym; (rows of Gym's input, its --num-repeats)."""
    rows = [{"id": f"t{t}", "responses_create_params": {"input": [{"role": "user", "content": "ping"}]}} for t in "ab"]
    (pytester.path / "mcqa.jsonl").write_text("".join(json.dumps({**row, "fake": {}}) + "\n" for row in rows))
    pytester.runpytest_subprocess(*args, "mcqa.jsonl", "--gym-repeats=2", "--gym-run-dir=runs")
    (run_dir,) = (pytester.path / "runs").iterdir()
    calls = [json.loads(line) for line in Path(os.environ["FAKE_GYM_CALLS"]).read_text().splitlines()]
    (argv,) = [call["argv"] for call in calls if call["argv"][:2] == ["eval", "run"]]
    return len((run_dir / "gym-input.jsonl").read_text().splitlines()), argv[argv.index("--num-repeats") + 1]


def test_whole_tasks_when_each_replayed_conversation_has_one_recording(
    pytester: pytest.Pytester, fake_gym: FakeGym
) -> None:
    assert gym_input_shape(pytester, *fake_gym.args) == (2, "2")


def test_a_conversation_recorded_twice_needs_a_row_per_repeat(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    """The replay model tells the repeats of a conversation recorded several times apart by a tag on each row."""
    record = fake_gym.recording.read_text()
    fake_gym.recording.write_text(record + record.replace('"pong"', '"pong again"'))
    assert gym_input_shape(pytester, *fake_gym.args) == (4, "1")


def test_a_seed_per_repeat_needs_a_row_per_repeat(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    args = [*fake_gym.args, "--gym-seed=5", "--gym-model-type=vllm_model"]
    assert gym_input_shape(pytester, *args) == (4, "1")
