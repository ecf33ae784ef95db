"""Custom metrics: a test function records a named value for its rollout (``rollout.record_metric``); each
dataset's mean of it, with the mean reward's interval (clustered by task), appears in the terminal summary, the
JSON report, JUnit's suite properties, the HTML page and ``merge``, and ``--gym-min-metric=NAME:BOUND`` decides
the exit status. Against the stand-in ``gym``."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema
import pytest

from pytest_gym_eval.history.backends import open_store
from pytest_gym_eval.reporting.json_report import SCHEMA_PATH
from tests.support.fakes import FakeGym
from tests.support.junit import junit_rollouts, validate_junit

ANSWERS = {"q1": "\\boxed{A}", "q2": "no box here", "q3": "\\boxed{C}"}
"""Two repeats of each (the stand-in answers a task the same each time): ``boxed`` by task 1, 0, 1 (mean 0.67,
standard error 1/3, clipped to [0.00, 1.00]); ``chars`` 9, 11, 9 (mean 9.67, standard error 2/3, half width
t(0.975, 2) * 2/3 = 2.87: [6.80, 12.54]); hand-worked in tests/unit/test_custom_metrics.py."""

BOXED = "0.67 [0.00, 1.00]"
CHARS = "9.67 [6.80, 12.54]"

TESTS = """
import pytest


@pytest.mark.gym_rollouts("mcqa.jsonl", repeats=2, count=True)  # both repeats count, beyond the dataset's 1
def test_shape(gym_rollout):
    gym_rollout.record_metric("boxed", "\\\\boxed{" in gym_rollout.output_text)
    gym_rollout.record_metric("chars", len(gym_rollout.output_text))
