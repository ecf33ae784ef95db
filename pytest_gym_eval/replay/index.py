"""The index: which recorded turn answers a conversation (each task's recordings in repeat order), and, when none does,
where the conversation departs from the closest recording.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_gym_eval.replay.content import MARK, display
from pytest_gym_eval.replay.normal import Conversation, Key, NormItem, Tools, repeat_tag, request_conversation
from pytest_gym_eval.replay.recordings import (
    Recording,
    RecordingError,
    Turn,
    load_recordings,
    recorded_conversation,
    recording_turns,
)


@dataclass(frozen=True)
class _Candidate:
    """A recorded turn that may answer a conversation: ``rank`` is its recording's place in the repeat
    order of its task's ``count`` recordings, ``tools`` its recording's tool definitions."""

    turn: Turn
    recording: Recording
    tools: Tools | None
    rank: int
    count: int


class ReplayIndex:
    """Every recorded turn by conversation, with each task's recordings in repeat order (package docstring).

    ``recordings`` as :func:`load_recordings` returns them. Raises ``RecordingError`` naming a recording's
    ``file:line`` when its input or output holds something that is not an item. Thread-safe.
    """

    def __init__(self, recordings: Sequence[Recording]) -> None:
        tasks: dict[tuple[Key, Tools | None], list[tuple[tuple[int, int, int], Recording, list[tuple[Key, Turn]]]]] = {}
        self._whole: list[tuple[Recording, Conversation]] = []
        for position, recording in enumerate(recordings):
            try:
                task = request_conversation(recording.params)
                turns = recording_turns(recording)
                self._whole.append((recording, recorded_conversation(recording)))
            except ValueError as exc:
                raise RecordingError(f"{recording.source}: {exc}") from None
            index = recording.rollout_index
            order = (0, index, position) if index is not None else (1, 0, position)
            tasks.setdefault((task.key, task.tools), []).append((order, recording, turns))
        self._candidates: dict[Key, list[_Candidate]] = {}
        for (_, tools), members in tasks.items():
            members.sort(key=lambda member: member[0])
            for rank, (_, recording, turns) in enumerate(members):
                for key, turn in turns:
                    self._candidates.setdefault(key, []).append(_Candidate(turn, recording, tools, rank, len(members)))
        self._served: dict[tuple[Key, Tools | None], int] = {}
        self._explained: dict[tuple[Key, Tools | None, tuple[str, ...]], str] = {}
        self._lock = threading.Lock()

    @property
    def recordings(self) -> int:
        """Number of recordings indexed."""
        return len(self._whole)

    def _matching(self, conversation: Conversation) -> list[_Candidate]:
        return [
            candidate
            for candidate in self._candidates.get(conversation.key, ())
            if candidate.tools is None or candidate.tools == conversation.tools
        ]

    @staticmethod
    def _for_repeat(candidates: Sequence[_Candidate], repeat: int) -> _Candidate:
        for candidate in candidates:
            if candidate.rank == repeat % candidate.count:
                return candidate
        return candidates[repeat % len(candidates)]

    def answer(self, conversation: Conversation, repeat: int | None) -> Turn | None:
        """The recorded turn that answers ``conversation`` for repeat ``repeat`` (None: untagged, answered by
        the per-conversation counter, which this call advances), or None when nothing was recorded for it."""
        candidates = self._matching(conversation)
        if not candidates:
            return None
        if repeat is not None:
            return self._for_repeat(candidates, repeat).turn
        with self._lock:
            served = self._served.get((conversation.key, conversation.tools), 0)
            self._served[(conversation.key, conversation.tools)] = served + 1
        return candidates[served % len(candidates)].turn

    def recordings_for(self, params: Mapping[str, Any]) -> list[Recording]:
        """The recordings whose first turn answers a task's request (``responses_create_params``): for a
        request tagged with a repeat (:func:`repeat_tag`), the one recording the server serves that repeat;
        untagged, every one of them in repeat order (which one was served depends on arrival). Empty when
        none was recorded. Raises ``ValueError`` for an ill-formed request or tag."""
        conversation = request_conversation(params)
        candidates = self._matching(conversation)
        repeat = repeat_tag(params)
        if candidates and repeat is not None:
            return [self._for_repeat(candidates, repeat).recording]
        return list({id(c.recording): c.recording for c in candidates}.values())

    def unmatched_message(self, conversation: Conversation) -> str:
        """The message of the HTTP 404 a conversation with no recorded turn gets: ``no recorded answer: the
        conversation`` + :meth:`explain` + the number of recordings loaded."""
        explanation = self.explain(conversation)
        return f"no recorded answer: the conversation {explanation} ({self.recordings} recordings loaded)"

    def explain(self, conversation: Conversation) -> str:
        """Why no recorded turn answers ``conversation``, as words completing "the conversation ...": one line
        naming the closest recording and where the conversation departs from it (package docstring), about 250
        characters besides the recording's path."""
        cache = (conversation.key, conversation.tools, conversation.where)
        with self._lock:
            known = self._explained.get(cache)
        if known is None:
            known = self._explain(conversation)
            with self._lock:
                if len(self._explained) >= 256:
                    self._explained.clear()
                self._explained[cache] = known
        return known

    def _explain(self, conversation: Conversation) -> str:
        key = conversation.key
        if not self._whole:
            return "has nothing to match: no recordings are loaded"
        if not key:
            return "holds no items"
        recorded = self._candidates.get(key)
        if recorded:
            first = recorded[0]
            return (
                f"matches recording {first.recording.source} but not its tool definitions: "
                f"request has {_tool_names(conversation.tools)}, recording has {_tool_names(first.tools)}"
            )
        shared = [(_common_prefix(key, whole.key), position) for position, (_, whole) in enumerate(self._whole)]
        longest = max(length for length, _ in shared)
        closest = [position for length, position in shared if length == longest]
        if len(closest) > 1 and longest < len(key):  # the most alike first; file order among equals
            closest.sort(key=lambda p: _likeness(key[longest], self._whole[p][1].key, longest), reverse=True)
        recording, whole = self._whole[closest[0]]
        source = recording.source
        if longest < len(key) and longest < len(whole.key):
            mine, theirs = key[longest], whole.key[longest]
            where = conversation.where[longest]
            if _kind(mine) != _kind(theirs):
                return (
                    f"departs from the closest recording ({source}) at {where}: request has {_a(_kind(mine))} "
                    f"{_snippet(_body(mine))}, recording has {_a(_kind(theirs))} {_snippet(_body(theirs))}"
                )
            ours, its = _contrast(mine, theirs)
            return (
                f"departs from the closest recording ({source}) at {where} ({_kind(mine)}): "
                f"request has {ours}, recording has {its}"
            )
        if longest < len(key):
            item = key[longest]
            return (
                f"continues past the end of the closest recording ({source}) at {conversation.where[longest]}: "
                f"request has {_a(_kind(item))} {_snippet(_body(item))}"
            )
        if longest < len(whole.key):
            item = whole.key[longest]
            return (
                f"stops inside the closest recording ({source}): after {conversation.where[-1]} the recording "
                f"continues with {whole.where[longest]}, {_a(_kind(item))} {_snippet(_body(item))}, not a model answer"
            )
        return f"is the whole of recording {source}, which holds no model answer after its last item"


