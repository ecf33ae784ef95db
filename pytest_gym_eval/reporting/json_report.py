"""The JSON report (``--gym-report``): writing it, and reading one back (as a baseline)."""

from __future__ import annotations

import dataclasses
import json
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_gym_eval.core.files import write_text_atomic
from pytest_gym_eval.outcomes.usage import LatencySummary, SideUsage, TokenTotals, ratio
from pytest_gym_eval.reporting.conclusion import Conclusion, Flip, PolicyComparison
from pytest_gym_eval.reporting.summary import DatasetSummary, GymFigures, RolloutResult, TestOutcome, session_verdict
from pytest_gym_eval.reporting.verdicts import GateVerdict, gate_verdicts
from pytest_gym_eval.stats import gate_kinds
from pytest_gym_eval.stats.comparison import gym_verdict
from pytest_gym_eval.stats.gates import Familywise, Gate, GateMode, GateResult, GateSource, Hint, Verdict
from pytest_gym_eval.stats.intervals import Interval
from pytest_gym_eval.stats.judge_noise import JudgeNoise
from pytest_gym_eval.stats.sequential import AdaptiveRecord

REPORT_SCHEMA_VERSION = 1
"""Version of the JSON report's layout (``schema_version``); :func:`load_report` reads only this one."""

SCHEMA_PATH = Path(__file__).parent / "report.schema.json"
"""The JSON Schema (draft 2020-12) of the report :func:`build_report` makes, but for the gate kinds' names
(:func:`schema` adds them)."""


def schema() -> dict[str, Any]:
    """The report's JSON Schema: :data:`SCHEMA_PATH` with the gate kinds' names
    (:data:`~pytest_gym_eval.stats.gate_kinds.METRICS`) as the enum of a gate's ``metric``."""
    loaded: dict[str, Any] = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    loaded["$defs"]["gate_metric"]["enum"] = list(gate_kinds.METRICS)
    return loaded


# --- JSON report ------------------------------------------------------------------------------------------


def build_report(
    summaries: Sequence[DatasetSummary],
    results: Sequence[RolloutResult],
    meta: Mapping[str, object],
    session: tuple[int, str] | None = None,
    *,
    flips: Sequence[Flip] | None = None,
    plan: Mapping[str, object] | None = None,
    comparisons: Sequence[PolicyComparison] = (),
    tests: Sequence[TestOutcome] = (),
    verdicts: Sequence[GateVerdict] = (),
) -> dict[str, Any]:
    """The JSON report: ``schema_version``, ``meta``, ``datasets`` (one per summary), ``rollouts`` (all),
    ``tests`` when test functions got rollouts (``tests``: how each ended, :func:`test_json`),
    ``flips`` when a recording was replayed (``flips`` not None, possibly empty), and ``plan`` when given: what
    the session collected and selected (:func:`pytest_gym_eval.session.report_facts.report_plan`), which
    ``python -m pytest_gym_eval merge`` needs, and ``comparisons`` when a session compared policies (non-empty
    ``comparisons``: each candidate against the baseline per dataset, :func:`comparison_json`), and ``verdicts``
    when any gate was judged: every gate's verdict as the session's end judged it
    (:meth:`~pytest_gym_eval.reporting.verdicts.GateVerdict.to_json`), the one list every report renders.

    Its layout is described by ``report.schema.json`` (:data:`SCHEMA_PATH`). ``meta`` is free-form (gym
    version, checkout, model, dataset digests, created time, pytest args); values JSON cannot hold become
    strings. Non-finite numbers anywhere (infinite bounds, a nan estimate) become null. ``session`` is the
    session's final ``(exit status, one-line reason)``, written as ``session`` when given.
    """
    report: dict[str, Any] = {
        "schema_version": REPORT_SCHEMA_VERSION,
        "meta": _json_safe(meta),
        "datasets": [_summary_json(summary) for summary in summaries],
        "rollouts": [_rollout_json(result) for result in results],
    }
    if tests:
        report["tests"] = [test_json(test) for test in tests]
    if session is not None:
        report["session"] = {"exit_status": int(session[0]), "reason": session[1]}
    if flips is not None:
        report["flips"] = [
            {"nodeid": flip.nodeid, "reward": _finite(flip.reward), "recorded": _json_safe(list(flip.recorded))}
            for flip in flips
        ]
    if comparisons:
        report["comparisons"] = [comparison_json(item) for item in comparisons]
    if verdicts:
        report["verdicts"] = [verdict.to_json() for verdict in verdicts]
    if plan is not None:
        report["plan"] = _json_safe(plan)
    return report


