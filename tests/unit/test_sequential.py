"""The betting confidence sequence behind ``--gym-adaptive`` (pytest_gym_eval.stats.sequential)."""

from __future__ import annotations

import math
import random

import pytest

from pytest_gym_eval.stats.gates import Gate, Verdict
from pytest_gym_eval.stats.sequential import (
    HEDGE,
    TRUNCATION,
    BettingSequence,
    GateSequences,
    RewardRange,
    gate_values,
    judge_waves,
    parse_reward_range,
    reason,
    simulate,
    verdict,
    wave_ends,
)

ALPHA = 0.05


def test_one_wave_capital_by_hand() -> None:
    sequence = BettingSequence(ALPHA)
    wave = [1.0, 1.0, 1.0, 1.0, 0.0]
    bet = math.sqrt(2 * math.log(2 / ALPHA) / (0.25 * 5))  # no data yet: variance 1/4, horizon 5
    assert sequence.bet(5) == pytest.approx(bet)
    sequence.add_wave(wave)
    m = 0.1
    up = min(bet, TRUNCATION / m)
    down = min(bet, TRUNCATION / (1 - m))
    plus = 4 * math.log(1 + up * (1 - m)) + math.log(1 - up * m)
    minus = 4 * math.log(1 - down * (1 - m)) + math.log(1 + down * m)
    assert sequence.log_capital(m) == pytest.approx((plus, minus))


def test_bounds_are_where_the_capital_reaches_one_over_alpha() -> None:
    sequence = BettingSequence(ALPHA)
    bounds = sequence.add_wave([1.0] * 8 + [0.0] * 2)
    assert bounds.estimate == pytest.approx(0.8)
    assert 0.0 < bounds.low < 0.8 < bounds.high <= 1.0
    limit = math.log(1 / (HEDGE * ALPHA))
    assert sequence.log_capital(bounds.low - 1e-6)[0] >= limit > sequence.log_capital(bounds.low + 1e-6)[0]
    if bounds.high < 1.0:
        assert sequence.log_capital(bounds.high + 1e-6)[1] >= limit > sequence.log_capital(bounds.high - 1e-6)[1]


def test_no_data_covers_the_whole_range() -> None:
    bounds = BettingSequence(reward_range=RewardRange(0, 3)).bounds
    assert math.isnan(bounds.estimate)
    assert (bounds.low, bounds.high, bounds.observations, bounds.waves) == (0.0, 3.0, 0, 0)
    assert verdict(bounds, 1.0) is Verdict.INCONCLUSIVE


def test_capital_is_monotone_in_the_candidate_mean() -> None:
    sequence = BettingSequence(ALPHA)
    rng = random.Random(3)
    for _ in range(3):
        sequence.add_wave([rng.random() for _ in range(40)])
    grid = [i / 50 for i in range(51)]
    plus = [sequence.log_capital(m)[0] for m in grid]
    minus = [sequence.log_capital(m)[1] for m in grid]
    assert plus == sorted(plus, reverse=True)
    assert minus == sorted(minus)


def test_more_agreeing_data_narrows_the_sequence() -> None:
    sequence = BettingSequence(ALPHA)
    lows, highs = [], []
    for _ in range(4):
        bounds = sequence.add_wave([1.0] * 9 + [0.0])
        lows.append(bounds.low)
        highs.append(bounds.high)
    assert lows == sorted(lows) and lows[-1] > lows[0]
    assert highs == sorted(highs, reverse=True)


def test_a_better_wave_never_lowers_the_bounds() -> None:
    worse, better = BettingSequence(ALPHA), BettingSequence(ALPHA)
    a = worse.add_wave([1.0] * 6 + [0.0] * 4)
    b = better.add_wave([1.0] * 7 + [0.0] * 3)
    assert b.low >= a.low and b.high >= a.high


def test_mirrored_data_mirrors_the_bounds() -> None:
    data = [0.2, 0.9, 1.0, 0.4, 0.7, 0.75, 1.0, 0.0]
    a = BettingSequence(ALPHA).add_wave(data)
    b = BettingSequence(ALPHA).add_wave([1.0 - x for x in data])
    assert b.low == pytest.approx(1.0 - a.high, abs=1e-9)
    assert b.high == pytest.approx(1.0 - a.low, abs=1e-9)


def test_a_declared_range_rescales() -> None:
    data = [0.0, 3.0, 1.5, 3.0, 2.25, 3.0]
    wide = BettingSequence(ALPHA, RewardRange(0.0, 3.0)).add_wave(data)
    unit = BettingSequence(ALPHA).add_wave([x / 3 for x in data])
    assert (wide.estimate, wide.low, wide.high) == pytest.approx((3 * unit.estimate, 3 * unit.low, 3 * unit.high))


def test_values_outside_the_range_are_refused() -> None:
    with pytest.raises(ValueError, match=r"outside the declared range \[0, 1\]"):
        BettingSequence().add_wave([0.5, 2.0])
    with pytest.raises(ValueError, match="LO < HI"):
        RewardRange(1.0, 1.0)
    assert parse_reward_range("-1:3") == RewardRange(-1.0, 3.0)
    with pytest.raises(ValueError, match="expected LO:HI"):
        parse_reward_range("3")


