"""A fault-injecting HTTP proxy for tests: it stands between Gym's policy-model server and a model endpoint
(the project's replay model server, :class:`pytest_gym_eval.replay.ReplayServer`) and misbehaves on cue.

Each request is matched against the :class:`Rule` list in order; the first rule that matches decides what
happens, and a request no rule matches is forwarded unchanged. A rule matches a request whose path ends with
``rule.path`` (default ``/responses``; ``GET /models``, Gym's readiness probe, is faulted only by a rule that
names it) and whose body contains ``rule.prompt`` (any request when None), up to ``rule.times`` times. What a
rule does (``rule.action``):

- ``status``: answer ``rule.status`` with ``rule.body`` (a JSON object, or a string sent as it is), without
  calling the endpoint: an endpoint answering 429 forever, a 500 for one prompt, a 400 ``invalid_prompt``;
- ``hang``: hold the request ``rule.seconds`` (None: until the proxy stops), then forward it;
- ``not_json``: answer 200 with a body that is not JSON;
- ``drop_fields``: forward, then delete ``rule.fields`` (dotted paths, e.g. ``usage.output_tokens_details``)
  from the endpoint's JSON answer (a Responses body a strict client rejects);
- ``set_fields``: forward the request with the top-level keys of ``rule.values`` set in its JSON body (e.g.
  ``{"max_tokens": 48}``: a bound on a judge's answers that its environment's config does not give).

:func:`openai_error` builds an OpenAI-style error body. The proxy listens on 127.0.0.1 only, keeps every
request it saw in :attr:`FaultProxy.requests` (never a header: an API key travels in one) and lets a test wait
for a number of held requests (:meth:`FaultProxy.wait_held`) instead of sleeping.
"""

from __future__ import annotations

import contextlib
import json
import socket
import socketserver
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

Action = Literal["status", "hang", "not_json", "drop_fields", "set_fields"]

RESPONSES_FIELDS_GYM_NEEDS = ("parallel_tool_calls", "tool_choice", "tools", "usage.output_tokens_details")
"""Fields of a Responses body whose absence makes Gym's ``NeMoGymResponse`` validation fail (what a
llama.cpp server's ``/v1/responses`` answer lacked, issue 12)."""


def openai_error(message: str, error_type: str, code: str | None) -> dict[str, Any]:
    """An OpenAI-style error body: ``{"error": {"message", "type", "param", "code"}}``."""
    return {"error": {"message": message, "type": error_type, "param": None, "code": code}}


@dataclass
class Rule:
    """One fault: which requests (``prompt`` substring of the body, ``path`` suffix, the first ``times``
    matches; None: every one) and what to do (``action``, with ``status``/``body``, ``seconds``, ``fields`` or
    ``values``)."""

    action: Action
    prompt: str | None = None
    path: str = "/responses"
    status: int = 500
    body: dict[str, Any] | str | None = None
    seconds: float | None = None
    fields: tuple[str, ...] = ()
    values: dict[str, Any] = field(default_factory=dict)
    times: int | None = None
    used: int = field(default=0, compare=False)

    def matches(self, path: str, body: bytes) -> bool:
        """Whether this rule applies to a request for ``path`` with ``body`` (counts the use)."""
        if not path.split("?", 1)[0].rstrip("/").endswith(self.path):
            return False
        if self.prompt is not None and self.prompt not in body.decode("utf-8", "replace"):
            return False
        if self.times is not None and self.used >= self.times:
            return False
        self.used += 1
        return True


