"""The verdict on one rollout and the text a failed item shows, for any environment's records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_gym_eval.gym.feed import Missing, RolloutRecord
from pytest_gym_eval.outcomes.outcome import (
    clean_gym_message,
    failure_report,
    judge,
    output_text,
    prompt_text,
    steps,
    trim,
)


def record_at(tmp_path: Path, record: dict[str, object], reward: object = 0.0) -> RolloutRecord:
    path = tmp_path / "rollouts.jsonl"
    path.write_text(json.dumps({"other": 1}) + "\n" + json.dumps(record) + "\n")
    return RolloutRecord(stamp=0, reward=reward, path=path, line=2)


@pytest.mark.parametrize(("reward", "status"), [(1.0, "passed"), (0.75, "passed"), (0.7499, "failed"), (-1, "failed")])
def test_threshold_decides_scored_rollouts(tmp_path: Path, reward: float, status: str) -> None:
    assert judge(record_at(tmp_path, {}, reward), threshold=0.75).status == status


@pytest.mark.parametrize("reward", [None, "1.0", float("nan"), float("inf"), True, [1]])
def test_unusable_rewards_are_errors_never_zero(tmp_path: Path, reward: object) -> None:
    outcome = judge(record_at(tmp_path, {}, reward), threshold=0.0)
    assert outcome.status == "error" and outcome.reward is None and outcome.failure_class == "bad_reward"


def test_missing_rollout_and_failure_rows_are_errors() -> None:
    assert judge(Missing("never came", "log.txt"), 1.0).status == "error"
    failed = RolloutRecord(3, None, Path("f.jsonl"), 7, "agent_run_error", "500 from the agent")
    outcome = judge(failed, 1.0)
    assert (outcome.status, outcome.failure_class) == ("error", "agent_run_error")
    assert "500 from the agent" in outcome.message and "f.jsonl:7" in outcome.message


def test_hook_overrides_the_threshold_both_ways(tmp_path: Path) -> None:
    record = record_at(tmp_path, {}, 0.2)
    assert judge(record, 1.0, lambda rec, reward, threshold: True).status == "passed"
    assert judge(record_at(tmp_path, {}, 1.0), 0.5, lambda *args: False).status == "failed"
    assert judge(record, 0.1, lambda *args: None).status == "passed"


def test_failure_report_for_a_tool_calling_rollout_without_text_or_expected_answer(tmp_path: Path) -> None:
    record = {
        "responses_create_params": {
            "instructions": "You are a weather bot.",
            "input": [{"role": "user", "content": [{"type": "input_text", "text": "Weather in Oslo?"}]}],
        },
        "response": {"output": [{"type": "function_call", "name": "get_weather", "arguments": "{}", "call_id": "c"}]},
    }
    text = failure_report(judge(record_at(tmp_path, record, 0.0), 1.0), 1.0)
    assert text.splitlines() == [
        "reward 0 is below the pass threshold 1",
        "prompt:   Weather in Oslo?",
        "steps:    1. get_weather({}) -> (no result)",
        "output:   (the model gave no text)",
        f"record:   {tmp_path / 'rollouts.jsonl'}:2",
    ]


def test_failure_report_shows_each_tool_call_with_its_result_then_the_final_answer(tmp_path: Path) -> None:
    # The shape of Gym's records for a multi-step rollout (response.output: calls, results, messages).
    output: list[dict[str, object]] = []
    for number, city in enumerate(["Oslo", "Bergen"]):
        output += [
            {"type": "function_call", "name": "get_weather", "arguments": json.dumps({"city": city}),
             "call_id": f"c{number}"},
            {"type": "function_call_output", "call_id": f"c{number}", "output": json.dumps({"weather": "x" * 500})},
        ]  # fmt: skip
        output.append(
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": f"{city}?"}]}
        )
    output[-1]["content"] = [{"type": "output_text", "text": "[711, 407]"}]
    record = {"responses_create_params": {"input": "Compare the weather"}, "response": {"output": output}}
    lines = failure_report(judge(record_at(tmp_path, record, 0.0), 1.0), 1.0).splitlines()
    result = trim('{"weather":"' + "x" * 500 + '"}', 160)
    assert lines[2] == 'steps:    1. get_weather({"city":"Oslo"}) -> ' + result and result.endswith("x…")
    assert lines[3] == "          2. said: Oslo?"
    assert lines[4].startswith('          3. get_weather({"city":"Bergen"}) -> {"weather":"xxx')
    assert lines[5] == "output:   [711, 407]"  # the final answer is not repeated as a step
    assert steps(record)[1] == "said: Oslo?" and len(steps(record)) == 3


def test_failure_report_shows_the_tasks_fields_when_no_expected_answer_is_known(tmp_path: Path) -> None:
    row = {"id": "t1", "responses_create_params": {"input": "Sum?"}, "target_numbers": [3, 4], "rubric": "exact"}
    text = failure_report(judge(record_at(tmp_path, {"response": {"output": []}}, 0.0), 1.0), 1.0, row)
    assert 'task:     {"target_numbers": [3, 4], "rubric": "exact"}' in text.splitlines()
    with_answer = {**row, "expected_answer": "7"}
    text = failure_report(judge(record_at(tmp_path, {}, 0.0), 1.0), 1.0, with_answer)
    assert "expected: 7" in text and "task:" not in text


def test_failure_report_shows_every_field_the_verifier_recorded_nulls_included(tmp_path: Path) -> None:
    # An mcqa record as Gym 0.7.0 writes it for an answer without \\boxed{}: the null extraction explains the 0.
    row = {"responses_create_params": {"input": "Pick one"}, "options": [{"A": "x"}], "expected_answer": "B"}
    record = {
        **row,
        "response": {"output": [{"type": "message", "role": "assistant", "content": "I think B"}]},
        "reward": 0.0,
        "extracted_answer": None,
        "judge": {"score": 0, "why": "w" * 300},
        "_ng_task_index": 0,
        "agent_ref": {"name": "mcqa_simple_agent"},
    }
    lines = failure_report(judge(record_at(tmp_path, record, 0.0), 1.0), 1.0, row).splitlines()
    assert lines[2:6] == [
        "expected: B",
        "output:   I think B",
        "verifier: extracted_answer: null",
        "          judge: " + trim('{"score":0,"why":"' + "w" * 300 + '"}', 160),
    ]  # the row's own fields (options, the expected answer) are not repeated; Gym's stamps are left out
    many = {**record, **{f"metric_{n}": n for n in range(20)}}
    lines = failure_report(judge(record_at(tmp_path, many, 0.0), 1.0), 1.0, row).splitlines()
    assert "          … and 10 more fields" in lines


def test_prompt_falls_back_to_the_dataset_row_and_string_input() -> None:
    assert prompt_text({}, {"responses_create_params": {"input": "plain question"}}) == "plain question"
    assert prompt_text({"responses_create_params": {"input": []}}) == ""


def test_output_text_takes_the_last_assistant_message() -> None:
    record = {"response": {"output": [
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "thinking"}]},
        {"type": "function_call_output", "call_id": "c", "output": "sunny"},
        {"type": "message", "role": "assistant", "content": "It is sunny."},
    ]}}  # fmt: skip
    assert output_text(record) == "It is sunny."


def test_trim_keeps_the_end_of_long_outputs() -> None:
    assert trim("abcdefghij", 5) == "abcd…"
    assert trim("abcdefghij", 5, keep_end=True) == "…ghij"
    assert trim("short", 5) == "short"


def test_gym_messages_lose_their_nested_escaping() -> None:
    raw = '"Hit an exception: b\'\\\\\\"error\\\\\\": {\\\\\\"message\\\\\\": \\\\\\"no\\\\\\"}\'"'
    assert clean_gym_message(raw) == '"Hit an exception: b\'"error": {"message": "no"}\'"'


def test_a_traced_failure_puts_the_cause_first_then_its_log_then_gyms_record() -> None:
    from pytest_gym_eval.outcomes.causes import Cause

    failed = RolloutRecord(3, None, Path("f.jsonl"), 7, "agent_run_error", "500, message='Internal Server Error'")
    cause = Cause("policy model: HTTP 429 rate_limit_exceeded: slow down", "model_http_429", "policy_model.log:12")
    outcome = judge(failed, 1.0, explain=lambda record: cause)
    assert (outcome.failure_class, outcome.cause) == ("model_http_429", cause)
    assert outcome.message.splitlines() == [
        "policy model: HTTP 429 rate_limit_exceeded: slow down",
        "log: policy_model.log:12",
        "Gym recorded the rollout as failed (agent_run_error: 500, message='Internal Server Error')",
        "record: f.jsonl:7",
    ]


def test_a_missing_rollout_keeps_the_class_the_feed_gave_it() -> None:
    outcome = judge(Missing("no rollout landed for 5 s", failure_class="rollout_timeout"), 1.0)
    assert (outcome.status, outcome.failure_class, outcome.message) == (
        "error", "rollout_timeout", "no rollout landed for 5 s"
    )  # fmt: skip