def test_wave_ends_double_up_to_the_ceiling() -> None:
    assert wave_ends(2, 8) == [2, 4, 8]
    assert wave_ends(1, 5) == [1, 2, 4, 5]
    assert wave_ends(3, 3) == [3]
    with pytest.raises(ValueError):
        wave_ends(0, 4)


def test_gate_values_per_metric() -> None:
    rewards = [[1.0, 0.0, 0.5, 1.0], [0.0, 0.0, 0.0, 1.0]]
    passed = [[r >= 1.0 for r in task] for task in rewards]
    assert gate_values(Gate("mean_reward", 0.5), rewards, passed, 0, 2) == [1.0, 0.0, 0.0, 0.0]
    assert gate_values(Gate("pass_rate", 0.5), rewards, passed, 2, 4) == [0.0, 1.0, 0.0, 1.0]
    pass_at_2 = Gate("pass_at_k", 0.5, k=2)
    assert gate_values(pass_at_2, rewards, passed, 0, 3) == [1.0, 0.0]  # the block of repeats 0-1 only
    assert gate_values(pass_at_2, rewards, passed, 3, 4) == [1.0, 1.0]  # the block 2-3 ends in this wave
    assert gate_values(pass_at_2, rewards, passed, 0, 1) == []
    assert gate_values(Gate("mean_reward", 0.5), rewards, passed, 0, 5) is None  # not every task has 5 repeats


def test_judge_waves_decides_far_gates_and_says_why() -> None:
    rewards = [[1.0] * 4 for _ in range(20)] + [[0.0] * 4 for _ in range(5)]
    passed = [[r >= 1.0 for r in task] for task in rewards]
    gates = [Gate("mean_reward", 0.3), Gate("pass_rate", 0.99), Gate("mean_reward", 0.8)]
    results = judge_waves(gates, rewards, passed, [2])
    assert [r.verdict for r in results] == [Verdict.PASS, Verdict.FAIL, Verdict.INCONCLUSIVE]
    assert results[0].interval.low >= 0.3 and results[1].interval.high < 0.99
    text = reason(results[:2], 2)
    assert text.startswith("not needed: mean-reward gate decided PASS after 2 repeats, lower bound 0.")
    assert ">= 0.30; pass-rate gate decided FAIL after 2 repeats, upper bound 0." in text
    five = [[1.0] * 4] * 4 + [[0.0] * 4]  # after 4 repeats the upper bound is 0.9954...
    tight = judge_waves([Gate("pass_rate", 0.999)], five, [[r >= 1.0 for r in t] for t in five], [2, 4])
    assert tight[0].verdict is Verdict.FAIL and tight[0].interval.high > 0.995
    assert reason(tight, 2).endswith(f"upper bound {tight[0].interval.high:.3f} < 0.999")  # never "1.00 < 1.00"
    with pytest.raises(ValueError, match="needs 8 repeats"):
        judge_waves(gates, rewards, passed, [2, 8])


def test_gate_sequences_equal_judging_at_once() -> None:
    rng = random.Random(5)
    rewards = [[rng.choice([0.0, 0.5, 1.0]) for _ in range(8)] for _ in range(30)]
    passed = [[r >= 1.0 for r in task] for task in rewards]
    gates = [Gate("mean_reward", 0.5), Gate("pass_at_k", 0.6, k=2)]
    sequences = GateSequences(gates)
    for end in (2, 4, 8):
        step = sequences.add_wave(rewards, passed, end)
    assert step == judge_waves(gates, rewards, passed, [2, 4, 8])


def test_the_gate_passes_wrongly_at_most_alpha_at_the_threshold() -> None:
    """The issue's simulation: 2,000 evaluations of 20 tasks (half easy, half hard) whose mean reward is exactly
    the threshold, up to 8 repeats in waves of 2, 4, 8. A PASS is wrong there (the mean does not exceed it). The
    bound is the nominal 5% plus Monte Carlo slack: three standard errors of a 5% rate over 2,000 runs
    (3 x sqrt(0.05 x 0.95 / 2000) = 1.5%)."""
    rng = random.Random(20240116)
    threshold, runs = 0.7, 2000
    task_means = [threshold + (0.25 if t % 2 else -0.25) for t in range(20)]
    assert sum(task_means) / len(task_means) == pytest.approx(threshold)
    gate = Gate("mean_reward", threshold)
    passes = sum(simulate(task_means, [gate], 2, 8, rng)[0][0].verdict is Verdict.PASS for _ in range(runs))
    assert passes / runs <= ALPHA + 3 * math.sqrt(ALPHA * (1 - ALPHA) / runs)


def test_far_gates_stop_early_and_near_ones_run_on() -> None:
    rng = random.Random(7)
    gate = Gate("mean_reward", 0.7)
    high = [min(1.0, 0.95 + (0.05 if t % 2 else -0.05)) for t in range(100)]
    results, spent = simulate(high, [gate], 2, 8, rng)
    assert results[0].verdict is Verdict.PASS and spent == 200  # the first wave decides
    low = [0.3] * 100
    results, spent = simulate(low, [gate], 2, 8, rng)
    assert results[0].verdict is Verdict.FAIL and spent == 200
    near = [0.71] * 100
    results, spent = simulate(near, [gate], 2, 8, rng)
    assert spent == 800 and results[0].verdict is not Verdict.FAIL  # too close to tell within the ceiling
