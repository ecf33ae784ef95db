"""Tests of pytest_gym_eval.replay: normalisation, turn splitting, the HTTP server and its command line.

Every recording here is synthetic and written by the tests themselves.
"""

from __future__ import annotations

import base64
import hashlib
import http.client
import json
import re
import socket
import threading
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import jsonlines
import pytest

from pytest_gym_eval.cli.replay import main
from pytest_gym_eval.outcomes.usage import Usage, record_usage, token_totals
from pytest_gym_eval.replay import (
    Conversation,
    RecordingError,
    ReplayIndex,
    ReplayServer,
    Turn,
    chat_answer,
    chat_messages_to_items,
    explain_unmatched,
    load_recordings,
    normalise_item,
    normalise_items,
    recording_turns,
    request_items,
    responses_answer,
    split_turns,
)
from pytest_gym_eval.replay.server import _HttpServer
from tests.support.replay import (
    WEATHER_INPUT,
    WEATHER_OUTPUT,
    call,
    get,
    post,
    result,
    rollout,
    said,
    thought,
    user,
    write_rollouts,
)


@pytest.fixture
def weather_file(tmp_path: Path) -> Path:
    return write_rollouts(
        tmp_path / "weather_rollouts.jsonl",
        [rollout(WEATHER_INPUT, WEATHER_OUTPUT), rollout("What is 2+2?", [said("4")])],
    )


# ---- normalisation -------------------------------------------------------------------------------


def test_message_forms_normalise_alike() -> None:
    parts = {
        "id": "msg_9",
        "status": "completed",
        "type": "message",
        "role": "developer",
        "content": [{"type": "input_text", "text": "Be "}, {"type": "text", "text": "brief."}],
    }
    plain = {"role": "system", "content": "Be brief."}
    assert normalise_item(parts) == normalise_item(plain) == ("message", "system", "Be brief.")
    assert normalise_item(user("hi")) != normalise_item(user("hello"))
    assert normalise_item(said("Yes")) == ("message", "assistant", "Yes")


def test_function_call_arguments_are_canonical() -> None:
    recorded = call("call_1", "f", '{"b": 1, "a": [1, 2]}', item_id="fc_recorded")
    resent = {"type": "function_call", "call_id": "call_1", "name": "f", "arguments": '{"a":[1,2],"b":1}'}
    assert normalise_item(recorded) == normalise_item(resent)
    assert normalise_item(recorded) == ("function_call", "f", '{"a": [1, 2], "b": 1}', "call_1")
    assert normalise_item(call("call_2", "f", '{"a":[1,2],"b":1}')) != normalise_item(recorded)
    assert normalise_item(call("call_1", "f", "not json {")) == ("function_call", "f", "not json {", "call_1")


def test_function_call_output_text_and_reasoning() -> None:
    as_parts = {
        "type": "function_call_output",
        "call_id": "c",
        "output": [{"type": "input_text", "text": "42"}],
    }
    assert normalise_item(as_parts) == normalise_item(result("c", "42")) == ("function_call_output", "c", "42")
    assert normalise_item(thought("hmm")) is None
    assert normalise_items([thought("hmm"), user("q")]) == (("message", "user", "q"),)


def test_other_items_ignore_id_and_status() -> None:
    first = {"type": "computer_call", "id": "cc_1", "status": "completed", "action": {"x": 1}}
    again = {"type": "computer_call", "id": "cc_2", "action": {"x": 1}}
    moved = {"type": "computer_call", "id": "cc_1", "action": {"x": 2}}
    assert normalise_item(first) == normalise_item(again)
    assert normalise_item(first) != normalise_item(moved)
    assert normalise_item(first) == ("computer_call", '{"action": {"x": 1}, "type": "computer_call"}')


def test_model_turn_and_leading_system_messages_are_folded() -> None:
    responses_shaped = [
        {"role": "system", "content": "Rule one."},
        {"role": "developer", "content": "Rule two."},
        user("q"),
        said("Let me "),
        call("c1", "f", "{}"),
        said("check."),
        result("c1", "ok"),
    ]
    chat_shaped = [
        {"role": "system", "content": "Rule one.\n\nRule two."},
        user("q"),
        said("<think>private</think>Let me check."),
        call("c1", "f", "{}"),
        result("c1", "ok"),
    ]
    expected = (
        ("message", "system", "Rule one.\n\nRule two."),
        ("message", "user", "q"),
        ("message", "assistant", "Let me check."),
        ("function_call", "f", "{}", "c1"),
        ("function_call_output", "c1", "ok"),
    )
    assert normalise_items(responses_shaped) == normalise_items(chat_shaped) == expected
    # an assistant message that is empty (or only thinking) adds nothing
    assert normalise_items([user("q"), said("<think>x</think>"), call("c1", "f", "{}")]) == (
        ("message", "user", "q"),
        ("function_call", "f", "{}", "c1"),
    )


def test_normalise_items_rejects_non_objects() -> None:
    with pytest.raises(ValueError, match="#1"):
        normalise_items([user("q"), "oops"])


def test_request_items() -> None:
    assert request_items({"input": "Hi"}) == [{"type": "message", "role": "user", "content": "Hi"}]
    with_instructions = request_items({"input": [user("Hi")], "instructions": "Be kind."})
    assert with_instructions == [{"type": "message", "role": "system", "content": "Be kind."}, user("Hi")]
    assert request_items({"input": None, "instructions": None}) == []
    with pytest.raises(ValueError, match="input"):
        request_items({"input": 3})


def test_chat_messages_normalise_like_responses_items() -> None:
    chat = [
        {"role": "system", "content": "You are a weather bot."},
        {"role": "user", "content": [{"type": "text", "text": "How warm is it in Paris?"}]},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_w1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"unit":"C","city":"Paris"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_w1", "content": '{"temp": 21}'},
    ]
    assert normalise_items(chat_messages_to_items(chat)) == normalise_items(WEATHER_INPUT + WEATHER_OUTPUT[:3])


# ---- turns and index -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("types", "turns"),
    [
        ("", [(0, 0)]),
        ("M", [(0, 1)]),
        ("RCORM", [(0, 2), (3, 5)]),
        ("CCOOCOM", [(0, 2), (4, 5), (6, 7)]),
        ("RCO", [(0, 2)]),  # trajectory cut off after a tool result
        ("MUM", [(0, 1), (2, 3)]),  # a user-simulation environment adds user messages
        ("SUCOM", [(2, 3), (4, 5)]),  # environment items before the first model item
    ],
)
def test_split_turns(types: str, turns: list[tuple[int, int]]) -> None:
    make = {
        "M": lambda: said("a"),
        "R": lambda: thought("t"),
        "C": lambda: call("c", "f", "{}"),
        "O": lambda: result("c", "r"),
        "U": lambda: user("u"),
        "S": lambda: {"type": "message", "role": "system", "content": "s"},
    }
    assert split_turns([make[letter]() for letter in types]) == turns


