"""A session's rollouts turned into comparisons of policy models (pytest_gym_eval/reporting/policies.py) and their
terminal, JSON and JUnit forms (the statistics themselves: tests/unit/test_comparison.py; a whole session:
tests/plugin/test_policies_session.py)."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import jsonschema
import pytest

from pytest_gym_eval.options.gym_options import GymOptions
from pytest_gym_eval.options.settings import DatasetSettings
from pytest_gym_eval.reporting.conclusion import PolicyComparison
from pytest_gym_eval.reporting.json_report import SCHEMA_PATH, build_report
from pytest_gym_eval.reporting.junit import comparison_properties
from pytest_gym_eval.reporting.policies import compare_policies
from pytest_gym_eval.reporting.summary import RolloutResult
from pytest_gym_eval.reporting.terminal import render_policies
from pytest_gym_eval.reporting.verdicts import failing, gate_verdicts
from pytest_gym_eval.session.conclude import conclude
from pytest_gym_eval.stats.comparison import ComparisonGate, Hypothesis
from pytest_gym_eval.stats.gates import Gate, Verdict
from pytest_gym_eval.stats.sequential import RewardRange
from pytest_gym_eval.tasks.models import Policy, policy_of
from pytest_gym_eval.tasks.selection import Selection

AGENTS = {"base": "mcqa_simple_agent", "cand": "mcqa_simple_agent__cand"}


def comparison_failures(items: list[PolicyComparison], *, inconclusive_passes: bool) -> list[str]:
    """The messages of the comparison verdicts that fail the session (what its reason names)."""
    return [v.message for v in failing(gate_verdicts([], items, inconclusive_passes=inconclusive_passes))]


def rollout(policy: str, task: str, repeat: int, reward: float | None, dataset: str = "mcqa.jsonl") -> RolloutResult:
    status = "error" if reward is None else "passed" if reward >= 1.0 else "failed"
    return RolloutResult(
        f"{dataset}::{task}[r{repeat}-{policy}]", dataset, task, repeat, AGENTS[policy], status, reward
    )


def session(base: dict[str, list[float]], cand: dict[str, list[float]]) -> list[RolloutResult]:
    """Rollouts of both policies, interleaved as the session runs them: per task, its repeats in order."""
    results = []
    for task, rewards in base.items():
        for repeat, reward in enumerate(rewards):
            results.append(rollout("base", task, repeat, reward))
            if task in cand and repeat < len(cand[task]):
                results.append(rollout("cand", task, repeat, cand[task][repeat]))
    return results


def test_policy_of_an_agent_instance() -> None:
    policies = ["base", "cand", "other"]
    assert policy_of("mcqa_simple_agent", policies) == "base"
    assert policy_of("mcqa_simple_agent__cand", policies) == "cand"
    assert policy_of("mcqa_simple_agent__other", policies) == "other"


def test_each_candidate_is_compared_over_the_pairs_both_scored() -> None:
    """Baseline 1, 0, 1, 1 and candidate 0, 1, 1, 0 on four tasks: differences -1, +1, 0, -1, mean -0.25; the
    candidate loses ta and td and gains tb: McNemar with 2 lost and 1 gained, p = 2 P(X <= 1), X ~ Bin(3, 1/2),
    = 2 (1 + 3) / 8 = 1. An errored rollout and a rollout only one side has are no pair."""
    results = session({"ta": [1.0], "tb": [0.0], "tc": [1.0], "td": [1.0], "te": [1.0]}, {
        "ta": [0.0], "tb": [1.0], "tc": [1.0], "td": [0.0],
    })  # fmt: skip
    results.append(rollout("cand", "te", 0, None))  # errored: te has no pair
    results.append(rollout("cand", "ta", 1, 1.0))  # the baseline has no repeat 1
    (item,) = compare_policies(results, ["base", "cand"])
    assert (item.dataset, item.baseline, item.candidate, item.decides) == ("mcqa.jsonl", "base", "cand", True)
    difference, flips = item.comparison.difference, item.comparison.flips
    assert difference.pairs == 4 and difference.interval.n == 4
    assert difference.interval.estimate == pytest.approx(-0.25)
    assert (difference.baseline_mean, difference.candidate_mean) == (pytest.approx(0.75), pytest.approx(0.5))
    assert (flips.only_baseline, flips.only_candidate, flips.both, flips.neither) == (
        ("ta", "td"),
        ("tb",),
        ("tc",),
        (),
    )
    assert flips.binary and flips.p_value == pytest.approx(1.0)
    assert item.result is None  # no gate asked for


def test_datasets_and_candidates_each_get_a_comparison_and_one_policy_none() -> None:
    results = [rollout("base", "ta", 0, 1.0, "a.jsonl"), rollout("base", "ta", 0, 1.0, "b.jsonl")]
    AGENTS["new"] = "mcqa_simple_agent__new"
    try:
        found = compare_policies(results, ["base", "cand", "new"])
    finally:
        del AGENTS["new"]
    assert [(c.dataset, c.candidate) for c in found] == [
        ("a.jsonl", "cand"), ("a.jsonl", "new"), ("b.jsonl", "cand"), ("b.jsonl", "new"),
    ]  # fmt: skip
    assert all(c.comparison.difference.pairs == 0 for c in found)  # nothing to pair: shown, never a pass
    assert compare_policies(results, ["base"]) == []


def test_the_max_regression_gate_fails_a_clear_regression_and_passes_a_small_one() -> None:
    """Eight tasks of two repeats, fifteen of sixteen pairs lost, none gained: -0.9375 [-1.00, -0.50] (MOVER on
    gains and losses: the gains' interval is that of 0 in 16 pairs, up to 0.45), upper bound < -0.1, FAIL. (The
    same losses on four tasks, 7 of 8 pairs, give [-1.00, 0.12]: four tasks cannot rule out unseen gains.) Drops of
    0.06 on every task from 0.98, and gains of 0.01 on two tasks' second repeat: -0.0425 [-0.0816, -0.0089], within
    0.1, PASS, in Gym's words WARN (a real drop, within the tolerance). A constant drop of 0.05 on every task shows
    no spread: not [-0.05, -0.05] but, q = 1 - 0.025^(1/4) = 0.602365, [-0.05 - 0.95 q, -0.05 + 1.05 q] =
    [-0.62225, 0.58248]: INCONCLUSIVE (four tasks cannot rule out a share of tasks dropping far more)."""
    gate = ComparisonGate(Hypothesis.NON_INFERIORITY, 0.1)
    eight = {f"t{i}": [1.0, 1.0] for i in range(8)}
    worse = {f"t{i}": [0.0, 0.0] if i < 7 else [0.0, 1.0] for i in range(8)}
    (item,) = compare_policies(session(eight, worse), ["base", "cand"], [gate])
    assert item.result is not None and item.result.verdict is Verdict.FAIL
    assert item.result.interval.high == pytest.approx(-0.502607, abs=1e-5)
    (line,) = comparison_failures([item], inconclusive_passes=True)
    assert line == (
        "mcqa.jsonl cand vs base: non-inferiority: candidate - baseline -0.94 [-1.00, -0.50], upper bound "
        "-0.50 < -0.10: FAIL"
    )

    base = {t: [1.0, 1.0] for t in ("ta", "tb", "tc", "td")}
    close = {"ta": [0.92, 0.99], "tb": [0.92, 0.92], "tc": [0.92, 0.99], "td": [0.92, 0.92]}
    (small,) = compare_policies(session({task: [0.98, 0.98] for task in base}, close), ["base", "cand"], [gate])
    assert small.result is not None and small.result.verdict is Verdict.PASS
    assert (small.result.interval.low, small.result.interval.high) == pytest.approx((-0.081619, -0.008858), abs=1e-6)
    assert comparison_failures([small], inconclusive_passes=False) == []
    assert build_report([], [], {}, comparisons=[small])["comparisons"][0]["gym_verdict"] == "WARN"
    constant = {t: [0.95, 0.95] for t in base}
    (flat,) = compare_policies(session(base, constant), ["base", "cand"], [gate])
    assert flat.result is not None and flat.result.verdict is Verdict.INCONCLUSIVE
    assert (flat.result.interval.low, flat.result.interval.high) == pytest.approx((-0.62225, 0.58248), abs=1e-5)


def test_inconclusive_fails_unless_counted_as_passing_and_nothing_paired_never_passes() -> None:
    gate = ComparisonGate(Hypothesis.NON_INFERIORITY, 0.1)
    base = {"ta": [1.0], "tb": [0.0], "tc": [1.0]}
    (item,) = compare_policies(session(base, {"ta": [0.0], "tb": [1.0], "tc": [1.0]}), ["base", "cand"], [gate])
    assert item.result is not None and item.result.verdict is Verdict.INCONCLUSIVE
    assert len(comparison_failures([item], inconclusive_passes=False)) == 1
    assert comparison_failures([item], inconclusive_passes=True) == []
    (empty,) = compare_policies(session(base, {}), ["base", "cand"], [gate])
    assert len(comparison_failures([empty], inconclusive_passes=True)) == 1
    assert comparison_failures([replace(item, decides=False)], inconclusive_passes=False) == []


def test_terminal_json_and_junit_forms() -> None:
    gate = ComparisonGate(Hypothesis.NON_INFERIORITY, 0.5)
    base = {f"t{i}": [1.0] for i in range(10)}
    base["t9"] = [0.0]
    cand = dict(base, t0=[0.0], t9=[1.0])
    (item,) = compare_policies(session(base, cand), ["base", "cand"], [gate])
    lines = render_policies([item], width=100)
    assert lines[0] == "mcqa.jsonl: cand vs base"
    text = " ".join(" ".join(line.split()) for line in lines)
    assert "delta +0.00 [-0.46, 0.46] 95% CI over 10 tasks, paired" in text
    assert "mean 0.90 base, 0.90 cand (10 rollout pairs)" in text
    assert "1 lost, 1 gained, 8 both pass, 0 neither; McNemar exact p = 1.000" in text
    assert "    lost: t0" in lines and "    gained: t9" in lines
    assert text.endswith(": PASS (Gym: PASS)")
    assert all(len(line) <= 100 for line in lines)

    report = build_report([], [], {}, comparisons=[item])
    jsonschema.validate(report, json.loads(SCHEMA_PATH.read_text()))
    (entry,) = report["comparisons"]
    assert entry["flips"]["only_baseline"] == ["t0"] and entry["flips"]["only_candidate"] == ["t9"]
    assert (entry["verdict"], entry["gym_verdict"], entry["margin"], entry["mcnemar_p"]) == ("PASS", "PASS", 0.5, 1.0)
    assert entry["delta"]["estimate"] == 0.0 and entry["delta"]["low"] < 0.0 < entry["delta"]["high"]
    assert "comparisons" not in build_report([], [], {})  # a one-policy session's report is unchanged

    properties = dict(comparison_properties(item))
    prefix = "gym::mcqa.jsonl::compare.cand."
    assert properties[prefix + "delta"] == "0"
    assert float(properties[prefix + "delta.low"]) == pytest.approx(entry["delta"]["low"], rel=1e-5)
    assert (properties[prefix + "verdict"], properties[prefix + "p_value"]) == ("PASS", "1")
    assert properties[prefix + "baseline"] == "base" and properties[prefix + "lost"] == "1"


def test_fractional_rewards_have_no_mcnemar_p() -> None:
    (item,) = compare_policies(session({"ta": [0.5], "tb": [1.0]}, {"ta": [1.0], "tb": [1.0]}), ["base", "cand"])
    assert not item.comparison.flips.binary
    assert build_report([], [], {}, comparisons=[item])["comparisons"][0]["mcnemar_p"] is None
    assert not any(name.endswith(".p_value") for name, _ in comparison_properties(item))
    assert "McNemar" not in "\n".join(render_policies([item]))
    assert math.isclose(item.comparison.difference.interval.estimate, 0.25)


def test_the_gate_sets_the_sessions_exit_status_unless_judged_on_a_biased_selection(tmp_path: Path) -> None:
    policies = (Policy("base", replay=tmp_path / "b.jsonl"), Policy("cand", replay=tmp_path / "c.jsonl"))
    options = GymOptions(rootdir=tmp_path, policies=policies, max_regression=0.1)
    results = session({f"t{i}": [1.0] for i in range(10)}, {f"t{i}": [0.0 if i < 6 else 1.0] for i in range(10)})
    failed = conclude(results, options)
    # [-0.92, -0.04] straddles -0.1: INCONCLUSIVE, which fails the session and heads its reason
    assert failed.exit_status == 1 and failed.reason.startswith("gym gates: INCONCLUSIVE - mcqa.jsonl cand vs base: ")
    assert [item.decides for item in failed.policies] == [True]
    by_name = Selection(tasks=10, of_tasks=12, rollouts=20, of_rollouts=24, how="-k")
    shown = conclude(results, options, selections={"mcqa.jsonl": by_name})
    assert shown.exit_status == -1 and [item.decides for item in shown.policies] == [False]
    # [-0.92, -0.04]: at 0.1 and 0.7 it straddles the margin (INCONCLUSIVE: fails unless --gym-inconclusive=pass);
    # at 1.0 PASS
    assert conclude(results, replace(options, max_regression=0.7)).exit_status == 1
    assert conclude(results, replace(options, max_regression=0.7, inconclusive_passes=True)).exit_status == 0
    passed = conclude(results, replace(options, max_regression=1.0))
    assert (passed.exit_status, passed.reason) == (0, "gym gates: the gate passes")
    assert conclude(results, replace(options, policies=(), max_regression=None)).policies == ()


def test_summaries_are_labelled_by_policy_unless_two_would_share_a_label(tmp_path: Path) -> None:
    policies = (Policy("base", replay=tmp_path / "b.jsonl"), Policy("cand", replay=tmp_path / "c.jsonl"))
    options = GymOptions(rootdir=tmp_path, policies=policies)
    results = session({"t0": [1.0]}, {"t0": [0.0]})
    summaries = conclude(results, options).summaries
    assert [(s.title, s.label) for s in summaries] == [
        ("mcqa.jsonl (policy base)", "base"),
        ("mcqa.jsonl (policy cand)", "cand"),
    ]
    # A row naming another agent: two agent instances run each policy, so the agent instances stay the labels.
    other = RolloutResult("mcqa.jsonl::t1[r0-cand]", "mcqa.jsonl", "t1", 0, "other_agent__cand", "passed", 1.0)
    titles = [s.title for s in conclude([*results, other], options).summaries]
    assert titles == [
        "mcqa.jsonl (agent mcqa_simple_agent)",
        "mcqa.jsonl (agent mcqa_simple_agent__cand)",
        "mcqa.jsonl (agent other_agent__cand)",
    ]
    one = conclude(results, replace(options, policies=())).summaries
    assert [s.title for s in one] == [
        "mcqa.jsonl (agent mcqa_simple_agent)",
        "mcqa.jsonl (agent mcqa_simple_agent__cand)",
    ]
    assert all(s.policy is None for s in one)


def test_min_improvement_is_a_superiority_gate_judged_beside_max_regression(tmp_path: Path) -> None:
    """The candidate gains eight of ten tasks: difference +0.8 [0.2111, 0.9883] (MOVER on gains and losses, the
    mirror of eight lost tasks). Superiority at 0.1: lower bound 0.21 > 0.1, PASS; at 0.5 the interval straddles
    it, INCONCLUSIVE; at 1.0 the upper bound is at or below it, FAIL. A candidate slightly worse on every task
    (first repeats 0.10 or 0.12 below the baseline's 1.0, second repeats 0.02 above on two tasks: -0.05
    [-0.0648, -0.0208]) FAILS superiority at 0 and PASSES non-inferiority at 0.1: both gates are judged and shown,
    and the failing one alone fails the session. An equal candidate on four tasks shows no spread: [-0.6024,
    0.6024], both INCONCLUSIVE."""
    policies = (Policy("base", replay=tmp_path / "b.jsonl"), Policy("cand", replay=tmp_path / "c.jsonl"))
    options = GymOptions(rootdir=tmp_path, policies=policies, min_improvement=0.1)
    better = session({f"t{i}": [0.0 if i < 8 else 1.0] for i in range(10)}, {f"t{i}": [1.0] for i in range(10)})
    passed = conclude(better, options)
    assert (passed.exit_status, passed.reason) == (0, "gym gates: the gate passes")
    (item,) = passed.policies
    assert item.result is None  # no --gym-max-regression
    superiority = item.gate_result(Hypothesis.SUPERIORITY)
    assert superiority is not None and superiority.verdict is Verdict.PASS
    assert superiority.interval.low == pytest.approx(0.211085, abs=1e-5)
    assert conclude(better, replace(options, min_improvement=0.5)).exit_status == 1
    assert conclude(better, replace(options, min_improvement=0.5, inconclusive_passes=True)).exit_status == 0
    failed = conclude(better, replace(options, min_improvement=1.0))
    assert failed.exit_status == 1
    assert failed.reason.startswith("gym gates: FAIL - mcqa.jsonl cand vs base: superiority: candidate - baseline")
    assert failed.reason.endswith(f"upper bound {superiority.interval.high:.2f} <= 1.00: FAIL")

    base = {f"t{i}": [1.0, 0.0] for i in range(4)}
    equal_one = conclude(session(base, base), replace(options, max_regression=0.1, min_improvement=0.0)).policies[0]
    assert {r.verdict for r in equal_one.comparison.results} == {Verdict.INCONCLUSIVE}
    high = equal_one.comparison.difference.interval.high
    assert high == pytest.approx(1 - 0.025**0.25) and equal_one.comparison.difference.interval.low == -high
    same = session(base, {"t0": [0.90, 0.02], "t1": [0.88, 0.0], "t2": [0.90, 0.02], "t3": [0.88, 0.0]})
    both = conclude(same, replace(options, max_regression=0.1, min_improvement=0.0))
    (equal,) = both.policies
    assert [(r.gate.hypothesis, r.verdict) for r in equal.comparison.results] == [
        (Hypothesis.NON_INFERIORITY, Verdict.PASS),
        (Hypothesis.SUPERIORITY, Verdict.FAIL),
    ]
    assert both.exit_status == 1
    assert both.reason == (
        "gym gates: FAIL - mcqa.jsonl cand vs base: superiority: candidate - baseline -0.05 [-0.06, -0.02], upper "
        "bound -0.02 <= 0.00: FAIL"
    )
    assert conclude(same, replace(options, max_regression=0.1, min_improvement=None)).exit_status == 0

    lines = [line for line in render_policies([equal], width=120) if line.startswith("  gate")]
    assert [line.split(":")[0] for line in lines] == ["  gate        non-inferiority", "  gate        superiority"]
    report = build_report([], [], {}, comparisons=[equal])
    jsonschema.validate(report, json.loads(SCHEMA_PATH.read_text()))
    (entry,) = report["comparisons"]
    assert (entry["verdict"], entry["margin"]) == ("PASS", 0.1)  # the --gym-max-regression fields, as before
    assert entry["gates"] == [
        {"hypothesis": "non-inferiority", "margin": 0.1, "verdict": "PASS", "gym_verdict": "WARN"},  # wholly below 0
        {"hypothesis": "superiority", "margin": 0.0, "verdict": "FAIL", "gym_verdict": "FAIL"},
    ]
    properties = dict(comparison_properties(equal))
    prefix = "gym::mcqa.jsonl::compare.cand."
    assert (properties[prefix + "verdict"], properties[prefix + "superiority.verdict"]) == ("PASS", "FAIL")
    assert properties[prefix + "superiority.margin"] == "0"


def test_a_margin_is_checked_against_each_datasets_reward_range(tmp_path: Path) -> None:
    """A dataset's own reward_range (here [0, 3]: differences in [-3, 3]) allows a margin the default [0, 1] does
    not; each problem names the option and the dataset."""
    policies = (Policy("base", replay=tmp_path / "b.jsonl"), Policy("cand", replay=tmp_path / "c.jsonl"))
    wide = (("wide.jsonl", DatasetSettings(reward_range=RewardRange(0.0, 3.0))),)
    options = GymOptions(rootdir=tmp_path, policies=policies, max_regression=1.5, datasets=wide)
    paths = [tmp_path / "wide.jsonl", tmp_path / "unit.jsonl", tmp_path / "wide.jsonl"]
    assert options.margin_problems(paths) == [
        "--gym-max-regression=1.5 (ini gym_max_regression): a margin of 1.5 is not below the width 1 of the reward "
        "range [0, 1]: every candidate would pass non-inferiority whatever it scores (dataset unit.jsonl; declare its "
        "range with reward_range=LO:HI or --gym-reward-range)"
    ]
    assert options.margin_problems(paths[:1]) == []
    assert replace(options, max_regression=0.5).margin_problems(paths) == []
    assert replace(options, policies=()).margin_problems(paths) == []
    superiority = replace(options, max_regression=None, min_improvement=3.0)
    assert [p.split(":")[0] for p in superiority.margin_problems(paths)] == [
        "--gym-min-improvement=3 (ini gym_min_improvement)"
    ] * 2


def test_the_verdict_list_holds_each_comparison_gate_with_its_own_words(tmp_path: Path) -> None:
    """Issue 36: a comparison's verdict is one entry of the conclusion's verdict list, beside the datasets' gates,
    with its own interval in its message (not a dataset gate's), failing the session exactly when the exit status
    says so."""
    policies = (Policy("base", replay=tmp_path / "b.jsonl"), Policy("cand", replay=tmp_path / "c.jsonl"))
    gate = DatasetSettings(given=(Gate("mean_reward", 0.1),))
    options = GymOptions(rootdir=tmp_path, policies=policies, min_improvement=0.0, max_regression=1.0, cli=gate)
    results = session({f"t{i}": [1.0] for i in range(10)}, {f"t{i}": [0.0 if i < 6 else 1.0] for i in range(10)})
    concluded = conclude(results, options)
    by_kind = {(v.subject, v.kind): v for v in concluded.verdicts}
    superiority = by_kind[("mcqa.jsonl cand vs base", "superiority")]
    assert (superiority.verdict, superiority.fails, superiority.policy) == ("FAIL", True, "cand")
    assert superiority.message.startswith("mcqa.jsonl cand vs base: superiority: candidate - baseline -0.60 [")
    assert superiority.bound == concluded.policies[0].comparison.results[1].interval.high
    non_inferiority = by_kind[("mcqa.jsonl cand vs base", "non-inferiority")]
    assert (non_inferiority.verdict, non_inferiority.fails) == ("PASS", False)
    assert {v.kind for v in concluded.verdicts if v.subject.startswith("mcqa.jsonl (policy")} == {"mean_reward"}
    assert concluded.exit_status == 1 == int(any(v.fails for v in concluded.verdicts))
    entries = build_report([], results, {}, verdicts=concluded.verdicts)["verdicts"]
    assert [entry["kind"] for entry in entries] == [v.kind for v in concluded.verdicts]
