"""The HTML page's history section (``--gym-history``): per dataset, the mean reward's trend with its intervals and
the drift alarm, and each task's outcomes over its last runs (a sparkline) with its label and evidence.

Drawn from the JSON report's ``history`` block (:meth:`pytest_gym_eval.reporting.run_history.Remembered.report_block`),
so ``python -m pytest_gym_eval html REPORT.json`` draws it as the session did. Plain HTML and inline SVG: it reads
without the page's script. What users see: docs/history.md.
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import Any

from pytest_gym_eval.reporting import fmt
from pytest_gym_eval.reporting.charts import sparkline_svg, trend_svg

LABEL_ORDER = ("regressed", "broken", "flaky", "fixed", "stable")
"""The tasks' order in a dataset's table: what needs a look first."""
MAX_STABLE_SHOWN = 500
"""Stable tasks listed per dataset (folded away); past this many the rest are counted, not listed."""


def history_section(block: Mapping[str, Any] | None) -> str:
    """The page's ``<section id="history">`` for the JSON report's ``history`` block; '' without a block or
    without a dataset in it (a history that could not be written says so in the header's lines)."""
    datasets = (block or {}).get("datasets") or {}
    if not isinstance(datasets, Mapping) or not datasets:
        return ""
    assert block is not None
    run_id = block.get("run_id")
    head = (
        f"run {run_id} of {html.escape(str(block.get('target') or ''))}, judged by rule "
        f"{html.escape(str(block.get('rule') or ''))}"
    )
    cards = "".join(_dataset_card(name, data) for name, data in datasets.items() if isinstance(data, Mapping))
    return (
        '<section class="history" id="history"><h2>History across runs '
        f'<span class="muted">{head}</span></h2>{cards}</section>'
    )


def _dataset_card(name: str, data: Mapping[str, Any]) -> str:
    drift = data.get("drift") or {}
    alarm = bool(drift.get("alarm"))
    points = [
        (int(p["run"]), p.get("mean"), p.get("low"), p.get("high"), p.get("cusum") is None)
        for p in drift.get("runs") or []
    ]
    plot = trend_svg(points, drift.get("alarm_run") if alarm else None) or '<p class="muted">No scored run.</p>'
    badge = (
        '<span class="badge fail drift-badge">DRIFT</span>'
        if alarm
        else '<span class="badge pass drift-badge">no drift</span>'
    )
    tasks: Mapping[str, Any] = data.get("tasks") or {}
    counts = ", ".join(
        f"{sum(1 for t in tasks.values() if t.get('label') == label)} {label}"
        for label in LABEL_ORDER
        if any(t.get("label") == label for t in tasks.values())
    )
    ordered = sorted(tasks.items(), key=lambda item: LABEL_ORDER.index(item[1].get("label", "stable")))
    watched = [(task_id, task) for task_id, task in ordered if task.get("label") != "stable"]
    stable = [(task_id, task) for task_id, task in ordered if task.get("label") == "stable"]
    table = _task_table(watched) if watched else '<p class="muted">Every task kept its outcome.</p>'
    if stable:
        more = len(stable) - MAX_STABLE_SHOWN
        table += (
            f'<details class="stable-tasks"><summary>{fmt.plural(len(stable), "stable task")}</summary>'
            f"{_task_table(stable[:MAX_STABLE_SHOWN])}"
            + (
                f'<p class="muted">… and {more} more: python -m pytest_gym_eval history TARGET task ID</p>'
                if more > 0
                else ""
            )
            + "</details>"
        )
    return (
        f'<div class="card history-dataset" data-dataset="{html.escape(name)}" data-drift="{str(alarm).lower()}">'
        f'<h3>{html.escape(name)} {badge} <span class="muted">{fmt.plural(int(data.get("runs") or 0), "run")}'
        f" with this dataset file and model: {html.escape(counts or 'no scored task')}</span></h3>"
        f'<div class="history-body"><div class="trend-plot">{plot}'
        f'<p class="drift-evidence">{html.escape(str(drift.get("evidence") or ""))}</p></div>'
        f'<div class="history-table">{table}</div></div></div>'
    )


def _task_table(tasks: list[tuple[str, Mapping[str, Any]]]) -> str:
    rows = "".join(
        f'<tr class="history-task" data-task="{html.escape(task_id)}" '
        f'data-label="{html.escape(str(task.get("label")))}">'
        f'<td class="task-id">{html.escape(task_id)}</td>'
        f'<td><span class="label label-{html.escape(str(task.get("label")).replace(" ", "-"))}">'
        f"{html.escape(str(task.get('label')))}</span></td>"
        f"<td>{sparkline_svg(str(task.get('sparkline') or ''), list(task.get('runs') or []))}</td>"
        f"<td>{_rate(task)}</td>"
        f'<td class="evidence">{html.escape(str(task.get("evidence") or ""))}</td></tr>'
        for task_id, task in tasks
    )
    return (
        '<table class="history-tasks"><thead><tr><th>task</th><th>label</th><th>last runs (oldest first)</th>'
        f"<th>pass rate [95% CI]</th><th>evidence</th></tr></thead><tbody>{rows}</tbody></table>"
    )


def _rate(task: Mapping[str, Any]) -> str:
    def number(value: object) -> str:
        return f"{value:.2f}" if isinstance(value, int | float) else "n/a"

    return html.escape(
        f"{number(task.get('pass_rate'))} [{number(task.get('pass_rate_low'))}, {number(task.get('pass_rate_high'))}]"
    )
