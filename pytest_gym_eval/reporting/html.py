"""The HTML report (``--gym-html``, ``python -m pytest_gym_eval html``): one self-contained page per session.

The page reads the summary model (:class:`~pytest_gym_eval.reporting.summary.Conclusion` and the rollouts'
:class:`~pytest_gym_eval.reporting.summary.RolloutResult`) like every other output, plus the full rollout
records (read from Gym's files through each rollout's ``record``, see :mod:`.transcripts`). Everything it
needs is inside the one file: the styles, the script (``assets/report.css``, ``assets/report.js``, inlined),
the data as JSON, hand-written SVG histograms. Opening it needs no network and no server.

What is drawn where: the summaries, gates, histograms, the comparison with a baseline and the replay flips
are HTML written here, so they show as soon as the file is parsed. The task x repeat grids (sorting,
filtering, pages of :data:`PAGE_SIZE` tasks) and the transcripts are drawn by the script, which keeps a page of
10,000 rollouts quick to open. The transcripts are one JSON value per line (line ``i`` is rollout ``i``'s, see
:func:`transcript_lines`); the script parses a line only when its rollout is opened.
"""

from __future__ import annotations

import dataclasses
import html
import itertools
import json
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_gym_eval.causes import redact
from pytest_gym_eval.files import write_text_atomic
from pytest_gym_eval.gates import GateMode, Verdict
from pytest_gym_eval.reporting import fmt
from pytest_gym_eval.reporting.baseline import report_task_means
from pytest_gym_eval.reporting.summary import (
    MAX_LISTED,
    BaselineComparison,
    Conclusion,
    DatasetSummary,
    RolloutResult,
    by_task,
    flips_count,
    groups,
    selection_note,
    shown_pass_at_k,
)
from pytest_gym_eval.reporting.transcripts import input_rows, read_records, transcript

ASSETS = Path(__file__).parent / "assets"
"""The page's stylesheet and script, inlined into every page."""
PAGE_SIZE = 100
"""Tasks per page of a grid (the script's own constant must match)."""
PALETTE_STEPS = 20
"""Colours of the reward scale: a reward maps to one of ``PALETTE_STEPS + 1`` classes ``c0`` … ``c20``."""
DISCRETE_VALUES = 12
"""Rewards with at most this many distinct values get one histogram bar per value; more get equal bins."""
HISTOGRAM_BINS = 20
RUN_FAILED = "Gym's run failed:"
"""How the note saying why Gym's run failed begins (the page's script looks for it)."""

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
# Red, amber, green: the reward scale's stops (ColorBrewer RdYlGn, Harrower & Brewer 2003).
_STOPS = ((0.0, (215, 48, 39)), (0.5, (254, 224, 139)), (1.0, (26, 152, 80)))


# --- Colours ----------------------------------------------------------------------------------------------


def colour(fraction: float) -> str:
    """The reward scale's colour at ``fraction`` (0 = lowest reward, red; 1 = highest, green) as ``#rrggbb``;
    ``fraction`` is clamped to [0, 1]. Linear interpolation between the stops of :data:`_STOPS`."""
    fraction = min(1.0, max(0.0, fraction))
    for (x0, c0), (x1, c1) in itertools.pairwise(_STOPS):
        if fraction <= x1:
            t = (fraction - x0) / (x1 - x0)
            return "#" + "".join(f"{round(a + (b - a) * t):02x}" for a, b in zip(c0, c1, strict=True))
    return "#" + "".join(f"{c:02x}" for c in _STOPS[-1][1])


def reward_range(rewards: Sequence[float]) -> tuple[float, float]:
    """The ends of the colour scale and histogram axis: [0, 1] when every reward lies there (the usual case),
    else [min(0, lowest), max(1, highest)] (rewards in the verifier's own units)."""
    if not rewards:
        return 0.0, 1.0
    return min(0.0, min(rewards)), max(1.0, max(rewards))


def palette_index(reward: float, low: float, high: float) -> int:
    """The colour class (0 … :data:`PALETTE_STEPS`) of ``reward`` on the scale [``low``, ``high``]."""
    span = high - low
    fraction = (reward - low) / span if span > 0 else 1.0
    return round(min(1.0, max(0.0, fraction)) * PALETTE_STEPS)


