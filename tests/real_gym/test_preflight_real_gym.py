"""Configuration errors found before Gym starts, against the real provisioned Gym (the stand-in's side:
tests/plugin/test_preflight.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_gym_eval import provision


def write_dataset(folder: Path, name: str, *task_ids: str) -> str:
    rows = [
        {"id": t, "responses_create_params": {"input": f"Question {t}?"}, "fake": {"reward": 1.0}} for t in task_ids
    ]
    (folder / name).write_text("".join(json.dumps(row) + "\n" for row in rows))
    return name


def test_real_gym_a_missing_agent_and_model_type_are_one_usage_error(
    pytester: pytest.Pytester, gym_checkout: provision.GymCheckout
) -> None:
    name = write_dataset(pytester.path, "mcq.jsonl", "a")  # mcq_simple_agent: Gym 0.7.0 has mcqa_simple_agent
    result = pytester.runpytest_subprocess(
        f"--gym-checkout={gym_checkout.path}",
        name,
        "--gym-model-type=anthropic",
        "--gym-model-url=http://127.0.0.1:9/v1",
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.errlines if "ERROR" in line or "--gym-model-type" in line]
    assert len(errors) == 2, result.errlines
    assert "'mcq_simple_agent' (used by mcq.jsonl)" in errors[0] and "the closest: mcqa_simple_agent" in errors[0]
    assert "no model server 'anthropic'" in errors[1] and "openai_model" in errors[1] and "vllm_model" in errors[1]
    assert not (pytester.path / "runs").exists() and "gym: starting" not in result.stdout.str()
