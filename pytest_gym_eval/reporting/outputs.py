"""The outputs people read, made at the end of a session, or of a ``merge``, from its conclusion (and its list of
gate verdicts): :func:`write_outputs`, the one output step both call, writes the JSON report (``--gym-report``), the
HTML page (``--gym-html``) and the Markdown summary (``--gym-markdown``, and ``$GITHUB_STEP_SUMMARY`` on GitHub
Actions); on GitHub Actions (``$GITHUB_ACTIONS``), :func:`annotation_lines` gives the annotations for gates that
did not pass and for errored rollouts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_gym_eval.core.files import write_text_atomic
from pytest_gym_eval.core.rundir import RunPaths
from pytest_gym_eval.gym.feed import RunState
from pytest_gym_eval.reporting import github, html, json_report, markdown
from pytest_gym_eval.reporting.conclusion import Conclusion
from pytest_gym_eval.reporting.summary import RolloutResult


@dataclass(frozen=True)
class OutputPaths:
    """Where the report files go (None: not asked for): ``report`` the JSON report, ``html`` the page, ``markdown``
    the Markdown summary."""

    report: Path | None = None
    html: Path | None = None
    markdown: Path | None = None


@dataclass
class Written:
    """What :func:`write_outputs` did: ``lines`` for the terminal (what was written where, what could not be),
    ``failed`` the files that could not be written (``path: reason``)."""

    lines: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)


def write_outputs(
    conclusion: Conclusion,
    results: Sequence[RolloutResult],
    meta: Mapping[str, object],
    final: tuple[int, str],
    *,
    paths: OutputPaths,
    environ: Mapping[str, str],
    plan: Mapping[str, object] | None = None,
    baseline: Mapping[str, Any] | None = None,
    history: Mapping[str, Any] | None = None,
    indent: int | None = 2,
) -> Written:
    """The output step of a session's end and of ``merge`` alike: the JSON report at ``paths.report``
    (:func:`~pytest_gym_eval.reporting.json_report.build_report` with ``conclusion``'s summaries, flips, policy
    comparisons and gate verdicts, ``final`` the exit status and its reason, ``plan``, the ``history`` block;
    ``indent`` None writes it compact), then the HTML page and the Markdown summary (:func:`write_pages`). Every
    gate these show comes from ``conclusion.verdicts``. A file that cannot be written is said in the result (never
    raised), so the other outputs are still written."""
    written = Written()
    if paths.report is not None:
        data = json_report.build_report(
            conclusion.summaries, results, meta, final, flips=conclusion.flips, plan=plan,
            comparisons=conclusion.policies, verdicts=conclusion.verdicts, tests=conclusion.tests,
            warnings=conclusion.warnings,
        )  # fmt: skip
        if history is not None:
            data["history"] = dict(history)
        try:
            json_report.write_report(paths.report, data, indent=indent)
        except OSError as error:
            written.lines.append(f"gym report: could not write {paths.report}: {error}")
            written.failed.append(f"{paths.report}: {error.strerror or error}")
        else:
            written.lines.append(f"gym report: {paths.report}")
    written.lines += write_pages(
        conclusion, results, meta, html_path=paths.html, markdown_path=paths.markdown, json_path=paths.report,
        baseline=baseline, environ=environ, history=history, failed=written.failed,
    )  # fmt: skip
    return written


def write_pages(
    conclusion: Conclusion,
    results: Sequence[RolloutResult],
    meta: Mapping[str, object],
    *,
    html_path: Path | None,
    markdown_path: Path | None,
    json_path: Path | None,
    baseline: Mapping[str, Any] | None,
    environ: Mapping[str, str],
    history: Mapping[str, Any] | None = None,
    failed: list[str] | None = None,
) -> list[str]:
    """Write the HTML page to ``html_path`` and the Markdown summary to ``markdown_path`` (each when not None),
    and append the Markdown to the file ``environ["GITHUB_STEP_SUMMARY"]`` names, when it names one; the Markdown
    links the HTML page and the JSON report (``json_path``) when they are written. ``history`` is the JSON report's
    ``history`` block (``--gym-history``), which the HTML page draws.

    Returns the lines the terminal shows: what was written where, the records whose transcripts could not be
    read, and any file that could not be written (an OSError is reported there, not raised: the session's
    results stand without the page), which is also appended to ``failed`` (``path: reason``) when given.
    """
    lines: list[str] = []
    if html_path is not None:
        try:
            problems = html.write_page(
                html_path, conclusion, results, meta, baseline=baseline, run_failed=run_failure(meta), history=history
            )
        except OSError as error:
            lines.append(f"gym html report: could not write {html_path}: {error}")
            _failed(failed, html_path, error)
        else:
            lines.append(f"gym html report: {html_path}")
            lines += [f"  transcripts missing: {problem}" for problem in problems]
    step_summary = environ.get("GITHUB_STEP_SUMMARY") or None
    if markdown_path is None and step_summary is None:
        return lines
    text = markdown.render_markdown(conclusion, results, html_path=html_path, json_path=json_path)
    if markdown_path is not None:
        try:
            write_text_atomic(markdown_path, text, errors="backslashreplace")
        except OSError as error:
            lines.append(f"gym markdown summary: could not write {markdown_path}: {error}")
            _failed(failed, markdown_path, error)
        else:
            lines.append(f"gym markdown summary: {markdown_path}")
    if step_summary is not None:
        try:
            github.append_step_summary(step_summary, text)
        except OSError as error:
            lines.append(f"gym step summary: could not append to {step_summary}: {error}")
            _failed(failed, step_summary, error)
    return lines


def _failed(failed: list[str] | None, path: object, error: OSError) -> None:
    if failed is not None:
        failed.append(f"{path}: {error.strerror or error}")


def nothing_to_report(paths: Sequence[Path | None]) -> list[str]:
    """The terminal's line for a session that asked for reports (``paths``: ``--gym-report``, ``--gym-html``,
    ``--gym-markdown``, None when not asked for) and has nothing to report: no Gym, no dataset rollout selected and
    no on-demand rollout's agent. No line when none was asked for."""
    asked = [str(path) for path in paths if path is not None]
    if not asked:
        return []
    return [
        "gym reports: not written, nothing to report: the session started no Gym (no dataset rollout was selected, "
        f"and no agent was named for on-demand rollouts: --gym-agent): {', '.join(asked)}"
    ]


