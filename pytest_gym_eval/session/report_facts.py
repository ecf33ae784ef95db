"""What the reports record about a run besides its rollouts: the run's facts (:func:`report_meta`: Gym version,
checkout, model, run directory, each dataset's sha256, the gate mode) and its plan (:func:`report_plan`: the shard
and its rule, the gate settings, and per dataset its tasks, repeats, agents and the pairs this session selected).

Both are plain values for :mod:`pytest_gym_eval.reporting` (the JSON report, the JUnit suite); a merge of shard
reports reads the plan back to check that the shards belong together.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_gym_eval.core.files import file_sha256
from pytest_gym_eval.options.gym_options import GymOptions
from pytest_gym_eval.reporting import json_report
from pytest_gym_eval.reporting import summary as rpt
from pytest_gym_eval.tasks.models import base_agent
from pytest_gym_eval.tasks.plan import PlannedRollout
from pytest_gym_eval.tasks.python_dataset import file_of
from pytest_gym_eval.tasks.shard import SHARD_RULE, CollectedPlan, dataset_name


def report_meta(
    options: GymOptions, results: Sequence[rpt.RolloutResult], run: Mapping[str, object]
) -> dict[str, object]:
    """Facts for the JSON report and the JUnit suite: ``run`` (gym version, checkout, model name and URL, run
    directory) plus each dataset's sha256. Never holds a secret: the API key is read only by Gym."""
    meta: dict[str, object] = {key: value for key, value in run.items() if value is not None}
    run_dir = run.get("run_dir")
    for dataset in dict.fromkeys(r.dataset for r in results):
        path = options.rootdir / dataset
        if not path.is_file() and run_dir:  # a Python dataset's rows are in the run directory
            path = file_of(Path(str(run_dir)), dataset)
        if path.is_file():
            meta[f"dataset_sha256.{dataset}"] = file_sha256(path)
    meta["gate_mode"] = options.gate_mode.value
    return meta


def report_plan(
    collected: CollectedPlan,
    selected: Sequence[PlannedRollout],
    options: GymOptions,
    meta: Mapping[str, object] | None = None,
) -> dict[str, Any]:
    """The JSON report's ``plan``: the shard and its rule, the gate settings, and per collected dataset (or one only
    test functions name) its
    sha256, repeats, every task id (the file's order), agents, pass threshold, gates and the (task, repeat)
    pairs this session selected (``selected`` is the session's run plan, after every selection).

    Layout (``report.schema.json``, ``$defs/plan``)::

        {"shard": {"index": 2, "count": 3} | null, "rule": "sha256-sorted-blocks-v1",
         "gate_mode": "point", "inconclusive": "fail", "familywise": "off",
         "datasets": [{"dataset", "sha256", "repeats", "agent", "tasks": [...], "agents": {task: agent},
                       "threshold", "gates": [{"metric", "k", "threshold", "custom"?, "source"}],
                       "selected": {task: [repeats]}}]}

    ``agent`` is the dataset's most common agent and ``agents`` lists only the tasks whose agent differs. A
    dataset's sha256 is taken from ``meta`` (``dataset_sha256.<dataset>``) when it is there, else computed.

    A session comparing policies (``--gym-policy``) adds ``"policies": [names, baseline first]`` and
    ``"max_regression"`` and ``"min_improvement"`` (each margin or null), which a merge needs to compare them
    again, and ``"comparison_sources"`` (hypothesis -> where its gate was set); its agents are the agents the
    policies' instances copy (``mcqa_simple_agent``, never ``mcqa_simple_agent__cand``), and a repeat selected for
    one policy is listed once (a merge takes it as selected for every policy).
    """
    chosen: dict[str, dict[str, list[int]]] = {}
    for rollout in selected:
        chosen.setdefault(dataset_name(rollout.nodeid), {}).setdefault(rollout.task_id, []).append(rollout.repeat)
    datasets = []
    for entry in sorted([*collected.datasets, *collected.tested], key=lambda entry: entry.dataset):
        settings = options.dataset_settings(Path(entry.path))
        counts: dict[str, int] = {}
        agents = {task: base_agent(agent, options.policies) for task, agent in entry.agents.items()}
        for agent in agents.values():
            counts[agent] = counts.get(agent, 0) + 1
        common = max(counts, key=lambda agent: counts[agent]) if counts else ""
        datasets.append(
            {
                "dataset": entry.dataset,
                "sha256": _known_digest(meta, entry.dataset) or _digest_or_none(Path(entry.path)),
                "repeats": entry.repeats,
                "agent": common,
                "tasks": list(entry.tasks),
                "agents": {task: agent for task, agent in agents.items() if agent != common},
                "threshold": settings.threshold,
                "gates": [json_report.plan_gate_json(g) for g in settings.gates],
                "selected": {task: sorted(set(repeats)) for task, repeats in chosen.get(entry.dataset, {}).items()},
            }
        )
    shard = collected.shard
    return {
        "shard": None if shard is None else {"index": shard.index, "count": shard.count},
        "rule": SHARD_RULE,
        "gate_mode": options.gate_mode.value,
        "inconclusive": "pass" if options.inconclusive_passes else "fail",
        "familywise": options.familywise or "off",
        "datasets": datasets,
        **(
            {
                "policies": [p.name for p in options.policies],
                "max_regression": options.max_regression,
                "min_improvement": options.min_improvement,
                "comparison_sources": {h.value: source.value for h, source in options.comparison_sources.items()},
            }
            if options.policies
            else {}
        ),
    }


def _known_digest(meta: Mapping[str, object] | None, dataset: str) -> str | None:
    value = (meta or {}).get(f"dataset_sha256.{dataset}")
    return value if isinstance(value, str) else None


def _digest_or_none(path: Path) -> str | None:
    try:
        return file_sha256(path)
    except OSError:
        return None
