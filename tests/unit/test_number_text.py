"""Tests of pytest_gym_eval.core.number_text: the one way an estimate, a bound and a threshold print, and that the
gates,
the comparisons and the reports all print through it."""

from __future__ import annotations

import math

import pytest

from pytest_gym_eval.core import number_text
from pytest_gym_eval.reporting import fmt
from pytest_gym_eval.stats.comparison import ComparisonGate, ComparisonResult, Hypothesis, judge_comparison
from pytest_gym_eval.stats.gates import Gate, GateMode, GateResult, judge
from pytest_gym_eval.stats.intervals import Interval


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0.8, "0.80"),
        (-0.254, "-0.25"),
        (-0.001, "0.00"),  # rounds to zero: no "-0.00"
        (-0.0, "0.00"),
        (-0.005, "-0.01"),
        (999_999.0, "999999.00"),
        (1_234_567.0, "1.23e+06"),  # 3 significant digits from a million on
        (-1_234_567.0, "-1.23e+06"),
        (math.inf, "n/a"),  # the bound of an interval over one task
        (-math.inf, "n/a"),
        (math.nan, "n/a"),
    ],
)
def test_number(value: float, text: str) -> None:
    assert number_text.number(value) == text


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0.7, "0.70"),
        (0.755, "0.755"),  # no silent rounding of what the user typed
        (-0.025, "-0.025"),
        (12.0, "12.00"),
        (-0.0, "0.00"),
        (math.inf, "n/a"),
    ],
)
def test_threshold(value: float, text: str) -> None:
    assert number_text.threshold(value) == text


def test_interval() -> None:
    assert number_text.interval(0.8, 0.24, 1.36) == "0.80 [0.24, 1.36]"
    assert number_text.interval(0.0, -0.001, math.inf) == "0.00 [0.00, n/a]"


@pytest.mark.parametrize("low", [-0.001, -1e-12])
def test_gates_comparisons_and_reports_print_a_bound_near_zero_alike(low: float) -> None:
    """A bound that rounds to zero prints 0.00 in a gate's line, a comparison's line and the reports' tables."""
    interval = Interval(0.3, low, 0.6, 10)
    gate = GateResult(
        Gate("mean_reward", 0.1), interval, judge(interval, 0.1, GateMode.LOWER_BOUND), GateMode.LOWER_BOUND
    )
    assert gate.describe() == "mean reward 0.30 [0.00, 0.60]: interval straddles 0.10: INCONCLUSIVE"
    superiority = ComparisonGate(Hypothesis.SUPERIORITY)
    comparison = ComparisonResult(superiority, interval, judge_comparison(interval, superiority))
    assert comparison.describe() == (
        "superiority: candidate - baseline 0.30 [0.00, 0.60], interval straddles 0.00: INCONCLUSIVE"
    )
    assert fmt.interval(interval) == "0.30 [0.00, 0.60]"


def test_gates_and_reports_print_a_large_custom_metric_alike() -> None:
    """A custom metric in the millions prints with 3 significant digits in the gate's line as in the summary."""
    interval = Interval(2_500_000.0, 2_000_000.0, 3_000_000.0, 10)
    gate = Gate("custom", 1_000_000.0, custom="tokens")
    result = GateResult(gate, interval, judge(interval, gate.threshold, GateMode.LOWER_BOUND), GateMode.LOWER_BOUND)
    assert result.describe().startswith(f"{gate.name} {fmt.interval(interval)}: lower bound 2e+06 >= ")
