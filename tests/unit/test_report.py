"""Tests of pytest_gym_eval.reporting: summaries, session verdicts, terminal text, the JSON report, baseline
comparison and JUnit properties, on hand-made rollout results with hand-worked numbers.

Student t quantiles used below (tables): t(0.975; 3) = 3.182446, t(0.975; 4) = 2.776445, t(0.975; 5) = 2.570582.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from pytest_gym_eval.core.files import write_text_atomic
from pytest_gym_eval.reporting import fmt, json_report
from pytest_gym_eval.reporting.baseline import compare_to_baseline, max_drop_gate
from pytest_gym_eval.reporting.conclusion import BaselineComparison
from pytest_gym_eval.reporting.json_report import (
    REPORT_SCHEMA_VERSION,
    build_report,
    load_report,
    write_report,
)
from pytest_gym_eval.reporting.junit import suite_properties
from pytest_gym_eval.reporting.summary import DatasetSummary, RolloutResult, summarize
from pytest_gym_eval.reporting.terminal import render_baseline, render_summary
from pytest_gym_eval.reporting.verdicts import gate_verdicts, session_status, session_verdict
from pytest_gym_eval.stats.gates import Gate, GateMode, Verdict

MCQA = "datasets/mcqa.jsonl"
LONG_PATH = "very/" * 28 + "long.jsonl"  # 150 characters
LONG_ID = "task-" + "x" * 60 + "-0042"
POINT, LOWER = GateMode.POINT, GateMode.LOWER_BOUND

assert len(LONG_PATH) == 150


def rollout(
    task: str,
    repeat: int,
    reward: float | None,
    *,
    dataset: str = MCQA,
    agent: str = "mcqa_simple_agent",
    threshold: float = 1.0,
    failure_class: str | None = None,
    start: float = 0.0,
    stop: float = 0.0,
) -> RolloutResult:
    """A result with status from ``reward`` (None → error, class "missing" unless given)."""
    if reward is None:
        status, failure_class = "error", failure_class or "missing"
    else:
        status = "passed" if reward >= threshold else "failed"
    return RolloutResult(
        nodeid=f"{dataset}::{task}[r{repeat}]",
        dataset=dataset,
        task_id=task,
        repeat=repeat,
        agent=agent,
        status=status,
        reward=reward,
        failure_class=failure_class,
        record=f"run/rollouts.jsonl:{repeat + 1}",
        start=start,
        stop=stop,
    )


def results_for(rewards: Mapping[str, Sequence[float | None]], **kwargs: Any) -> list[RolloutResult]:
    """``{task: [reward of r0, r1, ...]}`` → results in task-then-repeat order."""
    return [rollout(task, r, reward, **kwargs) for task, row in rewards.items() for r, reward in enumerate(row)]


def summarize_one(
    results: Sequence[RolloutResult], gates: Sequence[Gate] = (), mode: GateMode = POINT
) -> DatasetSummary:
    (summary,) = summarize(results, thresholds={}, gates={MCQA: gates}, mode=mode)
    return summary


# 5 tasks x 2 repeats, 4 tasks always pass, 1 always fails.
FOUR_OF_FIVE = {"q0": [1.0, 1.0], "q1": [1.0, 1.0], "q2": [1.0, 1.0], "q3": [1.0, 1.0], "q4": [0.0, 0.0]}
# 4 tasks x 2 repeats, t2 flaky.
FLAKY = {"t1": [1.0, 1.0], "t2": [1.0, 0.0], "t3": [0.0, 0.0], "t4": [1.0, 1.0]}


def approx_interval(interval: Any, estimate: float, low: float, high: float, n: int) -> None:
    assert interval.estimate == pytest.approx(estimate, abs=1e-6)
    assert interval.low == pytest.approx(low, abs=1e-6)
    assert interval.high == pytest.approx(high, abs=1e-6)
    assert interval.n == n


# --- summarize ---------------------------------------------------------------------------------------------


def test_four_of_five_tasks_always_pass() -> None:
    summary = summarize_one(results_for(FOUR_OF_FIVE))
    assert (summary.dataset, summary.agent) == (MCQA, None)
    assert (summary.tasks, summary.rollouts, summary.errors, summary.scored) == (5, 10, 0, 10)
    # Per-task means 1,1,1,1,0: mean 0.8, s = sqrt(0.8/4), se = s/sqrt(5) = 0.2; every reward in [0, 1]: the
    # task-clustered Clopper-Pearson interval, n_eff = 0.8 * 0.2 / 0.04 = 4, n* = 4 (1.959964 / 2.776445)^2 =
    # 1.993324, x = 1.594660: B(0.025; x, n* - x + 1), B(0.975; x + 1, n* - x) (scipy: 0.075356, 0.999969).
    approx_interval(summary.mean_reward, 0.8, 0.075356, 0.999969, 5)
    # Clopper-Pearson 8/10 at 95% (statsmodels' proportion_confint(8, 10, method="beta")): [0.443905, 0.974789].
    approx_interval(summary.pass_rate, 0.8, 0.443905, 0.974789, 10)
    assert sorted(summary.pass_at_k) == [1, 2]
    # pass@1 and pass@2 per task are the per-task means, 1,1,1,1,0: the same task-clustered Clopper-Pearson interval
    # (n_eff = 4 is below the 10 and 5 disjoint blocks of k that cap it). Before: Student t, [0.244711, 1.355289].
    approx_interval(summary.pass_at_k[1], 0.8, 0.075356, 0.999969, 5)
    approx_interval(summary.pass_at_k[2], 0.8, 0.075356, 0.999969, 5)
    assert summary.flaky_tasks == ()
    assert summary.threshold == 1.0
    assert summary.gates == []
    assert summary.verdict is None


def test_flaky_task() -> None:
    summary = summarize_one(results_for(FLAKY))
    assert summary.flaky_tasks == ("t2",)
    # Per-task means 1, .5, 0, 1: mean .625, s^2 = .6875/3, se = .239357; the mean reward's task-clustered
    # Clopper-Pearson interval: n_eff = .234375 / .057292 = 4.090909, n* = 1.551650, x = 0.969781 (scipy:
    # 0.014087, 0.999184). pass@1 per task is the per-task mean, so it has the same interval (n_eff 4.09 is below
    # the 8 blocks that cap it; before, the t interval [-0.136740, 1.386740] clipped to [0, 1]).
    approx_interval(summary.mean_reward, 0.625, 0.014087, 0.999184, 4)
    approx_interval(summary.pass_at_k[1], 0.625, 0.014087, 0.999184, 4)
    # pass@2 per task 1, 1, 0, 1: mean .75, s = .5, se = .25, n_eff = .1875 / .0625 = 3 (below the 4 blocks),
    # n* = 3 (1.959964 / 3.182446)^2 = 1.137877, x = 0.853408: B(0.025; x, n* - x + 1), B(0.975; x + 1, n* - x)
    # = [0.010214, 0.999999] (beta_ppf). Before: t, [-0.045612, 1.545612] clipped to [0, 1].
    approx_interval(summary.pass_at_k[2], 0.75, 0.010214, 0.999999, 4)


def test_pass_at_k_uses_the_unbiased_estimator() -> None:
    summary = summarize_one(results_for({"a": [1.0, 0.0, 0.0], "b": [1.0, 1.0, 1.0], "c": [0.0, 0.0, 0.0]}))
    assert sorted(summary.pass_at_k) == [1, 2, 3]
    # Task a: pass@1 = 1/3, pass@2 = 1 - C(2,2)/C(3,2) = 2/3, pass@3 = 1.
    assert summary.pass_at_k[1].estimate == pytest.approx((1 / 3 + 1 + 0) / 3)
    assert summary.pass_at_k[2].estimate == pytest.approx((2 / 3 + 1 + 0) / 3)
    assert summary.pass_at_k[3].estimate == pytest.approx(2 / 3)
    assert summary.flaky_tasks == ("a",)


def test_errors_are_counted_but_carry_no_reward() -> None:
    results = results_for({"q0": [1.0, None], "q1": [0.0, 1.0]})
    results.append(rollout("q2", 0, None, failure_class="bad_reward"))
    summary = summarize_one(results)
    assert (summary.tasks, summary.rollouts, summary.errors, summary.scored) == (3, 5, 2, 3)
    assert summary.error_classes == {"missing": 1, "bad_reward": 1}
    assert summary.mean_reward.estimate == pytest.approx(2 / 3)
    assert summary.mean_reward.n == 2  # q2 has no scored rollout
    assert summary.pass_rate.estimate == pytest.approx(2 / 3)
    assert summary.pass_rate.n == 3
    # pass@2 only over tasks with 2 scored rollouts: q1 (pass@2 = 1).
    assert (summary.pass_at_k[2].estimate, summary.pass_at_k[2].n) == (1.0, 1)
    assert summary.flaky_tasks == ("q1",)  # q0's error does not make it flaky


def test_pass_follows_status_not_reward() -> None:
    # A pass hook may pass a rollout below the threshold: the status decides.
    results = [rollout("a", 0, 0.3), rollout("b", 0, 0.3)]
    results[0] = replace(results[0], status="passed")
    summary = summarize_one(results)
    assert summary.pass_rate.estimate == 0.5
    assert summary.mean_reward.estimate == pytest.approx(0.3)


def test_non_finite_reward_is_not_scored() -> None:
    results = [rollout("a", 0, 1.0), RolloutResult("x::b[r0]", MCQA, "b", 0, "mcqa_simple_agent", "failed", math.nan)]
    summary = summarize_one(results)
    assert (summary.rollouts, summary.scored, summary.errors) == (2, 1, 0)


def test_several_agents_split_a_dataset_in_first_seen_order() -> None:
    other = "datasets/other.jsonl"
    results = [
        rollout("x", 0, 1.0, agent="a1"),
        rollout("o", 0, 0.0, dataset=other, agent="solo"),
        rollout("z", 0, 0.0, agent="a2"),
        rollout("y", 0, 1.0, agent="a1"),
        rollout("z", 1, 1.0, agent="a2"),
    ]
    summaries = summarize(results, thresholds={other: 0.5}, gates={}, mode=POINT)
    assert [(s.dataset, s.agent) for s in summaries] == [(MCQA, "a1"), (MCQA, "a2"), (other, None)]
    a1, a2, solo = summaries
    assert (a1.tasks, a1.rollouts, a1.mean_reward.estimate) == (2, 2, 1.0)
    assert (a2.tasks, a2.rollouts, a2.mean_reward.estimate) == (1, 2, 0.5)
    assert sorted(a1.pass_at_k) == [1] and sorted(a2.pass_at_k) == [1, 2]
    assert (solo.threshold, a1.threshold) == (0.5, 1.0)
    assert a1.title == f"{MCQA} (agent a1)" and solo.title == other


def test_wall_time_spans_first_start_to_last_stop() -> None:
    results = [
        rollout("a", 0, 1.0, start=100.0, stop=105.0),
        rollout("b", 0, 1.0, start=101.0, stop=110.0),
        rollout("c", 0, 1.0),  # no timing: ignored
    ]
    assert summarize_one(results).wall_time == pytest.approx(10.0)
    assert summarize_one(results[2:]).wall_time == 0.0


def test_gates_are_judged_and_give_the_verdict() -> None:
    results = results_for(FOUR_OF_FIVE)
    passing = summarize_one(results, [Gate("mean_reward", 0.7), Gate("pass_at_k", 0.5, k=2)])
    assert [g.verdict for g in passing.gates] == [Verdict.PASS, Verdict.PASS]
    assert passing.verdict == "PASS"
    failing = summarize_one(results, [Gate("mean_reward", 0.7), Gate("pass_rate", 0.9)])
    assert failing.verdict == "FAIL"
    inconclusive = summarize_one(results, [Gate("mean_reward", 0.7)], mode=LOWER)  # [0.24, 1.36] straddles
    assert inconclusive.verdict == "INCONCLUSIVE"
    assert inconclusive.gates[0].mode is LOWER


def test_confidence_changes_the_intervals() -> None:
    (summary,) = summarize(results_for(FOUR_OF_FIVE), thresholds={}, gates={}, mode=POINT, confidence=0.9)
    assert summary.confidence == 0.9
    assert summary.mean_reward.high < 1.355289  # narrower than the 95% interval


# --- session_verdict ---------------------------------------------------------------------------------------


def test_session_verdict_without_gates() -> None:
    assert session_verdict(
        summarize(results_for(FOUR_OF_FIVE), thresholds={}, gates={}, mode=POINT), inconclusive_passes=False
    ) == (-1, "")
    assert session_verdict([], inconclusive_passes=True) == (-1, "")


def test_session_verdict_all_gates_pass_despite_failed_rollouts() -> None:
    summary = summarize_one(results_for(FOUR_OF_FIVE), [Gate("mean_reward", 0.7), Gate("pass_rate", 0.5)])
    assert session_verdict([summary], inconclusive_passes=False) == (0, "gym gates: all 2 gates pass")
    single = summarize_one(results_for(FOUR_OF_FIVE), [Gate("mean_reward", 0.7)])
    assert session_verdict([single], inconclusive_passes=False) == (0, "gym gates: the gate passes")


def test_session_verdict_gate_fails() -> None:
    summary = summarize_one(results_for(FOUR_OF_FIVE), [Gate("mean_reward", 0.9)])
    assert session_verdict([summary], inconclusive_passes=True) == (
        1,
        "gym gates: FAIL - datasets/mcqa.jsonl mean reward 0.80 < 0.90",
    )


def test_session_verdict_lower_bound_failure_names_the_upper_bound() -> None:
    results = results_for({f"q{i}": [0.0, 0.0] if i % 2 else [0.0, 1.0] for i in range(10)})
    summary = summarize_one(results, [Gate("pass_rate", 0.9)], mode=LOWER)
    status, reason = session_verdict([summary], inconclusive_passes=True)
    assert status == 1
    assert reason.startswith("gym gates: FAIL - datasets/mcqa.jsonl pass rate 0.25, upper bound 0.4")
    assert reason.endswith("< 0.90")


def test_session_verdict_errors_fail_even_when_gates_pass() -> None:
    # The gate's estimate passes over the scored rollouts, but an errored one leaves it judged on part of the
    # selection: at best INCONCLUSIVE, and never passing, even with inconclusive_passes.
    gated = summarize_one(results_for({"q0": [1.0, None], "q1": [1.0, 1.0]}), [Gate("mean_reward", 0.5)])
    (gate,) = gated.gates
    assert gate.verdict is Verdict.INCONCLUSIVE and gate.note == "judged on 3 of 4 selected rollouts"
    expected = "gym gates: INCONCLUSIVE - datasets/mcqa.jsonl mean reward 1.00 judged on 3 of 4 selected rollouts"
    for inconclusive_passes in (False, True):
        assert session_verdict([gated], inconclusive_passes=inconclusive_passes) == (
            1, f"{expected}; 1 rollout errored"
        )  # fmt: skip
    # Errors in a dataset without gates count too.
    clean = summarize_one(results_for(FOUR_OF_FIVE), [Gate("mean_reward", 0.5)])
    ungated = summarize(results_for({"x": [None, None]}, dataset="d2.jsonl"), thresholds={}, gates={}, mode=POINT)
    assert session_verdict([clean, *ungated], inconclusive_passes=False) == (1, "gym gates: FAIL - 2 rollouts errored")


def test_session_verdict_failure_and_errors_together() -> None:
    summary = summarize_one(results_for({"q0": [0.0, None], "q1": [1.0, 0.0]}), [Gate("mean_reward", 0.9)])
    status, reason = session_verdict([summary], inconclusive_passes=False)
    assert status == 1
    assert reason == "gym gates: FAIL - datasets/mcqa.jsonl mean reward 0.33 < 0.90; 1 rollout errored"


def test_session_verdict_inconclusive() -> None:
    summary = summarize_one(results_for(FOUR_OF_FIVE), [Gate("mean_reward", 0.7)], mode=LOWER)
    status, reason = session_verdict([summary], inconclusive_passes=False)
    assert status == 1
    assert reason == "gym gates: INCONCLUSIVE - datasets/mcqa.jsonl mean reward 0.80 [0.08, 1.00] straddles 0.70"
    assert session_verdict([summary], inconclusive_passes=True) == (
        0,
        "gym gates: the gate passes (1 inconclusive, counted as passing)",
    )


def test_session_verdict_gate_without_data() -> None:
    summary = summarize_one(results_for({"q0": [None]}), [Gate("pass_at_k", 0.5, k=4)])
    status, reason = session_verdict([summary], inconclusive_passes=False)
    assert status == 1
    assert "pass@4 has no data (needs >= 0.50)" in reason
    assert reason.endswith("; 1 rollout errored")


def test_session_verdict_caps_the_listed_failures() -> None:
    gates = [Gate("mean_reward", t) for t in (0.85, 0.9, 0.95, 0.99, 1.0)]
    summary = summarize_one(results_for(FOUR_OF_FIVE), gates)
    status, reason = session_verdict([summary], inconclusive_passes=False)
    assert status == 1
    assert reason.count("mean reward 0.80 <") == 3
    assert reason.endswith("and 2 more failing gates")


def test_the_reason_is_read_off_the_verdicts_it_sits_beside() -> None:
    """Over gates that pass, fail and straddle, with and without errored rollouts and either INCONCLUSIVE rule: the
    status is 1 exactly when a verdict fails, and the reason names exactly the failing verdicts' words, none other."""
    shapes = [FOUR_OF_FIVE, FLAKY, {"q0": [1.0, None], "q1": [0.0, 1.0]}]
    gate_sets = [[Gate("mean_reward", 0.5)], [Gate("mean_reward", 0.95), Gate("pass_rate", 0.2)], []]
    for shape, gates, mode, inconclusive_passes in itertools.product(shapes, gate_sets, (POINT, LOWER), (False, True)):
        summaries = [summarize_one(results_for(shape), gates, mode=mode)]
        verdicts = gate_verdicts(summaries, inconclusive_passes=inconclusive_passes)
        status, reason = session_status(verdicts, summaries)
        if not gates:
            assert (status, reason) == (-1, "")
            continue
        fails = [v for v in verdicts if v.fails]
        assert status == (1 if fails else 0)
        assert reason.startswith("gym gates: ")
        for verdict in verdicts:
            assert (verdict.brief in reason) is (verdict in fails), (verdict, reason)


