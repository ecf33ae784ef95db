"""Reading the ``--gym-report`` files ``python -m pytest_gym_eval merge`` merges: each report's ``plan`` (what its
session collected, selected and judged) and its rollouts, checked as they are read, every problem a
:class:`MergeError` naming the file (and the rollout's index). Merging them: :mod:`pytest_gym_eval.reporting.merge`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_gym_eval.outcomes.usage import Usage
from pytest_gym_eval.reporting import json_reading, json_report
from pytest_gym_eval.reporting.summary import RolloutResult, TestOutcome
from pytest_gym_eval.stats.comparison import Hypothesis
from pytest_gym_eval.stats.gates import HOLM, METRICS, Gate, GateMode, GateSource
from pytest_gym_eval.tasks.shard import Shard

_STATUSES = ("passed", "failed", "error")
LISTED = 10
"""At most this many names are listed in a message; the rest are counted."""


class MergeError(Exception):
    """The reports cannot be merged; ``str()`` says why and names the report files."""


# --- Reading ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PlannedDataset:
    """One dataset of a report's ``plan``: every task id in collection order, repeats, agents (``agent`` for
    every task not in ``agents``), pass threshold, gates, and the (task, repeat) pairs the session selected."""

    dataset: str
    sha256: str | None
    repeats: int
    agent: str
    tasks: tuple[str, ...]
    agents: Mapping[str, str]
    threshold: float
    gates: tuple[Gate, ...]
    selected: Mapping[str, tuple[int, ...]]

    def agent_of(self, task: str) -> str:
        return self.agents.get(task, self.agent)

    def same_plan(self, other: PlannedDataset) -> str | None:
        """What differs between two reports' records of this dataset (besides ``selected``), or None."""
        if self.sha256 is not None and other.sha256 is not None and self.sha256 != other.sha256:
            return f"the file differs (sha256 {self.sha256[:12]}… vs {other.sha256[:12]}…)"
        if set(self.tasks) != set(other.tasks):  # as sets: older reports listed them in the items' order
            only = sorted(set(self.tasks) ^ set(other.tasks))
            shown = ", ".join(only[:LISTED]) + (f" and {len(only) - LISTED} more" if len(only) > LISTED else "")
            return f"the task ids differ (only one of them has {shown})"
        if self.repeats != other.repeats:
            return f"the repeats differ ({self.repeats} vs {other.repeats})"
        same_agents = (self.agent, self.agents) == (other.agent, other.agents)
        if not same_agents and any(self.agent_of(t) != other.agent_of(t) for t in self.tasks):
            return "the agents differ"
        if self.threshold != other.threshold:
            return f"the pass threshold differs ({self.threshold:g} vs {other.threshold:g})"
        if self.gates != other.gates:
            labels = [", ".join(g.label for g in gates) or "none" for gates in (self.gates, other.gates)]
            return f"the gates differ ({labels[0]} vs {labels[1]})"
        return None


@dataclass(frozen=True)
class ShardReport:
    """One report to merge: its file, its shard (``1/1`` for an unsharded session), its plan and its data;
    ``policies`` (names, baseline first), ``max_regression`` and ``min_improvement`` (each margin or None; None in a
    report written before the plan recorded it) of a session comparing policy models, ``()`` and None otherwise."""

    path: Path
    shard: Shard
    sharded: bool
    rule: str
    gate_mode: GateMode
    inconclusive_passes: bool
    datasets: tuple[PlannedDataset, ...]
    meta: Mapping[str, Any]
    rollouts: Sequence[Mapping[str, Any]]
    policies: tuple[str, ...] = ()
    max_regression: float | None = None
    min_improvement: float | None = None
    comparison_sources: Mapping[Hypothesis, GateSource] = field(default_factory=dict)
    """Where each comparison gate was set (the plan's ``comparison_sources``; empty in older reports)."""
    tests: tuple[TestOutcome, ...] = ()
    """How its test functions over rollouts ended (the report's ``tests``), which the merged run lists as given."""
    familywise: str | None = None
    """The session's ``--gym-familywise`` (``holm``; None: off, or a report written before the plan recorded it)."""

    @property
    def label(self) -> str:
        return f"{self.path} (shard {self.shard})" if self.sharded else str(self.path)


