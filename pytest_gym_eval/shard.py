"""Splitting a session's tasks across CI jobs (``--gym-shard=I/N``), and the record of the whole collected plan
that lets ``python -m pytest_gym_eval merge`` put the shards' reports back together.

Shards are numbered from 1: ``--gym-shard=1/3``, ``2/3``, ``3/3`` (as a CI matrix counts jobs).

The assignment rule (:func:`assign_shards`, named :data:`SHARD_RULE` in the reports) works per dataset on its set
of task ids:

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

The report records, for every dataset the session collected, every task id in collection order, the repeats,
each task's agent, the pass threshold, the gates and the (task, repeat) pairs the session selected: that is
what lets the merge check that the shards came from the same plan, name the pairs that are missing, and order
the merged rollouts as one session over all of them would.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from pytest_gym_eval.gym_options import GymOptions
    from pytest_gym_eval.plan import PlannedRollout
    from pytest_gym_eval.session import GymSession

SHARD_RULE = "sha256-sorted-blocks-v1"
"""Name of the assignment rule of :func:`assign_shards`, recorded in each report (a merge refuses to mix rules)."""

COLLECTED_FILE = "collected.json"
"""File in the run directory where a pytest-xdist worker leaves the collected plan for the controller."""

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
    in this module's docstring (:data:`SHARD_RULE`). Depends only on the dataset name and the *set* of task ids.
    Raises ValueError when ``count`` < 1."""
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
    ``--deselect``, the shard), and the session's shard (None when not sharded)."""

    shard: Shard | None
    datasets: list[DatasetTasks]

    @classmethod
    def from_items(cls, items: Iterable[pytest.Item], shard: Shard | None) -> CollectedPlan:
        """The plan of the rollout items among ``items`` (other items are ignored)."""
        from pytest_gym_eval.items import RolloutItem

        datasets: dict[str, DatasetTasks] = {}
        lines: dict[str, dict[str, int]] = {}  # per dataset, each task's line
        parent: object = None
        entry = DatasetTasks("", "")
        for item in items:  # ~1 us an item: it runs on every collection, 100,000 items and more
            if not isinstance(item, RolloutItem):
                continue
            if item.parent is not parent:
                parent = item.parent
                name = dataset_name(item.nodeid)
                entry = datasets.get(name) or datasets.setdefault(name, DatasetTasks(name, str(item.path)))
                at = lines.setdefault(name, {})
            task = item.task.task_id
            if task not in entry.agents:
                entry.tasks.append(task)
                entry.agents[task] = item.agent
                at[task] = item.task.line
            if item.repeat >= entry.repeats:
                entry.repeats = item.repeat + 1
        # The file's order, not the items': pytest-randomly shuffles the items, differently in each shard's job.
        for name, entry in datasets.items():
            entry.tasks.sort(key=lines[name].__getitem__)
        return cls(shard, [datasets[name] for name in sorted(datasets)])

    def save(self, path: Path) -> None:
        """Write the plan as JSON atomically (a pytest-xdist worker hands it to the controller this way)."""
        data = {
            "shard": None if self.shard is None else [self.shard.index, self.shard.count],
            "datasets": [vars(entry) for entry in self.datasets],
        }
        temporary = path.with_name(f".{path.name}.{os.getpid()}")
        temporary.write_text(json.dumps(data), encoding="utf-8")
        os.replace(temporary, path)

    @classmethod
    def load(cls, path: Path) -> CollectedPlan:
        """Read a plan :meth:`save` wrote. Raises OSError or ValueError (as ``json``) when it cannot."""
        data = json.loads(path.read_text(encoding="utf-8"))
        shard = Shard(*data["shard"]) if data.get("shard") else None
        return cls(shard, [DatasetTasks(**entry) for entry in data["datasets"]])


def dataset_name(nodeid: str) -> str:
    """A dataset's name as the report and the summary use it: the file part of the node id."""
    return nodeid.split("::", 1)[0]


def select(items: list[pytest.Item], shard: Shard, plan: CollectedPlan) -> tuple[list[Any], list[Any]]:
    """Split ``items`` into this shard's and the others': a rollout item is kept when its task is assigned to
    ``shard``; a dataset's gate item is kept when the shard keeps any of the dataset's rollouts; other items
    (plain tests) are kept. Returns ``(kept, deselected)``, each in the order of ``items``."""
    from pytest_gym_eval.items import GateItem, RolloutItem

    mine: dict[str, set[str]] = {}
    for entry in plan.datasets:
        assigned = assign_shards(entry.dataset, entry.tasks, shard.count)
        mine[entry.dataset] = {task for task, index in assigned.items() if index == shard.index}
    kept: list[Any] = []
    deselected: list[Any] = []
    for item in items:
        if isinstance(item, RolloutItem):
            keep = item.task_id in mine.get(dataset_name(item.nodeid), ())
        elif isinstance(item, GateItem):
            keep = bool(mine.get(dataset_name(item.nodeid)))
        else:
            keep = True
        (kept if keep else deselected).append(item)
    return kept, deselected


# --- The session's side (called from the plugin's hooks) ------------------------------------------------

PLAN_KEY: pytest.StashKey[CollectedPlan] = pytest.StashKey()
"""Where the session keeps its :class:`CollectedPlan` (``config.stash``)."""


