"""The replay server: a loopback OpenAI-compatible model server (``/v1/models``, ``/v1/responses``,
``/v1/chat/completions``) answering from recordings.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import socketserver
import sys
import threading
import time
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Protocol, TypeVar

import jsonlines

from pytest_gym_eval.replay.answers import chat_answer, responses_answer, turn_text
from pytest_gym_eval.replay.index import ReplayIndex
from pytest_gym_eval.replay.normal import item_type, repeat_tag, request_conversation
from pytest_gym_eval.replay.recordings import load_recordings

SHUTDOWN_POLL = 0.05
"""Seconds between the serving thread's looks at a stop request (``serve_forever``'s poll interval; the standard
library's 0.5 made every stop, and so every replayed session's end, wait up to half a second)."""


class _HttpError(Exception):
    """An error answered as ``{"error": {...}}`` with an HTTP status."""

    def __init__(self, status: int, message: str, error_type: str, code: str) -> None:
        super().__init__(message)
        self.status = status
        self.body = {"error": {"message": message, "type": error_type, "code": code}}


class _Answering(Protocol):
    """What serves the requests of an :class:`_HttpServer`: ``(HTTP status, JSON body)`` for a request."""

    def _answer(self, method: str, raw_path: str, raw_body: bytes) -> tuple[int, dict[str, Any]]: ...


class _HttpServer(ThreadingHTTPServer):
    """Threading HTTP server that knows what answers its requests (a :class:`LoopbackServer`) and can drop open
    connections."""

    daemon_threads = True
    request_queue_size = socket.SOMAXCONN
    """The listen backlog. socketserver's default of 5 overflowed when Gym opened many connections at once: the
    kernel dropped the extra SYNs and each of those requests waited for TCP's retransmissions (1, 3, 7, 15 s),
    which stalled a 200-rollout run from ~10 s to ~36 s at random (``TcpExtListenOverflows`` counted them)."""

    def __init__(self, address: tuple[str, int], replay: _Answering) -> None:
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

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hung up before its answer was written (Gym gave up on a request) is no error of the
        server's: say nothing. Anything else is printed as socketserver prints it."""
        if isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            return
        super().handle_error(request, client_address)

    def close_connections(self) -> None:
        """Shut down idle keep-alive connections so their handler threads end."""
        with self._connections_lock:
            connections = list(self._connections)
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)


class _Handler(BaseHTTPRequestHandler):
    """Reads one request, lets its server's ``_answer`` (:meth:`ReplayServer._answer`, ...) answer it, writes JSON
    back."""

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


_Server = TypeVar("_Server", bound="LoopbackServer")


class LoopbackServer:
    """An HTTP server on ``host`` (an IPv4 address; loopback by default) and ``port`` (0: a free port chosen by the
    OS) that serves JSON from a thread of its own once :meth:`start` is called; a subclass answers each request in
    ``_answer(method, raw_path, raw_body) -> (HTTP status, JSON body)`` (called from many threads at once).
    ``name`` names it in errors and its thread. Usable as a context manager (starts and stops it)."""

    def __init__(self, *, name: str, host: str = "127.0.0.1", port: int = 0) -> None:
        self._name = name
        self._closing = threading.Event()
        self._host = host
        self._requested_port = port
        self._port: int | None = None
        self._httpd: _HttpServer | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._requests = 0

    def _answer(self, method: str, raw_path: str, raw_body: bytes) -> tuple[int, dict[str, Any]]:
        raise NotImplementedError

    def _count_request(self) -> int:
        """Count one more request received; returns its number (1 for the first)."""
        with self._lock:
            self._requests += 1
            return self._requests

    # ---- lifecycle ----------------------------------------------------------------------------

    def start(self) -> None:
        """Bind and serve in a background daemon thread. Raises ``OSError`` when the port cannot be
        bound and ``RuntimeError`` when already started."""
        with self._lock:
            if self._httpd is not None:
                raise RuntimeError(f"{self._name} is already running")
            httpd = _HttpServer((self._host, self._requested_port), self)
            self._port = int(httpd.server_address[1])
            self._thread = threading.Thread(
                target=httpd.serve_forever, args=(SHUTDOWN_POLL,), name=self._name.replace(" ", "-"), daemon=True
            )
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

    def __enter__(self: _Server) -> _Server:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # ---- properties ---------------------------------------------------------------------------

    @property
    def port(self) -> int:
        """The bound TCP port. Raises ``RuntimeError`` before :meth:`start`."""
        if self._port is None:
            raise RuntimeError(f"{self._name} has not been started")
        return self._port

    @property
    def base_url(self) -> str:
        """OpenAI base URL, ``http://<host>:<port>/v1``. Raises ``RuntimeError`` before :meth:`start`."""
        return f"http://{self._host}:{self.port}/v1"

    @property
    def request_count(self) -> int:
        """Number of HTTP requests received so far (any path or status)."""
        with self._lock:
            return self._requests


