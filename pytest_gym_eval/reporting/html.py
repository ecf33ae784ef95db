"""The HTML report (``--gym-html``, ``python -m pytest_gym_eval html``): one self-contained page per session.

The page reads the summary model (:class:`~pytest_gym_eval.reporting.conclusion.Conclusion` and the rollouts'
:class:`~pytest_gym_eval.reporting.summary.RolloutResult`) like every other output, plus the full rollout records (read
from Gym's files through each rollout's ``record``, see :mod:`.transcripts`). Everything it needs is inside the one
file: the styles, the script (``assets/report.css``, ``assets/report.js``, inlined), the data as JSON, a section per
dataset with its hand-written SVG histogram (:mod:`.dataset_page`), with ``--gym-history`` the history's trend plots
and sparklines (:mod:`.history_page`), and with two or more ``--gym-policy`` the policies compared side by side
(:mod:`.policies_page`). Opening it needs no network and no server. :func:`render_page` (its docstring says what is
drawn where) and :func:`write_page`. What users see: docs/reports.md.
"""

from __future__ import annotations

import html
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_gym_eval.core.files import write_text_atomic
from pytest_gym_eval.outcomes.causes import redact
from pytest_gym_eval.reporting import fmt
from pytest_gym_eval.reporting.charts import PALETTE_STEPS as PALETTE_STEPS
from pytest_gym_eval.reporting.charts import colour as colour
from pytest_gym_eval.reporting.charts import histogram_bins as histogram_bins
from pytest_gym_eval.reporting.charts import histogram_svg as histogram_svg
from pytest_gym_eval.reporting.charts import palette_css
from pytest_gym_eval.reporting.charts import palette_index as palette_index
from pytest_gym_eval.reporting.charts import reward_range as reward_range
from pytest_gym_eval.reporting.conclusion import Conclusion
from pytest_gym_eval.reporting.dataset_page import badge, dataset_section
from pytest_gym_eval.reporting.history_page import history_section
from pytest_gym_eval.reporting.json_report import comparison_json
from pytest_gym_eval.reporting.page_data import DROPPED as DROPPED
from pytest_gym_eval.reporting.page_data import ERRORED as ERRORED
from pytest_gym_eval.reporting.page_data import FAILED as FAILED
from pytest_gym_eval.reporting.page_data import FLAKY as FLAKY
from pytest_gym_eval.reporting.page_data import FLIPPED as FLIPPED
from pytest_gym_eval.reporting.page_data import PAGE_SIZE as PAGE_SIZE
from pytest_gym_eval.reporting.page_data import page_data as page_data
from pytest_gym_eval.reporting.page_data import transcripts_of as transcripts_of
from pytest_gym_eval.reporting.policies_page import policies_section
from pytest_gym_eval.reporting.summary import RolloutResult, groups

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
        ids = {result.nodeid for result in members}
        tests = [
            test
            for test in conclusion.tests
            if test.dataset == summary.dataset and (summary.agent is None or test.rollout in ids)
        ]
        sections.append(
            dataset_section(
                number, summary, members, comparison, conclusion, data["groups"][number], meta, index_of, tests
            )
        )
    names = ", ".join(summary.title for summary in conclusion.summaries) or "no dataset"
    created = str(meta.get("created") or "")
    title = f"Gym eval report: {names}" + (f" ({created})" if created else "")
    css = (ASSETS / "report.css").read_text(encoding="utf-8") + "\n" + palette_css()
    script = (ASSETS / "report.js").read_text(encoding="utf-8")
    every = list(transcripts) if transcripts is not None else [None] * len(results)
    if comparisons is None:
        comparisons = [comparison_json(item) for item in conclusion.policies]
    policies = policies_section(comparisons, results, conclusion.verdicts)
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
    counts = ", ".join(
        [*_datasets_and_policies(conclusion), fmt.plural(len(results), "rollout"), fmt.plural(errors, "error")]
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
            f"{badge(summary.verdict.value if summary.verdict else None)}</li>"
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


def _datasets_and_policies(conclusion: Conclusion) -> list[str]:
    """``["1 dataset"]``, or ``["1 dataset", "2 policies"]`` in a session comparing policies: a summary per dataset
    and policy (or agent) is no dataset of its own."""
    datasets = len(dict.fromkeys(summary.dataset for summary in conclusion.summaries))
    policies = dict.fromkeys(
        [*(name for item in conclusion.policies for name in (item.baseline, item.candidate))]
        + [summary.policy for summary in conclusion.summaries if summary.policy is not None]
    )
    return [fmt.plural(datasets, "dataset")] + ([f"{len(policies)} policies"] if len(policies) > 1 else [])


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
    :func:`~pytest_gym_eval.outcomes.causes.redact`: Gym's records hold what endpoints answered, and an endpoint may
    echo
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
