"""Starting Gym: probing the policy model's endpoint first (:func:`pytest_gym_eval.gym.run.probe_model`), and the one
retry of ``gym env start`` after Ray's node start-up timeout (against the stand-in ``gym``; with real Gym and Ray
in tests/real_gym/test_gym_lifecycle.py)."""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from pytest_gym_eval import provision
from pytest_gym_eval.gym.processes import GymProcess, free_port, session_members
from pytest_gym_eval.gym.run import (
    GymStartError,
    ModelEndpoint,
    probe_model,
    ray_temp_dir,
    unlisted_model,
    wait_until_ready,
)
from pytest_gym_eval.gym.servers import ServerProbe
from pytest_gym_eval.gym.standalone import serving
from pytest_gym_eval.replay import ReplayServer
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


def test_a_bound_model_servers_endpoint_is_named_by_its_server(tmp_path: Path) -> None:
    """A --gym-model-server binding's endpoint that never answered was named by its URL alone (which of several
    bindings?), and its unlisted model as --gym-model's: both now name the model server."""
    url = f"http://127.0.0.1:{free_port()}/v1"
    with pytest.raises(GymStartError) as error:
        probe_model(endpoint(url), time.monotonic(), threading.Event(), server="judge_modle")
    assert str(error.value).startswith(f"the model endpoint {url} (model server judge_modle) did not answer")
    recording = write_recording(tmp_path / "r_rollouts.jsonl")
    with ReplayServer([recording], log_path=tmp_path / "replay.jsonl") as replay:
        notes: list[str] = []
        model = ModelEndpoint(replay.base_url, "judge-typo", "openai_model", "PROBE_TEST_API_KEY")
        probe_model(model, time.monotonic() + 30, threading.Event(), notes.append, server="judge_model")
    assert notes == [
        f"warning: the model endpoint {replay.base_url} (model server judge_model) does not list the model "
        "'judge-typo' (model= of --gym-model-server judge_model) in GET /models (replay); the reports name 'judge-typo'"
    ]


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
            "`gym env start` exited with status 1 before its servers were ready: Exception: The current node timed "
            "out during startup. * (*gym-env-start-2.log:3)",
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


@pytest.fixture
def http_servers() -> Iterator[Callable[[Callable[[str], tuple[int, bytes]]], str]]:
    """Start HTTP servers on 127.0.0.1: ``start(answer)`` serves ``answer(path) -> (status, body)`` for every GET
    and returns the base URL; all are stopped at the end."""
    started: list[ThreadingHTTPServer] = []

    def start(answer: Callable[[str], tuple[int, bytes]], port: int = 0) -> str:
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                status, body = answer(self.path)
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        started.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield start
    for server in started:
        server.shutdown()
        server.server_close()


def head_listing(
    instances: list[dict[str, object]], asked: list[str] | None = None
) -> Callable[[str], tuple[int, bytes]]:
    """A head server's answers: ``instances`` at ``/server_instances``, 404 elsewhere; each path asked is appended
    to ``asked``."""

    def answer(path: str) -> tuple[int, bytes]:
        (asked if asked is not None else []).append(path)
        return (200, json.dumps(instances).encode()) if path == "/server_instances" else (404, b"{}")

    return answer


def address(url: str) -> tuple[str, int]:
    host, port = url.removeprefix("http://").split(":")
    return host, int(port)


def test_servers_are_ready_once_every_server_the_head_lists_answers(http_servers: Any) -> None:
    # Gym's own check: any HTTP answer counts (there may be no route at /), a refused connection does not.
    server = http_servers(lambda path: (404, b"Not Found"))
    not_yet = f"http://127.0.0.1:{free_port()}"
    asked: list[str] = []
    listed: list[dict[str, object]] = [
        {"process_name": "mcqa", "url": server},
        {"process_name": "agent", "url": not_yet},
    ]
    probe = ServerProbe(address(http_servers(head_listing(listed, asked))))
    assert not probe.all_answer()
    assert probe.answered == {server}
    http_servers(lambda path: (200, b"{}"), address(not_yet)[1])
    assert probe.all_answer()
    assert asked == ["/server_instances"]  # once listed, not asked again: Gym's head server logs every request


@pytest.mark.parametrize(
    "answer",
    [
        head_listing([]),  # Gym has not launched every server yet
        head_listing([{"process_name": "mcqa", "url": None}]),  # a server without a URL: Gym's ready line decides
        lambda path: (503, b"starting"),
        lambda path: (200, b"not json"),
        lambda path: (200, b'{"mcqa": "http://127.0.0.1:1"}'),
    ],
    ids=["none listed", "no url", "head errors", "not json", "not a list"],
)
def test_a_head_server_that_lists_no_ready_servers_means_not_yet(
    http_servers: Any, answer: Callable[[str], tuple[int, bytes]]
) -> None:
    assert not ServerProbe(address(http_servers(answer))).all_answer()
    assert not ServerProbe(("127.0.0.1", free_port())).all_answer()  # the head server is not up yet


def test_the_wait_ends_when_the_servers_answer_before_gym_says_they_are_ready(
    tmp_path: Path, http_servers: Any
) -> None:
    # Gym checks its servers every 3 s: the session asks them itself and need not wait for its line.
    server = http_servers(lambda path: (404, b""))
    head = http_servers(head_listing([{"process_name": "mcqa", "url": server}]))
    servers = GymProcess(
        [sys.executable, "-c", "import signal; print('starting', flush=True); signal.pause()"],
        env=dict(os.environ), cwd=tmp_path, log_path=tmp_path / "start.log", name="gym",
    )  # fmt: skip
    try:
        wait_until_ready(servers, time.monotonic() + 60, threading.Event(), 60, address(head))  # raises at the deadline
        with pytest.raises(GymStartError, match="not ready within 1 s"):  # without the head: Gym's line only
            wait_until_ready(servers, time.monotonic() + 1, threading.Event(), 1)
    finally:
        servers.stop(1)


def test_rays_longest_socket_path_fits_under_the_folder_it_is_given() -> None:
    # Ray's dashboard module "TaskEventsHead" has the longest socket name; a path over 107 bytes failed the
    # dashboard and Ray waited 60 s for it (seen with a run directory whose `ray` folder was 37-44 bytes long).
    longest = "/ray/session_2026-12-02_18-21-59_162596_4194304/sockets/dash_TaskEventsHead"
    base = Path(tempfile.mkdtemp(prefix="r", dir="/tmp"))
    try:
        for length in range(len(str(base)) + 5, 90):
            run_dir = base / ("d" * (length - len(str(base)) - 1))
            run_dir.mkdir()
            ray_dir, made = ray_temp_dir(run_dir)
            assert len(str(ray_dir)) + len(longest) <= 107, (length, ray_dir)
            assert made == (len(str(run_dir / "ray")) + len(longest) > 107)
            if made:
                shutil.rmtree(ray_dir)
    finally:
        shutil.rmtree(base)
