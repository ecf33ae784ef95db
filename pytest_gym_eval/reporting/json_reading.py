"""A JSON report read back into the summary model (:func:`conclusion_from_report`): its summaries, gate verdicts, flips,
rollouts and test outcomes as they were written, so that any output can be made again afterwards from the JSON file
alone (``python -m pytest_gym_eval html``, ``merge``). Loading and checking the file:
:func:`pytest_gym_eval.reporting.json_report.load_report`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

from pytest_gym_eval.reporting.conclusion import Conclusion, Flip
from pytest_gym_eval.reporting.summary import DatasetSummary, GymFigures, RolloutResult, TestOutcome
from pytest_gym_eval.reporting.verdicts import GateVerdict, gate_verdicts, session_status
from pytest_gym_eval.stats.gates import Gate, GateMode, GateResult, GateSource, Verdict
from pytest_gym_eval.stats.intervals import Interval
from pytest_gym_eval.stats.judge_noise import JudgeNoise


def tests_from_json(entries: object) -> tuple[TestOutcome, ...]:
    """A report's ``tests`` read back (:func:`~pytest_gym_eval.reporting.json_report.test_json`); entries not of its
    shape are left out."""
    found = []
    for entry in entries if isinstance(entries, list) else []:
        if not isinstance(entry, Mapping) or not all(isinstance(entry.get(k), str) for k in ("nodeid", "rollout")):
            continue
        repeat = entry.get("repeat")
        found.append(
            TestOutcome(
                entry["nodeid"], entry["rollout"], str(entry.get("dataset") or ""), str(entry.get("task_id") or ""),
                repeat if isinstance(repeat, int) and not isinstance(repeat, bool) else 0,
                str(entry.get("outcome") or ""), str(entry.get("message") or ""),
                _metrics_from_json(entry.get("metrics")), _reasons_from_json(entry.get("metric_reasons")),
            )
        )  # fmt: skip
    return tuple(found)


def _gym_from_json(entry: object) -> GymFigures | None:
    """:func:`~pytest_gym_eval.reporting.json_report._gym_json` read back (None when absent or not of its shape)."""
    if not isinstance(entry, Mapping) or not isinstance(entry.get("agent"), str):
        return None
    numbers = {
        part: {str(k): float(v) for k, v in (entry.get(part) or {}).items() if isinstance(v, int | float)}
        for part in ("key_metrics", "secondary")
        if isinstance(entry.get(part) or {}, Mapping)
    }
    return GymFigures(
        entry["agent"],
        numbers.get("key_metrics", {}),
        numbers.get("secondary", {}),
        str(entry.get("file") or ""),
        tuple(str(d) for d in entry.get("datasets") or ()),
    )


def conclusion_from_report(
    report: Mapping[str, Any], baseline: Mapping[str, Any] | None = None
) -> tuple[Conclusion, list[RolloutResult]]:
    """The :class:`~pytest_gym_eval.reporting.conclusion.Conclusion` and rollouts a report (from
    :func:`~pytest_gym_eval.reporting.json_report.load_report`) was written from, so that any output can be made again
    afterwards from the JSON file alone.

    Summaries, gate verdicts and flips are read as written (not recomputed); a non-finite number the report
    holds as null comes back as nan (estimate) or -inf/+inf (bounds); the rollouts' start/stop times are not
    in the report (0.0). The comparison with ``baseline`` (another report) is computed as ``--gym-baseline``
    computes it. The exit status and reason are the report's (its ``session``) when it has them, else those
    :func:`~pytest_gym_eval.reporting.verdicts.session_status` gives its gates' verdicts (INCONCLUSIVE failing; the
    max-drop and flip gates left out: the report does not say whether they were set). Raises ValueError for a
    dataset, gate or rollout entry this version cannot read.
    """
    from pytest_gym_eval.reporting.baseline import compare_to_baseline

    results = results_from_report(report)
    summaries = [_summary_from_json(entry) for entry in report.get("datasets", [])]
    flips_json = report.get("flips")
    flips = None
    if isinstance(flips_json, list):
        flips = [
            Flip(str(f.get("nodeid")), _number(f.get("reward"), math.nan), tuple(f.get("recorded") or ()))
            for f in flips_json
            if isinstance(f, Mapping)
        ]
    comparisons = compare_to_baseline(baseline, results) if baseline is not None else []
    session = report.get("session")  # {"exit_status", "reason"}; older drafts had them at the top level
    ended = session if isinstance(session, Mapping) else report
    status, reason = ended.get("exit_status"), ended.get("reason")
    tests = tests_from_json(report.get("tests"))
    verdicts = tuple(verdict_from_json(entry) for entry in report.get("verdicts") or () if isinstance(entry, Mapping))
    warnings = tuple(str(line) for line in report.get("warnings") or ())
    if not (isinstance(status, int) and not isinstance(status, bool) and isinstance(reason, str)):
        # An older report without them: the verdict of the gates it lists, inconclusive counted as failing.
        verdicts = verdicts or gate_verdicts(summaries)
        status, reason = session_status(verdicts, summaries)
    concluded = Conclusion(summaries, comparisons, flips, status, reason, tests=tests, verdicts=verdicts)
    return dataclasses.replace(concluded, warnings=warnings), results


def verdict_from_json(entry: Mapping[str, Any]) -> GateVerdict:
    """A :class:`~pytest_gym_eval.reporting.verdicts.GateVerdict` from its JSON report entry (``verdicts``)."""

    def number(key: str) -> float | None:
        value = entry.get(key)
        return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None

    policy = entry.get("policy")
    return GateVerdict(
        dataset=str(entry.get("dataset", "")),
        subject=str(entry.get("subject", "")),
        policy=str(policy) if policy is not None else None,
        kind=str(entry.get("kind", "")),
        gate=str(entry.get("gate", "")),
        statistic=number("statistic"),
        bound=number("bound"),
        threshold=number("threshold"),
        verdict=str(entry.get("verdict", "")),
        message=str(entry.get("message", "")),
        decides=bool(entry.get("decides", True)),
        fails=bool(entry.get("fails", False)),
        detail=str(entry.get("detail", "")),
    )


def results_from_report(report: Mapping[str, Any]) -> list[RolloutResult]:
    """The report's ``rollouts`` as :class:`~pytest_gym_eval.reporting.summary.RolloutResult` objects (report
    order). Keys that ``RolloutResult`` has fields for are kept (so fields added later read back too); others
    are ignored. Raises ValueError naming the entry when one lacks a field ``RolloutResult`` needs."""
    names = {f.name for f in dataclasses.fields(RolloutResult)}
    results = []
    for index, entry in enumerate(report.get("rollouts", [])):
        values = {key: value for key, value in entry.items() if key in names}
        values["reward"] = None if values.get("reward") is None else float(values["reward"])
        values["metrics"] = _metrics_from_json(values.get("metrics"))
        values["metric_reasons"] = _reasons_from_json(values.get("metric_reasons"))
        try:
            results.append(RolloutResult(**values))
        except TypeError as error:
            raise ValueError(f"rollouts[{index}] cannot be read: {error}") from None
    return results


def _metrics_from_json(value: object) -> tuple[tuple[str, float], ...]:
    """A rollout's ``metrics`` object as ``RolloutResult.metrics``, sorted by name; entries that are not numbers
    are left out."""
    if not isinstance(value, Mapping):
        return ()
    return tuple(
        (str(name), float(number))
        for name, number in sorted(value.items())
        if isinstance(number, (int, float)) and not isinstance(number, bool) and math.isfinite(number)
    )


def _reasons_from_json(value: object) -> tuple[tuple[str, str], ...]:
    """A rollout's ``metric_reasons`` object as ``RolloutResult.metric_reasons``, sorted by name; entries that are
    not strings are left out."""
    if not isinstance(value, Mapping):
        return ()
    return tuple((str(name), text) for name, text in sorted(value.items()) if isinstance(text, str))


def _number(value: object, default: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return default
    return float(value)


def _interval_from_json(entry: Mapping[str, Any]) -> Interval:
    count = entry.get("n")
    return Interval(
        _number(entry.get("estimate"), math.nan),
        _number(entry.get("low"), -math.inf),
        _number(entry.get("high"), math.inf),
        count if isinstance(count, int) else 0,
    )


def _gate_from_json(gate: Mapping[str, Any]) -> Gate:
    """A gate as :func:`~pytest_gym_eval.reporting.json_report.plan_gate_json` or a dataset's ``gates`` wrote it
    (``source`` absent in older reports)."""
    source = gate.get("source")
    return Gate(
        str(gate["metric"]),
        float(gate["threshold"]),
        gate.get("k"),
        gate.get("custom"),
        None if source is None else GateSource(source),
        gate.get("declared_by"),
    )


def _summary_from_json(entry: Mapping[str, Any]) -> DatasetSummary:
    try:
        gates = [
            GateResult(
                _gate_from_json(gate),
                _interval_from_json(gate),
                Verdict(gate["verdict"]),
                GateMode(gate["mode"]),
                str(gate.get("note") or ""),
            )
            for gate in entry.get("gates", [])
        ]
        selected = entry.get("selected")
        reward_range = entry.get("reward_range")
        return DatasetSummary(
            dataset=str(entry["dataset"]),
            agent=entry.get("agent"),
            policy=str(entry["policy"]) if entry.get("policy") is not None else None,
            tasks=int(entry["tasks"]),
            rollouts=int(entry["rollouts"]),
            errors=int(entry["errors"]),
            scored=int(entry["scored"]),
            mean_reward=_interval_from_json(entry["mean_reward"]),
            pass_rate=_interval_from_json(entry["pass_rate"]),
            pass_at_k={int(k): _interval_from_json(v) for k, v in entry.get("pass_at_k", {}).items()},
            metrics={str(name): _interval_from_json(v) for name, v in entry.get("metrics", {}).items()},
            flaky_tasks=tuple(str(task) for task in entry.get("flaky_tasks", [])),
            wall_time=_number(entry.get("wall_time"), 0.0),
            gates=gates,
            not_applicable=tuple(_gate_from_json(gate) for gate in entry.get("gates_not_applicable", [])),
            threshold=_number(entry.get("threshold"), 1.0),
            confidence=_number(entry.get("confidence"), 0.95),
            error_classes={str(k): int(v) for k, v in entry.get("error_classes", {}).items()},
            selected=selected if isinstance(selected, int) and not isinstance(selected, bool) else None,
            reward_range=(
                (_number(reward_range[0], math.nan), _number(reward_range[1], math.nan))
                if isinstance(reward_range, list) and len(reward_range) == 2
                else None
            ),
            gym=_gym_from_json(entry.get("gym")),
            judge_noise=_judge_noise_from_json(entry.get("judge_noise")),
        )
    except (KeyError, TypeError, ValueError) as error:
        raise ValueError(f"dataset entry {entry.get('dataset')!r} cannot be read: {error!r}") from None


def _judge_noise_from_json(entry: object) -> JudgeNoise | None:
    """:func:`judge_noise_json` read back (None when absent or not of its shape; a null number reads as nan)."""
    if not isinstance(entry, Mapping):
        return None
    try:
        values = {field.name: entry[field.name] for field in dataclasses.fields(JudgeNoise)}
        for name in ("judge_variance", "answer_variance", "judge_share", "share_low", "share_high", "agreement"):
            values[name] = _number(values[name], math.nan)
        return JudgeNoise(**values)
    except (KeyError, TypeError):
        return None