def annotation_lines(
    conclusion: Conclusion,
    results: Sequence[RolloutResult],
    environ: Mapping[str, str],
    *,
    rootdir: Path,
) -> list[str]:
    """The GitHub workflow commands (``::error …``) to print when ``environ["GITHUB_ACTIONS"]`` is "true",
    else none (see :func:`~pytest_gym_eval.reporting.github.session_annotations`: the gates from
    ``conclusion.verdicts``, then the errored rollouts; a dataset's file relative to the workspace from ``rootdir``)."""
    if environ.get("GITHUB_ACTIONS") != "true":
        return []
    workspace = environ.get("GITHUB_WORKSPACE")
    found = github.session_annotations(
        conclusion,
        results,
        rootdir=rootdir,
        workspace=Path(workspace) if workspace else None,
    )
    return [annotation.command() for annotation in found]


def run_failure(meta: Mapping[str, object]) -> str | None:
    """Why Gym's run failed, when it did: the ``failed`` state the run's owner left in ``meta["run_dir"]``
    (Gym would not start, or died), e.g. the root cause of every rollout erroring "missing"; else None."""
    run_dir = meta.get("run_dir")
    if not isinstance(run_dir, str) or not run_dir:
        return None
    try:
        state = RunState.read(RunPaths(Path(run_dir)).state)
    except (OSError, ValueError, TypeError):
        return None
    if state is None or state.phase != "failed":
        return None
    return f"{html.RUN_FAILED} {state.message}" + (f" (log: {state.log})" if state.log else "")
