"""A recorded turn as the answer an API gives: a Responses object or a chat completion."""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any

from pytest_gym_eval.outcomes.usage import record_usage
from pytest_gym_eval.replay.content import content_text
from pytest_gym_eval.replay.normal import item_type
from pytest_gym_eval.replay.recordings import Turn


def turn_text(turn: Turn) -> str:
    """Joined text of the turn's assistant messages."""
    return "".join(
        content_text(item.get("content"))
        for item in turn.items
        if item_type(item) == "message" and item.get("role") == "assistant"
    )


def _zeroed(value: Any) -> Any:
    """``value`` with every number in it (at any depth of objects and lists) replaced by 0; booleans, strings and
    None as they are."""
    if isinstance(value, Mapping):
        return {name: _zeroed(inner) for name, inner in value.items()}
    if isinstance(value, list):
        return [_zeroed(inner) for inner in value]
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return 0
    return value


def turn_usage(turn: Turn) -> Any:
    """The token usage ``turn``'s answer reports, in the recording's layout (a copy).

    A recording's ``response.usage`` is the whole rollout's: Gym's agents add up the usage of every model call of a
    rollout (``accumulate_response_usage``). So the final turn reports the recorded usage as it is and every other
    turn the same object with each of its numbers 0 (None, an unknown count, stays None): a replayed rollout then
    adds up to the recording's usage, however many turns it has, and an agent that keeps only its last call's usage
    reports it too. A recording without a ``usage`` object gives its value as recorded (None when absent).
    """
    usage = turn.response.get("usage")
    if turn.final or not isinstance(usage, Mapping):
        return copy.deepcopy(usage)
    return _zeroed(usage)


def chat_usage(usage: Any) -> dict[str, Any] | None:
    """A usage object (Responses layout ``input_tokens``/``output_tokens``, or chat layout) in the chat-completions
    layout: ``prompt_tokens``, ``completion_tokens``, ``total_tokens`` (their sum when not recorded), and
    ``prompt_tokens_details.cached_tokens`` / ``completion_tokens_details.reasoning_tokens`` when recorded (from
    ``input_tokens_details``/``output_tokens_details``). None when ``usage`` is not an object or lacks the input or
    the output count (a chat completion's usage needs both)."""
    if not isinstance(usage, Mapping):
        return None
    counts = record_usage({"response": {"usage": usage}})
    if counts.input_tokens is None or counts.output_tokens is None:
        return None
    chat: dict[str, Any] = {
        "prompt_tokens": counts.input_tokens,
        "completion_tokens": counts.output_tokens,
        "total_tokens": counts.total_tokens,
    }
    for source, target, name in (
        ("input_tokens_details", "prompt_tokens_details", "cached_tokens"),
        ("output_tokens_details", "completion_tokens_details", "reasoning_tokens"),
    ):
        details = usage.get(source, usage.get(target))
        if isinstance(details, Mapping) and details.get(name) is not None:
            chat[target] = {name: details[name]}
    return chat


def responses_answer(turn: Turn, *, response_id: str, model: str, now: float) -> dict[str, Any]:
    """A Responses API object for ``turn``: a copy of the recorded response with the turn's items as
    ``output``, the given ``id``, ``model`` and ``created_at`` (``now``, seconds since the epoch), and
    ``parallel_tool_calls``/``tool_choice``/``tools`` defaulted to ``True``/``"auto"``/``[]``.
    A non-final turn is reported ``completed`` (the recorded status describes the whole trajectory), and its
    ``usage`` is :func:`turn_usage`'s (zero counts: the recorded usage is the whole trajectory's, reported once).
    """
    answer = copy.deepcopy(turn.response)
    answer.update(
        id=response_id, object="response", created_at=now, model=model, output=copy.deepcopy(list(turn.items))
    )
    if "usage" in answer:
        answer["usage"] = turn_usage(turn)
    for name, default in (("parallel_tool_calls", True), ("tool_choice", "auto"), ("tools", [])):
        if answer.get(name) is None:
            answer[name] = default
    if not turn.final:
        answer["status"] = "completed"
        answer["incomplete_details"] = None
    return answer


def _arguments_text(arguments: Any) -> str:
    """Recorded function-call arguments as the JSON string chat completions carry."""
    return arguments if isinstance(arguments, str) else json.dumps(arguments)


def chat_answer(turn: Turn, *, completion_id: str, model: str, now: float) -> dict[str, Any]:
    """A ``chat.completion`` object for ``turn``: one assistant choice whose ``content`` is the joined
    message text (``None`` when empty) and whose ``tool_calls`` (present only when the turn has
    function calls) carry the recorded call ids; reasoning is omitted. ``now`` is in seconds. ``usage`` is
    :func:`turn_usage` in the chat layout (:func:`chat_usage`), absent when the recording has no such counts."""
    calls = [
        {
            "id": item.get("call_id", ""),
            "type": "function",
            "function": {
                "name": item.get("name", ""),
                "arguments": _arguments_text(item.get("arguments", "")),
            },
        }
        for item in turn.items
        if item_type(item) == "function_call"
    ]
    message: dict[str, Any] = {"role": "assistant", "content": turn_text(turn) or None}
    if calls:
        message["tool_calls"] = calls
    answer: dict[str, Any] = {
        "id": completion_id,
        "object": "chat.completion",
        "created": int(now),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}],
    }
    usage = chat_usage(turn_usage(turn))
    if usage is not None:
        answer["usage"] = usage
    return answer