def test_recording_turns_are_keyed_by_the_preceding_conversation(weather_file: Path) -> None:
    weather, arithmetic = load_recordings([weather_file])
    assert weather.source == f"{weather_file}:1" and arithmetic.source == f"{weather_file}:2"
    (key0, turn0), (key1, turn1) = recording_turns(weather)
    assert key0 == normalise_items(WEATHER_INPUT)
    assert list(turn0.items) == WEATHER_OUTPUT[:2] and not turn0.final
    assert key1 == normalise_items(WEATHER_INPUT + WEATHER_OUTPUT[:3])
    assert list(turn1.items) == WEATHER_OUTPUT[3:] and turn1.final
    assert "output" not in turn1.response
    index = ReplayIndex([weather, arithmetic])
    for key, turn in [(key0, turn0), (key1, turn1)]:
        assert index.answer(Conversation(key, (), None), repeat=0) == turn
    assert index.answer(Conversation(normalise_items([user("What is 2+2?")]), (), None), repeat=0) is not None


def test_instructions_are_part_of_the_key(tmp_path: Path) -> None:
    path = write_rollouts(tmp_path / "r.jsonl", [rollout("Hi", [said("Hello")], instructions="Be kind.")])
    ((key, _turn),) = recording_turns(load_recordings([path])[0])
    assert key == (("message", "system", "Be kind."), ("message", "user", "Hi"))


