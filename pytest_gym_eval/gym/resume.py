"""Resuming an interrupted run (``--gym-resume=RUN_DIR``): what a run asked for, and reusing what it got.

:class:`Manifest` (its docstring: what a run directory's ``manifest.json`` holds) and :class:`Resumption` (its
docstring: the checks and what is reused). What users see: docs/warm-and-resume.md.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pytest_gym_eval.core.credentials import secret_spans
from pytest_gym_eval.core.files import LineFollower, write_text_atomic
from pytest_gym_eval.core.rundir import RunPaths
from pytest_gym_eval.gym.feed import ROLLOUT_INDEX_KEY, TASK_INDEX_KEY, RolloutRecord, parse_record
from pytest_gym_eval.tasks.dataset import parse_row, row_digest, row_offsets
from pytest_gym_eval.tasks.plan import PlannedRollout, RunPlan

MANIFEST_NAME = RunPaths(Path()).manifest.name
MANIFEST_FORMAT = 1
RESUMED_FROM_KEY = "_pytest_gym_eval_resumed_from"
"""Key added to a reused record: where the earlier run's record is (``<path>:<line>``)."""
RESUME_OPTION = "--gym-resume"
LISTED = 5
"""Tasks a mismatch message names (the rest are counted)."""


class ResumeError(Exception):
    """The earlier run cannot be resumed by this session; ``str()`` says what differs."""


def manifest_path(run_dir: Path) -> Path:
    """``<run_dir>/manifest.json``."""
    return RunPaths(run_dir).manifest


def resumed_path(run_dir: Path) -> Path:
    """Where a resumed run keeps the records it reused: ``<run_dir>/resumed/rollouts.jsonl``."""
    return RunPaths(run_dir).resumed


def dataset_of(rollout: PlannedRollout) -> str:
    """A planned rollout's dataset name (its node id's path part, relative to the rootdir)."""
    return rollout.nodeid.split("::", 1)[0]


def task_digests(plan: RunPlan) -> dict[tuple[str, str], str]:
    """``(dataset name, task id) -> sha256 of the row`` for every task of ``plan``, reading each row once (by its
    byte offset). Raises :class:`~pytest_gym_eval.tasks.dataset.DatasetError` when a dataset changed since
    collection."""
    lines: dict[Path, dict[int, tuple[str, str]]] = {}
    for rollout in plan.rollouts:
        lines.setdefault(rollout.dataset, {})[rollout.line] = (dataset_of(rollout), rollout.task_id)
    digests = {}
    for path, wanted in lines.items():
        offsets = row_offsets(path, wanted)
        with path.open("rb") as handle:
            for line, key in wanted.items():
                handle.seek(offsets[line])
                digests[key] = row_digest(parse_row(handle.readline(), path, line))
    return digests


