"""The drift alarm: hand-worked CUSUM values, its false-alarm rate on simulated stable histories, and detection."""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Callable
from datetime import datetime, timezone

import pytest

from pytest_gym_eval.history.drift import (
    FALSE_ALARM_BOUND,
    cusum_drift,
    self_starting_cusum,
    series_drift,
    task_means,
)
from pytest_gym_eval.history.store import RunRollouts, StoredRollout, StoredRun

Run = dict[str, list[float]]


def test_hand_worked_statistics_and_alarm() -> None:
    runs = [{"a": [1.0], "b": [0.0]}, {"a": [0.0], "b": [1.0]}, {"a": [0.0], "b": [0.0]}, {"a": [0.0], "b": [0.0]}]
    # v = pooled variance of each task over runs 1-2 = (0.5 + 0.5) / 2 = 0.5.
    # Run 3: spread = 0.5/2 + 0.5 * (1/2 + 1/2) / 2² = 0.375; z = (0 - 0.5)/sqrt(0.375) = -0.816497; S = 0.316497.
    # Run 4: spread = 0.25 + 0.5 * 1.5 / 3² = 0.333333; z = (0 - 1/3)/sqrt(1/3) = -0.577350; S = 0.393847.
    result = self_starting_cusum(runs, reference_runs=2, h=0.35)
    assert result.statistics[:2] == (None, None)
    assert result.statistics[2] == pytest.approx(0.316497, abs=1e-6)
    assert result.statistics[3] == pytest.approx(0.393847, abs=1e-6)
    assert result.task_sd == pytest.approx(math.sqrt(0.5))
    assert result.alarm_index == 3
    assert self_starting_cusum(runs, reference_runs=2, h=0.4).alarm_index is None


def test_a_reference_where_nothing_varied_uses_the_floor() -> None:
    runs: list[Run] = [{"a": [1.0], "b": [1.0]}] * 3 + [{"a": [1.0], "b": [0.0]}]
    # v = 0 floored at 0.1² = 0.01: spread = 0.01/2 + 0.01 * 1.5 / 9; z = -0.5 / sqrt(0.0066667) = -6.1237
    result = self_starting_cusum(runs, reference_runs=3)
    assert result.task_sd == pytest.approx(0.1)
    assert result.statistics[3] == pytest.approx(6.1237 - 0.5, abs=1e-4)
    assert result.alarm_index == 3  # one task of two lost: a drop of 0.5 in the mean


def test_a_rise_is_no_alarm() -> None:
    runs: list[Run] = [{"a": [0.0], "b": [1.0]}, {"a": [1.0], "b": [0.0]}] * 3 + [{"a": [1.0], "b": [1.0]}] * 5
    result = self_starting_cusum(runs, reference_runs=2)
    assert result.alarm_index is None
    assert result.statistics[-1] == 0.0


def test_bad_parameters_are_refused() -> None:
    with pytest.raises(ValueError, match="reference_runs >= 2"):
        self_starting_cusum([], reference_runs=1)
    with pytest.raises(ValueError, match="at least one task"):
        self_starting_cusum([{"a": [1.0]}, {}])


def _history(
    rng: random.Random, probabilities: list[float], runs: int = 20, drop: Callable[[int], float] | None = None
) -> list[Run]:
    """One rollout per task per run; run t's pass probabilities are lowered by ``drop(t)``."""
    history = []
    for t in range(runs):
        lower = drop(t) if drop else 0.0
        history.append({str(i): [1.0 if rng.random() < p - lower else 0.0] for i, p in enumerate(probabilities)})
    return history


@pytest.mark.parametrize(
    "task_probabilities",
    [
        lambda rng: rng.random(),  # pass probabilities spread over [0, 1]
        lambda rng: rng.choice([0.0, 1.0, 1.0, 0.5, 0.9, 0.2]),  # many tasks that never vary (the sd floor)
    ],
    ids=["uniform", "mostly-deterministic"],
)
def test_false_alarm_rate_on_stable_histories_stays_under_the_documented_bound(
    task_probabilities: Callable[[random.Random], float],
) -> None:
    rng = random.Random(2026)
    histories = 2000
    alarms = 0
    for _ in range(histories):
        probabilities = [task_probabilities(rng) for _ in range(40)]
        alarms += self_starting_cusum(_history(rng, probabilities)).alarm_index is not None
    # Measured with this seed: 0.55 % (uniform) and 1.1 % (mostly deterministic); Siegmund's ARL0 ~ 930 gives
    # 15 watched runs / 930 = 1.6 %.
    assert alarms / histories <= FALSE_ALARM_BOUND


def test_a_slow_decline_no_single_run_shows_is_detected() -> None:
    rng = random.Random(11)
    histories = 200
    detected = 0
    noise = []
    for _ in range(histories):
        probabilities = [rng.random() for _ in range(40)]
        history = _history(rng, probabilities, drop=lambda t: 0.0 if t < 5 else 0.02 * (t - 4))
        means = [sum(r[0] for r in run.values()) / len(run) for run in history]
        noise += [abs(after - before) for before, after in itertools.pairwise(means[:5])]
        detected += self_starting_cusum(history).alarm_index is not None
    # The level loses 0.02 a run from run 6 on (0.30 by run 20); measured: all 200 alarm, at run 14 on average.
    assert detected / histories >= 0.95
    # ... while two stable runs differ by more than twice the drift's step: a run-to-run comparison cannot see it.
    assert sum(noise) / len(noise) > 2 * 0.02


def _stored(run_id: int, rewards: dict[str, float | None]) -> RunRollouts:
    moment = datetime(2026, 11, 30, 12, run_id, tzinfo=timezone.utc)
    run = StoredRun(run_id, moment, "m", "0.7.0", {"d.jsonl": "x"}, None, {}, len(rewards))
    rollouts = [
        StoredRollout(
            run_id,
            "d.jsonl",
            task,
            0,
            "m",
            "error" if reward is None else ("passed" if reward >= 1 else "failed"),
            reward,
            {},
            None,
            None,
            None,
        )
        for task, reward in rewards.items()
    ]
    return RunRollouts(run, rollouts)


def test_a_stored_series_gives_means_intervals_and_evidence() -> None:
    series = [_stored(i, {"a": 1.0, "b": 0.0, "c": None}) for i in (1, 2, 3)]
    assert task_means(series, "d.jsonl")[0] == (1, {"a": [1.0], "b": [0.0]})  # the error is no reward
    few = series_drift(series, "d.jsonl")
    assert not few.alarm
    assert few.evidence == "3 runs: the alarm needs 5 runs to learn the scale and one more (3 to go)"
    assert [point.interval.estimate for point in few.points] == [0.5, 0.5, 0.5]
    assert all(point.statistic is None for point in few.points)

    runs = [(i, {"a": [1.0], "b": [1.0], "c": [1.0, 1.0]}) for i in range(1, 7)]
    runs.append((7, {"a": [0.0], "b": [0.0], "c": [0.0]}))
    drift = cusum_drift("d.jsonl", runs)
    assert drift.alarm_run == 7
    assert drift.evidence.startswith("mean reward moved down: 0.000 at run 7 against 1.000 over the 6 runs before")
    assert drift.task_sd == pytest.approx(0.1)  # nothing varied: the floor
    assert drift.points[-1].tasks == 3
