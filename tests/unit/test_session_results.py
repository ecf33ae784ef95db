"""Pieces of the session without a pytest session: rollouts in collection order (:func:`results.in_collection_order`),
the selected rollouts the gates expect (:func:`results.selected_counts`) and the stop (:class:`stopping.Stopping`)."""

from __future__ import annotations

from datetime import date
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from pytest_gym_eval.history.quarantine import parse_quarantine
from pytest_gym_eval.outcomes.records import RolloutRecord
from pytest_gym_eval.reporting.junit import gate_failures
from pytest_gym_eval.reporting.summary import RolloutResult, summarize
from pytest_gym_eval.reporting.verdicts import gate_verdicts
from pytest_gym_eval.session.results import in_collection_order, selected_counts, with_gym_records
from pytest_gym_eval.session.status import gates_judged_passing
from pytest_gym_eval.session.stopping import Stopping
from pytest_gym_eval.stats.gates import Gate, GateMode
from pytest_gym_eval.tasks.plan import PlannedRollout


def planned(stamp: int, task: str, repeat: int, agent: str = "a", dataset: str = "d.jsonl") -> PlannedRollout:
    return PlannedRollout(stamp, f"{dataset}::{task}[{repeat}]", Path(dataset), 1, task, repeat, agent)


def result(nodeid: str, start: float) -> RolloutResult:
    return RolloutResult(nodeid, "d.jsonl", "t", 0, "a", "passed", 1.0, start=start, stop=start + 1)


def test_rollouts_follow_the_plan_unplanned_last_by_node_id_and_none_starts_before_gym_eval_run() -> None:
    plan = [planned(0, "x", 0), planned(1, "x", 1)]
    found = [result("zz", 5.0), result("d.jsonl::x[1]", 20.0), result("aa", 30.0), result("d.jsonl::x[0]", 8.0)]

    ordered = in_collection_order(found, plan, eval_started=10.0)

    assert [(r.nodeid, r.start) for r in ordered] == [
        ("d.jsonl::x[0]", 10.0),
        ("d.jsonl::x[1]", 20.0),
        ("aa", 30.0),
        ("zz", 10.0),
    ]
    assert [r.start for r in in_collection_order(found, plan, eval_started=None)] == [8.0, 20.0, 30.0, 5.0]


def test_a_rollout_gym_was_seen_to_write_takes_gyms_time_not_its_items() -> None:
    """Its item ran late (a test file came first) or early: its time is from `gym eval run`'s start to its landing."""
    plan = [planned(0, "x", 0), planned(1, "x", 1)]
    found = [result("d.jsonl::x[0]", 50.0), result("d.jsonl::x[1]", 5.0)]

    ordered = in_collection_order(found, plan, eval_started=10.0, landed={"d.jsonl::x[0]": 12.5})

    assert [(r.start, r.stop) for r in ordered] == [(10.0, 12.5), (10.0, 6.0)]


def test_selected_counts_per_dataset_and_agent_leave_out_quarantined_tasks() -> None:
    selected = [
        planned(0, "1", 0),
        planned(1, "1", 1, agent="b"),
        planned(2, "2", 0),
        planned(3, "17", 0),
        planned(4, "17", 0, dataset="e.jsonl"),
    ]
    quarantine = parse_quarantine("d.jsonl 17 2027-01-31 flaky\n", source="q.txt", today=date(2026, 12, 2))

    assert selected_counts(selected, None) == {"d.jsonl": {"a": 3, "b": 1}, "e.jsonl": {"a": 1}}
    assert selected_counts(selected, quarantine) == {"d.jsonl": {"a": 2, "b": 1}, "e.jsonl": {"a": 1}}


def test_every_rollout_gym_wrote_counts_whether_or_not_its_item_reported() -> None:
    """x[0] reported; x[1] never did (the session stopped while pytest waited elsewhere) yet Gym wrote it; y[0]
    reported that the session stopped before it arrived, yet Gym wrote it; z[0] Gym never wrote (unreported)."""
    plan = [planned(0, "x", 0), planned(1, "x", 1), planned(2, "y", 0), planned(3, "z", 0)]
    reported = [
        RolloutResult("d.jsonl::x[0]", "d.jsonl", "x", 0, "a", "failed", 0.0),
        RolloutResult("d.jsonl::y[0]", "d.jsonl", "y", 0, "a", "error", None, failure_class="session_stopped"),
    ]
    records = {stamp: RolloutRecord(stamp, 1.0, Path("out.jsonl"), stamp + 1) for stamp in (0, 1, 2)}
    judged: list[int] = []

    def judge(rollout: PlannedRollout, record: RolloutRecord) -> RolloutResult:
        judged.append(rollout.stamp)
        return RolloutResult(rollout.nodeid, "d.jsonl", rollout.task_id, rollout.repeat, "a", "passed", 1.0)

    found = with_gym_records(reported, plan, records, judge)

    assert [(r.nodeid, r.status) for r in found] == [
        ("d.jsonl::x[0]", "failed"),  # the item's own verdict stands (a pass hook may have decided it)
        ("d.jsonl::y[0]", "passed"),
        ("d.jsonl::x[1]", "passed"),
    ]
    assert judged == [1, 2]


