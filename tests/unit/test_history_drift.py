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
    FALSE_ALARM_RUNS,
    cusum_drift,
    run_mean_skewness,
    self_starting_cusum,
    series_drift,
    task_means,
)
from pytest_gym_eval.history.store import RunRollouts, StoredRollout, StoredRun

Run = dict[str, list[float]]


def test_hand_worked_statistics_and_alarm() -> None:
    runs = [{"a": [1.0], "b": [0.0]}, {"a": [0.0], "b": [1.0]}, {"a": [0.0], "b": [0.0]}, {"a": [0.0], "b": [0.0]}]
    # Run 3: v = pooled variance of each task over runs 1-2 = (0.5 + 0.5) / 2 = 0.5;
    #   spread = 0.5/2 + 0.5 * (1/2 + 1/2) / 2² = 0.375; z = (0 - 0.5)/sqrt(0.375) = -0.816497; S = 0.316497.
    # Run 4: v over runs 1-3 (it keeps learning) = (2/3 + 2/3) / (2 + 2) = 1/3;
    #   spread = (1/3)/2 + (1/3) * 1.5 / 3² = 0.222222; z = (0 - 1/3)/sqrt(0.222222) = -0.707107; S = 0.523604.
    # Skewness before run 4: q = (1 + 0.5) / (3 + 1) = 0.375 for both tasks: 2 * 0.234375 * 0.25 / 0.46875**1.5
    #   = 0.365 >= -0.35, so run 4 is judged.
    result = self_starting_cusum(runs, reference_runs=2, h=0.35)
    assert result.statistics[:2] == (None, None)
    assert result.statistics[2] == pytest.approx(0.316497, abs=1e-6)
    assert result.statistics[3] == pytest.approx(0.523604, abs=1e-6)
    assert result.task_sd == pytest.approx(math.sqrt(1 / 3))
    assert result.skewness == pytest.approx(0.365148, abs=1e-6)
    assert result.alarms == (3,) and result.alarm_index == 3
    assert self_starting_cusum(runs, reference_runs=2, h=0.6).alarms == ()


def test_run_mean_skewness_by_hand() -> None:
    # One task seen 3 times, passing twice: q = 2.5 / 4 = 0.625, skewness (1 - 2q) / sqrt(q(1-q)) = -0.516398.
    assert run_mean_skewness([(3, 2.0)]) == pytest.approx(-0.516398, abs=1e-6)
    # Two tasks mirrored about 1/2 cancel; no task is 0.
    assert run_mean_skewness([(3, 2.0), (3, 1.0)]) == pytest.approx(0.0, abs=1e-12)
    assert run_mean_skewness([]) == 0.0


def test_a_series_of_rare_failures_is_told_so_not_alarmed_on() -> None:
    # Two tasks that always passed, then one fails: a drop, or the rare failure a task that passes 97 % of the
    # time has? The run mean's lower tail is too long to say at the stated rate (skewness -1.60 < -0.35).
    runs: list[Run] = [{"a": [1.0], "b": [1.0]}] * 3 + [{"a": [1.0], "b": [0.0]}]
    result = self_starting_cusum(runs, reference_runs=3)
    assert result.statistics == (None, None, None, None) and result.skipped == (3,) and result.alarms == ()
    assert result.skewness == pytest.approx(-1.603567, abs=1e-6)
    drift = cusum_drift("d.jsonl", list(enumerate(runs, 1)), reference_runs=3)
    assert not drift.alarm
    assert drift.evidence.startswith("not judged: a run's mean is too skewed to the left (skewness -1.60 < -0.35")


def test_a_later_run_never_changes_what_an_earlier_run_said() -> None:
    # One procedure along the whole series: the statistics and alarms of a prefix are the prefix of the whole's.
    rng = random.Random(3)
    probabilities = [rng.random() for _ in range(12)]
    history = _history(rng, probabilities, runs=80, drop=lambda t: 0.0 if t < 40 else 0.3)
    whole = self_starting_cusum(history)
    assert whole.alarms  # the drop at run 41 is caught, and the CUSUM re-armed after it
    for end in range(1, len(history) + 1):
        part = self_starting_cusum(history[:end])
        assert part.statistics == whole.statistics[:end]
        assert part.alarms == tuple(index for index in whole.alarms if index < end)


def test_after_an_alarm_the_cusum_learns_the_new_level() -> None:
    runs: list[Run] = [{"a": [1.0], "b": [0.0]}, {"a": [0.0], "b": [1.0]}] * 3
    runs += [{"a": [0.0], "b": [0.0]}] * 8
    result = self_starting_cusum(runs, reference_runs=2, h=1.0)
    (alarm,) = result.alarms  # once: after it, the runs at the new level are the reference
    assert result.statistics[alarm + 1 : alarm + 3] == (None, None)
    drift = cusum_drift("d.jsonl", list(enumerate(runs[: alarm + 2], 1)), reference_runs=2, h=1.0)
    assert drift.alarm and drift.alarm_run == alarm + 1
    assert drift.evidence.endswith("; re-armed: the runs after it teach the new level (1 to go)")
    later = cusum_drift("d.jsonl", list(enumerate(runs, 1)), reference_runs=2, h=1.0)
    assert not later.alarm and later.alarm_runs == (alarm + 1,)
    assert later.evidence.endswith(f"; earlier alarm at run {alarm + 1}")


def test_a_rise_is_no_alarm() -> None:
    runs: list[Run] = [{"a": [0.0], "b": [1.0]}, {"a": [1.0], "b": [0.0]}] * 3 + [{"a": [1.0], "b": [1.0]}] * 5
    result = self_starting_cusum(runs, reference_runs=2)
    assert result.alarm_index is None
    assert [statistic for statistic in result.statistics if statistic is not None][-1] == 0.0


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
        lambda rng: 0.97,  # rare failures: a long lower tail, not judged rather than alarmed on
    ],
    ids=["uniform", "mostly-deterministic", "rare-failures"],
)
def test_false_alarm_rate_on_stable_histories_stays_under_the_documented_bound(
    task_probabilities: Callable[[random.Random], float],
) -> None:
    # The benchmark (benchmarks/error_rates.py) measures more shapes and sizes with more histories; this is the
    # same check, small enough for the fast tier: 300 histories of 12 tasks, 5 reference and 100 watched runs.
    rng = random.Random(2026)
    histories = 300
    alarms = 0
    for _ in range(histories):
        probabilities = [task_probabilities(rng) for _ in range(12)]
        history = _history(rng, probabilities, runs=5 + FALSE_ALARM_RUNS)
        alarms += bool(self_starting_cusum(history).alarms)
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

    # Two tasks that always pass and two that alternate (mean 0.75), then every task fails: judged (skewness
    # -0.23), and the alarm fires within two runs of the collapse.
    runs = [(i, {"a": [1.0], "b": [1.0], "c": [float(i % 2)], "d": [float(1 - i % 2)]}) for i in range(1, 7)]
    runs += [(i, {"a": [0.0], "b": [0.0], "c": [0.0], "d": [0.0]}) for i in (7, 8, 9)]
    drift = cusum_drift("d.jsonl", runs)
    assert drift.alarm_run in (8, 9) and drift.alarm_runs == (drift.alarm_run,)
    assert drift.evidence.startswith(f"mean reward moved down: 0.000 at run {drift.alarm_run} against ")
    assert drift.task_sd is not None and drift.task_sd > 0.1  # learnt from the alternating tasks, not the floor
    assert drift.points[-1].tasks == 4