def collect_and_select(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``pytest_collection_modifyitems``: record every collected (task, repeat) pair, then, with
    ``--gym-shard``, keep only this shard's items and report the others as deselected (as ``-k`` does).

    A pytest-xdist worker also saves the record in the run directory, where the controller (which collects
    nothing) reads it for the report.
    """
    from pytest_gym_eval.session import SESSION_KEY

    gym = config.stash[SESSION_KEY]
    shard = gym.options.shard
    plan = config.stash[PLAN_KEY] = CollectedPlan.from_items(items, shard)
    if gym.is_worker and gym.run_dir is not None:
        plan.save(gym.run_dir / COLLECTED_FILE)
    if shard is None:
        return
    kept, deselected = select(items, shard, plan)
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = kept


def collected_plan(config: pytest.Config, run_dir: Path | None) -> CollectedPlan | None:
    """This session's :class:`CollectedPlan`: its own, or on the pytest-xdist controller the one a worker
    saved in ``run_dir``; None when there is none (nothing collected, or no worker got that far)."""
    plan = config.stash.get(PLAN_KEY, None)
    if plan is None and run_dir is not None:
        try:
            plan = CollectedPlan.load(run_dir / COLLECTED_FILE)
        except (OSError, ValueError, KeyError, TypeError):
            return None
    return plan


def report_plan_of(config: pytest.Config, gym: GymSession, meta: Mapping[str, object]) -> dict[str, Any] | None:
    """:func:`report_plan` of the session (None when it collected no rollout item); ``meta`` is the report's,
    whose dataset digests are reused."""
    collected = collected_plan(config, gym.run_dir)
    if collected is None:
        return None
    # A pair whose item reported skipped (``pytest.skip`` at run time) or that --gym-adaptive's waves never asked
    # for was not selected: a merge must not count it as a rollout the shard lost.
    return report_plan(collected, gym.selected_rollouts(), gym.options, meta)


# --- The report's record of the plan ----------------------------------------------------------------------


def report_plan(
    collected: CollectedPlan,
    selected: Sequence[PlannedRollout],
    options: GymOptions,
    meta: Mapping[str, object] | None = None,
) -> dict[str, Any]:
    """The JSON report's ``plan``: the shard and its rule, the gate settings, and per collected dataset its
    sha256, repeats, every task id (the file's order), agents, pass threshold, gates and the (task, repeat)
    pairs this session selected (``selected`` is the session's run plan, after every selection).

    Layout (``report.schema.json``, ``$defs/plan``)::

        {"shard": {"index": 2, "count": 3} | null, "rule": "sha256-sorted-blocks-v1",
         "gate_mode": "point", "inconclusive": "fail",
         "datasets": [{"dataset", "sha256", "repeats", "agent", "tasks": [...], "agents": {task: agent},
                       "threshold", "gates": [{"metric", "k", "threshold"}], "selected": {task: [repeats]}}]}

    ``agent`` is the dataset's most common agent and ``agents`` lists only the tasks whose agent differs. A
    dataset's sha256 is taken from ``meta`` (``dataset_sha256.<dataset>``) when it is there, else computed.
    """
    chosen: dict[str, dict[str, list[int]]] = {}
    for rollout in selected:
        chosen.setdefault(dataset_name(rollout.nodeid), {}).setdefault(rollout.task_id, []).append(rollout.repeat)
    datasets = []
    for entry in collected.datasets:
        settings = options.dataset_settings(Path(entry.path))
        counts: dict[str, int] = {}
        for agent in entry.agents.values():
            counts[agent] = counts.get(agent, 0) + 1
        common = max(counts, key=lambda agent: counts[agent]) if counts else ""
        datasets.append(
            {
                "dataset": entry.dataset,
                "sha256": _known_digest(meta, entry.dataset) or file_sha256(Path(entry.path)),
                "repeats": entry.repeats,
                "agent": common,
                "tasks": list(entry.tasks),
                "agents": {task: agent for task, agent in entry.agents.items() if agent != common},
                "threshold": settings.threshold,
                "gates": [{"metric": g.metric, "k": g.k, "threshold": g.threshold} for g in settings.gates],
                "selected": {task: sorted(repeats) for task, repeats in chosen.get(entry.dataset, {}).items()},
            }
        )
    shard = collected.shard
    return {
        "shard": None if shard is None else {"index": shard.index, "count": shard.count},
        "rule": SHARD_RULE,
        "gate_mode": options.gate_mode.value,
        "inconclusive": "pass" if options.inconclusive_passes else "fail",
        "datasets": datasets,
    }


def _known_digest(meta: Mapping[str, object] | None, dataset: str) -> str | None:
    value = (meta or {}).get(f"dataset_sha256.{dataset}")
    return value if isinstance(value, str) else None


def file_sha256(path: Path) -> str | None:
    """The sha256 of a file's bytes (hex), read 1 MiB at a time; None when it cannot be read."""
    digest = hashlib.sha256()
    try:
        with path.open("rb") as handle:
            while chunk := handle.read(1 << 20):
                digest.update(chunk)
    except OSError:
        return None
    return digest.hexdigest()


def shard_meta(shard: Shard | None) -> Mapping[str, object]:
    """The report meta (and JUnit suite property ``gym.shard``) naming the session's shard, e.g. ``"2/3"``."""
    return {} if shard is None else {"shard": str(shard)}
