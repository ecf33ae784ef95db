"""The provisioned Gym checkout itself (the fast tests of provisioning, against a stand-in sdist:
tests/plugin/test_provision.py)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from pytest_gym_eval import provision as prov
from pytest_gym_eval.provision import GymCheckout, gym_environment, load_checkout


def _manifest(checkout: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((checkout / ".pytest-gym-eval" / "manifest.json").read_text("utf-8"))
    return data


# ---------------------------------------------------------------------------------------------------------
# The real checkout


def test_real_checkout_runs_gym_version(
    tmp_path: Path, gym_checkout: GymCheckout, monkeypatch: pytest.MonkeyPatch
) -> None:
    checkout = load_checkout(gym_checkout.path)
    # Gym's modules are compiled once and cached in the checkout, even where the caller forbids writing bytecode.
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    cached = list((checkout.path / "nemo_gym" / "cli" / "__pycache__").glob("main.*.pyc"))
    for path in cached:
        path.unlink()
    result = subprocess.run(
        [str(checkout.gym_executable), "--version"],
        cwd=checkout.path,
        env=gym_environment(checkout, tmp_path / "ray"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert "0.7.0" in result.stdout
    assert list((checkout.path / "nemo_gym" / "cli" / "__pycache__").glob("main.*.pyc"))


def test_real_environments_not_named_after_their_configs_are_provisioned(gym_checkout: GymCheckout) -> None:
    from pytest_gym_eval.gym.run import find_agent_config

    path = gym_checkout.path
    environments = ["equivalence_rule", "format_verification"]
    checkout = prov.provision(gym_checkout.version or prov.DEFAULT_GYM_VERSION, path, environments)
    assert set(environments) <= set(checkout.environments)
    manifest = _manifest(path)
    assert manifest["environment_configs"]["equivalence_rule"] == ["resources_servers/equivalence_rule/configs/lc.yaml"]
    assert manifest["environment_configs"]["format_verification"] == [
        "resources_servers/format_verification/configs/citation_format.yaml",
        "resources_servers/format_verification/configs/freeform_formatting.yaml",
    ]
    for folder in ("resources_servers/equivalence_rule", "resources_servers/format_verification"):
        assert (path / folder / ".venv" / "bin" / "python").exists(), folder
    # The configs prefetched are the ones the plugin's `gym env start` loads for the agents of Gym's examples.
    for name in environments:
        rows = (path / "resources_servers" / name / "data" / "example.jsonl").read_text("utf-8").splitlines()
        for agent in {json.loads(row)["agent_ref"]["name"] for row in rows}:
            assert find_agent_config(path, agent) in prov.environment_configs(path, name), agent