def read_shard_report(path: Path) -> ShardReport:
    """Read a ``--gym-report`` file and its ``plan``. Raises :class:`MergeError` naming the file when it cannot
    be read, is not a report, or has no usable plan (a report from a version without it)."""
    try:
        data = json_report.load_report(path)
    except OSError as error:
        raise MergeError(f"{path}: cannot read the report: {error.strerror or error}") from None
    except ValueError as error:
        raise MergeError(str(error)) from None
    plan = data.get("plan")
    if not isinstance(plan, dict):
        raise MergeError(
            f"{path}: the report has no 'plan' (what its session collected and selected): it was written by a "
            "pytest-gym-eval without sharding support; run the session again with this version"
        )
    try:
        return _shard_report(path, data, plan)
    except (KeyError, TypeError, ValueError) as error:
        raise MergeError(f"{path}: the report's plan is malformed: {error}") from None


def _shard_report(path: Path, data: Mapping[str, Any], plan: Mapping[str, Any]) -> ShardReport:
    shard_data = plan["shard"]
    if shard_data is None:
        shard, sharded = Shard(1, 1), False
    else:
        shard, sharded = Shard(_int(shard_data["index"], "shard.index"), _int(shard_data["count"], "shard.count")), True
        if not 1 <= shard.index <= shard.count:
            raise ValueError(f"shard {shard} is out of range")
    inconclusive = plan["inconclusive"]
    if inconclusive not in ("fail", "pass"):
        raise ValueError(f"inconclusive is {inconclusive!r}")
    familywise = plan.get("familywise", "off")
    if familywise not in ("off", HOLM):
        raise ValueError(f"familywise is {familywise!r}")
    return ShardReport(
        path=path,
        shard=shard,
        sharded=sharded,
        rule=str(plan["rule"]),
        gate_mode=GateMode(plan["gate_mode"]),
        inconclusive_passes=inconclusive == "pass",
        familywise=None if familywise == "off" else familywise,
        datasets=tuple(_planned_dataset(entry) for entry in plan["datasets"]),
        meta=data["meta"] if isinstance(data.get("meta"), dict) else {},
        rollouts=data["rollouts"],
        policies=tuple(_str(name, "policies[]") for name in plan.get("policies", ())),
        max_regression=None if plan.get("max_regression") is None else float(plan["max_regression"]),
        min_improvement=None if plan.get("min_improvement") is None else float(plan["min_improvement"]),
        comparison_sources={
            Hypothesis(hypothesis): GateSource(source)
            for hypothesis, source in plan.get("comparison_sources", {}).items()
        },
        tests=json_reading.tests_from_json(data.get("tests")),
    )


def _planned_dataset(entry: Mapping[str, Any]) -> PlannedDataset:
    name = _str(entry["dataset"], "dataset")
    tasks = tuple(_str(task, f"{name}: tasks[]") for task in entry["tasks"])
    agents = {_str(task, f"{name}: agents"): _str(agent, f"{name}: agents") for task, agent in entry["agents"].items()}
    gates = []
    for gate in entry["gates"]:
        if gate["metric"] not in METRICS:
            raise ValueError(f"{name}: unknown gate metric {gate['metric']!r}")
        k, custom, source = gate["k"], gate.get("custom"), gate.get("source")
        gates.append(
            Gate(
                gate["metric"],
                float(gate["threshold"]),
                None if k is None else int(k),
                None if custom is None else str(custom),
                None if source is None else GateSource(source),  # absent in older reports
                gate.get("declared_by"),
            )
        )
    selected = {
        _str(task, f"{name}: selected"): tuple(_int(r, f"{name}: selected[{task}]") for r in repeats)
        for task, repeats in entry["selected"].items()
    }
    sha = entry["sha256"]
    return PlannedDataset(
        dataset=name,
        sha256=None if sha is None else _str(sha, f"{name}: sha256"),
        repeats=_int(entry["repeats"], f"{name}: repeats"),
        agent=_str(entry["agent"], f"{name}: agent"),
        tasks=tasks,
        agents=agents,
        threshold=float(entry["threshold"]),
        gates=tuple(gates),
        selected=selected,
    )