# --- render_summary ----------------------------------------------------------------------------------------


def test_render_golden() -> None:
    results = results_for(FLAKY)
    results[0] = replace(results[0], start=1000.0, stop=1005.0)
    results[-1] = replace(results[-1], start=1001.0, stop=1012.5)
    summary = summarize_one(results, [Gate("mean_reward", 0.5)])
    assert render_summary([summary], verbose=False) == [
        "datasets/mcqa.jsonl",
        "  4 tasks, 8 rollouts (8 scored, 0 errors), wall time 12.5 s",
        "  mean reward 0.62 [0.01, 1.00]  95% CI over 4 tasks",  # test_flaky_task: [0.014, 0.999]
        "  pass rate   0.62 [0.24, 0.91]  Clopper-Pearson, 8 rollouts, threshold 1.00",
        "  pass@1      0.62 [0.01, 1.00]",  # test_flaky_task
        "  pass@2      0.75 [0.01, 1.00]",
        "  flaky tasks 1 of 4: t2",
        "  gates       1 judged on the estimate (point mode)",
        "    mean reward 0.62 [0.01, 1.00] >= 0.50: PASS",
        "  verdict     PASS",
    ]


def test_the_terminals_gate_lines_are_the_verdict_lists() -> None:
    """The terminal renders each gate's line and the summary's verdict from the conclusion's verdict list (made once,
    where the session concludes), not from the gate results the list was made from: given a list that says FAIL
    for a gate the summary's result passes, the terminal says FAIL too, as every other output would."""
    from pytest_gym_eval.reporting.conclusion import Conclusion
    from pytest_gym_eval.reporting.terminal import render_conclusion
    from pytest_gym_eval.reporting.verdicts import gate_verdicts

    summary = summarize_one(results_for(FLAKY), [Gate("mean_reward", 0.5)])
    (passing,) = gate_verdicts([summary])
    assert passing.text == "mean reward 0.62 [0.01, 1.00] >= 0.50: PASS"  # the line render_summary shows today
    planted = replace(passing, verdict="FAIL", fails=True, detail="mean reward 0.62 [0.01, 1.00] < 0.50: FAIL")
    conclusion = Conclusion([summary], [], None, 1, "", verdicts=(planted,))
    lines = render_conclusion(conclusion, verbose=False, results=[], width=80)
    assert "    mean reward 0.62 [0.01, 1.00] < 0.50: FAIL" in lines
    assert "  verdict     FAIL" in lines
    assert not any(line.endswith(": PASS") for line in lines)


