"""The progress line in pytest sessions against the stand-in ``gym`` (the line alone: tests/unit/test_progress.py)."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import subprocess
import sys
import time

import pytest

from tests.support.children import child_pytest_argv
from tests.support.fakes import FakeGym


def run_in_pty(args: list[str], cwd: str, timeout: float = 120.0) -> str:
    """Run pytest with ``args`` on a pseudo-terminal (as a user's terminal) and return everything it printed."""
    leader, follower = pty.openpty()
    env = {**os.environ, "COLUMNS": "120", "TERM": "xterm"}
    process = subprocess.Popen(
        child_pytest_argv(*args), cwd=cwd, stdin=follower, stdout=follower, stderr=follower, env=env
    )
    os.close(follower)
    chunks = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([leader], [], [], 1.0)
            if ready:
                try:
                    data = os.read(leader, 65536)
                except OSError:  # the child closed the terminal
                    break
                if not data:
                    break
                chunks.append(data)
            elif process.poll() is not None:
                break
    finally:
        os.close(leader)
        if process.poll() is None:
            process.kill()
        process.wait()
    return b"".join(chunks).decode("utf-8", "replace")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="pseudo-terminal")
def test_on_a_terminal_the_status_tail_shows_while_an_item_waits(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    rows = [
        {"id": "slow", "responses_create_params": {"input": "A?"}, "fake": {"delay": 3}},
        {"id": "fast", "responses_create_params": {"input": "B?"}},
    ]
    (pytester.path / "mcqa.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    output = run_in_pty([*fake_gym.args, "mcqa.jsonl", "-p", "no:randomly", "--color=no"], str(pytester.path))
    assert "2 passed" in output, output
    tails = re.findall(r"\[gym: 0/2 rollouts, 0 errors\]", output)
    assert tails, output
    # Every tail drawn is erased again: what the terminal finally shows is pytest's own text.
    screen = render(output)
    assert not [line for line in screen if "[gym:" in line], screen
    assert [line for line in screen if re.match(r"mcqa\.jsonl \.+\s*\[100%\]$", line)], "\n".join(screen)


def render(text: str) -> list[str]:
    """The lines a terminal shows after printing ``text`` (carriage returns, backspaces and overwrites
    applied; trailing blanks dropped)."""
    lines: list[list[str]] = [[]]
    column = 0
    for char in text:
        line = lines[-1]
        if char == "\n":
            lines.append([])
            column = 0
        elif char == "\r":
            column = 0
        elif char == "\b":
            column = max(0, column - 1)
        else:
            if column < len(line):
                line[column] = char
            else:
                line.extend(" " * (column - len(line)))
                line.append(char)
            column += 1
    return ["".join(line).rstrip() for line in lines]


def test_quiet_runs_show_no_progress(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    rows = [{"id": "slow", "responses_create_params": {"input": "A?"}, "fake": {"delay": 1.5}}]
    (pytester.path / "mcqa.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    output = run_in_pty([*fake_gym.args, "mcqa.jsonl", "-q", "-p", "no:randomly", "--color=no"], str(pytester.path))
    assert "1 passed" in output and "[gym:" not in output, output


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="pseudo-terminal")
def test_under_xdist_the_controller_shows_the_progress_one_process_shows(
    pytester: pytest.Pytester, fake_gym: FakeGym, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_GYM_START_DELAY", "2")  # long enough for the start-up phase to show
    rows = [
        {"id": "slow", "responses_create_params": {"input": "A?"}, "fake": {"delay": 3}},
        {"id": "fast", "responses_create_params": {"input": "B?"}},
    ]
    (pytester.path / "mcqa.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    args = [*fake_gym.args, "mcqa.jsonl", "-n", "2", "-p", "no:randomly", "--color=no"]
    output = run_in_pty(args, str(pytester.path))
    assert "2 passed" in output, output
    assert re.search(r"\[gym: starting Gym's servers, \d+\.\d s\]", output), output
    assert re.search(r"\[gym: [01]/2 rollouts, 0 errors", output), output
    screen = render(output)
    assert not [line for line in screen if "[gym:" in line], screen
    assert [line for line in screen if re.match(r"\.\.\s*\[100%\]$", line)], "\n".join(screen)
    assert [line for line in screen if line.startswith("gym: run directory: ")], "\n".join(screen)  # a line its own