@dataclass(frozen=True)
class Manifest:
    """What a run asked for. ``rollouts`` holds ``(stamp, dataset, task id, repeat,
    agent)``; ``tasks`` maps ``(dataset, task id)`` to the row's sha256; ``configuration`` is the Gym
    configuration's components; ``command`` the pytest invocation (``args``, ``dir``); ``row_repeats`` the run's
    plan's :attr:`~pytest_gym_eval.tasks.plan.RunPlan.stride` (its ``--num-repeats`` but for shared-task mode: how its
    records' stamps are read, see :func:`~pytest_gym_eval.gym.feed.record_stamp`).

    Every run directory gets a manifest at the start of its run, ``manifest.json``: the command line, the Gym
    configuration (:mod:`pytest_gym_eval.gym.fingerprint`: checkout, sources, config files, model, recordings), the
    sha256 of each selected task's row (:func:`~pytest_gym_eval.tasks.dataset.row_digest`), and every planned rollout as
    ``[stamp, dataset, task id, repeat, agent]`` (the stamp Gym's records' indices give back).
    """

    configuration: dict[str, Any]
    rollouts: tuple[tuple[int, str, str, int, str], ...]
    tasks: dict[tuple[str, str], str]
    command: dict[str, Any] = field(default_factory=dict)
    resumed_from: str | None = None
    row_repeats: int = 1

    @classmethod
    def of(
        cls,
        plan: RunPlan,
        configuration: Mapping[str, Any],
        digests: Mapping[tuple[str, str], str],
        command: Mapping[str, Any],
        resumed_from: Path | None = None,
    ) -> Manifest:
        """The manifest of a run of ``plan``."""
        rollouts = tuple((r.stamp, dataset_of(r), r.task_id, r.repeat, r.agent) for r in plan.rollouts)
        origin = str(resumed_from) if resumed_from is not None else None
        return cls(dict(configuration), rollouts, dict(digests), dict(command), origin, plan.stride)

    def save(self, path: Path) -> None:
        """Write atomically (temp file, rename)."""
        data = {
            "format": MANIFEST_FORMAT,
            "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "command": self.command,
            "resumed_from": self.resumed_from,
            "configuration": self.configuration,
            "tasks": [[dataset, task, digest] for (dataset, task), digest in self.tasks.items()],
            "rollouts": [list(rollout) for rollout in self.rollouts],
            "row_repeats": self.row_repeats,
        }
        write_text_atomic(path, json.dumps(data, separators=(",", ":")) + "\n")

    @classmethod
    def load(cls, path: Path) -> Manifest:
        """Read a manifest :meth:`save` wrote. Raises :class:`ResumeError` saying why it cannot be used."""
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ResumeError(
                f"{path.parent} has no {MANIFEST_NAME}: it is no run directory of pytest-gym-eval, Gym never started "
                "in it, or an older version made it"
            ) from None
        except (OSError, ValueError) as error:
            raise ResumeError(f"{path}: cannot be read: {error}") from None
        try:
            if data["format"] != MANIFEST_FORMAT:
                raise ResumeError(f"{path}: manifest format {data['format']}, this version reads {MANIFEST_FORMAT}")
            return cls(
                configuration=dict(data["configuration"]),
                rollouts=tuple((int(s), str(d), str(t), int(r), str(a)) for s, d, t, r, a in data["rollouts"]),
                tasks={(str(d), str(t)): str(h) for d, t, h in data["tasks"]},
                command=dict(data.get("command") or {}),
                resumed_from=data.get("resumed_from"),
                row_repeats=int(data.get("row_repeats", 1)),
            )
        except (KeyError, TypeError, ValueError) as error:
            raise ResumeError(f"{path}: not a manifest this version can read ({error!r})") from None


def gym_records(run_dir: Path, row_repeats: int = 1) -> dict[int, RolloutRecord]:
    """Every rollout a run's files hold, by the run's stamp: Gym's output files (``gym-output/**/rollouts.jsonl``
    and their ``rollouts_failures.jsonl``, waves included) and its own ``resumed/rollouts.jsonl``. A scored
    record wins over a failure of the same stamp (Gym's ``--resume`` retries failures). ``row_repeats`` is the
    run's stride (:attr:`Manifest.row_repeats`)."""
    paths = RunPaths(run_dir)
    output = paths.output.parent
    files = [(path, False) for path in sorted(output.glob(f"**/{paths.output.name}"))]
    files += [(path, True) for path in sorted(output.glob(f"**/{paths.failures.name}"))]
    files.append((resumed_path(run_dir), False))
    found: dict[int, RolloutRecord] = {}
    for path, failures in files:
        for number, offset, raw in LineFollower(path).new_lines():  # complete lines, with the offsets records keep
            record = parse_record(raw, path, number, failures, offset, row_repeats)
            earlier = found.get(record.stamp) if record is not None else None
            if record is not None and (earlier is None or earlier.failure_class is not None):
                found[record.stamp] = record
    return found


