"""The live-model tier: a real small instruction-tuned model (SmolLM2-135M-Instruct) behind llama.cpp's own
OpenAI-compatible server on 127.0.0.1 (fixture ``local_model``), evaluated by real Gym 0.7.0 through the plugin.

Nothing here is recorded: every answer is the model's, produced during the test. Expected rewards come from
Gym's own verifiers applied to those answers (fixture helper ``gym_verify``), expected token counts from Gym's
own rollout records. Generation is bounded with ``--gym-max-output-tokens`` so the tier takes minutes, not the
ten a free-running 135M model needs. Each test lets the plugin start and stop Gym itself, as a user's run does.
"""

from __future__ import annotations

import json
import re
import shutil
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from pytest_gym_eval import provision
from pytest_gym_eval.gym.local_model import LocalModelServer
from pytest_gym_eval.gym.processes import session_members
from pytest_gym_eval.reporting.json_report import SCHEMA_PATH
from tests.support.children import gym_commands, started_processes
from tests.support.fault_proxy import FaultProxy
from tests.support.real_gym import GymExample, gym_verify

MAX_OUTPUT_TOKENS = 48
"""Output tokens per model call: enough for a short answer with ``\\boxed{X}`` or a tool call, and a 135M
model's rambling ends there (unbounded, some answers ran to ~1,000 tokens)."""

LETTERS = Path(__file__).parents[2] / "examples" / "local-model" / "datasets" / "letters.jsonl"
"""Six questions simple enough that SmolLM2-135M answers some of them right, graded by the letter its answer starts
with (Gym mcqa's ``template_metadata.output_regex``): Gym's own mcqa example gets no right answer from it (it never
writes ``\\boxed{}``), and rewards that are all 0.0 would not show that a right answer's reward reaches its item."""


def copy_letters(pytester: pytest.Pytester) -> str:
    """:data:`LETTERS` as ``letters/mcqa.jsonl`` (the name picks the agent ``mcqa_simple_agent``)."""
    target = pytester.path / "letters" / "mcqa.jsonl"
    target.parent.mkdir(exist_ok=True)
    shutil.copy(LETTERS, target)
    return "letters/mcqa.jsonl"


def copy_example(pytester: pytest.Pytester, example: GymExample) -> str:
    """Gym's example tasks as ``datasets/<environment>.jsonl`` (the name picks the agent)."""
    target = pytester.path / "datasets" / f"{example.name}.jsonl"
    target.parent.mkdir(exist_ok=True)
    shutil.copy(example.dataset, target)
    return f"datasets/{example.name}.jsonl"


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def live_args(checkout: provision.GymCheckout, model: LocalModelServer, *extra: str) -> list[str]:
    return [
        f"--gym-checkout={checkout.path}", f"--gym-model-url={model.base_url}", f"--gym-model={model.model}",
        f"--gym-max-output-tokens={MAX_OUTPUT_TOKENS}", "--gym-run-dir=runs", "--gym-report=report.json",
        "--junitxml=junit.xml", "-p", "no:cacheprovider", "-rA", *extra,
    ]  # fmt: skip


def error_texts(junit: Path) -> dict[str, str]:
    """Node name -> the error text of every testcase that errored."""
    found = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        error = case.find("error")
        if error is not None:
            found[case.get("name", "")] = f"{error.get('message', '')}\n{error.text or ''}"
    return found


def assert_scored_or_named(report: Mapping[str, Any], junit: Path) -> None:
    """Every rollout is scored (a reward) or an error with a failure class and a text that names its cause,
    never a bare HTTP 500 without the log line that explains it."""
    errors = error_texts(junit)
    for rollout in report["rollouts"]:
        name = rollout["nodeid"].split("::", 1)[1]
        if rollout["status"] in ("passed", "failed"):
            assert isinstance(rollout["reward"], float), rollout
            continue
        text = errors[name]
        assert rollout["failure_class"] and text.strip(), (rollout, text)
        if "Internal Server Error" in text:
            assert re.search(r"log: \S+:\d+", text), f"a bare 500:\n{text}"


def assert_nothing_left(run_dir: Path) -> None:
    sessions = [process["sid"] for process in started_processes(run_dir)]
    assert sessions and [sid for sid in sessions if session_members(sid)] == []


def records_by_agent(run_dir: Path) -> dict[str, list[dict[str, Any]]]:
    """Gym's rollout records (output and failures files) by agent name."""
    found: dict[str, list[dict[str, Any]]] = {}
    for name in ("rollouts.jsonl", "rollouts_failures.jsonl"):
        for record in read_jsonl(run_dir / "gym-output" / name):
            found.setdefault(record["agent_ref"]["name"], []).append(record)
    return found


