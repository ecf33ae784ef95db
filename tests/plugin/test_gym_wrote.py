"""Every rollout Gym scored is in every report: a session cut short (Ctrl-C while pytest waits in an early item, an
xdist worker killed) reports what Gym wrote to its output, not only what its items reported, and a ``gym-gate``
testcase never passes when its gate does not. Against the stand-in ``gym`` (tests/support/fake_gym.py)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.support.children import REPORT_ARGS, assert_interrupted, interrupt, run_until_reported, wait_until
from tests.support.fakes import FakeGym
from tests.support.junit import junit_suite_properties

QUICK = 8
"""Rollouts Gym scores before the held one."""

GATE_SECOND = """
def pytest_collection_modifyitems(items):
    gate = next(item for item in items if item.nodeid.endswith("::gym-gate"))
    items.remove(gate)
    items.insert(1, gate)  # as pytest-randomly may place it: it waits for every rollout of the dataset
"""


def write_dataset(folder: Path, quick: int, **held: object) -> str:
    rows = [{"id": f"q{i}", "responses_create_params": {"input": f"Q{i}?"}, "fake": {}} for i in range(quick)]
    rows.append({"id": "held", "responses_create_params": {"input": "held?"}, "fake": {"hold": True, **held}})
    (folder / "mcqa.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    return "mcqa.jsonl"


def output_lines(root: Path) -> int:
    """Lines Gym wrote to the one run directory's rollouts file so far."""
    found = list((root / "runs").glob("*/gym-output/rollouts.jsonl"))
    return len(found[0].read_text().splitlines()) if found else 0


def gate_case(path: Path) -> ET.Element:
    (case,) = [c for c in ET.parse(path).iter("testcase") if c.get("name") == "gym-gate"]
    return case


@pytest.mark.parametrize("xdist", [[], ["-n", "2"]], ids=["one-process", "xdist"])
def test_ctrl_c_in_an_early_item_reports_every_rollout_gym_scored(
    pytester: pytest.Pytester, fake_gym: FakeGym, xdist: list[str]
) -> None:
    """One rollout item reports, then the gate item waits for the held rollout while Gym scores the 8 others: after
    Ctrl-C the terminal summary, the JSON report and JUnit count the 8 (they counted 1 and called the other 8
    "never reported"), and the gate is judged on 8 of 9 (INCONCLUSIVE: Gym never scored the held one). Under
    pytest-xdist the controller, which runs no item, reports what Gym wrote the same way."""
    pytester.makeconftest(GATE_SECOND)
    name = write_dataset(pytester.path, QUICK)
    args = [*fake_gym.args, "-v", name, "--gym-run-dir=runs", "--gym-min-mean-reward=0.5", *REPORT_ARGS, *xdist]
    process, seen = run_until_reported(pytester.path, args, lambda line: "PASSED" in line and "q0[r0]" in line)
    wait_until(lambda: output_lines(pytester.path) == QUICK, f"Gym scored {QUICK} rollouts")
    output = interrupt(process, seen, timeout=60)
    assert_interrupted(process.returncode, output)
    assert f"{QUICK} of {QUICK + 1} selected rollouts reported ({QUICK} scored, 0 errors)" in output, output[-3000:]
    assert f"1 of {QUICK + 1} selected rollouts never reported" in output, output[-3000:]
    report = json.loads((pytester.path / "report.json").read_text())
    assert sorted(r["task_id"] for r in report["rollouts"]) == [f"q{i}" for i in range(QUICK)]
    (dataset,) = report["datasets"]
    assert (dataset["rollouts"], dataset["scored"], dataset["unreported"]) == (QUICK, QUICK, 1), dataset
    assert dataset["verdict"] == "INCONCLUSIVE", dataset
    properties = junit_suite_properties(pytester.path / "junit.xml")
    assert properties["gym::mcqa.jsonl::rollouts"] == str(QUICK), properties
    assert properties["gym::mcqa.jsonl::unreported"] == "1", properties
    assert gate_case(pytester.path / "junit.xml").find("error") is not None


CRASH_IN_C = """
import os
def pytest_runtest_call(item):
    if item.nodeid.endswith("c[r0]"):
        os._exit(3)
"""


def gate_passed(case: ET.Element) -> bool:
    return not any(case.find(tag) is not None for tag in ("failure", "error", "skipped"))