def palette_css() -> str:
    """CSS classes ``.c0`` … ``.c20``: background (grid cells) and fill (histogram bars), with a text colour
    that reads on the background."""
    rules = []
    for step in range(PALETTE_STEPS + 1):
        value = colour(step / PALETTE_STEPS)
        r, g, b = (int(value[i : i + 2], 16) for i in (1, 3, 5))
        ink = "#111" if 0.299 * r + 0.587 * g + 0.114 * b > 150 else "#fff"
        rules.append(f".c{step}{{background:{value};fill:{value};color:{ink}}}")
    return "\n".join(rules)


# --- Histogram --------------------------------------------------------------------------------------------


def histogram_bins(rewards: Sequence[float], low: float, high: float) -> list[tuple[float, float, int]]:
    """``(from, to, count)`` bars of the rewards' histogram.

    At most :data:`DISCRETE_VALUES` distinct rewards (binary 0/1, a few grades): one bar per value, ``from ==
    to``. More (judges, partial credit): :data:`HISTOGRAM_BINS` equal bins over [``low``, ``high``], each
    [from, to) but the last, which includes ``high``. Empty for no rewards.
    """
    if not rewards:
        return []
    distinct = sorted(set(rewards))
    if len(distinct) <= DISCRETE_VALUES:
        counts = {value: 0 for value in distinct}
        for reward in rewards:
            counts[reward] += 1
        return [(value, value, count) for value, count in counts.items()]
    width = (high - low) / HISTOGRAM_BINS
    counts_by_bin = [0] * HISTOGRAM_BINS
    for reward in rewards:
        position = (reward - low) * HISTOGRAM_BINS / (high - low)  # not / width: 0.95 / 0.05 is 18.999…
        counts_by_bin[min(HISTOGRAM_BINS - 1, max(0, int(position)))] += 1
    return [(low + i * width, low + (i + 1) * width, count) for i, count in enumerate(counts_by_bin)]


def histogram_svg(rewards: Sequence[float], threshold: float, low: float, high: float) -> str:
    """An SVG histogram of ``rewards`` (:func:`histogram_bins`), bars coloured by the reward scale, the pass
    threshold marked by a dashed line; '' when there are no rewards."""
    bins = histogram_bins(rewards, low, high)
    if not bins:
        return ""
    width, height, left, right, top, bottom = 380, 170, 34, 12, 14, 34
    plot_w, plot_h = width - left - right, height - top - bottom
    most = max(count for _, _, count in bins)
    slot = plot_w / len(bins)
    gap = min(6.0, slot * 0.15) if bins[0][0] == bins[0][1] else 1.0
    discrete = bins[0][0] == bins[0][1]
    parts = [
        f'<svg class="histogram" viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" '
        f'aria-label="Histogram of {len(rewards)} rewards" data-total="{len(rewards)}">',
        f'<line class="axis" x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" y2="{top + plot_h}"/>',
        f'<text class="tick" x="{left - 4}" y="{top + 4}" text-anchor="end">{most}</text>',
        f'<text class="tick" x="{left - 4}" y="{top + plot_h}" text-anchor="end">0</text>',
        f'<line class="grid" x1="{left}" y1="{top}" x2="{left + plot_w}" y2="{top}"/>',
    ]
    for index, (start, stop, count) in enumerate(bins):
        bar_h = plot_h * count / most if most else 0.0
        x = left + index * slot + gap / 2
        middle = start if discrete else (start + stop) / 2
        label = _short(start) if discrete else f"{_short(start)} to {_short(stop)}"
        parts.append(
            f'<rect class="bar c{palette_index(middle, low, high)}" x="{x:.1f}" y="{top + plot_h - bar_h:.1f}" '
            f'width="{slot - gap:.1f}" height="{bar_h:.1f}" data-from="{start:g}" data-to="{stop:g}" '
            f'data-count="{count}"><title>{html.escape(label)}: {fmt.plural(count, "rollout")}</title></rect>'
        )
        if discrete:
            parts.append(
                f'<text class="tick" x="{x + (slot - gap) / 2:.1f}" y="{top + plot_h + 14}" '
                f'text-anchor="middle">{html.escape(_short(start))}</text>'
            )
    if not discrete:
        for value, anchor in ((low, "start"), ((low + high) / 2, "middle"), (high, "end")):
            x = left + plot_w * (value - low) / (high - low)
            parts.append(
                f'<text class="tick" x="{x:.1f}" y="{top + plot_h + 14}" text-anchor="{anchor}">{_short(value)}</text>'
            )
    marker = _threshold_x(bins, threshold, low, high, left, plot_w, slot, discrete)
    if marker is not None:
        parts.append(
            f'<line class="threshold" x1="{marker:.1f}" y1="{top - 4}" x2="{marker:.1f}" y2="{top + plot_h}">'
            f"<title>pass threshold {fmt.threshold(threshold)}</title></line>"
        )
    parts.append(
        f'<text class="axis-label" x="{left + plot_w / 2:.1f}" y="{height - 4}" text-anchor="middle">reward'
        f"{' (dashed: pass threshold ' + fmt.threshold(threshold) + ')' if marker is not None else ''}</text>"
    )
    parts.append("</svg>")
    return "".join(parts)


