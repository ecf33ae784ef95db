"""The JSON report (``--gym-report``): writing it, and reading one back (as a baseline)."""

from __future__ import annotations

import json
import math
import os
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_gym_eval.gates import GateResult
from pytest_gym_eval.reporting.model import DatasetSummary, RolloutResult
from pytest_gym_eval.stats import Interval

REPORT_SCHEMA_VERSION = 1
"""Version of the JSON report's layout (``schema_version``); :func:`load_report` reads only this one."""

SCHEMA_PATH = Path(__file__).parent.parent / "report.schema.json"
"""The JSON Schema (draft 2020-12) of the report :func:`build_report` makes."""


# --- JSON report ------------------------------------------------------------------------------------------


def build_report(
    summaries: Sequence[DatasetSummary],
    results: Sequence[RolloutResult],
    meta: Mapping[str, object],
    *,
    plan: Mapping[str, object] | None = None,
) -> dict[str, Any]:
    """The JSON report: ``schema_version``, ``meta``, ``datasets`` (one per summary), ``rollouts`` (all), and
    ``plan`` when given.

    Its layout is described by ``report.schema.json`` (:data:`SCHEMA_PATH`). ``meta`` is free-form (gym
    version, checkout, model, dataset digests, created time, pytest args); values JSON cannot hold become
    strings. ``plan`` is what the session collected and selected (:func:`pytest_gym_eval.shard.report_plan`),
    which ``python -m pytest_gym_eval merge`` needs. Non-finite numbers anywhere (infinite bounds, a nan
    estimate) become null.
    """
    report = {
        "schema_version": REPORT_SCHEMA_VERSION,
        "meta": _json_safe(meta),
        "datasets": [_summary_json(summary) for summary in summaries],
        "rollouts": [_rollout_json(result) for result in results],
    }
    if plan is not None:
        report["plan"] = _json_safe(plan)
    return report


def _summary_json(summary: DatasetSummary) -> dict[str, Any]:
    verdict = summary.verdict
    return {
        "dataset": summary.dataset,
        "agent": summary.agent,
        "tasks": summary.tasks,
        "rollouts": summary.rollouts,
        "errors": summary.errors,
        "scored": summary.scored,
        "threshold": _finite(summary.threshold),
        "confidence": summary.confidence,
        "mean_reward": _interval_json(summary.mean_reward),
        "pass_rate": _interval_json(summary.pass_rate),
        "pass_at_k": {str(k): _interval_json(interval) for k, interval in summary.pass_at_k.items()},
        "flaky_tasks": list(summary.flaky_tasks),
        "error_classes": dict(summary.error_classes),
        "wall_time": _finite(summary.wall_time),
        "gates": [_gate_json(result) for result in summary.gates],
        "verdict": None if verdict is None else verdict.value,
    }


def _interval_json(interval: Interval) -> dict[str, Any]:
    return {
        "estimate": _finite(interval.estimate),
        "low": _finite(interval.low),
        "high": _finite(interval.high),
        "n": interval.n,
    }


def _gate_json(result: GateResult) -> dict[str, Any]:
    return {
        "metric": result.gate.metric,
        "k": result.gate.k,
        "threshold": result.gate.threshold,
        "label": result.gate.label,
        **_interval_json(result.interval),
        "verdict": result.verdict.value,
        "mode": result.mode.value,
    }


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
    target = Path(path)
    text = json.dumps(report, indent=indent, allow_nan=False, ensure_ascii=False) + "\n"
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = target.with_name(f".{target.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(temporary, "x", encoding="utf-8") as stream:
            stream.write(text)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, target)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


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
