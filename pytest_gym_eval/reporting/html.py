"""The HTML report (``--gym-html``, ``python -m pytest_gym_eval html``): one self-contained page per session.

The page reads the summary model (:class:`~pytest_gym_eval.reporting.conclusion.Conclusion` and the rollouts'
:class:`~pytest_gym_eval.reporting.summary.RolloutResult`) like every other output, plus the full rollout records (read
from Gym's files through each rollout's ``record``, see :mod:`.transcripts`). Everything it needs is inside the one
file: the styles, the script (``assets/report.css``, ``assets/report.js``, inlined), the data as JSON, hand-written SVG
histograms, with ``--gym-history`` the history's trend plots and sparklines (:mod:`.history_page`), and with two or
more ``--gym-policy`` the policies compared side by side (:mod:`.policies_page`). Opening it needs no network and no
server. :func:`render_page` (its docstring says what is drawn where) and
:func:`write_page`. What users see: docs/reports.md.
"""

from __future__ import annotations

import html
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
from pytest_gym_eval.reporting.charts import PALETTE_STEPS as PALETTE_STEPS
from pytest_gym_eval.reporting.charts import colour as colour
from pytest_gym_eval.reporting.charts import histogram_bins as histogram_bins
from pytest_gym_eval.reporting.charts import histogram_svg as histogram_svg
from pytest_gym_eval.reporting.charts import palette_css, short
from pytest_gym_eval.reporting.charts import palette_index as palette_index
from pytest_gym_eval.reporting.charts import reward_range as reward_range
from pytest_gym_eval.reporting.conclusion import BaselineComparison, Conclusion, flips_count
from pytest_gym_eval.reporting.history_page import history_section
from pytest_gym_eval.reporting.json_report import comparison_json
from pytest_gym_eval.reporting.page_data import DROPPED as DROPPED
from pytest_gym_eval.reporting.page_data import ERRORED as ERRORED
from pytest_gym_eval.reporting.page_data import FAILED as FAILED
from pytest_gym_eval.reporting.page_data import FILTERS
from pytest_gym_eval.reporting.page_data import FLAKY as FLAKY
from pytest_gym_eval.reporting.page_data import FLIPPED as FLIPPED
from pytest_gym_eval.reporting.page_data import PAGE_SIZE as PAGE_SIZE
from pytest_gym_eval.reporting.page_data import page_data as page_data
from pytest_gym_eval.reporting.page_data import transcripts_of as transcripts_of
from pytest_gym_eval.reporting.policies_page import policies_section
from pytest_gym_eval.reporting.summary import (
    MAX_LISTED,
    DatasetSummary,
    RolloutResult,
    groups,
    selection_note,
    shown_pass_at_k,
)

ASSETS = Path(__file__).parent / "assets"
"""The page's stylesheet and script, inlined into every page."""
RUN_FAILED = "Gym's run failed:"
"""How the note saying why Gym's run failed begins (the page's script looks for it)."""


# --- The page ---------------------------------------------------------------------------------------------