def test_a_killed_xdist_workers_rollout_counts_and_the_gate_testcase_agrees_with_the_gate(
    pytester: pytest.Pytester, fake_gym: FakeGym
) -> None:
    """The worker running ``c[r0]`` dies after Gym scored c 1.0: the reports count c (they dropped it and judged the
    gate INCONCLUSIVE on 5 of 6 while its ``gym-gate`` testcase passed); the crashed item still fails the session."""
    pytester.makeconftest(CRASH_IN_C)
    rows = [{"id": task, "responses_create_params": {"input": f"Q {task}?"}, "fake": {}} for task in "abcdef"]
    (pytester.path / "mcqa.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    args = [*fake_gym.args, "mcqa.jsonl", "-n", "2", "--gym-min-mean-reward=0.5", "--junitxml=junit.xml"]
    result = pytester.runpytest_subprocess(*args, "--gym-report=report.json")
    assert result.ret == 1, result.stdout.str()[-3000:]
    report = json.loads((pytester.path / "report.json").read_text())
    (c,) = [r for r in report["rollouts"] if r["task_id"] == "c"]
    assert (c["status"], c["reward"]) == ("passed", 1.0), c
    (dataset,) = report["datasets"]
    assert (dataset["rollouts"], dataset["unreported"], dataset["verdict"]) == (6, 0, "PASS"), dataset
    assert "1 other test failed or errored" in report["session"]["reason"], report["session"]
    assert gate_passed(gate_case(pytester.path / "junit.xml"))


METRIC_TEST = """
import pytest


@pytest.mark.gym_rollouts("mcqa.jsonl")
def test_short(gym_rollout):
    gym_rollout.record_metric("short", len(gym_rollout.output_text) < 5)
"""


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["one-process", "xdist"])
def test_a_gym_gate_testcase_never_passes_when_its_gate_does_not(
    pytester: pytest.Pytester, fake_gym: FakeGym, workers: list[str]
) -> None:
    """A custom metric's gate is judged at the session's end, after the ``gym-gate`` item passed on the reward
    gates: its JUnit testcase is a failure when the session's verdict on the dataset is not PASS."""
    pytester.makepyfile(test_short=METRIC_TEST)
    write_dataset(pytester.path, 2, hold=False)
    args = [*fake_gym.args, "mcqa.jsonl", "test_short.py", "--gym-min-metric=short:0.5", "--junitxml=junit.xml"]
    result = pytester.runpytest_subprocess(*args, "--gym-report=report.json", "--gym-min-mean-reward=0.5", *workers)
    assert result.ret == 1, result.stdout.str()[-3000:]
    (dataset,) = json.loads((pytester.path / "report.json").read_text())["datasets"]
    assert dataset["verdict"] == "FAIL", dataset
    case = gate_case(pytester.path / "junit.xml")
    failure = case.find("failure")
    assert failure is not None and "FAIL" in (failure.get("message") or ""), ET.tostring(case)
    suite = ET.parse(pytester.path / "junit.xml").getroot().find("testsuite")
    assert suite is not None and int(suite.get("failures", "0")) >= 1


WAIT_FOR_GYM = """
import time
from pathlib import Path

import pytest


def test_waits_until_gym_scored_every_rollout():
    # pytest runs this before or after the dataset's items, as the command line orders them
    for _ in range(600):
        found = list(Path("runs").glob("*/gym-output/rollouts.jsonl"))
        if found and len(found[0].read_text().splitlines()) == 3:
            return
        time.sleep(0.05)  # polling Gym's output file
    pytest.fail("Gym did not score 3 rollouts")
"""


def test_a_datasets_wall_time_is_gyms_whatever_ran_before_its_items(
    pytester: pytest.Pytester, fake_gym: FakeGym
) -> None:
    """Gym takes >= 0.9 s for the dataset's 3 rollouts (0.3 s each): its wall time says so whether the dataset or a
    test file that waits for Gym's last rollout comes first on the command line (with the test file first, the
    items read rollouts that had landed and the wall time was their few milliseconds)."""
    pytester.makepyfile(test_wait=WAIT_FOR_GYM)
    rows = [{"id": f"t{i}", "responses_create_params": {"input": f"Q{i}?"}, "fake": {"delay": 0.3}} for i in range(3)]
    (pytester.path / "mcqa.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    walls = {}
    for order in (["mcqa.jsonl", "test_wait.py"], ["test_wait.py", "mcqa.jsonl"]):
        for old in (pytester.path / "runs").glob("*/gym-output/rollouts.jsonl"):
            old.unlink()  # (each session makes a run directory of its own; the test file reads the one file)
        args = [*fake_gym.args, *order, "--gym-run-dir=runs", "--gym-report=report.json", "-p", "no:randomly"]
        result = pytester.runpytest_subprocess(*args)
        assert result.ret == 0, result.stdout.str()[-3000:]
        (dataset,) = json.loads((pytester.path / "report.json").read_text())["datasets"]
        walls[order[0]] = dataset["wall_time"]
    assert all(wall >= 0.9 for wall in walls.values()), walls
    assert abs(walls["mcqa.jsonl"] - walls["test_wait.py"]) < 1.0, walls