def _threshold_x(
    bins: Sequence[tuple[float, float, int]],
    threshold: float,
    low: float,
    high: float,
    left: float,
    plot_w: float,
    slot: float,
    discrete: bool,
) -> float | None:
    """Where the pass threshold line goes: on the axis for equal bins; between the last bar below it and the
    first at or above it for one bar per value (None when all bars are on one side)."""
    if not discrete:
        return left + plot_w * (threshold - low) / (high - low) if low < threshold <= high else None
    below = sum(1 for start, _, _ in bins if start < threshold)
    return left + below * slot if 0 < below < len(bins) else None


def _short(value: float) -> str:
    """A reward for an axis or a cell: ``1``, ``0.5``, ``0.25``, ``37.5``; 3 significant digits past 1000."""
    if not math.isfinite(value):
        return "n/a"
    return f"{value:.3g}" if abs(value) >= 1000 else f"{round(value, 2):g}"


# --- The data the script reads ----------------------------------------------------------------------------


def page_data(
    conclusion: Conclusion,
    results: Sequence[RolloutResult],
    *,
    baseline: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """What the page's script draws its grids from, as JSON data.

    ``rollouts``: one array per result, ``[nodeid, group, status, reward, failure_class, record, colour,
    extras, recorded]``: ``group`` indexes ``groups``; ``colour`` the palette class (-1 for an error);
    ``extras`` the result's fields beyond the base ones that hold a value (token counts, latency, a cause line:
    whatever :class:`RolloutResult` carries) or null; ``recorded`` the rewards a replayed recording holds when
    the rollout's reward flipped against them, else null.

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
    ]


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


# --- The page ---------------------------------------------------------------------------------------------


def render_page(
    conclusion: Conclusion,
    results: Sequence[RolloutResult],
    meta: Mapping[str, object],
    *,
    baseline: Mapping[str, Any] | None = None,
    transcripts: Sequence[dict[str, Any] | None] | None = None,
    notes: Sequence[str] = (),
) -> str:
    """The whole page as HTML text.

    ``meta`` holds the run's facts (as in the JSON report's ``meta``); ``baseline`` is the report compared
    with (for the per-task baseline means; ``conclusion.comparisons`` holds the comparison itself);
    ``transcripts`` one entry per result (None: not available; default: none at all); ``notes`` sentences
    shown at the top (e.g. records that could not be read).
    """
    data = page_data(conclusion, results, baseline=baseline)
    index_of = {result.nodeid: index for index, result in enumerate(results)}
    grouped = groups(results)
    sections = []
    for number, summary in enumerate(conclusion.summaries):
        members = grouped.get((summary.dataset, summary.agent), [])
        comparison = next(
            (c for c in conclusion.comparisons if (c.dataset, c.agent) == (summary.dataset, summary.agent)), None
        )
        sections.append(
            _section(number, summary, members, comparison, conclusion, data["groups"][number], meta, index_of)
        )
    names = ", ".join(summary.title for summary in conclusion.summaries) or "no dataset"
    created = str(meta.get("created") or "")
    title = f"Gym eval report: {names}" + (f" ({created})" if created else "")
    css = (ASSETS / "report.css").read_text(encoding="utf-8") + "\n" + palette_css()
    script = (ASSETS / "report.js").read_text(encoding="utf-8")
    every = list(transcripts) if transcripts is not None else [None] * len(results)
    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en">',
            "<head>",
            '<meta charset="utf-8">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            # Nothing may be loaded from elsewhere: the page is whole as it is.
            '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
            "style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">",
            f"<title>{html.escape(title)}</title>",
            f"<style>\n{css}\n</style>",
            "</head>",
            "<body>",
            _header(conclusion, results, meta, notes),
            "<main>",
            *sections,
            "</main>",
            _drawer(),
            f'<script type="application/json" id="gym-data">{_script_json(data)}</script>',
            f"<script>\n{script}\n</script>",
            # One line per rollout, each parsed by the script only when its rollout is opened.
            f'<script type="application/json" id="gym-transcripts">{transcript_lines(every)}</script>',
            "</body>",
            "</html>",
            "",
        ]
    )


def transcript_lines(transcripts: Sequence[dict[str, Any] | None]) -> str:
    """The ``gym-transcripts`` element's text: one compact JSON value per line, line ``i`` the transcript of
    rollout ``i`` (``null`` when it has none). JSON never writes a raw newline, so a line is one value; opening
    the first rollout of a 10,000-rollout page then parses one transcript, not 7 MB of them."""
    return "\n".join(_script_json(entry) for entry in transcripts)


def _script_json(value: object) -> str:
    """``value`` as JSON that can sit inside a ``<script>`` element: ``<`` is written ``\\u003c``, so no
    ``</script>`` or ``<!--`` in a string ends or confuses the element. Non-finite numbers are not allowed."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return text.replace("<", "\\u003c")