def explain_unmatched(
    body: Mapping[str, Any], rollouts: Sequence[str | os.PathLike[str]], *, chat: bool = False
) -> str | None:
    """The 404 message the replay server gives a request ``body`` (Responses create-params, or chat-completions
    params with ``chat=True``) when replaying ``rollouts``, or None when a recording answers it.

    Raises ``RecordingError`` for a rollouts file that cannot be replayed and ``ValueError`` for an ill-formed
    request.
    """
    index = ReplayIndex(load_recordings(rollouts))
    conversation = request_conversation(body, chat=chat)
    if index.answer(conversation, repeat_tag(body) or 0) is not None:
        return None
    return index.unmatched_message(conversation)


def _common_prefix(first: Sequence[Any], second: Sequence[Any]) -> int:
    """Number of leading elements two sequences share (items of two conversations, characters of two texts)."""
    length = 0
    for mine, theirs in zip(first, second, strict=False):
        if mine != theirs:
            break
        length += 1
    return length


def _likeness(item: NormItem, whole: Key, position: int) -> tuple[int, int, int]:
    """How much of ``item`` the recording's item at ``position`` shares: same kind, equal content parts
    (texts and media markers) in place, then leading characters of the body."""
    if position >= len(whole):
        return (0, 0, 0)
    theirs = whole[position]
    same_kind = int(_kind(item) == _kind(theirs))
    mine_parts, their_parts = _parts(_body(item)), _parts(_body(theirs))
    equal_parts = sum(1 for a, b in zip(mine_parts, their_parts, strict=False) if a == b)
    return (same_kind, equal_parts, _common_prefix(_body(item), _body(theirs)))


def _parts(text: str) -> list[str]:
    return [part for part in re.split(f"({MARK}[^{MARK}]*{MARK})", text) if part]


def _kind(item: NormItem) -> str:
    """What a normalised item is, in words: ``user message``, ``function_call get_weather``, ..."""
    if item[0] == "message":
        return f"{item[1]} message"
    if item[0] == "function_call":
        return f"function_call {item[1]}"
    if item[0] == "function_call_output":
        return f"function_call_output of {item[1]}"
    return item[0]


def _a(words: str) -> str:
    """``words`` with its indefinite article."""
    return f"{'an' if words[:1] in tuple('aeio') else 'a'} {words}"  # (a user, a unit)


def _body(item: NormItem) -> str:
    """The part of a normalised item that :func:`_kind` does not name (text, arguments and call id, output)."""
    if item[0] == "function_call":
        return f"{item[2]} (call_id {item[3]})"
    return item[-1]


def _tool_names(tools: Tools | None) -> str:
    if tools is None:
        return "no tools"
    names = []
    for tool in tools:
        with contextlib.suppress(ValueError, AttributeError):
            definition = json.loads(tool)
            names.append(str(definition.get("name") or definition.get("type")))
    return "[" + ", ".join(names) + "]"


def _snippet(text: str, start: int = 0, width: int = 60) -> str:
    """Up to ``width`` characters of displayed ``text`` from ``start``, quoted, ``...`` where cut."""
    shown = display(text)
    piece = shown[start : start + width]
    quoted = json.dumps(piece, ensure_ascii=False)
    return ("..." if start else "") + quoted + ("..." if start + width < len(shown) else "")


def _contrast(mine: NormItem, theirs: NormItem) -> tuple[str, str]:
    """The two bodies quoted from a little before where they first differ."""
    first, second = display(_body(mine)), display(_body(theirs))
    start = max(0, _common_prefix(first, second) - 20)
    space = first.rfind(" ", max(0, start - 15), start)
    start = space + 1 if start and space >= 0 else start  # from the start of a word when one is near
    return _snippet(_body(mine), start), _snippet(_body(theirs), start)
