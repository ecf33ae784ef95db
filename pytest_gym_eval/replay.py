"""Replay recorded NeMo Gym rollouts through a loopback OpenAI-compatible model server.

A Gym rollouts file (``*_rollouts.jsonl``) holds one recorded rollout per line: the request sent for
a task (``responses_create_params``) and the Responses API object the agent returned (``response``),
whose ``output`` is the whole trajectory: model items (``reasoning``, assistant ``message``,
``function_call``) interleaved with the items the environment added (``function_call_output``, and
user messages in multi-turn environments).

Every maximal run of model items in ``output`` is one *turn*. It is indexed under the normalised
conversation that preceded it (instructions + input + the earlier output items), so an agent that
re-sends that conversation, through ``POST /v1/responses`` or ``POST /v1/chat/completions``, gets the
recorded turn back. Recordings sharing a conversation are answered round-robin in file order.

Normal form of a conversation (:func:`normalise_items`), tolerant of what agents change when they
re-send items: ids, status and other bookkeeping fields are ignored; ``reasoning`` items are dropped;
a message is ``("message", role, text)`` with ``developer`` read as ``system`` and its content parts'
texts joined (surrounding whitespace is ignored); a ``function_call`` is ``("function_call", name,
arguments re-dumped with sorted keys when they are JSON, call_id)``; a ``function_call_output`` is
``("function_call_output", call_id, output text re-dumped like arguments when it is JSON)``; any other
item is ``(type, canonical JSON without id/status)``. Because Responses→chat converters (Gym's among
them) merge a model turn into one assistant message and fold a leading run of system messages into one,
the normal form does the same: each run of assistant messages and function calls becomes one
assistant message (texts joined, ``<think>...</think>`` blocks removed, omitted when empty) followed
by the calls in order, and a leading run of system messages becomes one message joined by blank lines.

Command line: ``python -m pytest_gym_eval replay ROLLOUTS.jsonl [...] [--port N] [--model-name NAME]
[--log PATH]``.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import os
import re
import signal
import socket
import socketserver
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import jsonlines

__all__ = [
    "Recording",
    "RecordingError",
    "ReplayServer",
    "RoundRobin",
    "Turn",
    "build_index",
    "canonical_arguments",
    "chat_answer",
    "chat_messages_to_items",
    "content_text",
    "is_model_item",
    "item_type",
    "load_recordings",
    "main",
    "normalise_item",
    "normalise_items",
    "recording_turns",
    "request_items",
    "responses_answer",
    "split_turns",
]

NormItem = tuple[str, ...]
"""One normalised conversation item, e.g. ``("message", "user", "Hi")``."""

Key = tuple[NormItem, ...]
"""A normalised conversation: the lookup key of a recorded turn."""

_THINK_BLOCK = re.compile(r"<think>.*?</think>", re.DOTALL)
_BOOKKEEPING_FIELDS = frozenset({"id", "status"})


class RecordingError(ValueError):
    """A rollouts file cannot be replayed; the message starts with ``file:line`` (or ``file``)."""


# --------------------------------------------------------------------------------------------------
# Normalisation
# --------------------------------------------------------------------------------------------------


def item_type(item: Mapping[str, Any]) -> str:
    """The ``type`` of a Responses item; an item without ``type`` but with a ``role`` is a ``message``."""
    kind = item.get("type")
    if kind is None and "role" in item:
        return "message"
    return str(kind)


def content_text(content: Any) -> str:
    """Text of a message content or tool output: a string as is, a list of parts as their ``text`` joined.

    Parts without a string ``text`` (images, audio) contribute nothing; any other value gives ``""``.
    """
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part["text"] for part in content if isinstance(part, dict) and isinstance(part.get("text"), str))
    return ""


def canonical_arguments(arguments: Any) -> str:
    """Function-call arguments as canonical text: JSON re-dumped with sorted keys, else the raw string."""
    if isinstance(arguments, str):
        try:
            parsed = json.loads(arguments)
        except ValueError:
            return arguments
    else:
        parsed = arguments
    return json.dumps(parsed, sort_keys=True, ensure_ascii=False)


def normalise_item(item: Mapping[str, Any]) -> NormItem | None:
    """Normal form of one Responses item (see the module docstring); ``None`` for a ``reasoning`` item.

    Message texts are kept verbatim here: :func:`normalise_items` strips and folds them.
    """
    kind = item_type(item)
    if kind == "message":
        role = str(item.get("role", "user"))
        return (
            "message",
            "system" if role == "developer" else role,
            content_text(item.get("content")),
        )
    if kind == "function_call":
        name = str(item.get("name", ""))
        return (
            "function_call",
            name,
            canonical_arguments(item.get("arguments", "")),
            str(item.get("call_id", "")),
        )
    if kind == "function_call_output":
        # Tools serialise JSON results with varying whitespace (recorded `{"a": 1}`, live `{"a":1}`).
        output = canonical_arguments(content_text(item.get("output")))
        return ("function_call_output", str(item.get("call_id", "")), output)
    if kind == "reasoning":
        return None
    rest = {name: value for name, value in item.items() if name not in _BOOKKEEPING_FIELDS}
    return (kind, json.dumps(rest, sort_keys=True, ensure_ascii=False))


def _fold(items: Iterable[NormItem]) -> Key:
    """Strip message texts; merge each run of assistant messages and function calls, and the leading
    system messages (see the module docstring)."""
    folded: list[NormItem] = []
    texts: list[str] = []
    calls: list[NormItem] = []

    def flush() -> None:
        text = _THINK_BLOCK.sub("", "".join(texts)).strip()
        if text:
            folded.append(("message", "assistant", text))
        folded.extend(calls)
        texts.clear()
        calls.clear()

    for item in items:
        if item[:2] == ("message", "assistant"):
            texts.append(item[2])
        elif item[0] == "function_call":
            calls.append(item)
        else:
            flush()
            folded.append((*item[:2], item[2].strip()) if item[0] == "message" else item)
    flush()
    systems = 0
    while systems < len(folded) and folded[systems][:2] == ("message", "system"):
        systems += 1
    if systems > 1:
        folded[:systems] = [("message", "system", "\n\n".join(item[2] for item in folded[:systems]))]
    return tuple(folded)


def normalise_items(items: Iterable[Any]) -> Key:
    """Normal form of a conversation given as Responses items (the lookup key).

    Raises ``ValueError`` when an item is not a JSON object.
    """
    normalised: list[NormItem] = []
    for position, item in enumerate(items):
        if not isinstance(item, Mapping):
            raise ValueError(f"conversation item #{position} is a {type(item).__name__}, not an object")
        entry = normalise_item(item)
        if entry is not None:
            normalised.append(entry)
    return _fold(normalised)


def request_items(params: Mapping[str, Any]) -> list[Any]:
    """Conversation items of Responses create-params: ``instructions`` (as a leading system message)
    followed by ``input`` (a string is one user message; missing or null is empty).

    Raises ``ValueError`` when ``input`` is neither a string nor a list, or ``instructions`` is not a string.
    """
    raw_input = params.get("input")
    items: list[Any]
    if raw_input is None:
        items = []
    elif isinstance(raw_input, str):
        items = [{"type": "message", "role": "user", "content": raw_input}]
    elif isinstance(raw_input, list):
        items = list(raw_input)
    else:
        raise ValueError(f"`input` must be a string or a list of items, not {type(raw_input).__name__}")
    instructions = params.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        raise ValueError(f"`instructions` must be a string, not {type(instructions).__name__}")
    if instructions:
        items.insert(0, {"type": "message", "role": "system", "content": instructions})
    return items


def chat_messages_to_items(messages: Sequence[Any]) -> list[dict[str, Any]]:
    """Chat-completions ``messages`` as Responses items, so both APIs share one normal form.

    An assistant message becomes a message item plus one ``function_call`` per ``tool_calls`` entry
    (call_id = the tool call's ``id``); a ``tool`` message becomes a ``function_call_output`` with
    call_id = ``tool_call_id``; any other message keeps its role and content.
    Raises ``ValueError`` when a message or tool call is not a JSON object.
    """
    items: list[dict[str, Any]] = []
    for position, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise ValueError(f"message #{position} is a {type(message).__name__}, not an object")
        role = message.get("role")
        if role == "tool":
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": message.get("tool_call_id", ""),
                    "output": message.get("content"),
                }
            )
            continue
        items.append({"type": "message", "role": role, "content": message.get("content")})
        for call in message.get("tool_calls") or []:
            if not isinstance(call, Mapping):
                raise ValueError(f"a tool call of message #{position} is not an object")
            function = call.get("function") or {}
            items.append(
                {
                    "type": "function_call",
                    "call_id": call.get("id", ""),
                    "name": function.get("name", ""),
                    "arguments": function.get("arguments", ""),
                }
            )
    return items


# --------------------------------------------------------------------------------------------------
# Recordings, turns and the index
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Recording:
    """One rollouts line: ``source`` is ``"file:line"``, ``params`` its ``responses_create_params``,
    ``response`` its recorded Responses object (``output`` is a list of objects), ``reward`` the recorded
    reward (any JSON value; None when absent)."""

    source: str
    params: dict[str, Any]
    response: dict[str, Any]
    reward: object = None


@dataclass(frozen=True)
class Turn:
    """One recorded model answer: ``items`` are that turn's output items, ``response`` the recorded
    Responses object without ``output``, ``final`` whether no model item follows in the recording."""

    source: str
    items: tuple[dict[str, Any], ...]
    response: dict[str, Any]
    final: bool


def is_model_item(item: Mapping[str, Any]) -> bool:
    """Whether an output item was produced by the model: an assistant message or any item type that
    is not ``*_output`` (``reasoning``, ``function_call``, ...). Tool outputs and user/system/developer
    messages are added by the agent or environment and end a turn."""
    kind = item_type(item)
    if kind == "message":
        return item.get("role") == "assistant"
    return not kind.endswith("_output")


def split_turns(output: Sequence[Mapping[str, Any]]) -> list[tuple[int, int]]:
    """Turns of a recorded ``output`` as ``(start, end)`` slices: each maximal run of model items.

    An empty ``output`` is one empty turn ``(0, 0)``; environment items before the first model item
    (or after the last) belong to no turn.
    """
    if not output:
        return [(0, 0)]
    turns: list[tuple[int, int]] = []
    start: int | None = None
    for position, item in enumerate(output):
        if is_model_item(item):
            if start is None:
                start = position
        elif start is not None:
            turns.append((start, position))
            start = None
    if start is not None:
        turns.append((start, len(output)))
    return turns


def recording_turns(recording: Recording) -> list[tuple[Key, Turn]]:
    """Every turn of a recording with its key: normalised(instructions + input + output before it).

    Raises ``ValueError`` when the recorded input or output holds something that is not an item.
    """
    conversation = request_items(recording.params)
    output: list[dict[str, Any]] = recording.response["output"]
    response = {name: value for name, value in recording.response.items() if name != "output"}
    turns = split_turns(output)
    keyed: list[tuple[Key, Turn]] = []
    for number, (start, end) in enumerate(turns):
        key = normalise_items([*conversation, *output[:start]])
        final = number == len(turns) - 1
        keyed.append((key, Turn(recording.source, tuple(output[start:end]), response, final)))
    return keyed


def _numbered(lines: Iterable[str], counter: list[int]) -> Iterator[str]:
    """Yield ``lines``, keeping the 1-based number of the last one yielded in ``counter[0]``."""
    for number, line in enumerate(lines, 1):
        counter[0] = number
        yield line


def load_recordings(paths: Sequence[str | os.PathLike[str]]) -> list[Recording]:
    """Read and validate every non-blank line of the rollouts files, in order.

    Raises ``RecordingError`` (``file:line: problem``) for an unreadable file, malformed JSON, a line
    that is not an object, or a missing/ill-typed ``responses_create_params``, ``response`` or
    ``response.output`` (which must be a list of objects).
    """
    recordings: list[Recording] = []
    for path in paths:
        counter = [0]
        try:
            with (
                open(path, encoding="utf-8") as stream,
                jsonlines.Reader(_numbered(stream, counter)) as reader,
            ):
                while True:
                    try:
                        value = reader.read(skip_empty=True, allow_none=True)
                    except EOFError:
                        break
                    except jsonlines.InvalidLineError as exc:
                        reason = exc.__cause__ or exc
                        raise RecordingError(f"{path}:{exc.lineno}: malformed JSON ({reason})") from None
                    recordings.append(_recording(value, f"{path}:{counter[0]}"))
        except (OSError, UnicodeDecodeError) as exc:
            raise RecordingError(f"{path}: cannot read rollouts file ({exc})") from None
    return recordings


def _recording(value: Any, source: str) -> Recording:
    """Validate one parsed rollouts line (see :func:`load_recordings`)."""
    if not isinstance(value, dict):
        raise RecordingError(f"{source}: expected a JSON object, got {type(value).__name__}")
    params = value.get("responses_create_params")
    if not isinstance(params, dict):
        raise RecordingError(f"{source}: missing `responses_create_params` object")
    response = value.get("response")
    if not isinstance(response, dict) or not isinstance(response.get("output"), list):
        raise RecordingError(f"{source}: missing `response.output` list")
    for position, item in enumerate(response["output"]):
        if not isinstance(item, dict):
            raise RecordingError(
                f"{source}: `response.output[{position}]` is a {type(item).__name__}, not an item object"
            )
    return Recording(source, params, response, value.get("reward"))


def conversation_key(params: Mapping[str, Any]) -> Key:
    """The normal form of a task's request (``responses_create_params``): how a rollout finds its recordings.

    Raises ``ValueError`` for an ill-formed ``input``.
    """
    return normalise_items(request_items(params))


def recorded_rewards(recordings: Iterable[Recording]) -> dict[Key, list[object]]:
    """Every recorded reward, by the :func:`conversation_key` of the recorded task's request."""
    rewards: dict[Key, list[object]] = {}
    for recording in recordings:
        rewards.setdefault(conversation_key(recording.params), []).append(recording.reward)
    return rewards


def build_index(recordings: Iterable[Recording]) -> dict[Key, list[Turn]]:
    """Map each conversation key to its recorded turns, in recording order.

    Raises ``RecordingError`` naming the recording's ``file:line`` when its input or output is not a
    list of items.
    """
    index: dict[Key, list[Turn]] = {}
    for recording in recordings:
        try:
            keyed = recording_turns(recording)
        except ValueError as exc:
            raise RecordingError(f"{recording.source}: {exc}") from None
        for key, turn in keyed:
            index.setdefault(key, []).append(turn)
    return index


class RoundRobin:
    """Thread-safe round-robin over the turns recorded for each key (first call: first recording)."""

    def __init__(self, index: Mapping[Key, Sequence[Turn]]) -> None:
        self._index = {key: list(turns) for key, turns in index.items() if turns}
        self._served: dict[Key, int] = {}
        self._lock = threading.Lock()

    def next(self, key: Key) -> Turn | None:
        """The next recorded turn for ``key``, or ``None`` when nothing was recorded for it."""
        turns = self._index.get(key)
        if turns is None:
            return None
        with self._lock:
            served = self._served.get(key, 0)
            self._served[key] = served + 1
        return turns[served % len(turns)]


# --------------------------------------------------------------------------------------------------
# Answers
# --------------------------------------------------------------------------------------------------


def _turn_text(turn: Turn) -> str:
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
    message: dict[str, Any] = {"role": "assistant", "content": _turn_text(turn) or None}
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


# --------------------------------------------------------------------------------------------------
# HTTP server
# --------------------------------------------------------------------------------------------------


class _HttpError(Exception):
    """An error answered as ``{"error": {...}}`` with an HTTP status."""

    def __init__(self, status: int, message: str, error_type: str, code: str) -> None:
        super().__init__(message)
        self.status = status
        self.body = {"error": {"message": message, "type": error_type, "code": code}}


class _HttpServer(ThreadingHTTPServer):
    """Threading HTTP server that knows its :class:`ReplayServer` and can drop open connections."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], replay: ReplayServer) -> None:
        self.replay = replay
        self._connections: set[socket.socket] = set()
        self._connections_lock = threading.Lock()
        super().__init__(address, _Handler)

    def server_bind(self) -> None:
        """Bind without HTTPServer's reverse DNS lookup of the host (slow on some machines)."""
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = str(self.server_address[0]), int(self.server_address[1])

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._connections_lock:
            self._connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._connections_lock:
            self._connections.discard(request)
        super().shutdown_request(request)

    def close_connections(self) -> None:
        """Shut down idle keep-alive connections so their handler threads end."""
        with self._connections_lock:
            connections = list(self._connections)
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)