class ReplayServer(LoopbackServer):
    """Loopback OpenAI-compatible model server answering from recorded Gym rollouts.

    ``rollouts`` are ``*_rollouts.jsonl`` paths, loaded (and validated) here: ``RecordingError``
    names the bad ``file:line``. Serves ``GET /v1/models``, ``POST /v1/responses`` and
    ``POST /v1/chat/completions`` on ``host`` (an IPv4 address; loopback by default) and ``port``
    (0: a free port chosen by the OS) once :meth:`start` is called. Which recording answers a request is
    :class:`ReplayIndex`'s choice (package docstring); an unmatched conversation gets HTTP 404
    ``{"error": {"type": "not_found", "code": "no_recording", "message": ...}}`` whose message is
    :meth:`ReplayIndex.unmatched_message`, and a malformed request or repeat tag HTTP 400.
    When ``log_path`` is given, each request is appended to it as one JSON line (``time`` in seconds
    since the epoch, ``method``, ``path``, ``status``, ``request`` body, and ``answer`` summary, with the
    ``recording`` and ``repeat`` tag, or ``error``); request headers are never logged. ``model_name`` is
    listed by ``/v1/models`` and used when neither the request nor the recording names a model.
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
        super().__init__(name="replay server", host=host, port=port)
        self._index = ReplayIndex(load_recordings(rollouts))
        self._delay = delay
        self._log_path = log_path
        self._model_name = model_name
        self._log_lock = threading.Lock()
        self._misses: list[str] = []

    @property
    def recordings(self) -> int:
        """Number of recorded rollouts (non-blank lines) loaded."""
        return self._index.recordings

    @property
    def misses(self) -> list[str]:
        """The message of each HTTP 404 ``no_recording`` answered so far, in order (a copy): what a session names
        when a model it replays (a judge's, whose failures Gym records only as ``judge_failed``) was asked
        something it has no recording of."""
        with self._lock:
            return list(self._misses)

    # ---- request handling ---------------------------------------------------------------------

    def _answer(self, method: str, raw_path: str, raw_body: bytes) -> tuple[int, dict[str, Any]]:
        """Answer one request: ``(HTTP status, JSON body)``; logs it when a log path is set."""
        number = self._count_request()
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
            conversation = request_conversation(body, chat=chat)
            repeat = repeat_tag(body)
        except ValueError as exc:
            raise _HttpError(400, f"invalid request: {exc}", "invalid_request_error", "invalid_request") from None
        if self._delay:
            self._closing.wait(self._delay)
        turn = self._index.answer(conversation, repeat)
        if turn is None:
            message = self._index.unmatched_message(conversation)
            with self._lock:
                self._misses.append(message)
            raise _HttpError(404, message, "not_found", "no_recording")
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
            "repeat": repeat,
            "items": [item_type(item) for item in turn.items],
            "text": turn_text(turn)[:200],
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


def logged_misses(log_path: Path) -> list[str]:
    """The 404 ``no_recording`` messages a replay server's request log (``log_path``, :class:`ReplayServer`'s
    ``log_path``) holds, in order: what :attr:`ReplayServer.misses` gives for a server of another process. Empty
    when the log is missing or unreadable; lines that are not such entries are skipped. Never raises."""
    misses: list[str] = []
    try:
        with open(log_path, encoding="utf-8") as stream:
            for line in stream:
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue
                if not isinstance(entry, dict) or entry.get("status") != 404:
                    continue
                error = entry.get("error")
                if isinstance(error, str) and error.startswith("no recorded answer"):
                    misses.append(error)
    except (OSError, UnicodeDecodeError):
        return []
    return misses
