"""Gym's own figures beside the plugin's: the metrics ``gym eval run`` writes per agent, and what a fractional
reward does to pass rates.

``gym eval run`` writes ``<output>_aggregate_metrics.json``: a list with one entry per agent, each with
``agent_ref.name``, ``key_metrics`` (Gym's headline figures, e.g. ``pass@1/accuracy`` 97.0 on a 0-100 scale for
a mean reward of 0.97, or ``majority@4/accuracy`` where the environment reports it) and ``agent_metrics``
(``mean/<field>`` of every numeric field the verifier recorded per rollout, such as hotpotqa's
``answer_f1``). :func:`read_gym_metrics` reads them, :func:`with_gym_figures` gives each summary its agent's
(:class:`~pytest_gym_eval.reporting.summary.GymFigures`, which every report shows); :func:`gym_lines` and
:func:`fractional_note` are the terminal's lines.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from pytest_gym_eval.core.rundir import RunPaths
from pytest_gym_eval.reporting import fmt
from pytest_gym_eval.reporting.summary import DatasetSummary, GymFigures, RolloutResult

MAX_SHOWN = 8
"""Figures of each kind a summary line shows before "… and N more"."""
_NOT_SECONDARY = frozenset({"reward", "input_tokens", "output_tokens", "total_tokens"})


@dataclass(frozen=True)
class AgentMetrics:
    """One agent's entry of Gym's aggregate metrics: ``key`` its ``key_metrics`` (Gym's headline figures, token
    means left out), ``secondary`` the means of the other numeric fields the verifier recorded per rollout
    (``answer_f1`` -> 0.83), ``path`` the file they came from."""

    key: dict[str, float]
    secondary: dict[str, float]
    path: Path


def read_gym_metrics(run_dir: Path | None) -> dict[str, AgentMetrics]:
    """Gym's aggregate metrics per agent name from every ``*_aggregate_metrics.json`` under the run directory's
    ``gym-output`` (the newest file wins for an agent). Files that are missing or unreadable, and entries
    that are not of Gym's shape, are left out; never raises."""
    found: dict[str, AgentMetrics] = {}
    if run_dir is None:
        return found
    try:
        paths = sorted(
            RunPaths(run_dir).output.parent.rglob("*_aggregate_metrics.json"), key=lambda p: p.stat().st_mtime
        )
    except OSError:
        return found
    for path in paths:
        try:
            entries = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        for entry in entries if isinstance(entries, list) else []:
            if not isinstance(entry, dict):
                continue
            name = (entry.get("agent_ref") or {}).get("name") if isinstance(entry.get("agent_ref"), dict) else None
            if not isinstance(name, str):
                continue
            key = {
                k: float(v)
                for k, v in _numbers(entry.get("key_metrics")).items()
                if not k.endswith(("_tokens", "/reward"))
            }
            means = _numbers(entry.get("agent_metrics"))
            for metric, value in means.items():  # majority voting, where Gym computes it, even if not a key metric
                if metric.startswith("majority@") and metric.count("/") == 1:
                    key.setdefault(metric, value)
            secondary = {
                k.removeprefix("mean/"): v
                for k, v in means.items()
                if k.startswith("mean/") and k.removeprefix("mean/") not in _NOT_SECONDARY and k not in key
            }
            found[name] = AgentMetrics(key, secondary, path)
    return found


def _numbers(value: object) -> dict[str, float]:
    if not isinstance(value, dict):
        return {}
    return {
        str(k): float(v)
        for k, v in value.items()
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
    }


def members(summary: DatasetSummary, results: Sequence[RolloutResult]) -> list[RolloutResult]:
    """The results a summary covers (its dataset, and its agent when it has one)."""
    return [r for r in results if r.dataset == summary.dataset and (summary.agent is None or r.agent == summary.agent)]


def with_gym_figures(
    summaries: Sequence[DatasetSummary], results: Sequence[RolloutResult], metrics: Mapping[str, AgentMetrics]
) -> list[DatasetSummary]:
    """``summaries`` each with Gym's figures of its agent (``metrics``: :func:`read_gym_metrics`) as its ``gym``,
    when its rollouts (among ``results``) all ran on one agent that Gym wrote figures for; the others unchanged."""
    datasets: dict[str, list[str]] = {}  # agent -> the datasets it ran, first-seen order
    for result in results:
        if result.dataset not in (seen := datasets.setdefault(result.agent, [])):
            seen.append(result.dataset)
    found = []
    for summary in summaries:
        agents = {r.agent for r in members(summary, results)}
        entry = metrics.get(next(iter(agents))) if len(agents) == 1 else None
        if entry is None or not (entry.key or entry.secondary):
            found.append(summary)
            continue
        agent = next(iter(agents))
        figures = GymFigures(agent, dict(entry.key), dict(entry.secondary), entry.path.name, tuple(datasets[agent]))
        found.append(replace(summary, gym=figures))
    return found


def gym_texts(figures: GymFigures) -> list[tuple[str, str, str, str]]:
    """``(kind, label, values, where)`` of Gym's figures as every report words them: kind ``key``, ``gym's own``
    (Gym's key metrics, e.g. ``pass@1/accuracy 97``; where: the agent and the file) and kind ``secondary`` (the
    means of the verifier's other per-rollout scores, e.g. ``answer_f1 0.83``), each only when there are some."""
    over = f", over {', '.join(figures.datasets)}: Gym aggregates per agent" if len(figures.datasets) > 1 else ""
    texts = []
    if figures.key:
        texts.append(("key", "gym's own", _listed(figures.key), f"agent {figures.agent}, {figures.file}{over}"))
    if figures.secondary:
        texts.append(("secondary", "secondary", _listed(figures.secondary), f"means over the rollouts, Gym's{over}"))
    return texts


def gym_lines(summary: DatasetSummary, width: int) -> list[str]:
    """The terminal's ``gym's own`` and ``secondary`` lines of ``summary.gym`` (:func:`gym_texts`); [] without."""
    if summary.gym is None:
        return []
    texts = gym_texts(summary.gym)
    return [line for _, label, values, where in texts for line in fmt.labelled(label, f"{values} ({where})", width)]


def _listed(values: Mapping[str, float]) -> str:
    shown = [f"{name} {value:.4g}" for name, value in list(values.items())[:MAX_SHOWN]]
    more = f", … and {len(values) - MAX_SHOWN} more" if len(values) > MAX_SHOWN else ""
    return ", ".join(shown) + more


def fractional_note(summary: DatasetSummary, results: Sequence[RolloutResult], width: int) -> list[str]:
    """A ``rewards`` line when the scored rewards lie in [0, 1] and some are fractional (mrcr: 0.94-0.99) and
    the pass rate at the threshold then says something else than the mean: what each number counts. []
    otherwise."""
    scores = [r.score for r in members(summary, results) if r.score is not None]
    if not scores or min(scores) < 0 or max(scores) > 1 or all(s in (0.0, 1.0) for s in scores):
        return []
    passing = sum(s >= summary.threshold for s in scores)
    text = (
        f"fractional, from {fmt.number(min(scores))} to {fmt.number(max(scores))}: the pass rate and pass@k count a "
        f"rollout as passed at reward >= {fmt.threshold(summary.threshold)} (the pass threshold; "
        f"{passing} of {len(scores)} reach it), while the mean reward averages the rewards themselves, which is "
        "what Gym's pass@1 reports (x100)"
    )
    return fmt.labelled("rewards", text, width)
