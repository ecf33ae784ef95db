"""Both policies' tokens and latency in a comparison of policy models (pytest_gym_eval/reporting/policies.py
``paired_usage``, usage.py ``SideUsage``/``ratio``) and their terminal, JSON, JUnit and HTML forms (the comparison
itself: tests/unit/test_policy_comparisons.py; a whole session: tests/plugin/test_policies_session.py)."""

from __future__ import annotations

import json
import math

import jsonschema
import pytest

from pytest_gym_eval.outcomes.usage import SideUsage, TokenTotals, Usage, ratio
from pytest_gym_eval.reporting.conclusion import PolicyComparison
from pytest_gym_eval.reporting.json_report import SCHEMA_PATH, build_report
from pytest_gym_eval.reporting.junit import comparison_properties
from pytest_gym_eval.reporting.policies import compare_policies, paired_usage
from pytest_gym_eval.reporting.policies_page import policies_section
from pytest_gym_eval.reporting.summary import RolloutResult
from pytest_gym_eval.reporting.terminal import render_policies

AGENTS = {"base": "mcqa_simple_agent", "cand": "mcqa_simple_agent__cand"}
PREFIX = "gym::mcqa.jsonl::compare.cand."


def rollout(policy: str, task: str, reward: float | None, usage: Usage) -> RolloutResult:
    status = "error" if reward is None else "passed" if reward >= 1.0 else "failed"
    return RolloutResult(
        f"mcqa.jsonl::{task}[r0-{policy}]", "mcqa.jsonl", task, 0, AGENTS[policy], status, reward, usage=usage
    )


def usage(output: int, latency: float | None = None) -> Usage:
    return Usage(100, output, 100 + output, latency)


def recorded() -> PolicyComparison:
    """Pairs ta, tb, tc. Baseline: 100 in each, out 20, 40, 60 (totals 120, 140, 160), latencies 1, 2, 4 s;
    candidate: out 80, 100, 120 (totals 180, 200, 220), latencies 2, 3, 5 s. td (the baseline errored) and te (only
    the baseline ran it) are no pair, so their tokens are left out although the errored call was made."""
    results = [
        rollout("base", "ta", 1.0, usage(20, 1.0)),
        rollout("cand", "ta", 1.0, usage(80, 2.0)),
        rollout("base", "tb", 0.0, usage(40, 2.0)),
        rollout("cand", "tb", 1.0, usage(100, 3.0)),
        rollout("base", "tc", 1.0, usage(60, 4.0)),
        rollout("cand", "tc", 0.0, usage(120, 5.0)),
        rollout("base", "td", None, usage(900, 9.0)),
        rollout("cand", "td", 1.0, usage(900, 9.0)),
        rollout("base", "te", 1.0, usage(500, 9.0)),
    ]
    (item,) = compare_policies(results, ["base", "cand"])
    return item


def test_each_side_is_summed_and_ranked_over_the_pairs_only() -> None:
    """Tokens: baseline 300 in, 120 out, 420 total over 3 rollouts = 140 a rollout; candidate 300, 300, 600 = 200 a
    rollout; ratio 200 / 140 = 10/7. Latency (percentile definition 7, h = (3 - 1) 0.95 = 1.9): baseline median 2,
    p95 2 + 0.9 (4 - 2) = 3.8; candidate median 3, p95 3 + 0.9 (5 - 3) = 4.8; ratio of medians 3 / 2 = 1.5."""
    item = recorded()
    base, cand = item.baseline_usage, item.candidate_usage
    assert item.comparison.difference.pairs == 3
    assert base.tokens == TokenTotals(300, 120, 420, rollouts=3)
    assert cand.tokens == TokenTotals(300, 300, 600, rollouts=3)
    assert (base.tokens_per_rollout, cand.tokens_per_rollout) == (140.0, 200.0)
    assert (base.latency.median, base.latency.n) == (2.0, 3) and base.latency.p95 == pytest.approx(3.8)
    assert (cand.latency.median, cand.latency.n) == (3.0, 3) and cand.latency.p95 == pytest.approx(4.8)
    assert ratio(cand.tokens_per_rollout, base.tokens_per_rollout) == pytest.approx(10 / 7)
    assert ratio(cand.latency.median, base.latency.median) == 1.5


def test_paired_usage_without_a_shared_key_is_empty() -> None:
    base = {("ta", 0): rollout("base", "ta", 1.0, usage(20, 1.0))}
    cand = {("tb", 0): rollout("cand", "tb", 1.0, usage(80, 2.0))}
    empty_base, empty_cand = paired_usage(base, cand)
    assert not empty_base.recorded and not empty_cand.recorded
    assert empty_base.tokens_per_rollout is None and math.isnan(empty_base.latency.median)


