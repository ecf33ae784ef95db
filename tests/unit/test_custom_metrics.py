"""Custom metrics (``rollout.record_metric``): the name and value rules, each dataset's mean with the mean reward's
interval (clustered by task, hand-worked here), the ``--gym-min-metric`` gate, how the results collector takes
metrics from test reports, and the JSON report's round trip."""

from __future__ import annotations

import math
from dataclasses import replace
from fractions import Fraction
from statistics import NormalDist
from types import SimpleNamespace

import pytest

from pytest_gym_eval.outcomes.custom_metrics import (
    REASON_LIMIT,
    check_name,
    metric_reason,
    metric_value,
    metrics_of,
    metrics_text,
    parse_bound,
    property_name,
    reason_property_name,
    reasons_of,
)
from pytest_gym_eval.outcomes.rollout import Rollout
from pytest_gym_eval.reporting import json_reading, json_report, page_data, shard_report
from pytest_gym_eval.reporting.summary import RolloutResult, summarize
from pytest_gym_eval.reporting.verdicts import session_verdict
from pytest_gym_eval.session.results import ResultsCollector
from pytest_gym_eval.stats.gates import (
    NOT_RECORDED,
    Gate,
    GateMode,
    Verdict,
    custom_interval,
    evaluate,
    metric_interval,
)
from pytest_gym_eval.stats.intervals import clopper_pearson_bounds, clustered_proportion_interval

# t quantile of 0.975 on 2 degrees of freedom (tables: 4.302653).
T_2 = 4.302652729911275


@pytest.mark.parametrize(
    ("value", "expected"), [(1, 1.0), (0.25, 0.25), (True, 1.0), (False, 0.0), (Fraction(1, 4), 0.25), (-3, -3.0)]
)
def test_a_value_is_a_finite_number_or_a_bool(value: object, expected: float) -> None:
    assert metric_value("m", value) == expected