def _str(value: object, where: str) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{where} is not a string: {value!r}")
    return value


def _int(value: object, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{where} is not a whole number >= 0: {value!r}")
    return value


def rollout_result(rollout: object, report: ShardReport, index: int) -> RolloutResult:
    """A report's rollout as a :class:`RolloutResult` (its reward was checked by ``load_report``); raises
    :class:`MergeError` naming the report and index for a malformed one. Kept lean: it runs once a rollout."""
    try:
        if not isinstance(rollout, dict):
            raise ValueError("it is not an object")
        nodeid, dataset, task, repeat, agent, status = (
            rollout["nodeid"], rollout["dataset"], rollout["task_id"], rollout["repeat"], rollout["agent"],
            rollout["status"],
        )  # fmt: skip
        if status not in _STATUSES:
            raise ValueError(f"status {status!r} is none of {', '.join(_STATUSES)}")
        if type(repeat) is not int or repeat < 0:
            raise ValueError(f"repeat {repeat!r} is not a whole number >= 0")
        for name, value in (("nodeid", nodeid), ("dataset", dataset), ("task_id", task), ("agent", agent)):
            if type(value) is not str:
                raise ValueError(f"{name} {value!r} is not a string")
        reward = rollout.get("reward")
        return RolloutResult(
            nodeid, dataset, task, repeat, agent, status, None if reward is None else float(reward),
            rollout.get("failure_class") or None, rollout.get("record") or None,
            _seconds(rollout.get("start")), _seconds(rollout.get("stop")), usage=_usage(rollout),
            metrics=_metrics(rollout.get("metrics")), metric_reasons=_reasons(rollout.get("metric_reasons")),
            answer=rollout["answer"] if isinstance(rollout.get("answer"), str) else None,
        )  # fmt: skip
    except (KeyError, TypeError, ValueError) as error:
        raise MergeError(f"{report.label}: rollouts[{index}] is malformed: {error}") from None


def _usage(rollout: dict[str, Any]) -> Usage:
    """The tokens and latency a report's rollout carries (absent or null: not recorded)."""

    def count(name: str) -> int | None:
        value = rollout.get(name)
        if value is None:
            return None
        if type(value) is not int or value < 0:
            raise ValueError(f"{name} {value!r} is not a whole number >= 0")
        return value

    latency = rollout.get("latency")
    if latency is not None and (type(latency) not in (int, float) or latency < 0):
        raise ValueError(f"latency {latency!r} is not a number of seconds >= 0")
    return Usage(
        count("input_tokens"), count("output_tokens"), count("total_tokens"),
        None if latency is None else float(latency),
    )  # fmt: skip


def _metrics(value: object) -> tuple[tuple[str, float], ...]:
    """The custom metrics a report's rollout carries (absent: none), sorted by name; raises ValueError for a
    ``metrics`` that is not an object of finite numbers."""
    if value is None:
        return ()
    if not isinstance(value, dict):
        raise ValueError(f"metrics {value!r} is not an object")
    for name, number in value.items():
        if type(number) not in (int, float) or not math.isfinite(number):
            raise ValueError(f"metric {name!r} {number!r} is not a finite number")
    return tuple((name, float(number)) for name, number in sorted(value.items()))


def _reasons(value: object) -> tuple[tuple[str, str], ...]:
    """The reasons given with a report's rollout's custom metrics (absent: none), sorted by name; raises
    ValueError for a ``metric_reasons`` that is not an object of strings."""
    if value is None:
        return ()
    if not isinstance(value, dict):
        raise ValueError(f"metric_reasons {value!r} is not an object")
    for name, text in value.items():
        if type(text) is not str:
            raise ValueError(f"the reason of metric {name!r} {text!r} is not a string")
    return tuple((name, text) for name, text in sorted(value.items()))


def _seconds(value: object) -> float:
    """An epoch time from a report (absent, null or not a finite number positive: 0.0, "unknown")."""
    if type(value) is float or type(value) is int:
        return float(value) if 0.0 < value < math.inf else 0.0
    return 0.0