"""


def write_dataset(path: Path) -> None:
    rows = []
    for task_id, text in ANSWERS.items():
        fake = {"text": text, "reward": 1.0 if "boxed" in text else 0.0}
        rows.append({"id": task_id, "responses_create_params": {"input": f"Q {task_id}"}, "fake": fake})
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


def run(pytester: pytest.Pytester, fake_gym: FakeGym, *args: str) -> pytest.RunResult:
    write_dataset(pytester.path / "mcqa.jsonl")
    pytester.makepyfile(test_shape=TESTS)
    common = [*fake_gym.args, "--gym-agent=mcqa_simple_agent", "--gym-run-dir=runs", "-p", "no:randomly"]
    return pytester.runpytest_subprocess(*common, "test_shape.py", *args)


def said(result: pytest.RunResult, text: str) -> bool:
    """Whether the output holds ``text``, lines wrapped or not."""
    return text in " ".join(result.stdout.str().split())


def metric_lines(result: pytest.RunResult) -> list[str]:
    return [line.strip() for line in result.outlines if line.strip().startswith("metric ")]


def test_a_metric_appears_with_its_interval_in_every_report(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    result = run(
        pytester,
        fake_gym,
        "--gym-report=r.json",
        "--junitxml=j.xml",
        "--gym-html=p.html",
        "--gym-markdown=s.md",
        "--gym-min-metric=boxed:0.5",
    )
    assert result.ret == 0, result.stdout.str()
    lines = metric_lines(result)
    assert lines[0].split() == ["metric", "boxed", *BOXED.split(), "95%", "CI", "over", "3", "tasks"], lines
    assert lines[1].split()[:5] == ["metric", "chars", *CHARS.split()], lines
    assert said(result, f"metric boxed {BOXED} >= 0.50: PASS")

    report = json.loads((pytester.path / "r.json").read_text())
    jsonschema.validate(report, json.loads(SCHEMA_PATH.read_text()))  # metrics and the custom gate are in the schema
    (dataset,) = report["datasets"]
    boxed, chars = dataset["metrics"]["boxed"], dataset["metrics"]["chars"]
    # the mean reward's task-clustered Clopper-Pearson (values in [0, 1]): n* = 0.415, [1.36e-06, 1 - 1.8e-12]
    # (tests/unit/test_custom_metrics.py works it out; before, the t interval clipped to [0, 1])
    assert (boxed["estimate"], boxed["low"], boxed["high"], boxed["n"]) == pytest.approx((2 / 3, 0.0, 1.0, 3), abs=1e-5)
    assert (chars["estimate"], round(chars["low"], 2), round(chars["high"], 2)) == pytest.approx((29 / 3, 6.80, 12.54))
    assert [g["custom"] for g in dataset["gates"]] == ["boxed"] and dataset["gates"][0]["verdict"] == "PASS"
    by_pair = {(r["task_id"], r["repeat"]): r["metrics"] for r in report["rollouts"]}
    assert by_pair[("q2", 1)] == {"boxed": 0.0, "chars": 11.0} and len(by_pair) == 6

    properties = {
        prop.get("name"): prop.get("value") for prop in ET.parse(pytester.path / "j.xml").getroot().iter("property")
    }
    assert properties["gym::mcqa.jsonl::metric.boxed"] == "0.666667"
    assert (properties["gym::mcqa.jsonl::metric.boxed.low"], properties["gym::mcqa.jsonl::metric.boxed.high"]) == (
        "1.35907e-06",
        "1",
    )
    assert properties["gym::mcqa.jsonl::metric.chars.low"].startswith("6.79")  # 6.7982
    assert properties["gym::mcqa.jsonl::gate.metric.boxed"] == "PASS"
    assert properties["gym::mcqa.jsonl::gate.metric.boxed.threshold"] == "0.5"
    # Each test's own value, on its testcase (xunit2: in its <system-out> line, the file stays valid).
    assert {case["gym_metric.boxed"] for case in junit_rollouts(pytester.path / "j.xml").values()} == {"1.0", "0.0"}
    validate_junit(pytester.path / "j.xml")

    assert f"| metric `boxed` | {BOXED} (95% CI over 3 tasks) |" in (pytester.path / "s.md").read_text()

    page = (pytester.path / "p.html").read_text()
    assert '<tr class="metric" data-metric="metric.boxed" data-estimate="0.6666666666666666"' in page
    assert f'<td class="value">{CHARS}</td>' in page


@pytest.mark.parametrize(
    ("gate", "status", "says"),
    [
        ("boxed:0.5", 0, f"metric boxed {BOXED} >= 0.50: PASS"),
        ("boxed:0.9", 1, f"metric boxed {BOXED} < 0.90: FAIL"),
        ("never:0.1", 1, "metric never n/a (no data), needs >= 0.10: INCONCLUSIVE (no rollout recorded this metric)"),
    ],
)
@pytest.mark.parametrize("workers", [0, 2], ids=["one process", "-n 2"])
def test_the_gate_decides_the_exit_status(
    pytester: pytest.Pytester, fake_gym: FakeGym, gate: str, status: int, says: str, workers: int
) -> None:
    if workers and gate.startswith("never"):
        pytest.skip("the -n 2 runs check pass and fail; no data is the same code")
    result = run(pytester, fake_gym, f"--gym-min-metric={gate}", *(["-n", str(workers)] if workers else []))
    assert result.ret == status, result.stdout.str()
    assert said(result, says), result.stdout.str()
    assert metric_lines(result)[0].split()[2:5] == BOXED.split()  # the controller saw every worker's metrics


def test_a_dataset_setting_and_the_ini_option_set_the_gate(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    pytester.makeini("[pytest]\ngym_dataset_settings =\n    mcqa.jsonl: min_metric=boxed:0.9,chars:5\n")
    result = run(pytester, fake_gym)
    assert result.ret == 1
    assert said(result, f"metric boxed {BOXED} < 0.90: FAIL")
    assert said(result, f"metric chars {CHARS} >= 5.00: PASS")
    pytester.makeini("[pytest]\ngym_min_metric =\n    chars:5\n")
    assert run(pytester, fake_gym).ret == 0


def test_bad_values_and_gates_are_clear_errors(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    pytester.makepyfile(
        test_bad="""
import pytest

@pytest.mark.gym_rollouts("mcqa.jsonl", tasks="q1")
def test_bad(gym_rollout):
    gym_rollout.record_metric("boxed", "yes")
