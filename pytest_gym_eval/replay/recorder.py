"""The recording proxy: a loopback OpenAI-compatible model server that forwards each call to a real endpoint and
appends each (request, answer) to a recordings file the replay server reads.

For a judge (or any auxiliary model) whose calls Gym's rollout records do not carry (simpleqa, multichallenge,
arena_judge, ...): bind the judge to the proxy for one recording run, then to a replay server of the file.
What users see: docs/models.md ("Judge recordings").
"""

from __future__ import annotations

import copy
import json
import os
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jsonlines

from pytest_gym_eval.core.credentials import redact_value
from pytest_gym_eval.replay.normal import chat_messages_to_items
from pytest_gym_eval.replay.server import LoopbackServer, _HttpError, _parse_body

_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))
"""Urllib without the environment's HTTP proxies: the upstream is often on loopback."""
RECORDED_PATHS = {"/v1/responses": "/responses", "/v1/chat/completions": "/chat/completions"}
"""The proxy's recorded endpoints -> the upstream's path under its base URL."""


def _usage_as_responses(usage: Any) -> Any:
    """A chat-completions usage object in the Responses layout (``input_tokens``, ``output_tokens``,
    ``total_tokens``, ``*_details``), as a Responses object needs it; anything else as it is."""
    if not isinstance(usage, Mapping) or "prompt_tokens" not in usage:
        return usage
    prompt = usage.get("prompt_tokens_details")
    completion = usage.get("completion_tokens_details")
    return {
        "input_tokens": usage.get("prompt_tokens"),
        "output_tokens": usage.get("completion_tokens"),
        "total_tokens": usage.get("total_tokens"),
        "input_tokens_details": {"cached_tokens": (prompt or {}).get("cached_tokens") or 0},
        "output_tokens_details": {"reasoning_tokens": (completion or {}).get("reasoning_tokens") or 0},
    }