def test_json(test: TestOutcome) -> dict[str, Any]:
    """One test function's outcome over its rollout (``$defs/test``): ``nodeid``, ``rollout``, ``dataset``,
    ``task_id``, ``repeat``, ``outcome``, ``message``, and ``metrics``/``metric_reasons`` when it recorded some."""
    return {
        "nodeid": test.test,
        "rollout": test.rollout,
        "dataset": test.dataset,
        "task_id": test.task_id,
        "repeat": test.repeat,
        "outcome": test.outcome,
        "message": test.message,
        **({"metrics": {name: _finite(value) for name, value in test.metrics}} if test.metrics else {}),
        **({"metric_reasons": dict(test.reasons)} if test.reasons else {}),
    }


def tests_from_json(entries: object) -> tuple[TestOutcome, ...]:
    """A report's ``tests`` read back (:func:`test_json`); entries not of its shape are left out."""
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


def comparison_json(item: PolicyComparison) -> dict[str, Any]:
    """One candidate against the baseline: the paired difference, both means, the flips (task ids), McNemar's p
    (null unless every reward is 0 or 1), the ``--gym-max-regression`` verdict with Gym's word for it (``verdict``,
    ``gym_verdict``, ``margin``: null without that gate) and ``gates``, every comparison gate's (non-inferiority,
    superiority; ``sequential: true`` and the sequence's ``interval`` when judged on ``--gym-adaptive``'s);
    ``adaptive`` only when the gates were judged sequentially (:func:`_comparison_waves_json`); ``usage``, only
    when either side's paired rollouts recorded tokens or a latency (:func:`comparison_usage_json`)."""
    difference, flips, result = item.comparison.difference, item.comparison.flips, item.result
    return {
        "dataset": item.dataset,
        "baseline": item.baseline,
        "candidate": item.candidate,
        "delta": _interval_json(difference.interval),
        "confidence": difference.confidence,
        "baseline_mean": _finite(difference.baseline_mean),
        "candidate_mean": _finite(difference.candidate_mean),
        "pairs": difference.pairs,
        "flips": {
            "only_baseline": list(flips.only_baseline),
            "only_candidate": list(flips.only_candidate),
            "both": list(flips.both),
            "neither": list(flips.neither),
        },
        "binary": flips.binary,
        "mcnemar_p": _finite(flips.p_value) if flips.binary else None,
        "verdict": result.verdict.value if result is not None else None,
        "gym_verdict": gym_verdict(result) if result is not None else None,
        "margin": result.gate.margin if result is not None else None,
        "gates": [
            {
                "hypothesis": r.gate.hypothesis.value,
                "margin": r.gate.margin,
                "verdict": r.verdict.value,
                "gym_verdict": gym_verdict(r),
                **({"sequential": True, "interval": _interval_json(r.interval)} if r.sequential else {}),
                **({"inconclusive_hint": _hint_json(r.hint)} if r.hint is not None else {}),
                **(
                    {"familywise": _familywise_json(f), "interval": _interval_json(r.interval)}
                    if (f := r.familywise) is not None
                    else {}
                ),
            }
            for r in item.comparison.results
        ],
        "decides": item.decides,
        **({"adaptive": _comparison_waves_json(item)} if item.sequential else {}),
        **({"usage": comparison_usage_json(item)} if item.usage_recorded else {}),
    }


def _comparison_waves_json(item: PolicyComparison) -> dict[str, Any]:
    """How ``--gym-adaptive`` judged a comparison: its waves, the cumulative repeats per task at the end of each, the
    repeats used (the last of them) and the repeats selected."""
    return {
        "waves": len(item.waves), "repeats": list(item.waves), "repeats_used": item.repeats,
        "max_repeats": item.max_repeats,
    }  # fmt: skip


