"""The item protocol (:class:`pytest_gym_eval.session.item_protocol.ItemProtocol`) without a pytest session: a stand-in
run (options, plan, feed, notes) and stand-in items."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from pytest_gym_eval.gym.feed import RunState
from pytest_gym_eval.gym.run import GymStartError
from pytest_gym_eval.options.gym_options import GymOptions
from pytest_gym_eval.outcomes import causes
from pytest_gym_eval.outcomes.outcome import RolloutOutcome
from pytest_gym_eval.session import item_protocol
from pytest_gym_eval.session.diagnosis import Diagnosis
from pytest_gym_eval.session.item_protocol import ItemProtocol
from pytest_gym_eval.session.notes import Notes
from pytest_gym_eval.tasks import dataset
from pytest_gym_eval.tasks.plan import RunPlan


class NoHook:
    """A pass hook no plugin implements."""

    def get_hookimpls(self) -> list[object]:
        return []

    def __call__(self, **kwargs: Any) -> bool | None:
        raise AssertionError("a hook without implementations was called")


class Feed:
    """A feed whose rollouts never come; it must not be asked for one outside the plan."""

    state = None

    def wait(self, stamp: int, timeout: float | None, *args: Any) -> object:
        raise AssertionError(f"waited for {stamp}")

    def wait_all(self, stamps: list[int], timeout: float | None) -> dict[int, object]:
        assert stamps == []
        return {}


def run_of(tmp_path: Path, plan: RunPlan) -> Any:
    options = GymOptions(rootdir=tmp_path)
    return SimpleNamespace(
        options=options, plan=plan, run_dir=tmp_path, diagnosis=Diagnosis(options), notes=Notes(lambda _: None),
        feed=Feed(), selection_of=lambda _: None, selected_rollouts=lambda: list(plan.rollouts),
        adaptive_records=dict, quarantine=None,
    )  # fmt: skip


def item(tmp_path: Path, nodeid: str) -> Any:
    return SimpleNamespace(nodeid=nodeid, path=tmp_path / "d.jsonl", user_properties=[], outcome=None)


def test_an_item_outside_the_plan_errors_as_not_planned_without_waiting(tmp_path: Path) -> None:
    protocol = ItemProtocol(run_of(tmp_path, RunPlan(())), NoHook())
    outcome = protocol.outcome_of(item(tmp_path, "d.jsonl::t9[r0]"))
    assert outcome.status == "error" and outcome.failure_class == causes.NOT_PLANNED
    assert outcome.message.startswith("this item was not in the session's plan")


def test_a_gate_without_selected_rollouts_cannot_be_judged(tmp_path: Path) -> None:
    protocol = ItemProtocol(run_of(tmp_path, RunPlan(())), NoHook())
    gate = item(tmp_path, "d.jsonl::gym-gate")
    found = protocol.wait_for_gate(gate)
    assert protocol.judge_gates(gate, found) == "no rollout of d.jsonl was selected: its gates cannot be judged"


def test_without_a_pass_hook_the_outcome_stays_as_judged(tmp_path: Path) -> None:
    protocol = ItemProtocol(run_of(tmp_path, RunPlan(())), NoHook())
    rollout = item(tmp_path, "d.jsonl::t0[r0]")
    rollout.outcome = RolloutOutcome("failed", 0.0)
    assert protocol.pass_hook(rollout) is None
    assert protocol.decide(rollout) is rollout.outcome


def test_an_errored_rollout_has_no_reward_property_but_its_failure_class() -> None:
    assert item_protocol.properties(RolloutOutcome("error", None, failure_class="gym_exited")) == [
        ("failure_class", "gym_exited")
    ]
    assert item_protocol.properties(RolloutOutcome("passed", 1.0)) == [("reward", 1.0)]


def test_a_row_is_read_again_by_its_line_and_a_changed_dataset_gives_none(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    rows = [
        {"id": "a", "responses_create_params": {"input": "Q0"}},
        {"id": "b", "responses_create_params": {"input": "Q1"}},
    ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    assert item_protocol.read_row(path, 2) == rows[1]
    path.write_text("")
    assert item_protocol.read_row(path, 2) is None
    assert item_protocol.read_row(tmp_path / "gone.jsonl", 1) is None


def test_the_rows_of_many_failed_rollouts_cost_one_pass_over_the_dataset(tmp_path: Path) -> None:
    """A failed rollout's text shows its row: reading F rows of an N-row dataset indexes the file once (it used to
    parse every row up to the wanted one for each failure, F x N row parses: quadratic at scale)."""
    path = tmp_path / "d.jsonl"
    rows = [{"id": f"t{i}", "responses_create_params": {"input": f"Q{i}"}} for i in range(50)]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows[:25]) + "\n" + "".join(
        json.dumps(row) + "\n" for row in rows[25:]
    ))  # fmt: skip
    before = dataset._line_starts.cache_info().misses
    assert [item_protocol.read_row(path, line) for line in range(1, 26)] == rows[:25]
    assert item_protocol.read_row(path, 26) is None  # the blank line
    assert [item_protocol.read_row(path, line) for line in range(27, 52)] == rows[25:]
    assert item_protocol.read_row(path, 52) is None
    assert dataset._line_starts.cache_info().misses == before + 1
    path.write_text('{"id": "new", "responses_create_params": {"input": "Q"}}\n{"broken\n')
    assert item_protocol.read_row(path, 1) == {"id": "new", "responses_create_params": {"input": "Q"}}  # re-indexed
    assert item_protocol.read_row(path, 2) is None
    with pytest.raises(dataset.DatasetError, match=r"d\.jsonl:2: malformed JSON"):
        dataset.read_row_at(path, 2)


def test_a_run_that_failed_to_start_raises_its_message_log_and_failure_class() -> None:
    feed = SimpleNamespace(state=RunState("failed", "no port", log="/r/logs/servers.log", failure_class="run_dir_full"))
    with pytest.raises(
        GymStartError, match=re.escape("Gym would not start: no port\nlog: /r/logs/servers.log")
    ) as raised:
        item_protocol.wait_until_started(feed, 10, Notes(lambda _: None))
    assert raised.value.failure_class == "run_dir_full"


def test_a_run_that_never_leaves_its_start_up_is_given_up_after_its_bound() -> None:
    feed = SimpleNamespace(state=RunState("starting"))
    began = time.monotonic()
    with pytest.raises(GymStartError, match=re.escape("Gym did not start within -119.7 s")):
        item_protocol.wait_until_started(feed, -119.7, Notes(lambda _: None))  # a bound of 0.3 s in all
    assert time.monotonic() - began < 10


def test_a_running_run_starts_the_progress_throughput() -> None:
    log: list[str] = []
    notes = Notes(lambda _: None)
    notes.progress = SimpleNamespace(clear=lambda: log.append("clear"), running=lambda: log.append("running"))  # type: ignore[assignment]
    item_protocol.wait_until_started(SimpleNamespace(state=RunState("running")), 10, notes)
    assert log == ["clear", "running"]
