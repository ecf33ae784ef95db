"""Whether every planned rollout is in before the session lets ``gym eval run`` write its aggregate metrics
(:meth:`pytest_gym_eval.gym.run.GymRun.has_every_rollout`): from the stamps the session's feed has already read when
they cover the plan, from Gym's files otherwise."""

from __future__ import annotations

import json
from pathlib import Path

from pytest_gym_eval.core.rundir import RunPaths
from pytest_gym_eval.gym.run import GymRun, RunSettings
from pytest_gym_eval.outcomes.records import ROLLOUT_INDEX_KEY, TASK_INDEX_KEY
from pytest_gym_eval.tasks.plan import PlannedRollout, RunPlan


def run_of(tmp_path: Path, rollouts: int) -> GymRun:
    plan = RunPlan(
        tuple(
            PlannedRollout(i, f"d.jsonl::t{i}[r0]", tmp_path / "d.jsonl", i + 1, f"t{i}", 0, "a")
            for i in range(rollouts)
        )
    )
    settings = RunSettings(
        gym=tmp_path / "gym", env={}, cwd=tmp_path, model=None, gym_configs=(), head_server=("127.0.0.1", 9)
    )
    paths = RunPaths(tmp_path)
    paths.output.parent.mkdir(parents=True, exist_ok=True)
    return GymRun(plan, paths, settings)


def test_stamps_the_feed_has_read_spare_reading_gyms_files(tmp_path: Path) -> None:
    run = run_of(tmp_path, 3)
    assert not run.paths.output.exists()
    assert run.has_every_rollout(known=[0, 1, 2])  # no file read: there is none
    assert not run.has_every_rollout(known=[0, 1])


def test_without_every_stamp_known_gyms_files_decide(tmp_path: Path) -> None:
    run = run_of(tmp_path, 3)
    lines = [json.dumps({TASK_INDEX_KEY: i, ROLLOUT_INDEX_KEY: 0, "reward": 1.0}) for i in range(3)]
    run.paths.output.write_text("\n".join(lines) + "\n")
    assert run.has_every_rollout(known=[0])  # the feed lags behind Gym's file: the file says all are in
    run.paths.output.write_text("\n".join(lines[:2]) + "\n")
    assert not run.has_every_rollout()