@pytest.mark.parametrize(
    ("value", "error", "match"),
    [
        ("1.0", TypeError, "metric 'm': the value must be a finite number .*str '1.0'"),
        (None, TypeError, "NoneType"),
        ([1], TypeError, "list"),
        (math.nan, ValueError, "finite number, got nan"),
        (math.inf, ValueError, "finite number, got inf"),
    ],
)
def test_a_bad_value_is_a_clear_error(value: object, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        metric_value("m", value)


@pytest.mark.parametrize("name", ["boxed", "_x", "len.chars", "a-b_2"])
def test_good_names(name: str) -> None:
    assert check_name(name) == name


@pytest.mark.parametrize("name", ["", "1st", "a b", "a:b", "x" * 65, "é"])
def test_bad_names(name: str) -> None:
    with pytest.raises(ValueError, match="invalid metric name"):
        check_name(name)
    with pytest.raises(TypeError, match="must be a string"):
        check_name(3)


def test_parse_bound() -> None:
    assert parse_bound("boxed:0.9") == ("boxed", 0.9)
    assert parse_bound(" chars : -12 ") == ("chars", -12.0)
    for text, match in [
        ("boxed", "expected NAME:BOUND"),
        (":0.5", "expected NAME:BOUND"),
        ("boxed:high", "BOUND must be a number"),
        ("boxed:inf", "finite"),
        ("a b:1", "invalid metric name"),
    ]:
        with pytest.raises(ValueError, match=match):
            parse_bound(text)


def test_the_interval_is_the_mean_rewards_clustered_by_task() -> None:
    # Per-task values 1, 0, 1 (two repeats each): mean 2/3; per-task means 1, 0, 1 have sd sqrt(1/3), so the
    # standard error is sqrt(1/3)/sqrt(3) = 1/3; every value in [0, 1]: the mean reward's task-clustered
    # Clopper-Pearson interval, n_eff = (2/3)(1/3) / (1/9) = 2, n* = 2 (1.959964 / 4.302653)^2 = 0.415005.
    values = [[1.0, 1.0], [0.0, 0.0], [1.0, 1.0]]
    boxed = custom_interval(values)
    assert boxed == clustered_proportion_interval(values) == metric_interval("mean_reward", values, [])
    n_star = 2 * (NormalDist().inv_cdf(0.975) / T_2) ** 2
    assert n_star == pytest.approx(0.415005, abs=1e-6)
    assert (boxed.low, boxed.high) == pytest.approx(clopper_pearson_bounds(2 / 3 * n_star, n_star), abs=1e-12)
    assert boxed.estimate == pytest.approx(2 / 3) and boxed.n == 3
    # Values outside [0, 1] are not clipped: chars 9, 11, 9 → mean 29/3, standard error sqrt(4/3)/sqrt(3) = 2/3.
    chars = custom_interval([[9.0, 9.0], [11.0, 11.0], [9.0, 9.0]])
    assert (chars.estimate, chars.low, chars.high) == pytest.approx(
        (29 / 3, 29 / 3 - 2 * T_2 / 3, 29 / 3 + 2 * T_2 / 3)
    )
    # One task: the mean, no interval (the rollouts of a task are not independent).
    one = custom_interval([[0.5, 1.0]])
    assert (one.estimate, one.low, one.high, one.n) == (0.75, -math.inf, math.inf, 1)


def test_a_metric_every_rollout_scored_1_is_not_certain() -> None:
    # 12 tasks x 4 repeats all 1: the t interval was [1, 1] (a PASS at any bound); the 48 rollouts bound it as
    # they bound the mean reward: n* = 48 (1.959964 / 2.200985)^2 = 38.06, lower bound 0.025^(1/n*) = 0.907633.
    ones = custom_interval([[1.0] * 4 for _ in range(12)])
    assert (ones.estimate, ones.high) == (1.0, 1.0)
    assert ones.low == pytest.approx(0.9076330964290057, abs=1e-10)
    (result,) = evaluate([Gate("custom", 0.95, custom="ok")], [], [], GateMode.LOWER_BOUND, custom={"ok": ones})
    assert result.verdict is Verdict.INCONCLUSIVE


def test_the_gate_follows_the_mean_reward_gates_rules() -> None:
    boxed = {"boxed": custom_interval([[1.0, 1.0], [0.0, 0.0], [1.0, 1.0]])}  # 0.67 [0.00, 1.00]

    def verdict(threshold: float, mode: GateMode) -> Verdict:
        (result,) = evaluate([Gate("custom", threshold, custom="boxed")], [], [], mode, custom=boxed)
        return result.verdict

    assert verdict(0.5, GateMode.POINT) is Verdict.PASS
    assert verdict(0.9, GateMode.POINT) is Verdict.FAIL
    assert verdict(0.5, GateMode.LOWER_BOUND) is Verdict.INCONCLUSIVE  # [0.00, 1.00] straddles 0.5
    (unknown,) = evaluate([Gate("custom", 0.5, custom="other")], [], [], GateMode.POINT, custom=boxed)
    assert unknown.verdict is Verdict.INCONCLUSIVE and unknown.note == NOT_RECORDED
    assert not unknown.passed(inconclusive_passes=True)  # no data never passes
    assert "metric other n/a (no data), needs >= 0.50: INCONCLUSIVE (no rollout recorded" in unknown.describe()


def test_gate_arguments() -> None:
    assert Gate("custom", -5.0, custom="chars").label == "metric chars >= -5.00"  # any scale
    with pytest.raises(ValueError, match="custom"):
        Gate("custom", 0.5)
    with pytest.raises(ValueError, match="custom"):
        Gate("mean_reward", 0.5, custom="boxed")


def result(task: str, repeat: int, reward: float, **metrics: float) -> RolloutResult:
    status = "passed" if reward >= 1.0 else "failed"
    return RolloutResult(
        f"d.jsonl::{task}[r{repeat}]", "d.jsonl", task, repeat, "a", status, reward, metrics=tuple(metrics.items())
    )


RESULTS = [
    result("q1", 0, 1.0, boxed=1.0),
    result("q1", 1, 1.0, boxed=1.0),
    result("q2", 0, 0.0, boxed=0.0),
    result("q2", 1, 0.0),  # no test recorded it for this rollout: left out of the metric
    result("q3", 0, 1.0, boxed=1.0),
    result("q3", 1, 1.0, boxed=0.0),
]


def test_each_dataset_summary_carries_its_metrics_and_their_gates() -> None:
    gates = {"d.jsonl": [Gate("mean_reward", 0.5), Gate("custom", 0.9, custom="boxed")]}
    (summary,) = summarize(RESULTS, thresholds={}, gates=gates, mode=GateMode.POINT)
    # boxed by task: [1, 1], [0], [1, 0] → mean 3/5 over the 5 rollouts that recorded it.
    assert summary.metrics["boxed"].estimate == pytest.approx(3 / 5)
    assert summary.metrics["boxed"].n == 3
    assert [r.verdict for r in summary.gates] == [Verdict.PASS, Verdict.FAIL]  # mean reward 4/6 passes
    status, reason = session_verdict([summary], inconclusive_passes=False)
    assert status == 1 and "metric boxed 0.60" in reason, reason


def test_a_metric_gate_on_a_cut_short_session_is_at_best_inconclusive() -> None:
    gates = {"d.jsonl": [Gate("custom", 0.5, custom="boxed")]}
    (summary,) = summarize(RESULTS, thresholds={}, gates=gates, mode=GateMode.POINT, selected={"d.jsonl": {"a": 8}})
    (gate,) = summary.gates
    assert gate.verdict is Verdict.INCONCLUSIVE and "judged on 6 of 8" in gate.note


def report(nodeid: str, when: str, props: list[tuple[str, object]]) -> SimpleNamespace:
    return SimpleNamespace(
        nodeid=nodeid, when=when, user_properties=props, passed=True, failed=False, skipped=False, start=1.0, stop=2.0
    )


def test_the_collector_takes_metrics_from_test_reports() -> None:
    collector = ResultsCollector()
    pair = [("gym_rollout", "d.jsonl::q1[r0]"), ("gym_rollout_status", "passed"), ("gym_rollout_agent", "a")]
    pair += [("reward", 1.0)]
    collector.pytest_runtest_logreport(report("t.py::test_a[q1-r0]", "setup", pair))  # type: ignore[arg-type]
    recorded = [*pair, (property_name("boxed"), 0.0), (property_name("boxed"), 1.0)]  # recorded again: replaced
    collector.pytest_runtest_logreport(report("t.py::test_a[q1-r0]", "call", recorded))  # type: ignore[arg-type]
    other = [*pair, (property_name("boxed"), 0.0), (property_name("chars"), 9)]
    collector.pytest_runtest_logreport(report("t.py::test_b[q1-r0]", "call", other))  # type: ignore[arg-type]
    (rollout,) = collector.rollouts()
    # test_a's last boxed (1.0) and test_b's (0.0): their mean.
    assert rollout.nodeid == "d.jsonl::q1[r0]" and rollout.metrics == (("boxed", 0.5), ("chars", 9.0))


def test_metrics_of_skips_what_is_no_metric() -> None:
    props = [("reward", 1.0), (property_name("ok"), 2), (property_name("bad"), "x"), (property_name("1st"), 1)]
    assert metrics_of(props) == {"ok": 2.0}


def test_the_json_report_round_trips_the_metrics() -> None:
    gates = {"d.jsonl": [Gate("custom", 0.5, custom="boxed")]}
    (summary,) = summarize(RESULTS, thresholds={}, gates=gates, mode=GateMode.POINT)
    written = json_report.build_report([summary], RESULTS, {})
    assert written["datasets"][0]["metrics"]["boxed"]["estimate"] == pytest.approx(0.6)
    assert written["datasets"][0]["gates"][0]["custom"] == "boxed"
    assert written["rollouts"][0]["metrics"] == {"boxed": 1.0} and "metrics" not in written["rollouts"][3]
    conclusion, results = json_reading.conclusion_from_report(written)
    assert results == RESULTS
    assert conclusion.summaries[0].metrics == summary.metrics
    assert conclusion.summaries[0].gates[0].gate == Gate("custom", 0.5, custom="boxed")


def test_record_metric() -> None:
    sent: list[tuple[str, float]] = []
    rollout = Rollout.from_record({}, task_id="q1", repeat=0, status="passed", reward=1.0)
    with pytest.raises(RuntimeError, match="did not come from the gym_rollout fixture"):
        rollout.record_metric("boxed", 1.0)
    import dataclasses

    given = dataclasses.replace(rollout, recorder=lambda name, value, reason: sent.append((name, value)))
    given.record_metric("boxed", True)
    given.record_metric("chars", 9)
    assert sent == [("boxed", 1.0), ("chars", 9.0)] and given.metrics == {"boxed": 1.0, "chars": 9.0}
    with pytest.raises(TypeError, match="metric 'boxed'"):
        given.record_metric("boxed", "yes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="invalid metric name"):
        given.record_metric("a b", 1.0)
    assert len(sent) == 2  # nothing sent for a bad one


def test_a_soft_expectation_notes_a_failure_and_records_its_metric() -> None:
    recorded: list[tuple[str, float]] = []
    failed: list[str] = []
    rollout = Rollout.from_record({}, task_id="t", repeat=0, status="passed", reward=1.0)
    bound = replace(
        rollout, recorder=lambda name, value, reason: recorded.append((name, value)), failed_expectations=failed
    )
    assert bound.expect(1 + 1 == 2, "arithmetic", metric="sane") is True
    assert bound.expect([], "empty is false", metric="nonempty") is False
    assert bound.expect(0) is False
    assert failed == ["empty is false", "expectation failed"]
    assert recorded == [("sane", 1.0), ("nonempty", 0.0)] and bound.metrics == {"sane": 1.0, "nonempty": 0.0}
    # Outside a gym_rollout test nothing would fail the test later: it is an assertion at once.
    with pytest.raises(AssertionError, match="at once"):
        rollout.expect(False, "at once")


# --- Reasons: why a metric has its value (issue 39) --------------------------------------------------------


def test_a_reason_is_a_short_clean_string() -> None:
    assert metric_reason("terse", "  3 sentences,\nnot 1\t\x1b[31m ") == "3 sentences, not 1 [31m"
    long = metric_reason("terse", "x" * 1000)
    assert len(long) == REASON_LIMIT and long.endswith("…")
    with pytest.raises(TypeError, match="metric 'terse': the reason must be a string, got int 3"):
        metric_reason("terse", 3)


def test_reasons_travel_as_sibling_properties() -> None:
    props = [
        (property_name("terse"), 0.0),
        (reason_property_name("terse"), "3 sentences, not 1"),
        (property_name("boxed"), 1.0),
        (reason_property_name("boxed"), "had one"),
        (reason_property_name("boxed"), ""),  # recorded again without a reason: taken back
        (reason_property_name("bad name"), "x"),
        (reason_property_name("odd"), 5),
    ]
    assert reasons_of(props) == {"terse": "3 sentences, not 1"}
    text = metrics_text(metrics_of(props), reasons_of(props))
    assert text == "metrics:\n  boxed = 1\n  terse = 0 (3 sentences, not 1)"
    assert metrics_text({}, {}) is None


def test_record_metric_sends_its_reason() -> None:
    sent: list[tuple[str, float, str | None]] = []
    rollout = Rollout.from_record({}, task_id="q1", repeat=0, status="passed", reward=1.0)
    given = replace(rollout, recorder=lambda name, value, reason: sent.append((name, value, reason)))
    given.record_metric("terse", 0, reason="3 sentences,\nnot 1")
    given.record_metric("boxed", 1.0)
    assert given.metric_reasons == {"terse": "3 sentences, not 1"}
    given.record_metric("terse", 1)  # again, without a reason: the old one no longer holds
    assert sent == [("terse", 0.0, "3 sentences, not 1"), ("boxed", 1.0, None), ("terse", 1.0, "")]
    assert given.metric_reasons == {}
    with pytest.raises(TypeError, match="reason must be a string"):
        given.record_metric("terse", 0, reason=3)  # type: ignore[arg-type]
    assert len(sent) == 3  # nothing sent for a bad reason


def test_a_failed_expectation_gives_its_metric_its_message_as_reason() -> None:
    sent: list[tuple[str, float, str | None]] = []
    rollout = Rollout.from_record({}, task_id="t", repeat=0, status="passed", reward=1.0)
    bound = replace(
        rollout, recorder=lambda name, value, reason: sent.append((name, value, reason)), failed_expectations=[]
    )
    bound.expect(True, "no boxed answer", metric="boxed")
    bound.expect(False, "no boxed answer", metric="boxed2")
    bound.expect(False, metric="bare")
    bound.expect(False, "too long", metric="terse", reason="3 sentences, not 1")
    assert sent == [
        ("boxed", 1.0, None),
        ("boxed2", 0.0, "no boxed answer"),
        ("bare", 0.0, "expectation failed"),
        ("terse", 0.0, "3 sentences, not 1"),
    ]


def test_the_collector_takes_reasons_with_the_metrics() -> None:
    collector = ResultsCollector()
    pair = [("gym_rollout", "d.jsonl::q1[r0]"), ("gym_rollout_status", "passed"), ("gym_rollout_agent", "a")]
    pair += [("reward", 1.0)]
    collector.pytest_runtest_logreport(report("t.py::test_a[q1-r0]", "setup", pair))  # type: ignore[arg-type]
    a = [*pair, (property_name("terse"), 0.0), (reason_property_name("terse"), "3 sentences, not 1")]
    collector.pytest_runtest_logreport(report("t.py::test_a[q1-r0]", "call", a))  # type: ignore[arg-type]
    b = [*pair, (property_name("terse"), 0.0), (reason_property_name("terse"), "a list, not a sentence")]
    b += [(property_name("boxed"), 1.0)]
    collector.pytest_runtest_logreport(report("t.py::test_b[q1-r0]", "call", b))  # type: ignore[arg-type]
    (rollout,) = collector.rollouts()
    assert rollout.metrics == (("boxed", 1.0), ("terse", 0.0))
    assert rollout.metric_reasons == (("terse", "3 sentences, not 1; a list, not a sentence"),)


def test_the_json_report_round_trips_the_reasons() -> None:
    results = [
        replace(RESULTS[2], metric_reasons=(("boxed", "no \\boxed{} in the answer"),)),
        RESULTS[0],
    ]
    (summary,) = summarize(results, thresholds={}, gates={}, mode=GateMode.POINT)
    written = json_report.build_report([summary], results, {})
    assert written["rollouts"][0]["metric_reasons"] == {"boxed": "no \\boxed{} in the answer"}
    assert "metric_reasons" not in written["rollouts"][1]
    import jsonschema

    jsonschema.validate(written, __import__("json").loads(json_report.SCHEMA_PATH.read_text()))
    assert json_reading.conclusion_from_report(written)[1] == results  # what `html` reads back
    merged = shard_report.rollout_result(
        written["rollouts"][0], SimpleNamespace(label="a.json"), 0
    )  # what `merge` reads
    assert merged.metric_reasons == (("boxed", "no \\boxed{} in the answer"),)
    with pytest.raises(shard_report.MergeError, match="reason of metric 'boxed'"):
        shard_report.rollout_result(
            {**written["rollouts"][0], "metric_reasons": {"boxed": 3}}, SimpleNamespace(label="a.json"), 0
        )


def test_the_page_shows_each_rollouts_metrics_and_reasons() -> None:
    results = [replace(RESULTS[2], metric_reasons=(("boxed", "no boxed answer"),)), RESULTS[0], RESULTS[3]]
    (summary,) = summarize(results, thresholds={}, gates={}, mode=GateMode.POINT)
    conclusion = json_reading.conclusion_from_report(json_report.build_report([summary], results, {}))[0]
    rows = page_data.page_data(conclusion, results)["rollouts"]
    assert rows[0][9] == [["boxed", 0.0, "no boxed answer"]]
    assert rows[1][9] == [["boxed", 1.0, None]]
    assert rows[2][9] is None  # recorded no metric