def test_render_infinite_bounds_as_na_and_errors_by_class() -> None:
    results = [rollout("only", 0, 0.5, threshold=0.5), rollout("only", 1, None), rollout("only", 2, None)]
    lines = render_summary([summarize_one(results)], verbose=False)
    assert "  mean reward 0.50 [n/a, n/a]  95% CI over 1 task" in lines
    assert "  errors      missing 2" in lines
    assert "  1 task, 3 rollouts (1 scored, 2 errors)" in lines  # no wall time without timings
    assert not any("inf" in line for line in lines)


def test_render_verbose_rows() -> None:
    results = results_for({"q1": [1.0, 0.0, None], "q2": [0.5, 1.0, 1.0]})
    summary = summarize_one(results)
    quiet = render_summary([summary], verbose=False, results=results)
    loud = render_summary([summary], verbose=True, results=results)
    assert loud[: len(quiet)] == quiet
    rows = loud[len(quiet) :]
    assert rows[0].startswith("  rewards by task")
    assert rows[1].split() == ["q1", "1.00", "0.00", "ERR"]
    assert rows[2].split() == ["q2", "0.50", "1.00", "1.00"]
    assert len(rows) == 3


def test_render_verbose_rows_line_up_with_wide_and_combining_characters() -> None:
    # Terminal columns, not characters: CJK and emoji take two, a combining accent none.
    results = results_for({"日本語": [1.0], "q-é-😀": [0.0], "cafe\u0301": [1.0], "plain": [0.5]})
    summary = summarize_one(results)
    rows = render_summary([summary], verbose=True, results=results)[-4:]
    starts = {fmt.columns(row[: row.index(cell)]) for row in rows for cell in ("1.00", "0.00", "0.50") if cell in row}
    assert len(starts) == 1, rows  # every reward starts in the same column
    assert fmt.columns("日本語") == 6 and fmt.columns("q-é-😀") == 6 and fmt.columns("cafe\u0301") == 4


