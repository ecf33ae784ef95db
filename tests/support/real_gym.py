"""The real-Gym tier's fixtures: the provisioned Gym (``gym_checkout``), Gym's shipped examples (``gym_examples``,
``gym_example``, ``tool_example``), one started Gym shared by the tier (``shared_gym``), Gym's own verdicts on
the recorded answers (``gym_verdicts``), and a resources server's own ``verify`` (:func:`gym_verify`)."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.support import PROJECT_EXAMPLE, ROOT, SUPPORT

if TYPE_CHECKING:
    from pytest_gym_eval import provision

# The real-Gym tier: one provisioned Gym 0.7.0, one started Gym shared by every test that does not examine
# start-up or teardown, and Gym's own verdicts on the recorded answers.

GYM_EXAMPLES = {
    "mcqa": "mcqa_simple_agent",
    "example_single_tool_call": "example_single_tool_call_simple_agent",
    "circle_count": "circle_count_simple_agent",
}
"""Gym environments whose shipped examples the tier runs: multiple choice, a tool-calling agent whose recorded
conversations replay turn by turn (model call, real tool result, model answer), and images (rows that differ only
in their image)."""


WEATHER = ROOT / "examples" / "python-tests" / "recordings" / "weather_rollouts.jsonl"
"""Answers written for Gym's example_single_tool_call agent: examples/python-tests' cases and the weather examples of
docs/hooks-and-api.md."""


@dataclass(frozen=True)
class GymExample:
    """One of Gym's shipped examples in the provisioned checkout: tasks and a real model's recorded rollouts."""

    checkout: Path
    name: str
    agent: str

    @property
    def dataset(self) -> Path:
        return self.checkout / "resources_servers" / self.name / "data" / "example.jsonl"

    @property
    def recordings(self) -> Path:
        return self.checkout / "resources_servers" / self.name / "data" / "example_rollouts.jsonl"


@dataclass(frozen=True)
class SharedGym:
    """Gym's servers started once for the tier, with the replay model serving Gym's recorded answers and
    those of the project's mcqa example."""

    checkout: Path
    head_server: str
    replay_log: Path

    @property
    def args(self) -> list[str]:
        return [f"--gym-checkout={self.checkout}", f"--gym-head-server={self.head_server}"]


def with_environment(checkout: provision.GymCheckout, environment: str) -> provision.GymCheckout:
    """``checkout`` with ``environment``'s server venv provisioned (built now when missing)."""
    from pytest_gym_eval import provision

    if environment not in checkout.environments:
        version = checkout.version or provision.DEFAULT_GYM_VERSION
        provision.provision(version, checkout.path, environments=(environment,))
    return checkout


@pytest.fixture(scope="session")
def gym_checkout() -> provision.GymCheckout:
    """The provisioned Gym (``$PYTEST_GYM_EVAL_CHECKOUT``, else provisioned now, cached)."""
    from pytest_gym_eval import provision

    given = os.environ.get("PYTEST_GYM_EVAL_CHECKOUT")
    if given:
        return provision.load_checkout(Path(given))
    return provision.provision(environments=tuple(GYM_EXAMPLES))


@pytest.fixture(scope="session")
def gym_examples(gym_checkout: provision.GymCheckout) -> dict[str, GymExample]:
    return {name: GymExample(gym_checkout.path, name, agent) for name, agent in GYM_EXAMPLES.items()}


@pytest.fixture(scope="session")
def gym_example(gym_examples: dict[str, GymExample]) -> GymExample:
    """Gym's mcqa example: 5 tasks, a real model's recorded answers."""
    return gym_examples["mcqa"]


@pytest.fixture(scope="session")
def tool_example(gym_examples: dict[str, GymExample]) -> GymExample:
    """Gym's single-tool-call example: 5 tasks, recorded tool-calling conversations."""
    return gym_examples["example_single_tool_call"]


@pytest.fixture(scope="session")
def shared_gym(
    gym_checkout: provision.GymCheckout, gym_examples: dict[str, GymExample], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SharedGym]:
    from pytest_gym_eval.gym.run import ModelEndpoint
    from pytest_gym_eval.gym.standalone import serving
    from pytest_gym_eval.replay import ReplayServer

    root = tmp_path_factory.mktemp("shared-gym")
    replay_log = root / "replay-model.jsonl"
    examples = list(gym_examples.values())
    # Also the project's own mcqa example (examples/mcqa), whose questions are not Gym's, and the weather answers
    # written for examples/python-tests and the docs' weather examples.
    recordings = [e.recordings for e in examples] + [PROJECT_EXAMPLE / "recordings" / "mcqa_rollouts.jsonl", WEATHER]
    with ReplayServer(recordings, log_path=replay_log) as replay:
        model = ModelEndpoint(replay.base_url, "replay", "openai_model", "PYTEST_GYM_EVAL_NO_KEY")
        with serving(gym_checkout, model, [e.agent for e in examples], root) as (host, port):
            yield SharedGym(gym_checkout.path, f"{host}:{port}", replay_log)


