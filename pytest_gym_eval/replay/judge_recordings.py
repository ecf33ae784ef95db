"""Judge recordings: the judge calls Gym's verifiers write into their rollout records, as recordings the replay
server serves.

About 16 of Gym 0.7.0's resources servers (equivalence_llm_judge, math_with_judge, physics_judge, text_to_sql, ...)
return ``judge_evaluations: [{responses_create_params, response}, ...]`` from ``/verify``, and Gym writes it into
each rollout record. Each element is one judge call in the layout of a rollouts line, so it is a recording as
:func:`~pytest_gym_eval.replay.recordings.load_recordings` reads it: the replay server indexes it under the judge
request's normalised conversation (and tool definitions). Judge requests carry no repeat tag, so recordings of one
conversation answer in file order, round-robin. A chat-completions judge stores its messages as ``input`` items,
which normalise as the chat ``messages`` do. What users see: docs/models.md ("Judge recordings").
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import jsonlines

from pytest_gym_eval.replay.recordings import RecordingError

JUDGE_EVALUATIONS = "judge_evaluations"
"""The rollout record's key of the judge calls its verifier made."""
JUDGE_OF = "judge_of"
"""A judge recording's key naming where it came from: ``"FILE:LINE judge_evaluations[I]"``."""


def judge_evaluations(record: Mapping[str, Any], source: str) -> list[dict[str, Any]]:
    """The judge calls of one rollout record (a parsed line of Gym's rollouts file, found at ``source``,
    ``"file:line"``) as recording lines: ``{"responses_create_params", "response", "judge_of"}`` per element of its
    ``judge_evaluations``, in order. A record without the key, or with null, has none.

    Raises ``RecordingError`` naming ``source`` and the element when ``judge_evaluations`` is not a list or an
    element lacks a ``responses_create_params`` object or a ``response.output`` list of objects.
    """
    evaluations = record.get(JUDGE_EVALUATIONS)
    if evaluations is None:
        return []
    if not isinstance(evaluations, list):
        raise RecordingError(f"{source}: `{JUDGE_EVALUATIONS}` is a {type(evaluations).__name__}, not a list")
    lines = []
    for position, evaluation in enumerate(evaluations):
        where = f"{source}: `{JUDGE_EVALUATIONS}[{position}]`"
        if not isinstance(evaluation, Mapping):
            raise RecordingError(f"{where} is a {type(evaluation).__name__}, not an object")
        params = evaluation.get("responses_create_params")
        response = evaluation.get("response")
        if not isinstance(params, Mapping):
            raise RecordingError(f"{where}: missing `responses_create_params` object")
        if not isinstance(response, Mapping) or not isinstance(response.get("output"), list):
            raise RecordingError(f"{where}: missing `response.output` list")
        if not all(isinstance(item, Mapping) for item in response["output"]):
            raise RecordingError(f"{where}: `response.output` holds something that is not an item object")
        lines.append(
            {
                "responses_create_params": dict(params),
                "response": dict(response),
                JUDGE_OF: f"{source} {JUDGE_EVALUATIONS}[{position}]",
            }
        )
    return lines


def _records(path: str | os.PathLike[str]) -> Iterator[tuple[Any, str]]:
    """Each non-blank line of a rollouts file, parsed, with its ``"file:line"``; raises ``RecordingError`` for an
    unreadable file or malformed JSON."""
    try:
        with open(path, encoding="utf-8") as stream:
            for number, line in enumerate(stream, 1):
                if not line.strip():
                    continue
                try:
                    value = json.loads(line)
                except ValueError as exc:
                    raise RecordingError(f"{path}:{number}: malformed JSON ({exc})") from None
                yield value, f"{path}:{number}"
    except (OSError, UnicodeDecodeError) as exc:
        raise RecordingError(f"{path}: cannot read rollouts file ({exc})") from None


def judge_recordings(rollouts: Sequence[str | os.PathLike[str]]) -> list[dict[str, Any]]:
    """Every judge call recorded in Gym rollouts files (:func:`judge_evaluations` of each line), in file order.

    Raises ``RecordingError`` (``file:line: problem``) for an unreadable file, malformed JSON, a line that is not an
    object, or an ill-formed ``judge_evaluations`` element.
    """
    lines: list[dict[str, Any]] = []
    for path in rollouts:
        for value, source in _records(path):
            if not isinstance(value, dict):
                raise RecordingError(f"{source}: expected a JSON object, got {type(value).__name__}")
            lines += judge_evaluations(value, source)
    return lines


def write_judge_recordings(rollouts: Sequence[str | os.PathLike[str]], output: Path) -> int:
    """Write :func:`judge_recordings` of ``rollouts`` to ``output`` (replaced), one JSON line each; returns how
    many. Raises ``RecordingError`` as :func:`judge_recordings` does, and ``OSError`` when ``output`` cannot be
    written (nothing is written when a rollouts file is bad)."""
    lines = judge_recordings(rollouts)
    with jsonlines.open(output, mode="w") as writer:
        writer.write_all(lines)
    return len(lines)


def judge_miss_summary(name: str, misses: Sequence[str]) -> str | None:
    """The error to give a rollout Gym recorded as ``judge_failed`` while model server ``name`` (a judge) was
    replayed and its replay server answered ``misses`` (:attr:`~pytest_gym_eval.replay.server.ReplayServer.misses`,
    the 404 messages in order), or None when it answered every request.

    Gym's record of a failed judge call says only ``ClientResponseError: 500`` (the judge's model server passed the
    replay server's 404 on as its own error), and judge requests carry no tag naming their rollout, so the summary
    names the replayed judge, how many of its requests had no recording, and the first one's 404 message (where it
    departs from the closest recording): ``judge model server NAME (replayed) has no recorded answer for N
    request(s); the first: no recorded answer: the conversation departs from ...``.
    """
    if not misses:
        return None
    count = f"{len(misses)} request{'s' if len(misses) != 1 else ''}"
    return f"judge model server {name} (replayed) has no recorded answer for {count}; the first: {misses[0]}"