@dataclass(frozen=True)
class Resumption:
    """An earlier run (``old``, its :class:`Manifest`) that this session resumes.

    A session given ``--gym-resume=RUN_DIR`` compares its own selection with that manifest before anything runs
    (:meth:`Resumption.check`): a different Gym configuration, a task whose row changed, a (task, repeat) now run by
    another agent, or no task in common is a usage error naming what differs. Then (:meth:`Resumption.reuse`) each
    selected (dataset, task, repeat) that the earlier run *scored* (a line in its rollouts file, also in files of
    its own earlier resume, with a finite numeric reward) is copied into this run's ``resumed/rollouts.jsonl``,
    stamped with this session's stamp and ``_pytest_gym_eval_resumed_from`` = ``<old file>:<line>``; Gym rolls out
    only the others (missing, errored, or newly selected repeats). Items follow that file like Gym's output, so
    summary, gates, JUnit, the JSON report and the HTML page hold every rollout once, as one session. Nothing in
    the earlier run directory is written to.
    """

    old: Path
    manifest: Manifest

    @classmethod
    def open(cls, run_dir: Path) -> Resumption:
        """The run in ``run_dir``; raises :class:`ResumeError` when it has no usable manifest."""
        return cls(run_dir, Manifest.load(manifest_path(run_dir)))

    def check(self, plan: RunPlan, differences: Sequence[str], digests: Mapping[tuple[str, str], str]) -> None:
        """Raise :class:`ResumeError` naming what differs between that run and this session's ``plan``:
        ``differences`` of the Gym configuration
        (:meth:`~pytest_gym_eval.gym.fingerprint.GymConfiguration.differences`),
        rows whose ``digests`` changed, (task, repeat) pairs run by another agent, or no task in common."""
        where = f"{RESUME_OPTION}={self.old}"
        if differences:
            raise ResumeError(
                f"{where}: this session's Gym configuration differs from that run's: {'; '.join(differences)}. "
                "Resume with the configuration of that run, or start afresh without --gym-resume"
            )
        shared = [key for key in digests if key in self.manifest.tasks]
        if not shared:
            datasets = sorted({dataset for dataset, _ in self.manifest.tasks})
            raise ResumeError(
                f"{where}: none of this session's tasks was in that run (its datasets: {', '.join(datasets)}); "
                "is it the run you meant?"
            )
        changed = [
            f"{dataset}::{task}"
            for dataset, task in shared
            if digests[(dataset, task)] != self.manifest.tasks[(dataset, task)]
        ]
        if changed:
            raise ResumeError(
                f"{where}: the row of {_listed(changed)} changed since that run (its rewards would not be this "
                "row's); restore the dataset, deselect those tasks, or start afresh without --gym-resume"
            )
        agents = {(d, t, r): a for _, d, t, r, a in self.manifest.rollouts}
        moved = [
            f"{dataset_of(r)}::{r.task_id}[r{r.repeat}] ({agents[key]} then, {r.agent} now)"
            for r in plan.rollouts
            if (key := (dataset_of(r), r.task_id, r.repeat)) in agents and agents[key] != r.agent
        ]
        if moved:
            raise ResumeError(f"{where}: another agent runs {_listed(moved)}")

    def reuse(self, plan: RunPlan, run_dir: Path) -> tuple[RunPlan, int]:
        """Copy the earlier run's scored records of ``plan``'s rollouts into ``run_dir``'s
        :func:`resumed_path` (restamped); returns the plan of the rest, which Gym must roll out, and how many
        were reused. Reads the earlier run only."""
        records = gym_records(self.old, self.manifest.row_repeats)
        earlier = {(d, t, r): stamp for stamp, d, t, r, _ in self.manifest.rollouts}
        reused: list[tuple[PlannedRollout, RolloutRecord]] = []
        rest = []
        for rollout in plan.rollouts:
            stamp = earlier.get((dataset_of(rollout), rollout.task_id, rollout.repeat))
            record = records.get(stamp) if stamp is not None else None
            if record is not None and record.failure_class is None and record.numeric_reward() is not None:
                reused.append((rollout, record))
            else:
                rest.append(rollout)
        target = resumed_path(run_dir)
        target.parent.mkdir(parents=True, exist_ok=True)
        with target.open("w", encoding="utf-8") as out:
            for rollout, record in reused:
                full = record.read_full()
                full[TASK_INDEX_KEY] = rollout.stamp  # a resuming session's plan is in pair mode (one row each)
                full[ROLLOUT_INDEX_KEY] = 0
                full[RESUMED_FROM_KEY] = f"{record.path}:{record.line}"
                out.write(json.dumps(full, ensure_ascii=False) + "\n")
        return RunPlan(tuple(rest), serve_agents=plan.serve_agents), len(reused)


def _listed(names: Sequence[str]) -> str:
    shown = ", ".join(names[:LISTED])
    return shown + (f" and {len(names) - LISTED} more" if len(names) > LISTED else "")


