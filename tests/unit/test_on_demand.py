"""Rollouts on demand, the pure parts (:mod:`pytest_gym_eval.gym.on_demand`): which environment server fronts an agent
in the head server's ``/server_instances`` answer, the :class:`Rollout` of a ``/run`` answer, and the wording of
each error (against a small HTTP server in this process)."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest

from pytest_gym_eval.gym.on_demand import (
    OnDemandError,
    Servers,
    head_server_of,
    post_row,
    rollout_from_answer,
    server_instances,
)


# The shape of Gym 0.7.0's GET /server_instances (nemo_gym/cli/env.py), two environments.
def instance(process: str, kind: str, name: str, **where: object) -> dict[str, object]:
    return {"process_name": process, "server_type": kind, "name": name, "pid": 1, **where}


INSTANCES = [
    instance("policy_model", "responses_api_models", "openai_model", url="http://127.0.0.1:1"),
    instance("mcqa", "resources_servers", "mcqa", url="http://127.0.0.1:2"),
    instance("mcqa_simple_agent", "responses_api_agents", "simple_agent", url="http://127.0.0.1:3"),
    instance("mcqa_environment_server", "environment_servers", "legacy_agent", url="http://127.0.0.1:4/"),
    instance("weather_simple_agent", "responses_api_agents", "simple_agent", url="http://127.0.0.1:5"),
    instance("weather_environment_server", "environment_servers", "legacy_agent", host="127.0.0.1", port=6),
]

ROW = {"responses_create_params": {"input": [{"role": "user", "content": "Which? \\boxed{}"}]}, "expected_answer": "B"}
MESSAGE = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "\\boxed{B}"}]}
ANSWER = {
    "responses_create_params": ROW["responses_create_params"],
    "response": {"output": [MESSAGE], "usage": {"input_tokens": 30, "output_tokens": 5}},
    "reward": 1.0,
    "expected_answer": "B",
    "extracted_answer": "B",
    "mask_sample": False,
    "failure_kind": None,
    "failure_reason": None,
}


def test_the_environment_server_of_each_agent_is_found_by_its_name() -> None:
    servers = Servers.parse(INSTANCES)
    assert servers.agents == ("mcqa_simple_agent", "weather_simple_agent")
    assert servers.environment_for("mcqa_simple_agent") == "http://127.0.0.1:4"
    assert servers.environment_for("weather_simple_agent") == "http://127.0.0.1:6"
    assert servers.agent_for("weather_simple_agent") == "weather_simple_agent"


def test_the_only_agent_is_the_default_and_the_only_environment_server_fronts_it() -> None:
    servers = Servers.parse([INSTANCES[2], {**INSTANCES[3], "process_name": "custom_env"}])
    assert servers.agent_for(None) == "mcqa_simple_agent"
    assert servers.environment_for("mcqa_simple_agent") == "http://127.0.0.1:4"


# The shape of Gym 0.6.0's answer: no environment servers; the agent servers' own /run rolls a row out.
INSTANCES_0_6 = [
    instance("policy_model", "responses_api_models", "openai_model", url="http://127.0.0.1:1"),
    instance("mcqa", "resources_servers", "mcqa", url="http://127.0.0.1:2"),
    instance("mcqa_simple_agent", "responses_api_agents", "simple_agent", url="http://127.0.0.1:3/"),
    instance("weather_simple_agent", "responses_api_agents", "simple_agent", host="127.0.0.1", port=5),
]


def test_without_environment_servers_the_agent_server_itself_rolls_the_row_out() -> None:
    servers = Servers.parse(INSTANCES_0_6)
    assert servers.agents == ("mcqa_simple_agent", "weather_simple_agent")
    assert servers.environment_for("mcqa_simple_agent") == "http://127.0.0.1:3"
    assert servers.environment_for("weather_simple_agent") == "http://127.0.0.1:5"
    # With environment servers (Gym 0.7.0) the agent's own URL is never the one.
    assert Servers.parse(INSTANCES).environment_for("mcqa_simple_agent") == "http://127.0.0.1:4"


def test_an_unknown_or_unnamed_agent_is_an_error_naming_gyms_agents() -> None:
    servers = Servers.parse(INSTANCES)
    with pytest.raises(
        OnDemandError, match="Gym runs no agent 'nope'; it runs 'mcqa_simple_agent', 'weather_simple_agent'"
    ):
        servers.agent_for("nope")
    with pytest.raises(OnDemandError, match=r"which agent should roll the row out\? .*: pass agent=NAME"):
        servers.agent_for(None)
    with pytest.raises(OnDemandError, match="no single environment server of Gym fronts the agent 'x_agent'"):
        servers.environment_for("x_agent")
    with pytest.raises(OnDemandError, match="listed no servers"):
        Servers.parse({"detail": "Not Found"})


def test_a_run_answer_becomes_a_rollout_with_the_verifiers_reward() -> None:
    rollout = rollout_from_answer(ANSWER, ROW, agent="mcqa_simple_agent", task_id="mine", threshold=1.0, where="u")
    assert (rollout.task_id, rollout.repeat, rollout.status, rollout.reward) == ("mine", 0, "passed", 1.0)
    assert rollout.output_text == "\\boxed{B}" and rollout.output_tokens == 5 and rollout.input_tokens == 30
    assert rollout.verifier_fields["extracted_answer"] == "B" and rollout.row == ROW
    assert rollout.record_path is None and rollout.agent == "mcqa_simple_agent"
    zero = rollout_from_answer({**ANSWER, "reward": 0}, ROW, agent="a", task_id="t", threshold=1.0, where="u")
    assert (zero.status, zero.reward) == ("failed", 0.0)


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (
            {**ANSWER, "failure_kind": "agent_error", "failure_reason": "boom"},
            r"Gym failed the rollout of agent 'a' \(u\): agent_error: boom",
        ),
        ({**ANSWER, "reward": None}, "has no usable reward: None"),
        ({**ANSWER, "reward": float("nan")}, "has no usable reward: nan"),
    ],
)  # fmt: skip
def test_a_run_answer_without_a_verdict_is_an_error(answer: dict[str, object], message: str) -> None:
    with pytest.raises(OnDemandError, match=message):
        rollout_from_answer(answer, ROW, agent="a", task_id="t", threshold=1.0, where="u")


class Gym(BaseHTTPRequestHandler):
    """A head server and an environment server in one: each path answers as the test set it."""

    answers: ClassVar[dict[str, tuple[int, bytes]]] = {}
    seen: ClassVar[list[object]] = []
    release = threading.Event()

    def do_GET(self) -> None:
        self._answer()

    def do_POST(self) -> None:
        Gym.seen.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
        self._answer()

    def _answer(self) -> None:
        status, body = Gym.answers[self.path]
        if status == 0:  # never answer in time
            Gym.release.wait(5)
            return
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def gym() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Gym)
    Gym.answers, Gym.seen = {}, []
    Gym.release.clear()
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()  # stops within 0.05 s
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        Gym.release.set()
        server.shutdown()
        server.server_close()


def test_the_row_is_posted_to_run_and_the_answer_decoded(gym: str) -> None:
    Gym.answers["/run"] = (200, json.dumps(ANSWER).encode())
    assert post_row(gym, ROW, timeout=5) == ANSWER
    assert Gym.seen == [ROW]


def test_server_instances_are_asked_of_the_head_server(gym: str) -> None:
    Gym.answers["/server_instances"] = (200, json.dumps(INSTANCES).encode())
    assert server_instances(gym.removeprefix("http://")).agents == ("mcqa_simple_agent", "weather_simple_agent")


def layer(server: str, body: bytes) -> bytes:
    """A Gym server's 500 body around the body of the server it called (as FastAPI answers a string: JSON)."""
    return json.dumps(f"Hit an exception in {server} calling an inner server: {body!r}").encode()