_META_SHOWN = (
    ("model", "model"),
    ("model_type", "model type"),
    ("model_url", "model URL"),
    ("gym_version", "Gym"),
    ("gym_checkout", "Gym checkout"),
    ("head_server", "head server"),
    ("gate_mode", "gates judged on"),
    ("run_dir", "run directory"),
    ("created", "created"),
)


def _header(
    conclusion: Conclusion, results: Sequence[RolloutResult], meta: Mapping[str, object], notes: Sequence[str]
) -> str:
    status = conclusion.exit_status
    state = "none" if status == -1 else "pass" if status == 0 else "fail"
    verdict = {-1: "no gates", 0: "PASS", 1: "FAIL"}.get(status, f"exit status {status}")
    errors = sum(1 for r in results if r.status == "error")
    counts = (
        f"{fmt.plural(len(conclusion.summaries), 'dataset')}, {fmt.plural(len(results), 'rollout')}, "
        f"{fmt.plural(errors, 'error')}"
    )
    facts = "".join(
        f"<dt>{html.escape(label)}</dt><dd>{html.escape(str(meta[key]))}</dd>"
        for key, label in _META_SHOWN
        if meta.get(key) not in (None, "")
    )
    toc = "".join(
        f'<li><a href="#group-{number}">{html.escape(summary.title)}</a> '
        f"{_badge(summary.verdict.value if summary.verdict else None)}</li>"
        for number, summary in enumerate(conclusion.summaries)
    )
    reason = html.escape(conclusion.reason) if conclusion.reason else "No CI gate was set: pytest's exit status holds."
    notes_html = "".join(
        f'<p class="note{" run-failed" if note.startswith(RUN_FAILED) else ""}">{html.escape(note)}</p>'
        for note in notes
    )
    return (
        '<header class="page-header">'
        f'<div class="title-row"><h1>Gym eval report</h1><span class="session-verdict {state}" '
        f'data-exit-status="{status}">{verdict}</span></div>'
        f'<p class="reason">{reason}</p>'
        f'<p class="counts">{html.escape(counts)}</p>'
        f'<dl class="meta">{facts}</dl>'
        f'<nav><ul class="toc">{toc}</ul></nav>{notes_html}'
        "</header>"
    )


def _badge(verdict: str | None) -> str:
    if verdict is None:
        return ""
    return f'<span class="badge {verdict.lower()}">{html.escape(verdict)}</span>'


def _interval_attrs(estimate: float, low: float, high: float, n: int) -> str:
    def number(value: float) -> str:
        return repr(value) if math.isfinite(value) else ""

    return f'data-estimate="{number(estimate)}" data-low="{number(low)}" data-high="{number(high)}" data-n="{n}"'