def test_untagged_answers_follow_a_counter_per_conversation_across_threads(tmp_path: Path) -> None:
    path = write_rollouts(tmp_path / "r.jsonl", [rollout("Q", [said("one")]), rollout("Q", [said("two")])])
    index = ReplayIndex(load_recordings([path]))
    conversation = Conversation(normalise_items([user("Q")]), ("input",), None)
    served: list[str] = []
    lock = threading.Lock()

    def ask() -> None:
        for _ in range(50):
            turn = index.answer(conversation, repeat=None)
            assert turn is not None
            with lock:
                served.append(turn.items[0]["content"][0]["text"])

    workers = [threading.Thread(target=ask) for _ in range(8)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert served.count("one") == served.count("two") == 200
    assert index.answer(Conversation(normalise_items([user("other")]), ("input",), None), repeat=None) is None


def test_responses_answer_fills_defaults_and_completes_intermediate_turns(tmp_path: Path) -> None:
    row = rollout("Q", [call("c", "f", "{}"), result("c", "r"), said("done")])
    for name in ("parallel_tool_calls", "tool_choice", "tools"):
        del row["response"][name]
    row["response"].update(status="incomplete", incomplete_details={"reason": "max_output_tokens"})
    (_, first), (_, last) = recording_turns(load_recordings([write_rollouts(tmp_path / "r.jsonl", [row])])[0])
    answer = responses_answer(first, response_id="resp_x", model="m", now=12.5)
    assert answer["parallel_tool_calls"] is True and answer["tool_choice"] == "auto" and answer["tools"] == []
    assert (answer["id"], answer["model"], answer["created_at"], answer["object"]) == (
        "resp_x",
        "m",
        12.5,
        "response",
    )
    assert answer["status"] == "completed" and answer["incomplete_details"] is None
    assert answer["usage"] == {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}
    final = responses_answer(last, response_id="resp_y", model="m", now=13.0)
    assert final["status"] == "incomplete" and final["incomplete_details"] == {"reason": "max_output_tokens"}
    assert final["usage"] == row["response"]["usage"]
    answer["output"][0]["name"] = "mutated"
    assert first.items[0]["name"] == "f"  # answers are copies


# Gym's example_multi_step recording: four model turns, the whole rollout's usage once in `response.usage`.
MULTI_STEP_USAGE = {
    "input_tokens": 2938,
    "input_tokens_details": {"cached_tokens": 2688},
    "output_tokens": 8,
    "output_tokens_details": {"reasoning_tokens": 0},
    "total_tokens": 2946,
}


def recorded_turns(tmp_path: Path, usage: Any, model_turns: int = 4) -> list[Turn]:
    """The turns of one recording with ``model_turns`` model turns (tool calls, then an answer) and ``usage``."""
    output: list[dict[str, Any]] = []
    for number in range(model_turns - 1):
        output += [call(f"c{number}", "step", f'{{"n": {number}}}'), result(f"c{number}", str(number))]
    row = rollout("Q", [*output, said("done")])
    row["response"]["usage"] = usage
    (recording,) = load_recordings([write_rollouts(tmp_path / "r.jsonl", [row])])
    return [turn for _, turn in recording_turns(recording)]


def answer_all(turns: list[Turn], api: str) -> list[dict[str, Any]]:
    if api == "chat":
        return [chat_answer(turn, completion_id="c", model="m", now=1.0) for turn in turns]
    return [responses_answer(turn, response_id="r", model="m", now=1.0) for turn in turns]


def detail(answer: dict[str, Any], name: str) -> Any:
    """A usage detail count (``cached_tokens``, ``reasoning_tokens``) of either API's answer."""
    usage = answer["usage"]
    groups = ("input_tokens_details", "prompt_tokens_details", "output_tokens_details", "completion_tokens_details")
    (value,) = [usage[group][name] for group in groups if name in usage.get(group, {})]
    return value


@pytest.mark.parametrize("api", ["responses", "chat"])
@pytest.mark.parametrize("model_turns", [1, 2, 4])
def test_the_answers_of_a_rollout_add_up_to_its_recorded_usage(tmp_path: Path, api: str, model_turns: int) -> None:
    turns = recorded_turns(tmp_path, MULTI_STEP_USAGE, model_turns)
    assert len(turns) == model_turns
    answers = answer_all(turns, api)
    totals = token_totals(record_usage({"response": answer}) for answer in answers)
    assert (totals.input_tokens, totals.output_tokens, totals.total_tokens) == (2938, 8, 2946)
    assert sum(detail(answer, "cached_tokens") for answer in answers) == 2688
    assert sum(detail(answer, "reasoning_tokens") for answer in answers) == 0
    # the whole rollout's usage comes with its last answer (an agent that keeps only the last call's usage has it)
    assert record_usage({"response": answers[-1]}) == Usage(2938, 8, 2946)
    assert all(record_usage({"response": answer}) == Usage(0, 0, 0) for answer in answers[:-1])


def test_earlier_turns_report_the_recorded_usage_with_every_count_zero_and_unknowns_unknown(tmp_path: Path) -> None:
    # the layout of Gym's example_tool_call_multireward recording: extra fields, unknown (null) counts, lists
    usage = {
        "input_tokens": 763,
        "input_tokens_details": {"cached_tokens": None, "audio_tokens": None, "input_tokens_per_turn": [400, 363]},
        "output_tokens": 1193,
        "output_tokens_details": {"reasoning_tokens": 0, "tool_output_tokens": 5},
        "total_tokens": 1956,
        "cost": None,
    }
    first, last = answer_all(recorded_turns(tmp_path, usage, 2), "responses")
    assert first["usage"] == {
        "input_tokens": 0,
        "input_tokens_details": {"cached_tokens": None, "audio_tokens": None, "input_tokens_per_turn": [0, 0]},
        "output_tokens": 0,
        "output_tokens_details": {"reasoning_tokens": 0, "tool_output_tokens": 0},
        "total_tokens": 0,
        "cost": None,
    }
    assert last["usage"] == usage
    chat_first, chat_last = answer_all(recorded_turns(tmp_path, usage, 2), "chat")
    assert chat_first["usage"] == {
        "prompt_tokens": 0,
        "completion_tokens": 0,
        "total_tokens": 0,
        "completion_tokens_details": {"reasoning_tokens": 0},
    }
    assert chat_last["usage"] == {
        "prompt_tokens": 763,
        "completion_tokens": 1193,
        "total_tokens": 1956,
        "completion_tokens_details": {"reasoning_tokens": 0},
    }


@pytest.mark.parametrize("usage", [None, {"input_tokens": 3}, "lots"], ids=["null", "no-output-count", "not-an-object"])
def test_a_chat_answer_has_usage_only_when_the_recording_gives_both_counts(tmp_path: Path, usage: Any) -> None:
    for answer in answer_all(recorded_turns(tmp_path, usage, 2), "chat"):
        assert "usage" not in answer
    (answer,) = answer_all(recorded_turns(tmp_path, {"prompt_tokens": 7, "completion_tokens": 2}, 1), "chat")
    assert answer["usage"] == {"prompt_tokens": 7, "completion_tokens": 2, "total_tokens": 9}


def test_a_responses_answer_gives_usage_that_is_no_object_as_recorded_and_none_when_none_recorded(
    tmp_path: Path,
) -> None:
    for usage in (None, "lots"):
        assert [answer["usage"] for answer in answer_all(recorded_turns(tmp_path, usage, 2), "responses")] == [
            usage,
            usage,
        ]
    row = rollout("Q", [said("A")])
    del row["response"]["usage"]
    (recording,) = load_recordings([write_rollouts(tmp_path / "bare.jsonl", [row])])
    ((_, turn),) = recording_turns(recording)
    assert "usage" not in responses_answer(turn, response_id="r", model="m", now=1.0)


# ---- loading errors ------------------------------------------------------------------------------

GOOD_LINE = json.dumps(rollout("Q", [said("A")]))


@pytest.mark.parametrize(
    ("lines", "where", "what"),
    [
        ([GOOD_LINE, "", "{not json"], 3, "malformed JSON"),
        ([GOOD_LINE, "[1, 2]"], 2, "expected a JSON object, got list"),
        ([GOOD_LINE, "null"], 2, "expected a JSON object, got NoneType"),
        ([json.dumps({"response": {"output": []}})], 1, "responses_create_params"),
        (
            [json.dumps({"responses_create_params": {"input": "Q"}, "response": {"id": "r"}})],
            1,
            "response.output",
        ),
        (
            [json.dumps({"responses_create_params": {"input": "Q"}, "response": {"output": [[]]}})],
            1,
            "output[0]",
        ),
        ([GOOD_LINE, GOOD_LINE, json.dumps(rollout(7, [said("A")]))], 3, "`input` must be a string"),
    ],
    ids=["malformed", "array", "null", "no-params", "no-output", "output-not-items", "bad-input"],
)
def test_bad_rollouts_name_file_and_line(tmp_path: Path, lines: list[str], where: int, what: str) -> None:
    path = tmp_path / "bad_rollouts.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(RecordingError) as caught:
        ReplayServer([path])
    assert str(caught.value).startswith(f"{path}:{where}: ")
    assert what in str(caught.value)
    assert isinstance(caught.value, ValueError)


def test_blank_lines_are_skipped_and_missing_files_reported(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text(f"\n{GOOD_LINE}\n   \n{GOOD_LINE}\n\n", encoding="utf-8")
    assert ReplayServer([path]).recordings == 2
    assert [recording.source for recording in load_recordings([path])] == [f"{path}:2", f"{path}:4"]
    with pytest.raises(RecordingError, match=re.escape(str(tmp_path / "missing.jsonl"))):
        ReplayServer([tmp_path / "missing.jsonl"])


# ---- the HTTP server -----------------------------------------------------------------------------


def test_single_turn_replay_over_http(weather_file: Path) -> None:
    with ReplayServer([weather_file]) as server:
        assert server.base_url == f"http://127.0.0.1:{server.port}/v1"
        assert server.recordings == 2
        status, answer = post(f"{server.base_url}/responses", {"input": "What is 2+2?", "model": None})
        assert status == 200
        assert answer["output"] == [said("4")]
        assert answer["object"] == "response" and answer["model"] == "recorded-model"
        assert re.fullmatch(r"resp_replay_\d+", answer["id"])
        assert isinstance(answer["created_at"], float) and answer["created_at"] > 1700000000.0
        _, again = post(f"{server.base_url}/responses", {"input": [user("What is 2+2?")], "model": "policy"})
        assert again["model"] == "policy" and again["id"] != answer["id"]
        assert server.request_count == 2


def test_two_turn_tool_calling_replay_through_responses(weather_file: Path) -> None:
    with ReplayServer([weather_file]) as server:
        url = f"{server.base_url}/responses"
        status, first = post(url, {"model": "policy", "input": WEATHER_INPUT, "tools": []})
        assert status == 200
        assert first["output"] == WEATHER_OUTPUT[:2]
        # the agent re-sends the model's items (as returned) plus the tool result
        conversation = WEATHER_INPUT + first["output"] + [result("call_w1", '{"temp": 21}')]
        status, second = post(url, {"model": "policy", "input": conversation})
        assert status == 200
        assert second["output"] == [thought("Now answer."), said("It is 21 °C in Paris.")]
        # a different tool result is a conversation that was never recorded
        status, _ = post(url, {"model": "policy", "input": [*conversation[:-1], result("call_w1", "{}")]})
        assert status == 404


def test_two_turn_tool_calling_replay_through_chat_completions(weather_file: Path) -> None:
    with ReplayServer([weather_file]) as server:
        url = f"{server.base_url}/chat/completions"
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": "You are a weather bot."},
            {"role": "user", "content": "How warm is it in Paris?"},
        ]
        status, first = post(url, {"model": "policy", "messages": messages})
        assert status == 200
        assert first["object"] == "chat.completion" and first["model"] == "policy"
        assert re.fullmatch(r"chatcmpl-replay-\d+", first["id"]) and isinstance(first["created"], int)
        (choice,) = first["choices"]
        assert choice["finish_reason"] == "tool_calls" and choice["index"] == 0
        assert choice["message"]["content"] is None
        assert choice["message"]["tool_calls"] == [
            {
                "id": "call_w1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Paris", "unit": "C"}'},
            }
        ]
        assert first["usage"] == {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}  # not the last turn
        messages += [
            choice["message"],
            {"role": "tool", "tool_call_id": "call_w1", "content": '{"temp": 21}'},
        ]
        status, second = post(url, {"model": "policy", "messages": messages})
        assert status == 200
        (choice,) = second["choices"]
        assert choice["finish_reason"] == "stop"
        assert choice["message"] == {"role": "assistant", "content": "It is 21 °C in Paris."}
        assert second["usage"] == {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}  # the recording's