def test_render_verbose_marks_repeats_not_run_and_splits_agents() -> None:
    results = [
        rollout("a", 0, 1.0, agent="x"),
        rollout("a", 2, 0.0, agent="x"),
        rollout("b", 0, 0.25, agent="y"),
    ]
    summaries = summarize(results, thresholds={}, gates={}, mode=POINT)
    lines = render_summary(summaries, verbose=True, results=results)
    assert f"{MCQA} (agent x)" in lines and f"{MCQA} (agent y)" in lines
    rows = [line.split() for line in lines if line.startswith("    ") and not line.startswith("     ")]
    assert ["a", "1.00", "-", "0.00"] in rows
    assert ["b", "0.25"] in rows
    assert ["a", "0.25"] not in rows and ["b", "1.00", "-", "0.00"] not in rows


def mixed_results() -> list[RolloutResult]:
    """Long paths, long ids, several agents, errors, 30 repeats, negative and large rewards."""
    results = results_for({LONG_ID: [1.0, 0.0, None], "short": [0.0, 1.0, 1.0]}, dataset=LONG_PATH, agent="agent-a")
    results += results_for({LONG_ID + "-b": [-12345.678, 1.0]}, dataset=LONG_PATH, agent="agent-" + "b" * 70)
    results += results_for({"many": [float(i % 2) for i in range(30)], "neg": [-0.5] * 30})
    flaky = {f"flaky-{i:02d}-" + "y" * 30: [1.0, 0.0] for i in range(15)}
    results += results_for(flaky, dataset="flaky.jsonl")
    return results


@pytest.mark.parametrize("width", [40, 60, 80, 120])
def test_render_fits_the_width(width: int) -> None:
    results = mixed_results()
    gates = {
        LONG_PATH: [Gate("mean_reward", -10000.755), Gate("pass_at_k", 0.755, k=16)],
        MCQA: [Gate("pass_rate", 0.5)],
    }
    for mode in (POINT, LOWER):
        summaries = summarize(results, thresholds={LONG_PATH: 0.755}, gates=gates, mode=mode)
        lines = render_summary(summaries, verbose=True, results=results, width=width)
        too_long = [line for line in lines if len(line) > width]
        assert too_long == []
        assert sum(line.split()[:1] == ["many"] for line in lines) == 1
        assert sum(line.endswith(" ERR") for line in lines) == 1


def test_render_shortens_long_paths_from_the_left_and_trims_ids() -> None:
    results = results_for({LONG_ID: [1.0]}, dataset=LONG_PATH)
    lines = render_summary(summarize(results, thresholds={}, gates={}, mode=POINT), verbose=True, results=results)
    assert lines[0].startswith("…") and lines[0].endswith("/long.jsonl")
    assert len(lines[0]) == 80
    row = lines[-1].split()
    assert row[0].startswith("task-x") and row[0].endswith("x-0042") and "…" in row[0]
    assert row[1] == "1.00"


def test_render_lists_at_most_ten_flaky_tasks() -> None:
    results = results_for({f"f{i}": [1.0, 0.0] for i in range(13)})
    lines = render_summary([summarize_one(results)], verbose=False, width=200)
    (flaky,) = [line for line in lines if line.startswith("  flaky tasks")]
    assert flaky == "  flaky tasks 13 of 13: " + ", ".join(f"f{i}" for i in range(10)) + ", … and 3 more"


# --- JSON report -------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def validator() -> jsonschema.protocols.Validator:
    schema = json_report.schema()  # the file, with the gate kinds' names as the enum of a gate's metric
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def sample_report() -> dict[str, Any]:
    results = [*mixed_results(), rollout("solo", 0, 1.0, dataset="one.jsonl")]
    gates = {LONG_PATH: [Gate("mean_reward", 0.5), Gate("pass_at_k", 0.5, k=2)], "one.jsonl": [Gate("pass_rate", 0.5)]}
    summaries = summarize(results, thresholds={}, gates=gates, mode=LOWER)
    meta = {"gym_version": "0.3.0", "model": "m", "created": "2025-01-01T00:00:00Z", "args": ["-x"], "bad": math.inf}
    return build_report(summaries, results, meta)


