"""Judge recordings: the judge calls of Gym's rollout records as replay recordings, the recording proxy that
records the others, and the judge's tokens apart from the policy's (docs/models.md, "Judge recordings")."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonlines
import jsonschema
import pytest

from pytest_gym_eval.cli.judge_recordings import main as judge_recordings_main
from pytest_gym_eval.outcomes.records import parse_record
from pytest_gym_eval.outcomes.usage import (
    NO_USAGE,
    Price,
    Usage,
    judge_tokens,
    judge_usage,
    policy_usage,
    record_usage,
    usage_from_properties,
)
from pytest_gym_eval.replay import RecordingError, ReplayServer, load_recordings
from pytest_gym_eval.replay.judge_recordings import judge_miss_summary, judge_recordings, write_judge_recordings
from pytest_gym_eval.replay.recorder import RecordingProxy, chat_recording
from pytest_gym_eval.replay.server import logged_misses
from pytest_gym_eval.reporting.json_report import SCHEMA_PATH, build_report
from pytest_gym_eval.reporting.summary import RolloutResult, summarize
from pytest_gym_eval.stats.gates import GateMode
from tests.support.replay import WEATHER_INPUT, WEATHER_OUTPUT, post, rollout, said, user, write_rollouts

JUDGE_SYSTEM = "Please act as an impartial judge. Answer [[A=B]] or [[A!=B]]."


def judge_prompt(answer: str) -> str:
    return f"<|Problem|>\n2+2?\n\n<|Start of Assistant A's Answer|>\n4\n<|End|>\n<|Start of B|>\n{answer}\n<|End|>"


def judge_call(answer: str, verdict: str, usage: dict[str, int] | None = None) -> dict[str, Any]:
    """One ``judge_evaluations`` element as math_with_judge writes it (Responses API)."""
    response: dict[str, Any] = {
        "id": "resp_judge",
        "object": "response",
        "model": "gpt-judge",
        "output": [
            {"id": "rs_1", "type": "reasoning", "summary": []},
            said(f"My final verdict is {verdict}", "msg_judge"),
        ],
        "status": "completed",
    }
    if usage is not None:
        response["usage"] = usage
    params = {
        "input": [{"type": "message", "role": "system", "content": JUDGE_SYSTEM}, user(judge_prompt(answer))],
        "tools": [],
        "metadata": None,
        "temperature": None,
    }
    return {"responses_create_params": params, "response": response}


def chat_judge_call(answer: str, verdict: str) -> dict[str, Any]:
    """One ``judge_evaluations`` element as physics_judge writes it for a chat-completions judge: the messages as
    ``input`` and the answer's text wrapped in a Responses object without usage."""
    call = judge_call(answer, verdict)
    call["response"] = {
        "id": "chatcmpl-1",
        "object": "response",
        "model": "judge",
        "output": [said(f"Verdict: {verdict}", "msg_chat")],
        "parallel_tool_calls": False,
        "tool_choice": "none",
        "tools": [],
    }
    return call


def policy_row(answer: str, evaluations: Any, reward: float = 1.0) -> dict[str, Any]:
    row = rollout("2+2?", [said(answer)])
    row["reward"] = reward
    row["judge_evaluations"] = evaluations
    return row


@pytest.fixture
def rollouts_file(tmp_path: Path) -> Path:
    rows = [
        policy_row("4", [judge_call("4", "[[A=B]]", {"input_tokens": 100, "output_tokens": 7, "total_tokens": 107})]),
        policy_row(
            "five",
            [  # two calls of one row (a judge asked twice, with the answers swapped)
                judge_call("five", "[[A!=B]]", {"input_tokens": 90, "output_tokens": 8, "total_tokens": 98}),
                judge_call("4 (swapped)", "[[A!=B]]", {"input_tokens": 91, "output_tokens": 9, "total_tokens": 100}),
            ],
            reward=0.0,
        ),
        policy_row("4", None),  # the verifier did not call the judge (a symbolic match)
        policy_row("4", [judge_call("4", "[[A!=B]] (a second opinion)")]),  # the same judge request again
        policy_row("IV", [chat_judge_call("IV", "[[A=B]]")]),
    ]
    return write_rollouts(tmp_path / "rollouts.jsonl", rows)


