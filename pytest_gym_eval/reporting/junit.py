"""JUnit XML: the test suite's properties (every aggregate of the reward summary, and run facts)."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence

from pytest_gym_eval.reporting.model import DatasetSummary

# --- JUnit suite properties -------------------------------------------------------------------------------


def suite_properties(summaries: Sequence[DatasetSummary], meta: Mapping[str, object]) -> list[tuple[str, str]]:
    """(name, value) pairs for the JUnit XML ``<properties>`` of the test suite.

    First ``gym.<key>`` for each ``meta`` value that is a str, int or finite float; then per summary, with
    ``P = gym.<dataset>`` (``gym.<dataset>[<agent>]`` for one agent of several): ``P.tasks``, ``P.rollouts``,
    ``P.scored``, ``P.errors``, ``P.flaky_tasks`` (a count), ``P.wall_time`` (seconds), ``P.threshold``,
    ``P.mean_reward``, ``P.pass_rate`` and ``P.pass_at_<k>`` each with ``.low`` and ``.high``,
    ``P.gate.<label-slug>`` = verdict (e.g. ``P.gate.mean_reward_ge_0.70``) and ``P.verdict``; then the tokens,
    latency and cost (:func:`usage_properties`). Numbers use 6 significant digits; non-finite numbers (a nan
    estimate, infinite bounds) are left out.
    """
    properties: list[tuple[str, str]] = []
    for key, value in meta.items():
        text = _property_value(value)
        if text is not None:
            properties.append((f"gym.{key}", text))
    for summary in summaries:
        properties.extend(_summary_properties(summary))
        properties.extend(usage_properties(summary))
    return properties


def usage_properties(summary: DatasetSummary) -> list[tuple[str, str]]:
    """A summary's ``P.input_tokens``, ``P.output_tokens``, ``P.total_tokens`` and ``P.token_rollouts`` (the
    rollouts with a token count) when any rollout recorded tokens; ``P.latency_median`` and ``P.latency_p95``
    (seconds) when any recorded a latency; ``P.cost`` with ``--gym-price-per-mtok``. ``P`` as in
    :func:`suite_properties`."""
    prefix = f"gym.{summary.dataset}" if summary.agent is None else f"gym.{summary.dataset}[{summary.agent}]"
    tokens, latency = summary.tokens, summary.latency
    pairs: list[tuple[str, object]] = []
    if tokens.rollouts:
        pairs += [
            ("input_tokens", tokens.input_tokens),
            ("output_tokens", tokens.output_tokens),
            ("total_tokens", tokens.total_tokens),
            ("token_rollouts", tokens.rollouts),
        ]
    if latency.n:
        pairs += [("latency_median", latency.median), ("latency_p95", latency.p95)]
    if summary.cost is not None:
        pairs.append(("cost", summary.cost))
    return [(f"{prefix}.{name}", text) for name, value in pairs if (text := _property_value(value)) is not None]


def _summary_properties(summary: DatasetSummary) -> list[tuple[str, str]]:
    prefix = f"gym.{summary.dataset}" if summary.agent is None else f"gym.{summary.dataset}[{summary.agent}]"
    pairs: list[tuple[str, object]] = [
        ("tasks", summary.tasks),
        ("rollouts", summary.rollouts),
        ("scored", summary.scored),
        ("errors", summary.errors),
        ("flaky_tasks", len(summary.flaky_tasks)),
        ("wall_time", summary.wall_time),
        ("threshold", summary.threshold),
    ]
    intervals = {"mean_reward": summary.mean_reward, "pass_rate": summary.pass_rate}
    intervals.update({f"pass_at_{k}": interval for k, interval in summary.pass_at_k.items()})
    for name, interval in intervals.items():
        pairs += [(name, interval.estimate), (f"{name}.low", interval.low), (f"{name}.high", interval.high)]
    pairs += [(f"gate.{_slug(result.gate.label)}", result.verdict.value) for result in summary.gates]
    if summary.verdict is not None:
        pairs.append(("verdict", summary.verdict.value))
    properties: list[tuple[str, str]] = []
    for name, value in pairs:
        text = _property_value(value)
        if text is not None:
            properties.append((f"{prefix}.{name}", text))
    return properties


def _property_value(value: object) -> str | None:
    """The property text of a str, int or finite float; None for anything else."""
    if isinstance(value, float):
        return format(value, ".6g") if math.isfinite(value) else None
    if isinstance(value, (str, int)):
        return str(value)
    return None


def _slug(label: str) -> str:
    """``mean reward >= 0.70`` → ``mean_reward_ge_0.70``; ``pass@4 >= 0.50`` → ``pass@4_ge_0.50``."""
    return re.sub(r"[^A-Za-z0-9.@]+", "_", label.replace(">=", "ge")).strip("_")
