"""Measured stability of each task over its last runs: pass rate with a Wilson interval, outcome changes, a label.

Input: a *series* (:meth:`pytest_gym_eval.history.store.HistoryStore.series`): the last N runs (default
:data:`DEFAULT_WINDOW` = 20), oldest first, that evaluated one dataset with the same file digest and the same
policy model, each with its rollouts of that dataset. Only such runs are comparable: a changed dataset file or
another model is a new series.

The rules (rule version :data:`RULE`: outcome per run, changes, pass rate, the label, the alternative rejected)
are in :func:`assess`'s docstring. What users see: docs/history.md.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from pytest_gym_eval.history.store import RunRollouts, StoredRollout
from pytest_gym_eval.stats import Interval, wilson_interval

RULE = "stability-1"
DEFAULT_WINDOW = 20
DEFAULT_FLAKY_CHANGES = 2

Outcome = Literal["pass", "fail", "mixed"]
Label = Literal["stable", "flaky", "newly failing", "fixed"]
LABELS: tuple[Label, ...] = ("stable", "flaky", "newly failing", "fixed")
_LETTER = {"pass": "P", "fail": "F", "mixed": "M"}


@dataclass(frozen=True)
class RunOutcome:
    """One task in one run: ``passed`` of ``scored`` rollouts; ``run_id`` the run."""

    run_id: int
    passed: int
    scored: int

    @property
    def outcome(self) -> Outcome:
        """``pass``, ``fail`` or ``mixed`` (rule 1); ``scored`` must be positive."""
        if self.passed == self.scored:
            return "pass"
        return "fail" if self.passed == 0 else "mixed"


@dataclass(frozen=True)
class TaskStability:
    """A task's stability over a window: ``outcomes`` oldest first (runs with no scored rollout left out),
    ``changes`` between consecutive outcomes, ``pass_rate`` over rollouts (``n`` = scored rollouts), ``label``
    and its ``evidence`` in words."""

    dataset: str
    task_id: str
    outcomes: tuple[RunOutcome, ...]
    changes: int
    pass_rate: Interval
    label: Label
    evidence: str

    @property
    def sparkline(self) -> str:
        """The outcomes as letters, oldest first: ``P`` pass, ``F`` fail, ``M`` mixed (e.g. ``PPFPF``)."""
        return "".join(_LETTER[entry.outcome] for entry in self.outcomes)


def task_outcomes(rollouts: Iterable[StoredRollout]) -> dict[str, tuple[int, int]]:
    """``task_id -> (passed, scored)`` over ``rollouts`` (one run's): errors are not scored (rule 1)."""
    counts: dict[str, tuple[int, int]] = {}
    for rollout in rollouts:
        if rollout.status not in ("passed", "failed"):
            continue
        passed, scored = counts.get(rollout.task_id, (0, 0))
        counts[rollout.task_id] = (passed + (rollout.status == "passed"), scored + 1)
    return counts


def assess(
    dataset: str,
    task_id: str,
    outcomes: Sequence[RunOutcome],
    *,
    flaky_changes: int = DEFAULT_FLAKY_CHANGES,
    confidence: float = 0.95,
) -> TaskStability:
    """Label one task from its per-run ``outcomes`` (oldest first, each with ``scored >= 1``) by the rules below.
    Raises ValueError for an empty sequence, a run without scored rollouts or ``flaky_changes < 2``.

    Rules (rule version :data:`RULE`):

    1. A task's *outcome in a run* comes from its scored rollouts (status "passed" or "failed"; errors say nothing
       about the policy model and are left out): ``pass`` when all passed, ``fail`` when none passed, ``mixed``
       when its repeats disagreed. A run where the task has no scored rollout gives no outcome (the run is skipped
       for that task).
    2. *Changes* = the number of consecutive pairs of outcomes (in run order) that differ.
    3. *Pass rate* = passed / scored rollouts over the window, with the Wilson score interval (95 %,
       :func:`pytest_gym_eval.stats.wilson_interval`): repeats of one task are Bernoulli trials of its pass
       probability.
    4. The label, first rule that applies:

       - ``flaky``: some run was ``mixed`` (its repeats disagreed), or changes >= ``flaky_changes`` (default 2: it
         went and came back at least once);
       - ``newly failing``: at least one change (fewer than ``flaky_changes``: with the default, exactly one) and the
         last outcome is ``fail`` (it passed, then failed since its last change);
       - ``fixed``: the same with the last outcome ``pass``;
       - ``stable``: no change (always passing or always failing; ``evidence`` says which), including a task seen
         in one run only.

    ``evidence`` spells out what the label rests on, e.g. ``outcomes P F P F P over 5 runs, 4 changes, passed 3 of 5
    rollouts``. The alternative rejected: a label from the pass rate alone (e.g. "between 10 % and 90 %") cannot tell
    a task that flips every run from one that failed once a long time ago and since always passed.
    """
    if not outcomes:
        raise ValueError(f"task {task_id!r} of {dataset}: no run with a scored rollout to assess")
    if any(entry.scored < 1 or not 0 <= entry.passed <= entry.scored for entry in outcomes):
        raise ValueError(f"task {task_id!r} of {dataset}: each run needs 0 <= passed <= scored and scored >= 1")
    if flaky_changes < 2:
        raise ValueError(
            f"flaky_changes must be at least 2 (one change is newly failing or fixed), got {flaky_changes}"
        )
    kinds = [entry.outcome for entry in outcomes]
    changes = sum(before != after for before, after in itertools.pairwise(kinds))
    passed = sum(entry.passed for entry in outcomes)
    scored = sum(entry.scored for entry in outcomes)
    interval = wilson_interval(passed, scored, confidence)
    mixed = kinds.count("mixed")
    label: Label
    if mixed or changes >= flaky_changes:
        label = "flaky"
    elif changes >= 1:
        label = "newly failing" if kinds[-1] == "fail" else "fixed"
    else:
        label = "stable"
    letters = " ".join(_LETTER[kind] for kind in kinds)
    runs = f"{len(kinds)} run{'s' if len(kinds) != 1 else ''}"
    parts = [f"outcomes {letters} over {runs}", f"{changes} change{'s' if changes != 1 else ''}"]
    if mixed:
        parts.append(f"repeats disagreed in {mixed} run{'s' if mixed != 1 else ''}")
    if label in ("newly failing", "fixed"):
        since = next(index for index in range(len(kinds) - 1, 0, -1) if kinds[index] != kinds[index - 1])
        parts.append(f"{'failing' if label == 'newly failing' else 'passing'} since run {outcomes[since].run_id}")
    parts.append(f"passed {passed} of {scored} rollouts")
    return TaskStability(dataset, task_id, tuple(outcomes), changes, interval, label, ", ".join(parts))


def assess_series(
    series: Sequence[RunRollouts], *, flaky_changes: int = DEFAULT_FLAKY_CHANGES, confidence: float = 0.95
) -> list[TaskStability]:
    """Every task of a series (one dataset, digest and model; runs oldest first), sorted by task id: see
    :func:`assess`. Tasks without any scored rollout in the window are left out."""
    per_task: dict[tuple[str, str], list[RunOutcome]] = {}
    for entry in series:
        by_dataset: dict[str, list[StoredRollout]] = {}
        for rollout in entry.rollouts:
            by_dataset.setdefault(rollout.dataset, []).append(rollout)
        for dataset, rollouts in by_dataset.items():
            for task_id, (passed, scored) in task_outcomes(rollouts).items():
                per_task.setdefault((dataset, task_id), []).append(RunOutcome(entry.run.id, passed, scored))
    return [
        assess(dataset, task_id, outcomes, flaky_changes=flaky_changes, confidence=confidence)
        for (dataset, task_id), outcomes in sorted(per_task.items(), key=lambda item: _task_order(item[0]))
    ]


def _task_order(key: tuple[str, str]) -> tuple[str, int, str]:
    """Datasets by name, task ids numerically when they are numbers (``2`` before ``10``)."""
    dataset, task_id = key
    return (dataset, int(task_id), "") if task_id.isdigit() else (dataset, 1 << 62, task_id)
