"""``serving.serving``: Gym's servers started for sessions to attach to, with a stand-in ``gym``."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from pytest_gym_eval.core.rundir import RunPaths
from pytest_gym_eval.gym.processes import session_members
from pytest_gym_eval.gym.run import GymStartError, ModelEndpoint
from pytest_gym_eval.gym.standalone import serving
from pytest_gym_eval.provision import GymCheckout
from tests.support.children import started_processes
from tests.support.fakes import FakeGym

MODEL = ModelEndpoint("http://127.0.0.1:9/v1", "policy", "openai_model", "PYTEST_GYM_EVAL_TEST_NO_KEY")


def checkout_of(fake_gym: FakeGym) -> GymCheckout:
    return GymCheckout(fake_gym.checkout, fake_gym.checkout / ".venv" / "bin" / "gym", None, {})


def test_yields_the_head_server_and_stops_every_process(fake_gym: FakeGym, tmp_path: Path) -> None:
    root = tmp_path / "servers"
    with serving(checkout_of(fake_gym), MODEL, ["mcqa_simple_agent"], root, timeout=60) as (host, port):
        config = json.loads(RunPaths(root).config.read_text())
        (started,) = started_processes(root)
        assert session_members(started["pid"]), "gym env start is not running inside the block"
    assert (host, port) == (config["head_server"]["host"], config["head_server"]["port"])
    assert host == "127.0.0.1"
    assert not session_members(started["pid"])
    (call,) = fake_gym.calls()
    argv = call["argv"]
    assert isinstance(argv, list)
    assert argv[:2] == ["env", "start"]
    assert str(fake_gym.checkout / "resources_servers" / "mcqa" / "configs" / "mcqa.yaml") in argv


def test_stops_the_servers_when_the_block_raises(fake_gym: FakeGym, tmp_path: Path) -> None:
    root = tmp_path / "servers"
    with pytest.raises(KeyboardInterrupt), serving(checkout_of(fake_gym), MODEL, ["mcqa_simple_agent"], root, 60):
        (started,) = started_processes(root)
        raise KeyboardInterrupt
    assert not session_members(started["pid"])


def test_an_unknown_agent_is_an_error_naming_it_and_starts_nothing(fake_gym: FakeGym, tmp_path: Path) -> None:
    root = tmp_path / "servers"
    checkout = checkout_of(fake_gym)
    with pytest.raises(GymStartError, match="'nope_agent'"), serving(checkout, MODEL, ["nope_agent"], root):
        pass
    assert fake_gym.calls() == []
    assert not RunPaths(root).processes.exists()


def test_servers_that_never_get_ready_are_stopped(
    fake_gym: FakeGym, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_GYM_START", "fail")
    root = tmp_path / "servers"
    with pytest.raises(GymStartError), serving(checkout_of(fake_gym), MODEL, ["mcqa_simple_agent"], root, 60):
        pytest.fail("the block ran although Gym never got ready")
    (started,) = started_processes(root)
    assert not session_members(started["pid"])
    assert os.path.exists(RunPaths(root).logs / "gym-env-start.log")
