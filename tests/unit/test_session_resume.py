"""The session's ``--gym-resume`` piece (:mod:`pytest_gym_eval.session.resume`) without a pytest session: a run's
manifest written, then compared with a later selection, and the hint that says how to resume."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pytest_gym_eval.gym.fingerprint import FORMAT, GymConfiguration
from pytest_gym_eval.gym.resume import Resumption, manifest_path
from pytest_gym_eval.session import resume
from pytest_gym_eval.tasks.plan import RunPlan


def dataset(tmp_path: Path, tasks: int) -> Path:
    path = tmp_path / "d.jsonl"
    rows = [{"id": f"t{t}", "responses_create_params": {"input": f"Q{t}"}} for t in range(tasks)]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def plan_of(path: Path, tasks: int) -> RunPlan:
    rows = [(f"{path.name}::t{t}[r0]", path, t + 1, f"t{t}", 0, "simple_agent") for t in range(tasks)]
    return RunPlan.build(rows, whole_tasks=True)


def configuration(model: str) -> GymConfiguration:
    return GymConfiguration({"format": FORMAT, "model": {"name": model}})


def test_a_run_written_by_prepare_run_can_be_resumed_with_the_same_selection(tmp_path: Path) -> None:
    path, run_dir = dataset(tmp_path, 3), tmp_path / "run"
    run_dir.mkdir()
    plan = plan_of(path, 3)
    notes: list[str] = []
    to_run = resume.prepare_run(plan, run_dir, configuration("m"), None, (["-q"], tmp_path), None, notes.append)
    assert to_run is plan and notes == []  # nothing resumed: the whole plan is Gym's
    assert json.loads(manifest_path(run_dir).read_text())["command"] == {"args": ["-q"], "dir": str(tmp_path)}
    digests = resume.check_resume(Resumption.open(run_dir), lambda _: configuration("m"), plan, run_dir)
    assert sorted(task for _, task in digests) == ["t0", "t1", "t2"]


def test_resuming_with_another_policy_model_is_a_usage_error_naming_it(tmp_path: Path) -> None:
    path, run_dir = dataset(tmp_path, 2), tmp_path / "run"
    run_dir.mkdir()
    plan = plan_of(path, 2)
    resume.prepare_run(plan, run_dir, configuration("m"), None, ([], tmp_path), None, lambda _: None)
    with pytest.raises(pytest.UsageError, match=r"Gym configuration differs.*'m' then, 'n' now"):
        resume.check_resume(Resumption.open(run_dir), lambda _: configuration("n"), plan, run_dir)


def test_a_configuration_that_cannot_be_computed_is_a_usage_error_naming_the_run(tmp_path: Path) -> None:
    path, run_dir = dataset(tmp_path, 1), tmp_path / "run"
    run_dir.mkdir()
    plan = plan_of(path, 1)
    resume.prepare_run(plan, run_dir, configuration("m"), None, ([], tmp_path), None, lambda _: None)

    def no_checkout(_: RunPlan) -> GymConfiguration:
        raise OSError("no Gym checkout")

    with pytest.raises(
        pytest.UsageError, match=re.escape(f"--gym-resume: cannot compare with {run_dir}: no Gym checkout")
    ):
        resume.check_resume(Resumption.open(run_dir), no_checkout, plan, run_dir)


def test_the_resume_hint_is_given_only_after_an_interrupt_of_a_run_with_a_manifest(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    interrupted = pytest.ExitCode.INTERRUPTED
    assert resume.resume_hint(interrupted, run_dir, ["-q"], run_dir_given=True) == []  # no manifest yet
    resume.prepare_run(plan_of(dataset(tmp_path, 1), 1), run_dir, configuration("m"), None, ([], tmp_path), None,
                         lambda _: None)  # fmt: skip
    assert resume.resume_hint(pytest.ExitCode.TESTS_FAILED, run_dir, ["-q"], run_dir_given=True) == []
    given = resume.resume_hint(interrupted, run_dir, ["-q"], run_dir_given=True)
    assert len(given) == 1 and given[0].startswith("gym: resume this run with: ")
    assert f"--gym-resume={run_dir}" in given[0] and "-q" in given[0]
    under_basetemp = resume.resume_hint(interrupted, run_dir, ["-q"], run_dir_given=False)
    assert (
        under_basetemp[1] == "gym: (the run directory is under pytest's basetemp, which keeps the last three sessions)"
    )