def test_a_gate_that_does_not_pass_in_the_verdict_list_is_named_with_its_gates() -> None:
    results = [RolloutResult(f"d.jsonl::t{i}[0]", "d.jsonl", f"t{i}", 0, "a", "passed", 1.0) for i in range(3)]
    gates = {"d.jsonl": [Gate("mean_reward", 0.5)], "e.jsonl": [Gate("mean_reward", 0.5)]}
    e_results = [RolloutResult("e.jsonl::u[0]", "e.jsonl", "u", 0, "a", "passed", 1.0)]
    summaries = summarize(
        results + e_results, thresholds={}, gates=gates, mode=GateMode.POINT, selected={"e.jsonl": {"a": 2}}
    )

    for lenient in (False, True):  # one rollout of e.jsonl never came: not green even when INCONCLUSIVE passes
        failing = gate_failures(gate_verdicts(summaries, inconclusive_passes=lenient))
        assert list(failing) == ["e.jsonl::gym-gate"]
        assert "e.jsonl: mean reward" in failing["e.jsonl::gym-gate"] and "INCONCLUSIVE" in failing["e.jsonl::gym-gate"]
        assert gates_judged_passing(summaries, failing) == {"d.jsonl"}


class FakeServer:
    def __init__(self) -> None:
        self.stopped = 0

    def stop(self) -> None:
        self.stopped += 1


def test_stopping_stops_the_replay_servers_removes_the_launch_folders_and_keeps_the_first_stop_seconds(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "ray"
    folder.mkdir()
    replay, more, judge = FakeServer(), FakeServer(), FakeServer()
    launch: Any = SimpleNamespace(
        warm=None, replay=replay, more_replays=[more], model_server_replays={"judge_model": judge}, cleanup=[folder]
    )
    stopping = Stopping()
    assert stopping.seconds is None

    stopping.stop(None, launch, None)
    first = stopping.seconds
    stopping.stop(None, launch, None)

    assert (replay.stopped, more.stopped, judge.stopped) == (2, 1, 1)  # a bound judge's replay server too
    assert launch.more_replays == [] and launch.model_server_replays == {} and launch.cleanup == []
    assert not folder.exists()
    assert first is not None and first >= 0 and stopping.seconds == first


def test_the_exit_status_is_the_verdict_lists(tmp_path: Path) -> None:
    """The session fails exactly when a verdict of its list fails (issue 36: the exit status comes from the list,
    computed once): a gate judged on fewer rollouts than were selected fails it (never passes); an unreadable
    ``--gym-replay`` recording fails it as a ``replay`` verdict (the list had none: exit status 1 while no verdict
    failed)."""
    from pytest_gym_eval.options.gym_options import GymOptions
    from pytest_gym_eval.session.conclude import conclude

    results = [RolloutResult(f"d.jsonl::t{i}[0]", "d.jsonl", f"t{i}", 0, "a", "passed", 1.0) for i in range(3)]
    policy = ({"d.jsonl": 1.0}, {"d.jsonl": [Gate("mean_reward", 0.5)]})
    options = GymOptions(rootdir=tmp_path)
    for selected, status in ((3, 0), (4, 1)):
        conclusion = conclude(results, options, selected={"d.jsonl": {"a": selected}}, policy=policy)
        assert conclusion.exit_status == status
        assert any(v.fails for v in conclusion.verdicts) == bool(status)
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json\n")
    conclusion = conclude(results, GymOptions(rootdir=tmp_path, replay=(bad,)), policy=policy)
    assert conclusion.exit_status == 1 and "--gym-replay" in conclusion.reason
    (failed,) = [v for v in conclusion.verdicts if v.fails]
    assert failed.kind == "replay" and failed.message.removeprefix("replay: ") in conclusion.reason
