"""The Markdown summary (``--gym-markdown``, and GitHub's step summary): per dataset the key numbers, the gates,
the worst tasks, the comparison with a baseline and the replay flips, then where the other reports are.

GitHub-flavoured Markdown (tables), readable as plain text too, with no links: the reports it names are files
on the machine that ran the session (a CI job uploads them as artifacts), which a summary cannot link to.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from pytest_gym_eval.reporting import fmt
from pytest_gym_eval.reporting.conclusion import BaselineComparison, Conclusion, PolicyComparison, flips_count
from pytest_gym_eval.reporting.gym_metrics import gym_texts
from pytest_gym_eval.reporting.summary import (
    MAX_LISTED,
    NO_DATASET_ROLLOUT,
    DatasetSummary,
    RolloutResult,
    by_task,
    groups,
    selection_note,
    shown_pass_at_k,
)
from pytest_gym_eval.reporting.verdicts import GateVerdict
from pytest_gym_eval.stats.gates import Verdict

WORST_TASKS = 5
"""Tasks listed under "worst tasks" per dataset."""
MAX_REASONS = 10
"""Rollouts whose reasons are listed under "Why" per dataset."""
_MARK = {Verdict.PASS: "✅ PASS", Verdict.FAIL: "❌ FAIL", Verdict.INCONCLUSIVE: "⚠️ INCONCLUSIVE"}


def cell(text: str) -> str:
    """``text`` safe inside a Markdown table cell: ``|`` escaped, line breaks as spaces."""
    return " ".join(text.replace("\\", "\\\\").replace("|", "\\|").split())


def code(text: str) -> str:
    """``text`` as an inline code span (a longer backtick fence when it holds backticks), safe in a table."""
    fence = "`"
    while fence in text:
        fence += "`"
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{cell(text)}{pad}{fence}"


def render_markdown(
    conclusion: Conclusion,
    results: Sequence[RolloutResult],
    *,
    html_path: Path | None = None,
    json_path: Path | None = None,
) -> str:
    """The summary as Markdown text (ends with a newline).

    A heading with the session's verdict and reason, the quarantine and history lines, the conclusion's warnings
    (a quote each), then per summary (dataset, or dataset and agent): a table of tasks, rollouts, errors, mean
    reward and pass rate with their intervals, pass@k, flaky tasks and wall time; the gates with their verdicts;
    the :data:`WORST_TASKS` tasks with the lowest mean reward among those with a failed or errored rollout; the
    change against a baseline (with the tasks that fell) and the replay flips when there are any. Then, in a
    session comparing policies, :func:`policy_table` (for a PR comment), and :func:`other_gates` (a baseline's,
    the replay flips'). Last, where the HTML and JSON reports were
    written (``html_path``, ``json_path``; plain paths, no links).
    """
    status = conclusion.exit_status
    head = "no gates" if status == -1 else "✅ PASS" if status == 0 else "❌ FAIL"
    lines = [f"### Gym eval: {head}", ""]
    if conclusion.reason:
        lines += [conclusion.reason, ""]
    if conclusion.quarantined or conclusion.history:
        lines += ["```text", *conclusion.quarantined, *conclusion.history, "```", ""]
    if conclusion.warnings:  # how some gate was judged, which its verdict cannot say
        lines += [text for line in conclusion.warnings for text in (f"> ⚠️ warning: {line}", "")]
    if not conclusion.summaries:  # Gym served on-demand rollouts only
        lines += [NO_DATASET_ROLLOUT[0].upper() + NO_DATASET_ROLLOUT[1:] + ".", ""]
    grouped = groups(results)
    for summary in conclusion.summaries:
        members = grouped.get((summary.dataset, summary.agent), [])
        comparison = next(
            (c for c in conclusion.comparisons if (c.dataset, c.agent) == (summary.dataset, summary.agent)), None
        )
        lines += _dataset(summary, members, comparison, conclusion)
    lines += policy_table(conclusion.policies, conclusion.verdicts)
    lines += other_gates(conclusion.verdicts)
    where = [
        f"{label} {code(str(path))}" for label, path in (("HTML report", html_path), ("JSON report", json_path)) if path
    ]
    if where:
        lines += [f"Reports on the machine that ran the session: {'; '.join(where)}.", ""]
    return "\n".join(lines).rstrip("\n") + "\n"


def _dataset(
    summary: DatasetSummary,
    members: Sequence[RolloutResult],
    comparison: BaselineComparison | None,
    conclusion: Conclusion,
) -> list[str]:
    verdict = f" — {_MARK[summary.verdict]}" if summary.verdict is not None else ""
    confidence = fmt.percent(summary.confidence)
    lines = [f"#### {code(summary.title)}{verdict}", "", "| | |", "|---|---|"]
    reported = (
        f"{summary.rollouts} of {summary.selected} selected rollouts reported"
        if summary.unreported
        else fmt.plural(summary.rollouts, "rollout")
    )
    lines.append(
        f"| tasks | {summary.tasks} ({reported}: {summary.scored} scored, {fmt.plural(summary.errors, 'error')}) |"
    )
    if summary.unreported:
        lines.append(f"| unreported | {unreported_text(summary)} |")
    if summary.not_counted:  # test functions' rollouts beyond the dataset's repeats, or skipped by their tests
        lines.append(f"| not counted | {cell(summary.not_counted)} |")
    lines.append(
        f"| mean reward | {fmt.interval(summary.mean_reward)} ({confidence} CI over "
        f"{fmt.plural(summary.mean_reward.n, 'task')}) |"
    )
    lines.append(
        f"| pass rate | {fmt.interval(summary.pass_rate)} "
        f"(Clopper-Pearson, threshold {fmt.threshold(summary.threshold)}) |"
    )
    for k, interval in shown_pass_at_k(summary):
        lines.append(f"| pass@{k} | {fmt.interval(interval)} |")
    for name, interval in summary.metrics.items():  # custom metrics tests recorded
        lines.append(
            f"| metric {code(name)} | {fmt.interval(interval)} "
            f"({confidence} CI over {fmt.plural(interval.n, 'task')}) |"
        )
    for _, label, values, where in gym_texts(summary.gym) if summary.gym is not None else ():  # Gym's own figures
        lines.append(f"| {label} | {cell(values)} ({cell(where)}) |")
    flaky = summary.flaky_tasks
    listed = ", ".join(code(task) for task in flaky[:MAX_LISTED]) + (" …" if len(flaky) > MAX_LISTED else "")
    lines.append(f"| flaky tasks | {len(flaky)} of {summary.tasks}{': ' + listed if flaky else ''} |")
    if summary.errors:
        ranked = sorted(summary.error_classes.items(), key=lambda item: -item[1])
        lines.append(f"| errors | {cell(', '.join(f'{name} {count}' for name, count in ranked))} |")
    if summary.wall_time > 0:
        lines.append(f"| wall time | {fmt.duration(summary.wall_time)} |")
    lines.append("")
    if summary.gates:
        lines += [f"| gate | value [{confidence} CI] | verdict |", "|---|---|---|"]
        lines += [f"| {cell(r.gate.label)} | {fmt.interval(r.interval)} | {_MARK[r.verdict]} |" for r in summary.gates]
        lines.append("")
        notes = [(r.gate.label, note) for r in summary.gates if (note := fmt.judged_note(r.familywise, r.hint))]
        lines += [*(f"- {cell(label)}: {cell(note)}" for label, note in notes), *([""] if notes else [])]
        if note := selection_note(summary):
            lines += [f"Gates {cell(note.strip()[1:-1])}.", ""]
    lines += _worst(members, summary)
    lines += _reasons(members)
    if comparison is not None:
        lines += _baseline(comparison)
    if conclusion.flips is not None:
        mine = {r.nodeid for r in members}
        flips = [flip for flip in conclusion.flips if flip.nodeid in mine]
        shown = "; ".join(
            f"{code(flip.nodeid)} reward {flip.reward:g}, recorded {', '.join(str(r) for r in flip.recorded)}"
            for flip in flips[:MAX_LISTED]
        )
        more = f"; … and {len(flips) - MAX_LISTED} more" if len(flips) > MAX_LISTED else ""
        listed = f": {shown}{more}" if flips else ""
        lines += [f"Verifier flips against the recording: {flips_count(flips, members)}{listed}", ""]
    return lines


def unreported_text(summary: DatasetSummary) -> str:
    """How many of ``summary``'s selected rollouts never reported, and why that happens."""
    return (
        f"{summary.unreported} of {summary.selected} selected rollouts never reported (the session stopped before "
        "they did: -x, --maxfail, an interrupt or a crash)"
    )


def _worst(members: Sequence[RolloutResult], summary: DatasetSummary) -> list[str]:
    """The tasks with a failed or errored rollout, lowest mean reward first (no reward at all first). When there are
    none: "Every rollout passed." only when every selected rollout reported and passed, else how many passed and how
    many never reported."""
    rows = []
    for task, rollouts in by_task(members).items():
        if all(r.status == "passed" for r in rollouts):
            continue
        scores = [r.score for r in rollouts if r.score is not None]
        mean = math.fsum(scores) / len(scores) if scores else -math.inf
        cells = [
            "ERR" if r.status == "error" else fmt.number(r.reward) if r.reward is not None else "?" for r in rollouts
        ]
        rows.append((mean, task, cells, [r.repeat for r in rollouts]))
    if not rows:
        if summary.unreported:
            passed = f"{fmt.plural(summary.rollouts, 'reported rollout')} passed" if members else "No rollout reported"
            return [f"{passed}; {unreported_text(summary)}.", ""]
        if not members:
            return []
        return ["Every rollout passed.", ""] if summary.errors == 0 else []
    rows.sort(key=lambda row: row[0])
    lines = [
        f"Worst tasks ({min(len(rows), WORST_TASKS)} of {len(rows)} with a failed or errored rollout):",
        "",
        "| task | rewards by repeat | mean |",
        "|---|---|---|",
    ]
    for mean, task, cells, repeats in rows[:WORST_TASKS]:
        by_repeat = ", ".join(f"r{repeat} {value}" for repeat, value in zip(repeats, cells, strict=True))
        lines.append(f"| {code(task)} | {by_repeat} | {fmt.number(mean) if math.isfinite(mean) else 'n/a'} |")
    return [*lines, ""]


def failed_checks(result: RolloutResult) -> list[tuple[str, float, str]]:
    """The custom metrics of ``result`` that have a reason and explain a failure, ``(name, value, reason)`` sorted by
    name: every one of a rollout that failed or errored, else those at 0 (a failed ``rollout.expect(...,
    metric=...)``, a false bool given to ``record_metric``)."""
    reasons = dict(result.metric_reasons)
    failed = result.status in ("failed", "error")
    return [
        (name, value, reasons[name]) for name, value in result.metrics if name in reasons and (failed or value == 0)
    ]


def _reasons(members: Sequence[RolloutResult]) -> list[str]:
    """The reasons test functions gave (``record_metric(..., reason=)``, ``rollout.expect``) for the rollouts that
    failed or failed a check (:func:`failed_checks`), as the failed tests' text shows them on the terminal: the
    first :data:`MAX_REASONS` rollouts, in report order."""
    found = [(result, checks) for result in members if (checks := failed_checks(result))]
    if not found:
        return []
    lines = [
        f"Why ({len(found)} rollout{'s' if len(found) != 1 else ''} failed or failed a check; the reasons their "
        "tests gave):",
        "",
        "| rollout | reward | metric = value (reason) |",
        "|---|---|---|",
    ]
    for result, checks in found[:MAX_REASONS]:
        reward = "ERR" if result.status == "error" else fmt.number(result.reward) if result.reward is not None else "?"
        why = "; ".join(f"{name} = {value:g} ({reason})" for name, value, reason in checks)  # as the terminal
        lines.append(f"| {code(result.nodeid)} | {reward} | {cell(why)} |")
    if len(found) > MAX_REASONS:
        lines.append(f"| … and {len(found) - MAX_REASONS} more (the JSON report's `metric_reasons`) | | |")
    return [*lines, ""]


def _baseline(comparison: BaselineComparison) -> list[str]:
    if comparison.shared_tasks == 0:
        return ["Against the baseline: no task was scored in both runs.", ""]
    paired = comparison.comparison
    text = (
        f"Against the baseline: mean reward change {fmt.change(paired)} ({fmt.p_value(paired.p_value)}, paired t "
        f"over {fmt.plural(comparison.shared_tasks, 'task')}, {fmt.percent(comparison.confidence)} CI); "
        f"{len(comparison.dropped)} of {fmt.plural(comparison.shared_tasks, 'task')} fell"
    )
    if comparison.dropped:
        fell = ", ".join(
            f"{code(task)} {fmt.number(before)} → {fmt.number(after)}"
            for task, before, after in comparison.dropped[:WORST_TASKS]
        )
        more = f", … and {len(comparison.dropped) - WORST_TASKS} more" if len(comparison.dropped) > WORST_TASKS else ""
        text += f": {fell}{more}"
    return [text + ".", ""]


def policy_table(policies: Sequence[PolicyComparison], verdicts: Sequence[GateVerdict]) -> list[str]:
    """In a session comparing policies (``--gym-policy``), a table fit for a PR comment: per dataset and candidate,
    the policy pair, the difference candidate - baseline with its interval, the flips (tasks lost and gained, with
    McNemar's p) and each comparison gate's verdict as ``verdicts`` (the session's list) has it; none without
    policies."""
    if not policies:
        return []
    lines = [
        "#### Policies compared",
        "",
        "| dataset | policies | candidate - baseline | flips | gate | verdict |",
        "|---|---|---|---|---|---|",
    ]
    by_key = {verdict.key: verdict for verdict in verdicts}
    for item in policies:
        difference, flips = item.comparison.difference, item.comparison.flips
        delta = f"{fmt.interval(difference.interval)} ({fmt.plural(difference.interval.n, 'task')})"
        mcnemar = fmt.p_value(flips.p_value)
        lost_gained = f"{len(flips.only_baseline)} lost, {len(flips.only_candidate)} gained (McNemar {mcnemar})"
        pair = f"{code(item.candidate)} vs {code(item.baseline)}"
        subject = f"{item.dataset} {item.candidate} vs {item.baseline}"
        found = [by_key.get((subject, result.gate.label)) for result in item.comparison.results]
        rows = [(v.gate, _verdict_mark(v)) for v in found if v is not None] or [("no comparison gate", "")]
        for gate, mark in rows:
            lines.append(f"| {code(item.dataset)} | {pair} | {delta} | {cell(lost_gained)} | {cell(gate)} | {mark} |")
    notes = [
        f"- {code(item.dataset)} {pair} {cell(result.gate.label)}: {cell(note)}"
        for item in policies
        for result in item.comparison.results
        if (note := fmt.judged_note(result.familywise, result.hint))
    ]
    return [*lines, "", *notes, *([""] if notes else [])]


def other_gates(verdicts: Sequence[GateVerdict]) -> list[str]:
    """The verdicts of the gates no dataset's table shows (a baseline's ``--gym-max-drop`` and
    ``--gym-max-regressed-tasks``, ``--gym-fail-on-flip``, an unreadable ``--gym-replay`` recording), one row each;
    none without."""
    rows = [v for v in verdicts if v.kind in ("max_drop", "max_regressed_tasks", "flips", "replay")]
    if not rows:
        return []
    lines = ["#### Other gates", "", "| gate | verdict | why |", "|---|---|---|"]
    lines += [f"| {cell(v.subject + ': ' + v.gate)} | {_verdict_mark(v)} | {cell(v.message)} |" for v in rows]
    return [*lines, ""]


def _verdict_mark(verdict: GateVerdict) -> str:
    """A verdict's mark, e.g. ``❌ FAIL``; a verdict that does not fail the session says so."""
    mark = (
        _MARK.get(Verdict(verdict.verdict), verdict.verdict)
        if verdict.verdict in Verdict.__members__
        else verdict.verdict
    )
    if verdict.verdict != Verdict.PASS.value and not verdict.fails:
        mark += " (does not fail the session)"
    return mark
