"""Which part of a dataset a session's gates were judged on, and whether that part may decide the exit status.

The rule (a gate judged on a pytest selection shows but does not decide; a shard's gates do) is in :class:`Selection`'s
docstring. The record is made in ``pytest_collection_finish`` from the collected plan
(:mod:`pytest_gym_eval.tasks.shard`,
every collected pair before any selection) and the items pytest reported deselected
(:mod:`pytest_gym_eval.session.collect`
reads both off the items); a pytest-xdist worker saves it in the run directory (``RunPaths.selection``) for the
controller, which collects nothing. Pure: no pytest here. What users see: docs/gates-and-statistics.md.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pytest_gym_eval.core.files import write_json_atomic
from pytest_gym_eval.tasks.shard import CollectedPlan, Shard, assign_shards


@dataclass(frozen=True)
class Selection:
    """The part of one dataset a session selected: ``tasks`` of ``of_tasks`` tasks (a task counts when any of
    its repeats was selected) and ``rollouts`` of ``of_rollouts`` (task, repeat) pairs (in a session comparing
    policies, each pair's item per policy). ``how`` names what
    selected by name, marker or last outcome (``-k``, ``--lf and -k``; ``a selection`` for a conftest's own
    deselection; "" when nothing did), ``shard`` the session's shard (``2/3``, "" when not sharded).

    A gate judges a dataset. pytest's selections run part of one: ``-k``, ``-m``, ``--deselect``, ``--lf``,
    ``--sw`` (and a conftest's own deselection) choose items by name, marker or last outcome, so the part they leave
    is no sample of the dataset (under ``--lf`` it is exactly the rollouts that failed before). A gate judged on
    such a part is shown, labelled with the selection, but does not set the exit status: the items' own outcomes
    do, as in a session without gates, and the ``gym-gate`` item, when selected, is skipped. A shard
    (``--gym-shard``) is different: its tasks are assigned by a hash of their ids, a sample of the dataset by
    design, so its gates still decide the shard job's status (labelled ``judged on shard 2/3: 4 of 12 tasks``), and
    ``python -m pytest_gym_eval merge`` judges the whole.
    """

    tasks: int
    of_tasks: int
    rollouts: int
    of_rollouts: int
    how: str = ""
    shard: str = ""

    @property
    def partial(self) -> bool:
        """Whether some of the dataset's rollouts were left out."""
        return self.rollouts < self.of_rollouts

    @property
    def biased(self) -> bool:
        """Whether a selection by name, marker or last outcome left rollouts out: the gates then judge no
        sample of the dataset and do not set the exit status."""
        return self.partial and bool(self.how)

    def describe(self) -> str:
        """``judged on a -k selection: 2 of 8 tasks``, ``judged on shard 2/3: 4 of 12 tasks``, ``judged on a -k
        selection of shard 2/3: 1 of 4 tasks``, ``judged on all 8 tasks``; the rollouts too when some repeats
        of a selected task were left out (``judged on a -k selection: 8 of 8 tasks, 8 of 24 rollouts``)."""
        if not self.partial:
            return f"judged on all {self.of_tasks} task{'s' if self.of_tasks != 1 else ''}"
        counts = f"{self.tasks} of {self.of_tasks} task{'s' if self.of_tasks != 1 else ''}"
        if self.rollouts * self.of_tasks != self.of_rollouts * self.tasks:  # some repeats of a task left out
            counts += f", {self.rollouts} of {self.of_rollouts} rollouts"
        shard = f"shard {self.shard}" if self.shard else ""
        if self.how:
            what = self.how if self.how == "a selection" else f"a {self.how} selection"
            return f"judged on {what}{' of ' + shard if shard else ''}: {counts}"
        return f"judged on {shard or 'a selection'}: {counts}"

    def as_dict(self) -> dict[str, Any]:
        """The JSON report's ``selection`` of a dataset: these fields, ``partial``, ``decides`` (whether its gates
        set the exit status) and ``label`` (:meth:`describe`)."""
        return {**asdict(self), "partial": self.partial, "decides": not self.biased, "label": self.describe()}


def selections(
    collected: CollectedPlan,
    deselected: Iterable[tuple[str, str, int, str]],
    how: str,
    shard: Shard | None,
    policies: int = 1,
) -> dict[str, Selection]:
    """Per collected dataset (by name) its :class:`Selection`, from ``collected`` (every collected pair) and the
    ``(dataset, task id, repeat, policy)`` of every deselected rollout item (policy "" in a session of one policy).
    A pair the shard's rule gives another shard was left out by the shard; any other deselected pair by ``how``.
    In a session comparing ``policies`` (two or more) each (task, repeat) pair has an item per policy: the
    rollouts counted are those items, and a task counts as selected while any of its items is."""
    left_out: dict[str, set[tuple[str, int, str]]] = {}
    for dataset, task, repeat, policy in deselected:
        left_out.setdefault(dataset, set()).add((task, repeat, policy))
    found = {}
    for entry in collected.datasets:
        out = left_out.get(entry.dataset, set())
        mine = set(entry.tasks)
        if shard is not None:
            assigned = assign_shards(entry.dataset, entry.tasks, shard.count)
            mine = {task for task in entry.tasks if assigned[task] == shard.index}
        by_user = {(task, repeat, policy) for task, repeat, policy in out if task in mine}
        kept = dict.fromkeys(mine, entry.repeats * policies)
        for task, _, _ in by_user:
            kept[task] -= 1
        rollouts = sum(kept.values())
        found[entry.dataset] = Selection(
            tasks=sum(1 for count in kept.values() if count > 0),
            of_tasks=len(entry.tasks),
            rollouts=rollouts,
            of_rollouts=len(entry.tasks) * entry.repeats * policies,
            how=how if by_user else "",
            shard=str(shard) if shard is not None and len(mine) < len(entry.tasks) else "",
        )
    return found


def save(found: Mapping[str, Selection], path: Path) -> None:
    """Write ``found`` as JSON atomically (a pytest-xdist worker hands it to the controller this way)."""
    write_json_atomic(path, {name: asdict(s) for name, s in found.items()}, indent=None)


def load(path: Path) -> dict[str, Selection]:
    """Read what :meth:`save` wrote; empty when there is nothing (no worker got that far) or it cannot be read."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return {name: Selection(**fields) for name, fields in data.items()}
    except (OSError, ValueError, TypeError, AttributeError):
        return {}
