"""What the reports hold beside the verdicts, in whole sessions against the stand-in ``gym``: Gym's own figures
(its aggregate metrics file) in the JSON report, the HTML page and the Markdown summary as on the terminal; each test
function's outcome over its rollout (which test failed, on which rollout, why) in the JSON report and on the page."""

from __future__ import annotations

import json
import re

import jsonschema
import pytest

from pytest_gym_eval.reporting.json_report import SCHEMA_PATH
from tests.support.fakes import FakeGym


def write_dataset(pytester: pytest.Pytester, rewards: dict[str, float]) -> None:
    rows = [
        {"id": task, "responses_create_params": {"input": [{"role": "user", "content": "ping"}]}, "fake": {"reward": r}}
        for task, r in rewards.items()
    ]
    (pytester.path / "mcqa.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))


def test_gyms_own_figures_are_in_every_report(
    pytester: pytest.Pytester, fake_gym: FakeGym, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stand-in writes Gym's aggregate metrics (pass@1/accuracy 50.0 for rewards 1 and 0): the terminal showed
    them, the JSON report, the page and the Markdown summary did not."""
    monkeypatch.setenv("FAKE_GYM_AGGREGATE_DELAY", "0")
    write_dataset(pytester, {"ta": 1.0, "tb": 0.0})
    result = pytester.runpytest_subprocess(
        *fake_gym.args, "-p", "no:randomly", "mcqa.jsonl", "--gym-report=r.json", "--gym-html=p.html",
        "--gym-markdown=s.md",
    )  # fmt: skip
    figures = "pass@1/accuracy 50 (agent mcqa_simple_agent, rollouts_aggregate_metrics.json)"
    assert figures in " ".join(result.stdout.str().split()), result.stdout.str()[-2000:]
    report = json.loads((pytester.path / "r.json").read_text())
    jsonschema.validate(report, json.loads(SCHEMA_PATH.read_text()))
    gym = report["datasets"][0]["gym"]
    assert (gym["agent"], gym["key_metrics"], gym["datasets"]) == (
        "mcqa_simple_agent",
        {"pass@1/accuracy": 50.0},
        ["mcqa.jsonl"],
    )
    assert f"| gym's own | {figures} |" in (pytester.path / "s.md").read_text()
    page = (pytester.path / "p.html").read_text(encoding="utf-8")
    row = re.search(r'<tr class="metric" data-metric="gym.key" >(.*?)</tr>', page, re.S)
    assert row and '<td class="value">pass@1/accuracy 50</td>' in row.group(1)


TESTS = """
import pytest


@pytest.mark.gym_rollouts("mcqa.jsonl")
def test_answer(gym_rollout):
    gym_rollout.record_metric("chars", len(gym_rollout.output_text))
    gym_rollout.expect("boxed" in gym_rollout.output_text, "no boxed answer", metric="boxed")
    assert "wrong" not in gym_rollout.output_text, "the answer says wrong"
"""


def test_each_test_functions_outcome_is_in_the_json_report_and_on_the_page(
    pytester: pytest.Pytester, fake_gym: FakeGym
) -> None:
    """Three tasks: q1's answer passes the test, q2's fails a soft expectation (its metric's reason is the
    expectation's message), q3's fails an assertion. Which test failed, on which rollout, and why, with the custom
    metrics each recorded, were in neither the JSON report nor the page."""
    answers = {"q1": "boxed A", "q2": "plain B", "q3": "boxed wrong"}
    rows = [
        {"id": task, "responses_create_params": {"input": f"Q {task}"}, "fake": {"text": text, "reward": 1.0}}
        for task, text in answers.items()
    ]
    (pytester.path / "mcqa.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    pytester.makepyfile(test_answers=TESTS)
    pytester.runpytest_subprocess(
        *fake_gym.args, "--gym-agent=mcqa_simple_agent", "-p", "no:randomly", "test_answers.py",
        "--gym-report=r.json", "--gym-html=p.html",
    )  # fmt: skip
    report = json.loads((pytester.path / "r.json").read_text())
    jsonschema.validate(report, json.loads(SCHEMA_PATH.read_text()))
    tests = {test["task_id"]: test for test in report["tests"]}
    where = {task: (t["nodeid"], t["rollout"], t["dataset"], t["repeat"], t["outcome"]) for task, t in tests.items()}
    assert where == {
        task: (f"test_answers.py::test_answer[{task}-r0]", f"mcqa.jsonl::{task}[r0]", "mcqa.jsonl", 0, outcome)
        for task, outcome in (("q1", "passed"), ("q2", "failed"), ("q3", "failed"))
    }
    assert tests["q1"]["message"] == "" and tests["q1"]["metrics"] == {"boxed": 1.0, "chars": 7.0}
    assert tests["q2"]["message"].startswith("1 soft expectation failed:\n  - no boxed answer")
    assert tests["q2"]["metric_reasons"] == {"boxed": "no boxed answer"} and tests["q2"]["metrics"]["boxed"] == 0.0
    assert tests["q3"]["message"].startswith("AssertionError: the answer says wrong")
    page = (pytester.path / "p.html").read_text(encoding="utf-8")
    block = re.search(r'<details class="card tests" data-count="3" open>.*?</details>', page, re.S)
    assert block, "no test functions block"
    rows = re.findall(r'<tr class="test" data-outcome="(\w+)" data-rollout="([^"]+)">(.*?)</tr>', block.group(0), re.S)
    assert [(outcome, rollout) for outcome, rollout, _ in rows] == [
        ("failed", "mcqa.jsonl::q2[r0]"), ("failed", "mcqa.jsonl::q3[r0]"), ("passed", "mcqa.jsonl::q1[r0]"),
    ]  # fmt: skip
    q2 = rows[0][2]
    assert "no boxed answer" in q2 and "<li>boxed 0.00 — no boxed answer</li>" in q2 and "<li>chars 7.00</li>" in q2
    assert 'class="open-rollout" data-i="' in q2
