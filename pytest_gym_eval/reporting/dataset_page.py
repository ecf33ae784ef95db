"""The HTML page's section of one dataset (one per dataset and agent, :func:`dataset_section`): its summary table
(tasks, mean reward, pass rate, pass@k, custom metrics, flaky tasks, errors, wall time), the reward histogram, the
gates, the comparison with a baseline report, the replay's verifier flips, and the frame of the task x repeat grid
the page's script fills in (``assets/report.js``). :mod:`.html` puts the sections together into the page.
What users see: docs/reports.md.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_gym_eval.reporting import fmt
from pytest_gym_eval.reporting.charts import histogram_svg, reward_range, short
from pytest_gym_eval.reporting.conclusion import BaselineComparison, Conclusion, flips_count
from pytest_gym_eval.reporting.gym_metrics import gym_texts
from pytest_gym_eval.reporting.page_data import FILTERS
from pytest_gym_eval.reporting.summary import (
    MAX_LISTED,
    DatasetSummary,
    RolloutResult,
    TestOutcome,
    selection_note,
    shown_pass_at_k,
)
from pytest_gym_eval.stats.gates import GateMode, Verdict


def badge(verdict: str | None) -> str:
    """A verdict (PASS, FAIL, INCONCLUSIVE) as a coloured badge; "" for None."""
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
            f"{confidence} CI over {fmt.plural(summary.mean_reward.n, 'task')} (clustered by task)",
            _interval_attrs(*_fields(summary.mean_reward)),
        ),
        _metric(
            "pass_rate",
            "pass rate",
            fmt.interval(summary.pass_rate),
            f"Clopper-Pearson {confidence} CI, {fmt.plural(summary.pass_rate.n, 'rollout')}, "
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
    if summary.gym is not None:  # Gym's own figures (majority@k, the verifier's secondary scores)
        rows += [_metric(f"gym.{kind}", label, values, where) for kind, label, values, where in gym_texts(summary.gym)]
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
        f"<td>{badge(result.verdict.value)}</td></tr>"
        for result in summary.gates
    )
    verdict = summary.verdict.value if summary.verdict is not None else Verdict.PASS.value
    return (
        f'<h3>Gates <span class="muted">judged on {judged}</span> {badge(verdict)}</h3>'
        f'<table class="gates"><thead><tr><th>gate</th><th>value [{fmt.percent(summary.confidence)} CI]</th>'
        f"<th>verdict</th></tr></thead><tbody>{rows}</tbody></table>"
        + "".join(
            f'<p class="muted gate-note">{html.escape(result.gate.label)}: {html.escape(note)}</p>'
            for result in summary.gates
            if (note := fmt.judged_note(result.familywise, result.hint))
        )
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


MAX_TEST_ROWS = 500
"""Test functions a dataset's section lists (those that did not pass first); the JSON report's ``tests`` has all."""
OPEN_TESTS_UP_TO = 50
"""A dataset's test-function table is open when it lists at most this many tests (folded away past that)."""


def tests_block(tests: Sequence[TestOutcome], index_of: Mapping[str, int]) -> str:
    """The section's "Test functions" table: each test function over one of the dataset's rollouts, those that did
    not pass first, with the rollout it got (a button opening it, when the page has it), its outcome, its message
    and the custom metrics it recorded with their reasons; at most :data:`MAX_TEST_ROWS`. '' without tests."""
    if not tests:
        return ""
    ranked = sorted(tests, key=lambda test: test.outcome == "passed")  # stable: report order within each
    rows = "".join(_test_row(test, index_of) for test in ranked[:MAX_TEST_ROWS])
    left = len(ranked) - MAX_TEST_ROWS
    more = f'<p class="muted">… and {left} more: the JSON report lists them all (tests)</p>' if left > 0 else ""
    counts: dict[str, int] = {}
    for test in tests:
        counts[test.outcome] = counts.get(test.outcome, 0) + 1
    summary = ", ".join(f"{count} {outcome}" for outcome, count in counts.items())
    opened = " open" if len(ranked) <= OPEN_TESTS_UP_TO or counts.get("passed", 0) < len(ranked) else ""
    return (
        f'<details class="card tests" data-count="{len(tests)}"{opened}><summary><h3>Test functions '
        f'<span class="muted">{html.escape(fmt.plural(len(tests), "test"))} over its rollouts: '
        f"{html.escape(summary)}</span></h3></summary>"
        '<table class="tests"><thead><tr><th>test</th><th>rollout</th><th>outcome</th><th>message</th>'
        f"<th>custom metrics</th></tr></thead><tbody>{rows}</tbody></table>{more}</details>"
    )


def _test_row(test: TestOutcome, index_of: Mapping[str, int]) -> str:
    index = index_of.get(test.rollout)
    rollout = html.escape(test.rollout)
    opener = (
        f'<button type="button" class="open-rollout" data-i="{index}">{rollout}</button>'
        if index is not None
        else rollout
    )
    reasons = dict(test.reasons)
    metrics = "".join(
        f"<li>{html.escape(name)} {html.escape(fmt.number(value))}"
        + (f" — {html.escape(reasons[name])}" if name in reasons else "")
        + "</li>"
        for name, value in test.metrics
    )
    return (
        f'<tr class="test" data-outcome="{html.escape(test.outcome)}" data-rollout="{rollout}">'
        f'<td class="test-id">{html.escape(test.test)}</td><td>{opener}</td>'
        f"<td>{html.escape(test.outcome)}</td>"
        f'<td class="message">{html.escape(test.message)}</td>'
        + (f'<td><ul class="metrics">{metrics}</ul></td>' if metrics else "<td></td>")
        + "</tr>"
    )


def dataset_section(
    number: int,
    summary: DatasetSummary,
    members: Sequence[RolloutResult],
    comparison: BaselineComparison | None,
    conclusion: Conclusion,
    group: Mapping[str, Any],
    meta: Mapping[str, object],
    index_of: Mapping[str, int],
    tests: Sequence[TestOutcome] = (),
) -> str:
    """The ``<section>`` of dataset ``number`` (its ``summary``, its rollouts ``members``, the baseline
    ``comparison`` if any): the summary table, the histogram, the gates, the baseline and flips blocks, the test
    functions over its rollouts (``tests``, :func:`tests_block`), and the grid's frame, whose tasks the script draws
    from ``group`` (the dataset's entry of the page data's ``groups``).
    ``meta`` gives the dataset's digest (``dataset_sha256.<dataset>``); ``index_of`` maps a rollout's node id to its
    index in the page's rollouts (what a flip's button opens)."""
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
        f"<h2>{html.escape(summary.title)} {badge(verdict)}{digest_html}</h2>"
        '<div class="overview">'
        f'<div class="card summary-card">{_summary_table(summary)}</div>'
        f'<div class="card"><h3>Rewards</h3>{histogram}</div>'
        f'<div class="card">{_gates_table(summary)}{_baseline_block(comparison)}'
        f"{_flips_block(conclusion, members, index_of)}</div>"
        "</div>"
        f"{tests_block(tests, index_of)}"
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
