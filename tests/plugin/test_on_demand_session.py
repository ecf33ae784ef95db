"""Rollouts on demand: ``gym_run_row`` rolls out a row a test builds itself through the running Gym's environment
server (``POST /run``), without a ``gym eval run``. Against the stand-in ``gym``, whose head server lists one agent
and environment server per environment and answers ``/run`` as the row's ``fake`` object says;
tests/real_gym/test_on_demand_real_gym.py checks real Gym with the replay model."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.children import outcomes
from tests.support.fakes import FakeGym

TESTS = """
import pytest
from pytest_gym_eval import Rollout


def row(**fake):
    return {"responses_create_params": {"input": [{"role": "user", "content": "hi"}]}, "fake": fake}


def test_scored(gym_run_row):
    rollout = gym_run_row(row(reward=1.0))
    assert isinstance(rollout, Rollout) and rollout.reward == 1.0 and rollout.passed
    assert rollout.agent == "mcqa_simple_agent" and rollout.task_id == "on-demand"
    assert rollout.output_text == "fake answer to /env/mcqa/run"


def test_zero_reward_is_a_rollout(gym_run_row):
    rollout = gym_run_row(row(reward=0.0), agent="mcqa_simple_agent")
    assert rollout.status == "failed" and rollout.reward == 0.0


def test_zero_reward_fails_an_assertion(gym_run_row):
    assert gym_run_row(row(reward=0.0)).reward == 1.0


def test_server_error(gym_run_row):
    gym_run_row(row(status=500, body="agent crashed: no recorded answer"))


def test_malformed(gym_run_row):
    gym_run_row(row(status=422, body={"detail": [{"msg": "Field required"}]}))


def test_timeout(gym_run_row):
    gym_run_row(row(delay=2), timeout=0.3)


def test_unknown_agent(gym_run_row):
    gym_run_row(row(), agent="weather_agent")