def _metric(name: str, label: str, value: str, note: str, attrs: str = "") -> str:
    return (
        f'<tr class="metric" data-metric="{name}" {attrs}><th scope="row">{html.escape(label)}</th>'
        f'<td class="value">{html.escape(value)}</td><td class="explain">{html.escape(note)}</td></tr>'
    )


def _summary_table(summary: DatasetSummary) -> str:
    confidence = fmt.percent(summary.confidence)
    rows = [
        _metric(
            "tasks",
            "tasks",
            str(summary.tasks),
            f"{fmt.plural(summary.rollouts, 'rollout')}: {summary.scored} scored, "
            f"{fmt.plural(summary.errors, 'error')}",
            f'data-tasks="{summary.tasks}" data-rollouts="{summary.rollouts}" data-scored="{summary.scored}" '
            f'data-errors="{summary.errors}"',
        ),
        _metric(
            "mean_reward",
            "mean reward",
            fmt.interval(summary.mean_reward),
            f"{confidence} CI over {fmt.plural(summary.mean_reward.n, 'task')} (Student t, clustered by task)",
            _interval_attrs(*_fields(summary.mean_reward)),
        ),
        _metric(
            "pass_rate",
            "pass rate",
            fmt.interval(summary.pass_rate),
            f"Wilson {confidence} CI, {fmt.plural(summary.pass_rate.n, 'rollout')}, "
            f"threshold {fmt.threshold(summary.threshold)}",
            _interval_attrs(*_fields(summary.pass_rate)),
        ),
    ]
    for k, interval in shown_pass_at_k(summary):
        note = "unbiased estimator (Chen et al. 2021)"
        if interval.n != summary.mean_reward.n:
            note += f", {fmt.plural(interval.n, 'task')} with {k}+ scored"
        rows.append(
            _metric(f"pass_at_{k}", f"pass@{k}", fmt.interval(interval), note, _interval_attrs(*_fields(interval)))
        )
    flaky = summary.flaky_tasks
    rows.append(
        _metric(
            "flaky",
            "flaky tasks",
            f"{len(flaky)} of {summary.tasks}",
            "repeats that disagree: " + ", ".join(flaky[:MAX_LISTED]) + (" …" if len(flaky) > MAX_LISTED else "")
            if flaky
            else "no task's repeats disagree",
            f'data-count="{len(flaky)}"',
        )
    )
    if summary.errors:
        ranked = sorted(summary.error_classes.items(), key=lambda item: -item[1])
        rows.append(
            _metric("errors", "errors", str(summary.errors), ", ".join(f"{name} {count}" for name, count in ranked))
        )
    if summary.wall_time > 0:
        rows.append(_metric("wall_time", "wall time", fmt.duration(summary.wall_time), "first start to last stop"))
    return f'<table class="summary">{"".join(rows)}</table>'


def _fields(interval: Any) -> tuple[float, float, float, int]:
    return interval.estimate, interval.low, interval.high, interval.n


def _gates_table(summary: DatasetSummary) -> str:
    if not summary.gates:
        return '<p class="muted gates-none">No CI gate on this dataset.</p>'
    mode = summary.gates[0].mode
    judged = "the estimate" if mode is GateMode.POINT else f"the {fmt.percent(summary.confidence)} interval"
    rows = "".join(
        f'<tr class="gate" data-verdict="{result.verdict.value}" data-label="{html.escape(result.gate.label)}">'
        f"<td>{html.escape(result.gate.label)}</td><td>{html.escape(fmt.interval(result.interval))}</td>"
        f"<td>{_badge(result.verdict.value)}</td></tr>"
        for result in summary.gates
    )
    verdict = summary.verdict.value if summary.verdict is not None else Verdict.PASS.value
    return (
        f'<h3>Gates <span class="muted">judged on {judged}</span> {_badge(verdict)}</h3>'
        f'<table class="gates"><thead><tr><th>gate</th><th>value [{fmt.percent(summary.confidence)} CI]</th>'
        f"<th>verdict</th></tr></thead><tbody>{rows}</tbody></table>"
        + (
            f'<p class="muted selection">{html.escape(note.strip()[1:-1])}</p>'
            if (note := selection_note(summary))
            else ""
        )
    )


