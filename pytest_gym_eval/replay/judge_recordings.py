"""Judge recordings: the judge calls Gym's verifiers write into their rollout records, as recordings the replay
server serves.

About 16 of Gym 0.7.0's resources servers (equivalence_llm_judge, math_with_judge, physics_judge, text_to_sql, ...)
return ``judge_evaluations: [{responses_create_params, response}, ...]`` from ``/verify``, and Gym writes it into
each rollout record; others (over_refusal_detection, jailbreak_detection, aegis_v4_safety, bbq) write one call
per key, ``judge_evaluation: {responses_create_params, response}`` and the like (bbq in the chat layout). Each
call is in the layout of a rollouts line, so it is a recording as
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

from pytest_gym_eval.outcomes.usage import JUDGE_EVALUATIONS, single_judge_keys
from pytest_gym_eval.replay.recorder import chat_recording
from pytest_gym_eval.replay.recordings import RecordingError

JUDGE_OF = "judge_of"
"""A judge recording's key naming where it came from: ``"FILE:LINE judge_evaluations[I]"`` or ``"FILE:LINE KEY"``
(a :func:`~pytest_gym_eval.outcomes.usage.single_judge_keys` key)."""


def _recording(evaluation: Any, where: str) -> dict[str, Any]:
    """One judge call as a recording line; raises ``RecordingError`` naming ``where`` when it is ill-formed."""
    if not isinstance(evaluation, Mapping):
        raise RecordingError(f"{where} is a {type(evaluation).__name__}, not an object")
    params = evaluation.get("responses_create_params")
    response = evaluation.get("response")
    request = evaluation.get("request")
    if params is None and isinstance(request, Mapping) and isinstance(response, Mapping) and "choices" in response:
        try:  # a chat-completions call stored as Gym's chat layout (bbq): `request` and its chat completion
            return chat_recording(request, response)
        except ValueError as exc:
            raise RecordingError(f"{where}: {exc}") from None
    if not isinstance(params, Mapping):
        raise RecordingError(f"{where}: missing `responses_create_params` object")
    if not isinstance(response, Mapping) or not isinstance(response.get("output"), list):
        raise RecordingError(f"{where}: missing `response.output` list")
    if not all(isinstance(item, Mapping) for item in response["output"]):
        raise RecordingError(f"{where}: `response.output` holds something that is not an item object")
    return {"responses_create_params": dict(params), "response": dict(response)}


def judge_evaluations(record: Mapping[str, Any], source: str) -> list[dict[str, Any]]:
    """The judge calls of one rollout record (a parsed line of Gym's rollouts file, found at ``source``,
    ``"file:line"``) as recording lines ``{"responses_create_params", "response", "judge_of"}``: each element of its
    ``judge_evaluations`` list in order, then the one call of each key ending in ``judge_evaluation`` that holds an
    object (:func:`~pytest_gym_eval.outcomes.usage.single_judge_keys`: over_refusal_detection's
    ``judge_evaluation``, bbq's ``answer_judge_evaluation`` ...). A call whose judge failed (``response`` null, the
    error in ``error``) has no answer to replay and is left out; a call stored in the chat layout (``request`` with
    ``messages`` and a chat completion as ``response``) is converted as the recording proxy converts one. A record
    without any of these keys, or with null, has none.

    Raises ``RecordingError`` naming ``source`` and the element when ``judge_evaluations`` is not a list or a call
    lacks a ``responses_create_params`` object or a ``response.output`` list of objects.
    """
    evaluations = record.get(JUDGE_EVALUATIONS)
    if evaluations is not None and not isinstance(evaluations, list):
        raise RecordingError(f"{source}: `{JUDGE_EVALUATIONS}` is a {type(evaluations).__name__}, not a list")
    labelled = [(f"{JUDGE_EVALUATIONS}[{position}]", e) for position, e in enumerate(evaluations or [])]
    labelled += [(key, record[key]) for key in single_judge_keys(record) if record[key].get("response") is not None]
    return [
        {**_recording(evaluation, f"{source}: `{label}`"), JUDGE_OF: f"{source} {label}"}
        for label, evaluation in labelled
    ]


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
