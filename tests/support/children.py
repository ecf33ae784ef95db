"""Child pytest processes: argv with default signal handling, waiting for a report, interrupting as a user or a
CI runner would, and the environment every child run starts from (:data:`CHILD_ADDOPTS`, :data:`CI_ENVIRONMENT`)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.support.junit import junit_suite_properties

if TYPE_CHECKING:
    from pytest_gym_eval.gym.orphans import Owner

CHILD_ADDOPTS = "-p no:randomly -p no:sugar"
"""What every pytest the tests start leaves out unless asked for (``-p randomly``, ``-p sugar``): pytest-randomly
and pytest-sugar, dev dependencies for tests/plugin/test_plugins.py, change the order and the output of every run they
load into."""


def restore_ctrl_c() -> None:
    """Give SIGINT Python's own handler when this run inherited it ignored.

    A shell starts a background job (``.ci/run &``, ``nohup``, a CI runner's script) with SIGINT ignored, and an
    ignored signal stays ignored in every process started from it: the tests that press Ctrl-C (in this
    process, in a child pytest, or in the Gym it starts) then waited forever. A handler, unlike SIG_IGN, is reset
    to the default in every child, as in a terminal."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


CI_ENVIRONMENT = ("CI", "BUILD_NUMBER", "GITHUB_ACTIONS", "GITHUB_STEP_SUMMARY", "GITHUB_WORKSPACE")
CI_ENVIRONMENT += ("FORCE_COLOR", "PY_COLORS", "NO_COLOR")
"""Variables a CI machine sets that change what a pytest run prints: pytest's untruncated short summary on CI
(``CI``, ``BUILD_NUMBER``), the plugin's GitHub annotations and step summary, forced colour. A test that wants
one sets it."""


def started_processes(run_dir: Path) -> list[dict[str, Any]]:
    """The processes a run started, as it recorded them in ``processes.jsonl``: ``{name, pid, sid}`` each."""
    return [json.loads(line) for line in (run_dir / "processes.jsonl").read_text().splitlines()]


def gym_commands(run_dir: Path) -> list[str]:
    """The names of the Gym commands a run started (``gym env start``, ``gym eval run``), in order: what
    ``processes.jsonl`` lists less the Ray head that comes first when the run started one (when it could not, Gym
    starts Ray itself: pytest_gym_eval/gym/ray_head.py)."""
    names = [process["name"] for process in started_processes(run_dir)]
    return names[1:] if names[:1] == ["ray head"] else names


def processes_with_environment(name: str, value: str) -> list[int]:
    """The PIDs of the running processes whose environment has ``name=value``: with a value of the test's own, set
    before it starts a session, exactly the processes that session (or anything it started) left running, whatever
    other tests and sessions run on the machine at the same time."""
    entry = f"{name}={value}".encode()
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            environment = Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:  # gone, or not ours to read
            continue
        if entry in environment.split(b"\0"):
            found.append(int(pid))
    return found


def stop_dead_runs(run_dir: Path) -> None:
    """Teardown: stop whatever a run in ``run_dir`` whose owner a test killed left running (the way ``python -m
    pytest_gym_eval cleanup --run-dir`` does, without a grace period). Only its sessions that still hold a process
    carrying its marker are touched, never an id recorded earlier that may now be someone else's."""
    from pytest_gym_eval.gym.orphans import find_leftovers, stop_leftovers

    for leftovers in find_leftovers(run_dir):
        stop_leftovers(leftovers, grace=0)


def stranger_and_dead_owner(run_dir: Path) -> tuple[subprocess.Popen[bytes], Owner]:
    """A process in a session of its own that is no run's, recorded in ``run_dir``'s ``processes.jsonl`` as if
    its session id had been a run's (as after the run's session ended and Linux gave the id to a new process),
    and the run's owner, which has died."""
    from pytest_gym_eval.core.rundir import RunPaths
    from pytest_gym_eval.gym.orphans import MARKER, Owner

    stranger = subprocess.Popen(
        ["sleep", "600"], start_new_session=True, env={k: v for k, v in os.environ.items() if k != MARKER}
    )
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    record = {"name": "gym env start", "pid": stranger.pid, "sid": stranger.pid}
    RunPaths(run_dir).processes.write_text(json.dumps(record) + "\n")
    return stranger, Owner(ended.pid, 1, run_dir)


def outcomes(result: pytest.RunResult) -> dict[str, str]:
    """Node id -> ``PASSED``/``FAILED``/``ERROR`` from a run's ``-rA`` short test summary."""
    found = {}
    for line in result.outlines:
        for word in ("PASSED", "FAILED", "ERROR"):
            if line.startswith(word + " "):
                found[line.split()[1]] = word
    return found


def wait_until(condition: Callable[[], object], what: str, timeout: float = 60.0) -> None:
    """Poll ``condition`` every 50 ms until it is true (a state read from ``/proc`` or a file, never a sleep as
    synchronisation); fail naming ``what`` after ``timeout`` seconds."""
    import time

    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"not within {timeout:g} s: {what}")
        time.sleep(0.05)