def test_report_content() -> None:
    results = results_for({"q0": [1.0, None], "q1": [0.0, 1.0]})
    summary = summarize_one(results, [Gate("pass_at_k", 0.5, k=2)])
    report = build_report([summary], results, {"model": "m"})
    assert report["schema_version"] == REPORT_SCHEMA_VERSION == 1
    assert report["meta"] == {"model": "m"}
    (dataset,) = report["datasets"]
    assert dataset["dataset"] == MCQA and dataset["agent"] is None
    assert (dataset["tasks"], dataset["rollouts"], dataset["errors"], dataset["scored"]) == (2, 4, 1, 3)
    assert dataset["mean_reward"]["estimate"] == pytest.approx(2 / 3)
    assert set(dataset["pass_at_k"]) == {"1", "2"}
    assert dataset["pass_at_k"]["2"] == {"estimate": 1.0, "low": None, "high": None, "n": 1}
    assert dataset["flaky_tasks"] == ["q1"]
    assert dataset["error_classes"] == {"missing": 1}
    assert dataset["verdict"] == "FAIL"  # a rollout errored: that fails a gated session
    (gate,) = dataset["gates"]
    # Point mode: the pass@2 estimate 1.0 >= 0.5, but judged on 3 of the 4 rollouts: at best INCONCLUSIVE.
    assert gate["verdict"] == "INCONCLUSIVE"
    assert gate["metric"] == "pass_at_k" and gate["k"] == 2 and gate["threshold"] == 0.5
    assert gate["label"] == "pass@2 >= 0.50" and gate["mode"] == "point"
    assert len(report["rollouts"]) == 4
    assert report["rollouts"][1] == {
        "nodeid": "datasets/mcqa.jsonl::q0[r1]",
        "dataset": MCQA,
        "task_id": "q0",
        "repeat": 1,
        "agent": "mcqa_simple_agent",
        "status": "error",
        "reward": None,
        "failure_class": "missing",
        "record": "run/rollouts.jsonl:2",
        "input_tokens": None,
        "output_tokens": None,
        "total_tokens": None,
        "latency": None,
    }


def test_report_validates_against_the_schema(validator: jsonschema.protocols.Validator) -> None:
    report = sample_report()
    validator.validate(report)
    assert {d["agent"] for d in report["datasets"]} == {"agent-a", "agent-" + "b" * 70, None}


@pytest.mark.parametrize(
    "spoil",
    [
        lambda r: r.pop("rollouts"),
        lambda r: r.update(schema_version=2),
        lambda r: r.update(extra=1),
        lambda r: r["rollouts"][0].update(reward="1.0"),
        lambda r: r["rollouts"][0].update(status="skipped"),
        lambda r: r["rollouts"][0].pop("record"),
        lambda r: r["datasets"][0].update(tasks=-1),
        lambda r: r["datasets"][0].update(verdict="MAYBE"),
        lambda r: r["datasets"][0]["mean_reward"].update(low="n/a"),
        lambda r: r["datasets"][0]["pass_at_k"].update({"0": r["datasets"][0]["pass_at_k"]["1"]}),
        lambda r: r["datasets"][0]["gates"][0].update(mode="upper"),
    ],
)
def test_spoiled_report_does_not_validate(validator: jsonschema.protocols.Validator, spoil: Any) -> None:
    report = sample_report()
    spoil(report)
    with pytest.raises(jsonschema.ValidationError):
        validator.validate(report)


def test_non_finite_numbers_become_null() -> None:
    results = [rollout("a", 0, 1.0), RolloutResult("x::b[r0]", MCQA, "b", 0, "mcqa_simple_agent", "failed", math.inf)]
    summary = summarize_one(results, [Gate("mean_reward", 0.5)], mode=LOWER)
    report = build_report([summary], results, {"nan": math.nan, "nested": {"x": [math.inf, 1.5]}, "path": Path("p")})
    json.dumps(report, allow_nan=False)  # raises on any nan/inf left
    dataset = report["datasets"][0]
    assert dataset["mean_reward"] == {"estimate": 1.0, "low": None, "high": None, "n": 1}
    assert dataset["gates"][0]["low"] is None and dataset["gates"][0]["high"] is None
    assert report["rollouts"][1]["reward"] is None
    assert report["meta"] == {"nan": None, "nested": {"x": [None, 1.5]}, "path": "p"}


def test_write_and_load_round_trip(tmp_path: Path) -> None:
    report = sample_report()
    path = tmp_path / "out" / "report.json"
    write_report(path, report)
    text = path.read_text(encoding="utf-8")
    assert text.startswith('{\n  "schema_version": 1,') and text.endswith("}\n")
    assert load_report(path) == report
    write_report(path, {**report, "meta": {"second": True}})  # overwrites
    assert load_report(path)["meta"] == {"second": True}
    assert [p.name for p in path.parent.iterdir()] == ["report.json"]  # no temporary left


def test_write_report_refuses_non_finite_and_keeps_the_old_file(tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    write_report(path, {"schema_version": 1, "meta": {}, "datasets": [], "rollouts": []})
    with pytest.raises(ValueError):
        write_report(path, {"schema_version": 1, "meta": {"x": math.nan}, "datasets": [], "rollouts": []})
    assert json.loads(path.read_text())["meta"] == {}
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "not a valid JSON report"),
        (b"\xff\xfe\x00", "not a valid JSON report"),
        ("[1, 2]", "top level is not a JSON object"),
        ('{"meta": {}, "datasets": [], "rollouts": []}', "schema_version None is not supported"),
        ('{"schema_version": 2, "datasets": [], "rollouts": []}', "schema_version 2 is not supported"),
        ('{"schema_version": true, "datasets": [], "rollouts": []}', "schema_version True is not supported"),
        ('{"schema_version": 1, "datasets": []}', "needs 'datasets' and 'rollouts' lists"),
        ('{"schema_version": 1, "datasets": [], "rollouts": [3]}', r"rollouts\[0\] is not an object"),
        (
            '{"schema_version": 1, "datasets": [], "rollouts": [{"dataset": "d", "task_id": "t"}]}',
            r"rollouts\[0\] has no string 'status'",
        ),
        (
            '{"schema_version": 1, "datasets": [], "rollouts": '
            '[{"dataset": "d", "task_id": "t", "status": "passed", "reward": "1"}]}',
            "neither a number nor null",
        ),
    ],
)
def test_load_report_errors_name_the_file(tmp_path: Path, content: str | bytes, message: str) -> None:
    path = tmp_path / "baseline-report.json"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    with pytest.raises(ValueError, match=message) as error:
        load_report(path)
    assert str(path) in str(error.value)