def ask(server: ReplayServer, answer: str, *, chat: bool = False) -> tuple[int, Any]:
    messages = [{"role": "system", "content": JUDGE_SYSTEM}, {"role": "user", "content": judge_prompt(answer)}]
    if chat:
        return post(f"{server.base_url}/chat/completions", {"model": "judge", "messages": messages, "max_tokens": 9})
    items = [{"type": "message", **message} for message in messages]
    return post(f"{server.base_url}/responses", {"model": "judge", "input": items, "temperature": 0.0})


def text_of(answer: dict[str, Any]) -> str:
    if "choices" in answer:
        return str(answer["choices"][0]["message"]["content"])
    return "".join(part["text"] for item in answer["output"] if item["type"] == "message" for part in item["content"])


def test_each_judge_evaluation_becomes_a_recording_naming_its_rollout(rollouts_file: Path, tmp_path: Path) -> None:
    lines = judge_recordings([rollouts_file])
    assert [line["judge_of"] for line in lines] == [
        f"{rollouts_file}:1 judge_evaluations[0]",
        f"{rollouts_file}:2 judge_evaluations[0]",
        f"{rollouts_file}:2 judge_evaluations[1]",
        f"{rollouts_file}:4 judge_evaluations[0]",
        f"{rollouts_file}:5 judge_evaluations[0]",
    ]
    output = tmp_path / "judge.jsonl"
    assert write_judge_recordings([rollouts_file], output) == 5
    recordings = load_recordings([output])  # the replay server's loader reads them
    assert [recording.reward for recording in recordings] == [None] * 5  # a judge call has no reward of its own
    assert recordings[1].params["input"][1]["content"] == judge_prompt("five")


def test_the_replay_server_answers_the_judge_from_its_recordings(rollouts_file: Path, tmp_path: Path) -> None:
    output = tmp_path / "judge.jsonl"
    write_judge_recordings([rollouts_file], output)
    with ReplayServer([output]) as server:
        status, answer = ask(server, "five")
        assert (status, text_of(answer)) == (200, "My final verdict is [[A!=B]]")
        assert answer["usage"]["input_tokens"] == 90
        # Identical judge requests (no repeat tag reaches a judge): the recordings in file order, round-robin.
        verdicts = [text_of(ask(server, "4")[1]) for _ in range(3)]
        assert verdicts == [
            "My final verdict is [[A=B]]",
            "My final verdict is [[A!=B]] (a second opinion)",
            "My final verdict is [[A=B]]",
        ]
        # A chat-completions judge's recorded call answers its chat request.
        status, answer = ask(server, "IV", chat=True)
        assert (status, text_of(answer)) == (200, "Verdict: [[A=B]]")


def test_a_judge_request_without_a_recording_is_a_404_naming_it_and_counted_as_a_miss(
    rollouts_file: Path, tmp_path: Path
) -> None:
    output = tmp_path / "judge.jsonl"
    write_judge_recordings([rollouts_file], output)
    with ReplayServer([output]) as server:
        assert server.misses == []
        status, answer = ask(server, "22/7")  # the policy's answer changed, so the judge's prompt did
        assert status == 404
        assert answer["error"]["code"] == "no_recording"
        message = answer["error"]["message"]
        assert message.startswith("no recorded answer: the conversation departs from the closest recording")
        assert "22/7" in message
        assert server.misses == [message]
        ask(server, "4")  # answered: no miss
        ask(server, "3.99")
        assert len(server.misses) == 2
        summary = judge_miss_summary("judge_model", server.misses)
    assert (
        summary
        == f"judge model server judge_model (replayed) has no recorded answer for 2 requests; the first: {message}"
    )
    assert judge_miss_summary("judge_model", []) is None