def child_pytest_argv(*args: str) -> list[str]:
    """argv running pytest with ``args`` in a child process whose SIGINT and SIGTERM have their default
    handling even when this process inherited them ignored (a background job of a shell does): the tests
    that stop a run with a signal then hold wherever the suite runs."""
    code = (
        "import signal, sys, pytest; signal.signal(signal.SIGINT, signal.default_int_handler); "
        "signal.signal(signal.SIGTERM, signal.SIG_DFL); sys.exit(pytest.main())"
    )
    return [sys.executable, "-c", code, *args]


def interrupt(
    process: subprocess.Popen[str], seen: list[str], timeout: float, sig: signal.Signals = signal.SIGINT
) -> str:
    """Stop ``process`` (a pytest run whose output so far is ``seen``) with ``sig`` (Ctrl-C by default) as a
    user or a CI runner would, and return its whole output once it has ended.

    A user whose first Ctrl-C goes unnoticed presses it again, so ``sig`` is sent again when the run has not
    ended 30 s after the first; past ``timeout`` seconds the run is killed and this raises. (One stress run saw
    a SIGINT go unnoticed twice in about 400 runs, unexplained; 450 later runs, started by
    :func:`child_pytest_argv`, never missed one.)
    """
    process.send_signal(sig)
    try:
        rest = process.communicate(timeout=30)[0]
    except subprocess.TimeoutExpired:
        process.send_signal(sig)
        try:
            rest = process.communicate(timeout=timeout)[0]
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()
            raise
    return "".join(seen) + rest


def interrupt_once_reported(
    cwd: Path, args: Sequence[str], reported: Callable[[str], bool], sig: signal.Signals, timeout: float
) -> tuple[int | None, str]:
    """Run pytest with ``args`` in ``cwd`` (a child process, :func:`child_pytest_argv`), wait for the first
    output line for which ``reported`` is true (an item has reported), then :func:`interrupt` it with ``sig``.
    Returns its exit status and whole output."""
    process, seen = run_until_reported(cwd, args, reported)
    output = interrupt(process, seen, timeout, sig)
    return process.returncode, output


def run_until_reported(
    cwd: Path, args: Sequence[str], reported: Callable[[str], bool]
) -> tuple[subprocess.Popen[str], list[str]]:
    """Start pytest with ``args`` in ``cwd`` (a child process, :func:`child_pytest_argv`) and read its output up to
    the first line for which ``reported`` is true; returns the running process and the lines read."""
    process = subprocess.Popen(
        child_pytest_argv(*args), cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )  # fmt: skip
    assert process.stdout is not None
    seen = []
    for line in process.stdout:
        seen.append(line)
        if reported(line):
            break
    return process, seen