# --- baseline comparison -----------------------------------------------------------------------------------


def baseline_of(results: Sequence[RolloutResult], tmp_path: Path) -> dict[str, Any]:
    summaries = summarize(results, thresholds={}, gates={}, mode=POINT)
    path = tmp_path / "baseline.json"
    write_report(path, build_report(summaries, results, {}))
    return load_report(path)


SIX_PASSING = {f"t{i}": [1.0, 1.0] for i in range(6)}


def test_clear_drop_is_flagged_and_gated(tmp_path: Path) -> None:
    baseline = baseline_of(results_for(SIX_PASSING), tmp_path)
    now = results_for({"t0": [0.0, 0.0], "t1": [0.0, 0.0], "t2": [0.0, 0.0], "t3": [0.0, 0.0]})
    now += results_for({"t4": [1.0, 1.0], "t5": [1.0, 1.0], "new": [0.0, 0.0]})
    (comparison,) = compare_to_baseline(baseline, now)
    assert (comparison.dataset, comparison.agent, comparison.shared_tasks) == (MCQA, None, 6)
    # Differences -1,-1,-1,-1,0,0: mean -2/3, s = sqrt(12/45), se = .210819, t = -3.162278 on 5 df.
    paired = comparison.comparison
    assert paired.mean_difference == pytest.approx(-2 / 3)
    assert paired.low == pytest.approx(-2 / 3 - 0.541926, abs=1e-5)
    assert paired.high == pytest.approx(-2 / 3 + 0.541926, abs=1e-5)
    assert paired.p_value == pytest.approx(0.02503, abs=1e-4)
    assert comparison.dropped == [("t0", 1.0, 0.0), ("t1", 1.0, 0.0), ("t2", 1.0, 0.0), ("t3", 1.0, 0.0)]
    (line,) = max_drop_gate([comparison], 0.1)
    assert line.startswith("datasets/mcqa.jsonl: mean reward fell 0.67 vs the baseline")
    assert "p = 0.025" in line and line.endswith("more than the allowed 0.10")
    assert max_drop_gate([comparison], 0.9) == []  # significant, but smaller than allowed


def test_no_change_is_not_flagged(tmp_path: Path) -> None:
    baseline = baseline_of(results_for(FLAKY), tmp_path)
    (comparison,) = compare_to_baseline(baseline, results_for(FLAKY))
    assert comparison.shared_tasks == 4
    assert comparison.comparison.mean_difference == 0.0 and comparison.comparison.p_value == 1.0
    assert comparison.dropped == []
    assert max_drop_gate([comparison], 0.0) == []


def test_noisy_drop_is_listed_but_not_significant(tmp_path: Path) -> None:
    baseline = baseline_of(results_for({f"t{i}": [v] for i, v in enumerate([1, 1, 1, 0, 0, 0])}), tmp_path)
    now = results_for({f"t{i}": [v] for i, v in enumerate([0.0, 1.0, 0.0, 1.0, 0.0, 0.0])})
    (comparison,) = compare_to_baseline(baseline, now)
    assert comparison.comparison.mean_difference == pytest.approx(-1 / 6)
    assert comparison.comparison.high > 0
    assert [task for task, _, _ in comparison.dropped] == ["t0", "t2"]
    assert max_drop_gate([comparison], 0.0) == []


def test_baseline_matching_uses_scored_rewards_only(tmp_path: Path) -> None:
    baseline = baseline_of(results_for({"a": [1.0, None], "b": [None, None], "c": [0.5, 1.0]}), tmp_path)
    now = results_for({"a": [0.0, 1.0], "b": [1.0, 1.0], "c": [None, None], "d": [1.0, 1.0]})
    (comparison,) = compare_to_baseline(baseline, now)
    assert comparison.shared_tasks == 1  # only "a" is scored in both
    assert comparison.dropped == [("a", 1.0, 0.5)]


def test_baseline_comparison_per_agent_and_new_dataset(tmp_path: Path) -> None:
    old = [rollout("x", 0, 1.0, agent="a1"), rollout("y", 0, 1.0, agent="a1"), rollout("z", 0, 1.0, agent="a2")]
    baseline = baseline_of(old, tmp_path)
    now = [rollout("x", 0, 0.0, agent="a1"), rollout("z", 0, 1.0, agent="a2"), rollout("n", 0, 1.0, dataset="new")]
    comparisons = compare_to_baseline(baseline, now)
    assert [(c.dataset, c.agent, c.shared_tasks) for c in comparisons] == [
        (MCQA, "a1", 1),
        (MCQA, "a2", 1),
        ("new", None, 0),
    ]
    assert comparisons[0].dropped == [("x", 1.0, 0.0)]
    assert max_drop_gate(comparisons, 0.0) == []  # one task: the interval is unbounded
    lines = render_baseline(comparisons)
    assert "new vs baseline" in lines
    assert "  no task was scored in both runs" in lines


def test_compare_to_baseline_rejects_a_report_without_rollouts() -> None:
    with pytest.raises(ValueError, match="rollouts"):
        compare_to_baseline({"schema_version": 1}, [rollout("a", 0, 1.0)])


@pytest.mark.parametrize("bad", [-0.1, math.nan, math.inf])
def test_max_drop_must_be_a_finite_non_negative_number(bad: float) -> None:
    with pytest.raises(ValueError, match="max_drop"):
        max_drop_gate([], bad)


def test_render_baseline(tmp_path: Path) -> None:
    baseline = baseline_of(results_for(SIX_PASSING), tmp_path)
    now = results_for({"t0": [0.5, 0.5], "t1": [0.0, 0.0], "t2": [1.0, 1.0], "t3": [0.0, 1.0]})
    (comparison,) = compare_to_baseline(baseline, now)
    lines = render_baseline([comparison])
    assert lines[0] == "datasets/mcqa.jsonl vs baseline"
    # Differences -.5, -1, 0, -.5: mean -.5, s^2 = .5/3, se = .204124, half width 3.182446 * se = .649612.
    assert lines[1] == "  change      -0.50 [-1.15, 0.15]  p = 0.092, paired t over 4 tasks, 95% CI"
    assert lines[2] == "  fell        3 of 4 tasks"
    # t0 (0.5 < threshold 1.0 twice) and t1 fail every repeat now; t3 is flaky.
    assert lines[3:6] == [
        "  regressed   2 (passed on every baseline repeat, fail on every repeat now),",
        "              improved 0; p = 0.500, McNemar exact over the tasks that flipped",
        "    t0, t1",
    ]
    assert [line.split() for line in lines[6:]] == [  # largest fall first, then task order
        ["t1", "1.00", "->", "0.00"],
        ["t0", "1.00", "->", "0.50"],
        ["t3", "1.00", "->", "0.50"],
    ]


