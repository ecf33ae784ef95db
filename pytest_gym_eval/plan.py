"""The rollouts a session will ask Gym for, and Gym's input file that asks for exactly those.

Every selected (task, repeat) pair becomes one input row stamped with a ``_ng_task_index`` of its own (the
plan's *stamp*) and run with ``--num-repeats 1``: Gym silently merges rows that share a stamp, and a stamp per
pair lets each rollout come back to exactly one item whatever subset ``-k``/``--lf`` selected.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from collections.abc import Iterable
from contextlib import ExitStack
from dataclasses import astuple, dataclass
from pathlib import Path
from typing import Any

from pytest_gym_eval.dataset import GYM_PRIVATE_PREFIX, parse_row, row_offsets
from pytest_gym_eval.sampling import Sampling, apply_sampling

AGENT_REF_KEY = "agent_ref"
_ENCODE = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), check_circular=False).encode
"""One compact JSON line, as ``jsonlines`` writes with ``compact=True``."""


@dataclass(frozen=True, slots=True)
class PlannedRollout:
    """One selected (task, repeat) pair: ``line`` is the row's 1-based line in ``dataset``."""

    stamp: int
    nodeid: str
    dataset: Path
    line: int
    task_id: str
    repeat: int
    agent: str


@dataclass(frozen=True)
class RunPlan:
    """Every rollout of the session, in stamp order (stamps are 0..n-1)."""

    rollouts: tuple[PlannedRollout, ...]

    @classmethod
    def build(cls, selected: Iterable[tuple[str, Path, int, str, int, str]]) -> RunPlan:
        """Stamp ``(nodeid, dataset, line, task_id, repeat, agent)`` tuples in the order given."""
        return cls(tuple(PlannedRollout(stamp, *entry) for stamp, entry in enumerate(selected)))

    @property
    def agents(self) -> list[str]:
        """The distinct agents, sorted."""
        return sorted({rollout.agent for rollout in self.rollouts})

    def by_nodeid(self) -> dict[str, PlannedRollout]:
        """The plan keyed by item node id."""
        return {rollout.nodeid: rollout for rollout in self.rollouts}

    def save(self, path: Path) -> None:
        """Write the plan as JSON atomically (xdist workers hand it to the controller this way)."""
        temp = path.with_name(f".{path.name}.{os.getpid()}")
        rows = [[*astuple(r)[:2], str(r.dataset), *astuple(r)[3:]] for r in self.rollouts]
        temp.write_text(json.dumps({"rollouts": rows}), encoding="utf-8")
        os.replace(temp, path)

    @classmethod
    def load(cls, path: Path) -> RunPlan:
        """Read a plan :meth:`save` wrote."""
        data = json.loads(path.read_text(encoding="utf-8"))
        return cls(
            tuple(
                PlannedRollout(stamp, nodeid, Path(dataset), line, task_id, repeat, agent)
                for stamp, nodeid, dataset, line, task_id, repeat, agent in data["rollouts"]
            )
        )


def gym_row(row: dict[str, Any], stamp: int, agent: str) -> dict[str, Any]:
    """The input row Gym gets for one planned rollout: the dataset row without Gym's own ``_ng_*`` keys,
    stamped with ``stamp``, routed to ``agent`` unless the row names its own ``agent_ref``."""
    out = {key: value for key, value in row.items() if not key.startswith(GYM_PRIVATE_PREFIX)}
    if not isinstance(out.get(AGENT_REF_KEY), dict) or not out[AGENT_REF_KEY].get("name"):
        out[AGENT_REF_KEY] = {"type": "responses_api_agents", "name": agent}
    out["_ng_task_index"] = stamp
    return out


def write_gym_input(plan: RunPlan, path: Path, sampling: Sampling | None = None) -> int:
    """Write Gym's input for ``plan`` to ``path`` (reading each dataset once); returns the number of rows.

    ``sampling`` (the session's sampling options) is written into every row's request by
    :func:`~pytest_gym_eval.sampling.apply_sampling`.

    Raises :class:`~pytest_gym_eval.dataset.DatasetError` when a dataset changed since collection.
    """
    lines_by_dataset: dict[Path, set[int]] = defaultdict(set)
    for rollout in plan.rollouts:
        lines_by_dataset[rollout.dataset].add(rollout.line)
    # Each row is read again from its offset when written rather than all held parsed in memory: a
    # 100,000-row dataset held as rows took ~0.5 GB, and the garbage collector most of the time.
    offsets = {dataset: row_offsets(dataset, lines) for dataset, lines in lines_by_dataset.items()}
    with ExitStack() as stack:
        datasets = {dataset: stack.enter_context(dataset.open("rb")) for dataset in offsets}
        out = stack.enter_context(path.open("w", encoding="utf-8"))
        for rollout in plan.rollouts:
            handle = datasets[rollout.dataset]
            handle.seek(offsets[rollout.dataset][rollout.line])
            row = parse_row(handle.readline(), rollout.dataset, rollout.line)
            row = gym_row(row, rollout.stamp, rollout.agent)
            if sampling is not None and not sampling.is_empty:
                row = apply_sampling(row, sampling, rollout.repeat)
            out.write(_ENCODE(row) + "\n")
    return len(plan.rollouts)