"""
    )
    bad = run(pytester, fake_gym, "test_bad.py")
    bad.stdout.fnmatch_lines(
        ["*TypeError: metric 'boxed': the value must be a finite number (or a bool: 1/0), got str*"]
    )
    usage = run(pytester, fake_gym, "--gym-min-metric=boxed")
    assert usage.ret == pytest.ExitCode.USAGE_ERROR
    usage.stderr.fnmatch_lines(["*--gym-min-metric: invalid metric gate 'boxed': expected NAME:BOUND, e.g. boxed:0.9*"])


def test_merged_shards_carry_the_metric_and_its_gate(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    # The dataset's own items beside the test (a report's plan lists the datasets collected as files).
    gate = ["mcqa.jsonl", "--gym-repeats=2", "--gym-min-metric=boxed:0.5"]
    alone = run(pytester, fake_gym, "--gym-report=alone.json", *gate)
    for shard in (1, 2):
        run(pytester, fake_gym, f"--gym-shard={shard}/2", f"--gym-report=s{shard}.json", *gate)

    def merge(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "pytest_gym_eval", "merge", "s1.json", "s2.json", *args],
            cwd=pytester.path, capture_output=True, text=True, timeout=120,
        )  # fmt: skip

    merged = merge("--gym-report=merged.json")
    assert merged.returncode == 0, merged.stdout + merged.stderr
    assert f"metric boxed {BOXED}" in " ".join(merged.stdout.split()), merged.stdout
    one = json.loads((pytester.path / "alone.json").read_text())["datasets"][0]
    merged_report = json.loads((pytester.path / "merged.json").read_text())
    jsonschema.validate(merged_report, json.loads(SCHEMA_PATH.read_text()))
    assert merged_report["plan"]["datasets"][0]["gates"] == [
        {"metric": "custom", "k": None, "threshold": 0.5, "custom": "boxed", "source": "command line"}
    ]
    both = merged_report["datasets"][0]
    assert both["metrics"] == one["metrics"] and both["gates"] == one["gates"]
    assert alone.ret == 0, alone.stdout.str()  # the gym-gate item leaves the metric's gate to the session's end
    alone.assert_outcomes(passed=11, failed=2)  # 6 tests, 4 items of reward 1 and the gym-gate item; q2's 2 items
    failing = merge("--gym-min-metric=boxed:0.9")
    assert failing.returncode == 1 and f"metric boxed {BOXED} < 0.90: FAIL" in failing.stdout, failing.stdout


def test_under_adaptive_waves_a_metric_gate_is_judged_at_the_end(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    """The waves plan on the reward gates only (a metric comes from tests, after the rollouts); the metric's gate
    is judged on its fixed-sample interval."""
    gates = ["--gym-min-mean-reward=0.5", "--gym-min-metric=boxed:0.5"]
    result = run(pytester, fake_gym, "mcqa.jsonl", "--gym-adaptive", "--gym-repeats=2", *gates)
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str(), result.stderr.str()[-2000:]
    # 3 tasks are too few for the mean reward's confidence sequence; the metric's own gate passes on its estimate.
    assert said(result, "gates 2 judged on the anytime-valid 95% confidence sequence"), result.stdout.str()
    assert said(result, "mean reward 0.67 [0.12, 1.00]: interval straddles 0.50: INCONCLUSIVE")
    assert said(result, f"metric boxed {BOXED} >= 0.50: PASS")
    assert result.ret == 1


def test_the_history_keeps_each_rollouts_metrics(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    history = pytester.path / "gym-history.db"
    result = run(pytester, fake_gym, f"--gym-history={history}")
    assert result.ret == 0, result.stdout.str()
    with open_store(history) as store:
        rollouts = store.rollouts()
    by_pair = {(r.task_id, r.repeat): r.metrics for r in rollouts}
    assert len(by_pair) == 6
    assert by_pair[("q1", 0)] == {"boxed": 1.0, "chars": 9.0}
    assert by_pair[("q2", 1)] == {"boxed": 0.0, "chars": 11.0}


TWO_METRICS = """
import pytest


@pytest.mark.gym_rollouts("mcqa.jsonl", repeats=2)
def test_shape(gym_rollout):
    gym_rollout.record_metric("terse", len(gym_rollout.output_text) < 10)
    gym_rollout.record_metric("n_calls", 3)
"""
"""``terse`` by task 1, 0, 1 (mean 0.67, as ``boxed``), ``n_calls`` 3 everywhere."""
NO_METRIC = """

@pytest.mark.gym_rollouts("other.jsonl")
def test_other(gym_rollout):
    assert gym_rollout.reward is not None
