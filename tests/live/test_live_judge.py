"""A judge environment end to end with the local model as policy and as judge, then replayed with no model.

Gym 0.7.0's over_refusal_detection names a judge of its own (``judge_model``, a null ``${judge_base_url}`` in its
config). The live run binds it with ``--gym-model-server judge_model=URL,model=..,type=chat`` to the same llama.cpp
server (SmolLM2-135M-Instruct) that serves the policy; Gym's records then hold the policy's answers and each judge
call (``judge_evaluation``). From those records alone, made during the test (nothing of Gym's data or prompts is
stored in the repository), the same rows are replayed through real Gym: the policy from the run's
``rollouts.jsonl`` (``--gym-replay``) and the judge from ``python -m pytest_gym_eval judge-recordings``
(``judge_model=replay:FILE``), with no model and no key. Each row's reward must come back as the live run gave
it, and the judge's tokens must be reported apart from the policy's in both runs.

A 135M judge answers badly (it rarely writes a verdict, so most rows score Gym's ``reward_if_unclear``); what
this checks is that recorded equals replayed. The replay runs here rather than in the real-Gym tier because it
needs this tier's recordings, and `.ci/run` runs the real-Gym tier first.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jsonschema
import pytest

from pytest_gym_eval.gym.processes import session_members
from pytest_gym_eval.reporting.json_report import SCHEMA_PATH
from tests.support.children import started_processes
from tests.support.fault_proxy import FaultProxy, Rule
from tests.support.real_gym import with_environment

if TYPE_CHECKING:
    from pytest_gym_eval import provision
    from pytest_gym_eval.gym.local_model import LocalModelServer

ENVIRONMENT = "over_refusal_detection"
ROWS = 2
"""Rows of Gym's example rolled out (of 5): each costs a policy call and a judge call of ~960 prompt tokens."""
LAST_PART = "Now evaluate this response"
"""Where over_refusal_detection's judge prompt turns from its examples to the answer judged."""
MAX_OUTPUT_TOKENS = 48
"""The policy's output tokens per call (``--gym-max-output-tokens``), as in the rest of the tier."""
JUDGE_MAX_TOKENS = 48
"""The judge's output tokens per call. over_refusal_detection's config asks its judge for up to 1,024 (no option
of the plugin or of llama.cpp's server lowers that), which SmolLM2 fills with rambling: 30-45 s a call on a quiet
machine. A proxy between Gym's judge model server and the local model sets ``max_tokens`` to this."""


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def usage_sums(usages: list[dict[str, Any]]) -> dict[str, int]:
    """The report's ``tokens`` layout summed over Responses usage objects."""
    return {
        "input": sum(u["input_tokens"] for u in usages),
        "output": sum(u["output_tokens"] for u in usages),
        "total": sum(u["total_tokens"] for u in usages),
        "rollouts": len(usages),
    }


def verdicts(records: list[dict[str, Any]]) -> dict[str, str]:
    """Each record's safe prompt -> the text of its judge's answer (the last output item's last part)."""
    return {
        record["safe_prompt"]: record["judge_evaluation"]["response"]["output"][-1]["content"][-1]["text"]
        for record in records
    }


@pytest.fixture(scope="module")
def judge_checkout(gym_checkout: provision.GymCheckout) -> provision.GymCheckout:
    """The provisioned Gym with over_refusal_detection's server venv (built now when missing)."""
    return with_environment(gym_checkout, ENVIRONMENT)


