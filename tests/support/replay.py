"""Helpers of the replay model server's tests (unit, command and real-Gym tiers): synthetic recorded rollouts in
Gym's format, and HTTP calls on 127.0.0.1 that never go through a proxy."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import jsonlines

_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never route loopback via a proxy


def user(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": text}


def said(text: str, item_id: str = "msg_1") -> dict[str, Any]:
    return {
        "id": item_id,
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def call(call_id: str, name: str, arguments: str, item_id: str = "fc_1") -> dict[str, Any]:
    return {
        "id": item_id,
        "type": "function_call",
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
        "status": "completed",
    }


def result(call_id: str, output: str) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": output}


def thought(text: str) -> dict[str, Any]:
    return {"id": "rs_1", "type": "reasoning", "summary": [{"type": "summary_text", "text": text}]}


def rollout(task_input: Any, output: list[dict[str, Any]], **params: Any) -> dict[str, Any]:
    return {
        "responses_create_params": {"input": task_input, "tools": [], **params},
        "response": {
            "id": "resp_recorded",
            "created_at": 1700000000.0,
            "model": "recorded-model",
            "object": "response",
            "output": output,
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "status": "completed",
            "usage": {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15},
        },
        "reward": 1.0,
    }


def write_rollouts(path: Path, rows: list[Any]) -> Path:
    with jsonlines.open(path, mode="w") as writer:
        writer.write_all(rows)
    return path


WEATHER_INPUT = [
    {"type": "message", "role": "developer", "content": "You are a weather bot."},
    user("How warm is it in Paris?"),
]
WEATHER_OUTPUT = [
    thought("I should look the weather up."),
    call("call_w1", "get_weather", '{"city": "Paris", "unit": "C"}'),
    result("call_w1", '{"temp": 21}'),
    thought("Now answer."),
    said("It is 21 °C in Paris."),
]


def post(url: str, body: Any = None, *, raw: bytes | None = None, headers: dict[str, str] | None = None) -> Any:
    """POST JSON (or raw bytes); returns ``(status, decoded JSON body)`` for any status."""
    data = raw if raw is not None else json.dumps(body).encode()
    request = urllib.request.Request(
        url, data=data, headers={"Content-Type": "application/json", **(headers or {})}, method="POST"
    )
    return send(request)


def get(url: str, headers: dict[str, str] | None = None) -> Any:
    return send(urllib.request.Request(url, headers=headers or {}, method="GET"))


def send(request: urllib.request.Request) -> tuple[int, Any]:
    try:
        with _OPENER.open(request, timeout=10) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as error:
        with error:
            return error.code, json.load(error)