def chat_recording(body: Mapping[str, Any], answer: Mapping[str, Any]) -> dict[str, Any]:
    """One chat-completions call as a recording line: the ``messages`` as Responses ``input`` items
    (:func:`~pytest_gym_eval.replay.normal.chat_messages_to_items`, so the conversation normalises as the chat
    request does) with its ``tools``, and the first choice's message as ``output`` (an assistant message with an
    ``output_text`` part when it has text, then a ``function_call`` per tool call); ``usage`` in the Responses
    layout. Raises ``ValueError`` for ``messages`` that are no list of objects or an answer without a choice."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        raise ValueError("`messages` must be a list")
    choices = answer.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
        raise ValueError("the chat completion has no choice")
    message = choices[0].get("message") or {}
    output: list[dict[str, Any]] = []
    text = message.get("content")
    if isinstance(text, str) and text:
        content = [{"type": "output_text", "text": text, "annotations": []}]
        output.append({"type": "message", "role": "assistant", "status": "completed", "content": content})
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        output.append(
            {
                "type": "function_call",
                "call_id": call.get("id", ""),
                "name": function.get("name", ""),
                "arguments": function.get("arguments", ""),
                "status": "completed",
            }
        )
    params = {"input": chat_messages_to_items(messages), "tools": copy.deepcopy(body.get("tools") or [])}
    response = {"id": answer.get("id"), "object": "response", "model": answer.get("model"), "output": output}
    if answer.get("usage") is not None:
        response["usage"] = _usage_as_responses(answer["usage"])
    return {"responses_create_params": params, "response": response}


class RecordingProxy(LoopbackServer):
    """Loopback OpenAI-compatible model server that forwards to ``upstream`` and records what it answered.

    ``upstream`` is the endpoint's OpenAI base URL (``http://host:port/v1``); ``model``, when given, replaces the
    request's ``model`` (the name the endpoint serves); the API key is read from the environment variable
    ``key_env`` at construction (``ValueError`` naming it when it is unset) and sent as ``Authorization: Bearer``,
    never logged or recorded. ``POST /v1/responses`` and ``POST /v1/chat/completions`` are forwarded (``timeout``
    seconds each); an answer with HTTP 200 is returned as it came and appended to ``recordings`` as one line
    ``{"responses_create_params": REQUEST, "response": ANSWER}`` (a chat call as :func:`chat_recording` has it),
    which :func:`~pytest_gym_eval.replay.recordings.load_recordings` reads; an upstream error is returned with its
    status and body and not recorded, an unreachable upstream is HTTP 502. ``GET /v1/models`` lists ``model_name``
    without asking the upstream. Host, port and the context manager as :class:`LoopbackServer`.
    """

    def __init__(
        self,
        upstream: str,
        recordings: Path,
        *,
        model: str | None = None,
        key_env: str | None = None,
        model_name: str = "recorder",
        host: str = "127.0.0.1",
        port: int = 0,
        timeout: float = 600.0,
    ) -> None:
        super().__init__(name="recording proxy", host=host, port=port)
        self._upstream = upstream.rstrip("/")
        self._recordings_path = recordings
        self._model = model
        self._key: str | None = None
        if key_env:
            key = os.environ.get(key_env)
            if key is None:
                raise ValueError(f"the API key variable {key_env} is not set")
            self._key = key
        self._model_name = model_name
        self._timeout = timeout
        self._write_lock = threading.Lock()
        self._recorded = 0

    @property
    def recorded(self) -> int:
        """Number of calls recorded so far."""
        with self._write_lock:
            return self._recorded

    def _answer(self, method: str, raw_path: str, raw_body: bytes) -> tuple[int, dict[str, Any]]:
        """Answer one request: ``(HTTP status, JSON body)``."""
        self._count_request()
        path = raw_path.split("?", 1)[0].rstrip("/")
        try:
            if method == "GET" and path == "/v1/models":
                listed = {"id": self._model_name, "object": "model", "created": 0, "owned_by": "pytest-gym-eval"}
                return 200, {"object": "list", "data": [listed]}
            if method == "POST" and path in RECORDED_PATHS:
                return self._forward(path, _parse_body(raw_body))
            raise _HttpError(404, f"no such endpoint: {method} {path or '/'}", "not_found", "unknown_path")
        except _HttpError as exc:
            return exc.status, exc.body
        except Exception as exc:  # a bug must not kill the connection silently
            return 500, {"error": {"message": f"recording proxy error: {exc!r}", "type": "server_error", "code": None}}

    def _forward(self, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """Send ``body`` upstream; record and return a 200 answer, return an error as it came."""
        sent = {**body, "model": self._model} if self._model else body
        headers = {"Content-Type": "application/json"}
        if self._key is not None:
            headers["Authorization"] = f"Bearer {self._key}"
        request = urllib.request.Request(
            self._upstream + RECORDED_PATHS[path], data=json.dumps(sent).encode(), headers=headers, method="POST"
        )
        try:
            with _OPENER.open(request, timeout=self._timeout) as reply:
                status, raw = reply.status, reply.read()
        except urllib.error.HTTPError as error:
            with error:
                status, raw = error.code, error.read()
        except (OSError, ValueError) as exc:
            reason = getattr(exc, "reason", exc)
            raise _HttpError(
                502, f"upstream {redact_value(self._upstream)} unreachable: {reason}", "upstream_error", "upstream"
            ) from None
        try:
            answer = json.loads(raw.decode("utf-8"))
        except ValueError:
            answer = None
        if not isinstance(answer, dict):
            text = raw.decode("utf-8", errors="replace")[:500]
            raise _HttpError(502, f"upstream answered HTTP {status} without a JSON object: {text}", "upstream_error",
                             "upstream")  # fmt: skip
        if status == 200 and path == "/v1/chat/completions":
            self._record(chat_recording(body, answer))
        elif status == 200 and isinstance(answer.get("output"), list):
            self._record({"responses_create_params": body, "response": answer})
        return status, answer

    def _record(self, line: dict[str, Any]) -> None:
        """Append one recording line (with the time it was recorded, seconds since the epoch)."""
        with self._write_lock, jsonlines.open(self._recordings_path, mode="a") as writer:
            writer.write({**line, "recorded_at": time.time()})
            self._recorded += 1
