"""``--gym-max-error-rate``: a bounded share of rollouts that errored (infrastructure errors, not failed rewards)
is tolerated instead of failing the session on the first one. Sessions against the stand-in ``gym``
(tests/support/fake_gym.py), where 1 rollout of 10 errors."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import jsonschema
import pytest

from pytest_gym_eval.reporting import json_report
from tests.support.fakes import FakeGym
from tests.support.junit import junit_suite_properties, validate_junit


def one_error_in_ten(pytester: pytest.Pytester) -> str:
    """mcqa.jsonl with 10 tasks: j errors (agent_run_error), the other nine pass (reward 1.0)."""
    lines = []
    for task in "abcdefghij":
        fake = {"failure": "agent_run_error"} if task == "j" else {"reward": 1.0}
        lines.append(json.dumps({"id": task, "responses_create_params": {"input": f"Q {task}"}, "fake": fake}))
    (pytester.path / "mcqa.jsonl").write_text("\n".join(lines) + "\n")
    return "mcqa.jsonl"


def run(pytester: pytest.Pytester, fake_gym: FakeGym, *args: str) -> pytest.RunResult:
    outputs = ["--junitxml=junit.xml", "--gym-report=report.json", "-rA"]
    return pytester.runpytest(
        *fake_gym.args, one_error_in_ten(pytester), "--gym-agent=mcqa_simple_agent", *outputs, *args
    )


def report_gate(pytester: pytest.Pytester) -> dict[str, object]:
    report = json.loads((pytester.path / "report.json").read_text())
    jsonschema.validate(report, json_report.schema())
    (dataset,) = report["datasets"]
    (gate,) = [gate for gate in dataset["gates"] if gate["metric"] == "error_rate"]
    return {**gate, "session": report["session"]["exit_status"], "verdict": gate["verdict"]}


def junit_gate(pytester: pytest.Pytester) -> ET.Element:
    validate_junit(pytester.path / "junit.xml")
    cases = {c.get("name"): c for c in ET.parse(pytester.path / "junit.xml").getroot().iter("testcase")}
    return cases["gym-gate"]


def test_one_error_in_ten_passes_a_max_error_rate_of_point_two(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    result = run(pytester, fake_gym, "--gym-max-error-rate=0.2")
    result.assert_outcomes(passed=10, errors=1)  # the errored rollout still errors in pytest: it is no 0 reward
    assert result.ret == 0  # ... but the session's exit status is the error-rate gate's
    result.stdout.fnmatch_lines(["*error rate 0.10 [[]0.02, 0.40[]] <= 0.20: PASS*", "*gym gates: the gate passes*"])
    gate = report_gate(pytester)
    assert gate["verdict"] == "PASS" and gate["estimate"] == pytest.approx(0.1) and gate["n"] == 10
    assert gate["label"] == "error rate <= 0.20" and gate["session"] == 0
    assert junit_gate(pytester).find("failure") is None
    properties = junit_suite_properties(pytester.path / "junit.xml")
    assert properties["gym::mcqa.jsonl::gate.error_rate"] == "PASS" and properties["gym.exit_status"] == "0"


def test_one_error_in_ten_fails_a_max_error_rate_of_point_o_five(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    result = run(pytester, fake_gym, "--gym-max-error-rate=0.05")
    result.assert_outcomes(passed=9, failed=1, errors=1)  # the gym-gate item fails
    assert result.ret == 1
    result.stdout.fnmatch_lines(["*gym gates: FAIL - mcqa.jsonl error rate 0.10 > 0.05*"])
    gate = report_gate(pytester)
    assert gate["verdict"] == "FAIL" and gate["session"] == 1
    failure = junit_gate(pytester).find("failure")
    assert failure is not None and "error rate 0.10 [0.02, 0.40] > 0.05: FAIL" in (failure.get("message") or "")
    assert junit_suite_properties(pytester.path / "junit.xml")["gym::mcqa.jsonl::gate.error_rate"] == "FAIL"


def test_in_bound_mode_the_upper_bound_is_judged(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    """1 error in 10: the Wilson 95% upper bound is 0.40, so a maximum of 0.2 cannot be shown (INCONCLUSIVE, which
    fails), and a maximum of 0.5 is (PASS)."""
    result = run(pytester, fake_gym, "--gym-max-error-rate=0.2", "--gym-gate-on=lower-bound")
    assert result.ret == 1
    result.stdout.fnmatch_lines(["*error rate 0.10 [[]0.02, 0.40[]]: interval straddles 0.20: INCONCLUSIVE*"])
    result = run(pytester, fake_gym, "--gym-max-error-rate=0.5", "--gym-gate-on=lower-bound")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*error rate 0.10 [[]0.02, 0.40[]]: upper bound 0.40 <= 0.50: PASS*"])


def test_without_the_gate_the_error_fails_the_reward_gates(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    """What the gate changes: a reward gate alone is judged on 9 of 10 selected rollouts (INCONCLUSIVE, exit 1);
    with --gym-max-error-rate the reward gate is judged on the scored rollouts, and the errors by the gate."""
    result = run(pytester, fake_gym, "--gym-min-pass-rate=0.8")
    assert result.ret == 1
    result.stdout.fnmatch_lines(["*judged on 9 of 10 selected rollouts*"])
    result = run(pytester, fake_gym, "--gym-min-pass-rate=0.8", "--gym-max-error-rate=0.2")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*pass rate 1.00 [[]*[]] >= 0.80: PASS*", "*error rate 0.10*<= 0.20: PASS*"])


def test_a_dataset_settings_line_and_the_ini_set_it(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    pytester.makeini(
        "[pytest]\ngym_max_error_rate = 0.05\ngym_dataset_settings =\n    mcqa.jsonl: max_error_rate=0.2\n"
    )
    result = run(pytester, fake_gym)
    assert result.ret == 0  # the dataset's own 0.2 beats the ini file's 0.05
    assert report_gate(pytester)["source"] == "dataset settings"
    result = run(pytester, fake_gym, "--gym-max-error-rate=0.05")
    assert result.ret == 1  # the command line beats both


def test_with_gym_adaptive_its_confidence_sequence_stops_the_waves_too(
    pytester: pytest.Pytester, fake_gym: FakeGym
) -> None:
    """12 tasks that always pass and never error: after 2 repeats (24 rollouts) the error rate's confidence sequence
    has an upper bound below 0.5, as the mean reward's has a lower bound above 0.5: both decided, the rest skipped."""
    lines = [{"id": f"t{i}", "responses_create_params": {"input": "q"}, "fake": {"reward": 1.0}} for i in range(12)]
    (pytester.path / "mcqa.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    args = ["--gym-adaptive", "--gym-repeats=8", "--gym-min-mean-reward=0.5", "--gym-max-error-rate=0.5", "-rs"]
    result = pytester.runpytest(*fake_gym.args, "mcqa.jsonl", "--gym-agent=mcqa_simple_agent", *args)
    assert result.ret == 0
    result.assert_outcomes(passed=12 * 2 + 1, skipped=12 * 6)
    result.stdout.fnmatch_lines(
        ["SKIPPED * not needed: *error-rate gate decided PASS after 2 repeats, upper bound 0.* <= 0.50*"]
    )