def _baseline_block(comparison: BaselineComparison | None) -> str:
    if comparison is None:
        return ""
    paired = comparison.comparison
    if comparison.shared_tasks == 0:
        return '<div class="baseline"><h3>Against the baseline</h3><p>No task was scored in both runs.</p></div>'
    direction = "neg" if paired.high < 0 else "pos" if paired.low > 0 else ""
    dropped = "".join(
        f'<li><span class="task-id">{html.escape(task)}</span> {fmt.number(before)} → {fmt.number(after)}</li>'
        for task, before, after in comparison.dropped[:MAX_LISTED]
    )
    more = f"<li>… and {len(comparison.dropped) - MAX_LISTED} more</li>" if len(comparison.dropped) > MAX_LISTED else ""
    return (
        '<div class="baseline">'
        "<h3>Against the baseline</h3>"
        f'<p class="change {direction}" {_interval_attrs(paired.mean_difference, paired.low, paired.high, paired.n)}>'
        f"mean reward change <strong>{html.escape(fmt.change(paired))}</strong> "
        f"({html.escape(fmt.p_value(paired.p_value))}, paired t over {fmt.plural(comparison.shared_tasks, 'task')}, "
        f"{fmt.percent(comparison.confidence)} CI)</p>"
        f'<p class="fell" data-count="{len(comparison.dropped)}">{len(comparison.dropped)} of '
        f"{fmt.plural(comparison.shared_tasks, 'task')} fell"
        + (" (largest fall first):</p>" if comparison.dropped else ".</p>")
        + (f'<ul class="dropped">{dropped}{more}</ul>' if comparison.dropped else "")
        + "</div>"
    )


def _flips_block(conclusion: Conclusion, members: Sequence[RolloutResult], index_of: Mapping[str, int]) -> str:
    if conclusion.flips is None:
        return ""
    mine = {result.nodeid for result in members}
    flips = [flip for flip in conclusion.flips if flip.nodeid in mine]
    items = "".join(
        f'<li><button type="button" class="open-rollout" data-i="{index_of[flip.nodeid]}">'
        f"{html.escape(flip.nodeid)}</button> reward {fmt.number(flip.reward)}, recorded "
        f"{html.escape(', '.join(str(r) for r in flip.recorded))}</li>"
        for flip in flips
    )
    return (
        f'<div class="flips" data-count="{len(flips)}"><h3>Verifier flips against the recording: '
        f"{html.escape(flips_count(flips, members))}</h3>" + (f"<ul>{items}</ul>" if flips else "") + "</div>"
    )


def _section(
    number: int,
    summary: DatasetSummary,
    members: Sequence[RolloutResult],
    comparison: BaselineComparison | None,
    conclusion: Conclusion,
    group: Mapping[str, Any],
    meta: Mapping[str, object],
    index_of: Mapping[str, int],
) -> str:
    scores = [r.score for r in members if r.score is not None]
    low, high = reward_range(scores)
    histogram = histogram_svg(scores, summary.threshold, low, high) or '<p class="muted">No scored rollout.</p>'
    digest = meta.get(f"dataset_sha256.{summary.dataset}")
    digest_html = ""
    if digest:
        text = html.escape(str(digest))
        digest_html = f' <span class="muted digest" title="sha256 {text}">sha256 {text[:12]}…</span>'
    verdict = summary.verdict.value if summary.verdict is not None else None
    counts = {name: sum(1 for task in group["tasks"] if flag == 0 or task["f"] & flag) for name, _, flag in FILTERS}
    shown = [
        (name, label, flag)
        for name, label, flag in FILTERS
        if (name != "flipped" or group["replay"]) and (name != "dropped" or group["baseline"])
    ]
    filters = "".join(
        f'<button type="button" data-filter="{name}" aria-pressed="{"true" if name == "all" else "false"}">'
        f'{label} <span class="count">{counts[name]}</span></button>'
        for name, label, _ in shown
    )
    sorts = [("order", "dataset order"), ("low", "lowest mean first"), ("high", "highest mean first")]
    if group["baseline"]:
        sorts.insert(0, ("drop", "largest drop first"))
    sorts.append(("id", "task id"))
    options = "".join(f'<option value="{value}">{label}</option>' for value, label in sorts)
    return (
        f'<section class="gym-group" id="group-{number}" data-group="{number}" '
        f'data-dataset="{html.escape(summary.dataset)}" data-agent="{html.escape(summary.agent or "")}">'
        f"<h2>{html.escape(summary.title)} {_badge(verdict)}{digest_html}</h2>"
        '<div class="overview">'
        f'<div class="card summary-card">{_summary_table(summary)}</div>'
        f'<div class="card"><h3>Rewards</h3>{histogram}</div>'
        f'<div class="card">{_gates_table(summary)}{_baseline_block(comparison)}'
        f"{_flips_block(conclusion, members, index_of)}</div>"
        "</div>"
        '<div class="grid-area">'
        f'<h3>Tasks x repeats <span class="muted">colour: reward ({_short(low)} red … {_short(high)} green); '
        "! error; empty: not run</span></h3>"
        '<div class="toolbar">'
        f'<div class="filters" role="group" aria-label="Show tasks">{filters}</div>'
        f'<label>sort <select class="sort">{options}</select></label>'
        '<label>task <input type="search" class="search" placeholder="id contains…"></label>'
        "</div>"
        '<div class="grid-body" aria-live="polite"></div>'
        '<div class="pager"><button type="button" class="prev">&lsaquo; previous</button>'
        '<span class="range"></span><button type="button" class="next">next &rsaquo;</button></div>'
        "</div>"
        "</section>"
    )


