"""The session's ``--gym-adaptive`` piece (:mod:`pytest_gym_eval.session.waves`) without a pytest session: what it
reads of a wave log in a run directory, and a gate's bounded wait for it."""

from __future__ import annotations

import json
import time
from pathlib import Path

from pytest_gym_eval.core.rundir import RunPaths
from pytest_gym_eval.gym.feed import RunState
from pytest_gym_eval.options.gym_options import GymOptions
from pytest_gym_eval.session import waves
from pytest_gym_eval.tasks.plan import RunPlan


def plan_of(tmp_path: Path, tasks: int, repeats: int) -> RunPlan:
    path = tmp_path / "d.jsonl"
    rows = [
        (f"d.jsonl::t{t}[r{r}]", path, t + 1, f"t{t}", r, "simple_agent") for t in range(tasks) for r in range(repeats)
    ]
    return RunPlan.build(rows, whole_tasks=False)


def write_log(run_dir: Path, *entries: dict[str, object]) -> None:
    RunPaths(run_dir).waves.write_text("".join(json.dumps(entry) + "\n" for entry in entries))


def test_without_adaptive_there_is_no_planner_record_or_skipped_rollout(tmp_path: Path) -> None:
    options, plan = GymOptions(rootdir=tmp_path), plan_of(tmp_path, 2, 2)
    write_log(tmp_path, {"group": ["d.jsonl", None], "skip": [0, 1], "waves": 1, "ends": [2]})
    assert waves.wave_planner(options, plan, tmp_path, pass_hook=False, on_event=print) is None
    assert waves.adaptive_records(options, plan, tmp_path) == {}
    assert waves.skipped_stamps(options, tmp_path) == set()


def test_the_wave_log_says_which_rollouts_were_never_asked_for_and_how_each_group_stopped(tmp_path: Path) -> None:
    options, plan = GymOptions(rootdir=tmp_path, adaptive=True), plan_of(tmp_path, 2, 2)
    skipped = [r.stamp for r in plan.rollouts if r.repeat == 1]
    write_log(tmp_path, {"group": ["d.jsonl", None], "skip": skipped, "waves": 1, "ends": [2], "reason": "decided"})
    assert waves.skipped_stamps(options, tmp_path) == set(skipped)
    assert waves.adaptive_records(options, plan, None) == {}  # no run directory yet
    record = waves.adaptive_records(options, plan, tmp_path)[("d.jsonl", None)]
    assert (record.waves, record.ends, record.rollouts, record.ceiling, record.reason) == (1, (2,), 2, 4, "decided")


def test_a_gate_stops_waiting_once_the_log_has_its_dataset_or_the_run_is_done(tmp_path: Path) -> None:
    plan, ticks = plan_of(tmp_path, 1, 2), []
    began = time.monotonic()
    done = waves.wait_for_wave_log(plan, "d.jsonl", tmp_path, lambda: RunState("finished"), 30, lambda: None)
    assert done is False and time.monotonic() - began < 10  # the run is over: no log will come
    write_log(tmp_path, {"group": ["d.jsonl", None], "waves": 1, "ends": [2]})
    running = RunState("running")
    assert waves.wait_for_wave_log(plan, "d.jsonl", tmp_path, lambda: running, 30, lambda: ticks.append(1))
    assert ticks == []


def test_a_gate_waits_for_the_log_no_longer_than_its_timeout(tmp_path: Path) -> None:
    plan, ticks = plan_of(tmp_path, 1, 2), []
    running = RunState("running")
    began = time.monotonic()
    assert not waves.wait_for_wave_log(plan, "d.jsonl", tmp_path, lambda: running, 0.3, lambda: ticks.append(1))
    assert 0.3 <= time.monotonic() - began < 10 and ticks  # it kept the terminal's notes flowing meanwhile