def comparison_usage_json(item: PolicyComparison) -> dict[str, Any]:
    """Both sides' tokens and latency over the pairs, ``{"baseline": SIDE, "candidate": SIDE, "ratio": {...}}``:
    a SIDE is ``tokens`` (``input``, ``output``, ``total``, ``rollouts`` with a count, ``per_rollout``: total /
    rollouts, null without a count) and ``latency`` (``median``, ``p95`` seconds, ``n``); ``ratio`` is candidate /
    baseline of ``tokens_per_rollout`` and ``latency_median`` (null where either is unknown or the baseline's 0)."""

    def side(usage: SideUsage) -> dict[str, Any]:
        return {
            "tokens": {**_tokens_json(usage.tokens), "per_rollout": usage.tokens_per_rollout},
            "latency": _latency_json(usage.latency),
        }

    base, cand = item.baseline_usage, item.candidate_usage
    return {
        "baseline": side(base),
        "candidate": side(cand),
        "ratio": {
            "tokens_per_rollout": ratio(cand.tokens_per_rollout, base.tokens_per_rollout),
            "latency_median": ratio(cand.latency.median, base.latency.median),
        },
    }


def _summary_json(summary: DatasetSummary) -> dict[str, Any]:
    verdict = summary.verdict
    return {
        "dataset": summary.dataset,
        "agent": summary.agent,
        **({} if summary.policy is None else {"policy": summary.policy}),
        "tasks": summary.tasks,
        "rollouts": summary.rollouts,
        "errors": summary.errors,
        "scored": summary.scored,
        "threshold": _finite(summary.threshold),
        "confidence": summary.confidence,
        "mean_reward": _interval_json(summary.mean_reward),
        "pass_rate": _interval_json(summary.pass_rate),
        "pass_at_k": {str(k): _interval_json(interval) for k, interval in summary.pass_at_k.items()},
        **({"metrics": {name: _interval_json(iv) for name, iv in summary.metrics.items()}} if summary.metrics else {}),
        "flaky_tasks": list(summary.flaky_tasks),
        "error_classes": dict(summary.error_classes),
        "wall_time": _finite(summary.wall_time),
        "gates": [_gate_json(result) for result in summary.gates],
        **(
            {"gates_not_applicable": [plan_gate_json(gate) for gate in summary.not_applicable]}
            if summary.not_applicable
            else {}
        ),
        "verdict": None if verdict is None else verdict.value,
        "selected": summary.selected,
        "unreported": summary.unreported,
        "reward_range": None if summary.reward_range is None else [_finite(v) for v in summary.reward_range],
        **_usage_summary_json(summary),
        **({} if summary.adaptive is None else {"adaptive": _adaptive_json(summary.adaptive)}),
        **({"selection": summary.selection.as_dict()} if summary.selection and summary.selection.partial else {}),
        **({} if summary.gym is None else {"gym": _gym_json(summary.gym)}),
        **({} if summary.judge_noise is None else {"judge_noise": judge_noise_json(summary.judge_noise)}),
    }


def judge_noise_json(noise: JudgeNoise) -> dict[str, Any]:
    """A summary's judge-noise split (``$defs/dataset/properties/judge_noise``): the fields of
    :class:`~pytest_gym_eval.stats.judge_noise.JudgeNoise` by name, null for a value that is not finite."""
    return {
        name: _finite(value) if isinstance(value, float) else value for name, value in dataclasses.asdict(noise).items()
    }


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


def _gym_json(figures: GymFigures) -> dict[str, Any]:
    """Gym's own figures of a summary (``$defs/dataset/properties/gym``)."""
    return {
        "agent": figures.agent,
        "key_metrics": {name: _finite(value) for name, value in figures.key.items()},
        "secondary": {name: _finite(value) for name, value in figures.secondary.items()},
        "file": figures.file,
        "datasets": list(figures.datasets),
    }


def _gym_from_json(entry: object) -> GymFigures | None:
    """:func:`_gym_json` read back (None when absent or not of its shape)."""
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


def _usage_summary_json(summary: DatasetSummary) -> dict[str, Any]:
    """A summary's ``tokens`` (with the judge's apart as ``tokens.judge``, only when its rollouts recorded judge calls
    with a count), ``latency`` (seconds) and ``cost``."""
    judge = summary.judge_tokens
    return {
        "tokens": {**_tokens_json(summary.tokens), **({"judge": _tokens_json(judge)} if judge.rollouts else {})},
        "latency": _latency_json(summary.latency),
        "cost": None if summary.cost is None else _finite(summary.cost),
    }


