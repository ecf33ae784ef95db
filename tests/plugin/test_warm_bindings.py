"""A warm Gym (``--gym-keep-alive``) with bound model servers: the keeper serves the bindings (a replayed judge
from a replay server of its own), the bindings are part of its fingerprint (another judge, other recordings or
another key start another Gym), and no key or URL password reaches a file of the registry; through the stand-in
gym."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_gym_eval.replay import ReplayServer
from pytest_gym_eval.warm.registry import Entry, Registry
from tests.plugin.test_preflight import JUDGED_MCQA
from tests.plugin.test_warm import KEEP, env_starts, write_dataset
from tests.support.fakes import FakeGym


def entries(root: Path) -> list[Entry]:
    return Registry(root).entries()


@pytest.fixture
def judged(pytester: pytest.Pytester, fake_gym: FakeGym) -> str:
    (fake_gym.checkout / "resources_servers" / "mcqa" / "configs" / "mcqa.yaml").write_text(JUDGED_MCQA)
    judge = pytester.path / "judge.jsonl"
    judge.write_text(json.dumps({"responses_create_params": {"input": "Judge?"}, "response": {"output": []}}) + "\n")
    return write_dataset(pytester.path)


@pytest.fixture
def judge_endpoint(fake_gym: FakeGym) -> Iterator[ReplayServer]:
    with ReplayServer([fake_gym.recording]) as server:
        yield server


def bound_block(entry: Entry) -> dict[str, object]:
    config = json.loads((entry.home / "gym-policies.yaml").read_text())
    block: dict[str, object] = config["judge_model"]["responses_api_models"]["openai_model"]
    return block


def test_a_replayed_judge_is_served_by_the_keeper_and_another_binding_starts_another_gym(
    pytester: pytest.Pytester, fake_gym: FakeGym, warm_registry: Path, judged: str
) -> None:
    args = [*fake_gym.args, KEEP, "--gym-run-dir=runs", judged]
    pytester.runpytest(*args, "--gym-model-server=judge_model=replay:judge.jsonl").assert_outcomes(passed=3)
    (first,) = entries(warm_registry)
    block = bound_block(first)
    assert str(block["openai_base_url"]).startswith("http://127.0.0.1:") and block["openai_model"] == "replay"
    assert first.configuration["model_servers"]["judge_model"]["bound_to"] == "replay"
    assert len(first.configuration["model_servers"]["judge_model"]["replay_sha256"]) == 64

    again = pytester.runpytest(*args, "--gym-model-server=judge_model=replay:judge.jsonl")
    again.assert_outcomes(passed=3)
    again.stdout.fnmatch_lines([f"gym: attached to warm Gym {first.short} *"])
    assert entries(warm_registry) == [first] and len(env_starts(fake_gym)) == 1

    pytester.runpytest(*args, "--gym-model-server=judge_model=policy").assert_outcomes(passed=3)
    assert len(entries(warm_registry)) == 2 and len(env_starts(fake_gym)) == 2

    (pytester.path / "judge.jsonl").write_text("\n" + (pytester.path / "judge.jsonl").read_text())
    pytester.runpytest(*args, "--gym-model-server=judge_model=replay:judge.jsonl").assert_outcomes(passed=3)
    assert len(entries(warm_registry)) == 3  # edited recordings: another Gym


def test_a_bound_key_stays_in_its_variable_and_a_changed_one_starts_another_gym(
    pytester: pytest.Pytester,
    fake_gym: FakeGym,
    warm_registry: Path,
    judged: str,
    judge_endpoint: ReplayServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    secret = "sk-judge-warm-" + "s3cr3t" * 4
    monkeypatch.setenv("JUDGE_KEY", secret)
    binding = f"--gym-model-server=judge_model={judge_endpoint.base_url},model=j,key=JUDGE_KEY"
    args = [*fake_gym.args, KEEP, "--gym-run-dir=runs", judged, binding]
    first_run = pytester.runpytest(*args)
    first_run.assert_outcomes(passed=3)
    (first,) = entries(warm_registry)
    block = bound_block(first)
    assert block["openai_api_key"] == "${oc.env:JUDGE_KEY}"
    assert block["openai_base_url"] == judge_endpoint.base_url  # no secret in it (a URL's password is refused)
    assert first.configuration["model_servers"]["judge_model"]["api_key_env"] == "JUDGE_KEY"
    for folder, _, files in os.walk(warm_registry):
        for name in files:
            path = Path(folder) / name
            if not path.is_symlink():
                data = path.read_bytes()
                assert secret.encode() not in data, path
    assert secret not in first_run.stdout.str()

    pytester.runpytest(*args).assert_outcomes(passed=3)
    assert entries(warm_registry) == [first]  # the same key: attached

    monkeypatch.setenv("JUDGE_KEY", "sk-rotated-judge-key")
    rotated = pytester.runpytest(*args)
    rotated.assert_outcomes(passed=3)
    rotated.stdout.fnmatch_lines(
        [f"gym: warm Gym {first.short}: it was started with another value of $JUDGE_KEY for the model server *"]
    )
    assert "sk-rotated-judge-key" not in rotated.stdout.str() and secret not in rotated.stdout.str()
    (second,) = entries(warm_registry)
    assert second.key == first.key and second.keeper != first.keeper
