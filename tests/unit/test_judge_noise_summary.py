"""Judge noise in the reward summary: which rollouts gave the same policy answer
(pytest_gym_eval.outcomes.answers), the summary's split by answer, the JSON report's ``judge_noise`` (schema and read
back) and the terminal's ``judge noise`` line."""

from __future__ import annotations

import copy
import math
from typing import Any

import jsonschema
import pytest

from pytest_gym_eval.outcomes.answers import answer_digest
from pytest_gym_eval.outcomes.usage import TokenTotals
from pytest_gym_eval.reporting import json_reading, json_report, terminal
from pytest_gym_eval.reporting.summary import DatasetSummary, RolloutResult, answer_rewards, by_task, summarize
from pytest_gym_eval.stats.gates import Gate, GateMode

DATASET = "judged.jsonl"


def record(*items: dict[str, Any]) -> dict[str, Any]:
    return {"reward": 1.0, "response": {"id": "resp_1", "output": list(items)}}


def message(text: str, **extra: Any) -> dict[str, Any]:
    return {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}], **extra}


def test_the_same_answer_has_the_same_digest_whatever_its_ids_reasoning_and_spacing() -> None:
    plain = record(message("The answer is 42."))
    replayed = record(
        {"type": "reasoning", "id": "rs_9", "summary": [{"type": "summary_text", "text": "think"}]},
        message("<think>hmm</think>The answer   is 42.", id="msg_7", status="completed"),
    )
    assert answer_digest(plain) == answer_digest(replayed) is not None
    assert len(answer_digest(plain) or "") == 16
    assert answer_digest(record(message("The answer is 41."))) != answer_digest(plain)
    assert answer_digest(record(message("The answer is 42.", role="user"))) != answer_digest(plain)


def test_tool_calls_count_by_name_arguments_and_result_not_by_call_id() -> None:
    def call(arguments: str, call_id: str, output: str) -> dict[str, Any]:
        return record(
            {"type": "function_call", "name": "get_weather", "arguments": arguments, "call_id": call_id, "id": "fc"},
            {"type": "function_call_output", "call_id": call_id, "output": output},
            message("cold"),
        )

    first = call('{"city": "Oslo", "units": "C"}', "call_a", '{"t": -3}')
    assert answer_digest(first) == answer_digest(call('{"units":"C","city":"Oslo"}', "call_b", '{"t":-3}'))
    assert answer_digest(first) != answer_digest(call('{"city": "Rome", "units": "C"}', "call_a", '{"t": -3}'))
    assert answer_digest(first) != answer_digest(call('{"city": "Oslo", "units": "C"}', "call_a", '{"t": 9}'))


def test_no_answer_without_an_output_list() -> None:
    assert answer_digest({"reward": 1.0}) is None
    assert answer_digest({"response": {"output": "text"}}) is None
    assert answer_digest(record()) is not None  # an empty answer is an answer


def result(task: str, repeat: int, reward: float | None, answer: str | None, agent: str = "a") -> RolloutResult:
    status = "error" if reward is None else "passed" if reward >= 1.0 else "failed"
    return RolloutResult(f"{DATASET}::{task}[r{repeat}]", DATASET, task, repeat, agent, status, reward, answer=answer)


# Task t0: one answer judged 1, 0, 1; t1: one answer judged 0, 0; t2: one answer judged once (and an error, which
# judges nothing); t3: two answers, each judged once.
RESULTS = [
    result("t0", 0, 1.0, "aaaa"), result("t0", 1, 0.0, "aaaa"), result("t0", 2, 1.0, "aaaa"),
    result("t1", 0, 0.0, "bbbb"), result("t1", 1, 0.0, "bbbb"),
    result("t2", 0, 1.0, "aaaa"), result("t2", 1, None, None),
    result("t3", 0, 1.0, None), result("t3", 1, 0.0, None),
]  # fmt: skip


def one_summary(results: list[RolloutResult], gates: list[Gate] | None = None) -> DatasetSummary:
    (summary,) = summarize(results, thresholds={}, gates={DATASET: gates or []}, mode=GateMode.LOWER_BOUND)
    return summary


def test_rewards_are_grouped_by_answer_within_each_task() -> None:
    """The same digest in two tasks is two answers (t0 and t2); a rollout without one is an answer of its own; an
    errored rollout judges nothing."""
    assert answer_rewards(by_task(RESULTS)) == [[[1.0, 0.0, 1.0]], [[0.0, 0.0]], [[1.0]], [[1.0], [0.0]]]