"""
"""A second dataset whose test records no metric."""


def run_two(pytester: pytest.Pytester, fake_gym: FakeGym, *args: str, other: bool = True) -> pytest.RunResult:
    """TWO_METRICS on mcqa.jsonl and, when ``other``, NO_METRIC on other.jsonl."""
    write_dataset(pytester.path / "mcqa.jsonl")
    write_dataset(pytester.path / "other.jsonl")
    pytester.makepyfile(test_shape=TWO_METRICS + (NO_METRIC if other else ""))
    common = [*fake_gym.args, "--gym-agent=mcqa_simple_agent", "--gym-run-dir=runs", "-p", "no:randomly"]
    return pytester.runpytest_subprocess(*common, "test_shape.py", "--gym-report=r.json", *args)


def gates_of(pytester: pytest.Pytester, dataset: str) -> list[dict[str, object]]:
    report = json.loads((pytester.path / "r.json").read_text())
    jsonschema.validate(report, json.loads(SCHEMA_PATH.read_text()))
    (entry,) = [d for d in report["datasets"] if d["dataset"] == dataset]
    return [{key: gate.get(key) for key in ("custom", "source", "verdict")} for gate in entry["gates"]]


def test_a_command_line_gate_never_removes_a_datasets_own_gate(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    """Issue 35: ``--gym-min-metric=n_calls:3`` replaced the dataset's ``min_metric=terse:0.9`` whole (exit 0, the
    terse gate gone from every report). Gates merge by identity; the plan and each gate line say where each came
    from."""
    pytester.makeini("[pytest]\ngym_dataset_settings =\n    mcqa.jsonl: min_metric=terse:0.9\n")
    alone = run_two(pytester, fake_gym, other=False)
    assert alone.ret == 1, alone.stdout.str()
    both = run_two(pytester, fake_gym, "--gym-min-metric=n_calls:3", other=False)
    assert both.ret == 1, both.stdout.str()
    assert said(alone, f"metric terse {BOXED} < 0.90: FAIL (set in gym_dataset_settings)"), alone.stdout.str()
    assert said(both, f"metric terse {BOXED} < 0.90: FAIL (set in gym_dataset_settings)"), both.stdout.str()
    assert said(both, "metric n_calls 3.00 [3.00, 3.00] >= 3.00: PASS (set on the command line)"), both.stdout.str()
    assert gates_of(pytester, "mcqa.jsonl") == [
        {"custom": "n_calls", "source": "command line", "verdict": "PASS"},
        {"custom": "terse", "source": "dataset settings", "verdict": "FAIL"},
    ]
    plan = json.loads((pytester.path / "r.json").read_text())["plan"]
    assert {d["dataset"]: d["gates"] for d in plan["datasets"]}["mcqa.jsonl"] == [
        {"metric": "custom", "k": None, "threshold": 3.0, "custom": "n_calls", "source": "command line"},
        {"metric": "custom", "k": None, "threshold": 0.9, "custom": "terse", "source": "dataset settings"},
    ]
    # The command line's own gate of the same metric still wins over the dataset's.
    stricter = run_two(pytester, fake_gym, "--gym-min-metric=terse:0.5", other=False)
    assert stricter.ret == 0, stricter.stdout.str()
    assert said(stricter, f"metric terse {BOXED} >= 0.50: PASS (set on the command line)"), stricter.stdout.str()


def test_a_session_wide_metric_gate_applies_only_where_the_metric_is_recorded(
    pytester: pytest.Pytester, fake_gym: FakeGym
) -> None:
    """other.jsonl's tests record no metric: ``--gym-min-metric=n_calls:3`` is not applicable there (listed, not
    judged), instead of failing it as INCONCLUSIVE; a dataset's own gate on a metric it never records still is."""
    result = run_two(pytester, fake_gym, "--gym-min-metric=n_calls:3")
    assert result.ret == 0, result.stdout.str()
    assert said(result, "metric n_calls >= 3.00: not applicable: no rollout of this dataset recorded the metric")
    report = json.loads((pytester.path / "r.json").read_text())
    jsonschema.validate(report, json.loads(SCHEMA_PATH.read_text()))
    other = next(d for d in report["datasets"] if d["dataset"] == "other.jsonl")
    assert other["gates"] == [] and other["verdict"] is None
    assert other["gates_not_applicable"] == [
        {"metric": "custom", "k": None, "threshold": 3.0, "custom": "n_calls", "source": "command line"}
    ]
    assert gates_of(pytester, "mcqa.jsonl") == [{"custom": "n_calls", "source": "command line", "verdict": "PASS"}]

    pytester.makeini("[pytest]\ngym_dataset_settings =\n    other.jsonl: min_metric=n_calls:3\n")
    named = run_two(pytester, fake_gym)
    assert named.ret == 1, named.stdout.str()
    assert gates_of(pytester, "other.jsonl") == [
        {"custom": "n_calls", "source": "dataset settings", "verdict": "INCONCLUSIVE"}
    ]