def test_untagged_identical_conversations_are_answered_in_recording_order(tmp_path: Path) -> None:
    path = write_rollouts(
        tmp_path / "r.jsonl",
        [
            rollout("Flip a coin.", [said("heads")]),
            rollout("Other task", [said("x")]),
            rollout([user("Flip a coin.")], [said("tails")]),
        ],
    )
    with ReplayServer([path]) as server:
        texts = [
            post(f"{server.base_url}/responses", {"input": "Flip a coin."})[1]["output"][0]["content"][0]["text"]
            for _ in range(5)
        ]
    assert texts == ["heads", "tails", "heads", "tails", "heads"]


def test_unmatched_conversation_is_404_saying_where_it_departs(weather_file: Path) -> None:
    # The weather recording's system message is shared; the question differs only after 20 shared characters.
    asked = [*WEATHER_INPUT[:1], user("How warm is it in Berlin today?")]
    with ReplayServer([weather_file]) as server:
        status, body = post(f"{server.base_url}/responses", {"input": asked})
        chat_status, chat_body = post(
            f"{server.base_url}/chat/completions",
            {"messages": [{"role": "system", "content": "You are a weather bot."}, asked[1]]},
        )
    assert status == chat_status == 404
    assert body["error"]["type"] == "not_found" and body["error"]["code"] == "no_recording"
    message = body["error"]["message"]
    assert message == (
        "no recorded answer: the conversation departs from the closest recording "
        f'({weather_file}:1) at input[1] (user message): request has "How warm is it in Berlin today?", '
        'recording has "How warm is it in Paris?" (2 recordings loaded)'
    )
    assert chat_body["error"]["message"] == message.replace("input[1]", "messages[1]")


def test_models_unknown_paths_and_bad_requests(weather_file: Path) -> None:
    with ReplayServer([weather_file], model_name="my-policy") as server:
        assert get(f"{server.base_url}/models") == (
            200,
            {
                "object": "list",
                "data": [{"id": "my-policy", "object": "model", "created": 0, "owned_by": "pytest-gym-eval"}],
            },
        )
        status, body = get(f"{server.base_url}/nothing-here")
        assert status == 404 and body["error"]["code"] == "unknown_path"
        status, body = post(f"{server.base_url}/responses", raw=b"{not json")
        assert status == 400 and body["error"]["code"] == "bad_json"
        status, body = post(f"{server.base_url}/responses", raw=b"")
        assert status == 400 and "empty" in body["error"]["message"]
        status, body = post(f"{server.base_url}/responses", [1, 2])
        assert status == 400 and body["error"]["code"] == "bad_json"
        status, body = post(f"{server.base_url}/responses", {"input": 5})
        assert status == 400 and "input" in body["error"]["message"]
        status, body = post(f"{server.base_url}/chat/completions", {"messages": "hi"})
        assert status == 400 and "messages" in body["error"]["message"]
    with ReplayServer([weather_file]) as server:
        assert get(f"{server.base_url}/models")[1]["data"][0]["id"] == "replay"


def test_log_has_one_entry_per_request_and_no_headers(weather_file: Path, tmp_path: Path) -> None:
    log = tmp_path / "replay.log.jsonl"
    secret = {"Authorization": "Bearer sk-secret-value-123", "X-Api-Key": "another-secret-456"}
    with ReplayServer([weather_file], log_path=log) as server:
        get(f"{server.base_url}/models", headers=secret)
        post(f"{server.base_url}/responses", {"input": "What is 2+2?"}, headers=secret)
        post(f"{server.base_url}/responses", {"input": "Never recorded"}, headers=secret)
        post(f"{server.base_url}/responses", raw=b"garbage", headers=secret)
        assert server.request_count == 4
    text = log.read_text(encoding="utf-8")
    assert "sk-secret-value-123" not in text and "another-secret-456" not in text
    assert "Authorization" not in text
    with jsonlines.open(log) as reader:
        entries = list(reader)
    assert [(entry["method"], entry["path"], entry["status"]) for entry in entries] == [
        ("GET", "/v1/models", 200),
        ("POST", "/v1/responses", 200),
        ("POST", "/v1/responses", 404),
        ("POST", "/v1/responses", 400),
    ]
    assert all(isinstance(entry["time"], float) for entry in entries)
    assert entries[1]["request"] == {"input": "What is 2+2?"}
    assert entries[1]["answer"]["recording"] == f"{weather_file}:2"
    assert entries[1]["answer"]["text"] == "4"
    assert '"Never recorded"' in entries[2]["error"]
    assert entries[1]["answer"]["repeat"] is None
    assert entries[3]["request"] == "garbage" and "JSON" in entries[3]["error"]


def test_lifecycle(weather_file: Path) -> None:
    server = ReplayServer([weather_file])
    with pytest.raises(RuntimeError):
        _ = server.port
    server.start()
    with pytest.raises(RuntimeError):
        server.start()
    base_url = server.base_url
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    connection.request("GET", "/v1/models")
    assert connection.getresponse().read()  # the connection stays open (HTTP/1.1 keep-alive)
    server.stop()
    server.stop()  # idempotent
    with pytest.raises((OSError, http.client.HTTPException)):
        connection.request("GET", "/v1/models")
        connection.getresponse()
    connection.close()
    with pytest.raises(urllib.error.URLError):
        get(f"{base_url}/models")


# ---- command line --------------------------------------------------------------------------------


