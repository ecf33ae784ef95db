"""The Gym releases the plugin supports (``provision.SUPPORTED_GYM_VERSIONS``): a release outside the range is
refused, by ``provision --gym-version`` before anything is downloaded and by ``--gym-checkout`` before Gym
starts, with a message naming the range. What differs between the releases in the range: Gym 0.6.x has no
environment servers (``--gym-policy`` and ``gym_run_row`` work without them), and Gym 0.7.0 bounds its own start
(``server_spinup_timeout_seconds``), which ``--gym-startup-timeout`` sets."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_gym_eval import provision
from pytest_gym_eval.gym.servers import start_timeouts
from pytest_gym_eval.provision import (
    ProvisionError,
    gym_version_problem,
    has_environment_servers,
    require_supported_gym,
)
from tests.plugin.test_policies_session import REWARDS, policy_args, write_dataset
from tests.support.fakes import FakeGym

RANGE = "NeMo Gym 0.6.0 to 0.7.x (>=0.6.0, <0.8)"


@pytest.mark.parametrize("version", ["0.6.0", "0.6.1", "0.7.0", "0.7.1rc2", "0.7.3.post1", "v0.7.0", "0.6"])
def test_releases_inside_the_range_are_supported(version: str) -> None:
    assert gym_version_problem(version) is None
    require_supported_gym(version, "--gym-version")


@pytest.mark.parametrize("version", ["0.5.1", "0.5.0", "0.4.0", "0.6.0rc1", "0.8.0", "0.8.0rc0", "1.0.0", "main"])
def test_releases_outside_the_range_are_refused_naming_it(version: str) -> None:
    problem = gym_version_problem(version)
    assert problem is not None and RANGE in problem
    with pytest.raises(ProvisionError) as info:
        require_supported_gym(version, "--gym-version")
    message = str(info.value)
    assert message.startswith("--gym-version: ") and version in message and RANGE in message
    assert "provision --gym-version 0.7.0" in message


@pytest.mark.parametrize(("version", "supported"), [("0.6.0.1", True), ("0.6.0-1", True), ("0.7.0abc", False)])
def test_release_numbers_are_compared_as_pep_440_versions(version: str, supported: bool) -> None:
    # 0.6.0.1 is after 0.6.0 and 0.6.0-1 is its post-release 0.6.0.post1; 0.7.0abc is no version at all.
    assert (gym_version_problem(version) is None) is supported


def test_a_checkout_of_unknown_version_is_accepted() -> None:
    require_supported_gym(None, "--gym-checkout /somewhere")


def test_the_default_and_the_oldest_release_are_in_the_range() -> None:
    assert gym_version_problem(provision.DEFAULT_GYM_VERSION) is None
    assert gym_version_problem(provision.OLDEST_GYM_VERSION) is None


def test_provision_refuses_an_unsupported_release_before_anything_else(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTEST_GYM_EVAL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")  # never asked: the refusal comes first
    with pytest.raises(ProvisionError, match=r"Gym 0\.5\.1 is not supported"):
        provision.provision("0.5.1", log=lambda line: None)
    assert not (tmp_path / "cache").exists()


def test_the_provision_command_refuses_an_unsupported_release(tmp_path: Path) -> None:
    env = {"PYTEST_GYM_EVAL_CACHE": str(tmp_path / "cache"), "PIP_INDEX_URL": "http://127.0.0.1:9/simple"}
    result = subprocess.run(
        [sys.executable, "-m", "pytest_gym_eval", "provision", "--gym-version", "0.5.1"],
        capture_output=True, text=True, timeout=120, env={**__import__("os").environ, **env},
    )  # fmt: skip
    assert result.returncode == 1, result.stderr
    assert f"error: --gym-version: Gym 0.5.1 is not supported: this pytest-gym-eval supports {RANGE}" in result.stderr
    assert result.stdout == ""


def _own_checkout(root: Path, version: str) -> Path:
    """A user's own Gym clone (no manifest) whose pyproject says ``version``; its ``gym`` must never run."""
    checkout = root / "gym-clone"
    (checkout / "nemo_gym").mkdir(parents=True)
    (checkout / ".venv" / "bin").mkdir(parents=True)
    gym = checkout / ".venv" / "bin" / "gym"
    gym.write_text('#!/bin/sh\necho ran >> "$(dirname "$0")/ran"\nexit 3\n', encoding="utf-8")
    gym.chmod(0o755)
    (checkout / "pyproject.toml").write_text(f'[project]\nname = "nemo-gym"\nversion = "{version}"\n', "utf-8")
    return checkout


def test_load_supported_checkout_refuses_a_clone_outside_the_range(tmp_path: Path) -> None:
    checkout = _own_checkout(tmp_path, "0.5.1")
    with pytest.raises(ProvisionError) as info:
        provision.load_supported_checkout(checkout)
    assert str(info.value).startswith(f"--gym-checkout {checkout}: Gym 0.5.1 is not supported")
    assert RANGE in str(info.value)
    (checkout / "pyproject.toml").write_text('[project]\nname = "nemo-gym"\nversion = "0.6.0"\n', "utf-8")
    assert provision.load_supported_checkout(checkout).version == "0.6.0"


