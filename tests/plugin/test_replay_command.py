"""The replay model server as a command (``python -m pytest_gym_eval replay``) in a child process: it serves until
signalled and refuses bad options before serving (the server itself: tests/unit/test_replay.py)."""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.support.replay import (
    WEATHER_INPUT,
    WEATHER_OUTPUT,
    get,
    post,
    rollout,
    said,
    write_rollouts,
)


@pytest.fixture
def weather_file(tmp_path: Path) -> Path:
    return write_rollouts(
        tmp_path / "weather_rollouts.jsonl",
        [rollout(WEATHER_INPUT, WEATHER_OUTPUT), rollout("What is 2+2?", [said("4")])],
    )


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
