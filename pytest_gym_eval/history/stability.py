"""Measured stability of each task over its last runs: pass rate with a Wilson interval, outcome changes, a
change test, a label.

Input: a *series* (:meth:`pytest_gym_eval.history.store.HistoryStore.series`): the last N runs (default
:data:`DEFAULT_WINDOW` = 20), oldest first, that evaluated one dataset with the same file digest and the same
policy model, each with its rollouts of that dataset. Only such runs are comparable: a changed dataset file or
another model is a new series.

The rules (rule version :data:`RULE`: outcome per run, what counts as a trial, the change test, the label, the
alternatives rejected) are in :func:`assess`'s docstring. What users see: docs/history.md.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from pytest_gym_eval.history.store import RunRollouts, StoredRollout
from pytest_gym_eval.stats.exact_tests import fisher_exact_less
from pytest_gym_eval.stats.intervals import Interval, wilson_interval

RULE = "stability-2"
DEFAULT_WINDOW = 20
DEFAULT_ALPHA = 0.05
"""The change test's level: a task is labelled regressed (or fixed) when its pass probability fell (rose) at some
split of the window with a Bonferroni-adjusted one-sided p at most this."""

Outcome = Literal["pass", "fail", "mixed"]
Label = Literal["stable", "broken", "flaky", "regressed", "fixed"]
LABELS: tuple[Label, ...] = ("regressed", "broken", "flaky", "fixed", "stable")
"""Every label, in the order a reader wants them (the news first)."""
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
    ``changes`` between consecutive outcomes, ``pass_rate`` over its trials (``n`` = trials: scored rollouts, or
    runs when repeats are not independent), ``label`` and its ``evidence`` in words."""

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


@dataclass(frozen=True)
class Change:
    """The most significant one-sided change of a task's pass probability at one split of its window: ``direction``
    "down" or "up", after run index ``split`` (the first run after it), ``before``/``after`` as (passed, trials),
    the one-sided Fisher ``p`` and ``adjusted`` = min(1, p x the number of splits) (Bonferroni)."""

    direction: Literal["down", "up"]
    split: int
    before: tuple[int, int]
    after: tuple[int, int]
    p: float
    adjusted: float


def change_test(trials: Sequence[tuple[int, int]]) -> Change | None:
    """The split of ``trials`` (per run ``(passed, trials)``, oldest first) with the smallest one-sided Fisher exact
    p for a fall or a rise of the pass probability (:func:`pytest_gym_eval.stats.exact_tests.fisher_exact_less`),
    Bonferroni-
    adjusted over the ``len(trials) - 1`` splits; None for fewer than two runs. A scan over change points with a
    Bonferroni bound is conservative (the splits' tests are positively correlated), which is the side a label that
    says "regressed" should err on."""
    if len(trials) < 2:
        return None
    best: Change | None = None
    splits = len(trials) - 1
    for split in range(1, len(trials)):
        before = (sum(p for p, _ in trials[:split]), sum(n for _, n in trials[:split]))
        after = (sum(p for p, _ in trials[split:]), sum(n for _, n in trials[split:]))
        sides: tuple[tuple[Literal["down", "up"], float], ...] = (
            ("down", fisher_exact_less(before, after)),
            ("up", fisher_exact_less(after, before)),
        )
        for direction, p in sides:
            if best is None or p < best.p:
                best = Change(direction, split, before, after, p, min(1.0, p * splits))
    return best


