"""The JSON report (``--gym-report``): its schema, building and writing it, and loading one (a baseline, a shard's
report, the ``html`` command's input); :mod:`pytest_gym_eval.reporting.json_reading` reads a loaded report back into
the summary model."""

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
from pytest_gym_eval.reporting.conclusion import Flip, PolicyComparison
from pytest_gym_eval.reporting.summary import DatasetSummary, GymFigures, RolloutResult, TestOutcome
from pytest_gym_eval.reporting.verdicts import GateVerdict
from pytest_gym_eval.stats import gate_kinds
from pytest_gym_eval.stats.comparison import gym_verdict
from pytest_gym_eval.stats.gates import Familywise, Gate, GateResult
from pytest_gym_eval.stats.intervals import Interval
from pytest_gym_eval.stats.judge_noise import JudgeNoise
from pytest_gym_eval.stats.power import Hint
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
    warnings: Sequence[str] = (),
) -> dict[str, Any]:
    """The JSON report: ``schema_version``, ``meta``, ``datasets`` (one per summary), ``rollouts`` (all),
    ``tests`` when test functions got rollouts (``tests``: how each ended, :func:`test_json`),
    ``flips`` when a recording was replayed (``flips`` not None, possibly empty), and ``plan`` when given: what
    the session collected and selected (:func:`pytest_gym_eval.session.report_facts.report_plan`), which
    ``python -m pytest_gym_eval merge`` needs, and ``comparisons`` when a session compared policies (non-empty
    ``comparisons``: each candidate against the baseline per dataset, :func:`comparison_json`), and ``verdicts``
    when any gate was judged: every gate's verdict as the session's end judged it
    (:meth:`~pytest_gym_eval.reporting.verdicts.GateVerdict.to_json`), the one list every report renders, and
    ``warnings`` when any (:attr:`~pytest_gym_eval.reporting.conclusion.Conclusion.warnings`).

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
    if warnings:
        report["warnings"] = list(warnings)
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


def _gym_json(figures: GymFigures) -> dict[str, Any]:
    """Gym's own figures of a summary (``$defs/dataset/properties/gym``)."""
    return {
        "agent": figures.agent,
        "key_metrics": {name: _finite(value) for name, value in figures.key.items()},
        "secondary": {name: _finite(value) for name, value in figures.secondary.items()},
        "file": figures.file,
        "datasets": list(figures.datasets),
    }


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
