"""What the session does for ``--gym-resume`` (:mod:`pytest_gym_eval.gym.resume`): compare this session's selection
with the earlier run before anything runs, write the run's manifest and reuse the earlier run's scored rollouts,
and after an interrupted session say how to resume it. No pytest session here: it takes the plan, the run
directory, the command line and a way to compute the Gym configuration as arguments."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from pytest_gym_eval.core.credentials import redact_args
from pytest_gym_eval.gym.fingerprint import GymConfiguration
from pytest_gym_eval.gym.resume import (
    ResumeError,
    Resumption,
    manifest_path,
    resume_command,
    secret_variables,
    task_digests,
    write_manifest,
)
from pytest_gym_eval.gym.run import GymStartError
from pytest_gym_eval.tasks.dataset import DatasetError
from pytest_gym_eval.tasks.plan import RunPlan

Digests = dict[tuple[str, str], str]
"""``(dataset name, task id) -> sha256 of the row`` (:func:`pytest_gym_eval.gym.resume.task_digests`)."""


def check_resume(
    resumption: Resumption, configuration: Callable[[RunPlan], GymConfiguration], plan: RunPlan, resume: Path | None
) -> Digests:
    """Compare the selection ``plan`` and its Gym ``configuration(plan)`` with the run ``resumption`` names (given
    as ``--gym-resume=<resume>``); returns the plan's task digests (to be written in the manifest). Raises
    :class:`pytest.UsageError` naming what differs, or why the two cannot be compared."""
    try:
        gym_configuration = configuration(plan)  # first: a missing agent is said before a changed dataset
        digests = task_digests(plan)
        differences = gym_configuration.differences(resumption.manifest.configuration)
        resumption.check(plan, differences, digests)
    except ResumeError as error:
        raise pytest.UsageError(str(error)) from None
    except (GymStartError, DatasetError, OSError) as error:
        raise pytest.UsageError(f"--gym-resume: cannot compare with {resume}: {error}") from None
    return digests


def prepare_run(
    plan: RunPlan,
    run_dir: Path,
    configuration: GymConfiguration,
    digests: Digests | None,
    invocation: tuple[Sequence[str], Path],
    resumption: Resumption | None,
    note: Callable[[str], None],
) -> RunPlan:
    """Write ``run_dir``'s manifest of ``plan`` (what it asks for; ``invocation`` is pytest's arguments and
    directory, ``digests`` those :func:`check_resume` computed, else computed now); with a ``resumption`` copy the
    earlier run's scored rollouts first and ``note`` how many. Returns the plan Gym must roll out. Raises
    :class:`ResumeError`, :class:`~pytest_gym_eval.tasks.dataset.DatasetError` or OSError."""
    digests = digests if digests is not None else task_digests(plan)
    args, directory = invocation
    command = {"args": redact_args(args), "dir": str(directory)}  # no password of a URL: see credentials
    to_run = plan
    if resumption is not None:
        to_run, reused = resumption.reuse(plan, run_dir)
        note(
            f"resuming {resumption.old}: {reused} of {len(plan.rollouts)} rollouts reused, "
            f"{len(to_run.rollouts)} to roll out"
        )
    resumed_from = resumption.old if resumption is not None else None
    write_manifest(run_dir, plan, configuration.components, command, digests, resumed_from)
    return to_run


def resume_hint(exitstatus: int, run_dir: Path | None, args: Sequence[str], run_dir_given: bool) -> list[str]:
    """After Ctrl-C or SIGTERM (``exitstatus`` INTERRUPTED): the terminal lines giving the command that resumes
    ``run_dir`` (``args`` are pytest's); none for another exit status, without a run directory, or before the run
    wrote its manifest. ``run_dir_given``: whether ``--gym-run-dir`` chose it (else basetemp's rotation is named)."""
    if exitstatus != pytest.ExitCode.INTERRUPTED or run_dir is None or not manifest_path(run_dir).is_file():
        return []
    lines = [f"gym: resume this run with: {resume_command(args, run_dir)}"]
    variables = secret_variables(args)
    if variables:
        named = ", ".join(f"{name} ({what})" for name, what in variables.items())
        lines.append(f"gym: the command reads the credentials of its options from the environment: set {named}")
    if not run_dir_given:
        lines.append("gym: (the run directory is under pytest's basetemp, which keeps the last three sessions)")
    return lines