# A runner stopping a session (tests/plugin/test_teardown.py, and against real Gym tests/real_gym/test_real_gym.py).

GITHUB_CANCEL = ((signal.SIGINT, 0.0), (signal.SIGTERM, 7.5), (signal.SIGKILL, 10.0))
"""How GitHub Actions cancels a job: SIGINT, SIGTERM 7.5 s later, SIGKILL 2.5 s after that."""
DOCKER_STOP = ((signal.SIGTERM, 0.0), (signal.SIGKILL, 3.0))
"""``docker stop`` (10 s) and Kubernetes (30 s) send SIGKILL after SIGTERM; a busy runner's 3 s."""
REPORTS_WITHIN = 3.0
"""Seconds after the first signal by which every report must be on disk (the issue's goal)."""


REPORT_ARGS = ("--junitxml=junit.xml", "--gym-report=report.json", "--gym-markdown=summary.md", "--gym-html=page.html")


def reports_complete(root: Path) -> bool:
    """Whether the JUnit XML (parsed whole, with the session's exit status), the JSON report, the Markdown
    summary and the HTML page are all on disk."""
    try:
        properties = junit_suite_properties(root / "junit.xml")
        json.loads((root / "report.json").read_text())
    except (OSError, ValueError, ET.ParseError, AssertionError):
        return False
    return "gym.exit_status" in properties and (root / "summary.md").is_file() and (root / "page.html").is_file()


def stop_like_a_runner(
    process: subprocess.Popen[str], root: Path, schedule: Sequence[tuple[signal.Signals, float]]
) -> tuple[float | None, str]:
    """Send each signal of ``schedule`` (seconds after the first) to ``process`` (a pytest run from
    :func:`run_until_reported`, its output read meanwhile so that it never blocks on a full pipe) unless it has
    ended by then. Returns the seconds from the first signal until every report in ``root`` was complete (None:
    never) and the rest of its output."""
    import threading

    assert process.stdout is not None
    rest: list[str] = []
    reader = threading.Thread(target=lambda: rest.extend(process.stdout or ()), daemon=True)
    reader.start()
    first = time.monotonic()
    complete_at = None
    for sig, at in schedule:
        while process.poll() is None and time.monotonic() < first + at:
            if complete_at is None and reports_complete(root):
                complete_at = time.monotonic() - first
            time.sleep(0.02)  # polling the files, on the runner's clock
        if process.poll() is not None:
            break
        process.send_signal(sig)
    process.wait(timeout=60)
    reader.join(timeout=60)
    if complete_at is None and reports_complete(root):
        complete_at = time.monotonic() - first
    return complete_at, "".join(rest)


PYTEST_INTERRUPT_CRASH = (
    "pytest_keyboard_interrupt",
    "TypeError: unsupported operand type(s) for -: 'NoneType' and 'int'",
)
"""What pytest 9.2 prints when its terminal reporter fails to show a KeyboardInterrupt's traceback: Python 3.11+
can leave a traceback entry without a line number (tb_lineno None) when the interrupt lands on such an
instruction, and pytest computes ``tb_lineno - 1``. pytest's sessionfinish has run by then (the plugin has
stopped Gym), but the TypeError escapes pytest and the exit status is 1. Seen about once in 300 Ctrl-Cs sent
as an item passes, with the interrupt in pytest's own fixture code."""


def assert_interrupted(returncode: int | None, output: str) -> None:
    """A pytest run ended as after Ctrl-C: exit status 2 with KeyboardInterrupt reported, or the exit status 1
    of pytest's own crash while reporting it (:data:`PYTEST_INTERRUPT_CRASH`, a pytest bug, not the plugin's)."""
    assert "KeyboardInterrupt" in output, output[-3000:]
    if returncode == 1 and all(text in output for text in PYTEST_INTERRUPT_CRASH):
        return
    assert returncode == pytest.ExitCode.INTERRUPTED, output[-3000:]
