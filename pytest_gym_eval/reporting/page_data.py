"""The data the HTML report's script reads: one row per task (its flags, rewards and rollouts) and the
rollouts' transcripts, as JSON-ready values."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_gym_eval.reporting.baseline import report_task_means
from pytest_gym_eval.reporting.charts import palette_index, reward_range
from pytest_gym_eval.reporting.conclusion import Conclusion
from pytest_gym_eval.reporting.summary import RolloutResult, by_task, groups
from pytest_gym_eval.reporting.transcripts import input_rows, read_records, transcript

PAGE_SIZE = 100
"""Tasks per page of a grid (the script's own constant must match)."""
# Flags of a task in the grid data (the script reads the same bits).
FAILED, ERRORED, FLAKY, FLIPPED, DROPPED = 1, 2, 4, 8, 16
FILTERS = (
    ("all", "All", 0),
    ("failed", "Failed", FAILED),
    ("errored", "Errored", ERRORED),
    ("flaky", "Flaky", FLAKY),
    ("flipped", "Flipped", FLIPPED),
    ("dropped", "Dropped", DROPPED),
)
"""The grid's filters: (name, label, flag); a task shows when it has the flag (``all``: every task)."""

_BASE_FIELDS = frozenset(
    ("nodeid", "dataset", "task_id", "repeat", "agent", "status", "reward", "failure_class", "record", "start", "stop")
)


# --- The data the script reads ----------------------------------------------------------------------------


def page_data(
    conclusion: Conclusion,
    results: Sequence[RolloutResult],
    *,
    baseline: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """What the page's script draws its grids from, as JSON data.

    ``rollouts``: one array per result, ``[nodeid, group, status, reward, failure_class, record, colour,
    extras, recorded, metrics]``: ``group`` indexes ``groups``; ``colour`` the palette class (-1 for an error);
    ``extras`` the result's fields beyond the base ones that hold a value (token counts, latency, a cause line:
    whatever :class:`RolloutResult` carries) or null; ``recorded`` the rewards a replayed recording holds when
    the rollout's reward flipped against them, else null; ``metrics`` the custom metrics test functions recorded
    for the rollout, ``[[name, value, reason or null], ...]`` sorted by name, or null when none.

    ``groups``: per summary (dataset, or dataset and agent), ``title``, ``threshold``, ``repeats`` (columns)
    and ``tasks``, each ``{"id", "c": [rollout index or -1 per repeat], "m": mean scored reward or null,
    "b": the baseline's mean or null, "f": flags}`` (:data:`FAILED` … :data:`DROPPED`); ``baseline`` and
    ``replay`` say whether those columns and filters apply.
    """
    flipped = {flip.nodeid: [_plain(value) for value in flip.recorded] for flip in conclusion.flips or ()}
    before = report_task_means(baseline) if baseline is not None else {}
    comparisons = {(c.dataset, c.agent): c for c in conclusion.comparisons}
    index_of = {id(result): index for index, result in enumerate(results)}
    rows: list[list[Any]] = [[] for _ in results]
    page_groups = []
    grouped = groups(results)
    for number, summary in enumerate(conclusion.summaries):
        members = grouped.get((summary.dataset, summary.agent), [])
        low, high = reward_range([r.score for r in members if r.score is not None])
        comparison = comparisons.get((summary.dataset, summary.agent))
        dropped = {task for task, _, _ in comparison.dropped} if comparison is not None else set()
        flaky = set(summary.flaky_tasks)
        tasks = by_task(members)
        repeats = max((r.repeat for r in members), default=-1) + 1
        task_rows = []
        for task, rollouts in tasks.items():
            cells = [-1] * repeats
            flags = (FLAKY if task in flaky else 0) | (DROPPED if task in dropped else 0)
            scored = []
            for result in rollouts:
                index = index_of[id(result)]
                cells[result.repeat] = index
                flags |= FAILED if result.status == "failed" else ERRORED if result.status == "error" else 0
                flags |= FLIPPED if result.nodeid in flipped else 0
                if result.score is not None:
                    scored.append(result.score)
                rows[index] = _rollout_row(result, number, low, high, flipped.get(result.nodeid))
            task_rows.append(
                {
                    "id": task,
                    "c": cells,
                    "m": math.fsum(scored) / len(scored) if scored else None,
                    "b": before.get((summary.dataset, task)),
                    "f": flags,
                }
            )
        page_groups.append(
            {
                "title": summary.title,
                "threshold": summary.threshold,
                "repeats": repeats,
                "baseline": baseline is not None,
                "replay": conclusion.flips is not None,
                "tasks": task_rows,
            }
        )
    return {"page_size": PAGE_SIZE, "groups": page_groups, "rollouts": rows}


def _plain(value: object) -> object:
    """A recorded reward as JSON can hold it: numbers, strings, booleans and null as they are (NaN and
    infinities as text), anything else as text."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value if value is None or isinstance(value, (bool, int, float, str)) else str(value)


def _rollout_row(
    result: RolloutResult, group: int, low: float, high: float, recorded: list[object] | None
) -> list[Any]:
    score = result.score
    extras = {}
    for field in dataclasses.fields(result):
        value = getattr(result, field.name)
        if field.name in _BASE_FIELDS or not isinstance(value, (int, float, str)):
            continue
        if not isinstance(value, float) or math.isfinite(value):
            extras[field.name] = value
    reward = result.reward if result.reward is not None and math.isfinite(result.reward) else None
    return [
        result.nodeid,
        group,
        result.status,
        reward,
        result.failure_class,
        result.record,
        palette_index(score, low, high) if score is not None else -1,
        extras or None,
        recorded,
        _metrics_cell(result),
    ]


def _metrics_cell(result: RolloutResult) -> list[list[Any]] | None:
    """A rollout's custom metrics as the page's rollout view shows them: ``[name, value, reason or None]`` each,
    sorted by name (a reason given for no recorded value left out), or None when it has none."""
    reasons = dict(result.metric_reasons)
    return [[name, value, reasons.get(name)] for name, value in result.metrics] or None


def transcripts_of(results: Sequence[RolloutResult]) -> tuple[list[dict[str, Any] | None], list[str]]:
    """Each result's transcript (:func:`~.transcripts.transcript` of its record, with its input row when the
    record lacks the request; None without a record) and the problems met reading the records (see
    :func:`~.transcripts.read_records`)."""
    locations = [result.record for result in results]
    records, problems = read_records(locations)
    rows = input_rows(locations, records)
    return [
        None if record is None else transcript(record, row) for record, row in zip(records, rows, strict=True)
    ], problems