def test_logged_misses_reads_a_replay_servers_log_and_never_raises(rollouts_file: Path, tmp_path: Path) -> None:
    output, log = tmp_path / "judge.jsonl", tmp_path / "log.jsonl"
    write_judge_recordings([rollouts_file], output)
    with ReplayServer([output], log_path=log) as server:
        ask(server, "4")
        ask(server, "22/7")
        post(f"{server.base_url}/nowhere", {})  # a 404 that is no missing recording
        misses = server.misses
    with log.open("a", encoding="utf-8") as stream:
        stream.write("not json\n[1]\n")
    assert logged_misses(log) == misses and len(misses) == 1
    assert logged_misses(tmp_path / "absent.jsonl") == []


def test_a_judge_failed_row_is_an_error_never_a_zero_reward(tmp_path: Path) -> None:
    """What Gym's judge_failsafe writes when the judge call fails (a replay miss included): reward 0.0 with
    ``_ng_failure_class: judge_failed``. The plugin reads it as an error, not as a failed rollout."""
    row = {
        "_ng_task_index": 0,
        "_ng_rollout_index": 0,
        "reward": 0.0,
        "failure_kind": "judge_failed",
        "failure_reason": "ClientResponseError: 500, message='Internal Server Error'",
        "_ng_failure_class": "judge_failed",
        "_ng_failure_judge_error": "ClientResponseError: 500, message='Internal Server Error'",
    }
    record = parse_record(json.dumps(row).encode(), tmp_path / "rollouts.jsonl", 1, failures=False)
    assert record is not None
    assert record.reward is None
    assert record.failure_class == "judge_failed"
    assert (record.failure_message or "").startswith("ClientResponseError: 500")


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ('{"judge_evaluations": {"a": 1}}', ":1: `judge_evaluations` is a dict, not a list"),
        ('{"judge_evaluations": [3]}', ":1: `judge_evaluations[0]` is a int, not an object"),
        ('{"judge_evaluations": [{"response": {"output": []}}]}', "missing `responses_create_params` object"),
        ('{"judge_evaluations": [{"responses_create_params": {}, "response": {}}]}', "missing `response.output`"),
        ("[1, 2]", ":1: expected a JSON object, got list"),
        ("{oops", ":1: malformed JSON"),
    ],
)
def test_bad_rollouts_name_file_line_and_element(tmp_path: Path, line: str, problem: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(line + "\n", encoding="utf-8")
    with pytest.raises(RecordingError, match=r"bad\.jsonl") as raised:
        judge_recordings([path])
    assert problem in str(raised.value)


def test_the_command_writes_the_file_and_warns_when_no_rollout_holds_judge_calls(
    rollouts_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    output = tmp_path / "judge.jsonl"
    assert judge_recordings_main([str(rollouts_file), "-o", str(output)]) == 0
    assert capsys.readouterr().out.strip() == f"5 judge calls written to {output}"
    plain = write_rollouts(tmp_path / "plain.jsonl", [rollout(WEATHER_INPUT, WEATHER_OUTPUT)])
    assert judge_recordings_main([str(plain), "-o", str(output)]) == 0
    captured = capsys.readouterr()
    assert "warning: no rollout holds `judge_evaluations`" in captured.err
    assert output.read_text(encoding="utf-8") == ""


# ---- tokens apart ---------------------------------------------------------------------------------------------------


def test_judge_tokens_are_summed_apart_from_the_policys(rollouts_file: Path) -> None:
    rows = [json.loads(line) for line in rollouts_file.read_text(encoding="utf-8").splitlines()]
    assert judge_usage(rows[0]) == Usage(100, 7, 107)
    assert judge_usage(rows[1]) == Usage(181, 17, 198)
    assert judge_usage(rows[2]) is NO_USAGE  # no judge call
    assert judge_usage(rows[4]) is NO_USAGE  # a chat judge's call as Gym stores it carries no usage
    assert policy_usage(rows[1]) == Usage(10, 5, 15)  # the policy's tokens are the rollout's response's only
    both = record_usage(rows[1])  # what a rollout's record gives the plugin: the two apart
    assert both == Usage(10, 5, 15, None, 181, 17, 198)
    assert (both.judge, record_usage(rows[2]).judge) == (Usage(181, 17, 198), NO_USAGE)
    assert usage_from_properties(dict(both.properties())) == both  # as the xdist controller learns it
    totals = judge_tokens({"math": rows, "other": rows[2:3]})
    assert (totals["math"].input_tokens, totals["math"].output_tokens, totals["math"].total_tokens) == (281, 24, 305)
    assert totals["math"].rollouts == 2
    assert totals["other"].rollouts == 0


def test_the_json_report_shows_the_judges_tokens_beside_the_policys_and_leaves_them_out_of_cost(
    rollouts_file: Path,
) -> None:
    rows = [json.loads(line) for line in rollouts_file.read_text(encoding="utf-8").splitlines()]
    results = [
        RolloutResult(f"d.jsonl::t{i}[r0]", "d.jsonl", f"t{i}", 0, "agent", "passed", 1.0, usage=record_usage(row))
        for i, row in enumerate(rows)
    ]
    (summary,) = summarize(results, thresholds={}, gates={}, mode=GateMode.POINT, price=Price(1.0, 1.0))
    report = build_report([summary], results, {})
    jsonschema.validate(report, json.loads(SCHEMA_PATH.read_text()))
    tokens = report["datasets"][0]["tokens"]
    assert tokens == {
        "input": 50,
        "output": 25,
        "total": 75,
        "rollouts": 5,
        "judge": {"input": 281, "output": 24, "total": 305, "rollouts": 2},
    }
    assert report["datasets"][0]["cost"] == pytest.approx(75e-6)  # the policy's tokens only
    (plain,) = summarize(results[2:3], thresholds={}, gates={}, mode=GateMode.POINT)
    assert "judge" not in build_report([plain], results[2:3], {})["datasets"][0]["tokens"]


@pytest.mark.parametrize(
    "record",
    [{}, {"judge_evaluations": "x"}, {"judge_evaluations": [None, 3, {"response": "x"}]}, {"judge_evaluations": []}],
)
def test_judge_usage_of_records_of_any_shape_is_none(record: dict[str, Any]) -> None:
    assert judge_usage(record) is NO_USAGE


def test_a_count_only_some_judge_calls_give_is_summed_over_those() -> None:
    record = {
        "judge_evaluations": [
            {"response": {"usage": {"input_tokens": 5, "output_tokens": 2}}},
            {"response": {"usage": {"prompt_tokens": 6}}},
        ]
    }
    assert judge_usage(record) == Usage(11, 2, 7)


def one_call_rows() -> list[dict[str, Any]]:
    """Rollout records of verifiers that store one judge call per key (Gym 0.7.0): over_refusal_detection's
    ``judge_evaluation`` (a Responses call through Gym's model server, then a failed call: no response, its error
    kept), and bbq's ``answer_judge_evaluation`` (a chat-completions call in the chat layout)."""
    judged = {**judge_call("4", "[[COMPLIED]]", {"input_tokens": 960, "output_tokens": 34, "total_tokens": 994}),
              "verdict_label": "[[COMPLIED]]", "error": None}  # fmt: skip
    failed = {"responses_create_params": judge_call("five", "")["responses_create_params"], "response": None,
              "verdict_label": None, "error": "Judge HTTP 500: ..."}  # fmt: skip
    messages = [{"role": "system", "content": JUDGE_SYSTEM}, {"role": "user", "content": judge_prompt("IV")}]
    chat = {
        "check": "answer_check",
        "request": {"model": "judge", "messages": messages},
        "response": {
            "id": "chatcmpl-9",
            "object": "chat.completion",
            "model": "judge",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "Verdict: [[A=B]]"}}],
            "usage": {"prompt_tokens": 80, "completion_tokens": 4, "total_tokens": 84},
        },
    }
    return [
        {**policy_row("4", None), "judge_evaluation": judged},
        {**policy_row("five", None), "judge_evaluation": failed},
        {**policy_row("IV", None), "answer_judge_evaluation": chat, "explanation_judge_evaluation": None},
    ]


