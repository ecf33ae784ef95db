"""The rollouts a session will ask Gym for, and Gym's input file that asks for exactly those.

Three shapes of input, chosen per session by :meth:`RunPlan.build`:

- **Whole tasks** (the usual case: every repeat of every selected task is selected, and every task has the
  same number of repeats R): one input row per task, stamped ``_ng_task_index`` = the task's row number, run
  with ``--num-repeats R``. Gym numbers the R rollouts of each row ``_ng_rollout_index`` 0..R-1, so a rollout
  comes back to the item of (row, repeat) = (``_ng_task_index``, ``_ng_rollout_index``). This is what a user
  would hand Gym, and Gym runs it faster than R copies of the row (its aggregation among others).
- **Shared tasks** (policy models compared, ``--gym-policy``, when every selected task has the same number S > 1
  of selected rollouts): one row per rollout, run with ``--num-repeats 1``, and the S rows of one task, one per
  (repeat, policy), all stamped with that task's ``_ng_task_index``. Gym 0.6.0 and 0.7.0 number the rollouts of
  one task index in input order across rows (``_preprocess_raw_rows`` in ``nemo_gym/rollout_collection.py``: a
  counter per task index, whatever the row's agent), so the k-th row of task t comes back with
  ``_ng_rollout_index`` k. With the policies alternating row by row, repeat r of policy p (of P) is rollout
  ``r * P + p`` of its task. Gym's own aggregate then sees each task once per agent under one index and several
  rollouts per agent: ``gym eval compare`` of two agents finds common tasks to flip and repeats to take a Welch
  interval over (docs/models.md, "Beside gym eval compare").
- **Pairs** (anything else: a partial selection, ``-k``/``--lf``/``--deselect``, or repeats that differ between
  tasks or datasets): every selected (task, repeat) pair becomes one row stamped with a ``_ng_task_index`` of its
  own and run with ``--num-repeats 1``: Gym would number the rows that share a stamp as rollouts of one task, and a
  stamp per pair lets each rollout come back to exactly one item whatever subset was selected.

Either way the plan's *stamp* of a rollout is one integer, 0..n-1, and a Gym record's stamp is
``_ng_task_index * stride + _ng_rollout_index`` (:attr:`RunPlan.stride`: 1 for pairs, R for whole tasks, S for
shared tasks; :func:`~pytest_gym_eval.gym.feed.record_stamp`). Gym's input rows are written in stamp order, each
stamped ``_ng_task_index`` = its first rollout's stamp // stride. The mode travels in ``plan.json``
(``row_repeats``, ``shared``), which pytest-xdist workers write and the controller reads.

When the policy model replays recordings (``--gym-replay``, or a ``replay:`` policy), each row's
``responses_create_params.metadata`` in pair and shared-task mode also carries the rollout's repeat under
:data:`REPEAT_TAG`. Gym's model servers pass ``metadata`` through to the endpoint, and the replay model answers
repeat *r* of a task with that task's recording *r* (:mod:`pytest_gym_eval.replay`), whatever order Gym's requests
arrive in. Task ids ignore it (they are computed from the dataset row, not this one) and verifiers do not read it.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Sequence
from contextlib import ExitStack
from dataclasses import astuple, dataclass
from pathlib import Path
from typing import Any

from pytest_gym_eval.core.files import write_json_atomic
from pytest_gym_eval.tasks.dataset import GYM_PRIVATE_PREFIX, LONE_SURROGATE, DatasetError, parse_row, row_offsets
from pytest_gym_eval.tasks.models import Policy, instance_sampling
from pytest_gym_eval.tasks.sampling import Sampling, apply_sampling

AGENT_REF_KEY = "agent_ref"
REPEAT_TAG = "pytest_gym_eval_repeat"
"""The ``responses_create_params.metadata`` key holding a row's repeat (a decimal string, as OpenAI's
``metadata`` values are strings) for the replay model."""
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
    """Every rollout of the session, in stamp order (stamps are 0..n-1).

    ``row_repeats`` is Gym's ``--num-repeats`` for the input: 1 in pair and shared-task mode (one row per rollout),
    R in whole-task mode (one row per task, rollout ``stamp`` is repeat ``stamp % R`` of row ``stamp // R``).
    A record's stamp is ``_ng_task_index * stride + _ng_rollout_index`` (:attr:`stride`, module docstring).
    """

    rollouts: tuple[PlannedRollout, ...]
    row_repeats: int = 1
    serve_agents: tuple[str, ...] = ()
    """Agents Gym must run for on-demand rollouts (``gym_run_row``) beside the planned rollouts' agents: with
    these, Gym starts even when no rollout is planned."""
    shared: int = 1
    """S in shared-task mode (the rollouts of each task, one row each, under one ``_ng_task_index``); 1 otherwise."""
    uncounted: frozenset[str] = frozenset()
    """Node ids of the rollouts only test functions asked for beyond their dataset's repeats: rolled out, not
    counted in the dataset's statistics (:func:`pytest_gym_eval.session.results.counts_in_dataset`)."""

    @property
    def stride(self) -> int:
        """The rollouts Gym numbers under one ``_ng_task_index``: R in whole-task mode, S in shared-task mode, 1 in
        pair mode."""
        return self.row_repeats if self.row_repeats > 1 else self.shared

    @classmethod
    def build(
        cls,
        selected: Iterable[tuple[str, Path, int, str, int, str]],
        whole_tasks: bool = False,
        shared_tasks: bool = False,
    ) -> RunPlan:
        """Stamp ``(nodeid, dataset, line, task_id, repeat, agent)`` tuples.

        With ``whole_tasks`` (the session allows it: see
        :func:`pytest_gym_eval.session.launch.whole_tasks_allowed`), and when every selected task has exactly the
        repeats 0..R-1 for one R > 1, the plan is in whole-task mode: tasks numbered in the order of their first
        rollout given, stamp ``task * R + repeat``. Otherwise, with ``shared_tasks`` (policies compared) and when
        every selected task (dataset, line) has the same number S > 1 of rollouts, shared-task mode: tasks numbered
        the same way, stamp ``task * S + k`` for the task's k-th rollout in the order given. Otherwise pair mode:
        stamps in the order given.
        """
        entries = list(selected)
        repeats = _whole_task_repeats(entries) if whole_tasks else None
        if repeats is None and shared_tasks:
            return _shared_task_plan(entries) or cls(tuple(PlannedRollout(s, *e) for s, e in enumerate(entries)))
        if repeats is None:
            return cls(tuple(PlannedRollout(stamp, *entry) for stamp, entry in enumerate(entries)))
        rows: dict[tuple[Path, int], int] = {}
        for _, dataset, line, _, _, _ in entries:
            rows.setdefault((dataset, line), len(rows))
        planned = [PlannedRollout(rows[(e[1], e[2])] * repeats + e[4], *e) for e in entries]
        return cls(tuple(sorted(planned, key=lambda rollout: rollout.stamp)), repeats)

    @property
    def agents(self) -> list[str]:
        """The distinct agents (of the rollouts and :attr:`serve_agents`), sorted."""
        return sorted({rollout.agent for rollout in self.rollouts} | set(self.serve_agents))

    @property
    def needs_gym(self) -> bool:
        """Whether Gym must run: a rollout is planned, or an on-demand rollout needs an agent."""
        return bool(self.rollouts or self.serve_agents)

    def by_nodeid(self) -> dict[str, PlannedRollout]:
        """The plan keyed by item node id."""
        return {rollout.nodeid: rollout for rollout in self.rollouts}

    def save(self, path: Path) -> None:
        """Write the plan as JSON atomically (xdist workers hand it to the controller this way)."""
        rows = [[*astuple(r)[:2], str(r.dataset), *astuple(r)[3:]] for r in self.rollouts]
        data = {
            "rollouts": rows,
            "row_repeats": self.row_repeats,
            "serve_agents": list(self.serve_agents),
            "shared": self.shared,
            "uncounted": sorted(self.uncounted),
        }
        write_json_atomic(path, data, indent=None)

    @classmethod
    def load(cls, path: Path) -> RunPlan:
        """Read a plan :meth:`save` wrote."""
        data = json.loads(path.read_text(encoding="utf-8"))
        return cls(
            tuple(
                PlannedRollout(stamp, nodeid, Path(dataset), line, task_id, repeat, agent)
                for stamp, nodeid, dataset, line, task_id, repeat, agent in data["rollouts"]
            ),
            int(data.get("row_repeats", 1)),
            tuple(str(agent) for agent in data.get("serve_agents", ())),
            int(data.get("shared", 1)),
            frozenset(str(nodeid) for nodeid in data.get("uncounted", ())),
        )


def _shared_task_plan(entries: Sequence[tuple[str, Path, int, str, int, str]]) -> RunPlan | None:
    """The shared-task plan of ``entries`` (module docstring), or None unless every task (dataset, line) has the
    same number S > 1 of them."""
    by_task: dict[tuple[Path, int], list[tuple[str, Path, int, str, int, str]]] = {}
    for entry in entries:
        by_task.setdefault((entry[1], entry[2]), []).append(entry)
    sizes = {len(found) for found in by_task.values()}
    if len(sizes) != 1 or (stride := sizes.pop()) < 2:
        return None
    planned = [
        PlannedRollout(task * stride + k, *entry)
        for task, found in enumerate(by_task.values())
        for k, entry in enumerate(found)
    ]
    return RunPlan(tuple(planned), shared=stride)


def _whole_task_repeats(entries: Sequence[tuple[str, Path, int, str, int, str]]) -> int | None:
    """R when every task (dataset, line) in ``entries`` has exactly the repeats 0..R-1, for one R > 1; else
    None (a partial selection, or repeats that differ between tasks or datasets)."""
    repeats: dict[tuple[Path, int], set[int]] = defaultdict(set)
    for _, dataset, line, _, repeat, _ in entries:
        repeats[(dataset, line)].add(repeat)
    counts = {len(found) for found in repeats.values()}
    if len(counts) != 1 or len(entries) != sum(len(found) for found in repeats.values()):
        return None
    (count,) = counts
    if count < 2 or any(found != set(range(count)) for found in repeats.values()):
        return None
    return count


def gym_row(row: dict[str, Any], stamp: int, agent: str, repeat: int | None = None) -> dict[str, Any]:
    """The input row Gym gets for one planned rollout: the dataset row without Gym's own ``_ng_*`` keys,
    stamped with ``stamp``, routed to ``agent`` (a row's own ``agent_ref`` keeps its other keys: only its name
    changes, to the agent instance of another policy, :mod:`pytest_gym_eval.tasks.models`), and, when
    ``repeat`` is given, tagged with it in ``responses_create_params.metadata[REPEAT_TAG]`` (left untagged
    when the row's ``metadata`` is neither absent, null nor an object). ``row`` itself is not changed."""
    out = {key: value for key, value in row.items() if not key.startswith(GYM_PRIVATE_PREFIX)}
    if not isinstance(out.get(AGENT_REF_KEY), dict) or not out[AGENT_REF_KEY].get("name"):
        out[AGENT_REF_KEY] = {"type": "responses_api_agents", "name": agent}
    elif isinstance(out[AGENT_REF_KEY]["name"], str) and out[AGENT_REF_KEY]["name"] != agent:
        out[AGENT_REF_KEY] = {**out[AGENT_REF_KEY], "name": agent}
    params = out.get("responses_create_params")
    if repeat is not None and isinstance(params, dict) and isinstance(params.get("metadata") or {}, dict):
        metadata = {**(params.get("metadata") or {}), REPEAT_TAG: str(repeat)}
        out["responses_create_params"] = {**params, "metadata": metadata}
    out["_ng_task_index"] = stamp
    return out


def write_gym_input(
    plan: RunPlan,
    path: Path,
    sampling: Sampling | None = None,
    *,
    tag_repeats: bool = False,
    policies: Sequence[Policy] = (),
) -> int:
    """Write Gym's input for ``plan`` to ``path`` (reading each dataset once); returns the number of rows:
    one per rollout in pair and shared-task mode, one per task (its repeat 0) in whole-task mode (see the module
    docstring), in stamp order, each stamped ``_ng_task_index`` = stamp // :attr:`RunPlan.stride`.
    With ``tag_repeats`` each row of a plan with one row per rollout carries its repeat for the replay model
    (:func:`gym_row`).

    ``sampling`` (the session's sampling options) is written into every row's request by
    :func:`~pytest_gym_eval.tasks.sampling.apply_sampling` (in whole-task mode as for repeat 0: the session allows
    whole tasks only without a per-repeat seed). With ``policies`` (``--gym-policy``, baseline first) each row gets
    the sampling of its rollout's policy instead, the policy's own values over ``sampling``
    (:func:`~pytest_gym_eval.tasks.models.instance_sampling`, by the rollout's agent instance).

    Raises :class:`~pytest_gym_eval.tasks.dataset.DatasetError` when a dataset changed since collection, or a row holds
    a lone surrogate (:data:`~pytest_gym_eval.tasks.dataset.LONE_SURROGATE`; rows without an id are refused at
    collection).
    """
    repeats = plan.row_repeats
    rows = [rollout for rollout in plan.rollouts if repeats == 1 or rollout.repeat == 0]
    lines_by_dataset: dict[Path, set[int]] = defaultdict(set)
    for rollout in rows:
        lines_by_dataset[rollout.dataset].add(rollout.line)
    # Each row is read again from its offset when written rather than all held parsed in memory: a
    # 100,000-row dataset held as rows took ~0.5 GB, and the garbage collector most of the time.
    offsets = {dataset: row_offsets(dataset, lines) for dataset, lines in lines_by_dataset.items()}
    session = sampling if sampling is not None else Sampling()
    by_agent = {agent: instance_sampling(agent, policies, session) for agent in {rollout.agent for rollout in rows}}
    with ExitStack() as stack:
        datasets = {dataset: stack.enter_context(dataset.open("rb")) for dataset in offsets}
        out = stack.enter_context(path.open("w", encoding="utf-8"))
        for rollout in rows:
            handle = datasets[rollout.dataset]
            handle.seek(offsets[rollout.dataset][rollout.line])
            row = parse_row(handle.readline(), rollout.dataset, rollout.line)
            tag = rollout.repeat if tag_repeats and repeats == 1 else None
            row = gym_row(row, rollout.stamp // plan.stride, rollout.agent, tag)
            if not (chosen := by_agent[rollout.agent]).is_empty:
                row = apply_sampling(row, chosen, rollout.repeat)
            try:
                out.write(_ENCODE(row) + "\n")
            except UnicodeEncodeError:  # a row with an id of its own was never encoded during collection
                raise DatasetError(rollout.dataset, rollout.line, LONE_SURROGATE) from None
    return len(rows)
