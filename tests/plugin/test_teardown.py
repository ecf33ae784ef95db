"""The end of a session: the reports come first, then Gym is stopped, fast, saying so; a runner's stop
(``docker stop``: SIGTERM, SIGKILL soon after; GitHub Actions' cancel: SIGINT, SIGTERM, SIGKILL) finds every
report written; each item's duration is its own; the artefacts of one session agree. Against the stand-in
``gym``; tests/real_gym/test_real_gym.py stops a real Gym the same way.

Signals are sent on a runner's schedule (what is measured is whether the reports were on disk by then); every
other wait polls a condition against a deadline.
"""

from __future__ import annotations

import json
import signal
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path

import pytest

from pytest_gym_eval.gym.processes import session_members
from tests.support.children import (
    DOCKER_STOP,
    GITHUB_CANCEL,
    REPORT_ARGS,
    REPORTS_WITHIN,
    run_until_reported,
    stop_like_a_runner,
    wait_until,
)
from tests.support.fakes import FakeGym
from tests.support.junit import junit_suite_properties


def task(task_id: str, **fake: object) -> dict[str, object]:
    return {"id": task_id, "responses_create_params": {"input": f"Question {task_id}?"}, "fake": fake}


def write_dataset(path: Path, *rows: dict[str, object]) -> str:
    (path / "mcqa.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return "mcqa.jsonl"


def left_running(fake_gym: FakeGym) -> list[int]:
    return [int(c["sid"]) for c in fake_gym.calls() if session_members(int(c["sid"]))]


@pytest.mark.parametrize("schedule", [DOCKER_STOP, GITHUB_CANCEL], ids=["sigterm-sigkill", "github-cancel"])
def test_a_runners_stop_finds_every_report_written(
    pytester: pytest.Pytester,
    fake_gym: FakeGym,
    monkeypatch: pytest.MonkeyPatch,
    schedule: Sequence[tuple[signal.Signals, float]],
) -> None:
    """Gym's servers here never end after SIGINT (only SIGKILL ends them), so stopping them takes the whole grace
    period: the reports are written before, within 3 s of the first signal, and the JUnit file shows the gate
    the session never judged as an error (it read green)."""
    monkeypatch.setenv("FAKE_GYM_STOP", "slow")
    name = write_dataset(pytester.path, task("first"), task("held", hold=True))
    args = [*fake_gym.args, "-v", name, "--gym-run-dir=runs", "--gym-min-mean-reward=0.5", *REPORT_ARGS]
    process, seen = run_until_reported(pytester.path, args, lambda line: "first[r0] PASSED" in line)
    complete_at, rest = stop_like_a_runner(process, pytester.path, schedule)
    assert complete_at is not None and complete_at <= REPORTS_WITHIN, (complete_at, ("".join(seen) + rest)[-3000:])
    properties = junit_suite_properties(pytester.path / "junit.xml")
    assert properties["gym.exit_status"] == "2"
    report = json.loads((pytester.path / "report.json").read_text())
    assert report["session"]["exit_status"] == 2
    assert [r["task_id"] for r in report["rollouts"]] == ["first"]
    suite = ET.parse(pytester.path / "junit.xml").getroot().find("testsuite")
    assert suite is not None and int(suite.get("errors", "0")) >= 1
    (gate,) = [case for case in suite.iter("testcase") if case.get("name") == "gym-gate"]
    error = gate.find("error")
    assert error is not None and "before this dataset's gates were judged" in (error.get("message") or "")
    wait_until(lambda: not left_running(fake_gym), "Gym's processes are gone (the watchdog, after SIGKILL)")


def test_gym_is_stopped_after_the_summary_saying_so(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    name = write_dataset(pytester.path, task("a"), task("b"))
    result = pytester.runpytest_subprocess(*fake_gym.args, name, "--junitxml=junit.xml")
    assert result.ret == 0, result.stdout.str()[-3000:]
    lines = result.outlines
    summary = next(i for i, line in enumerate(lines) if "gym reward summary" in line)
    stopping = lines.index("gym: stopping Gym ...")
    stopped = next(i for i, line in enumerate(lines) if line.startswith("gym: Gym stopped in "))
    last = next(i for i, line in enumerate(lines) if " passed in " in line)
    assert summary < stopping < stopped < last, lines[summary:]
    assert not left_running(fake_gym)


def test_the_summary_shows_gyms_own_figures_although_gym_writes_them_after_the_last_rollout(
    pytester: pytest.Pytester, fake_gym: FakeGym, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``gym eval run`` writes its aggregate metrics a while after the last rollout (~2 s): the session lets it
    finish before the reports, so the summary shows Gym's own figures beside ours, and only then stops Gym."""
    monkeypatch.setenv("FAKE_GYM_AGGREGATE_DELAY", "1.5")
    name = write_dataset(pytester.path, task("a"), task("b"))
    result = pytester.runpytest_subprocess(*fake_gym.args, name)
    assert result.ret == 0, result.stdout.str()[-3000:]
    result.stdout.fnmatch_lines(["*gym reward summary*", "*gym's own*pass@1/accuracy 100*", "gym: stopping Gym ..."])


def test_item_times_hold_neither_gyms_start_nor_its_stop(
    pytester: pytest.Pytester, fake_gym: FakeGym, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Gym takes 4 s to start and its stop takes the grace period: JUnit charges neither to an item (pytest
    charged the start to the first item's setup and the stop to the last item's teardown); the start is the
    suite property ``gym.startup_seconds``."""
    monkeypatch.setenv("FAKE_GYM_START_DELAY", "4")
    monkeypatch.setenv("FAKE_GYM_STOP", "slow")
    name = write_dataset(pytester.path, task("a"), task("b"))
    result = pytester.runpytest_subprocess(
        *fake_gym.args, name, "--gym-min-mean-reward=0.5", "--junitxml=junit.xml", "-p", "no:randomly"
    )
    assert result.ret == 0, result.stdout.str()[-3000:]
    cases = {c.get("name"): float(c.get("time", "nan")) for c in ET.parse(pytester.path / "junit.xml").iter("testcase")}
    assert set(cases) == {"a[r0]", "b[r0]", "gym-gate"}
    assert all(seconds < 2.0 for seconds in cases.values()), cases
    assert float(junit_suite_properties(pytester.path / "junit.xml")["gym.startup_seconds"]) >= 4.0


def test_a_crashed_gate_item_fails_the_session_in_every_artefact(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    """An xdist worker crashed in the ``gym-gate`` item: its JUnit testcase is a failure, and so the exit status,
    ``gym.exit_status`` and the JSON report say 1 (they said 0 and PASS)."""
    name = write_dataset(pytester.path, task("a"), task("b"))
    pytester.makeconftest(
        """
import os
def pytest_runtest_call(item):
    if item.nodeid.endswith("::gym-gate"):
        os._exit(3)
"""
    )
    result = pytester.runpytest_subprocess(
        *fake_gym.args, name, "-n", "2", "--gym-min-mean-reward=0.5", "--junitxml=junit.xml", "--gym-report=r.json"
    )
    assert result.ret == 1, result.stdout.str()[-3000:]
    (gate,) = [c for c in ET.parse(pytester.path / "junit.xml").iter("testcase") if c.get("name") == "gym-gate"]
    assert gate.find("failure") is not None or gate.find("error") is not None
    assert junit_suite_properties(pytester.path / "junit.xml")["gym.exit_status"] == "1"
    session = json.loads((pytester.path / "r.json").read_text())["session"]
    assert session["exit_status"] == 1 and "1 gym-gate item failed or errored" in session["reason"], session