def test_command_line_rejects_bad_rollouts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad_rollouts.jsonl"
    bad.write_text(GOOD_LINE + "\n{oops\n", encoding="utf-8")
    assert main([str(bad)]) == 2
    captured = capsys.readouterr()
    assert f"{bad}:2" in captured.err and captured.out == ""


def test_delay_holds_answers_back_until_stop(tmp_path: Path) -> None:
    # A server with a very long delay still answers promptly once stopped: the delay is cut short, not leaked.
    recording = tmp_path / "r_rollouts.jsonl"
    recording.write_text(json.dumps(_DELAY_RECORD) + "\n")
    server = ReplayServer([recording], delay=3600)
    server.start()
    answers: list[int] = []

    def ask() -> None:
        request = urllib.request.Request(
            server.base_url + "/responses", data=json.dumps({"input": "ping"}).encode(), method="POST"
        )
        request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                answers.append(response.status)
        except OSError:
            answers.append(-1)

    thread = threading.Thread(target=ask)
    thread.start()
    thread.join(0.5)
    assert thread.is_alive() and answers == []  # held back
    server.stop()
    thread.join(60)
    assert not thread.is_alive()


_DELAY_RECORD = {
    "responses_create_params": {"input": [{"role": "user", "content": "ping"}]},
    "response": {
        "output": [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "pong"}]}]
    },
}


def test_tool_output_json_matches_whatever_its_whitespace() -> None:
    recorded = {"type": "function_call_output", "call_id": "c1", "output": '{"city": "Oslo", "temp": 3}'}
    live = {"type": "function_call_output", "call_id": "c1", "output": '{"temp":3,"city":"Oslo"}', "id": None}
    other = {"type": "function_call_output", "call_id": "c1", "output": '{"temp":4,"city":"Oslo"}'}
    assert normalise_item(recorded) == normalise_item(live) != normalise_item(other)
    plain = {"type": "function_call_output", "call_id": "c1", "output": "sunny,  mild"}
    assert normalise_item(plain) == ("function_call_output", "c1", "sunny,  mild")


# ---- exact matching: every part of the conversation counts ---------------------------------------


def data_url(payload: bytes, mime: str = "image/png") -> str:
    return f"data:{mime};base64,{base64.b64encode(payload).decode()}"


def sound(payload: bytes) -> str:
    return data_url(payload, "audio/wav")


def picture(payload: bytes, *, as_object: bool = False, detail: str | None = "auto") -> dict[str, Any]:
    url = data_url(payload)
    part: dict[str, Any] = {"type": "input_image", "image_url": {"url": url} if as_object else url}
    if detail is not None:
        part["detail"] = detail
    return part


def asking(*parts: dict[str, Any]) -> list[dict[str, Any]]:
    """A circle-counting conversation: one shared instruction, then a user message of ``parts``."""
    return [
        {"role": "system", "content": "Count the circles. Answer in \\boxed{}."},
        {"role": "user", "content": [*parts, {"type": "input_text", "text": "How many yellow circles?"}]},
    ]


def answer_text(body: dict[str, Any]) -> str:
    if "choices" in body:
        return str(body["choices"][0]["message"]["content"])
    return str(body["output"][-1]["content"][0]["text"])


@pytest.fixture
def pictures_file(tmp_path: Path) -> Path:
    """Two tasks that differ only in their image, recorded in the order that made arrival order matter."""
    return write_rollouts(
        tmp_path / "pictures_rollouts.jsonl",
        [
            rollout(asking(picture(b"two yellow circles")), [said("\\boxed{2}")]),
            rollout(asking(picture(b"one yellow circle")), [said("\\boxed{1}")]),
        ],
    )


def test_rows_that_differ_only_in_their_image_get_their_own_answers(pictures_file: Path) -> None:
    with ReplayServer([pictures_file]) as server:
        # The second task alone (as `-k` selects it), asked first: it must not get the first task's answer.
        for _ in range(2):
            status, body = post(f"{server.base_url}/responses", {"input": asking(picture(b"one yellow circle"))})
            assert status == 200 and answer_text(body) == "\\boxed{1}"
        # `image_url` as an object, or a chat `image_url` part, is the same image; base64 line breaks do not count.
        same = asking(picture(b"one yellow circle", as_object=True, detail=None))
        assert answer_text(post(f"{server.base_url}/responses", {"input": same})[1]) == "\\boxed{1}"
        wrapped = data_url(b"two yellow circles").replace("base64,", "base64,\n", 1)
        chat = [
            {"role": "system", "content": "Count the circles. Answer in \\boxed{}."},
            {"role": "user", "content": [{"type": "image_url", "image_url": {"url": wrapped, "detail": "auto"}},
                                         {"type": "text", "text": "How many yellow circles?"}]},
        ]  # fmt: skip
        assert answer_text(post(f"{server.base_url}/chat/completions", {"messages": chat})[1]) == "\\boxed{2}"
        # An image never recorded, or one shown at another detail, has no answer.
        assert post(f"{server.base_url}/responses", {"input": asking(picture(b"three circles"))})[0] == 404
        high = asking(picture(b"one yellow circle", detail="high"))
        assert post(f"{server.base_url}/responses", {"input": high})[0] == 404