def usage_sums(records: list[dict[str, Any]]) -> dict[str, int]:
    sums = {"input": 0, "output": 0, "total": 0, "rollouts": 0}
    for record in records:
        usage = (record.get("response") or {}).get("usage")
        if not usage:
            continue
        sums["rollouts"] += 1
        for key in ("input", "output", "total"):
            sums[key] += usage[f"{key}_tokens"]
    return sums


def test_chat_completions_model_is_scored_by_gyms_verifiers_with_its_own_tokens(
    pytester: pytest.Pytester,
    gym_checkout: provision.GymCheckout,
    gym_examples: dict[str, GymExample],
    local_model: LocalModelServer,
    tmp_path: Path,
) -> None:
    mcqa, tools = gym_examples["mcqa"], gym_examples["example_single_tool_call"]
    datasets = [copy_example(pytester, mcqa), copy_letters(pytester), copy_example(pytester, tools)]
    result = pytester.runpytest(
        *live_args(gym_checkout, local_model, "--gym-model-type=vllm_model", "--gym-temperature=0", "--gym-seed=7"),
        *datasets,
    )
    output = result.stdout.str()
    (run_dir,) = (pytester.path / "runs").iterdir()
    report = json.loads((pytester.path / "report.json").read_text())
    jsonschema.validate(report, json.loads(SCHEMA_PATH.read_text()))
    assert len(report["rollouts"]) == 16, output[-3000:]
    assert_scored_or_named(report, pytester.path / "junit.xml")
    assert_nothing_left(run_dir)

    # The sampling options reached Gym: in every materialized request, and as a bound on every answer.
    materialized = read_jsonl(run_dir / "gym-output" / "rollouts_materialized_inputs.jsonl")
    assert len(materialized) == 16
    for row in materialized:
        params = row["responses_create_params"]
        assert params["temperature"] == 0.0 and params["max_output_tokens"] == MAX_OUTPUT_TOKENS
        assert json.loads(params["metadata"]["extra_body"]) == {"seed": 7}
    records = records_by_agent(run_dir)
    for record in records.get(mcqa.agent, []):  # one model call per mcqa rollout
        assert record["response"]["usage"]["output_tokens"] <= MAX_OUTPUT_TOKENS
    meta = report["meta"]
    assert (meta["model_type"], meta["sampling.temperature"], meta["sampling.seed"]) == ("vllm_model", 0.0, 7)

    # Each scored rollout's reward is what Gym's own verifier gives the model's answer.
    inputs = {row["_ng_task_index"]: row for row in materialized}
    output_file = run_dir / "gym-output" / "rollouts.jsonl"
    scored = {f"{output_file}:{number}": record for number, record in enumerate(read_jsonl(output_file), 1)}
    rewards = {r["record"]: r["reward"] for r in report["rollouts"] if r["status"] != "error"}
    assert set(rewards) == set(scored)
    by_dataset: dict[str, list[float]] = {}
    for server, agent in (("mcqa", mcqa.agent), ("example_single_tool_call", tools.agent)):
        mine = [location for location, record in scored.items() if record["agent_ref"]["name"] == agent]
        pairs = [(inputs[scored[location]["_ng_task_index"]], scored[location]["response"]) for location in mine]
        for location, verdict in zip(mine, gym_verify(gym_checkout, server, pairs), strict=True):
            assert rewards[location] == verdict, location
            dataset = next(r["dataset"] for r in report["rollouts"] if r["record"] == location)
            by_dataset.setdefault(dataset, []).append(verdict)
    assert {0.0, 1.0} <= set(by_dataset["letters/mcqa.jsonl"]), (
        "SmolLM2 must answer some of the letters questions right and some wrong for the check to mean anything: "
        f"{by_dataset}"
    )

    # Token totals in the summary are the sums over Gym's own records, per dataset and per rollout.
    totals = {d["dataset"]: d["tokens"] for d in report["datasets"]}
    for dataset in datasets:
        mine = [scored[r["record"]] for r in report["rollouts"] if r["dataset"] == dataset and r["record"] in scored]
        assert totals[dataset] == usage_sums(mine), dataset
    assert totals["datasets/mcqa.jsonl"]["output"] > 0
    for rollout in report["rollouts"]:
        if rollout["record"] in scored:
            usage = scored[rollout["record"]]["response"]["usage"]
            assert (rollout["input_tokens"], rollout["output_tokens"]) == (
                usage["input_tokens"],
                usage["output_tokens"],
            )
    mcqa_tokens = totals["datasets/mcqa.jsonl"]
    assert f"{mcqa_tokens['total']:,} total: {mcqa_tokens['input']:,} in, {mcqa_tokens['output']:,} out" in output


