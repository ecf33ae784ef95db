"""Each test function's outcome over its rollout (session/item_reports.outcome_of_test) from its phases' reports, and
the same outcomes read back from the JSON report by the html command (a whole session:
tests/plugin/test_report_content_session.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_gym_eval.__main__ import main as cli
from pytest_gym_eval.reporting.json_reading import conclusion_from_report
from pytest_gym_eval.reporting.json_report import build_report, write_report
from pytest_gym_eval.reporting.summary import RolloutResult, TestOutcome, summarize
from pytest_gym_eval.session.item_reports import outcome_of_test as outcome_of
from pytest_gym_eval.stats.gates import GateMode

PROPS = [("gym_rollout", "mcqa.jsonl::q1[r2]"), ("gym_rollout_counted", True)]


def report(when: str, outcome: str, longrepr: object = None, **extra: object) -> pytest.TestReport:
    made = pytest.TestReport(
        "test_x.py::test_a[q1-r2]", ("test_x.py", 1, "test_a"), {}, outcome, longrepr, when,  # type: ignore[arg-type]
        user_properties=[*PROPS, *extra.pop("props", [])],  # type: ignore[list-item]
    )  # fmt: skip
    for key, value in extra.items():
        setattr(made, key, value)
    return made


def run(*reports: pytest.TestReport) -> TestOutcome | None:
    found = None
    for one in reports:
        found = outcome_of(one, found)
    return found


def test_the_first_phase_that_did_not_pass_sets_the_outcome_and_its_message() -> None:
    errored = run(report("setup", "failed", "rollout errored: model_http_429 api_key=sk-abcdefghijklmnop1234"))
    assert errored is not None
    assert (errored.rollout, errored.dataset, errored.task_id, errored.repeat, errored.outcome) == (
        "mcqa.jsonl::q1[r2]", "mcqa.jsonl", "q1", 2, "error",
    )  # fmt: skip
    assert "model_http_429" in errored.message and "sk-abcdefghijklmnop1234" not in errored.message
    skipped = run(report("setup", "passed"), report("call", "skipped", ("test_x.py", 3, "Skipped: no tools")))
    assert skipped is not None and (skipped.outcome, skipped.message) == ("skipped", "no tools")
    xfailed = run(report("setup", "passed"), report("call", "skipped", None, wasxfail="known bad"))
    assert xfailed is not None and (xfailed.outcome, xfailed.message) == ("xfailed", "known bad")
    passed = run(
        report("setup", "passed"),
        report("call", "passed", props=[("gym_metric.terse", 0.0), ("gym_metric_reason.terse", "3 sentences")]),
        report("teardown", "passed", props=[("gym_metric.terse", 0.0), ("gym_metric_reason.terse", "3 sentences")]),
    )
    assert passed is not None and (passed.outcome, passed.message) == ("passed", "")
    assert (passed.metrics, passed.reasons) == ((("terse", 0.0),), (("terse", "3 sentences"),))
    late = run(report("setup", "passed"), report("call", "passed"), report("teardown", "failed", "fixture broke"))
    assert late is not None and (late.outcome, late.message) == ("error", "fixture broke")
    # A dataset's own rollout item, and a test over no rollout, are not test functions over a rollout.
    item = pytest.TestReport("mcqa.jsonl::q1[r0]", ("mcqa.jsonl", 0, "q1"), {}, "passed", None, "call",
                             user_properties=[("task_id", "q1"), ("repeat", 0), ("agent", "a"), *PROPS])  # fmt: skip
    assert outcome_of(item, None) is None
    plain = pytest.TestReport("test_x.py::test_b", ("test_x.py", 1, "test_b"), {}, "failed", "x", "call")
    assert outcome_of(plain, None) is None


def test_the_html_command_shows_the_test_functions_of_the_json_report(tmp_path: Path) -> None:
    result = RolloutResult("mcqa.jsonl::q1[r0]", "mcqa.jsonl", "q1", 0, "a", "passed", 1.0)
    test = TestOutcome("test_x.py::test_a[q1-r0]", result.nodeid, "mcqa.jsonl", "q1", 0, "failed", "AssertionError: no",
                       (("terse", 0.0),), (("terse", "3 sentences"),))  # fmt: skip
    summaries = summarize([result], thresholds={}, gates={}, mode=GateMode.POINT)
    report = build_report(summaries, [result], {}, tests=[test])
    assert conclusion_from_report(json.loads(json.dumps(report)))[0].tests == (test,)
    write_report(tmp_path / "r.json", report)
    assert cli(["html", str(tmp_path / "r.json"), "-o", str(tmp_path / "p.html")]) == 0
    page = (tmp_path / "p.html").read_text(encoding="utf-8")
    assert '<tr class="test" data-outcome="failed" data-rollout="mcqa.jsonl::q1[r0]">' in page
    assert "AssertionError: no" in page and "<li>terse 0.00 — 3 sentences</li>" in page
