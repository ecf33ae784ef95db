"""The stand-in Gym checkout whose ``gym`` command is ``tests/support/fake_gym.py`` (fast tests of the plugin's
error paths), a one-rollout replay recording, and a warm-Gym registry of a test's own. Fixtures: ``fake_gym``,
``warm_registry``."""

from __future__ import annotations

import json
import stat
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support import SUPPORT


@dataclass
class FakeGym:
    """A stand-in Gym checkout: ``args`` point the plugin at it; ``calls()`` lists the gym invocations."""

    checkout: Path
    calls_path: Path
    recording: Path

    @property
    def args(self) -> list[str]:
        return [f"--gym-checkout={self.checkout}", f"--gym-replay={self.recording}", "-p", "no:cacheprovider"]

    def calls(self) -> list[dict[str, object]]:
        if not self.calls_path.exists():
            return []
        return [json.loads(line) for line in self.calls_path.read_text().splitlines()]


def make_fake_checkout(root: Path, environments: tuple[str, ...] = ("mcqa",), version: str = "0.7.0") -> Path:
    """Create a directory that looks like a Gym checkout of Gym ``version`` whose ``gym`` is the stand-in script
    (which pretends to be that release)."""
    checkout = root / "fake-gym-checkout"
    (checkout / "nemo_gym").mkdir(parents=True)
    (checkout / "nemo_gym" / "__init__.py").write_text("")
    (checkout / "pyproject.toml").write_text(f'[project]\nname = "nemo-gym"\nversion = "{version}"\n')
    gym = checkout / ".venv" / "bin" / "gym"
    gym.parent.mkdir(parents=True)
    gym.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{SUPPORT / "fake_gym.py"}" "$@"\n')
    gym.chmod(gym.stat().st_mode | stat.S_IXUSR)
    for name in environments:
        configs = checkout / "resources_servers" / name / "configs"
        configs.mkdir(parents=True)
        (configs / f"{name}.yaml").write_text(
            f"{name}:\n  resources_servers:\n    {name}:\n      entrypoint: app.py\n"
            f"{name}_simple_agent:\n  responses_api_agents:\n    simple_agent:\n      entrypoint: app.py\n"
        )
    return checkout


def write_recording(path: Path) -> Path:
    """A one-rollout recording so the replay model server has something to serve."""
    record = {
        "responses_create_params": {"input": [{"role": "user", "content": "ping"}]},
        "response": {
            "id": "r",
            "created_at": 0,
            "model": "m",
            "object": "response",
            "output": [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "pong"}]}],
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
        },
        "reward": 1.0,
    }
    path.write_text(json.dumps(record) + "\n")
    return path


@pytest.fixture
def fake_gym(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeGym:
    """A stand-in Gym checkout plus a replay recording; the fake records its calls."""
    calls = tmp_path / "fake-gym-calls.jsonl"
    monkeypatch.setenv("FAKE_GYM_CALLS", str(calls))
    checkout = make_fake_checkout(tmp_path)
    return FakeGym(checkout, calls, write_recording(tmp_path / "recording_rollouts.jsonl"))


@pytest.fixture
def warm_registry(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A registry of warm Gyms (``--gym-keep-alive``) of this test's own (``$PYTEST_GYM_EVAL_WARM``, which the
    pytest runs it starts inherit), so tests running at once never see each other's warm Gyms; every warm Gym
    in it is stopped afterwards (``python -m pytest_gym_eval stop --all``)."""
    from pytest_gym_eval.cli.stop import main as stop_main

    root = tmp_path_factory.mktemp("warm-registry")
    monkeypatch.setenv("PYTEST_GYM_EVAL_WARM", str(root))
    try:
        yield root
    finally:
        stop_main(["--all", "--grace", "30"])