def test_a_judge_environment_with_the_local_model_as_policy_and_judge_replays_with_no_model(
    pytester: pytest.Pytester,
    judge_checkout: provision.GymCheckout,
    local_model: LocalModelServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    example = judge_checkout.path / "resources_servers" / ENVIRONMENT / "data" / "example.jsonl"
    rows = read_jsonl(example)[:ROWS]
    dataset = pytester.path / f"{ENVIRONMENT}.jsonl"  # its agent: over_refusal_detection_simple_agent
    dataset.write_text("".join(json.dumps(row) + "\n" for row in rows))
    common = [
        f"--gym-checkout={judge_checkout.path}", "--gym-model-type=vllm_model", "--gym-temperature=0",
        f"--gym-max-output-tokens={MAX_OUTPUT_TOKENS}", "-p", "no:cacheprovider", "-rA", dataset.name,
    ]  # fmt: skip

    # The live run: policy and judge both the local model, the judge's calls through the capping proxy.
    cap = Rule("set_fields", path="/chat/completions", values={"max_tokens": JUDGE_MAX_TOKENS})
    with FaultProxy(local_model.base_url, [cap], timeout=600) as judge:
        live = pytester.runpytest_subprocess(
            *common, f"--gym-model-url={local_model.base_url}", f"--gym-model={local_model.model}",
            f"--gym-model-server=judge_model={judge.base_url},model={local_model.model},type=chat",
            "--gym-run-dir=live-runs", "--gym-report=live.json",
        )  # fmt: skip
        judged = [r for r in judge.seen() if r.method == "POST"]
    output = live.stdout.str()
    live_report = json.loads((pytester.path / "live.json").read_text())
    jsonschema.validate(live_report, json.loads(SCHEMA_PATH.read_text()))
    live_rewards = {r["task_id"]: r["reward"] for r in live_report["rollouts"]}
    assert len(live_rewards) == ROWS, output[-3000:]
    assert {r["status"] for r in live_report["rollouts"]} <= {"passed", "failed"}, output[-3000:]
    assert set(live_rewards.values()) <= {0.0, 0.5, 1.0}  # complied, refused, or no verdict (unclear)
    assert live.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED), output[-3000:]
    (live_run,) = (pytester.path / "live-runs").iterdir()

    # One judge call per rollout reached the judge's endpoint, each judging its row's prompt, all answered.
    assert [(r.path.endswith("/chat/completions"), r.status) for r in judged] == [(True, 200)] * ROWS, judged
    for row in rows:  # the prompt judged follows the template's examples (which judge the first row's prompt too)
        assert sum(row["safe_prompt"] in r.body.split(LAST_PART)[-1] for r in judged) == 1, (row, judged)
    records = read_jsonl(live_run / "gym-output" / "rollouts.jsonl")
    assert len(records) == ROWS
    calls = [record["judge_evaluation"] for record in records]
    assert all(call["response"] is not None and call["error"] is None for call in calls), calls
    assert all(call["response"]["usage"]["output_tokens"] <= JUDGE_MAX_TOKENS for call in calls)

    # The judge's tokens are reported apart from the policy's: each the sum of its own calls' usage in Gym's records.
    (summary,) = live_report["datasets"]
    judge_tokens = usage_sums([call["response"]["usage"] for call in calls])
    assert summary["tokens"]["judge"] == judge_tokens
    policy_tokens = usage_sums([record["response"]["usage"] for record in records])
    assert {k: v for k, v in summary["tokens"].items() if k != "judge"} == policy_tokens
    assert judge_tokens["input"] > policy_tokens["input"]  # the judge's prompt holds the policy's whole answer

    # The judge's calls, taken from the live run's records by the documented command.
    recorded = pytester.run(
        sys.executable, "-m", "pytest_gym_eval", "judge-recordings",
        str(live_run / "gym-output" / "rollouts.jsonl"), "-o", "judge.jsonl",
    )  # fmt: skip
    assert recorded.ret == 0 and f"{ROWS} judge calls written" in recorded.stdout.str(), recorded.stderr.str()

    # The replay: no model, no key; the policy from the run's rollouts, the judge from its recorded calls.
    for variable in [name for name in os.environ if name.endswith("_API_KEY")]:
        monkeypatch.delenv(variable)
    replayed = pytester.runpytest_subprocess(
        *common, f"--gym-replay={live_run / 'gym-output' / 'rollouts.jsonl'}",
        "--gym-model-server=judge_model=replay:judge.jsonl", "--gym-run-dir=replay-runs", "--gym-report=replayed.json",
    )  # fmt: skip
    replay_output = replayed.stdout.str()
    report = json.loads((pytester.path / "replayed.json").read_text())
    rewards = {r["task_id"]: r["reward"] for r in report["rollouts"]}
    assert rewards == live_rewards, replay_output[-3000:]
    assert replayed.ret == live.ret
    assert "verifier flips against the recording: none" in replay_output
    assert "has no recorded answer" not in replay_output
    (replay_run,) = (pytester.path / "replay-runs").iterdir()
    replayed_records = read_jsonl(replay_run / "gym-output" / "rollouts.jsonl")
    assert verdicts(replayed_records) == verdicts(records)  # the judge said, word for word, what it said live
    log = replay_run / "logs" / "replay-model-server-judge_model.jsonl"
    assert [json.loads(line)["status"] for line in log.read_text().splitlines() if '"POST"' in line] == [200] * ROWS
    (replay_summary,) = report["datasets"]
    assert replay_summary["tokens"]["judge"] == judge_tokens  # the recorded judge answers' own usage
    assert report["meta"]["model_server.judge_model.bound_to"] == "replay"

    for run in (live_run, replay_run):  # nothing of either run left running
        sessions = [process["sid"] for process in started_processes(run)]
        assert sessions and [sid for sid in sessions if session_members(sid)] == []
