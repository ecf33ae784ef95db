"""GitHub Actions: ``::error`` / ``::warning`` annotations (workflow commands printed on the job's log) for
gates that did not pass and for errored rollouts, and appending the Markdown summary to the step summary.

Workflow commands: https://docs.github.com/actions/reference/workflow-commands-for-github-actions (the
escaping of ``%``, CR and LF in messages, and also ``:`` and ``,`` in properties, is from there). GitHub shows
at most 10 error and 10 warning annotations of one step, so each level is capped at :data:`MAX_PER_LEVEL`
lines, the last of which counts what was left out.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pytest_gym_eval.outcomes.outcome import clean_gym_message
from pytest_gym_eval.reporting.conclusion import Conclusion
from pytest_gym_eval.reporting.summary import RolloutResult
from pytest_gym_eval.reporting.transcripts import read_records
from pytest_gym_eval.reporting.verdicts import shown as shown_verdicts

MAX_PER_LEVEL = 10
"""Annotations of one level (error, warning) printed at most; GitHub shows 10 of each per step."""
CAUSE_CHARS = 300
"""Characters of Gym's failure message an errored rollout's annotation quotes."""


@dataclass(frozen=True)
class Annotation:
    """One workflow command: ``level`` "error" or "warning", a short ``title``, the ``message``, and the
    ``file`` (relative to the repository) it points at, when known."""

    level: str
    title: str
    message: str
    file: str | None = None

    def command(self) -> str:
        """The line to print, e.g. ``::error file=datasets/a.jsonl,title=gym gate FAIL::mean reward …``."""
        properties = [f"title={_property(self.title)}"]
        if self.file:
            properties.insert(0, f"file={_property(self.file)}")
        return f"::{self.level} {','.join(properties)}::{_data(self.message)}"


def _data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _property(text: str) -> str:
    return _data(text).replace(":", "%3A").replace(",", "%2C")


def session_annotations(
    conclusion: Conclusion,
    results: Sequence[RolloutResult],
    *,
    rootdir: Path | None = None,
    workspace: Path | None = None,
) -> list[Annotation]:
    """The annotations of a session, gates first.

    One per gate verdict of ``conclusion.verdicts`` that is neither PASS nor not applicable
    (:func:`~pytest_gym_eval.reporting.verdicts.shown`; a dataset's errored rollouts are annotated one by one
    instead): an error when it fails the session, else a warning (an INCONCLUSIVE one with
    ``--gym-inconclusive=pass``, one judged on a ``-k`` selection); then each errored rollout with its failure class
    and Gym's message (from its record, when there is one). Each level keeps at most :data:`MAX_PER_LEVEL` lines,
    its last then saying how many more there were. A dataset's file is named relative to ``workspace``
    (``$GITHUB_WORKSPACE``) when ``rootdir`` / dataset lies inside it.
    """

    def file_of(dataset: str) -> str | None:
        if rootdir is None or workspace is None or not dataset:
            return None
        try:
            return (rootdir / dataset).resolve().relative_to(workspace.resolve()).as_posix()
        except ValueError:
            return None

    gates = [
        Annotation(
            "error" if verdict.fails else "warning",
            f"gym gate {verdict.verdict}",
            verdict.message,
            file_of(verdict.dataset),
        )
        for verdict in shown_verdicts(conclusion.verdicts)
        if verdict.kind != "errors"
    ]
    errored = [r for r in results if r.status == "error"]
    room = max(0, MAX_PER_LEVEL - sum(1 for a in gates if a.level == "error"))
    shown = errored if len(errored) <= room else errored[: max(0, room - 1)]
    records, _ = read_records([r.record for r in shown])
    items = [
        Annotation("error", "gym rollout error", _error_text(result, record), file_of(result.dataset))
        for result, record in zip(shown, records, strict=True)
    ]
    if len(shown) < len(errored) and room:
        left = len(errored) - len(shown)
        items.append(
            Annotation("error", "gym rollout errors", f"… and {left} more errored rollout{'s' if left != 1 else ''}")
        )
    ordered = gates + items
    return [a for a in ordered if a.level == "error"][:MAX_PER_LEVEL] + [a for a in ordered if a.level == "warning"][
        :MAX_PER_LEVEL
    ]


def _error_text(result: RolloutResult, record: Mapping[str, object] | None) -> str:
    text = f"{result.nodeid}: {result.failure_class or 'error'}"
    cause = getattr(result, "cause", None)
    message = cause if isinstance(cause, str) and cause else None
    if message is None and record is not None:
        for key in ("_ng_failure_message", "failure_reason", "error"):
            value = record.get(key)
            if isinstance(value, str) and value:
                message = value
                break
    if message:
        text += f": {clean_gym_message(message, CAUSE_CHARS)}"
    return text


def append_step_summary(path: str | os.PathLike[str], text: str) -> None:
    """Append ``text`` (Markdown) to GitHub's step summary file ``path`` (``$GITHUB_STEP_SUMMARY``), after a
    blank line when the file already holds something. Raises OSError when it cannot be written."""
    target = Path(path)
    lead = "\n" if target.exists() and target.stat().st_size else ""
    with target.open("a", encoding="utf-8", errors="backslashreplace") as stream:
        stream.write(lead + text)