NESTED = layer(
    "SimpleAgent___mcqa_simple_agent",
    layer(
        "SimpleModelServer___policy_model",
        json.dumps({"error": {"message": "no recorded answer: it departs"}}).encode(),
    ),
).decode()


@pytest.mark.parametrize(
    ("status", "body", "message"),
    [
        (
            500,
            NESTED,
            "answered HTTP 500: no recorded answer: it departs "
            r"\(through SimpleAgent___mcqa_simple_agent -> SimpleModelServer___policy_model\)$",
        ),
        (500, json.dumps("HTTP 404: no recorded answer"), "answered HTTP 500: HTTP 404: no recorded answer$"),
        (422, json.dumps({"detail": [{"msg": "Required"}]}), r"answered HTTP 422: {.detail.: \[{.msg.: .Required.}\]}"),
        (200, "[1, 2]", "answered \\[1, 2\\], not a record"),
        (200, "<html>", "answered no JSON: b'<html>'"),
    ],
)  # fmt: skip
def test_each_http_error_names_its_cause(gym: str, status: int, body: str, message: str) -> None:
    Gym.answers["/run"] = (status, body.encode())
    with pytest.raises(OnDemandError, match=f"^POST {gym}/run {message}"):
        post_row(gym, ROW, timeout=5)


def test_no_answer_in_time_is_an_error_naming_the_timeout(gym: str) -> None:
    Gym.answers["/run"] = (0, b"")
    with pytest.raises(OnDemandError, match=f"^POST {gym}/run did not answer within 0.2 s$"):
        post_row(gym, ROW, timeout=0.2)


def test_a_refused_connection_says_so() -> None:
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    with pytest.raises(OnDemandError, match=f"POST http://127.0.0.1:{port}/run failed: connection refused"):
        post_row(f"http://127.0.0.1:{port}", ROW, timeout=5)
    with pytest.raises(
        OnDemandError, match=r"Gym's head server did not list its servers \(GET .*\): connection refused"
    ):
        server_instances(f"127.0.0.1:{port}")


def test_a_row_that_is_not_json_is_an_error() -> None:
    with pytest.raises(OnDemandError, match="the row is not JSON"):
        post_row("http://127.0.0.1:1", {"responses_create_params": {"input": object()}}, timeout=1)


def test_the_head_server_is_read_from_the_runs_gym_config(tmp_path: Path) -> None:
    config = tmp_path / "gym-config.yaml"
    config.write_text(json.dumps({"head_server": {"host": "127.0.0.1", "port": 11000}}))
    assert head_server_of(config) == "127.0.0.1:11000"
    assert head_server_of(tmp_path / "missing") is None