REASON_TESTS = """
import pytest


@pytest.mark.gym_rollouts("mcqa.jsonl")
def test_terse(gym_rollout):
    sentences = gym_rollout.output_text.count(" ") + 1
    gym_rollout.record_metric("terse", sentences == 1, reason=f"{sentences} sentences, not 1")
    assert sentences == 1


@pytest.mark.gym_rollouts("mcqa.jsonl")
def test_boxed(gym_rollout):
    gym_rollout.expect("boxed" in gym_rollout.output_text, "no boxed answer", metric="boxed")
"""


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["one-process", "xdist"])
def test_a_metric_s_reason_shows_in_the_failure_json_junit_and_page(
    pytester: pytest.Pytester, fake_gym: FakeGym, workers: list[str]
) -> None:
    # Issue 39: a metric recorded as 0 said nowhere why, and the page did not show each rollout's value.
    write_dataset(pytester.path / "mcqa.jsonl")
    pytester.makepyfile(test_reason=REASON_TESTS)
    common = [*fake_gym.args, "--gym-agent=mcqa_simple_agent", "--gym-run-dir=runs", "-p", "no:randomly"]
    result = pytester.runpytest_subprocess(
        *common, "test_reason.py", "--gym-report=r.json", "--junitxml=j.xml", "--gym-html=p.html", *workers
    )
    out = result.stdout.str()
    # q2 answers "no box here": 3 words. Both failures list the metrics with their reasons.
    assert "metrics:\n  terse = 0 (3 sentences, not 1)" in out, out
    assert "1 soft expectation failed:\n  - no boxed answer\nmetrics:\n  boxed = 0 (no boxed answer)" in out, out

    report = json.loads((pytester.path / "r.json").read_text())
    jsonschema.validate(report, json.loads(SCHEMA_PATH.read_text()))
    (q2,) = [r for r in report["rollouts"] if r["task_id"] == "q2"]
    assert q2["metrics"] == {"boxed": 0.0, "terse": 0.0}
    assert q2["metric_reasons"] == {"boxed": "no boxed answer", "terse": "3 sentences, not 1"}
    (q1,) = [r for r in report["rollouts"] if r["task_id"] == "q1"]
    assert q1["metric_reasons"] == {"terse": "1 sentences, not 1"} and q1["metrics"]["terse"] == 1.0

    cases = junit_rollouts(pytester.path / "j.xml")
    (terse,) = [case for name, case in cases.items() if name.startswith("test_terse") and "q2" in name]
    assert terse["gym_metric_reason.terse"] == "3 sentences, not 1"
    failures = {
        case.get("name"): (case.find("failure").text or "")  # type: ignore[union-attr]
        for case in ET.parse(pytester.path / "j.xml").getroot().iter("testcase")
        if case.find("failure") is not None
    }
    assert any("terse = 0 (3 sentences, not 1)" in text for text in failures.values()), failures
    validate_junit(pytester.path / "j.xml")

    page = (pytester.path / "p.html").read_text()
    data = json.loads(page.split('id="gym-data">', 1)[1].split("</script>", 1)[0])
    by_node = {row[0]: row for row in data["rollouts"]}
    assert by_node[q2["nodeid"]][9] == [["boxed", 0.0, "no boxed answer"], ["terse", 0.0, "3 sentences, not 1"]]


def test_a_gate_item_runs_last_and_the_terminal_names_a_gate_the_session_failed_after_it_passed(
    pytester: pytest.Pytester, fake_gym: FakeGym
) -> None:
    # The dataset named first: its gym-gate item ran before the test functions that record the metric, could not
    # judge the metric's gate, and pytest counted it passed, while the session's end failed that gate.
    write_dataset(pytester.path / "mcqa.jsonl")
    pytester.makepyfile(test_shape=TESTS)
    common = [*fake_gym.args, "--gym-agent=mcqa_simple_agent", "--gym-run-dir=runs", "-p", "no:randomly", "-v"]
    result = pytester.runpytest_subprocess(*common, "mcqa.jsonl", "test_shape.py", "--gym-min-metric=boxed:0.9")
    assert result.ret == 1, result.stdout.str()
    ran = [line.split()[0] for line in result.outlines if re.match(r"\S+::\S+ (PASSED|FAILED)", line)]
    assert ran[-1] == "mcqa.jsonl::gym-gate" and len(ran) == 10, ran  # after every rollout and test function
    assert said(
        result,
        "gym gates: mcqa.jsonl::gym-gate is counted PASSED above, but the session's end failed its gates",
    ), result.stdout.str()
    assert said(result, "metric boxed 0.67 [0.00, 1.00] < 0.90: FAIL"), result.stdout.str()
