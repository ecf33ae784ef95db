"""The Gym releases the plugin supports (``provision.SUPPORTED_GYM_VERSIONS``): a release outside the range is
refused, by ``provision --gym-version`` before anything is downloaded and by ``--gym-checkout`` before Gym
starts, with a message naming the range."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pytest_gym_eval import provision
from pytest_gym_eval.provision import ProvisionError, gym_version_problem, require_supported_gym

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
