"""The replay model server as a command (``python -m pytest_gym_eval replay``) in a child process: it serves until
signalled and refuses bad options before serving (the server itself: tests/unit/test_replay.py)."""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import jsonlines
import pytest

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


@pytest.fixture
def weather_file(tmp_path: Path) -> Path:
    return write_rollouts(
        tmp_path / "weather_rollouts.jsonl",
        [rollout(WEATHER_INPUT, WEATHER_OUTPUT), rollout("What is 2+2?", [said("4")])],
    )


def post(url: str, body: Any = None, *, raw: bytes | None = None, headers: dict[str, str] | None = None) -> Any:
    """POST JSON (or raw bytes); returns ``(status, decoded JSON body)`` for any status."""
    data = raw if raw is not None else json.dumps(body).encode()
    request = urllib.request.Request(
        url, data=data, headers={"Content-Type": "application/json", **(headers or {})}, method="POST"
    )
    return _send(request)


def get(url: str, headers: dict[str, str] | None = None) -> Any:
    return _send(urllib.request.Request(url, headers=headers or {}, method="GET"))


def _send(request: urllib.request.Request) -> tuple[int, Any]:
    try:
        with _OPENER.open(request, timeout=10) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as error:
        with error:
            return error.code, json.load(error)


def _first_line(stream: Any, timeout: float) -> str:
    """The first line of ``stream``, waiting at most ``timeout`` seconds."""
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: lines.put(stream.readline()), daemon=True).start()
    try:
        return lines.get(timeout=timeout)
    except queue.Empty:
        pytest.fail(f"no line printed within {timeout} s")


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
@pytest.mark.parametrize("stop_signal", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_command_line_serves_until_signalled(weather_file: Path, tmp_path: Path, stop_signal: int) -> None:
    log = tmp_path / "cli.log.jsonl"
    command = [sys.executable, "-m", "pytest_gym_eval", "replay", str(weather_file), "--model-name", "cli"]
    process = subprocess.Popen(
        [*command, "--log", str(log)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        line = _first_line(process.stdout, timeout=60)
        match = re.fullmatch(r"replay model server listening on (http://127\.0\.0\.1:\d+/v1) \(2 recordings\)\n", line)
        assert match, line
        assert _first_line(process.stdout, timeout=60) == f"logging every request and answer to {log}\n"
        assert get(f"{match[1]}/models")[1]["data"][0]["id"] == "cli"
        status, answer = post(f"{match[1]}/responses", {"input": "What is 2+2?"})
        assert status == 200 and answer["output"] == [said("4")]
        process.send_signal(stop_signal)
        out, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, err
    assert out == "" and err == ""
    assert len(log.read_text(encoding="utf-8").splitlines()) == 2


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--port", "65536"], "argument --port: expected a port from 0 (any free one) to 65535, got 65536"),
        (["--port", "-1"], "argument --port: expected a port from 0 (any free one) to 65535, got -1"),
        (["--delay", "-1"], "argument --delay: expected a finite number of seconds >= 0, got '-1'"),
        (["--delay", "nan"], "argument --delay: expected a finite number of seconds >= 0, got 'nan'"),
        (["--delay", "inf"], "argument --delay: expected a finite number of seconds >= 0, got 'inf'"),
        (["--log", "{blocked}/requests.jsonl"], "error: --log: cannot write {blocked}/requests.jsonl: Not a directory"),
        (["--log", "{folder}"], "error: --log: cannot write {folder}: Is a directory"),
    ],
    ids=[
        "port-too-high",
        "port-negative",
        "delay-negative",
        "delay-nan",
        "delay-inf",
        "log-below-a-file",
        "log-folder",
    ],
)
def test_command_line_rejects_bad_options_before_serving(
    weather_file: Path, tmp_path: Path, args: list[str], message: str
) -> None:
    """A bad option is a usage error (exit status 2, one line naming it), never a traceback, nor a server that
    starts and then fails every request without an answer (an unwritable --log did). A child process, so that
    a server that does start is stopped by the timeout."""
    (tmp_path / "blocked").write_text("a file, not a folder")
    (tmp_path / "folder").mkdir()
    places = {"blocked": str(tmp_path / "blocked"), "folder": str(tmp_path / "folder")}
    command = [
        sys.executable,
        "-m",
        "pytest_gym_eval",
        "replay",
        str(weather_file),
        *(a.format(**places) for a in args),
    ]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired as expired:
        pytest.fail(f"the server started instead of refusing {args}: {expired.stdout!r}")
    assert done.returncode == 2, done.stderr
    assert message.format(**places) in done.stderr and "Traceback" not in done.stderr
    assert done.stdout == ""