def _tokens_json(tokens: TokenTotals) -> dict[str, Any]:
    """Token totals as the report writes them: ``input``, ``output``, ``total`` and ``rollouts`` (with a count)."""
    return {
        "input": tokens.input_tokens,
        "output": tokens.output_tokens,
        "total": tokens.total_tokens,
        "rollouts": tokens.rollouts,
    }


def _latency_json(latency: LatencySummary) -> dict[str, Any]:
    """A latency summary as the report writes it: ``median`` and ``p95`` seconds (null when none), ``n``."""
    return {"median": _finite(latency.median), "p95": _finite(latency.p95), "n": latency.n}


def _adaptive_json(record: AdaptiveRecord) -> dict[str, Any]:
    """How --gym-adaptive ran a dataset (its waves, the rollouts spent against the ceiling, why it stopped)."""
    return {
        "waves": record.waves,
        "repeats": list(record.ends),
        "sequential": record.sequential,
        "rollouts": record.rollouts,
        "max_rollouts": record.ceiling,
        "skipped": record.skipped,
        "saving": record.saving,
        "reward_range": [record.reward_range.low, record.reward_range.high],
        "reason": record.reason,
        "note": record.note,
    }


def _interval_json(interval: Interval) -> dict[str, Any]:
    return {
        "estimate": _finite(interval.estimate),
        "low": _finite(interval.low),
        "high": _finite(interval.high),
        "n": interval.n,
    }


def plan_gate_json(gate: Gate) -> dict[str, Any]:
    """A gate as the plan lists it (``$defs/planned_gate``): ``metric``, ``k``, ``threshold``, ``custom`` for a
    custom metric's, ``source`` (``command line``, ``ini``, ``dataset settings`` or ``test mark``) when known and
    ``declared_by`` (the test whose ``gym_rollouts`` mark declared it) for a mark's."""
    return {
        "metric": gate.metric,
        "k": gate.k,
        "threshold": gate.threshold,
        **({"custom": gate.custom} if gate.custom is not None else {}),
        **({"source": gate.source.value} if gate.source is not None else {}),
        **({"declared_by": gate.declared_by} if gate.declared_by is not None else {}),
    }


def _gate_json(result: GateResult) -> dict[str, Any]:
    return {
        "metric": result.gate.metric,
        "k": result.gate.k,
        **({"custom": result.gate.custom} if result.gate.custom is not None else {}),
        **({"source": result.gate.source.value} if result.gate.source is not None else {}),
        **({"declared_by": result.gate.declared_by} if result.gate.declared_by is not None else {}),
        "threshold": result.gate.threshold,
        "label": result.gate.label,
        **_interval_json(result.interval),
        "verdict": result.verdict.value,
        "mode": result.mode.value,
        "note": result.note,
        "familywise": None if (f := result.familywise) is None else _familywise_json(f),
        "inconclusive_hint": None if result.hint is None else _hint_json(result.hint),
    }  # fmt: skip


def _familywise_json(family: Familywise) -> dict[str, Any]:
    return {"method": family.method, "family": family.family, "p_value": family.p_value, "level": family.level}


def _hint_json(hint: Hint) -> dict[str, Any]:
    return {"more": hint.more, "unit": hint.unit, "repeats_per_task": hint.repeats, "text": hint.text}


def _rollout_json(result: RolloutResult) -> dict[str, Any]:
    return {
        "nodeid": result.nodeid,
        "dataset": result.dataset,
        "task_id": result.task_id,
        "repeat": result.repeat,
        "agent": result.agent,
        "status": result.status,
        "reward": None if result.reward is None else _finite(result.reward),
        "failure_class": result.failure_class,
        "record": result.record,
        **({} if result.answer is None else {"answer": result.answer}),
        **_usage_rollout_json(result),
        **({"metrics": dict(result.metrics)} if result.metrics else {}),
        **({"metric_reasons": dict(result.metric_reasons)} if result.metric_reasons else {}),
    }


