"""Splitting a session's tasks across CI jobs (``--gym-shard=I/N``), and the record of the whole collected plan
that lets ``python -m pytest_gym_eval merge`` put the shards' reports back together.

Shards are numbered from 1: ``--gym-shard=1/3``, ``2/3``, ``3/3`` (as a CI matrix counts jobs).

The assignment rule, its properties and why it was chosen: :func:`assign_shards` (named :data:`SHARD_RULE` in the
reports). :class:`CollectedPlan` is the record of the collected plan each report carries, from which the merge
checks that the shards came from one plan and names the missing pairs. What users see:
docs/xdist-and-sharding.md.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

SHARD_RULE = "sha256-sorted-blocks-v1"
"""Name of the assignment rule of :func:`assign_shards`, recorded in each report (a merge refuses to mix rules)."""

_SHARD_RE = re.compile(r"\s*([0-9]+)\s*/\s*([0-9]+)\s*")


@dataclass(frozen=True, order=True)
class Shard:
    """Shard ``index`` of ``count`` (1 <= index <= count); ``str()`` gives the ``I/N`` form."""

    index: int
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def parse_shard(text: str) -> Shard:
    """``"2/3"`` → ``Shard(2, 3)``. Shards are numbered from 1. Raises ValueError naming the expected form for
    anything else (``0/3``, ``4/3``, ``1/0``, ``a/b``, ``2``)."""
    match = _SHARD_RE.fullmatch(text)
    if match is None:
        raise ValueError(f"expected I/N (shard I of N, numbered from 1, e.g. 1/3), got {text!r}")
    index, count = int(match.group(1)), int(match.group(2))
    if count < 1:
        raise ValueError(f"the shard count N must be at least 1, got {text!r}")
    if not 1 <= index <= count:
        raise ValueError(f"shards are numbered from 1 to N: {text!r} is not one of 1/{count} .. {count}/{count}")
    return Shard(index, count)


def _digest(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8")).digest()


def assign_shards(dataset: str, task_ids: Iterable[str], count: int) -> dict[str, int]:
    """The shard (1..``count``) of each distinct task id of ``dataset`` (its name as in node ids), by the rule
    below (:data:`SHARD_RULE`). Depends only on the dataset name and the *set* of task ids. Raises ValueError
    when ``count`` < 1.

    The rule (named :data:`SHARD_RULE` in the reports) works per dataset on its set of task ids:

    1. each task gets the key ``sha256(dataset + "\\n" + task_id)``, and the tasks are sorted by key;
    2. the sorted list is cut into N contiguous blocks whose sizes differ by at most one (the task of rank r goes
       to block ``floor(r * N / M)`` of M tasks);
    3. block b goes to shard ``(b + h) mod N + 1``, with ``h`` taken from ``sha256(dataset)``, so that the blocks
       one task larger than the others fall on different shards for different datasets.

    What that gives, and why this rule rather than another:

    - every repeat of a task is in the same shard (the rule sees task ids, not items), so pass@k stays exact;
    - shard sizes differ by at most one task per dataset: a bare hash (``hash mod N``) balances only on average
      (12 tasks in 3 shards come out 4/4/4 only 6% of the time, and 20,000 in 8 shards differ by ~±50);
    - reordering rows changes nothing (the rule sees a set);
    - appending rows keeps almost every task where it was: each appended task shifts the block boundaries by at
      most one rank, so at most N-1 existing tasks change shard per appended task (a bare hash moves none, but
      cannot balance; exact balance and zero moves cannot both hold for every set of tasks);
    - the same rule on every machine: sha256, not Python's salted ``hash()``.
    """
    if count < 1:
        raise ValueError(f"count must be at least 1, got {count}")
    ranked = sorted(set(task_ids), key=lambda task: (_digest(f"{dataset}\n{task}"), task))
    total = len(ranked)
    offset = int.from_bytes(_digest(dataset)[:8], "big") % count
    return {task: (rank * count // total + offset) % count + 1 for rank, task in enumerate(ranked)}


# --- The collected plan -----------------------------------------------------------------------------------


@dataclass
class DatasetTasks:
    """Every collected task of one dataset: ``dataset`` is its name as in node ids, ``path`` the file,
    ``tasks`` the task ids in the file's order, ``repeats`` the items per task, ``agents`` each task's agent."""

    dataset: str
    path: str
    repeats: int = 0
    tasks: list[str] = field(default_factory=list)
    agents: dict[str, str] = field(default_factory=dict)


@dataclass
class CollectedPlan:
    """Every (task, repeat) pair the session collected, per dataset (datasets by name, tasks in file order, so
    that shards agree whatever order pytest-randomly gave the items), before any selection (``-k``, ``--lf``,
    ``--deselect``, the shard), and the session's shard (None when not sharded).

    ``tested`` lists the datasets only test functions name (``gym_rollouts``, no dataset item collected): every task
    of the file (the shard rule sees the whole set), the repeats and agents of the pairs the tests ask for. They are
    in the report's plan, so that a merge places their rollouts, but not in the selection counts of ``datasets``.

    ``marks`` holds the gates test functions' ``gym_rollouts`` marks declare (``min_metric=``): per dataset name,
    per custom metric, ``(minimum mean, the node ids of the tests declaring it)``, whatever the selection; a
    pytest-xdist controller learns them from here, since it collects nothing itself."""

    shard: Shard | None
    datasets: list[DatasetTasks]
    tested: list[DatasetTasks] = field(default_factory=list)
    marks: dict[str, dict[str, tuple[float, tuple[str, ...]]]] = field(default_factory=dict)

    def save(self, path: Path) -> None:
        """Write the plan as JSON atomically (a pytest-xdist worker hands it to the controller this way)."""
        from pytest_gym_eval.core.files import write_json_atomic  # here: the options import this module in every run

        data = {
            "shard": None if self.shard is None else [self.shard.index, self.shard.count],
            "datasets": [vars(entry) for entry in self.datasets],
            "tested": [vars(entry) for entry in self.tested],
            "marks": {
                name: {metric: [bound, list(tests)] for metric, (bound, tests) in marked.items()}
                for name, marked in self.marks.items()
            },
        }
        write_json_atomic(path, data, indent=None)

    @classmethod
    def load(cls, path: Path) -> CollectedPlan:
        """Read a plan :meth:`save` wrote. Raises OSError or ValueError (as ``json``) when it cannot."""
        data = json.loads(path.read_text(encoding="utf-8"))
        shard = Shard(*data["shard"]) if data.get("shard") else None
        tested = [DatasetTasks(**entry) for entry in data.get("tested", [])]
        marks = {
            name: {metric: (float(bound), tuple(map(str, tests))) for metric, (bound, tests) in gates.items()}
            for name, gates in data.get("marks", {}).items()
        }
        return cls(shard, [DatasetTasks(**entry) for entry in data["datasets"]], tested, marks)


def dataset_name(nodeid: str) -> str:
    """A dataset's name as the report and the summary use it: the file part of the node id."""
    return nodeid.split("::", 1)[0]


