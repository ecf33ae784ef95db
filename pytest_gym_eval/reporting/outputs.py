"""The outputs people read, made at the end of a session from its conclusion: the HTML page (``--gym-html``),
the Markdown summary (``--gym-markdown``, and ``$GITHUB_STEP_SUMMARY`` on GitHub Actions) and, on GitHub
Actions (``$GITHUB_ACTIONS``), annotations for gates that did not pass and for errored rollouts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from pytest_gym_eval.files import write_text_atomic
from pytest_gym_eval.reporting import github, html, markdown
from pytest_gym_eval.reporting.summary import Conclusion, RolloutResult
from pytest_gym_eval.rollouts import RunState
from pytest_gym_eval.rundir import RunPaths


class OutputOptions(Protocol):
    """What the outputs need of the session's options (:class:`~pytest_gym_eval.options.GymOptions` has it):
    where to write (None: not asked for) and the gate settings the annotations word."""

    @property
    def html(self) -> Path | None: ...
    @property
    def markdown(self) -> Path | None: ...
    @property
    def report(self) -> Path | None: ...
    @property
    def inconclusive_passes(self) -> bool: ...
    @property
    def max_drop(self) -> float | None: ...
    @property
    def fail_on_flip(self) -> bool: ...
    @property
    def rootdir(self) -> Path: ...


def write_pages(
    conclusion: Conclusion,
    results: Sequence[RolloutResult],
    meta: Mapping[str, object],
    options: OutputOptions,
    *,
    baseline: Mapping[str, Any] | None,
    environ: Mapping[str, str],
) -> list[str]:
    """Write the HTML page and the Markdown summary the options ask for, and append the Markdown to the file
    ``environ["GITHUB_STEP_SUMMARY"]`` names, when it names one.

    Returns the lines the terminal shows: what was written where, the records whose transcripts could not be
    read, and any file that could not be written (an OSError is reported there, not raised: the session's
    results stand without the page).
    """
    lines: list[str] = []
    if options.html is not None:
        try:
            problems = html.write_page(
                options.html, conclusion, results, meta, baseline=baseline, run_failed=run_failure(meta)
            )
        except OSError as error:
            lines.append(f"gym html report: could not write {options.html}: {error}")
        else:
            lines.append(f"gym html report: {options.html}")
            lines += [f"  transcripts missing: {problem}" for problem in problems]
    step_summary = environ.get("GITHUB_STEP_SUMMARY") or None
    if options.markdown is None and step_summary is None:
        return lines
    text = markdown.render_markdown(conclusion, results, html_path=options.html, json_path=options.report)
    if options.markdown is not None:
        try:
            write_text_atomic(options.markdown, text, errors="backslashreplace")
        except OSError as error:
            lines.append(f"gym markdown summary: could not write {options.markdown}: {error}")
        else:
            lines.append(f"gym markdown summary: {options.markdown}")
    if step_summary is not None:
        try:
            github.append_step_summary(step_summary, text)
        except OSError as error:
            lines.append(f"gym step summary: could not append to {step_summary}: {error}")
    return lines


def annotation_lines(
    conclusion: Conclusion, results: Sequence[RolloutResult], options: OutputOptions, environ: Mapping[str, str]
) -> list[str]:
    """The GitHub workflow commands (``::error …``) to print when ``environ["GITHUB_ACTIONS"]`` is "true",
    else none (see :func:`~pytest_gym_eval.reporting.github.session_annotations`)."""
    if environ.get("GITHUB_ACTIONS") != "true":
        return []
    workspace = environ.get("GITHUB_WORKSPACE")
    found = github.session_annotations(
        conclusion,
        results,
        inconclusive_passes=options.inconclusive_passes,
        max_drop=options.max_drop,
        fail_on_flip=options.fail_on_flip,
        rootdir=options.rootdir,
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
