"""The run plan's modes: whole tasks with ``--num-repeats R`` when every repeat of every task is selected, policies'
rows sharing their task's index, one row per (task, repeat) otherwise; and how Gym's records come back to the
planned rollouts."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from pytest_gym_eval.gym.feed import RolloutFeed, RolloutRecord, RunState, parse_record, record_stamp
from pytest_gym_eval.gym.run import _stamps_in
from pytest_gym_eval.tasks.dataset import LONE_SURROGATE, DatasetError
from pytest_gym_eval.tasks.plan import RunPlan, write_gym_input


def selection(path: Path, tasks: int, repeats: int) -> list[tuple[str, Path, int, str, int, str]]:
    return [
        (f"{path.name}::t{t}[r{r}]", path, t + 1, f"t{t}", r, "mcqa_simple_agent")
        for t in range(tasks)
        for r in range(repeats)
    ]


def dataset(tmp_path: Path, tasks: int) -> Path:
    path = tmp_path / "d.jsonl"
    rows = [{"id": f"t{t}", "responses_create_params": {"input": f"Q{t}"}, "_ng_task_index": 99} for t in range(tasks)]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_every_repeat_selected_gives_one_row_per_task(tmp_path: Path) -> None:
    path = dataset(tmp_path, 4)
    entries = selection(path, 4, 3)
    random.Random(1).shuffle(entries)  # pytest-randomly's order: the plan must not depend on it
    plan = RunPlan.build(entries, whole_tasks=True)
    assert plan.row_repeats == 3
    assert [r.stamp for r in plan.rollouts] == list(range(12))
    for rollout in plan.rollouts:  # each task's repeats share one row; stamp = row * R + repeat
        assert rollout.stamp % 3 == rollout.repeat
    rows_of = {r.task_id: r.stamp // 3 for r in plan.rollouts}
    assert all(rows_of[r.task_id] == r.stamp // 3 for r in plan.rollouts) and len(set(rows_of.values())) == 4
    assert write_gym_input(plan, tmp_path / "in.jsonl") == 4
    written = [json.loads(line) for line in (tmp_path / "in.jsonl").read_text().splitlines()]
    assert [(row["id"], row["_ng_task_index"]) for row in written] == sorted(
        ((task, index) for task, index in rows_of.items()), key=lambda pair: pair[1]
    )


@pytest.mark.parametrize(
    "keep",
    [
        lambda e: e[4] != 0,  # -k "not r0": repeats 1 and 2 of every task
        lambda e: not (e[3] == "t1" and e[4] == 2),  # --deselect of one pair
        lambda e: True,  # every repeat, but the session does not allow whole tasks (below)
    ],
)
def test_partial_selections_get_a_row_per_pair(tmp_path: Path, keep: object) -> None:
    path = dataset(tmp_path, 3)
    entries = [e for e in selection(path, 3, 3) if keep(e)]  # type: ignore[operator]
    plan = RunPlan.build(entries, whole_tasks=len(entries) != 9)
    assert plan.row_repeats == 1
    assert [(r.nodeid, r.stamp) for r in plan.rollouts] == [(e[0], i) for i, e in enumerate(entries)]
    assert write_gym_input(plan, tmp_path / "in.jsonl") == len(entries)


def policy_selection(path: Path, tasks: int, repeats: int) -> list[tuple[str, Path, int, str, int, str]]:
    """Collection order of a two-policy session: task, repeat, then policy."""
    agents = {"base": "mcqa_simple_agent", "cand": "mcqa_simple_agent__cand"}
    return [
        (f"{path.name}::t{t}[r{r}-{policy}]", path, t + 1, f"t{t}", r, agent)
        for t in range(tasks)
        for r in range(repeats)
        for policy, agent in agents.items()
    ]


def gym_numbering(rows: list[dict[str, object]]) -> list[tuple[object, int]]:
    """``(_ng_task_index, _ng_rollout_index)`` of each row as Gym 0.7.0 numbers rows with --num-repeats 1: a counter
    per task index, in input order (``_preprocess_raw_rows``)."""
    counts: dict[object, int] = {}
    numbered = []
    for row in rows:
        index = counts.get(row["_ng_task_index"], 0)
        counts[row["_ng_task_index"]] = index + 1
        numbered.append((row["_ng_task_index"], index))
    return numbered


def test_policies_share_each_tasks_index_and_every_rollout_comes_back_to_its_item(tmp_path: Path) -> None:
    path = dataset(tmp_path, 3)
    entries = policy_selection(path, 3, 2)
    plan = RunPlan.build(entries, whole_tasks=False, shared_tasks=True)
    assert (plan.row_repeats, plan.stride) == (1, 4)
    assert sorted(r.stamp for r in plan.rollouts) == list(range(12))
    assert write_gym_input(plan, tmp_path / "in.jsonl", tag_repeats=True) == 12
    rows = [json.loads(line) for line in (tmp_path / "in.jsonl").read_text().splitlines()]
    # One index per task, shared by its two policies' rows, which alternate as in the selection.
    assert [row["_ng_task_index"] for row in rows] == [0] * 4 + [1] * 4 + [2] * 4
    assert [row["agent_ref"]["name"][-6:] for row in rows[:4]] == ["_agent", "__cand"] * 2
    by_stamp = {rollout.stamp: rollout for rollout in plan.rollouts}
    for row, (task_index, rollout_index) in zip(rows, gym_numbering(rows), strict=True):
        rollout = by_stamp[record_stamp(task_index, rollout_index, plan.stride)]  # type: ignore[index]
        assert row["id"] == rollout.task_id and row["agent_ref"]["name"] == rollout.agent
        assert row["responses_create_params"]["metadata"]["pytest_gym_eval_repeat"] == str(rollout.repeat)
    plan.save(tmp_path / "plan.json")
    assert RunPlan.load(tmp_path / "plan.json") == plan and RunPlan.load(tmp_path / "plan.json").stride == 4


@pytest.mark.parametrize(
    ("keep", "stride"),
    [
        (lambda e: e[0].endswith("-cand]"), 2),  # -k cand: every task's 2 rollouts of one policy, still shared
        (lambda e: e[4] == 0, 2),  # -k r0: both policies' repeat 0 of every task
        (lambda e: not (e[3] == "t1" and e[4] == 1), 1),  # a task short of a repeat: a row and an index per pair
    ],
)
def test_partial_selections_of_policies_share_a_task_index_only_when_every_task_has_as_many_rollouts(
    tmp_path: Path, keep: object, stride: int
) -> None:
    path = dataset(tmp_path, 3)
    entries = [e for e in policy_selection(path, 3, 2) if keep(e)]  # type: ignore[operator]
    plan = RunPlan.build(entries, shared_tasks=True)
    assert (plan.row_repeats, plan.stride) == (1, stride)
    write_gym_input(plan, tmp_path / "in.jsonl")
    rows = [json.loads(line) for line in (tmp_path / "in.jsonl").read_text().splitlines()]
    by_stamp = {rollout.stamp: rollout for rollout in plan.rollouts}
    came_back = [by_stamp[record_stamp(t, i, plan.stride)] for t, i in gym_numbering(rows)]  # type: ignore[index]
    assert sorted(r.nodeid for r in came_back) == sorted(e[0] for e in entries)
    assert [r.agent for r in came_back] == [row["agent_ref"]["name"] for row in rows]


def test_a_row_with_an_id_and_a_lone_surrogate_names_its_line_when_gyms_input_is_written(tmp_path: Path) -> None:
    # Collection reads it (the id needs no hashing, and scanning every line for it cost ~1 us a row); it cannot
    # be written as UTF-8, which Gym's reader needs.
    path = tmp_path / "d.jsonl"
    path.write_text('{"id": "t0", "responses_create_params": {"input": "Q"}}\n'
                    '{"id": "t1", "responses_create_params": {"input": "\\ud800"}}\n')  # fmt: skip
    plan = RunPlan.build(selection(path, 2, 1), whole_tasks=True)
    with pytest.raises(DatasetError) as raised:
        write_gym_input(plan, tmp_path / "in.jsonl")
    assert str(raised.value) == f"{path}:2: {LONE_SURROGATE}"


def test_repeats_that_differ_between_datasets_get_a_row_per_pair(tmp_path: Path) -> None:
    first, second = dataset(tmp_path, 2), tmp_path / "e.jsonl"
    second.write_text(first.read_text())
    plan = RunPlan.build(selection(first, 2, 2) + selection(second, 2, 3), whole_tasks=True)
    assert plan.row_repeats == 1


def test_the_mode_travels_in_the_saved_plan(tmp_path: Path) -> None:
    plan = RunPlan.build(selection(dataset(tmp_path, 2), 2, 4), whole_tasks=True)
    plan.save(tmp_path / "plan.json")
    assert RunPlan.load(tmp_path / "plan.json") == plan and plan.row_repeats == 4
    legacy = tmp_path / "old.json"
    legacy.write_text(json.dumps({"rollouts": json.loads((tmp_path / "plan.json").read_text())["rollouts"]}))
    assert RunPlan.load(legacy).row_repeats == 1


def test_record_stamps() -> None:
    assert record_stamp(7, 0) == 7
    assert record_stamp(7, None) == 7  # one row per rollout: the task index alone
    assert record_stamp(2, 1, 3) == 7
    assert record_stamp(2, 3, 3) is None  # no such repeat
    assert record_stamp(2, None, 3) is None
    assert record_stamp(True, 0, 3) is None
    assert record_stamp("2", 0) is None


def test_records_of_whole_tasks_reach_their_own_repeat(tmp_path: Path) -> None:
    """Repeats that disagree, written in completion order (not repeat order): each stamp gets its own rollout's
    reward; the feed, the resume check and a failure record all agree."""
    output, failures, state = tmp_path / "out.jsonl", tmp_path / "out_failures.jsonl", tmp_path / "state.json"
    rewards = {(0, 0): 1.0, (0, 1): 0.0, (0, 2): 0.25, (1, 0): 0.0, (1, 2): 1.0}
    order = [(1, 2), (0, 1), (0, 2), (1, 0), (0, 0)]
    output.write_text(
        "".join(
            json.dumps({"_ng_task_index": t, "_ng_rollout_index": r, "reward": rewards[(t, r)]}) + "\n"
            for t, r in order
        )
    )
    failures.write_text(json.dumps({"_ng_task_index": 1, "_ng_rollout_index": 1, "_ng_failure_class": "x"}) + "\n")
    RunState("finished").write(state)
    feed = RolloutFeed(output, failures, state, stride=3)
    feed.look()
    found = feed.records()
    assert {stamp: record.reward for stamp, record in found.items() if record.failure_class is None} == {
        task * 3 + repeat: reward for (task, repeat), reward in rewards.items()
    }
    assert found[4].failure_class == "x"
    assert _stamps_in(output, 3) | _stamps_in(failures, 3) == set(range(6))
    record = parse_record(b'{"_ng_task_index": 1, "_ng_rollout_index": 2, "reward": 1.0}', output, 1, False, 0, 3)
    assert isinstance(record, RolloutRecord) and record.stamp == 5