def test_responses_api_incompatibility_is_an_item_error_naming_the_validation_error_and_log_line(
    pytester: pytest.Pytester,
    gym_checkout: provision.GymCheckout,
    gym_examples: dict[str, GymExample],
    local_model: LocalModelServer,
) -> None:
    # Gym's openai_model server validates the endpoint's Responses body as a NeMoGymResponse; llama.cpp's
    # /v1/responses leaves out parallel_tool_calls, tool_choice, tools and usage.output_tokens_details, so Gym
    # rejects every answer and its agent reports a bare HTTP 500. The item must say why, and where it is logged.
    dataset = copy_example(pytester, gym_examples["mcqa"])
    result = pytester.runpytest(*live_args(gym_checkout, local_model), dataset)
    (run_dir,) = (pytester.path / "runs").iterdir()
    report = json.loads((pytester.path / "report.json").read_text())
    assert_scored_or_named(report, pytester.path / "junit.xml")
    assert_nothing_left(run_dir)
    result.assert_outcomes(errors=5)
    assert {r["failure_class"] for r in report["rollouts"]} == {"model_bad_response"}
    for name, text in error_texts(pytester.path / "junit.xml").items():
        cause = "policy model: response rejected by Gym (ValidationError: 4 validation errors for NeMoGymResponse"
        assert cause in text, f"{name}:\n{text}"
        for field in ("parallel_tool_calls", "tool_choice", "tools", "usage.output_tokens_details"):
            assert field in text, f"{name}:\n{text}"
        found = re.search(r"log: (\S+):(\d+)", text)
        assert found, f"{name}:\n{text}"
        log, line = Path(found.group(1)), int(found.group(2))
        assert log.is_relative_to(run_dir / "logs")
        assert "ValidationError" in log.read_text(errors="replace").splitlines()[line - 1]


ON_DEMAND = """
import json

ROW = {row!r}


def test_on_demand(gym_run_row):
    rollout = gym_run_row(ROW, agent="mcqa_simple_agent")
    with open("on-demand.json", "w") as handle:
        json.dump({{"reward": rollout.reward, "response": rollout.record["response"],
                    "params": rollout.record["responses_create_params"]}}, handle)
"""


def test_an_on_demand_row_is_scored_by_gyms_verifier(
    pytester: pytest.Pytester, gym_checkout: provision.GymCheckout, local_model: LocalModelServer
) -> None:
    """A row written in the test (the first letters question), rolled out on demand by the live model through a Gym
    the session starts for it alone: its reward is what Gym's own mcqa verifier gives the model's answer."""
    row = read_jsonl(LETTERS)[0]
    pytester.makepyfile(test_rows_on_demand=ON_DEMAND.format(row=row))
    result = pytester.runpytest(
        *live_args(gym_checkout, local_model, "--gym-model-type=vllm_model", "--gym-temperature=0"),
        "--gym-agent=mcqa_simple_agent", "test_rows_on_demand.py",
    )  # fmt: skip
    assert result.ret == 0, result.stdout.str()[-3000:]
    answer = json.loads((pytester.path / "on-demand.json").read_text())
    assert answer["params"]["temperature"] == 0.0 and answer["params"]["max_output_tokens"] == MAX_OUTPUT_TOKENS
    sent = {**row, "responses_create_params": answer["params"]}
    assert gym_verify(gym_checkout, "mcqa", [(sent, answer["response"])]) == [answer["reward"]]
    (run_dir,) = (pytester.path / "runs").iterdir()
    assert gym_commands(run_dir) in (
        ["gym env start"],
        ["gym env start", "gym env start"],
    )  # Gym started once for it, and no `gym eval run`


