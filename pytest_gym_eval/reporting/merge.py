"""Merging the ``--gym-report`` files of shard sessions (``--gym-shard=I/N``) into one verdict:
``python -m pytest_gym_eval merge REPORT.json... [gate options] [--junitxml PATH] [--gym-report PATH]``.

:func:`merge_reports` (its docstring has the checks and how the merged verdict is recomputed); reading the reports:
:mod:`pytest_gym_eval.reporting.shard_report`. What users see: docs/xdist-and-sharding.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any

from pytest_gym_eval.reporting.conclusion import Conclusion
from pytest_gym_eval.reporting.json_report import plan_gate_json
from pytest_gym_eval.reporting.shard_report import LISTED, MergeError, PlannedDataset, ShardReport, rollout_result
from pytest_gym_eval.reporting.summary import RolloutResult
from pytest_gym_eval.stats.comparison import Hypothesis
from pytest_gym_eval.stats.gates import METRICS, Gate, GateMode, GateSource, merge_gates
from pytest_gym_eval.tasks.models import Policy, agent_instance, item_id, policy_of
from pytest_gym_eval.tasks.shard import SHARD_RULE, assign_shards

EXIT_CANNOT_MERGE = 2
"""Exit status when the reports cannot be merged or the command line is wrong."""

EXIT_NO_ROLLOUTS = 5
"""Exit status when the reports hold no rollout and none is missing (pytest's "no tests collected")."""

CONFIG_META_KEYS = ("gym_version", "model", "model_type")
"""Report ``meta`` keys every shard must agree on (where it has them). ``model_url`` is not among them: a
replay model listens on a different port in every session."""

PER_SESSION_META_KEYS = (
    "run_dir", "head_server", "created", "shard", "gym_checkout", "model_url", "startup_seconds", "session_id",
)  # fmt: skip
"""Report ``meta`` keys that describe one session, left out of the merged report's meta."""

COMPACT_ABOVE = 10_000
"""A merged report of more rollouts than this is written compact (no indentation): 160,000 rollouts took ~4 s
to write indented, 0.4 s compact."""

MISSING = "missing"
"""Failure class of a selected (task, repeat) pair that no report holds."""


# --- Merging ----------------------------------------------------------------------------------------------


@dataclass
class MergedRun:
    """The merged rollouts and what the merge found.

    ``results`` holds every rollout of every report plus one error (failure class ``missing``) per selected
    pair no report holds, in the order one session would report them; ``missing`` lists those pairs' node ids;
    ``absent_shards`` the shard indices no report was given for; ``count`` the shard count; ``datasets`` the
    plan (the first report's; the others agree); ``selected`` every selected pair per dataset; ``policies``,
    ``max_regression`` and ``min_improvement`` those of a session comparing policy models (:class:`ShardReport`).
    """

    reports: list[ShardReport]
    datasets: list[PlannedDataset]
    results: list[RolloutResult]
    missing: list[str]
    absent_shards: list[int]
    count: int
    gate_mode: GateMode
    inconclusive_passes: bool
    selected: dict[str, dict[str, set[int]]] = field(default_factory=dict)
    policies: tuple[str, ...] = ()
    max_regression: float | None = None
    min_improvement: float | None = None
    comparison_sources: Mapping[Hypothesis, GateSource] = field(default_factory=dict)
    familywise: str | None = None
    """The shards' ``--gym-familywise`` (``holm``; None: off)."""


def merge_reports(reports: Sequence[ShardReport]) -> MergedRun:
    """Check that ``reports`` belong together and merge their rollouts.

    Raises :class:`MergeError` naming the reports when they used another assignment rule or shard count, two
    are the same shard, their datasets, thresholds, gates, gate settings, Gym version or model differ, a
    rollout is not in its report's plan or shard, or a (task, repeat) pair appears twice.

    The merge reads every report's ``plan`` (what its session collected and selected, see
    :func:`pytest_gym_eval.session.report_facts.report_plan`) and checks that the reports belong together: the same
    assignment rule and shard count, no shard twice, the same datasets (names, sha256 of the files, task ids, repeats,
    agents), the same pass thresholds, gates and gate settings, the same Gym version and model, the same policies,
    ``--gym-max-regression`` and ``--gym-min-improvement`` margins (a session comparing policy models, whose pairs
    are each (task, repeat) of each policy, a selected repeat taken as selected for every policy); every rollout
    belongs to its report's shard and no (task, repeat) appears twice. Any of that failing is a
    :class:`MergeError` (exit status 2) naming the reports.

    Every (task, repeat) pair a shard selected but no report holds, and every pair of a shard whose report is
    absent, becomes an *error* with failure class ``missing`` (named on the terminal), as a rollout that never came
    is in a session. Then everything is recomputed from the rollouts, never from the shards' summaries: the
    rollouts are put in the order one session over all of them would report them (datasets and tasks in
    collection order, repeats ascending) and handed to the plugin's own
    :func:`~pytest_gym_eval.session.conclude.conclude`, so the summary, the gate verdicts and the exit status are those
    of one unsharded session over the same rollouts.
    """
    if not reports:
        raise MergeError("no report to merge")
    first = reports[0]
    for report in reports[1:]:
        _check_same_run(first, report)
    by_index: dict[int, ShardReport] = {}
    for report in reports:
        twin = by_index.get(report.shard.index)
        if twin is not None:
            raise MergeError(f"{twin.path} and {report.path} are both shard {report.shard}: give each shard once")
        by_index[report.shard.index] = report
    count = first.shard.count
    absent = [index for index in range(1, count + 1) if index not in by_index]
    datasets = list(first.datasets)
    plan = {entry.dataset: entry for entry in datasets}
    assigned = {entry.dataset: assign_shards(entry.dataset, entry.tasks, count) for entry in datasets}

    policies = first.policies
    present: dict[tuple[str, str, int, str | None], tuple[RolloutResult, ShardReport]] = {}
    for report in reports:
        own = report.shard.index if report.sharded else None
        for index, rollout in enumerate(report.rollouts):
            result = rollout_result(rollout, report, index)
            owners = assigned.get(result.dataset)
            owner = None if owners is None else owners.get(result.task_id)
            if owner is None or not 0 <= result.repeat < plan[result.dataset].repeats or own not in (None, owner):
                raise MergeError(_misplaced(result, report, index, plan, owner))
            key = (
                result.dataset,
                result.task_id,
                result.repeat,
                policy_of(result.agent, policies) if policies else None,
            )
            if key in present:
                raise MergeError(f"{result.nodeid} appears twice: in {present[key][1].label} and {report.label}")
            present[key] = (result, report)

    selected: dict[str, dict[str, set[int]]] = {entry.dataset: {} for entry in datasets}
    for report in reports:
        for entry in report.datasets:
            for task, repeats in entry.selected.items():
                selected[entry.dataset].setdefault(task, set()).update(repeats)
    for entry in datasets:
        for task, owner in assigned[entry.dataset].items():
            if owner in absent:
                selected[entry.dataset].setdefault(task, set()).update(range(entry.repeats))

    results: list[RolloutResult] = []
    missing: list[str] = []
    sides: tuple[str | None, ...] = policies or (None,)
    named = tuple(Policy(name) for name in policies)
    for entry in datasets:
        for task in entry.tasks:
            wanted = selected[entry.dataset].get(task, set())
            if len(wanted) < entry.repeats:  # a rollout its report did not list as selected still counts
                wanted |= {k for k in range(entry.repeats) for p in sides if (entry.dataset, task, k, p) in present}
            for repeat in sorted(wanted):
                for policy in sides:  # as a session runs them: per repeat, every policy in turn
                    found = present.get((entry.dataset, task, repeat, policy))
                    if found is not None:
                        results.append(found[0])
                        continue
                    nodeid = f"{entry.dataset}::{task}[{item_id(repeat, policy)}]"
                    missing.append(nodeid)
                    agent = agent_instance(entry.agent_of(task), named, policy)
                    results.append(RolloutResult(nodeid, entry.dataset, task, repeat, agent, "error", None, MISSING))
    return MergedRun(
        reports=list(reports),
        datasets=datasets,
        results=results,
        missing=missing,
        absent_shards=absent,
        count=count,
        gate_mode=first.gate_mode,
        inconclusive_passes=first.inconclusive_passes,
        selected=selected,
        policies=policies,
        max_regression=first.max_regression,
        min_improvement=first.min_improvement,
        comparison_sources=first.comparison_sources,
        familywise=first.familywise,
    )


def _check_same_run(first: ShardReport, other: ShardReport) -> None:
    pair = f"{first.label} and {other.label}"
    if other.rule != first.rule:
        raise MergeError(f"{pair} assign tasks to shards by different rules ({first.rule} vs {other.rule})")
    if other.shard.count != first.shard.count:
        counts = f"{first.shard.count} vs {other.shard.count}"
        raise MergeError(f"{pair} split the tasks into different numbers of shards ({counts})")
    names = {entry.dataset for entry in first.datasets}
    other_names = {entry.dataset: entry for entry in other.datasets}
    if names != set(other_names):
        raise MergeError(
            f"{pair} collected different datasets (only one of them has {', '.join(sorted(names ^ set(other_names)))})"
        )
    for mine in first.datasets:
        theirs = other_names[mine.dataset]
        difference = mine.same_plan(theirs)
        if difference is not None:
            raise MergeError(f"{pair} do not agree on {mine.dataset}: {difference}")
    if (other.policies, other.max_regression, other.min_improvement) != (
        first.policies, first.max_regression, first.min_improvement,
    ):  # fmt: skip
        raise MergeError(
            f"{pair} compared different policies or margins (--gym-policy / --gym-max-regression / "
            "--gym-min-improvement)"
        )
    if (other.gate_mode, other.inconclusive_passes, other.familywise) != (
        first.gate_mode, first.inconclusive_passes, first.familywise,
    ):  # fmt: skip
        raise MergeError(f"{pair} judged gates differently (--gym-gate-on / --gym-inconclusive / --gym-familywise)")
    for key in CONFIG_META_KEYS:
        if key in first.meta and key in other.meta and first.meta[key] != other.meta[key]:
            raise MergeError(f"{pair} ran with a different {key} ({first.meta[key]!r} vs {other.meta[key]!r})")


def _misplaced(
    result: RolloutResult, report: ShardReport, index: int, plan: Mapping[str, PlannedDataset], owner: int | None
) -> str:
    """Why a rollout does not belong in its report (for :class:`MergeError`)."""
    where = f"{report.label}: rollouts[{index}] ({result.nodeid})"
    if owner is None:
        return f"{where} is not in the report's plan"
    repeats = plan[result.dataset].repeats
    if not 0 <= result.repeat < repeats:
        return f"{where} has repeat {result.repeat}; the plan has {repeats} repeats"
    return (
        f"{where} belongs to shard {owner}/{report.shard.count}, not {report.shard}: were the shards run with the "
        "same datasets and pytest-gym-eval version?"
    )


# --- Judging and writing ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class GateOverrides:
    """Gate options given to the merge; None / empty means "as the reports recorded"."""

    given: tuple[Gate, ...] = ()
    """The gates the merge's options set, of any kind."""
    gate_mode: GateMode | None = None
    inconclusive_passes: bool | None = None
    familywise: str | None = None
    """``--gym-familywise`` given to the merge (``off`` or ``holm``; None: as the reports recorded)."""

    def settings(self, merged: MergedRun) -> tuple[GateMode, bool]:
        """The gate mode and whether INCONCLUSIVE passes: as given, else as the reports recorded."""
        mode = self.gate_mode or merged.gate_mode
        inconclusive = merged.inconclusive_passes if self.inconclusive_passes is None else self.inconclusive_passes
        return mode, inconclusive

    def familywise_of(self, merged: MergedRun) -> str | None:
        """The family-wise method to judge the merged gates with (``holm``; None: each gate alone): as given, else
        as the reports recorded (their sessions' ``--gym-familywise``)."""
        chosen = merged.familywise if self.familywise is None else self.familywise
        return None if chosen == "off" else chosen

    def gates(self, recorded: Sequence[Gate]) -> list[Gate]:
        """A dataset's gates: the recorded ones merged with the given options by identity
        (:func:`~pytest_gym_eval.stats.gates.merge_gates`), as the command line merges with a dataset's own settings in
        a session: ``--gym-min-pass-at-k=4:0.9`` replaces a recorded pass@4 gate and keeps a recorded pass@1 gate,
        ``--gym-min-metric=boxed:0.9`` a recorded ``boxed`` gate and keeps a ``chars`` one. The given gates carry
        the source ``command line``; the order is the kinds' (:data:`~pytest_gym_eval.stats.gate_kinds.KINDS`)."""
        given = [replace(gate, source=GateSource.COMMAND_LINE) for gate in self.given]
        return sorted(merge_gates(given, recorded), key=lambda gate: METRICS.index(gate.metric))


def exit_status(merged: MergedRun, conclusion: Conclusion) -> int:
    """The exit status one session over the merged rollouts would have: the gates' when any is set, else
    pytest's own (1 when a rollout failed or errored, 0 when all passed, 5 when there is none)."""
    if not merged.results:
        return EXIT_NO_ROLLOUTS
    if conclusion.exit_status != -1:
        return conclusion.exit_status
    return 1 if any(r.status != "passed" for r in merged.results) else 0


def merged_meta(merged: MergedRun, conclusion_mode: GateMode) -> dict[str, object]:
    """The merged report's meta: the facts the reports agree on where they have them (not the per-session ones: an
    empty shard, which started no Gym, has no model or Gym version and takes nothing away), each dataset's sha256,
    the gate mode, when the merge ran, and which shards it merged."""
    reports = merged.reports
    meta: dict[str, object] = {}
    keys = dict.fromkeys(key for report in reports for key in report.meta)
    for key in keys:
        if key in PER_SESSION_META_KEYS or key.startswith("dataset_sha256."):
            continue
        values = [report.meta[key] for report in reports if key in report.meta]
        if all(value == values[0] for value in values[1:]):
            meta[key] = values[0]
    for entry in merged.datasets:
        if entry.sha256 is not None:
            meta[f"dataset_sha256.{entry.dataset}"] = entry.sha256
    meta["gate_mode"] = conclusion_mode.value
    meta["created"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    meta["merged_shards"] = f"{len(reports)} of {merged.count}"
    meta["merged_reports"] = [str(report.path) for report in reports]
    return meta


def merged_plan(merged: MergedRun, overrides: GateOverrides) -> dict[str, Any]:
    """The merged report's ``plan``: unsharded (``shard`` null), every dataset with every selected pair."""
    mode, inconclusive = overrides.settings(merged)
    return {
        "shard": None,
        "rule": SHARD_RULE,
        "gate_mode": mode.value,
        "inconclusive": "pass" if inconclusive else "fail",
        "familywise": overrides.familywise_of(merged) or "off",
        "datasets": [
            {
                "dataset": entry.dataset,
                "sha256": entry.sha256,
                "repeats": entry.repeats,
                "agent": entry.agent,
                "tasks": list(entry.tasks),
                "agents": dict(entry.agents),
                "threshold": entry.threshold,
                "gates": [plan_gate_json(g) for g in overrides.gates(entry.gates)],
                "selected": {
                    task: sorted(merged.selected[entry.dataset][task])
                    for task in entry.tasks
                    if merged.selected[entry.dataset].get(task)
                },
            }
            for entry in merged.datasets
        ],
        **(
            {
                "policies": list(merged.policies),
                "max_regression": merged.max_regression,
                "min_improvement": merged.min_improvement,
                "comparison_sources": {h.value: source.value for h, source in merged.comparison_sources.items()},
            }
            if merged.policies
            else {}
        ),
    }


def merge_lines(merged: MergedRun) -> list[str]:
    """What the merge says before the summary: the reports merged, the absent shards, the missing pairs."""
    shards = ", ".join(str(report.shard) for report in sorted(merged.reports, key=lambda r: r.shard))
    found = len(merged.results) - len(merged.missing)
    lines = [
        f"gym merge: {len(merged.reports)} report{'s' if len(merged.reports) != 1 else ''} (shards {shards}), "
        f"{found} of {len(merged.results)} selected rollouts"
    ]
    for index in merged.absent_shards:
        lines.append(f"gym merge: shard {index}/{merged.count} has no report: its rollouts are missing")
    if merged.missing:
        lines.append(
            f"gym merge: {len(merged.missing)} selected rollout{'s are' if len(merged.missing) != 1 else ' is'} in "
            f"no report, counted as errors (failure class {MISSING}):"
        )
        lines += [f"  {nodeid}" for nodeid in merged.missing[:LISTED]]
        if len(merged.missing) > LISTED:
            lines.append(f"  … and {len(merged.missing) - LISTED} more")
    return lines


def separator(title: str, width: int) -> str:
    """A section header as pytest's terminal writer draws it: ``==== title ====`` filling ``width``."""
    fill = "=" * max((width - len(title) - 2) // 2, 1)
    line = f"{fill} {title} {fill}"
    return line + "=" if len(line) + 1 <= width else line