def _usage_rollout_json(result: RolloutResult) -> dict[str, Any]:
    """A rollout's ``input_tokens``, ``output_tokens``, ``total_tokens`` and ``latency`` (seconds), null where Gym
    recorded none."""
    usage = result.usage
    return {
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "total_tokens": usage.total_tokens,
        "latency": None if usage.latency is None else _finite(usage.latency),
        **({"start": result.start, "stop": result.stop} if result.start > 0.0 else {}),
    }


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def _json_safe(value: object) -> Any:
    """``value`` as plain JSON data: non-finite floats → None, mappings → objects with string keys,
    sequences → lists, anything else that JSON has no type for → ``str(value)``."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return _finite(value)
    if isinstance(value, Mapping):
        return {str(key): _json_safe(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(item) for item in value]
    return str(value)


def write_report(path: str | os.PathLike[str], report: Mapping[str, Any], indent: int | None = 2) -> None:
    """Write ``report`` as JSON (``indent`` 2 by default; None writes it compact, which ``json`` does ~10x
    faster: 160,000 rollouts took ~4 s indented) to ``path`` atomically: a temporary file beside it, then a
    rename.

    Creates missing parent directories. Raises ValueError when ``report`` holds a non-finite number (use
    :func:`build_report`, which replaces them with null), OSError when the file cannot be written.
    """
    text = json.dumps(report, indent=indent, allow_nan=False, ensure_ascii=False) + "\n"
    write_text_atomic(path, text)


def load_report(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a report :func:`write_report` wrote, e.g. as the baseline of :func:`compare_to_baseline`.

    Checks by hand the keys this module reads (not the whole schema): ``schema_version`` is
    :data:`REPORT_SCHEMA_VERSION`, ``datasets`` is a list and ``rollouts`` a list of objects with string
    ``dataset``, ``task_id`` and ``status`` and a numeric or null ``reward``. Raises ValueError naming the
    file when it is not valid JSON or fails those checks; OSError when it cannot be read.
    """
    source = Path(path)
    try:
        data = json.loads(source.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ValueError(f"{source}: not a valid JSON report: {error}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{source}: not a pytest-gym-eval report (the top level is not a JSON object)")
    version = data.get("schema_version")
    if isinstance(version, bool) or version != REPORT_SCHEMA_VERSION:
        raise ValueError(
            f"{source}: report schema_version {version!r} is not supported (this version reads {REPORT_SCHEMA_VERSION})"
        )
    if not isinstance(data.get("datasets"), list) or not isinstance(data.get("rollouts"), list):
        raise ValueError(f"{source}: not a pytest-gym-eval report (needs 'datasets' and 'rollouts' lists)")
    for index, rollout in enumerate(data["rollouts"]):
        problem = _rollout_problem(rollout)
        if problem is not None:
            raise ValueError(f"{source}: rollouts[{index}] {problem}")
    return data


def _rollout_problem(rollout: object) -> str | None:
    if not isinstance(rollout, dict):
        return "is not an object"
    for key in ("dataset", "task_id", "status"):
        if not isinstance(rollout.get(key), str):
            return f"has no string {key!r}"
    reward = rollout.get("reward")
    if reward is not None and (isinstance(reward, bool) or not isinstance(reward, (int, float))):
        return f"has a reward that is neither a number nor null: {reward!r}"
    return None


# --- Reading a report back into the summary model ---------------------------------------------------------


def conclusion_from_report(
    report: Mapping[str, Any], baseline: Mapping[str, Any] | None = None
) -> tuple[Conclusion, list[RolloutResult]]:
    """The :class:`~pytest_gym_eval.reporting.conclusion.Conclusion` and rollouts a report (from :func:`load_report`)
    was written from, so that any output can be made again afterwards from the JSON file alone.

    Summaries, gate verdicts and flips are read as written (not recomputed); a non-finite number the report
    holds as null comes back as nan (estimate) or -inf/+inf (bounds); the rollouts' start/stop times are not
    in the report (0.0). The comparison with ``baseline`` (another report) is computed as ``--gym-baseline``
    computes it. The exit status and reason are the report's (its ``session``) when it has them, else those
    :func:`~pytest_gym_eval.reporting.summary.session_verdict` gives its gates (INCONCLUSIVE failing; the
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
    if isinstance(status, int) and not isinstance(status, bool) and isinstance(reason, str):
        return Conclusion(summaries, comparisons, flips, status, reason, tests=tests, verdicts=verdicts), results
    # An older report without them: the verdict of the gates it lists, inconclusive counted as failing.
    status, reason = session_verdict(summaries, inconclusive_passes=False)
    verdicts = verdicts or gate_verdicts(summaries)
    return Conclusion(summaries, comparisons, flips, status, reason, tests=tests, verdicts=verdicts), results


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
    """A gate as :func:`plan_gate_json` or a dataset's ``gates`` wrote it (``source`` absent in older reports)."""
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