def test_files_and_audio_take_part_in_the_match(tmp_path: Path) -> None:
    report = {"type": "input_file", "filename": "q3.pdf", "file_data": data_url(b"%PDF q3", "application/pdf")}
    recordings = write_rollouts(
        tmp_path / "media_rollouts.jsonl",
        [
            rollout([user("Summarise."), {"role": "user", "content": [report]}], [said("Q3 summary")]),
            rollout([{"role": "user", "content": [{**report, "file_data": data_url(b"%PDF q4", "application/pdf")}]}],
                    [said("Q4 summary")]),
            rollout([{"role": "user", "content": [{"type": "input_file", "file_id": "file-abc"}]}], [said("by id")]),
            # Gym's audio side channel: the row's metadata.audio_data, which Gym's vllm_model splices into the last
            # user message as an `audio_url` part before the text.
            rollout([user("Transcribe.")], [said("hello world")], metadata={"audio_data": sound(b"RIFFhello")}),
            rollout([user("Transcribe.")], [said("good night")], metadata={"audio_data": sound(b"RIFFnight")}),
        ],
    )  # fmt: skip
    with ReplayServer([recordings]) as server:
        url = f"{server.base_url}/responses"
        asked_file = [user("Summarise."), {"role": "user", "content": [report]}]
        assert answer_text(post(url, {"input": asked_file})[1]) == "Q3 summary"
        renamed = [user("Summarise."), {"role": "user", "content": [{**report, "filename": "q4.pdf"}]}]
        assert post(url, {"input": renamed})[0] == 404
        chat_file = {"type": "file", "file": {"file_data": report["file_data"], "filename": "q3.pdf"}}
        messages = [{"role": "user", "content": "Summarise."}, {"role": "user", "content": [chat_file]}]
        assert answer_text(post(f"{server.base_url}/chat/completions", {"messages": messages})[1]) == "Q3 summary"
        by_id = [{"role": "user", "content": [{"type": "input_file", "file_id": "file-abc"}]}]
        assert answer_text(post(url, {"input": by_id})[1]) == "by id"

        for audio, text in [(b"RIFFnight", "good night"), (b"RIFFhello", "hello world")]:
            body = {"input": [user("Transcribe.")], "metadata": {"audio_data": data_url(audio, "audio/wav")}}
            assert answer_text(post(url, body)[1]) == text
            spliced = {"messages": [{"role": "user", "content": [
                {"type": "audio_url", "audio_url": {"url": data_url(audio, "audio/wav")}},
                {"type": "text", "text": "Transcribe."},
            ]}]}  # fmt: skip
            assert answer_text(post(f"{server.base_url}/chat/completions", spliced)[1]) == text
            as_input_audio = {"input": [{"role": "user", "content": [
                {"type": "input_audio", "input_audio": {"data": base64.b64encode(audio).decode(), "format": "wav"}},
                {"type": "input_text", "text": "Transcribe."},
            ]}]}  # fmt: skip
            assert answer_text(post(url, as_input_audio)[1]) == text
        assert post(url, {"input": [user("Transcribe.")]})[0] == 404


def tool_task(city: str, final: str, *, call_id: str = "call_1", temperature: str = "21") -> dict[str, Any]:
    return rollout(
        [user("What is the weather?")],
        [call(call_id, "get_weather", json.dumps({"city": city})), result(call_id, f'{{"temp": {temperature}}}'),
         said(final)],
    )  # fmt: skip


def test_tool_calls_and_results_take_part_in_the_match(tmp_path: Path) -> None:
    # Two recordings of one task: the model called the tool with different arguments, the tool answered differently.
    path = write_rollouts(
        tmp_path / "tools_rollouts.jsonl",
        [tool_task("Paris", "21 in Paris"), tool_task("Oslo", "3 in Oslo", temperature="3")],
    )
    with ReplayServer([path]) as server:
        url = f"{server.base_url}/responses"
        for city, temperature, final in [("Oslo", "3", "3 in Oslo"), ("Paris", "21", "21 in Paris")]:
            conversation = [user("What is the weather?"), call("call_1", "get_weather", json.dumps({"city": city})),
                            result("call_1", f'{{"temp": {temperature}}}')]  # fmt: skip
            assert answer_text(post(url, {"input": conversation})[1]) == final
        # The Paris call with Oslo's tool result was never recorded.
        crossed = [user("What is the weather?"), call("call_1", "get_weather", '{"city": "Paris"}'),
                   result("call_1", '{"temp": 3}')]  # fmt: skip
        status, body = post(url, {"input": crossed})
        assert status == 404
        assert f"({path}:1) at input[2] (function_call_output of call_1)" in body["error"]["message"]