class _Handler(BaseHTTPRequestHandler):
    """Reads one request, lets :meth:`ReplayServer._answer` answer it, writes JSON back."""

    protocol_version = "HTTP/1.1"
    server: _HttpServer

    def log_message(self, format: str, *args: Any) -> None:
        """Silence the default stderr access log."""

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def _serve(self, method: str) -> None:
        length = self.headers.get("Content-Length", "")
        if length.isdigit():
            raw = self.rfile.read(int(length))
        else:  # e.g. a chunked body: unread, so this connection cannot carry another request
            raw = b""
            self.close_connection = True
        status, payload = self.server.replay._answer(method, self.path, raw)
        data = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data)


class ReplayServer:
    """Loopback OpenAI-compatible model server answering from recorded Gym rollouts.

    ``rollouts`` are ``*_rollouts.jsonl`` paths, loaded (and validated) here: ``RecordingError``
    names the bad ``file:line``. Serves ``GET /v1/models``, ``POST /v1/responses`` and
    ``POST /v1/chat/completions`` on ``host`` (an IPv4 address; loopback by default) and ``port``
    (0: a free port chosen by the OS) once :meth:`start` is called. An unmatched conversation gets
    HTTP 404 ``{"error": {"type": "not_found", "code": "no_recording", ...}}``.
    When ``log_path`` is given, each request is appended to it as one JSON line (``time`` in seconds
    since the epoch, ``method``, ``path``, ``status``, ``request`` body, and ``answer`` summary or
    ``error``); request headers are never logged. ``model_name`` is listed by ``/v1/models`` and used
    when neither the request nor the recording names a model.
    Usable as a context manager (``with ReplayServer([...]) as server:`` starts and stops it).
    """

    def __init__(
        self,
        rollouts: Sequence[str | os.PathLike[str]],
        *,
        log_path: Path | None = None,
        model_name: str = "replay",
        host: str = "127.0.0.1",
        port: int = 0,
        delay: float = 0.0,
    ) -> None:
        recordings = load_recordings(rollouts)
        self._delay = delay
        self._closing = threading.Event()
        self._answers = RoundRobin(build_index(recordings))
        self._recordings = len(recordings)
        self._log_path = log_path
        self._model_name = model_name
        self._host = host
        self._requested_port = port
        self._port: int | None = None
        self._httpd: _HttpServer | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._log_lock = threading.Lock()
        self._requests = 0

    # ---- lifecycle ----------------------------------------------------------------------------

    def start(self) -> None:
        """Bind and serve in a background daemon thread. Raises ``OSError`` when the port cannot be
        bound and ``RuntimeError`` when already started."""
        with self._lock:
            if self._httpd is not None:
                raise RuntimeError("replay server is already running")
            httpd = _HttpServer((self._host, self._requested_port), self)
            self._port = int(httpd.server_address[1])
            self._thread = threading.Thread(target=httpd.serve_forever, name="replay-server", daemon=True)
            self._thread.start()
            self._httpd = httpd

    def stop(self) -> None:
        """Stop serving, close the listening socket and open connections. Idempotent."""
        with self._lock:
            httpd, thread = self._httpd, self._thread
            self._httpd = self._thread = None
        if httpd is None:
            return
        self._closing.set()
        httpd.shutdown()
        httpd.server_close()
        httpd.close_connections()
        if thread is not None:
            thread.join()

    def __enter__(self) -> ReplayServer:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # ---- properties ---------------------------------------------------------------------------

    @property
    def port(self) -> int:
        """The bound TCP port. Raises ``RuntimeError`` before :meth:`start`."""
        if self._port is None:
            raise RuntimeError("replay server has not been started")
        return self._port

    @property
    def base_url(self) -> str:
        """OpenAI base URL, ``http://<host>:<port>/v1``. Raises ``RuntimeError`` before :meth:`start`."""
        return f"http://{self._host}:{self.port}/v1"

    @property
    def recordings(self) -> int:
        """Number of recorded rollouts (non-blank lines) loaded."""
        return self._recordings

    @property
    def request_count(self) -> int:
        """Number of HTTP requests received so far (any path or status)."""
        with self._lock:
            return self._requests

    # ---- request handling ---------------------------------------------------------------------

    def _answer(self, method: str, raw_path: str, raw_body: bytes) -> tuple[int, dict[str, Any]]:
        """Answer one request: ``(HTTP status, JSON body)``; logs it when a log path is set."""
        with self._lock:
            self._requests += 1
            number = self._requests
        path = raw_path.split("?", 1)[0].rstrip("/")
        body: Any = None
        entry: dict[str, Any] = {"time": time.time(), "method": method, "path": raw_path}
        try:
            if method == "POST":
                body = _parse_body(raw_body)
            status, payload, summary = self._route(method, path, body, number)
            entry["answer"] = summary
        except _HttpError as exc:
            status, payload = exc.status, exc.body
            entry["error"] = str(exc)
        except Exception as exc:  # a bug must not kill the connection silently
            status = 500
            payload = {"error": {"message": f"replay server error: {exc!r}", "type": "server_error", "code": None}}
            entry["error"] = repr(exc)
        if self._log_path is not None:
            entry["status"] = status
            entry["request"] = body if body is not None else _text(raw_body)
            with self._log_lock, jsonlines.open(self._log_path, mode="a") as log:
                log.write(entry)
        return status, payload

    def _route(self, method: str, path: str, body: Any, number: int) -> tuple[int, dict[str, Any], Any]:
        """Dispatch to an endpoint: ``(status, JSON body, log summary)``; raises ``_HttpError``."""
        if method == "GET" and path == "/v1/models":
            listed = {"id": self._model_name, "object": "model", "created": 0, "owned_by": "pytest-gym-eval"}
            return 200, {"object": "list", "data": [listed]}, "model list"
        if method == "POST" and path in ("/v1/responses", "/v1/chat/completions"):
            return self._replay(body, chat=path == "/v1/chat/completions", number=number)
        raise _HttpError(404, f"no such endpoint: {method} {path or '/'}", "not_found", "unknown_path")

    def _replay(self, body: dict[str, Any], *, chat: bool, number: int) -> tuple[int, dict[str, Any], Any]:
        """Answer a responses (``chat=False``) or chat-completions request from the recordings."""
        try:
            if chat:
                messages = body.get("messages")
                if not isinstance(messages, list):
                    raise ValueError("`messages` must be a list")
                key = normalise_items(chat_messages_to_items(messages))
            else:
                key = normalise_items(request_items(body))
        except ValueError as exc:
            raise _HttpError(400, f"invalid request: {exc}", "invalid_request_error", "invalid_request") from None
        if self._delay:
            self._closing.wait(self._delay)
        turn = self._answers.next(key)
        if turn is None:
            prompt = next((item[2] for item in key if item[:2] == ("message", "user")), "")
            raise _HttpError(
                404,
                f'no recorded answer for this conversation (first user message: "{prompt[:80]}"); '
                f"{self._recordings} recordings loaded",
                "not_found",
                "no_recording",
            )
        requested = body.get("model")
        model = requested if isinstance(requested, str) and requested else None
        model = model or str(turn.response.get("model") or self._model_name)
        if chat:
            answer = chat_answer(turn, completion_id=f"chatcmpl-replay-{number}", model=model, now=time.time())
        else:
            answer = responses_answer(turn, response_id=f"resp_replay_{number}", model=model, now=time.time())
        summary = {
            "id": answer["id"],
            "recording": turn.source,
            "items": [item_type(item) for item in turn.items],
            "text": _turn_text(turn)[:200],
        }
        return 200, answer, summary


