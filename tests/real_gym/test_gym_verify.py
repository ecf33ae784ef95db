"""The live tier's ``gym_verify`` (Gym's own ``verify`` run on stored answers, no servers) gives what Gym itself
gives: ``gym eval reverify``'s verdicts for mcqa, and the recorded rewards for the tool-calling example (which
Gym refuses to reverify)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pytest_gym_eval import provision
from tests.support.real_gym import GymExample, gym_verify


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def last_user_message(row: dict[str, Any]) -> str:
    return str([m for m in row["responses_create_params"]["input"] if m.get("role") == "user"][-1]["content"])


def recorded_pairs(example: GymExample) -> tuple[list[tuple[dict[str, Any], dict[str, Any]]], list[dict[str, Any]]]:
    """Each recorded rollout's dataset row (stamped as Gym stamps its inputs) with its response, and the
    recordings themselves."""
    rows = {last_user_message(row): row for row in read_jsonl(example.dataset)}
    recordings = read_jsonl(example.recordings)
    agent_ref = {"type": "responses_api_agents", "name": example.agent}
    pairs = []
    for index, recording in enumerate(recordings):
        row = {**rows[last_user_message(recording)], "_ng_task_index": index, "_ng_rollout_index": 0}
        pairs.append(({**row, "agent_ref": agent_ref}, recording["response"]))
    return pairs, recordings


def test_gym_verify_agrees_with_gym_eval_reverify(
    gym_checkout: provision.GymCheckout, gym_example: GymExample, gym_verdicts: dict[str, float]
) -> None:
    pairs, _ = recorded_pairs(gym_example)
    verdicts = dict(zip([row["uuid"] for row, _ in pairs], gym_verify(gym_checkout, "mcqa", pairs), strict=True))
    assert verdicts == gym_verdicts
    assert set(verdicts.values()) == {0.0, 1.0}


def test_gym_verify_gives_the_tool_calling_examples_recorded_rewards(
    gym_checkout: provision.GymCheckout, tool_example: GymExample
) -> None:
    pairs, recordings = recorded_pairs(tool_example)
    rewards = gym_verify(gym_checkout, "example_single_tool_call", pairs)
    assert rewards == [float(recording["reward"]) for recording in recordings]
    # Both verdicts occur when a recording without the tool call is added (the example's are all 1.0).
    row, response = pairs[0]
    without_call = {**response, "output": [item for item in response["output"] if item.get("type") != "function_call"]}
    assert gym_verify(gym_checkout, "example_single_tool_call", [(row, without_call)]) == [0.0]
