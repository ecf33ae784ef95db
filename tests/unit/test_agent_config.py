"""Which Gym config defines an agent (``pytest_gym_eval.gym.config.find_agent_config``) when several do."""

from __future__ import annotations

from pathlib import Path

from pytest_gym_eval.gym.config import find_agent_config

AGENT = "math_with_judge_simple_agent"


def write_config(checkout: Path, server: str, name: str, judge: str) -> Path:
    path = checkout / "resources_servers" / server / "configs" / f"{name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        f"{server}:\n  resources_servers:\n    {server}:\n      judge_model_server: {{name: {judge}}}\n"
        f"{AGENT}:\n  responses_api_agents:\n    simple_agent: {{}}\n"
    )
    return path


def test_the_resources_servers_own_config_wins_over_others_defining_the_same_agent(tmp_path: Path) -> None:
    """Gym 0.7.0's math_with_judge: dapo17k.yaml (its judge ``???``) sorts before math_with_judge.yaml, the config
    ``gym env start --resources-server math_with_judge`` loads; a session started the former and Gym refused it."""
    write_config(tmp_path, "math_with_judge", "dapo17k", "???")
    own = write_config(tmp_path, "math_with_judge", "math_with_judge", "policy_model")
    write_config(tmp_path, "math_with_judge", "math_stack_overflow", "???")
    assert find_agent_config(tmp_path, AGENT) == own
    assert find_agent_config(tmp_path, AGENT, "math_with_judge") == own


def test_without_an_own_config_the_first_by_name_defines_it(tmp_path: Path) -> None:
    first = write_config(tmp_path, "math_with_judge", "dapo17k", "policy_model")
    write_config(tmp_path, "math_with_judge", "math_stack_overflow", "???")
    assert find_agent_config(tmp_path, AGENT) == first
    assert find_agent_config(tmp_path, AGENT, "math_with_judge/math_stack_overflow") == (
        tmp_path / "resources_servers/math_with_judge/configs/math_stack_overflow.yaml"
    )