@dataclass(frozen=True)
class SeenRequest:
    """One request the proxy handled: when (``time.time()`` seconds), what, which rule (index, or None when
    forwarded unchanged) and the status answered (None when the connection was dropped)."""

    time: float
    method: str
    path: str
    rule: int | None
    status: int | None
    body: str


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = socket.SOMAXCONN  # as the replay server's: Gym opens many connections at once

    def __init__(self, proxy: FaultProxy) -> None:
        self.proxy = proxy
        self.connections: set[socket.socket] = set()
        self.lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), _Handler)

    def server_bind(self) -> None:
        socketserver.TCPServer.server_bind(self)  # no reverse DNS lookup of the host
        self.server_name, self.server_port = str(self.server_address[0]), int(self.server_address[1])

    def process_request(self, request: Any, client_address: Any) -> None:
        with self.lock:
            self.connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self.lock:
            self.connections.discard(request)
        super().shutdown_request(request)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        """No access log on stderr."""

    def do_GET(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    def _serve(self) -> None:
        length = self.headers.get("Content-Length", "")
        body = self.rfile.read(int(length)) if length.isdigit() else b""
        auth = self.headers.get("Authorization")
        answer = self.server.proxy._handle(self.command, self.path, body, auth)
        if answer is None:  # dropped while held: the proxy is stopping
            self.close_connection = True
            return
        status, content_type, data = answer
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class FaultProxy:
    """A loopback proxy to ``upstream`` (an OpenAI-style base URL such as ``http://127.0.0.1:PORT/v1``)
    applying ``rules`` (see the module's docstring). ``base_url`` has the same path as ``upstream``.

    ``timeout`` is the seconds a forwarded request may take (a local model on a loaded machine queues requests).
    Usable as a context manager; :meth:`stop` releases held requests by dropping their connections.
    """

    def __init__(self, upstream: str, rules: list[Rule] | None = None, timeout: float = 120.0) -> None:
        self.upstream = upstream.rstrip("/")
        self.timeout = timeout
        self.rules = list(rules or [])
        self.requests: list[SeenRequest] = []
        self._origin = self.upstream.split("/", 3)[:3]
        self._prefix = "/" + self.upstream.split("/", 3)[3] if self.upstream.count("/") >= 3 else ""
        self._lock = threading.Condition()
        self._held = 0
        self._stopping = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port><upstream's path>``; raises ``RuntimeError`` before :meth:`start`."""
        if self._server is None:
            raise RuntimeError("the fault proxy is not started")
        return f"http://127.0.0.1:{self._server.server_port}{self._prefix}"

    def start(self) -> FaultProxy:
        """Listen on a free port of 127.0.0.1 and serve in a background thread; returns self."""
        self._server = _Server(self)
        self._thread = threading.Thread(target=self._server.serve_forever, name="fault-proxy", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, release held requests and close every connection; idempotent."""
        self._stopping.set()
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        with server.lock:
            connections = list(server.connections)
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
        if self._thread is not None:
            self._thread.join()

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def wait_held(self, count: int, timeout: float) -> bool:
        """Wait until ``count`` requests are being held by ``hang`` rules at once; whether they were within
        ``timeout`` seconds."""
        with self._lock:
            return self._lock.wait_for(lambda: self._held >= count, timeout)

    def seen(self, rule: int | None = None) -> list[SeenRequest]:
        """The requests handled so far (only those ``rule`` decided, when given)."""
        with self._lock:
            return [r for r in self.requests if rule is None or r.rule == rule]

    def _handle(self, method: str, path: str, body: bytes, auth: str | None) -> tuple[int, str, bytes] | None:
        with self._lock:
            index = next((i for i, rule in enumerate(self.rules) if rule.matches(path, body)), None)
        rule = self.rules[index] if index is not None else None
        answer: tuple[int, str, bytes] | None
        if rule is None:
            answer = self._forward(method, path, body, auth)
        elif rule.action == "status":
            data = rule.body if isinstance(rule.body, str) else json.dumps(rule.body or {})
            kind = "text/plain" if isinstance(rule.body, str) else "application/json"
            answer = (rule.status, kind, data.encode("utf-8"))
        elif rule.action == "not_json":
            answer = (200, "application/json", b"<html>this is not JSON</html>")
        elif rule.action == "hang":
            with self._lock:
                self._held += 1
                self._lock.notify_all()
            try:
                released = not self._stopping.wait(rule.seconds)  # None: until the proxy stops
            finally:
                with self._lock:
                    self._held -= 1
            answer = self._forward(method, path, body, auth) if released else None
        elif rule.action == "set_fields":
            answer = self._forward(method, path, json.dumps({**json.loads(body), **rule.values}).encode(), auth)
        else:  # drop_fields
            status, kind, data = self._forward(method, path, body, auth)
            if status == 200:
                data = json.dumps(_without(json.loads(data), rule.fields)).encode("utf-8")
            answer = (status, kind, data)
        with self._lock:
            status = answer[0] if answer is not None else None
            self.requests.append(SeenRequest(time.time(), method, path, index, status, body.decode("utf-8", "replace")))
        return answer

    def _forward(self, method: str, path: str, body: bytes, auth: str | None) -> tuple[int, str, bytes]:
        url = "/".join(self._origin) + path
        request = urllib.request.Request(url, data=body if method == "POST" else None, method=method)
        request.add_header("Content-Type", "application/json")
        if auth:
            request.add_header("Authorization", auth)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return response.status, response.headers.get("Content-Type", "application/json"), response.read()
        except urllib.error.HTTPError as error:
            return error.code, error.headers.get("Content-Type", "application/json"), error.read()


def _without(value: Any, fields: tuple[str, ...]) -> Any:
    """``value`` (a JSON object) with each dotted path in ``fields`` deleted where present."""
    for dotted in fields:
        *parents, last = dotted.split(".")
        node = value
        for name in parents:
            node = node.get(name) if isinstance(node, dict) else None
        if isinstance(node, dict):
            node.pop(last, None)
    return value
