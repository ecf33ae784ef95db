"""A recorded turn as the answer an API gives: a Responses object or a chat completion."""

from __future__ import annotations

import copy
import json
from typing import Any

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


def responses_answer(turn: Turn, *, response_id: str, model: str, now: float) -> dict[str, Any]:
    """A Responses API object for ``turn``: a copy of the recorded response with the turn's items as
    ``output``, the given ``id``, ``model`` and ``created_at`` (``now``, seconds since the epoch), and
    ``parallel_tool_calls``/``tool_choice``/``tools`` defaulted to ``True``/``"auto"``/``[]``.
    A non-final turn is reported ``completed`` (the recorded status describes the whole trajectory).
    """
    answer = copy.deepcopy(turn.response)
    answer.update(
        id=response_id, object="response", created_at=now, model=model, output=copy.deepcopy(list(turn.items))
    )
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
    function calls) carry the recorded call ids; reasoning is omitted. ``now`` is in seconds."""
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
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": int(now),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}],
        "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
    }
