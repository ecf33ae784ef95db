"""The HTML page's "Policies compared" section (``--gym-policy`` with two or more policies, issue 25): per dataset and
candidate, the paired difference in mean reward with its interval, both means and the ``--gym-max-regression``
verdict; both policies' tokens and latency over the pairs (when recorded); each task's rewards under both policies
side by side; and, for each task that flips (only the baseline or only the candidate passes it), both policies'
transcripts next to each other, open.

Drawn from the JSON report's ``comparisons`` list (:func:`pytest_gym_eval.reporting.json_report.comparison_json`), so
the session, ``merge --gym-html`` and ``python -m pytest_gym_eval html REPORT.json`` draw the same section. The
transcripts are filled in by the page's script (``assets/report.js``, the drawer's own rendering) into each
``.policy-transcript`` element, from the rollout index in its ``data-i``. What users see: docs/reports.md.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_gym_eval.reporting import fmt
from pytest_gym_eval.reporting.summary import RolloutResult
from pytest_gym_eval.reporting.verdicts import GateVerdict
from pytest_gym_eval.tasks.models import policy_of

OPEN_TASK_TABLE_UP_TO = 50
"""A dataset's per-task table is open when it has at most this many tasks (folded away past that)."""
OPEN_FLIPS_UP_TO = 20
"""Flipping tasks per comparison whose transcripts are open when the page opens (the script draws a folded one's
when it is opened, which keeps a page with thousands of flips quick to open)."""
FLIP_KINDS = (("only_baseline", "only the baseline passes"), ("only_candidate", "only the candidate passes"))
"""The flips whose transcripts are shown, with what they mean."""

Side = dict[tuple[str, int], tuple[int, RolloutResult]]
"""One policy's rollouts of one dataset: (task id, repeat) -> (rollout index on the page, result)."""


def policies_section(
    comparisons: Sequence[Mapping[str, Any]] | None,
    results: Sequence[RolloutResult],
    verdicts: Sequence[GateVerdict] = (),
) -> str:
    """The page's ``<section id="policies">`` for the JSON report's ``comparisons`` list; '' without one (a session
    with one policy). ``results`` are the page's rollouts, in page order (their index is the one the page's script
    opens)."""
    if not comparisons:
        return ""
    policies = list(
        dict.fromkeys([str(comparisons[0].get("baseline"))] + [str(item.get("candidate")) for item in comparisons])
    )
    cards = "".join(_comparison_card(item, results, policies, verdicts) for item in comparisons)
    return (
        '<section class="policies" id="policies"><h2>Policies compared '
        f'<span class="muted">baseline {html.escape(policies[0])}</span></h2>{cards}</section>'
    )


def sides_of(results: Sequence[RolloutResult], dataset: str, policies: Sequence[str]) -> dict[str, Side]:
    """Each policy's rollouts of ``dataset``: policy name -> :data:`Side`, a rollout attributed to its policy by its
    agent instance (:func:`~pytest_gym_eval.tasks.models.policy_of`; ``policies`` baseline first, non-empty)."""
    sides: dict[str, Side] = {name: {} for name in policies}
    for index, result in enumerate(results):
        if result.dataset == dataset:
            sides[policy_of(result.agent, policies)][(result.task_id, result.repeat)] = (index, result)
    return sides


def card_verdict(
    verdicts: Sequence[GateVerdict], subject: str, item: Mapping[str, Any]
) -> tuple[str | None, list[GateVerdict]]:
    """A policy pair's badge (the worst of its gates' verdicts: FAIL, then INCONCLUSIVE, then PASS; None without
    a gate) and its gates' verdicts, from the session's verdict list (``subject``: ``dataset cand vs base``); without
    one there (a report written before the list), from the gates of the JSON report's comparison ``item``."""
    mine = [verdict for verdict in verdicts if verdict.subject == subject]
    found = {verdict.verdict for verdict in mine} if mine else {str(g.get("verdict")) for g in item.get("gates") or ()}
    worst = next((word for word in ("FAIL", "INCONCLUSIVE", "PASS") if word in found), None)
    return worst, mine