"""

EXPECTED = {
    "test_rows_on_demand.py::test_scored": "PASSED",
    "test_rows_on_demand.py::test_zero_reward_is_a_rollout": "PASSED",
    "test_rows_on_demand.py::test_zero_reward_fails_an_assertion": "FAILED",
    "test_rows_on_demand.py::test_server_error": "ERROR",
    "test_rows_on_demand.py::test_malformed": "ERROR",
    "test_rows_on_demand.py::test_timeout": "ERROR",
    "test_rows_on_demand.py::test_unknown_agent": "ERROR",
}


REPORTS = ("--gym-report=report.json", "--gym-html=page.html", "--gym-markdown=summary.md")


def run(pytester: pytest.Pytester, fake_gym: FakeGym, *args: str) -> pytest.RunResult:
    common = [*fake_gym.args, "--gym-run-dir=runs", "-rA"]
    return pytester.runpytest_subprocess(*common, *args)


def commands(fake_gym: FakeGym) -> list[list[object]]:
    return [call["argv"][:2] for call in fake_gym.calls()]  # type: ignore[index]


def test_rows_built_in_tests_are_rolled_out_by_a_gym_started_for_them(
    pytester: pytest.Pytester, fake_gym: FakeGym
) -> None:
    """No dataset: Gym starts once for the on-demand tests (with --gym-agent's agent), and no `gym eval run` runs."""
    pytester.makepyfile(test_rows_on_demand=TESTS)
    result = run(pytester, fake_gym, "--gym-agent=mcqa_simple_agent")
    assert outcomes(result) == EXPECTED, result.stdout.str()[-3000:]
    assert commands(fake_gym) == [["env", "start"]]
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*1 failed, 2 passed, 4 errors*"])
    text = result.stdout.str()
    for message in (
        "/env/mcqa/run answered HTTP 500: agent crashed: no recorded answer",
        '/env/mcqa/run answered HTTP 422: {"detail": [{"msg": "Field required"}]}',
        "/env/mcqa/run did not answer within 0.3 s",
        "on-demand rollout: Gym runs no agent 'weather_agent'; it runs 'mcqa_simple_agent'. A session starts the "
        "agents of its selected datasets and --gym-agent's: start this one with --gym-agent=weather_agent (ini "
        "gym_agent), or select a dataset it runs",
    ):
        assert message in text, message


def test_without_an_agent_the_test_errors_saying_what_to_pass(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    pytester.makepyfile(test_rows_on_demand=TESTS)
    result = run(pytester, fake_gym, "-k", "test_scored")
    assert outcomes(result) == {"test_rows_on_demand.py::test_scored": "ERROR"}
    result.stdout.fnmatch_lines(["*the session runs no Gym agent: name the agent with --gym-agent=NAME*"])
    assert commands(fake_gym) == []


def test_under_xdist_every_worker_calls_the_controllers_gym(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    pytester.makepyfile(test_rows_on_demand=TESTS)
    result = run(pytester, fake_gym, "--gym-agent=mcqa_simple_agent", "-n", "2")
    assert outcomes(result) == EXPECTED, result.stdout.str()[-3000:]
    assert commands(fake_gym) == [["env", "start"]]


def test_beside_a_dataset_the_datasets_agent_is_the_default(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    """With a dataset, Gym runs its agent (one `gym eval run` for the dataset) and on-demand rows go to it."""
    Path(pytester.path / "mcqa.jsonl").write_text('{"id": "q1", "responses_create_params": {"input": "Q"}}\n')
    pytester.makepyfile(test_rows_on_demand=TESTS)
    result = run(pytester, fake_gym, "mcqa.jsonl", "test_rows_on_demand.py", "-k", "q1 or test_scored")
    assert outcomes(result) == {"mcqa.jsonl::q1[r0]": "PASSED", "test_rows_on_demand.py::test_scored": "PASSED"}
    assert commands(fake_gym) == [["env", "start"], ["eval", "run"]]


def test_a_warm_gym_serves_on_demand_rows(pytester: pytest.Pytester, fake_gym: FakeGym, warm_registry: Path) -> None:
    pytester.makepyfile(test_rows_on_demand=TESTS)
    args = ["--gym-agent=mcqa_simple_agent", "--gym-keep-alive=600", "-k", "test_scored"]
    first, second = run(pytester, fake_gym, *args), run(pytester, fake_gym, *args)
    assert outcomes(first) == outcomes(second) == {"test_rows_on_demand.py::test_scored": "PASSED"}
    second.stdout.fnmatch_lines(["gym: attached to warm Gym *: no `gym env start`*"])
    assert commands(fake_gym) == [["env", "start"]]


def test_the_sessions_sampling_options_reach_the_row(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    pytester.makepyfile(
        test_sampling="""
def test_sampled(gym_run_row):
    rollout = gym_run_row({"responses_create_params": {"input": "hi", "temperature": 1.0}})
    params = rollout.record["responses_create_params"]
    assert params["temperature"] == 0.0 and params["max_output_tokens"] == 16
"""
    )
    result = run(
        pytester, fake_gym, "--gym-agent=mcqa_simple_agent", "--gym-temperature=0", "--gym-max-output-tokens=16"
    )
    assert outcomes(result) == {"test_sampling.py::test_sampled": "PASSED"}, result.stdout.str()[-3000:]


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["one process", "xdist"])
def test_junit_records_an_on_demand_error_as_an_error(
    pytester: pytest.Pytester, fake_gym: FakeGym, workers: list[str]
) -> None:
    """As a dataset item's infrastructure error: ``<error>`` (with the cause), not ``<failure>``, and the suite counts
    it among ``errors``; an assertion on a reward of 0 stays a ``<failure>``."""
    import xml.etree.ElementTree as ET

    pytester.makepyfile(test_rows_on_demand=TESTS)
    selected = "test_server_error or test_zero_reward_fails_an_assertion or test_scored"
    result = run(pytester, fake_gym, "--gym-agent=mcqa_simple_agent", "--junitxml=j.xml", "-k", selected, *workers)
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()[-3000:]
    suite = ET.parse(pytester.path / "j.xml").getroot().find("testsuite")
    assert suite is not None
    cases = {case.get("name"): [child.tag for child in case] for case in suite.iter("testcase")}
    assert "error" in cases["test_server_error"] and "failure" not in cases["test_server_error"], cases
    assert "failure" in cases["test_zero_reward_fails_an_assertion"], cases
    assert not {"error", "failure"} & set(cases["test_scored"]), cases
    (error,) = suite.iter("error")
    assert "answered HTTP 500: agent crashed: no recorded answer" in (error.text or "") + error.get("message", "")
    assert (suite.get("errors"), suite.get("failures"), suite.get("tests")) == ("1", "1", "3")


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["one process", "xdist"])
def test_a_session_of_on_demand_tests_only_writes_the_reports_it_was_asked_for(
    pytester: pytest.Pytester, fake_gym: FakeGym, workers: list[str]
) -> None:
    """No dataset: the reports hold the run's facts and the session's exit status, and say that on-demand rollouts
    are not counted, as the terminal does."""
    import json

    import jsonschema

    from pytest_gym_eval.reporting.json_report import SCHEMA_PATH

    pytester.makepyfile(test_rows_on_demand=TESTS)
    selected = "test_scored or test_zero_reward_fails_an_assertion"
    result = run(pytester, fake_gym, "--gym-agent=mcqa_simple_agent", "-k", selected, *REPORTS, *workers)
    assert outcomes(result) == {"test_rows_on_demand.py::test_scored": "PASSED",
                                "test_rows_on_demand.py::test_zero_reward_fails_an_assertion": "FAILED"}  # fmt: skip
    report = json.loads((pytester.path / "report.json").read_text())
    jsonschema.validate(report, json.loads(SCHEMA_PATH.read_text()))
    assert (report["datasets"], report["rollouts"]) == ([], [])
    assert report["session"] == {"exit_status": 1, "reason": "pytest: some tests failed or errored"}
    assert report["meta"]["model"] == "replay"
    said = "no dataset rollout was selected: the reward summary, gates and reports count dataset rollouts only"
    assert said in " ".join(line.strip() for line in result.outlines)
    assert said in (pytester.path / "summary.md").read_text().lower()
    assert (pytester.path / "page.html").is_file()
    assert "verifier flips" not in result.stdout.str()


def test_a_session_with_nothing_to_report_says_so(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    """No dataset and no agent: no Gym starts (the tests error saying what to pass), and the reports asked for are
    said not to be written, not left out in silence."""
    pytester.makepyfile(test_rows_on_demand=TESTS)
    result = run(pytester, fake_gym, "-k", "test_scored", *REPORTS)
    assert outcomes(result) == {"test_rows_on_demand.py::test_scored": "ERROR"}
    result.stdout.fnmatch_lines(["gym reports: not written, nothing to report: the session started no Gym (*"
                                 "--gym-agent): *report.json, *page.html, *summary.md"])  # fmt: skip
    assert not [path for path in ("report.json", "page.html", "summary.md") if (pytester.path / path).exists()]
