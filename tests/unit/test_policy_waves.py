"""``--gym-adaptive`` with several policies, without a pytest session: the comparison gates a session sets, the gates
judged again on the waves a run rolled out (pytest_gym_eval.stats.comparison), the planner's joint datasets
(pytest_gym_eval.gym.waves) and how a comparison says it was judged on the sequence (reporting). End to end:
tests/plugin/test_adaptive_policies.py."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from pytest_gym_eval.gym.waves import Comparing, GroupPolicy, Wave, WaveLog, WavePlanner
from pytest_gym_eval.reporting.conclusion import PolicyComparison
from pytest_gym_eval.stats.comparison import (
    ComparisonGate,
    Hypothesis,
    PairedSequence,
    compare,
    comparison_gates,
    judge_paired_waves,
)
from pytest_gym_eval.stats.gates import Gate, Verdict
from pytest_gym_eval.stats.sequential import RewardRange
from pytest_gym_eval.tasks.plan import RunPlan

NON_INFERIORITY = ComparisonGate(Hypothesis.NON_INFERIORITY, 0.1)
POLICIES = {"base": "agent", "cand": "agent__cand"}


def test_comparison_gates_are_non_inferiority_then_superiority_each_only_when_set() -> None:
    assert comparison_gates(None, None) == []
    assert comparison_gates(0.1, None) == [NON_INFERIORITY]
    assert comparison_gates(None, 0.0) == [ComparisonGate(Hypothesis.SUPERIORITY, 0.0)]
    assert comparison_gates(0.1, 0.2) == [NON_INFERIORITY, ComparisonGate(Hypothesis.SUPERIORITY, 0.2)]
    with pytest.raises(ValueError, match="margin"):
        comparison_gates(-0.1, None)


def rewards(per_task: list[float], repeats: int) -> dict[tuple[str, int], float]:
    return {(f"t{t}", r): value for t, value in enumerate(per_task) for r in range(repeats)}


def test_judged_on_the_waves_is_the_sequence_fed_wave_by_wave_and_ignores_later_repeats() -> None:
    base, cand = rewards([1.0] * 10, 8), rewards([0.0] * 10, 8)
    judged = judge_paired_waves(base, cand, [NON_INFERIORITY], (2, 4))
    sequence = PairedSequence([NON_INFERIORITY])
    sequence.add_wave(base, cand, 2)
    assert judged == sequence.add_wave(base, cand, 4)
    assert judged is not None and judged[0].sequential and judged[0].verdict is Verdict.FAIL
    assert judged[0].interval.high < -0.1


def test_judged_on_the_waves_is_none_when_it_cannot_be() -> None:
    base, cand = rewards([1.0] * 4, 4), rewards([1.0] * 4, 4)
    assert judge_paired_waves(base, cand, [], (2,)) is None  # no gate
    assert judge_paired_waves(base, cand, [NON_INFERIORITY], ()) is None  # no wave
    del cand[("t1", 3)]  # an errored rollout: a pair of wave 2 missing
    assert judge_paired_waves(base, cand, [NON_INFERIORITY], (2, 4)) is None
    assert judge_paired_waves(base, rewards([2.0] * 4, 4), [NON_INFERIORITY], (2,)) is None  # outside [0, 1]
    wide = judge_paired_waves(base, rewards([2.0] * 4, 4), [NON_INFERIORITY], (2,), RewardRange(0.0, 2.0))
    assert wide is not None


def plan_of(tmp_path: Path, tasks: int, repeats: int) -> RunPlan:
    """Every task's repeats for both policies, the policies interleaved as collection orders them."""
    data = tmp_path / "d.jsonl"
    return RunPlan.build(
        (f"d.jsonl::t{t}[r{r}-{name}]", data, t + 1, f"t{t}", r, agent)
        for t in range(tasks)
        for r in range(repeats)
        for name, agent in POLICIES.items()
    )