def _drawer() -> str:
    return (
        '<aside id="drawer" hidden aria-label="Rollout transcript">'
        '<div class="drawer-head"><h2 class="drawer-title"></h2>'
        '<button type="button" class="close" aria-label="Close">&times;</button></div>'
        '<div class="drawer-body"></div>'
        "</aside>"
    )


def run_failure(meta: Mapping[str, object]) -> str | None:
    """Why Gym's run failed, when it did: the ``failed`` state the run's owner left in ``meta["run_dir"]``
    (Gym would not start, or died), e.g. the root cause of every rollout erroring "missing"; else None."""
    from pytest_gym_eval.rollouts import RunState
    from pytest_gym_eval.rundir import RunPaths

    run_dir = meta.get("run_dir")
    if not isinstance(run_dir, str) or not run_dir:
        return None
    try:
        state = RunState.read(RunPaths(Path(run_dir)).state)
    except (OSError, ValueError, TypeError):
        return None
    if state is None or state.phase != "failed":
        return None
    return f"{RUN_FAILED} {state.message}" + (f" (log: {state.log})" if state.log else "")


# --- Writing it -------------------------------------------------------------------------------------------


def api_key_of(meta: Mapping[str, object]) -> tuple[str, ...]:
    """The API key to keep off the page: the value, in this process's environment, of the variable the session
    took it from (``meta["api_key_env"]``, a name); empty when unset."""
    name = meta.get("api_key_env")
    value = os.environ.get(name) if isinstance(name, str) and name else None
    return (value,) if value else ()


def redacted(value: Any, secrets: Sequence[str]) -> Any:
    """``value`` (JSON-like: dicts, lists, strings, numbers) with every string passed through
    :func:`~pytest_gym_eval.causes.redact`: Gym's records hold what endpoints answered, and an endpoint may echo
    the request's ``Authorization`` header in an error body."""
    if isinstance(value, str):
        return redact(value, secrets)
    if isinstance(value, dict):
        return {key: redacted(item, secrets) for key, item in value.items()}
    if isinstance(value, list):
        return [redacted(item, secrets) for item in value]
    return value


def write_page(
    path: str | os.PathLike[str],
    conclusion: Conclusion,
    results: Sequence[RolloutResult],
    meta: Mapping[str, object],
    *,
    baseline: Mapping[str, Any] | None = None,
) -> list[str]:
    """Read every result's record and write the page to ``path`` (atomically, parents created).

    Returns the problems met reading the records (each also shown on the page); a rollout whose record could
    not be read has no transcript but keeps its place in the grid. API keys are redacted from the transcripts
    and notes (:func:`redacted`, with :func:`api_key_of`). Raises OSError when the page cannot be written.
    """
    transcripts, problems = transcripts_of(results)
    notes = [f"Transcripts missing: {problem}" for problem in problems]
    failed = run_failure(meta)
    if failed:
        notes.insert(0, failed)
    secrets = api_key_of(meta)
    transcripts, notes = redacted(transcripts, secrets), redacted(notes, secrets)
    text = render_page(conclusion, results, meta, baseline=baseline, transcripts=transcripts, notes=notes)
    write_text_atomic(path, text, errors="backslashreplace")
    return problems