def render_page(
    conclusion: Conclusion,
    results: Sequence[RolloutResult],
    meta: Mapping[str, object],
    *,
    baseline: Mapping[str, Any] | None = None,
    transcripts: Sequence[dict[str, Any] | None] | None = None,
    notes: Sequence[str] = (),
    history: Mapping[str, Any] | None = None,
    comparisons: Sequence[Mapping[str, Any]] | None = None,
) -> str:
    """The whole page as HTML text.

    ``meta`` holds the run's facts (as in the JSON report's ``meta``); ``baseline`` is the report compared
    with (for the per-task baseline means; ``conclusion.comparisons`` holds the comparison itself);
    ``transcripts`` one entry per result (None: not available; default: none at all); ``notes`` sentences
    shown at the top (e.g. records that could not be read); ``history`` the JSON report's ``history`` block
    (``--gym-history``; None without), drawn after the datasets (:mod:`.history_page`); ``comparisons`` the JSON
    report's ``comparisons`` list (default: made from ``conclusion.policies``), drawn before the datasets when a
    session compared policies (:mod:`.policies_page`).

    What is drawn where: the summaries, gates, histograms, the comparison with a baseline and the replay flips
    are HTML written here, so they show as soon as the file is parsed. The task x repeat grids (sorting,
    filtering, pages of :data:`PAGE_SIZE` tasks) and the transcripts are drawn by the script, which keeps a page of
    10,000 rollouts quick to open. The transcripts are one JSON value per line (line ``i`` is rollout ``i``'s, see
    :func:`transcript_lines`); the script parses a line only when its rollout is opened.
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
    if comparisons is None:
        comparisons = [comparison_json(item) for item in conclusion.policies]
    policies = policies_section(comparisons, results)
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
            _header(
                conclusion,
                results,
                meta,
                notes,
                has_history=bool(history_section(history)),
                has_policies=bool(policies),
            ),
            "<main>",
            policies,
            *sections,
            history_section(history),
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
    conclusion: Conclusion,
    results: Sequence[RolloutResult],
    meta: Mapping[str, object],
    notes: Sequence[str],
    *,
    has_history: bool = False,
    has_policies: bool = False,
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
    toc = (
        ('<li><a href="#policies">Policies compared</a></li>' if has_policies else "")
        + "".join(
            f'<li><a href="#group-{number}">{html.escape(summary.title)}</a> '
            f"{_badge(summary.verdict.value if summary.verdict else None)}</li>"
            for number, summary in enumerate(conclusion.summaries)
        )
        + ('<li><a href="#history">History across runs</a></li>' if has_history else "")
    )
    reason = html.escape(conclusion.reason) if conclusion.reason else "No CI gate was set: pytest's exit status holds."
    notes_html = "".join(
        f'<p class="note{" run-failed" if note.startswith(RUN_FAILED) else ""}">{html.escape(note)}</p>'
        for note in notes
    )
    if conclusion.quarantined or conclusion.history:  # the quarantine and the history's stability and drift
        notes_html += (
            f'<pre class="history">{html.escape(chr(10).join((*conclusion.quarantined, *conclusion.history)))}</pre>'
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
    for name, interval in summary.metrics.items():  # custom metrics tests recorded (rollout.record_metric)
        rows.append(
            _metric(
                html.escape(f"metric.{name}", quote=True),
                f"metric {name}",
                fmt.interval(interval),
                f"custom metric: {confidence} CI over {fmt.plural(interval.n, 'task')} (Student t, clustered by task)",
                _interval_attrs(*_fields(interval)),
            )
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
        f'<h3>Tasks x repeats <span class="muted">colour: reward ({short(low)} red … {short(high)} green); '
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
    run_failed: str | None = None,
    history: Mapping[str, Any] | None = None,
    comparisons: Sequence[Mapping[str, Any]] | None = None,
) -> list[str]:
    """Read every result's record and write the page to ``path`` (atomically, parents created); ``run_failed``
    is why Gym's run failed, when it did (:func:`pytest_gym_eval.reporting.outputs.run_failure`), shown first;
    ``history`` the JSON report's ``history`` block and ``comparisons`` its ``comparisons`` list (:func:`render_page`).

    Returns the problems met reading the records (each also shown on the page); a rollout whose record could
    not be read has no transcript but keeps its place in the grid. API keys are redacted from the transcripts
    and notes (:func:`redacted`, with :func:`api_key_of`). Raises OSError when the page cannot be written.
    """
    transcripts, problems = transcripts_of(results)
    notes = [f"Transcripts missing: {problem}" for problem in problems]
    if run_failed:
        notes.insert(0, run_failed)
    secrets = api_key_of(meta)
    transcripts, notes = redacted(transcripts, secrets), redacted(notes, secrets)
    text = render_page(
        conclusion, results, meta, baseline=baseline, transcripts=transcripts, notes=notes, history=history,
        comparisons=comparisons,
    )  # fmt: skip
    write_text_atomic(path, text, errors="backslashreplace")
    return problems
