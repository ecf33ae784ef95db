"""Recordings: the lines of Gym rollouts files, read and validated, and the model turns each holds."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import jsonlines

from pytest_gym_eval.replay.normal import (
    Conversation,
    Key,
    item_type,
    labelled_request_items,
    normalise_items,
    normalise_labelled,
    request_items,
    tools_signature,
)


class RecordingError(ValueError):
    """A rollouts file cannot be replayed; the message starts with ``file:line`` (or ``file``)."""


@dataclass(frozen=True)
class Recording:
    """One rollouts line: ``source`` is ``"file:line"``, ``params`` its ``responses_create_params``,
    ``response`` its recorded Responses object (``output`` is a list of objects), ``reward`` the recorded
    reward (any JSON value; None when absent), ``rollout_index`` its ``_ng_rollout_index`` (None when absent
    or not an integer)."""

    source: str
    params: dict[str, Any]
    response: dict[str, Any]
    reward: object = None
    rollout_index: int | None = None


@dataclass(frozen=True)
class Turn:
    """One recorded model answer: ``items`` are that turn's output items, ``response`` the recorded
    Responses object without ``output``, ``final`` whether no model item follows in the recording."""

    source: str
    items: tuple[dict[str, Any], ...]
    response: dict[str, Any]
    final: bool


def is_model_item(item: Mapping[str, Any]) -> bool:
    """Whether an output item was produced by the model: an assistant message or any item type that
    is not ``*_output`` (``reasoning``, ``function_call``, ...). Tool outputs and user/system/developer
    messages are added by the agent or environment and end a turn."""
    kind = item_type(item)
    if kind == "message":
        return item.get("role") == "assistant"
    return not kind.endswith("_output")


def split_turns(output: Sequence[Mapping[str, Any]]) -> list[tuple[int, int]]:
    """Turns of a recorded ``output`` as ``(start, end)`` slices: each maximal run of model items.

    An empty ``output`` is one empty turn ``(0, 0)``; environment items before the first model item
    (or after the last) belong to no turn.
    """
    if not output:
        return [(0, 0)]
    turns: list[tuple[int, int]] = []
    start: int | None = None
    for position, item in enumerate(output):
        if is_model_item(item):
            if start is None:
                start = position
        elif start is not None:
            turns.append((start, position))
            start = None
    if start is not None:
        turns.append((start, len(output)))
    return turns


def recording_turns(recording: Recording) -> list[tuple[Key, Turn]]:
    """Every turn of a recording with its key: normalised(instructions + input + output before it).

    Raises ``ValueError`` when the recorded input or output holds something that is not an item.
    """
    conversation = request_items(recording.params)
    output: list[dict[str, Any]] = recording.response["output"]
    response = {name: value for name, value in recording.response.items() if name != "output"}
    turns = split_turns(output)
    keyed: list[tuple[Key, Turn]] = []
    for number, (start, end) in enumerate(turns):
        key = normalise_items([*conversation, *output[:start]])
        final = number == len(turns) - 1
        keyed.append((key, Turn(recording.source, tuple(output[start:end]), response, final)))
    return keyed


def recorded_conversation(recording: Recording) -> Conversation:
    """The whole recorded conversation (instructions, input and every output item), labelled
    ``instructions``/``input[i]``/``output[j]``. Raises ``ValueError`` as :func:`recording_turns`."""
    labelled = labelled_request_items(recording.params)
    labelled += [(f"output[{position}]", item) for position, item in enumerate(recording.response["output"])]
    key, where = normalise_labelled(labelled)
    return Conversation(key, where, tools_signature(recording.params.get("tools")))


def _numbered(lines: Iterable[str], counter: list[int]) -> Iterator[str]:
    """Yield ``lines``, keeping the 1-based number of the last one yielded in ``counter[0]``."""
    for number, line in enumerate(lines, 1):
        counter[0] = number
        yield line


def load_recordings(paths: Sequence[str | os.PathLike[str]]) -> list[Recording]:
    """Read and validate every non-blank line of the rollouts files, in order.

    Raises ``RecordingError`` (``file:line: problem``) for an unreadable file, malformed JSON, a line
    that is not an object, or a missing/ill-typed ``responses_create_params``, ``response`` or
    ``response.output`` (which must be a list of objects).
    """
    recordings: list[Recording] = []
    for path in paths:
        counter = [0]
        try:
            with (
                open(path, encoding="utf-8") as stream,
                jsonlines.Reader(_numbered(stream, counter)) as reader,
            ):
                while True:
                    try:
                        value = reader.read(skip_empty=True, allow_none=True)
                    except EOFError:
                        break
                    except jsonlines.InvalidLineError as exc:
                        reason = exc.__cause__ or exc
                        raise RecordingError(f"{path}:{exc.lineno}: malformed JSON ({reason})") from None
                    recordings.append(_recording(value, f"{path}:{counter[0]}"))
        except (OSError, UnicodeDecodeError) as exc:
            raise RecordingError(f"{path}: cannot read rollouts file ({exc})") from None
    return recordings


def _recording(value: Any, source: str) -> Recording:
    """Validate one parsed rollouts line (see :func:`load_recordings`)."""
    if not isinstance(value, dict):
        raise RecordingError(f"{source}: expected a JSON object, got {type(value).__name__}")
    params = value.get("responses_create_params")
    if not isinstance(params, dict):
        raise RecordingError(f"{source}: missing `responses_create_params` object")
    response = value.get("response")
    if not isinstance(response, dict) or not isinstance(response.get("output"), list):
        raise RecordingError(f"{source}: missing `response.output` list")
    for position, item in enumerate(response["output"]):
        if not isinstance(item, dict):
            raise RecordingError(
                f"{source}: `response.output[{position}]` is a {type(item).__name__}, not an item object"
            )
    index = value.get("_ng_rollout_index")
    rollout_index = index if isinstance(index, int) and not isinstance(index, bool) else None
    return Recording(source, params, response, value.get("reward"), rollout_index)