def tasks_of_shard(dataset: str, task_ids: Iterable[str], shard: Shard) -> set[str]:
    """The task ids of ``dataset`` that :func:`assign_shards` gives ``shard``."""
    return {task for task, index in assign_shards(dataset, task_ids, shard.count).items() if index == shard.index}


def shard_tasks(plan: CollectedPlan, shard: Shard) -> dict[str, set[str]]:
    """Per collected dataset (by name), the task ids :func:`assign_shards` gives ``shard``."""
    return {entry.dataset: tasks_of_shard(entry.dataset, entry.tasks, shard) for entry in plan.datasets}


def empty_share(plan: CollectedPlan | None) -> bool:
    """Whether ``plan``'s shard was given nothing to run: the session is sharded, collected at least one dataset,
    and :func:`assign_shards` gives its shard no task of any of them (more shards than tasks, e.g. a CI matrix of 4
    jobs over a 3-task dataset). Such a session passes and writes its reports: its share is empty by the split,
    not by a selection of the user's (a ``-k`` that selects nothing is still pytest's exit status 5)."""
    if plan is None or plan.shard is None:
        return False
    datasets = [*plan.datasets, *plan.tested]
    return bool(datasets) and not any(tasks_of_shard(e.dataset, e.tasks, plan.shard) for e in datasets)


def shard_meta(shard: Shard | None) -> Mapping[str, object]:
    """The report meta (and JUnit suite property ``gym.shard``) naming the session's shard, e.g. ``"2/3"``."""
    return {} if shard is None else {"shard": str(shard)}