def _comparison_card(
    item: Mapping[str, Any],
    results: Sequence[RolloutResult],
    policies: Sequence[str],
    verdicts: Sequence[GateVerdict] = (),
) -> str:
    dataset, baseline, candidate = str(item.get("dataset")), str(item.get("baseline")), str(item.get("candidate"))
    sides = sides_of(results, dataset, policies)
    flips: Mapping[str, Sequence[str]] = item.get("flips") or {}
    flip_of = {task: kind for kind, _ in FLIP_KINDS for task in flips.get(kind, ())}
    delta = item.get("delta") or {}
    confidence = item.get("confidence")
    verdict, gates = card_verdict(verdicts, f"{dataset} {candidate} vs {baseline}", item)
    badge = (
        f' <span class="badge {html.escape(str(verdict).lower())}">{html.escape(str(verdict))}</span>'
        if verdict
        else ""
    )
    margin = f", margin {fmt.number(float(item['margin']))}" if item.get("margin") is not None else ""
    counts = ", ".join(f"{len(flips.get(kind, ()))} {label}" for kind, label in FLIP_KINDS)
    mcnemar = f", McNemar p = {_num(item.get('mcnemar_p'))}" if item.get("binary") else ""
    if verdict and item.get("decides") is False:
        badge += ' <span class="muted">judged on a selection: shown, not deciding</span>'
    head = (
        f'<div class="card policy-comparison" data-dataset="{html.escape(dataset)}" '
        f'data-baseline="{html.escape(baseline)}" data-candidate="{html.escape(candidate)}" '
        f'data-verdict="{html.escape(str(verdict or ""))}">'
        f"<h3>{html.escape(dataset)}: {html.escape(candidate)} vs {html.escape(baseline)}{badge}</h3>"
        f'<p class="policy-delta">candidate - baseline <strong>{_num(delta.get("estimate"))} '
        f"[{_num(delta.get('low'))}, {_num(delta.get('high'))}]</strong> "
        f"({fmt.percent(float(confidence)) if isinstance(confidence, int | float) else ''} CI paired by task over "
        f"{fmt.plural(int(item.get('pairs') or 0), 'pair')}{margin}{mcnemar}); mean reward "
        f"{html.escape(baseline)} {_num(item.get('baseline_mean'))}, {html.escape(candidate)} "
        f"{_num(item.get('candidate_mean'))}</p>"
        f'<p class="policy-flips">{html.escape(counts)}</p>'
        + "".join(
            f'<p class="policy-gate" data-verdict="{html.escape(gate.verdict)}">{html.escape(gate.message)}</p>'
            for gate in gates
        )
        + _usage_table(item.get("usage"), baseline, candidate)
    )
    return (
        head
        + _task_table(sides[baseline], sides[candidate], flip_of, baseline, candidate)
        + _flips(sides[baseline], sides[candidate], flip_of, baseline, candidate)
        + "</div>"
    )


def _usage_table(usage: object, baseline: str, candidate: str) -> str:
    """Both policies' tokens and latency over the pairs side by side, with candidate / baseline where the JSON entry
    gives it (:func:`~pytest_gym_eval.reporting.json_report.comparison_usage_json`); '' without ``usage``."""
    if not isinstance(usage, Mapping):
        return ""
    sides = [usage.get("baseline") or {}, usage.get("candidate") or {}]
    ratios = usage.get("ratio") or {}
    rows = [
        ("total tokens", "tokens", "total", None, "{:,.0f}"),
        ("tokens per rollout", "tokens", "per_rollout", "tokens_per_rollout", "{:,.1f}"),
        ("latency median (s)", "latency", "median", "latency_median", "{:.2f}"),
        ("latency p95 (s)", "latency", "p95", None, "{:.2f}"),
    ]
    cells = "".join(
        f"<tr><th>{label}</th>"
        + "".join(f"<td>{_shown(form, (side.get(group) or {}).get(key))}</td>" for side in sides)
        + f"<td>{_shown('x{:.2f}', ratios.get(ratio)) if ratio else ''}</td></tr>"
        for label, group, key, ratio, form in rows
    )
    return (
        f'<table class="policy-usage"><thead><tr><th></th><th>{html.escape(baseline)}</th>'
        f"<th>{html.escape(candidate)}</th><th>candidate / baseline</th></tr></thead><tbody>{cells}</tbody></table>"
    )