def _parse_body(raw: bytes) -> dict[str, Any]:
    """A request body as a JSON object; raises ``_HttpError`` (400) otherwise."""
    if not raw:
        raise _HttpError(
            400, "empty request body (send a JSON object with Content-Length)", "invalid_request_error", "bad_json"
        )
    try:
        body = json.loads(raw.decode("utf-8"))
    except ValueError as exc:  # includes UnicodeDecodeError
        raise _HttpError(400, f"request body is not valid JSON: {exc}", "invalid_request_error", "bad_json") from None
    if not isinstance(body, dict):
        raise _HttpError(400, "request body must be a JSON object", "invalid_request_error", "bad_json")
    return body


def _text(raw: bytes) -> str | None:
    """A raw request body for the log (``None`` when empty)."""
    return raw.decode("utf-8", errors="replace") if raw else None


# --------------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------------


def main(argv: list[str]) -> int:
    """``python -m pytest_gym_eval replay ROLLOUTS.jsonl [...] [--port N] [--model-name NAME] [--log PATH]``.

    Prints ``replay model server listening on <base_url> (<n> recordings)`` once serving, serves until
    SIGINT or SIGTERM, then stops and returns 0. Returns 2 (error on stderr) for a bad rollouts file,
    1 when the port cannot be bound; argparse exits with 2 on bad usage.
    """
    parser = argparse.ArgumentParser(
        prog="python -m pytest_gym_eval replay",
        description="Serve recorded NeMo Gym rollouts as an OpenAI-compatible model on 127.0.0.1.",
    )
    parser.add_argument("rollouts", nargs="+", metavar="ROLLOUTS.jsonl", help="Gym rollouts file(s) to replay")
    parser.add_argument("--port", type=int, default=0, help="TCP port (default: a free port)")
    parser.add_argument("--model-name", default="replay", help="model id listed by /v1/models")
    parser.add_argument(
        "--log", type=Path, default=None, metavar="PATH",
        help="append a JSON line per request (default: replay-model-<pid>.jsonl in the temp directory)",
    )  # fmt: skip
    parser.add_argument("--delay", type=float, default=0.0, metavar="SECONDS", help="hold each answer back")
    args = parser.parse_args(argv)
    log_path = args.log or Path(tempfile.gettempdir()) / f"replay-model-{os.getpid()}.jsonl"
    try:
        server = ReplayServer(
            args.rollouts, log_path=log_path, model_name=args.model_name, port=args.port, delay=args.delay
        )
    except RecordingError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        try:
            server.start()
        except OSError as exc:
            print(f"error: cannot listen on 127.0.0.1:{args.port}: {exc}", file=sys.stderr)
            return 1
        print(f"replay model server listening on {server.base_url} ({server.recordings} recordings)", flush=True)
        print(f"logging every request and answer to {log_path}", flush=True)
        while not stop.wait(timeout=1.0):
            pass
    finally:
        server.stop()
        for sig, handler in previous.items():
            if handler is not None:
                signal.signal(sig, handler)
    return 0