@pytest.fixture(scope="session")
def gym_verdicts(
    gym_checkout: provision.GymCheckout, gym_example: GymExample, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, float]:
    """Gym's own ``gym eval reverify`` of the mcqa example's recorded answers: task id -> reward.

    (Gym refuses to reverify the tool-calling example, ``reverify_mode=UNSUPPORTED``: its reward depends on the
    live tool calls, so that example is checked against its recorded rewards instead.)

    The recordings carry no Gym indices, so each recorded rollout is paired with its dataset row by its last
    user message, and both are stamped with ``_ng_task_index`` = its position. Task ids follow the plugin's
    rule (the row's ``uuid``, else its hash), so the keys meet the items' ``task_id`` property.
    """
    import shutil

    from pytest_gym_eval import provision
    from pytest_gym_eval.gym.processes import GymProcess, free_port
    from pytest_gym_eval.gym.run import find_agent_config, ray_temp_dir
    from pytest_gym_eval.tasks.dataset import DEFAULT_ID_FIELDS, own_task_id, row_digest

    root = tmp_path_factory.mktemp("reverify")
    task_ids = []
    with (root / "inputs.jsonl").open("w") as inputs, (root / "rollouts.jsonl").open("w") as rollouts:
        for example in (gym_example,):
            rows = {_prompt(row): row for row in _read_jsonl(example.dataset)}
            agent_ref = {"type": "responses_api_agents", "name": example.agent}
            for recording in _read_jsonl(example.recordings):
                row = rows[_prompt(recording)]
                task_ids.append(own_task_id(row, DEFAULT_ID_FIELDS) or row_digest(row)[:12])
                stamps = {"_ng_task_index": len(task_ids) - 1, "_ng_rollout_index": 0, "agent_ref": agent_ref}
                inputs.write(json.dumps({**row, **stamps}) + "\n")
                rollouts.write(json.dumps({**recording, **stamps}) + "\n")
    (root / "cfg.yaml").write_text(json.dumps({
        "policy_base_url": "http://127.0.0.1:9/v1", "policy_model_name": "unused", "policy_api_key": "unused",
        "head_server": {"host": "127.0.0.1", "port": free_port()},
    }))  # fmt: skip
    ray_dir, made = ray_temp_dir(root)
    command = [str(gym_checkout.gym_executable), "eval", "reverify"]
    command += ["--config", str(find_agent_config(gym_checkout.path, gym_example.agent))]
    command += [
        "--model-type", "openai_model", "--config", str(root / "cfg.yaml"),
        "--inputs", str(root / "inputs.jsonl"), "--rollouts", str(root / "rollouts.jsonl"),
        "--output", str(root / "reverified.jsonl"),
        "+skip_venv_if_present=true", "+model_endpoint_readiness_timeout_seconds=0",
    ]  # fmt: skip
    # Gym's reverify leaves its servers running when it exits: end its whole process session afterwards.
    reverify = GymProcess(
        command, env=provision.gym_environment(gym_checkout, ray_dir), cwd=gym_checkout.path,
        log_path=root / "reverify.log", name="gym eval reverify",
    )  # fmt: skip
    status = reverify.wait(900)
    reverify.stop()
    if made:
        shutil.rmtree(ray_dir, ignore_errors=True)
    assert status == 0, (root / "reverify.log").read_text()[-3000:]
    verdicts = {task_ids[r["_ng_task_index"]]: float(r["reward"]) for r in _read_jsonl(root / "reverified.jsonl")}
    assert len(verdicts) == len(task_ids)
    return verdicts


def _read_jsonl(path: Path) -> list[dict]:  # type: ignore[type-arg]
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _prompt(row: dict) -> str:  # type: ignore[type-arg]
    """The last user message of a row's (or recording's) request."""
    messages = row["responses_create_params"]["input"]
    return str([m for m in messages if m.get("role") == "user"][-1]["content"])


GYM_VERIFIERS = {
    "mcqa": ("resources_servers.mcqa.app", "MCQAResourcesServer", "MCQAVerifyRequest"),
    "example_single_tool_call": (
        "resources_servers.example_single_tool_call.app", "SimpleWeatherResourcesServer", "BaseVerifyRequest",
    ),
}  # fmt: skip
"""Per resources server: the module, server class and request class of its ``verify`` (Gym 0.7.0)."""


def gym_verify(
    gym_checkout: provision.GymCheckout, resources_server: str, pairs: Sequence[tuple[dict[str, Any], dict[str, Any]]]
) -> list[float]:
    """The rewards a Gym resources server's own ``verify`` gives stored answers, in the order of ``pairs``.

    Each pair is ``(input row as Gym got it, the rollout's response)``. Runs tests/support/gym_verify.py in the
    server's own venv inside the checkout: Gym's verifier code on the same request body Gym sends it, with no
    server and no Ray started (``gym eval reverify`` starts both, and Gym refuses it for the tool-calling
    example). ``test_gym_verify_agrees_with_gym_eval_reverify`` checks it against ``gym eval reverify``.
    """
    module, server, request = GYM_VERIFIERS[resources_server]
    python = gym_checkout.path / "resources_servers" / resources_server / ".venv" / "bin" / "python"
    lines = "".join(json.dumps({"row": row, "response": response}) + "\n" for row, response in pairs)
    done = subprocess.run(
        [str(python), str(SUPPORT / "gym_verify.py"), module, server, request],
        input=lines, capture_output=True, text=True, cwd=gym_checkout.path, timeout=600,
        env={**os.environ, "PYTHONPATH": str(gym_checkout.path)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    rewards = [float(line) for line in done.stdout.splitlines()]
    assert len(rewards) == len(pairs), done.stdout
    return rewards