def test_render_baseline_caps_the_list_and_fits_the_width(tmp_path: Path) -> None:
    tasks = {f"{LONG_ID}-{i:02d}": [1.0] for i in range(15)}
    baseline = baseline_of(results_for(tasks, dataset=LONG_PATH), tmp_path)
    now = results_for({task: [0.1 * (i % 3)] for i, task in enumerate(tasks)}, dataset=LONG_PATH)
    (comparison,) = compare_to_baseline(baseline, now)
    assert len(comparison.dropped) == 15
    for width in (40, 80):
        lines = render_baseline([comparison], width=width)
        assert [line for line in lines if len(line) > width] == []
        assert lines[0].startswith("…") and lines[0].endswith(" vs baseline")
        assert lines[-1] == "    … and 5 more"
        assert len([line for line in lines if "->" in line]) == 10
    # Largest fall first: tasks with reward 0.0 (i % 3 == 0) lead.
    assert comparison.dropped[0][2] == 0.0 and comparison.dropped[-1][2] == pytest.approx(0.2)


def test_baseline_comparison_dataclass_shape() -> None:
    comparison = compare_to_baseline({"rollouts": []}, [rollout("a", 0, 1.0)])[0]
    assert isinstance(comparison, BaselineComparison)
    assert comparison.shared_tasks == 0 and comparison.comparison.n == 0 and comparison.dropped == []


# --- suite_properties --------------------------------------------------------------------------------------


def test_suite_properties() -> None:
    summary = summarize_one(results_for(FLAKY), [Gate("mean_reward", 0.5), Gate("pass_at_k", 0.5, k=2)])
    meta = {"gym_version": "0.3.0", "workers": 4, "seconds": 1.5, "args": ["-x"], "none": None, "nan": math.nan,
            f"dataset_sha256.{MCQA}": "ab" * 32}  # fmt: skip
    properties = suite_properties([summary], meta, (1, "gym gates: FAIL - x"))
    assert properties[:5] == [("gym.gym_version", "0.3.0"), ("gym.workers", "4"), ("gym.seconds", "1.5"),
                              ("gym.exit_status", "1"), ("gym.reason", "gym gates: FAIL - x")]  # fmt: skip
    values = dict(properties)
    assert len(values) == len(properties)  # no duplicate names
    p = "gym::datasets/mcqa.jsonl::"
    assert values[f"{p}tasks"] == "4"
    assert values[f"{p}rollouts"] == "8"
    assert values[f"{p}errors"] == "0"
    assert values[f"{p}flaky_tasks"] == "1"
    assert values[f"{p}mean_reward"] == "0.625"
    assert values[f"{p}mean_reward.low"] == "0.0140871"  # test_flaky_task
    assert values[f"{p}mean_reward.high"] == "0.999184"
    assert values[f"{p}pass_rate"] == "0.625"
    assert f"{p}pass_rate.low" in values and f"{p}pass_rate.high" in values
    assert values[f"{p}pass_at_1"] == "0.625"
    assert values[f"{p}pass_at_2"] == "0.75"
    assert values[f"{p}pass_at_2.high"] == "0.999999"  # test_flaky_task (the t interval's 1.54561, clipped: 1)
    assert values[f"{p}gate.mean_reward"] == "PASS" and values[f"{p}gate.mean_reward.threshold"] == "0.5"
    assert values[f"{p}gate.pass_at_2"] == "PASS" and values[f"{p}gate.pass_at_2.threshold"] == "0.5"
    assert values[f"{p}verdict"] == "PASS"
    assert values[f"{p}sha256"] == "ab" * 32
    assert not any(name.startswith(("gym.args", "gym.none", "gym.nan")) for name in values)
    # Every aggregate once: the 0.1 names (gym.<dataset>.<name>, gym.dataset_sha256.<dataset>) are gone.
    assert not [name for name in values if name.startswith(("gym.datasets/", "gym.dataset_sha256."))]


def test_suite_property_names_split_on_the_separator_whatever_the_dataset_is_called() -> None:
    # Dots, brackets and slashes in a dataset's name do not make its property names ambiguous.
    dataset = "data/v1.2/mcqa[hard].jsonl"
    summaries = summarize(results_for(FLAKY, dataset=dataset), thresholds={}, gates={dataset: [Gate("pass_rate", 0.5)]},
                          mode=POINT)  # fmt: skip
    names = [name for name, _ in suite_properties(summaries, {}) if name.startswith("gym::")]
    assert f"gym::{dataset}::gate.pass_rate" in names
    assert names and all(name.split("::")[:2] == ["gym", dataset] and len(name.split("::")) == 3 for name in names)


def test_suite_properties_omit_non_finite_bounds_and_name_agents() -> None:
    results = [rollout("a", 0, 1.0, agent="x"), rollout("b", 0, 0.0, agent="y")]
    properties = dict(suite_properties(summarize(results, thresholds={}, gates={}, mode=POINT), {}))
    p = "gym::datasets/mcqa.jsonl::x::"
    assert properties[f"{p}mean_reward"] == "1"
    assert f"{p}mean_reward.low" not in properties and f"{p}mean_reward.high" not in properties
    assert f"{p}verdict" not in properties  # no gates
    assert properties["gym::datasets/mcqa.jsonl::y::pass_rate"] == "0"
    assert not any(name.startswith("gym::datasets/mcqa.jsonl::mean") for name in properties)


# --- selected rollouts and the session's final status -----------------------------------------------------


def test_a_dataset_selected_but_never_reported_gets_a_summary_whose_gates_have_no_data() -> None:
    results = results_for({"q0": [1.0, 1.0]})
    selected = {MCQA: {"mcqa_simple_agent": 4}, "later.jsonl": {"mcqa_simple_agent": 2}}
    gates = {MCQA: [Gate("mean_reward", 0.5)], "later.jsonl": [Gate("mean_reward", 0.5)]}
    first, later = summarize(results, thresholds={}, gates=gates, mode=POINT, selected=selected)
    assert (first.selected, first.unreported, first.gates[0].verdict) == (4, 2, Verdict.INCONCLUSIVE)
    assert (later.dataset, later.rollouts, later.unreported, later.verdict) == ("later.jsonl", 0, 2, "INCONCLUSIVE")
    status, reason = session_verdict([first, later], inconclusive_passes=True)
    assert status == 1 and "4 of 6 selected rollouts never reported" in reason