def test_a_judge_call_kept_under_its_own_key_is_recorded_and_counted_apart(tmp_path: Path) -> None:
    """Gym 0.7.0's over_refusal_detection (the example of docs/models.md), jailbreak_detection and aegis_v4_safety
    keep their one judge call as ``judge_evaluation``, bbq as ``answer_judge_evaluation``: their calls are
    recordings and their tokens the judge's, as ``judge_evaluations``' are."""
    rollouts_file = write_rollouts(tmp_path / "rollouts.jsonl", one_call_rows())
    lines = judge_recordings([rollouts_file])
    assert [line["judge_of"] for line in lines] == [
        f"{rollouts_file}:1 judge_evaluation",
        f"{rollouts_file}:3 answer_judge_evaluation",
    ]  # the failed call (no response) has no answer to replay
    output = tmp_path / "judge.jsonl"
    write_judge_recordings([rollouts_file], output)
    with ReplayServer([output]) as server:
        status, answer = ask(server, "4", chat=True)
        assert (status, text_of(answer)) == (200, "My final verdict is [[COMPLIED]]")
        status, answer = ask(server, "IV")
        assert (status, text_of(answer)) == (200, "Verdict: [[A=B]]")
        assert answer["usage"]["input_tokens"] == 80
    rows = one_call_rows()
    assert [judge_usage(row) for row in rows] == [Usage(960, 34, 994), NO_USAGE, Usage(80, 4, 84)]
    assert record_usage(rows[0]) == Usage(10, 5, 15, None, 960, 34, 994)
    assert judge_tokens({"d": rows})["d"].rollouts == 2