def test_the_summary_carries_the_split_of_its_rewards() -> None:
    noise = one_summary(RESULTS).judge_noise
    assert noise is not None
    assert (noise.tasks, noise.answers, noise.judgments, noise.repeated, noise.rejudged) == (4, 5, 8, 2, 5)
    assert noise.agreement == pytest.approx(2 / 4)
    # Without digests every rollout is an answer of its own: nothing was judged twice.
    assert one_summary([result(r.task_id, r.repeat, r.reward, None) for r in RESULTS]).judge_noise is None


@pytest.fixture(scope="module")
def validator() -> jsonschema.protocols.Validator:
    schema = json_report.schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def test_the_json_report_carries_it_and_reads_it_back(validator: jsonschema.protocols.Validator) -> None:
    summary = one_summary(RESULTS, [Gate("mean_reward", 0.5)])
    report = json_report.build_report([summary], RESULTS, {})
    validator.validate(report)
    (dataset,) = report["datasets"]
    noise = dataset["judge_noise"]
    assert noise["judge_variance"] == pytest.approx(summary.judge_noise.judge_variance)  # type: ignore[union-attr]
    assert (noise["answers"], noise["repeated"], noise["dominated_by"]) == (5, 2, "neither")
    assert report["rollouts"][0]["answer"] == "aaaa" and "answer" not in report["rollouts"][6]
    assert json_reading.results_from_report(report) == RESULTS  # the digests read back: a merge splits alike
    conclusion, _ = json_reading.conclusion_from_report(report)
    (back,) = conclusion.summaries
    assert back.judge_noise == summary.judge_noise
    # Without any answer judged twice there is no judge_noise, and a null share (no variance) is valid too.
    flat = one_summary([result("t0", 0, 1.0, "x"), result("t0", 1, 1.0, "x"), result("t1", 0, 1.0, "y")])
    assert flat.judge_noise is not None and math.isnan(flat.judge_noise.judge_share)
    validator.validate(json_report.build_report([flat], [], {}))
    broken = copy.deepcopy(report)
    broken["datasets"][0]["judge_noise"]["dominated_by"] = "tasks"
    with pytest.raises(jsonschema.ValidationError):
        validator.validate(broken)


def test_the_terminal_line_says_whose_the_interval_is() -> None:
    noisy = [result(f"t{t}", r, float((t + r) % 2 == 0 or r == 2), f"a{t}") for t in range(30) for r in range(3)]
    summary = one_summary(noisy, [Gate("mean_reward", 0.5)])
    text = " ".join(" ".join(terminal.render_summary([summary], verbose=False, width=100)).split())
    assert summary.judge_noise is not None and summary.judge_noise.dominated_by == "judge"
    share = summary.judge_noise.judge_share
    assert f"judge noise {share:.0%} [" in text
    assert "of the reward's variance is the judge's: 30 of 30 answers judged again (90 of 90 rollouts)" in text
    assert "the mean reward's interval is 100% [" in text and "the judge's: dominated by the judge" in text


def test_no_line_for_a_judge_that_never_varied_unless_a_judge_was_called() -> None:
    steady = [result(f"t{t}", r, float(t % 2), f"a{t}") for t in range(40) for r in range(2)]
    summary = one_summary(steady)
    assert summary.judge_noise is not None and summary.judge_noise.dominated_by == "policy"
    assert not any("judge noise" in line for line in terminal.render_summary([summary], verbose=False))
    judged = DatasetSummary(**{**summary.__dict__, "judge_tokens": TokenTotals(10, 5, 15, 12)})
    (line, *_) = [line for line in terminal.render_summary([judged], verbose=False) if "judge noise" in line]
    assert "0% [0%, 0%] of the reward's variance is the judge's" in line


def test_a_judge_that_gave_every_rollout_the_same_reward_says_so_rather_than_n_a() -> None:
    """Measured with a live local judge over replayed answers (2 tasks x 2 repeats, every reward 0.5): the line read
    "judge noise n/a of the reward's variance is the judge's", a share of no variance at all."""
    flat = [result(f"t{t}", r, 0.5, f"a{t}") for t in range(2) for r in range(2)]
    summary = one_summary(flat)
    judged = DatasetSummary(**{**summary.__dict__, "judge_tokens": TokenTotals(10, 5, 15, 4)})
    text = " ".join(" ".join(terminal.render_summary([judged], verbose=False, width=100)).split())
    assert "judge noise none: every rollout got the same reward (0.50), no variance to split: 2 of 2 answers" in text
    assert "n/a" not in text.split("judge noise", 1)[1]
