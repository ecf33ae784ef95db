"""Tokens, latency and cost: reading Gym's records, summing and ranking them, and carrying them to the summary,
the JSON report and JUnit XML (hand-made records here; real Gym records in the real-Gym and live tiers)."""

from __future__ import annotations

import json
import math
import statistics
from typing import Any

import jsonschema
import pytest

from pytest_gym_eval.outcomes.usage import (
    NO_USAGE,
    Price,
    Usage,
    latency_summary,
    parse_price,
    percentile,
    record_usage,
    token_totals,
    usage_from_properties,
)
from pytest_gym_eval.reporting.json_report import SCHEMA_PATH, build_report
from pytest_gym_eval.reporting.junit import suite_properties
from pytest_gym_eval.reporting.summary import RolloutResult, summarize
from pytest_gym_eval.reporting.terminal import render_summary
from pytest_gym_eval.stats.gates import GateMode


def test_responses_usage_and_gyms_latency_are_read() -> None:
    record = {
        "response": {"usage": {"input_tokens": 172, "output_tokens": 6, "total_tokens": 178}},
        "ng_perf": {"total_latency_ms": 2500.0},
    }
    assert record_usage(record) == Usage(172, 6, 178, 2.5)


def test_chat_layout_and_a_missing_total() -> None:
    assert record_usage({"response": {"usage": {"prompt_tokens": 10, "completion_tokens": 4}}}) == Usage(10, 4, 14)


@pytest.mark.parametrize(
    "record",
    [
        {},
        {"response": None},
        {"response": {"usage": None}},
        {"response": {"usage": {"input_tokens": -1, "output_tokens": "many", "total_tokens": 1.5}}},
        {"response": {"usage": {"input_tokens": True}}, "ng_perf": {"total_latency_ms": float("nan")}},
        {"response": [], "ng_perf": "fast"},
    ],
)
def test_records_without_usable_values_give_no_usage(record: dict[str, Any]) -> None:
    assert record_usage(record) is NO_USAGE


def test_properties_round_trip_as_the_xdist_controller_reads_them() -> None:
    usage = Usage(100, 20, 120, 1.25)
    assert usage_from_properties(dict(usage.properties())) == usage
    assert usage_from_properties(dict(Usage(5, None, None, None).properties())) == Usage(5, None, None, None)
    assert usage_from_properties({"input_tokens": "7", "latency": "n/a"}) == Usage(7, None, None, None)
    assert usage_from_properties({}) is NO_USAGE


def test_token_totals_count_only_rollouts_with_tokens() -> None:
    totals = token_totals([Usage(10, 2, 12), NO_USAGE, Usage(5, None, None, 0.5), Usage(None, None, None, 1.0)])
    assert (totals.input_tokens, totals.output_tokens, totals.total_tokens, totals.rollouts) == (15, 2, 12, 2)


def test_cost_comes_only_from_given_prices() -> None:
    totals = token_totals([Usage(2_000_000, 500_000, 2_500_000)])
    assert totals.cost(None) is None
    assert totals.cost(Price(0.15, 0.60)) == pytest.approx(2 * 0.15 + 0.5 * 0.60)
    assert token_totals([NO_USAGE]).cost(Price(1.0, 1.0)) is None
    assert parse_price("0.15:0.6") == Price(0.15, 0.6)
    for bad in ("1", "a:b", "-1:2", "1:inf"):
        with pytest.raises(ValueError, match="--gym-price-per-mtok"):
            parse_price(bad)


def test_percentiles_interpolate_between_order_statistics() -> None:
    values = [4.0, 1.0, 3.0, 2.0, 10.0]
    # Hyndman-Fan 7: h = (5 - 1) * 0.95 = 3.8 -> x[3] + 0.8 * (x[4] - x[3]) = 4 + 0.8 * 6
    assert percentile(values, 0.95) == pytest.approx(8.8)
    assert percentile(values, 0.95) == pytest.approx(statistics.quantiles(values, n=20, method="inclusive")[-1])
    assert percentile([3.0], 0.95) == 3.0
    assert math.isnan(percentile([], 0.5))
    summary = latency_summary([1.0, 2.0, 3.0, 4.0])
    assert (summary.median, summary.n) == (2.5, 4)
    assert latency_summary([]).n == 0


def result(task: str, reward: float | None, usage: Usage, dataset: str = "d.jsonl") -> RolloutResult:
    status = "error" if reward is None else "passed" if reward >= 1.0 else "failed"
    return RolloutResult(f"{dataset}::{task}[r0]", dataset, task, 0, "agent", status, reward, usage=usage)


RESULTS = [
    result("a", 1.0, Usage(100, 10, 110, 1.0)),
    result("b", 0.0, Usage(200, 30, 230, 3.0)),
    result("c", None, Usage(50, 0, 50)),  # an errored rollout's tokens were spent too
    result("d", 1.0, NO_USAGE),
]


def test_summary_report_and_junit_carry_tokens_latency_and_cost() -> None:
    (summary,) = summarize(RESULTS, thresholds={}, gates={}, mode=GateMode.POINT, price=Price(1.0, 2.0))
    assert (summary.tokens.input_tokens, summary.tokens.output_tokens, summary.tokens.total_tokens) == (350, 40, 390)
    assert summary.tokens.rollouts == 3
    assert (summary.latency.median, summary.latency.n) == (2.0, 2)
    assert summary.cost == pytest.approx(350e-6 + 40 * 2e-6)

    lines = render_summary([summary], verbose=False, width=100)
    assert any(
        line.split() == ["tokens", "390", "total:", "350", "in,", "40", "out,", "over", "3", "rollouts"]
        for line in lines
    ), lines
    assert any(
        line.strip().startswith("latency") and "median 2.0 s, p95 2.9 s over 2 rollouts" in line for line in lines
    )
    assert any(line.strip().startswith("cost") for line in lines)

    report = build_report([summary], RESULTS, {})
    jsonschema.validate(report, json.loads(SCHEMA_PATH.read_text()))
    assert report["datasets"][0]["tokens"] == {"input": 350, "output": 40, "total": 390, "rollouts": 3}
    assert report["datasets"][0]["latency"] == {"median": 2.0, "p95": pytest.approx(2.9), "n": 2}
    assert [r["total_tokens"] for r in report["rollouts"]] == [110, 230, 50, None]
    assert [r["latency"] for r in report["rollouts"]] == [1.0, 3.0, None, None]

    properties = dict(suite_properties([summary], {}))
    assert properties["gym::d.jsonl::input_tokens"] == "350" and properties["gym::d.jsonl::total_tokens"] == "390"
    assert properties["gym::d.jsonl::latency_median"] == "2" and properties["gym::d.jsonl::cost"] == "0.00043"


def test_without_usage_nothing_is_shown_or_claimed() -> None:
    (summary,) = summarize([result("a", 1.0, NO_USAGE)], thresholds={}, gates={}, mode=GateMode.POINT)
    lines = render_summary([summary], verbose=False)
    assert not [line for line in lines if line.strip().startswith(("tokens", "latency", "cost"))]
    assert not [name for name, _ in suite_properties([summary], {}) if "tokens" in name or "latency" in name]
    report = build_report([summary], [result("a", 1.0, NO_USAGE)], {})
    assert report["datasets"][0]["cost"] is None and report["datasets"][0]["latency"]["median"] is None
