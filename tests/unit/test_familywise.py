"""Family-wise gates (Holm's step-down procedure) and the INCONCLUSIVE hint: p-values against a threshold, Holm's
levels, the re-judging of a session's gates, and how much more data would decide a gate (hand-worked values)."""

from __future__ import annotations

import math

import pytest

from pytest_gym_eval.stats import familywise as fw
from pytest_gym_eval.stats import gates as g
from pytest_gym_eval.stats.comparison import ComparisonGate, Hypothesis, compare
from pytest_gym_eval.stats.intervals import (
    Interval,
    binomial_test_p,
    clustered_standard_error,
    holm_levels,
    score_test_p,
    t_test_p,
    wilson_interval,
)


def test_t_test_p_hand_worked() -> None:
    # df 1 is the Cauchy law: P(T > 1) = 1/4; df 2: P(T > t) = 1/2 - t / (2 sqrt(2 + t^2)).
    assert t_test_p(0.7, 0.5, 0.2, 1) == pytest.approx(0.25)
    assert t_test_p(0.3, 0.5, 0.1, 2) == pytest.approx(0.5 - 1 / math.sqrt(6))  # below the threshold: same tail
    # Published: t_{0.975, 4} = 2.776 (Student's t table, e.g. NIST/SEMATECH e-Handbook 1.3.6.7.2).
    assert t_test_p(2.776445, 0.0, 1.0, 4) == pytest.approx(0.025, abs=1e-6)


def test_t_test_p_edges() -> None:
    assert t_test_p(0.6, 0.5, 0.0, 3) == 0.0  # identical values away from the threshold
    assert t_test_p(0.5, 0.5, 0.0, 3) == 1.0
    assert t_test_p(math.nan, 0.5, 0.1, 3) == 1.0
    assert t_test_p(0.9, 0.5, 0.1, 0) == 1.0  # one task: no evidence
    with pytest.raises(ValueError, match="standard error"):
        t_test_p(0.6, 0.5, -1.0, 3)


def test_score_test_p_hand_worked_and_inverts_wilson() -> None:
    # 60 of 100 against 0.5: z = 0.1 / sqrt(0.25 / 100) = 2, P(Z >= 2) = 0.0227501.
    p = score_test_p(60, 100, 0.5)
    assert p == pytest.approx(0.0227501319, abs=1e-9)
    # The Wilson interval at confidence 1 - 2p has its lower bound exactly at 0.5.
    assert wilson_interval(60, 100, 1 - 2 * p).low == pytest.approx(0.5, abs=1e-9)
    assert score_test_p(40, 100, 0.5) == pytest.approx(p)
    assert score_test_p(0, 0, 0.5) == 1.0
    assert score_test_p(3, 10, 0.0) == 0.0 and score_test_p(10, 10, 1.0) == 1.0
    with pytest.raises(ValueError, match="p0"):
        score_test_p(3, 10, 1.5)


def test_holm_levels_hand_worked() -> None:
    # Sorted: 0.005 <= 0.05/4 rejected, 0.01 <= 0.05/3 rejected, 0.03 > 0.05/2 stops: it and 0.04 at 0.025.
    levels = holm_levels([0.01, 0.04, 0.03, 0.005], 0.05)
    assert levels == pytest.approx([0.05 / 3, 0.025, 0.025, 0.0125])
    assert holm_levels([0.001, 0.002], 0.05) == pytest.approx([0.025, 0.05])  # both rejected: the last at alpha
    assert holm_levels([], 0.05) == []
    with pytest.raises(ValueError, match="alpha"):
        holm_levels([0.1], 1.0)


def test_clustered_standard_error_hand_worked() -> None:
    # Task means 0.5 and 1: s^2 = 0.125, se^2 = 0.125 / 2; the CR1 form over rollouts gives the same.
    assert clustered_standard_error([[1, 0], [1, 1]]) == pytest.approx((0.75, 0.25, 2))
    mean, error, tasks = clustered_standard_error([[0.4]])
    assert (mean, tasks) == (0.4, 1) and math.isnan(error)