def assess(
    dataset: str,
    task_id: str,
    outcomes: Sequence[RunOutcome],
    *,
    repeats_independent: bool = True,
    alpha: float = DEFAULT_ALPHA,
    confidence: float = 0.95,
) -> TaskStability:
    """Label one task from its per-run ``outcomes`` (oldest first, each with ``scored >= 1``) by the rules below.
    Raises ValueError for an empty sequence, a run without scored rollouts or ``alpha`` outside (0, 1).

    Rules (rule version :data:`RULE`):

    1. A task's *outcome in a run* comes from its scored rollouts (status "passed" or "failed"; errors say nothing
       about the policy model and are left out): ``pass`` when all passed, ``fail`` when none passed, ``mixed``
       when its repeats disagreed. A run where the task has no scored rollout gives no outcome (the run is skipped
       for that task). *Changes* = the number of consecutive pairs of outcomes that differ.
    2. *Trials*: each scored rollout is a Bernoulli trial of the task's pass probability when ``repeats_independent``;
       otherwise (replayed answers, greedy decoding: the repeats of a run are copies, which
       :func:`assess_series` measures) each run is one trial, passed when its repeats passed. Counting copies as
       trials would make every interval 2-3x too narrow.
    3. *Pass rate* = passed / trials over the window, with the Wilson score interval (95 %,
       :func:`pytest_gym_eval.stats.intervals.wilson_interval`).
    4. *Change test* (:func:`change_test`): the split of the window with the smallest one-sided Fisher exact p of a
       fall (or rise) of the pass probability, Bonferroni-adjusted over the splits.
    5. The label, first rule that applies:

       - ``regressed``: the change test finds a fall at level ``alpha`` (default 0.05), or the task changed exactly
         once, from pass to fail, and no run of it was mixed (a task that behaved deterministically and now fails:
         news at once, as one failed test is);
       - ``fixed``: the same, a rise (or exactly one change, from fail to pass);
       - ``broken``: it failed in every run;
       - ``stable``: it passed in every run;
       - ``flaky``: its outcomes vary with no significant change: a stochastic task at a steady pass rate.

    ``evidence`` spells out what the label rests on, e.g. ``outcomes P P M F F over 5 runs, 3 changes; pass rate
    fell from 5/6 to 1/4 after run 12 (one-sided Fisher p 0.048, x4 splits: 0.19), passed 6 of 10 rollouts``.
    Alternatives rejected: counting changes alone (rule version 1) labelled every task of a sampling policy
    "flaky", a task whose pass probability fell from 0.9 to 0.3 included; a label from the pass rate alone cannot
    tell a steady 50 % task from one that fell from 90 % to 10 %.
    """
    if not outcomes:
        raise ValueError(f"task {task_id!r} of {dataset}: no run with a scored rollout to assess")
    if any(entry.scored < 1 or not 0 <= entry.passed <= entry.scored for entry in outcomes):
        raise ValueError(f"task {task_id!r} of {dataset}: each run needs 0 <= passed <= scored and scored >= 1")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    kinds = [entry.outcome for entry in outcomes]
    changes = sum(before != after for before, after in itertools.pairwise(kinds))
    if repeats_independent:
        trials = [(entry.passed, entry.scored) for entry in outcomes]
    else:
        trials = [(int(entry.passed == entry.scored), 1) for entry in outcomes]
    passed, count = sum(p for p, _ in trials), sum(n for _, n in trials)
    interval = wilson_interval(passed, count, confidence)
    mixed = kinds.count("mixed")
    change = change_test(trials)
    letters = " ".join(_LETTER[kind] for kind in kinds)
    runs = f"{len(kinds)} run{'s' if len(kinds) != 1 else ''}"
    parts = [f"outcomes {letters} over {runs}", f"{changes} change{'s' if changes != 1 else ''}"]
    if mixed:
        parts.append(f"repeats disagreed in {mixed} run{'s' if mixed != 1 else ''}")
    label: Label
    if change is not None and change.adjusted <= alpha:
        label = "regressed" if change.direction == "down" else "fixed"
        (a, na), (b, nb) = change.before, change.after
        parts.append(
            f"pass rate {'fell' if change.direction == 'down' else 'rose'} from {a}/{na} to {b}/{nb} after run "
            f"{outcomes[change.split - 1].run_id} (one-sided Fisher p {change.p:.2g}, x{len(trials) - 1} splits:"
            f" {change.adjusted:.2g})"
        )
    elif changes == 1 and not mixed:
        label = "regressed" if kinds[-1] == "fail" else "fixed"
        since = next(index for index in range(len(kinds) - 1, 0, -1) if kinds[index] != kinds[index - 1])
        parts.append(f"{'failing' if label == 'regressed' else 'passing'} since run {outcomes[since].run_id}")
    elif all(kind == "fail" for kind in kinds):
        label = "broken"
    elif all(kind == "pass" for kind in kinds):
        label = "stable"
    else:
        label = "flaky"
        if change is not None and change.adjusted < 1:
            parts.append(f"no significant change (smallest adjusted p {change.adjusted:.2g})")
    unit = "rollouts" if repeats_independent else "runs (its repeats agree: copies, one trial a run)"
    parts.append(f"passed {passed} of {count} {unit}")
    return TaskStability(dataset, task_id, tuple(outcomes), changes, interval, label, ", ".join(parts))


def repeats_are_independent(per_task: Iterable[Sequence[RunOutcome]]) -> bool:
    """Whether the repeats of a run can count as independent trials: yes when some task's repeats disagreed in
    some run (the policy samples), or no run had two scored repeats of a task; no when runs had repeats and they
    always agreed (replayed answers or greedy decoding: copies of one answer)."""
    repeated = False
    for outcomes in per_task:
        for entry in outcomes:
            if entry.outcome == "mixed":
                return True
            repeated = repeated or entry.scored > 1
    return not repeated


def assess_series(series: Sequence[RunRollouts], *, confidence: float = 0.95) -> list[TaskStability]:
    """Every task of a series (one dataset, digest and model; runs oldest first), sorted by task id: see
    :func:`assess`, with the repeats counted as independent or not for the whole dataset
    (:func:`repeats_are_independent`: one task's repeats that always agreed are weak evidence, every task's are
    not). Tasks without any scored rollout in the window are left out."""
    per_task: dict[tuple[str, str], list[RunOutcome]] = {}
    for entry in series:
        by_dataset: dict[str, list[StoredRollout]] = {}
        for rollout in entry.rollouts:
            by_dataset.setdefault(rollout.dataset, []).append(rollout)
        for dataset, rollouts in by_dataset.items():
            for task_id, (passed, scored) in task_outcomes(rollouts).items():
                per_task.setdefault((dataset, task_id), []).append(RunOutcome(entry.run.id, passed, scored))
    independent = {
        dataset: repeats_are_independent(outcomes for (name, _), outcomes in per_task.items() if name == dataset)
        for dataset, _ in per_task
    }
    return [
        assess(dataset, task_id, outcomes, repeats_independent=independent[dataset], confidence=confidence)
        for (dataset, task_id), outcomes in sorted(per_task.items(), key=lambda item: _task_order(item[0]))
    ]


def _task_order(key: tuple[str, str]) -> tuple[str, int, str]:
    """Datasets by name, task ids numerically when they are numbers (``2`` before ``10``)."""
    dataset, task_id = key
    return (dataset, int(task_id), "") if task_id.isdigit() else (dataset, 1 << 62, task_id)
