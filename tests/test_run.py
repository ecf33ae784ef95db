"""Probing the policy model's endpoint before Gym starts (:func:`pytest_gym_eval.run.probe_model`)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from pytest_gym_eval.processes import free_port
from pytest_gym_eval.run import GymStartError, ModelEndpoint, probe_model


def endpoint(url: str) -> ModelEndpoint:
    return ModelEndpoint(url, "policy", "openai_model", "PROBE_TEST_API_KEY")


@pytest.fixture
def models_server() -> Iterator[tuple[str, list[str | None]]]:
    """A model server whose GET /v1/models answers 200, or 401 when the bearer token is "wrong"; yields its
    base URL and the Authorization headers it saw."""
    seen: list[str | None] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.headers.get("Authorization"))
            status = 401 if self.headers.get("Authorization") == "Bearer wrong" else 200
            self.send_response(status if self.path == "/v1/models" else 404)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", seen
    finally:
        server.shutdown()
        server.server_close()


def test_an_answering_endpoint_passes_with_the_key_from_the_environment(
    models_server: tuple[str, list[str | None]], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, seen = models_server
    monkeypatch.setenv("PROBE_TEST_API_KEY", "right")
    notes: list[str] = []
    probe_model(endpoint(url), time.monotonic() + 30, threading.Event(), notes.append)
    assert seen == ["Bearer right"] and notes == []


def test_a_refused_key_names_the_variable_and_never_the_key(
    models_server: tuple[str, list[str | None]], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, _ = models_server
    monkeypatch.setenv("PROBE_TEST_API_KEY", "wrong")
    with pytest.raises(GymStartError, match=r"refused the API key \(HTTP 401\); is \$PROBE_TEST_API_KEY set") as error:
        probe_model(endpoint(url), time.monotonic() + 30, threading.Event())
    assert "wrong" not in str(error.value)


def test_an_endpoint_that_never_answers_is_noted_then_fails_at_the_deadline() -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    notes: list[str] = []
    started = time.monotonic()
    with pytest.raises(GymStartError, match=r"did not answer GET /models \(.*refused"):
        probe_model(endpoint(url), started + 2, threading.Event(), notes.append)
    assert len(notes) == 1
    assert notes[0].startswith(f"the model endpoint {url} does not answer GET /models yet (")
    assert "(--gym-startup-timeout)" in notes[0]


def test_a_stopping_session_ends_the_probe() -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    stopping = threading.Event()
    stopping.set()
    probe_model(endpoint(url), time.monotonic() + 600, stopping)  # returns at once instead of waiting 600 s