# ---- the recording proxy ------------------------------------------------------------------------------------------


@pytest.fixture
def upstream(tmp_path: Path) -> Any:
    """The project's replay server as the endpoint the proxy forwards to."""
    rows = [rollout(WEATHER_INPUT, WEATHER_OUTPUT), rollout("Say hi.", [said("Hi!")])]
    with ReplayServer([write_rollouts(tmp_path / "upstream.jsonl", rows)]) as server:
        yield server


WEATHER_CHAT = [
    {"role": "system", "content": "You are a weather bot."},
    {"role": "user", "content": "How warm is it in Paris?"},
]
WEATHER_TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]


def test_the_proxy_records_what_it_forwards_and_the_replay_serves_it_back_unchanged(
    upstream: ReplayServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    recordings = tmp_path / "recorded.jsonl"
    monkeypatch.setenv("JUDGE_KEY_FOR_TEST", "sk-secret-1234")
    requests: list[tuple[str, dict[str, Any]]] = [
        ("responses", {"model": "j", "input": "Say hi.", "tools": []}),
        ("responses", {"model": "j", "input": WEATHER_INPUT, "tools": WEATHER_TOOLS}),
        ("chat/completions", {"model": "j", "messages": WEATHER_CHAT, "tools": WEATHER_TOOLS}),
        ("chat/completions", {"model": "j", "messages": [{"role": "user", "content": "Say hi."}]}),
    ]
    with RecordingProxy(upstream.base_url, recordings, model="served", key_env="JUDGE_KEY_FOR_TEST") as proxy:
        assert proxy.base_url.startswith("http://127.0.0.1:")
        forwarded = [post(f"{proxy.base_url}/{path}", body) for path, body in requests]
        assert [status for status, _ in forwarded] == [200, 200, 200, 200]
        assert proxy.recorded == 4
    assert text_of(forwarded[0][1]) == "Hi!"
    assert forwarded[2][1]["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "get_weather"
    assert "sk-secret-1234" not in recordings.read_text(encoding="utf-8")
    lines = list(jsonlines.open(recordings))
    assert [line["responses_create_params"].get("model") for line in lines[:2]] == ["j", "j"]  # as the client sent
    assert lines[3]["response"]["usage"] == {  # a chat answer's usage, in the Responses layout
        "input_tokens": 10,
        "output_tokens": 5,
        "total_tokens": 15,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens_details": {"reasoning_tokens": 0},
    }
    with ReplayServer([recordings]) as replay:
        replayed = [post(f"{replay.base_url}/{path}", body) for path, body in requests]
    for (status, answer), (_, original) in zip(replayed, forwarded, strict=True):
        assert status == 200
        if "choices" in original:
            assert json.dumps(answer["choices"]) == json.dumps(original["choices"])
            counts = ("prompt_tokens", "completion_tokens", "total_tokens")
            assert [answer["usage"][name] for name in counts] == [original["usage"][name] for name in counts]
        else:
            assert json.dumps(answer["output"]) == json.dumps(original["output"])
            assert answer["usage"] == original["usage"]


def test_the_proxy_passes_upstream_errors_through_without_recording_them(
    upstream: ReplayServer, tmp_path: Path
) -> None:
    recordings = tmp_path / "recorded.jsonl"
    with RecordingProxy(upstream.base_url, recordings) as proxy:
        status, answer = post(f"{proxy.base_url}/responses", {"input": "Nothing recorded for this."})
        assert (status, answer["error"]["code"]) == (404, "no_recording")
        status, answer = post(f"{proxy.base_url}/embeddings", {"input": "x"})
        assert (status, answer["error"]["code"]) == (404, "unknown_path")
        status, answer = post(f"{proxy.base_url}/responses", raw=b"{not json")
        assert (status, answer["error"]["code"]) == (400, "bad_json")
        assert proxy.recorded == 0
    assert not recordings.exists()


def test_an_unreachable_upstream_is_a_502_and_an_unset_key_variable_an_error(tmp_path: Path) -> None:
    with ReplayServer([write_rollouts(tmp_path / "r.jsonl", [rollout("x", [said("y")])])]) as gone:
        url = gone.base_url
    with RecordingProxy(url, tmp_path / "recorded.jsonl", timeout=5) as proxy:
        status, answer = post(f"{proxy.base_url}/responses", {"input": "x"})
    assert (status, answer["error"]["code"]) == (502, "upstream")
    assert url in answer["error"]["message"]
    with pytest.raises(ValueError, match="NO_SUCH_KEY_VARIABLE_FOR_TEST is not set"):
        RecordingProxy(url, tmp_path / "recorded.jsonl", key_env="NO_SUCH_KEY_VARIABLE_FOR_TEST")


def test_chat_recording_keeps_text_and_tool_calls_as_output_items() -> None:
    answer = {
        "id": "chatcmpl-9",
        "model": "m",
        "choices": [
            {
                "message": {
                    "role": "assistant",
                    "content": "Checking.",
                    "tool_calls": [{"id": "c1", "function": {"name": "f", "arguments": '{"a": 1}'}}],
                }
            }
        ],
    }
    line = chat_recording({"messages": [{"role": "user", "content": "q"}]}, answer)
    assert line["responses_create_params"]["input"] == [{"type": "message", "role": "user", "content": "q"}]
    assert [item["type"] for item in line["response"]["output"]] == ["message", "function_call"]
    assert "usage" not in line["response"]
    with pytest.raises(ValueError, match="no choice"):
        chat_recording({"messages": []}, {"choices": []})


def test_the_record_command_serves_until_terminated_and_says_what_it_recorded(
    upstream: ReplayServer, tmp_path: Path
) -> None:
    recordings = tmp_path / "recorded.jsonl"
    command = [sys.executable, "-m", "pytest_gym_eval", "record", "--upstream", upstream.base_url]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    with subprocess.Popen(
        [*command, "--output", str(recordings)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    ) as process:
        assert process.stdout is not None
        try:
            first = process.stdout.readline()  # printed once serving: the readiness signal
            assert first.startswith("recording proxy listening on http://127.0.0.1:"), first
            base_url = first.split()[-1]
            assert post(f"{base_url}/responses", {"input": "Say hi."})[0] == 200
        finally:
            process.terminate()
        out, err = process.communicate(timeout=30)
    assert process.returncode == 0, err
    assert out.strip().splitlines()[-1] == f"1 calls recorded to {recordings}"
    assert len(load_recordings([recordings])) == 1