def _without_resume(args: Iterable[str]) -> list[str]:
    """``args`` without any ``--gym-resume`` option (``--gym-resume=DIR`` or ``--gym-resume DIR``)."""
    kept: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg == RESUME_OPTION:
            skip = True
        elif not arg.startswith(RESUME_OPTION + "="):
            kept.append(arg)
    return kept


def pytest_program(argv0: str | None = None, executable: str | None = None) -> list[str]:
    """How this pytest was started, as a command: ``python -m pytest`` when run as a module, else the script
    (its bare name when that is what ``PATH`` finds)."""
    argv0 = sys.argv[0] if argv0 is None else argv0
    executable = sys.executable if executable is None else executable
    if argv0.endswith(("__main__.py", "-c")) or not argv0:
        return [executable, "-m", "pytest"]
    name = os.path.basename(argv0)
    found = shutil.which(name)
    if found and os.path.realpath(found) == os.path.realpath(argv0):
        return [name]
    return [argv0]


def resume_command(args: Sequence[str], run_dir: Path, program: Sequence[str] | None = None) -> str:
    """The shell command that resumes ``run_dir``: this pytest's program and ``args`` (any earlier
    ``--gym-resume`` replaced) plus ``--gym-resume=<run_dir>``. A secret an argument's URL holds
    (:func:`~pytest_gym_eval.core.credentials.secret_spans`) is not written in it: the command reads it from an
    environment variable instead (``'--gym-history=postgresql://me:'"${GYM_HISTORY_PASSWORD}"'@db/evals'``),
    which :func:`secret_variables` names."""
    words, _ = _shell_words([*(program if program is not None else pytest_program()), *_without_resume(args)])
    return " ".join([*words, shlex.quote(f"{RESUME_OPTION}={run_dir}")])


def secret_variables(args: Sequence[str]) -> dict[str, str]:
    """The environment variables :func:`resume_command` of ``args`` reads its secrets from, each with what it
    must hold (``{"GYM_HISTORY_PASSWORD": "the password in --gym-history"}``); empty when none holds one."""
    _, variables = _shell_words(_without_resume(args))
    return {name: what for name, (what, _) in variables.items()}


def _shell_words(args: Sequence[str]) -> tuple[list[str], dict[str, tuple[str, str]]]:
    """``args`` as shell words, each secret replaced by a reference to an environment variable named after its
    option and kind (``GYM_HISTORY_PASSWORD``; ``_2``, ``_3`` for other values of the same name), and those
    variables: name -> (what it holds, its value)."""
    words: list[str] = []
    variables: dict[str, tuple[str, str]] = {}
    previous = ""
    for arg in args:
        if arg.startswith("--"):
            option = arg.split("=", 1)[0]
        else:
            option = previous if previous.startswith("--") and "=" not in previous else ""
        pieces, last = [], 0
        for start, end, what in secret_spans(arg):
            value = arg[start:end]
            stem = re.sub(r"[^A-Za-z0-9]+", "_", f"{option.lstrip('-') or 'gym'}_{what}").strip("_").upper()
            name, number = stem, 1
            while name in variables and variables[name][1] != value:
                number += 1
                name = f"{stem}_{number}"
            variables[name] = (f"the {what} in {option or 'an argument'}", value)
            if arg[last:start]:
                pieces.append(shlex.quote(arg[last:start]))
            pieces.append(f'"${{{name}}}"')
            last = end
        if arg[last:] or not pieces:
            pieces.append(shlex.quote(arg[last:]))
        words.append("".join(pieces))
        previous = arg
    return words, variables


def write_manifest(
    run_dir: Path,
    plan: RunPlan,
    configuration: Mapping[str, Any],
    command: Mapping[str, Any],
    digests: Mapping[tuple[str, str], str] | None = None,
    resumed_from: Path | None = None,
) -> None:
    """Write ``run_dir``'s manifest for ``plan`` (computing the row digests unless given). Raises
    :class:`~pytest_gym_eval.tasks.dataset.DatasetError` when a dataset changed since collection, OSError."""
    if digests is None:
        digests = task_digests(plan)
    Manifest.of(plan, configuration, digests, command, resumed_from).save(manifest_path(run_dir))