def _basis(rewards: list[list[float]], metric: str = "mean_reward", k: int | None = None) -> g.Basis:
    counts = tuple((len(task), sum(1 for r in task if r >= 1.0)) for task in rewards)
    return g.Basis(metric, tuple(tuple(task) for task in rewards), counts, k)


def test_p_value_is_the_level_at_which_the_interval_touches_the_threshold() -> None:
    basis = _basis([[1, 0], [1, 1], [1, 1], [0, 1], [1, 1], [1, 1]])
    p = basis.p_value(0.5)
    assert basis.interval(1 - p).low == pytest.approx(0.5, abs=1e-7)
    assert g.judge(basis.interval(1 - p * 1.01), 0.5, g.GateMode.LOWER_BOUND) is g.Verdict.PASS
    assert g.judge(basis.interval(1 - p * 0.99), 0.5, g.GateMode.LOWER_BOUND) is g.Verdict.INCONCLUSIVE


def test_hint_says_when_repeats_would_not_help() -> None:
    # The spread lies between tasks (each task always scores alike): no repeats on the same 4 tasks decide it.
    hint = _basis([[1, 1], [0, 0], [1, 1], [1, 1]]).hint(0.5, 0.95)
    assert hint.repeats is None and hint.more is not None
    assert hint.text.endswith("more repeats alone would not: the spread lies between tasks")


def test_hint_without_an_effect() -> None:
    hint = _basis([[1, 0], [0, 1], [1, 1], [0, 0]]).hint(0.5, 0.95)
    assert hint.more is None and "would not likely decide it" in hint.text


def test_evaluate_hints_an_inconclusive_gate_only() -> None:
    rewards = [[1.0, 0.0], [1.0, 1.0], [0.0, 0.0], [1.0, 1.0]]
    passed = [[r >= 1.0 for r in task] for task in rewards]
    gates = [g.Gate("mean_reward", 0.5), g.Gate("pass_rate", 0.0)]
    inconclusive, passing = g.evaluate(gates, rewards, passed, g.GateMode.LOWER_BOUND)
    assert inconclusive.verdict is g.Verdict.INCONCLUSIVE and inconclusive.hint is not None
    assert inconclusive.describe().endswith(inconclusive.hint.text)
    assert "interval straddles 0.50: INCONCLUSIVE; about" in inconclusive.describe()
    assert passing.verdict is g.Verdict.PASS and passing.hint is None


def _dataset(estimate_tasks: int, passes: int) -> list[g.GateResult]:
    rewards = [[1.0] if t < passes else [0.0] for t in range(estimate_tasks)]
    passed = [[r >= 1.0 for r in task] for task in rewards]
    return g.evaluate([g.Gate("pass_rate", 0.5)], rewards, passed, g.GateMode.LOWER_BOUND)


def test_holm_judges_the_session_as_one_family() -> None:
    # 61 of 100 against 0.5: the exact binomial test the pass rate's Clopper-Pearson interval inverts, two-sided p =
    # 2 P(X >= 61), X ~ Binomial(100, 0.5) = 0.0352 (scipy's 2 * binom.sf(60, 100, 0.5)): PASS at 95% alone, not at
    # 0.05/3 (Holm's first step), which stops the procedure there: the other two are judged at 0.05/3 too.
    alone = [_dataset(100, 61), _dataset(100, 55), _dataset(100, 50)]
    assert alone[0][0].verdict is g.Verdict.PASS
    first = [r[0] for r in alone]
    judged = fw.holm(alone, 0.95)
    family = [r[0] for r in judged]
    assert [r.familywise.level for r in family if r.familywise] == pytest.approx([0.05 / 3] * 3)
    assert family[0].familywise == g.Familywise(
        "Holm", 3, pytest.approx(2 * binomial_test_p(61, 100, 0.5)), pytest.approx(0.05 / 3)
    )
    assert family[0].familywise.p_value == pytest.approx(0.0352002, abs=1e-7)
    # the p-value is the level at which the interval's lower bound is exactly the threshold
    assert alone[0][0].basis is not None
    assert alone[0][0].basis.interval(1.0 - family[0].familywise.p_value).low == pytest.approx(0.5, abs=1e-9)
    assert family[0].verdict is g.Verdict.INCONCLUSIVE and family[0].hint is not None
    assert family[0].interval.low < first[0].interval.low  # the wider, adjusted interval
    assert "(Holm over 3 gates: 98.33% interval, p 0.035)" in family[0].describe()