def test_tool_definitions_count_when_the_recording_has_them(tmp_path: Path) -> None:
    weather = {"type": "function", "name": "get_weather", "description": "Weather now.", "strict": True,
               "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}  # fmt: skip
    path = write_rollouts(
        tmp_path / "defs_rollouts.jsonl",
        [rollout("Weather?", [said("with tools")], tools=[weather]), rollout("Hello", [said("no tools recorded")])],
    )
    with ReplayServer([path]) as server:
        url = f"{server.base_url}/responses"
        assert answer_text(post(url, {"input": "Weather?", "tools": [weather]})[1]) == "with tools"
        chat_tool = {"type": "function", "function": {k: v for k, v in weather.items() if k not in ("type", "strict")}}
        chat = {"messages": [{"role": "user", "content": "Weather?"}], "tools": [chat_tool]}
        assert answer_text(post(f"{server.base_url}/chat/completions", chat)[1]) == "with tools"
        status, body = post(url, {"input": "Weather?", "tools": [{**weather, "name": "get_forecast"}]})
        assert status == 404
        assert (
            "not its tool definitions: request has [get_forecast], recording has [get_weather]"
            in (body["error"]["message"])
        )
        assert post(url, {"input": "Weather?"})[0] == 404
        # A recording without tools answers whatever tools the agent adds.
        assert answer_text(post(url, {"input": "Hello", "tools": [weather]})[1]) == "no tools recorded"


def repeats_file(tmp_path: Path) -> Path:
    """Three recordings of one task, in a file order that differs from their repeat (_ng_rollout_index) order,
    each a two-turn tool-calling conversation sharing its first turn, and another task in between."""
    rows = []
    for repeat in (2, 0, 1):
        row = tool_task("Paris", f"final answer of repeat {repeat}")
        row["_ng_rollout_index"] = repeat
        rows.append(row)
    rows.insert(1, rollout("Other task", [said("other")]))
    return write_rollouts(tmp_path / "repeats_rollouts.jsonl", rows)


def two_turns(url: str, repeat: int | None) -> tuple[str, str]:
    """One rollout of the repeats task: returns the recording that answered each turn."""
    metadata = {"metadata": {"pytest_gym_eval_repeat": str(repeat)}} if repeat is not None else {}
    status, first = post(url, {"input": [user("What is the weather?")], **metadata})
    assert status == 200
    conversation = [user("What is the weather?"), *first["output"], result("call_1", '{"temp": 21}')]
    status, second = post(url, {"input": conversation, **metadata})
    assert status == 200
    return first["output"][0]["name"], answer_text(second)


def test_identical_conversations_are_answered_by_repeat_whatever_the_arrival_order(tmp_path: Path) -> None:
    path = repeats_file(tmp_path)
    with ReplayServer([path], log_path=tmp_path / "log.jsonl") as server:
        url = f"{server.base_url}/responses"
        for arrival in ([0, 1, 2, 3, 4, 5], [5, 4, 3, 2, 1, 0], [2, 0, 4, 1, 5, 3]):
            answered: dict[int, str] = {}

            def rollout_of(repeat: int, answered: dict[int, str] = answered) -> None:
                answered[repeat] = two_turns(url, repeat)[1]

            threads = [threading.Thread(target=rollout_of, args=(repeat,)) for repeat in arrival]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            # repeat r gets recording r mod 3 by _ng_rollout_index, at every turn
            assert answered == {r: f"final answer of repeat {r % 3}" for r in range(6)}
    logged = [json.loads(line)["answer"] for line in (tmp_path / "log.jsonl").read_text().splitlines()]
    assert {(entry["repeat"], entry["recording"]) for entry in logged if entry["repeat"] == "1"} == set()
    assert {(entry["repeat"], entry["recording"]) for entry in logged if entry["repeat"] == 1} == {(1, f"{path}:4")}


def test_untagged_identical_conversations_follow_repeat_order_per_conversation(tmp_path: Path) -> None:
    path = repeats_file(tmp_path)
    with ReplayServer([path]) as server:
        url = f"{server.base_url}/responses"
        finals = [two_turns(url, None)[1] for _ in range(4)]
    assert finals == [f"final answer of repeat {r % 3}" for r in range(4)]


def test_a_repeat_tag_that_is_not_a_number_is_a_bad_request(weather_file: Path) -> None:
    with ReplayServer([weather_file]) as server:
        for tag in ["one", -1, 1.5, True]:
            body = {"input": "What is 2+2?", "metadata": {"pytest_gym_eval_repeat": tag}}
            status, answer = post(f"{server.base_url}/responses", body)
            assert status == 400 and "pytest_gym_eval_repeat" in answer["error"]["message"], tag
        assert post(f"{server.base_url}/responses", {"input": "What is 2+2?", "metadata": None})[0] == 200


# ---- the 404: where the conversation departs from the closest recording ----------------------------


def test_404_names_the_differing_image_of_the_most_alike_recording(pictures_file: Path) -> None:
    asked = {"input": asking(picture(b"three yellow circles"))}
    message = explain_unmatched(asked, [pictures_file])
    assert message is not None
    assert "\n" not in message and len(message) < 400
    digest = hashlib.sha256(b"three yellow circles").hexdigest()[:12]
    recorded = hashlib.sha256(b"two yellow circles").hexdigest()[:12]
    assert message == (
        f"no recorded answer: the conversation departs from the closest recording ({pictures_file}:1) at "
        f'input[1] (user message): request has "[image sha256:{digest}]How many yellow circles?", recording has '
        f'"[image sha256:{recorded}]How many yellow circles?" (2 recordings loaded)'
    )
    with ReplayServer([pictures_file]) as server:
        status, body = post(f"{server.base_url}/responses", asked)
    assert status == 404 and body["error"]["message"] == message
    assert explain_unmatched({"input": asking(picture(b"one yellow circle"))}, [pictures_file]) is None


def test_404_shows_the_text_from_where_it_differs_not_the_shared_start(tmp_path: Path) -> None:
    shared = "You should output your final response letter inside \\boxed{} and nothing else. " * 3
    path = write_rollouts(
        tmp_path / "long_rollouts.jsonl",
        [rollout(shared + "Which test finds the mutation?", [said("B")]), rollout(shared + "Which gas?", [said("C")])],
    )
    message = explain_unmatched({"input": shared + "Which test finds the gene?"}, [path])
    assert message is not None and len(message) < 400
    assert f"({path}:1) at input (user message): " in message
    assert message.endswith(
        'request has ..."Which test finds the gene?", recording has ..."Which test finds the mutation?" '
        "(2 recordings loaded)"
    )


@pytest.mark.parametrize(
    ("asked", "expected"),
    [
        ({"input": []}, "the conversation holds no items"),
        (
            {"input": [*WEATHER_INPUT, call("call_w1", "get_weather", '{"city": "Paris", "unit": "C"}')]},
            "the conversation stops inside the closest recording ({path}:1): after input[2] the recording continues "
            'with output[2], a function_call_output of call_w1 "{\\"temp\\": 21}", not a model answer',
        ),
        (
            {"input": [*WEATHER_INPUT, *WEATHER_OUTPUT, user("And tomorrow?")]},
            "the conversation continues past the end of the closest recording ({path}:1) at input[7]: request has a "
            'user message "And tomorrow?"',
        ),
        (
            {"input": [*WEATHER_INPUT, *WEATHER_OUTPUT]},
            "the conversation is the whole of recording {path}:1, which holds no model answer after its last item",
        ),
        (
            {"input": [user("What is 2+2?"), said("4"), result("c9", "5")]},
            "the conversation continues past the end of the closest recording ({path}:2) at input[2]: request has a "
            'function_call_output of c9 "5"',
        ),
        (
            {"input": [WEATHER_INPUT[0], said("Hello")]},
            "the conversation departs from the closest recording ({path}:1) at input[1]: request has an assistant "
            'message "Hello", recording has a user message "How warm is it in Paris?"',
        ),
    ],
    ids=["empty", "stops-inside", "continues-past", "whole", "past-the-other", "kind-differs"],
)
def test_404_says_how_the_conversation_departs(weather_file: Path, asked: dict[str, Any], expected: str) -> None:
    message = explain_unmatched(asked, [weather_file])
    assert message == (f"no recorded answer: {expected.replace('{path}', str(weather_file))} (2 recordings loaded)")


def test_departure_message_stays_one_short_line_for_long_items(tmp_path: Path) -> None:
    path = write_rollouts(tmp_path / "r.jsonl", [rollout("x" * 5000 + "A\nB", [said("y")])])
    message = explain_unmatched({"input": "x" * 5000 + "C\nD"}, [path])
    assert message is not None and "\n" not in message and len(message) < 400
    assert 'request has ..."xxxxxxxxxxxxxxxxxxxxC\\nD", recording has ..."xxxxxxxxxxxxxxxxxxxxA\\nB"' in message


# ---- the plugin's side: Gym's input carries the repeat, flips compare with the served recording -------


def test_gym_rows_carry_their_repeat_only_when_asked_and_keep_the_rest(tmp_path: Path) -> None:
    from pytest_gym_eval.tasks.dataset import row_digest
    from pytest_gym_eval.tasks.plan import REPEAT_TAG, RunPlan, gym_row, write_gym_input

    row = {"responses_create_params": {"input": "Q", "metadata": {"extra_body": "{}"}}, "expected": "A"}
    before = json.dumps(row, sort_keys=True)
    tagged = gym_row(row, 7, "agent", repeat=3)
    assert tagged["responses_create_params"]["metadata"] == {"extra_body": "{}", REPEAT_TAG: "3"}
    assert tagged["expected"] == "A" and tagged["_ng_task_index"] == 7
    assert json.dumps(row, sort_keys=True) == before  # the row itself is unchanged
    assert row_digest(row) == row_digest({**row})  # and so is the task's identity, computed from it
    assert "metadata" not in gym_row({"responses_create_params": {"input": "Q"}}, 0, "a")["responses_create_params"]
    odd = {"responses_create_params": {"input": "Q", "metadata": "not an object"}}
    assert gym_row(odd, 0, "a", repeat=1)["responses_create_params"]["metadata"] == "not an object"

    dataset = tmp_path / "d.jsonl"
    dataset.write_text(json.dumps({"responses_create_params": {"input": "Q"}}) + "\n")
    plan = RunPlan.build([(f"d.jsonl::t[r{r}]", dataset, 1, "t", r, "agent") for r in range(2)])
    for tag, expected in [(True, [{REPEAT_TAG: "0"}, {REPEAT_TAG: "1"}]), (False, [None, None])]:
        write_gym_input(plan, tmp_path / "in.jsonl", tag_repeats=tag)
        rows = [json.loads(line) for line in (tmp_path / "in.jsonl").read_text().splitlines()]
        assert [r["responses_create_params"].get("metadata") for r in rows] == expected


def test_flips_compare_each_repeat_with_the_recording_it_was_served(tmp_path: Path) -> None:
    from pytest_gym_eval.reporting.summary import RolloutResult
    from pytest_gym_eval.session.conclude import find_flips

    first, second = rollout("Flip a coin.", [said("heads")]), rollout("Flip a coin.", [said("tails")])
    second["reward"] = 0.0
    recordings = write_rollouts(tmp_path / "coin_rollouts.jsonl", [first, second])
    records = tmp_path / "gym_rollouts.jsonl"
    lines = [{"responses_create_params": {"input": "Flip a coin.", "metadata": {"pytest_gym_eval_repeat": str(r)}}}
             for r in range(2)] + [{"responses_create_params": {"input": "Flip a coin."}}]  # fmt: skip
    records.write_text("".join(json.dumps(line) + "\n" for line in lines))

    def rolled(line: int, reward: float) -> RolloutResult:
        return RolloutResult(nodeid=f"coin[{line}]", dataset="d", task_id="coin", repeat=line - 1, agent="a",
                             status="passed", reward=reward, record=f"{records}:{line}")  # fmt: skip

    # repeat 0 was served the 1.0 recording, repeat 1 the 0.0 one: a 1.0 on repeat 1 is a flip, on repeat 0 not
    flips = find_flips([rolled(1, 1.0), rolled(2, 1.0), rolled(2, 0.0)], [recordings])
    assert [(flip.nodeid, flip.reward, flip.recorded) for flip in flips] == [("coin[2]", 1.0, (0.0,))]
    # untagged: which recording answered depends on arrival, so only a reward matching none of them flips
    assert find_flips([rolled(3, 0.0), rolled(3, 1.0)], [recordings]) == []
    assert [flip.recorded for flip in find_flips([rolled(3, 0.5)], [recordings])] == [(1.0, 0.0)]


def test_a_recording_without_a_reward_never_flips(tmp_path: Path) -> None:
    """Policy answers written without Gym's verifier (a test's own recordings) carry no reward: no rollout
    replayed from them flips (a real-Gym run of a judge environment listed each as "reward 1, recorded None")."""
    from pytest_gym_eval.reporting.summary import RolloutResult
    from pytest_gym_eval.session.conclude import find_flips

    answer = rollout("Flip a coin.", [said("heads")])
    answer.pop("reward", None)
    recordings = write_rollouts(tmp_path / "coin_rollouts.jsonl", [answer])
    records = tmp_path / "gym_rollouts.jsonl"
    records.write_text(json.dumps({"responses_create_params": {"input": "Flip a coin."}}) + "\n")
    rolled = RolloutResult(nodeid="coin[1]", dataset="d", task_id="coin", repeat=0, agent="a", status="passed",
                           reward=1.0, record=f"{records}:1")  # fmt: skip
    assert find_flips([rolled], [recordings]) == []


def test_flips_read_gyms_records_file_once_and_keep_the_results_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pytest_gym_eval.outcomes import records as records_module
    from pytest_gym_eval.reporting.summary import RolloutResult
    from pytest_gym_eval.session.conclude import find_flips

    recordings = write_rollouts(tmp_path / "coin_rollouts.jsonl", [rollout("Flip a coin.", [said("heads")])])
    records = tmp_path / "gym_rollouts.jsonl"
    line = json.dumps({"responses_create_params": {"input": "Flip a coin."}}) + "\n"
    records.write_text(line * 60)
    opened: list[Path] = []
    real_open = Path.open

    def counting_open(self: Path, *args: object, **kwargs: object) -> object:
        if self == records:
            opened.append(self)
        return real_open(self, *args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr(records_module.Path, "open", counting_open)

    def rolled(line: int) -> RolloutResult:
        return RolloutResult(nodeid=f"coin[{line}]", dataset="d", task_id="coin", repeat=0, agent="a",
                             status="passed", reward=0.5 if line % 2 else 1.0, record=f"{records}:{line}")  # fmt: skip

    results = [rolled(line) for line in range(60, 0, -1)]  # the results in another order than their lines
    flips = find_flips(results, [recordings])
    assert [flip.nodeid for flip in flips] == [f"coin[{line}]" for line in range(59, 0, -2)]
    assert len(opened) == 1  # one walk through Gym's output, not one per rollout (N x N lines at scale)


def test_a_client_hanging_up_is_no_server_error_but_other_errors_are_printed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    recordings = write_rollouts(tmp_path / "r.jsonl", [rollout("Ping?", [said("pong")])])
    with ReplayServer([recordings]) as server:
        http = server._httpd
        assert http is not None
        for hung_up in (BrokenPipeError(32, "Broken pipe"), ConnectionResetError(104, "Connection reset")):
            try:
                raise hung_up
            except OSError:
                http.handle_error(None, ("127.0.0.1", 1))
        assert capsys.readouterr().err == ""
        try:
            raise ValueError("a bug")
        except ValueError:
            http.handle_error(None, ("127.0.0.1", 1))
        assert "ValueError: a bug" in capsys.readouterr().err


def test_many_connections_at_once_wait_in_the_listen_backlog_not_in_tcp_retransmissions(tmp_path: Path) -> None:
    # Gym opens dozens of connections at once. With socketserver's backlog of 5 the kernel dropped the SYNs
    # beyond it, and each of those connections waited for TCP's retransmission (1 s, then 3, 7, 15 s).
    recordings = write_rollouts(tmp_path / "r.jsonl", [rollout("q", [])])
    server = _HttpServer(("127.0.0.1", 0), ReplayServer([recordings], log_path=tmp_path / "log.jsonl"))
    try:  # nothing accepts: every connection stays in the backlog
        connections = [socket.create_connection(server.server_address[:2], timeout=5) for _ in range(64)]
        for connection in connections:
            connection.close()
    finally:
        server.server_close()