def answer(wave: Wave, reward: dict[str, float], missing: int | None = None) -> None:
    """Gym's output for ``wave``: reward[agent] for every rollout (but stamp ``missing``)."""
    rows = [
        json.dumps({"_ng_task_index": r.stamp, "reward": reward[r.agent]})
        for r in wave.plan.rollouts
        if r.stamp != missing
    ]
    wave.output.write_text("".join(row + "\n" for row in rows))


def planner(tmp_path: Path, plan: RunPlan, gates: tuple[Gate, ...] = (), *compared: ComparisonGate) -> WavePlanner:
    return WavePlanner(
        plan, {"d.jsonl": GroupPolicy(gates, 1.0)}, 2, tmp_path, comparing=Comparing(("base", "cand"), compared)
    )


def test_every_wave_holds_both_policies_pairs_interleaved_and_stops_both_once_the_comparison_is_decided(
    tmp_path: Path,
) -> None:
    plan = plan_of(tmp_path, 10, 8)
    waves = planner(tmp_path, plan, (), NON_INFERIORITY)
    wave = waves.first()
    assert wave is not None
    assert [(r.task_id, r.repeat, r.agent) for r in wave.plan.rollouts] == [
        (f"t{t}", r, agent) for t in range(10) for r in range(2) for agent in POLICIES.values()
    ]
    answer(wave, {"agent": 1.0, "agent__cand": 0.0})
    assert waves.after(wave) is None  # a clear regression: decided FAIL after wave 1
    log = WaveLog.read(tmp_path / "waves.jsonl")
    assert sorted(log.skipped) == sorted(r.stamp for r in plan.rollouts if r.repeat >= 2)
    records = log.records(plan, lambda name: RewardRange())
    assert set(records) == {("d.jsonl", "agent"), ("d.jsonl", "agent__cand")}
    for record in records.values():
        assert (record.ends, record.sequential, record.max_repeats, record.rollouts) == ((2,), True, 8, 20)
        assert record.reason.startswith(
            "not needed: cand vs base: non-inferiority comparison decided FAIL after 2 repeats, upper bound -0.42 <"
        )


def test_a_decided_policy_gate_waits_for_the_undecided_comparison(tmp_path: Path) -> None:
    """Equal policies: each one's own gate (mean >= 0.01) is decided after wave 1, the comparison at margin 0.1
    only after 8 repeats of 10 tasks (tests/unit/test_comparison.py's sequence of zeros): three waves, none
    skipped; the last wave's end is the ceiling, so no reason is given."""
    plan = plan_of(tmp_path, 10, 8)
    waves = planner(tmp_path, plan, (Gate("mean_reward", 0.01),), NON_INFERIORITY)
    sizes = []
    wave = waves.first()
    while wave is not None:
        sizes.append(len(wave.plan.rollouts))
        answer(wave, {"agent": 1.0, "agent__cand": 1.0})
        wave = waves.after(wave)
    assert sizes == [40, 40, 80]
    log = WaveLog.read(tmp_path / "waves.jsonl")
    assert log.skipped == {}
    assert {r.ends for r in log.records(plan, lambda name: RewardRange()).values()} == {(2, 4, 8)}


def test_the_last_wave_judged_by_the_sessions_end_is_logged_once_on_the_sequence(tmp_path: Path) -> None:
    """Three equal tasks: the comparison is undecided at the ceiling. The session's end judges the last wave
    before the run's thread does (``gym eval run`` still exiting): every group gets its entry then, on the
    sequence with every wave's end, and the thread's later ``after`` logs nothing twice and plans no wave."""
    plan = plan_of(tmp_path, 3, 4)
    waves = planner(tmp_path, plan, (), NON_INFERIORITY)
    wave = waves.first()
    assert wave is not None
    answer(wave, {"agent": 1.0, "agent__cand": 1.0})
    wave = waves.after(wave)
    assert wave is not None and wave.number == 2
    answer(wave, {"agent": 1.0, "agent__cand": 1.0})
    waves.judge(wave)  # the session's end
    lines = (tmp_path / "waves.jsonl").read_text().splitlines()
    groups = [json.loads(line) for line in lines if '"group"' in line]
    assert [(g["group"][1], g["ends"], g["sequential"], g["reason"]) for g in groups] == [
        ("agent", [2, 4], True, ""),
        ("agent__cand", [2, 4], True, ""),
    ]
    assert waves.after(wave) is None  # the run's thread, once Gym exited
    assert (tmp_path / "waves.jsonl").read_text().splitlines() == lines
    records = WaveLog.read(tmp_path / "waves.jsonl").records(plan, lambda name: RewardRange())
    assert {(r.ends, r.sequential) for r in records.values()} == {((2, 4), True)}