def test_final_status_keeps_pytests_own_status_unless_the_gates_decide() -> None:
    from pytest_gym_eval.reporting.conclusion import Conclusion
    from pytest_gym_eval.session.status import final_status

    gated = Conclusion([], [], None, 0, "gym gates: the gate passes")
    assert final_status(1, gated) == (0, "gym gates: the gate passes")  # failed rollouts, passing gate
    assert final_status(1, gated, other_failures=2) == (
        1,
        "2 other tests failed or errored; gym gates: the gate passes",
    )
    assert final_status(2, gated)[0] == 2  # an interrupt is never turned into a pass
    ungated = Conclusion([], [], None, -1, "")
    assert final_status(0, ungated) == (0, "pytest: every selected test passed")
    assert final_status(1, ungated) == (1, "pytest: some tests failed or errored")
    assert final_status(2, ungated)[1].startswith("pytest: interrupted")


@pytest.mark.parametrize("tasks", [12, 50, 500])
def test_one_regressed_task_is_seen_by_the_task_level_gate_never_by_the_paired_test(tasks: int) -> None:
    from pytest_gym_eval.reporting.baseline import max_regressed_gate

    before = results_for({f"t{i}": [1.0, 1.0] for i in range(tasks)})
    baseline = build_report([], before, {})
    now = results_for({f"t{i}": ([0.0, 0.0] if i == 3 else [1.0, 1.0]) for i in range(tasks)})
    (comparison,) = compare_to_baseline(baseline, now)
    # One drop among n tasks: t = -1 for any n and any size of drop, so the paired test never sees it.
    assert comparison.comparison.p_value == pytest.approx(0.33, abs=0.02)
    assert max_drop_gate([comparison], 0.0) == []
    assert comparison.regressed == ("t3",) and comparison.improved == () and comparison.mcnemar_p == 1.0
    (line,) = max_regressed_gate([comparison], 0)
    assert "1 task regressed" in line and "t3" in line
    assert max_regressed_gate([comparison], 1) == []


def test_flaky_tasks_are_neither_regressed_nor_improved() -> None:
    baseline = build_report([], results_for({"a": [1.0, 0.0], "b": [0.0, 0.0], "c": [1.0, 1.0]}), {})
    (comparison,) = compare_to_baseline(baseline, results_for({"a": [0.0, 0.0], "b": [1.0, 1.0], "c": [1.0, 0.0]}))
    assert comparison.regressed == () and comparison.improved == ("b",)


def test_a_report_path_that_is_a_directory_is_named_in_the_error(tmp_path: Path) -> None:
    # The error names the path asked for, never the temporary file written beside it, and leaves nothing.
    folder = tmp_path / "reports"
    folder.mkdir()
    with pytest.raises(IsADirectoryError) as raised:
        write_text_atomic(folder, "{}")
    assert raised.value.filename == str(folder) and ".tmp" not in str(raised.value)
    assert list(folder.iterdir()) == [] and sorted(p.name for p in tmp_path.iterdir()) == ["reports"]


def test_a_report_in_a_folder_that_cannot_hold_files_is_named_in_the_error() -> None:
    with pytest.raises(OSError) as raised:
        write_text_atomic("/proc/report.md", "text")  # /proc takes no new files, whoever runs this
    assert raised.value.filename == "/proc/report.md" and ".tmp" not in str(raised.value)


def test_many_repeats_show_a_compact_set_of_pass_at_k_and_the_json_report_keeps_every_k() -> None:
    from pytest_gym_eval.reporting.conclusion import Conclusion
    from pytest_gym_eval.reporting.markdown import render_markdown

    rewards = {f"t{n}": [float((n + r) % 3 == 0) for r in range(60)] for n in range(3)}
    results = results_for(rewards)
    summary = summarize_one(results, [Gate("pass_at_k", 0.5, k=12)])
    assert sorted(summary.pass_at_k) == list(range(1, 61))
    shown = [1, 2, 4, 8, 12, 16, 32, 60]  # powers of two, the repeats, and the gate's k
    lines = render_summary([summary], verbose=False)
    terminal = [line.split()[0] for line in lines if line.strip().startswith("pass@") and ">=" not in line]
    assert terminal == [f"pass@{k}" for k in shown]
    markdown = render_markdown(Conclusion([summary], [], None, 0, "gym gates: ..."), results)
    rows = [line.split("|")[1].strip() for line in markdown.splitlines() if line.startswith("| pass@")]
    assert [row for row in rows if ">=" not in row] == [f"pass@{k}" for k in shown]
    report = build_report([summary], results, {})
    assert sorted(map(int, report["datasets"][0]["pass_at_k"])) == list(range(1, 61))
    assert len([name for name, _ in suite_properties([summary], {}) if name.endswith("::pass_at_37")]) == 1


def test_the_markdown_summary_says_what_it_did_not_count_and_why_rollouts_failed_their_checks() -> None:
    """As the terminal does: the "not counted" line of test functions' rollouts, and the reasons tests gave with the
    metrics of the rollouts that failed (every metric with a reason) or failed a check (a metric at 0)."""
    from pytest_gym_eval.reporting.conclusion import Conclusion
    from pytest_gym_eval.reporting.markdown import render_markdown

    results = results_for({"q1": [1.0], "q2": [0.0], "q3": [1.0]})
    results[0] = replace(results[0], metrics=(("terse", 0.0),), metric_reasons=(("terse", "3 sentences, not 1"),))
    results[1] = replace(results[1], metrics=(("chars", 12.0),), metric_reasons=(("chars", "a | b\nc"),))
    results[2] = replace(results[2], metrics=(("terse", 1.0),), metric_reasons=(("terse", "1 sentence"),))
    note = "2 rollouts of test functions beyond the dataset's 1 repeat (test_x.py::test_a: repeats=3; ...)"
    summary = replace(summarize_one(results), not_counted=note)
    text = render_markdown(Conclusion([summary], [], None, 0, "gym gates: ..."), results)
    assert f"| not counted | {note} |" in text.splitlines()
    table = text[text.index("Why (2 rollouts failed or failed a check") :].splitlines()
    assert table[2:6] == [
        "| rollout | reward | metric = value (reason) |",
        "|---|---|---|",
        f"| `{MCQA}::q1[r0]` | 1.00 | terse = 0 (3 sentences, not 1) |",  # passed, but its check failed
        f"| `{MCQA}::q2[r0]` | 0.00 | chars = 12 (a \\| b c) |",  # failed: every reason it has
    ]
    assert "1 sentence" not in text  # q3 passed and held its check
    plain = render_markdown(Conclusion([summarize_one(results_for({"q1": [1.0]}))], [], None, 0, ""), [])
    assert "not counted" not in plain and "Why (" not in plain