def test_holm_rejects_step_by_step() -> None:
    # 80 of 100 (p ~ 1e-9) is decided at 0.05/2, which lets 62 of 100 (p 0.021) be judged at 0.05: both PASS.
    judged = fw.holm([_dataset(100, 80), _dataset(100, 62)], 0.95)
    assert [r[0].verdict for r in judged] == [g.Verdict.PASS, g.Verdict.PASS]
    assert [r[0].familywise.level for r in judged if r[0].familywise] == pytest.approx([0.025, 0.05])


def test_holm_leaves_point_gates_and_cut_short_ones_out() -> None:
    rewards, passed = [[1.0], [0.0], [1.0]], [[True], [False], [True]]
    point = g.evaluate([g.Gate("mean_reward", 0.5)], rewards, passed, g.GateMode.POINT)
    cut = g.incomplete(_dataset(100, 62), 100, 120)
    member = _dataset(100, 62)
    judged = fw.holm([point, cut, member], 0.95)
    assert judged[0] == point and judged[0][0].familywise is None
    assert judged[1] == cut and judged[1][0].familywise is None
    assert judged[2][0].familywise == g.Familywise("Holm", 1, pytest.approx(0.0210, abs=1e-4), pytest.approx(0.05))


def test_a_custom_metric_gate_and_a_policy_comparison_say_what_would_decide_them() -> None:
    custom = g.custom_gate(g.Gate("custom", 0.5, custom="terse"), Interval(0.6, 0.6 - 0.2262, 0.8, 10),
                           g.GateMode.LOWER_BOUND)  # fmt: skip
    assert custom.verdict is g.Verdict.INCONCLUSIVE and custom.hint is not None
    assert custom.describe().endswith(f"; {custom.hint.text}") and custom.hint.unit == "tasks"
    # 6 tasks, the candidate 0 or 0.5 worse a task: difference -0.17 [-0.40, 0.07] against the margin -0.1.
    baseline = {(f"t{i}", 0): 1.0 for i in range(6)}
    candidate = {(f"t{i}", 0): 1.0 if i % 3 else 0.5 for i in range(6)}
    gate = ComparisonGate(Hypothesis.NON_INFERIORITY, 0.1)
    (result,) = compare(baseline, candidate, [gate]).results
    assert result.verdict is g.Verdict.INCONCLUSIVE and result.hint is not None
    assert result.describe().endswith(f"; {result.hint.text}") and result.hint.unit == "tasks"


def test_a_comparisons_p_value_is_the_level_at_which_its_interval_touches_the_margin() -> None:
    from pytest_gym_eval.stats.comparison import PairedBasis, rejudged

    baseline = {(f"t{i}", 0): 1.0 for i in range(20)}
    candidate = {(f"t{i}", 0): float(i >= 3) for i in range(20)}
    gate = ComparisonGate(Hypothesis.NON_INFERIORITY, 0.3)
    basis = PairedBasis(baseline, candidate)
    p = basis.p_value(gate)
    assert 0.0 < p < 1.0
    assert basis.interval(1.0 - p * 1.001).low >= -0.3 > basis.interval(1.0 - p * 0.999).low
    result = compare(baseline, candidate, [gate]).results[0]
    family = fw.holm_family([0.001, p], 0.95)
    assert [f.level for f in family] == [pytest.approx(0.025), pytest.approx(0.05)]
    judged = rejudged(result, family[1])
    assert judged.interval == basis.interval(0.95) and judged.familywise == family[1]
    assert "(Holm over 2 gates: 95% interval, p " in judged.describe()
