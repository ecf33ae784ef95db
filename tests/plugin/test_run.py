"""Starting Gym: probing the policy model's endpoint first (:func:`pytest_gym_eval.run.probe_model`), and the one
retry of ``gym env start`` after Ray's node start-up timeout (against the stand-in ``gym``; with real Gym and Ray
in tests/real_gym/test_gym_lifecycle.py)."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from pytest_gym_eval import provision
from pytest_gym_eval.processes import GymProcess, free_port, session_members
from pytest_gym_eval.replay import ReplayServer
from pytest_gym_eval.run import GymStartError, ModelEndpoint, probe_model, unlisted_model, wait_until_ready
from pytest_gym_eval.serving import serving
from tests.support.children import started_processes, wait_until
from tests.support.fakes import FakeGym, make_fake_checkout, write_recording


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


def test_a_model_name_the_endpoint_does_not_list_is_warned_of(tmp_path: Path) -> None:
    # llama.cpp answers any model name with the model it serves: a typo would name the wrong model in every report.
    recording = write_recording(tmp_path / "r_rollouts.jsonl")
    with ReplayServer([recording], log_path=tmp_path / "replay.jsonl") as replay:
        for name, warned in (("replay", False), ("gpt-4o-typo", True)):
            notes: list[str] = []
            model = ModelEndpoint(replay.base_url, name, "openai_model", "PROBE_TEST_API_KEY")
            probe_model(model, time.monotonic() + 30, threading.Event(), notes.append)
            expected = [
                f"warning: the model endpoint {replay.base_url} does not list the model 'gpt-4o-typo' (--gym-model) in"
                " GET /models (replay); the reports name 'gpt-4o-typo'"
            ]
            assert notes == (expected if warned else [])
    assert unlisted_model("m", b"not json") is None and unlisted_model("m", b'{"data": []}') is None


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


# Ray's node start-up timeout: one bounded retry.


def one_task(pytester: pytest.Pytester) -> str:
    row = {"id": "t1", "responses_create_params": {"input": [{"role": "user", "content": "Question?"}]}}
    (pytester.path / "mcqa.jsonl").write_text(json.dumps(row) + "\n")
    return "mcqa.jsonl"


def env_starts(fake_gym: FakeGym) -> list[dict[str, object]]:
    return [call for call in fake_gym.calls() if call["argv"][:2] == ["env", "start"]]  # type: ignore[index]


RETRY_NOTE = (
    "gym: Ray's node timed out during start-up (*gym-env-start.log), a known transient failure on a loaded machine; "
    "retrying `gym env start` once"
)


def test_a_ray_start_timeout_is_retried_once_and_the_run_goes_on(
    pytester: pytest.Pytester, fake_gym: FakeGym, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_GYM_START", "ray-timeout-once")
    monkeypatch.setenv("FAKE_GYM_WORKER", "1")  # the failed start leaves a SIGINT-proof worker in its session
    result = pytester.runpytest(*fake_gym.args, "--gym-run-dir=runs", one_task(pytester))
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([RETRY_NOTE, "gym: starting Gym's servers (log: *gym-env-start-2.log)"])
    first, second = env_starts(fake_gym)
    assert not session_members(int(first["sid"])) and not session_members(int(second["sid"]))  # type: ignore[call-overload]
    (run_dir,) = (pytester.path / "runs").iterdir()
    started = [json.loads(line)["name"] for line in (run_dir / "processes.jsonl").read_text().splitlines()]
    assert started == ["gym env start", "gym env start", "gym eval run"]


def test_a_second_ray_start_timeout_errors_every_item_with_advice(
    pytester: pytest.Pytester, fake_gym: FakeGym, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_GYM_START", "ray-timeout")
    monkeypatch.delenv("RAY_raylet_start_wait_time_s", raising=False)
    result = pytester.runpytest(*fake_gym.args, one_task(pytester))
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [
            RETRY_NOTE,
            "*Gym would not start: Ray's node timed out during start-up twice (`gym env start` was retried once). "
            "Ray's daemons start slowly on a loaded machine: the raylet gives its dashboard agent at most 15 s, and "
            "Ray gives the raylet at most RAY_raylet_start_wait_time_s=60 s (never less than 30 s) to register; Ray's "
            "logs: *ray-start-2 (raylet.out says why the raylet stopped). Free some CPU, or set "
            "RAY_raylet_start_wait_time_s higher.",
            "`gym env start` exited with status 1 before its servers were ready; last lines of *gym-env-start-2.log:",
        ]
    )
    assert len(env_starts(fake_gym)) == 2
    assert not [call for call in fake_gym.calls() if call["argv"][:2] == ["eval", "run"]]  # type: ignore[index]


def test_other_start_failures_are_not_retried(
    pytester: pytest.Pytester, fake_gym: FakeGym, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_GYM_START", "fail")
    result = pytester.runpytest(*fake_gym.args, one_task(pytester))
    result.assert_outcomes(errors=1)
    assert "retrying" not in result.stdout.str()
    assert len(env_starts(fake_gym)) == 1


def test_servers_started_for_attaching_get_the_retry_too(
    fake_gym: FakeGym, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_GYM_START", "ray-timeout-once")
    checkout = provision.GymCheckout(fake_gym.checkout, fake_gym.checkout / ".venv" / "bin" / "gym", None, {})
    model = ModelEndpoint("http://127.0.0.1:9/v1", "policy", "openai_model", "PYTEST_GYM_EVAL_TEST_NO_KEY")
    notes: list[str] = []
    with serving(checkout, model, ["mcqa_simple_agent"], tmp_path / "servers", 60, notes.append):
        first, second = started_processes(tmp_path / "servers")
        assert not session_members(first["pid"]) and session_members(second["pid"])
    assert any("retrying `gym env start` once" in note for note in notes), notes
    assert not session_members(second["pid"])


def test_rays_start_up_wait_is_lengthened_unless_the_environment_sets_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    checkout = provision.load_checkout(make_fake_checkout(tmp_path))
    monkeypatch.delenv("RAY_raylet_start_wait_time_s", raising=False)
    assert provision.gym_environment(checkout, tmp_path / "ray")["RAY_raylet_start_wait_time_s"] == "60"
    monkeypatch.setenv("RAY_raylet_start_wait_time_s", "7")
    assert provision.gym_environment(checkout, tmp_path / "ray")["RAY_raylet_start_wait_time_s"] == "7"


def test_the_ready_line_is_found_when_a_long_server_table_follows_it_in_one_read(tmp_path: Path) -> None:
    # Gym prints a table of every server right after "All N / N servers ready!"; with many servers it is
    # longer than any fixed window kept of the log, and may land in the same read as the line itself.
    table = "".join(f"    'server_{n}': {{'url': 'http://127.0.0.1:{20000 + n}'}},\n" for n in range(400))
    script = (
        "import signal, sys\n"
        f"sys.stdout.write('starting\\nAll 10 / 10 servers ready! Polling every 60s\\n' + {table!r})\n"
        "sys.stdout.flush()\n"
        "signal.pause()\n"
    )
    assert len(table) > 16_000
    servers = GymProcess(
        [sys.executable, "-c", script], env=dict(os.environ), cwd=tmp_path, log_path=tmp_path / "start.log", name="gym"
    )
    try:
        wait_until(lambda: (tmp_path / "start.log").stat().st_size > len(table), "the whole output is written")
        wait_until_ready(servers, time.monotonic() + 30, threading.Event(), 30)  # raises at the deadline
    finally:
        servers.stop(1)