@pytest.mark.parametrize(
    ("candidate", "baseline", "expected"),
    [(3.0, 2.0, 1.5), (0.0, 2.0, 0.0), (3.0, 0.0, None), (None, 2.0, None), (3.0, None, None), (math.nan, 2.0, None)],
)
def test_ratio_only_where_it_makes_sense(
    candidate: float | None, baseline: float | None, expected: float | None
) -> None:
    assert ratio(candidate, baseline) == expected


def test_terminal_json_junit_and_page_show_both_sides_and_the_ratio() -> None:
    item = recorded()
    lines = render_policies([item], width=120)
    tokens = next(line for line in lines if line.strip().startswith("tokens"))
    latency = next(line for line in lines if line.strip().startswith("latency"))
    assert tokens.split(None, 1)[1] == "420 base, 600 cand; 140, 200 per rollout (x1.43)"
    assert latency.split(None, 1)[1] == "median 2.0 s base, 3.0 s cand (x1.50); p95 3.8 s, 4.8 s"
    assert all(len(line) <= 60 for line in render_policies([item], width=60))

    report = build_report([], [], {}, comparisons=[item])
    jsonschema.validate(report, json.loads(SCHEMA_PATH.read_text()))
    entry = report["comparisons"][0]["usage"]
    assert entry["baseline"]["tokens"] == {
        "input": 300,
        "output": 120,
        "total": 420,
        "rollouts": 3,
        "per_rollout": 140.0,
    }
    assert entry["candidate"]["latency"]["median"] == 3.0 and entry["candidate"]["latency"]["n"] == 3
    assert entry["ratio"]["latency_median"] == 1.5
    assert entry["ratio"]["tokens_per_rollout"] == pytest.approx(10 / 7)

    properties = dict(comparison_properties(item))
    assert properties[PREFIX + "baseline.total_tokens"] == "420"
    assert properties[PREFIX + "candidate.tokens_per_rollout"] == "200"
    assert properties[PREFIX + "baseline.latency_p95"] == "3.8"
    assert properties[PREFIX + "ratio.latency_median"] == "1.5"
    assert properties[PREFIX + "ratio.tokens_per_rollout"] == "1.42857"

    page = policies_section(report["comparisons"], [])
    table = page[page.index('<table class="policy-usage">') :]
    assert "<tr><th>tokens per rollout</th><td>140.0</td><td>200.0</td><td>x1.43</td></tr>" in table
    assert "<tr><th>latency p95 (s)</th><td>3.80</td><td>4.80</td><td></td></tr>" in table


def test_nothing_recorded_adds_nothing_and_one_side_gives_no_ratio() -> None:
    plain = [rollout("base", "ta", 1.0, Usage()), rollout("cand", "ta", 1.0, Usage())]
    (item,) = compare_policies(plain, ["base", "cand"])
    assert not any(line.strip().startswith(("tokens", "latency")) for line in render_policies([item]))
    assert "usage" not in build_report([], [], {}, comparisons=[item])["comparisons"][0]
    assert not any(".baseline." in name or ".ratio." in name for name, _ in comparison_properties(item))
    report = build_report([], [], {}, comparisons=[item])
    assert "policy-usage" not in policies_section(report["comparisons"], [])

    only_candidate = [rollout("base", "ta", 1.0, Usage(10, 5, 15)), rollout("cand", "ta", 1.0, usage(5, 2.0))]
    (item,) = compare_policies(only_candidate, ["base", "cand"])
    latency = next(line for line in render_policies([item], width=120) if line.strip().startswith("latency"))
    assert latency.split(None, 1)[1] == "median - base, 2.0 s cand; p95 -, 2.0 s"
    report = build_report([], [], {}, comparisons=[item])
    jsonschema.validate(report, json.loads(SCHEMA_PATH.read_text()))
    assert report["comparisons"][0]["usage"]["ratio"]["latency_median"] is None
    assert report["comparisons"][0]["usage"]["baseline"]["latency"] == {"median": None, "p95": None, "n": 0}
    properties = dict(comparison_properties(item))
    assert PREFIX + "ratio.latency_median" not in properties and PREFIX + "baseline.latency_median" not in properties
    assert properties[PREFIX + "ratio.tokens_per_rollout"] == "7"


def test_side_usage_defaults_record_nothing() -> None:
    assert not SideUsage().recorded and SideUsage().tokens_per_rollout is None