def test_one_model_at_two_sampling_settings_is_compared_in_one_session_with_gyms_verdicts(
    pytester: pytest.Pytester, gym_checkout: provision.GymCheckout, local_model: LocalModelServer
) -> None:
    """The local model under two policy names, ``cold`` (temperature 0, the session's 48 output tokens) and ``hot``
    (temperature 1.5, top_p 1.0, 32 output tokens of its own), each behind a recording proxy: every rollout of both
    lands with the reward Gym's own mcqa verifier gives its answer, the comparison's delta is the difference of
    the two policies' means, and each policy's sampling reached Gym's input and the endpoint itself."""
    dataset = copy_letters(pytester)
    with FaultProxy(local_model.base_url, timeout=600) as cold, FaultProxy(local_model.base_url, timeout=600) as hot:
        result = pytester.runpytest(
            f"--gym-checkout={gym_checkout.path}", "--gym-model-type=vllm_model",
            f"--gym-policy=cold={cold.base_url},model={local_model.model},temperature=0",
            f"--gym-policy=hot={hot.base_url},model={local_model.model},temperature=1.5,top_p=1.0,max_output_tokens=32",
            f"--gym-max-output-tokens={MAX_OUTPUT_TOKENS}", "--gym-run-dir=runs", "--gym-report=report.json",
            "--junitxml=junit.xml", "-p", "no:cacheprovider", "-rA", dataset,
        )  # fmt: skip
        seen = {"cold": cold.seen(), "hot": hot.seen()}
    output = result.stdout.str()
    (run_dir,) = (pytester.path / "runs").iterdir()
    report = json.loads((pytester.path / "report.json").read_text())
    jsonschema.validate(report, json.loads(SCHEMA_PATH.read_text()))
    assert_nothing_left(run_dir)
    policy_of = {"mcqa_simple_agent": "cold", "mcqa_simple_agent__hot": "hot"}
    wanted = {
        "cold": {"temperature": 0.0, "max_output_tokens": MAX_OUTPUT_TOKENS},
        "hot": {"temperature": 1.5, "top_p": 1.0, "max_output_tokens": 32},
    }

    # Both policies' rollouts landed, every one scored (a comparison of errors would prove nothing).
    tasks = [row["id"] for row in read_jsonl(LETTERS)]
    assert sorted(r["nodeid"].split("::", 1)[1] for r in report["rollouts"]) == sorted(
        f"{task}[r0-{policy}]" for task in tasks for policy in ("cold", "hot")
    ), output[-3000:]
    assert {r["status"] for r in report["rollouts"]} <= {"passed", "failed"}, output[-3000:]

    # Each policy's sampling is in every row of Gym's input and every request Gym materialized for it ...
    sent = read_jsonl(run_dir / "gym-input.jsonl")
    materialized = read_jsonl(run_dir / "gym-output" / "rollouts_materialized_inputs.jsonl")
    assert len(sent) == len(materialized) == 2 * len(tasks)
    for row in [*sent, *materialized]:
        params, policy = row["responses_create_params"], policy_of[row["agent_ref"]["name"]]
        assert {key: params.get(key) for key in wanted[policy]} == wanted[policy], row
        assert "top_p" not in params or policy == "hot"  # the letters rows have none of their own
    # ... and reached the endpoint: Gym's vllm_model sends chat completions, max_output_tokens as max_tokens.
    for policy, requests in seen.items():
        calls = [json.loads(r.body) for r in requests if r.method == "POST" and r.path.endswith("/chat/completions")]
        assert len(calls) >= len(tasks) and all(r.status == 200 for r in requests), (policy, requests)
        for body in calls:
            assert body["temperature"] == wanted[policy]["temperature"], (policy, body)
            assert body["max_tokens"] == wanted[policy]["max_output_tokens"], (policy, body)
            assert body.get("top_p") == wanted[policy].get("top_p"), (policy, body)
    meta = report["meta"]
    given = (meta["policy.cold.temperature"], meta["policy.hot.temperature"], meta["policy.hot.top_p"])
    assert given == (0.0, 1.5, 1.0)
    assert meta["sampling.precedence"] == "policy over option over row"

    # Every reward is what Gym's own mcqa verifier gives the model's answer to the request Gym sent.
    inputs = {row["_ng_task_index"]: row for row in materialized}
    output_file = run_dir / "gym-output" / "rollouts.jsonl"
    records = read_jsonl(output_file)
    verdicts = gym_verify(gym_checkout, "mcqa", [(inputs[r["_ng_task_index"]], r["response"]) for r in records])
    by_location = {f"{output_file}:{number}": (record, verdict) for number, (record, verdict) in enumerate(
        zip(records, verdicts, strict=True), 1)}  # fmt: skip
    means: dict[str, list[float]] = {"cold": [], "hot": []}
    for rollout in report["rollouts"]:
        record, verdict = by_location[rollout["record"]]
        policy = policy_of[record["agent_ref"]["name"]]
        assert rollout["nodeid"].endswith(f"-{policy}]") and rollout["reward"] == verdict, (rollout, verdict)
        means[policy].append(verdict)
    for record in records:  # each answer stayed within its policy's own bound
        bound = wanted[policy_of[record["agent_ref"]["name"]]]["max_output_tokens"]
        assert record["response"]["usage"]["output_tokens"] <= bound, record["response"]["usage"]

    # The comparison: hot against the baseline cold, delta the difference of the two policies' means.
    (comparison,) = report["comparisons"]
    cold_mean, hot_mean = (sum(means[p]) / len(means[p]) for p in ("cold", "hot"))
    assert (comparison["baseline"], comparison["candidate"], comparison["pairs"]) == ("cold", "hot", len(tasks))
    assert (comparison["baseline_mean"], comparison["candidate_mean"]) == pytest.approx((cold_mean, hot_mean))
    assert comparison["delta"]["estimate"] == pytest.approx(hot_mean - cold_mean)
    assert f"{dataset}: hot vs cold" in output
