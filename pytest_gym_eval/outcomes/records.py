"""One line Gym wrote, as the plugin keeps it (:class:`RolloutRecord`), the keys Gym stamps a line with, and why a
rollout is not there (:class:`Missing`): the record shapes the evaluation logic reads, below the feed that follows
Gym's output (:mod:`pytest_gym_eval.gym.feed`)."""

from __future__ import annotations

import json
import math
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_gym_eval.outcomes.answers import answer_digest
from pytest_gym_eval.outcomes.causes import GYM_EXITED
from pytest_gym_eval.outcomes.usage import NO_USAGE, Usage, record_usage

TASK_INDEX_KEY = "_ng_task_index"
ROLLOUT_INDEX_KEY = "_ng_rollout_index"
FAILURE_CLASS_KEY = "_ng_failure_class"
FAILURE_MESSAGE_KEYS = ("_ng_failure_message", "failure_reason", "error")


@dataclass(frozen=True, slots=True)
class RolloutRecord:
    """What the plugin keeps of one line Gym wrote.

    ``reward`` is the raw value of the line's ``reward`` key (None when absent, any JSON type otherwise);
    ``path``/``line`` locate the full record (1-based line); ``failure_class`` is set for a line of the
    failures file (then there is no reward). ``offset``, the line's byte offset when known, lets
    :meth:`read_full` go straight to it instead of reading every line before it. ``answer`` is the digest of the
    policy's answer (:func:`~pytest_gym_eval.outcomes.answers.answer_digest`; None for a failures-file line).
    """

    stamp: int
    reward: object
    path: Path
    line: int
    failure_class: str | None = None
    failure_message: str | None = None
    offset: int | None = field(default=None, compare=False, repr=False)
    usage: Usage = field(default=NO_USAGE, compare=False, repr=False)
    answer: str | None = field(default=None, compare=False, repr=False)

    def numeric_reward(self) -> float | None:
        """The reward as a float, or None when it is missing, not a number, or NaN/infinite."""
        value = self.reward
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return None
        number = float(value)
        return number if math.isfinite(number) else None

    def read_full(self) -> dict[str, Any]:
        """The whole record, read again from its file (for failure messages and plugin hooks)."""
        # Not files.iter_json_lines: one line, found by its byte offset (a seek), not a walk through the file.
        if self.offset is None:
            return read_record_line(self.path, self.line)
        with self.path.open("rb") as handle:
            handle.seek(self.offset)
            raw = handle.readline()
            value = json.loads(raw) if raw else {}
            return value if isinstance(value, dict) else {}


def read_record_line(path: Path, line: int) -> dict[str, Any]:
    """The JSON object on line ``line`` (1-based) of a Gym records file; {} when the line is not an object or the
    file is shorter. Raises OSError when the file cannot be read, ValueError when the line is not JSON."""
    return next((record for _, record in records_at(path, [line])), {})


def records_at(path: Path, lines: Collection[int]) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line, JSON object)`` for each of ``lines`` (1-based) of a Gym records file, in file order, from one pass
    that stops after the last of them: many records cost one walk through the file, not one each. A line that is
    not an object gives {}, a line past the end nothing. Raises OSError when the file cannot be read, ValueError
    when one of ``lines`` is not JSON."""
    # Not files.iter_json_lines: known lines of records already read once; only those are parsed.
    wanted = set(lines)
    if not wanted:
        return
    last = max(wanted)
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, 1):
            if number in wanted:
                value = json.loads(raw)
                yield number, value if isinstance(value, dict) else {}
                if number == last:
                    return


@dataclass(frozen=True)
class Missing:
    """Why a rollout is not there: ``reason`` is a sentence for the error report, ``log`` the log to read and
    ``failure_class`` one of :data:`pytest_gym_eval.outcomes.causes.CLASSES` (``gym_exited``, ``rollout_timeout``,
    ``session_stopped``, ...)."""

    reason: str
    log: str = ""
    failure_class: str = GYM_EXITED


@dataclass(frozen=True)
class Skipped(Missing):
    """A rollout the run decided not to need (``--gym-adaptive``: its dataset's gates were decided by earlier
    waves); ``reason`` says why, e.g. ``not needed: mean-reward gate decided PASS after 2 repeats, ...``."""

    failure_class: str = "skipped"


def record_stamp(task_index: object, rollout_index: object, stride: int = 1) -> int | None:
    """The plan stamp of a Gym record with these ``_ng_task_index`` and ``_ng_rollout_index`` values, or None
    when it belongs to no planned rollout.

    ``stride`` is the plan's rollouts per task index (:attr:`~pytest_gym_eval.tasks.plan.RunPlan.stride`): with 1
    (pair mode, a task index per rollout) the stamp is the task index; with S > 1 (whole tasks, Gym numbering a
    row's S = R rollouts 0..R-1, or shared tasks, Gym numbering the S rows of one task index 0..S-1 in input order)
    it is ``task_index * S + rollout_index``, for a rollout index in 0..S-1 only.
    """
    if not isinstance(task_index, int) or isinstance(task_index, bool):
        return None
    if stride == 1:
        return task_index
    if not isinstance(rollout_index, int) or isinstance(rollout_index, bool) or not 0 <= rollout_index < stride:
        return None
    return task_index * stride + rollout_index


def parse_record(
    raw: bytes, path: Path, line: int, failures: bool, offset: int | None = None, stride: int = 1
) -> RolloutRecord | None:
    """The :class:`RolloutRecord` of one raw line (starting at byte ``offset``), keyed by its plan stamp
    (:func:`record_stamp` with ``stride``), or None for a line that is no planned rollout's."""
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(value, dict):
        return None
    stamp = record_stamp(value.get(TASK_INDEX_KEY), value.get(ROLLOUT_INDEX_KEY), stride)
    if stamp is None:
        return None
    failure_class = value.get(FAILURE_CLASS_KEY)
    if failures or failure_class:
        message = next((str(value[k]) for k in FAILURE_MESSAGE_KEYS if value.get(k)), "")
        return RolloutRecord(
            stamp, None, path, line, str(failure_class or "unknown"), message, offset, record_usage(value)
        )
    return RolloutRecord(
        stamp, value.get("reward"), path, line, offset=offset, usage=record_usage(value), answer=answer_digest(value)
    )
