"""The quarantine list: tasks that are rolled out and reported but left out of the gates, each until an expiry.

:func:`parse_quarantine` (its docstring: the file's format and guarantees), :func:`read_quarantine`,
:func:`split_gated`. What users see: docs/history.md.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Protocol, TypeVar

DEFAULT_FILE = "gym-quarantine.txt"
ANY_DATASET = "*"
_COMMENT = re.compile(r"(^|\s)#.*$")


class QuarantineError(ValueError):
    """A quarantine file that cannot be read or parsed; the message starts with ``FILE:LINE:``."""


@dataclass(frozen=True)
class QuarantineEntry:
    """One line: ``dataset`` (``*`` for any), ``task_id``, the last day it holds (``expires``), ``reason`` and
    where it was written (``source`` = ``FILE:LINE``)."""

    dataset: str
    task_id: str
    expires: date
    reason: str
    source: str

    def matches(self, dataset: str, task_id: str) -> bool:
        """Whether this entry names ``task_id`` of ``dataset``."""
        return self.task_id == task_id and self.dataset in (ANY_DATASET, dataset)


@dataclass(frozen=True)
class Quarantine:
    """A parsed quarantine file: ``active`` entries (expiry today or later) and ``expired`` ones."""

    active: tuple[QuarantineEntry, ...]
    expired: tuple[QuarantineEntry, ...]

    def entry_for(self, dataset: str, task_id: str) -> QuarantineEntry | None:
        """The active entry naming this task, or None."""
        return next((entry for entry in self.active if entry.matches(dataset, task_id)), None)


def parse_quarantine(text: str, *, source: str, today: date) -> Quarantine:
    """Parse a quarantine file's ``text`` (``source`` names it in errors). Entries whose ``expires`` is before
    ``today`` are expired. Raises :class:`QuarantineError` (``source:LINE: what``) for a line with fewer than four
    fields, a date that is not ``YYYY-MM-DD`` or a task listed twice.

    The file (kept under version control, default name :data:`DEFAULT_FILE`) is plain text, one entry a line::

        # dataset          task   expires      reason
        mcqa.jsonl         17     2027-01-31   flips between A and C since the prompt change (#40)
        *                  smoke  2026-12-15   the fixture server is being replaced

    Fields are separated by whitespace: the dataset name as the reports show it (``*`` for every dataset), the task
    id (without whitespace), the expiry date (ISO ``YYYY-MM-DD``; the entry holds through that day, in UTC), and a
    reason (required: a quarantine nobody can explain is not kept). ``#`` at the start of a line or after whitespace
    starts a comment (``(#40)`` in a reason stays); blank lines are ignored.

    Guarantees: every malformed line is an error naming the file and the line (:class:`QuarantineError`); the same
    task twice is an error; an expired entry is never applied silently: :func:`read_quarantine` returns it in
    ``expired`` for the summary to say so, and :func:`split_gated` gates the task again.
    """
    active: list[QuarantineEntry] = []
    expired: list[QuarantineEntry] = []
    seen: dict[tuple[str, str], int] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = _COMMENT.sub("", raw).strip()
        if not line:
            continue
        fields = line.split(None, 3)
        where = f"{source}:{number}"
        if len(fields) < 4:
            raise QuarantineError(
                f"{where}: expected 'DATASET TASK_ID YYYY-MM-DD REASON' (the reason is required), got {line!r}"
            )
        dataset, task_id, expires_text, reason = fields
        try:
            expires = date.fromisoformat(expires_text)
        except ValueError:
            raise QuarantineError(f"{where}: expiry {expires_text!r} is not a date YYYY-MM-DD") from None
        if (dataset, task_id) in seen:
            raise QuarantineError(
                f"{where}: task {task_id!r} of {dataset} is already quarantined on line {seen[dataset, task_id]}"
            )
        seen[dataset, task_id] = number
        entry = QuarantineEntry(dataset, task_id, expires, reason.strip(), where)
        (active if expires >= today else expired).append(entry)
    return Quarantine(tuple(active), tuple(expired))


def read_quarantine(path: str | os.PathLike[str], *, today: date) -> Quarantine:
    """Read and parse the quarantine file at ``path`` (UTF-8). Raises :class:`QuarantineError` naming the file
    when it cannot be read or a line is malformed."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise QuarantineError(f"{path}: cannot read the quarantine file: {error}") from None
    return parse_quarantine(text, source=str(path), today=today)


class _TaskResult(Protocol):
    @property
    def dataset(self) -> str: ...

    @property
    def task_id(self) -> str: ...


ResultT = TypeVar("ResultT", bound=_TaskResult)


def split_gated(results: Iterable[ResultT], quarantine: Quarantine) -> tuple[list[ResultT], list[ResultT]]:
    """Split results (anything with ``dataset`` and ``task_id``, e.g. rollouts) into ``(gated, quarantined)``,
    each in the order given: a result is quarantined when an *active* entry names its task; expired entries
    quarantine nothing."""
    gated: list[ResultT] = []
    quarantined: list[ResultT] = []
    for result in results:
        (quarantined if quarantine.entry_for(result.dataset, str(result.task_id)) else gated).append(result)
    return gated, quarantined


def unmatched(quarantine: Quarantine, tasks: Iterable[tuple[str, str]]) -> list[QuarantineEntry]:
    """The entries (active and expired, in file order of each) that name no ``(dataset, task_id)`` of ``tasks``:
    a dataset or task spelled otherwise than the reports name it quarantines nothing, and must be said."""
    known = set(tasks)
    return [
        entry
        for entry in (*quarantine.active, *quarantine.expired)
        if not any(entry.matches(dataset, task_id) for dataset, task_id in known)
    ]


def unmatched_warning(entry: QuarantineEntry, datasets: Sequence[str]) -> str:
    """The warning for an entry that matches no task: where it is, what it names, and the dataset names there are
    (``datasets``, as the reports name them) to write instead."""
    names = ", ".join(datasets[:10]) + (f" and {len(datasets) - 10} more" if len(datasets) > 10 else "")
    if entry.dataset != ANY_DATASET and entry.dataset not in datasets:
        why = f"no dataset is named {entry.dataset!r} (datasets: {names or 'none'})"
    else:
        why = f"no task {entry.task_id!r} in {'any dataset' if entry.dataset == ANY_DATASET else entry.dataset}"
    return f"{entry.source}: quarantine of task {entry.task_id!r} of {entry.dataset} matches nothing: {why}"