def test_a_session_with_a_checkout_outside_the_range_errors_naming_it(pytester: pytest.Pytester) -> None:
    checkout = _own_checkout(pytester.path, "0.5.1")
    pytester.makefile(".jsonl", data='{"id": "a", "responses_create_params": {"input": "q"}}\n')
    result = pytester.runpytest_subprocess(f"--gym-checkout={checkout}", "data.jsonl", "-p", "no:cacheprovider")
    assert result.ret != 0
    output = result.stdout.str() + result.stderr.str()
    assert f"--gym-checkout {checkout}: Gym 0.5.1 is not supported" in output, output
    assert RANGE in output
    assert not (checkout / ".venv" / "bin" / "ran").exists()  # Gym was never started


@pytest.mark.parametrize(
    ("version", "fronted"),
    [("0.6.0", False), ("0.6.3.post1", False), ("0.7.0rc1", True), ("0.7.0", True), ("0.7.2", True), (None, True)],
)
def test_environment_servers_exist_from_gym_0_7_0(version: str | None, fronted: bool) -> None:
    # 0.6.x has no environment servers (its agent servers take POST /run); a version that cannot be read counts
    # as the newest, as such a checkout is let through.
    assert has_environment_servers(version) is fronted


@pytest.mark.parametrize(("timeout", "seconds"), [(900.0, 900), (1800.5, 1801), (30.0, 30), (0.0, 1)])
def test_gyms_own_start_up_bounds_are_set_to_the_startup_timeout(timeout: float, seconds: int) -> None:
    # Gym 0.7.0 gives its servers 600 s and the model endpoints 600 s by default, cutting any longer
    # --gym-startup-timeout; 0 would mean no bound to Gym.
    assert start_timeouts(timeout) == [
        f"++server_spinup_timeout_seconds={seconds}",
        f"++model_endpoint_readiness_timeout_seconds={seconds}",
    ]


def pretend(fake_gym: FakeGym, version: str) -> None:
    """Make the stand-in Gym's checkout (and so the stand-in itself) Gym ``version``."""
    (fake_gym.checkout / "pyproject.toml").write_text(f'[project]\nname = "nemo-gym"\nversion = "{version}"\n')


def test_policies_on_gym_0_6_are_served_without_environment_servers(
    pytester: pytest.Pytester, fake_gym: FakeGym
) -> None:
    # The stand-in pretending 0.6.0 exits at start on a config naming an environment server, as 0.6.0 has none.
    pretend(fake_gym, "0.6.0")
    write_dataset(pytester)
    result = pytester.runpytest_subprocess(*policy_args(fake_gym), "mcqa.jsonl", "--gym-run-dir=runs", "-rA")
    outcomes = {line.split()[1]: line.split()[0] for line in result.outlines if line.startswith(("PASSED ", "FAILED "))}
    assert outcomes == {
        f"mcqa.jsonl::{task}[r0-{policy}]": "PASSED" if reward == 1.0 else "FAILED"
        for task, rewards in REWARDS.items()
        for policy, reward in zip(("base", "cand"), rewards.values(), strict=True)
    }, result.stdout.str()[-2000:]
    (run_dir,) = (pytester.path / "runs").iterdir()
    assert sorted(json.loads((run_dir / "gym-policies.yaml").read_text())) == [
        "cand_policy_model",
        "mcqa_simple_agent__cand",
    ]


ON_DEMAND = """
def test_row(gym_run_row):
    rollout = gym_run_row({"responses_create_params": {"input": "hi"}, "fake": {"reward": 1.0}})
    assert rollout.reward == 1.0
    assert rollout.output_text == "fake answer to /a/mcqa/run"  # the agent server's own /run
"""


def test_a_row_rolled_out_on_demand_on_gym_0_6_goes_to_the_agent_server(
    pytester: pytest.Pytester, fake_gym: FakeGym
) -> None:
    pretend(fake_gym, "0.6.0")
    pytester.makepyfile(test_rows_on_demand=ON_DEMAND)
    result = pytester.runpytest_subprocess(*fake_gym.args, "--gym-agent=mcqa_simple_agent", "-rA")
    result.assert_outcomes(passed=1)


def test_gym_env_start_gets_the_startup_timeout_as_its_own_start_up_bounds(
    pytester: pytest.Pytester, fake_gym: FakeGym
) -> None:
    pytester.makefile(".jsonl", mcqa='{"id": "a", "responses_create_params": {"input": "q"}}\n')
    result = pytester.runpytest_subprocess(*fake_gym.args, "mcqa.jsonl", "--gym-startup-timeout=1800")
    result.assert_outcomes(passed=1)
    (start,) = [call["argv"] for call in fake_gym.calls() if call["argv"][:2] == ["env", "start"]]  # type: ignore[index]
    assert "++server_spinup_timeout_seconds=1800" in start
    assert "++model_endpoint_readiness_timeout_seconds=1800" in start
    (run,) = [call["argv"] for call in fake_gym.calls() if call["argv"][:2] == ["eval", "run"]]  # type: ignore[index]
    assert not [arg for arg in run if "timeout_seconds" in str(arg)]  # `gym eval run` starts no server


def test_a_failed_start_quotes_the_exception_line_not_the_chatter_after_it(
    pytester: pytest.Pytester, fake_gym: FakeGym, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_GYM_START", "traceback")  # a traceback, then Gym's shutdown chatter
    pytester.makefile(".jsonl", mcqa='{"id": "a", "responses_create_params": {"input": "q"}}\n')
    result = pytester.runpytest_subprocess(*fake_gym.args, "mcqa.jsonl", "-rA")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [
            "*`gym env start` exited with status 1 before its servers were ready: ValueError: the policy model's "
            "base URL has no scheme (*/logs/gym-env-start.log:5)",
            "log: */logs/gym-env-start.log",
        ]
    )
    assert "NeMo Gym finished!" not in result.stdout.str()