def _task_table(base: Side, cand: Side, flip_of: Mapping[str, str], baseline: str, candidate: str) -> str:
    tasks = list(dict.fromkeys(task for task, _ in [*base, *cand]))
    rows = "".join(
        f'<tr class="policy-task" data-task="{html.escape(task)}" data-flip="{flip_of.get(task, "")}">'
        f'<td class="task-id">{html.escape(task)}</td>{_rewards(base, task)}{_rewards(cand, task)}'
        f"<td>{html.escape(dict(FLIP_KINDS).get(flip_of.get(task, ''), ''))}</td></tr>"
        for task in tasks
    )
    opened = " open" if len(tasks) <= OPEN_TASK_TABLE_UP_TO else ""
    return (
        f'<details class="policy-tasks"{opened}><summary>{fmt.plural(len(tasks), "task")}: rewards per repeat '
        "(mean)</summary>"
        f'<table class="policy-tasks"><thead><tr><th>task</th><th>{html.escape(baseline)}</th>'
        f"<th>{html.escape(candidate)}</th><th>flip</th></tr></thead><tbody>{rows}</tbody></table></details>"
    )


def _rewards(side: Side, task: str) -> str:
    """One policy's cell of a task's row: each repeat's reward ("error" for an errored rollout; each opens its
    rollout) and, with several scored repeats, their mean."""
    mine = sorted((repeat, entry) for (task_id, repeat), entry in side.items() if task_id == task)
    if not mine:
        return '<td class="muted">not run</td>'
    buttons = " ".join(
        f'<button type="button" class="open-rollout" data-i="{index}">'
        f"{'error' if result.score is None else fmt.number(result.score)}</button>"
        for _, (index, result) in mine
    )
    scores = [result.score for _, (_, result) in mine if result.score is not None]
    mean = f' <span class="muted">({fmt.number(sum(scores) / len(scores))})</span>' if len(scores) > 1 else ""
    return f"<td>{buttons}{mean}</td>"


def _flips(base: Side, cand: Side, flip_of: Mapping[str, str], baseline: str, candidate: str) -> str:
    if not flip_of:
        return ""
    blocks = []
    for number, (task, kind) in enumerate(flip_of.items()):
        repeats = sorted({repeat for task_id, repeat in [*base, *cand] if task_id == task})
        rows = "".join(
            '<div class="policy-pair">'
            + _transcript(base.get((task, repeat)), baseline)
            + _transcript(cand.get((task, repeat)), candidate)
            + "</div>"
            for repeat in repeats
        )
        blocks.append(
            f'<details class="policy-flip" data-task="{html.escape(task)}" data-flip="{kind}"'
            f"{' open' if number < OPEN_FLIPS_UP_TO else ''}>"
            f'<summary><span class="task-id">{html.escape(task)}</span> '
            f"{html.escape(dict(FLIP_KINDS)[kind])}</summary>{rows}</details>"
        )
    folded = f" (past the first {OPEN_FLIPS_UP_TO}: folded)" if len(blocks) > OPEN_FLIPS_UP_TO else ""
    return f"<h4>Tasks that flip: both transcripts{folded}</h4>{''.join(blocks)}"


def _transcript(entry: tuple[int, RolloutResult] | None, policy: str) -> str:
    if entry is None:
        return f'<div class="policy-side"><h5>{html.escape(policy)}</h5><p class="muted">not run</p></div>'
    index, result = entry
    return (
        f'<div class="policy-side"><h5>{html.escape(policy)}: {html.escape(result.nodeid)}</h5>'
        f'<div class="policy-transcript" data-i="{index}"></div></div>'
    )


def _shown(form: str, value: object) -> str:
    """``value`` formatted by ``form`` (a str.format pattern), "n/a" when it is not a number."""
    return form.format(value) if isinstance(value, int | float) and not isinstance(value, bool) else "n/a"


def _num(value: object) -> str:
    return fmt.number(float(value)) if isinstance(value, int | float) else "n/a"