def test_without_comparison_gates_each_policys_own_gates_decide_together(tmp_path: Path) -> None:
    plan = plan_of(tmp_path, 3, 4)
    waves = planner(tmp_path, plan, (Gate("mean_reward", 0.01),))
    wave = waves.first()
    assert wave is not None
    answer(wave, {"agent": 1.0, "agent__cand": 1.0})
    assert waves.after(wave) is None
    (reason,) = {
        r.reason for r in WaveLog.read(tmp_path / "waves.jsonl").records(plan, lambda n: RewardRange()).values()
    }
    assert reason.startswith("not needed: base: mean-reward gate decided PASS after 2 repeats")
    assert "; cand: mean-reward gate decided PASS after 2 repeats" in reason


def test_an_errored_rollout_leaves_the_sequence_and_every_policy_rolls_out_the_rest(tmp_path: Path) -> None:
    plan = plan_of(tmp_path, 10, 8)
    waves = planner(tmp_path, plan, (), NON_INFERIORITY)
    wave = waves.first()
    assert wave is not None
    answer(wave, {"agent": 1.0, "agent__cand": 0.0}, missing=wave.plan.rollouts[3].stamp)
    rest = waves.after(wave)
    assert rest is not None and len(rest.plan.rollouts) == 2 * 10 * 6
    answer(rest, {"agent": 1.0, "agent__cand": 0.0})
    assert waves.after(rest) is None
    records = WaveLog.read(tmp_path / "waves.jsonl").records(plan, lambda name: RewardRange())
    assert all(not r.sequential and r.note == "a rollout errored" for r in records.values())


def test_policies_selected_different_pairs_roll_out_whole(tmp_path: Path) -> None:
    plan = RunPlan(tuple(r for r in plan_of(tmp_path, 3, 4).rollouts if not (r.agent == "agent" and r.repeat == 3)))
    waves = planner(tmp_path, plan, (), NON_INFERIORITY)
    wave = waves.first()
    assert wave is not None and len(wave.plan.rollouts) == len(plan.rollouts)


def comparison_of(sequential: bool) -> PolicyComparison:
    """A clear regression over 2 repeats of 10 tasks, its gate judged on the sequence of one wave or not."""
    base, cand = rewards([1.0] * 10, 2), rewards([0.0] * 10, 2)
    found = compare(base, cand, [NON_INFERIORITY])
    judged = judge_paired_waves(base, cand, [NON_INFERIORITY], (2,))
    if not sequential or judged is None:
        return PolicyComparison("d.jsonl", "base", "cand", found)
    found = replace(found, results=tuple(judged))
    return PolicyComparison("d.jsonl", "base", "cand", found, waves=(2,), max_repeats=8)


def test_a_comparison_says_it_was_judged_on_the_sequence_and_on_how_many_repeats() -> None:
    sequential = comparison_of(True)
    assert sequential.sequential and sequential.repeats == 2
    assert sequential.describe_waves() == (
        "judged on the anytime-valid 95% confidence sequence: 1 wave, 2 of 8 repeats per task"
    )
    fixed = comparison_of(False)
    assert not fixed.sequential and fixed.repeats == 0
