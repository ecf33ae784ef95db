"""Conversations in normal form: Responses items and chat messages alike, folded as Responses-to-chat converters fold
them, with their tool definitions and repeat tag (see the package docstring).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_gym_eval.replay.content import canonical, canonical_arguments, content_normal
from pytest_gym_eval.tasks.plan import REPEAT_TAG

NormItem = tuple[str, ...]
"""One normalised conversation item, e.g. ``("message", "user", "Hi")``."""
Key = tuple[NormItem, ...]
"""A normalised conversation: the lookup key of a recorded turn."""
Tools = tuple[str, ...]
"""Normalised tool definitions (:func:`tools_signature`): sorted canonical JSON, one per tool."""
_THINK_BLOCK = re.compile(r"<think>.*?</think>", re.DOTALL)
_BOOKKEEPING_FIELDS = frozenset({"id", "status"})


def item_type(item: Mapping[str, Any]) -> str:
    """The ``type`` of a Responses item; an item without ``type`` but with a ``role`` is a ``message``."""
    kind = item.get("type")
    if kind is None and "role" in item:
        return "message"
    return str(kind)


def normalise_item(item: Mapping[str, Any]) -> NormItem | None:
    """Normal form of one Responses item (see the package docstring); ``None`` for a ``reasoning`` item.

    Message texts are kept verbatim here: :func:`normalise_items` strips and folds them.
    """
    kind = item_type(item)
    if kind == "message":
        role = str(item.get("role", "user"))
        return ("message", "system" if role == "developer" else role, content_normal(item.get("content")))
    if kind == "function_call":
        name = str(item.get("name", ""))
        return ("function_call", name, canonical_arguments(item.get("arguments", "")), str(item.get("call_id", "")))
    if kind == "function_call_output":
        # Tools serialise JSON results with varying whitespace (recorded `{"a": 1}`, live `{"a":1}`).
        output = canonical_arguments(content_normal(item.get("output")))
        return ("function_call_output", str(item.get("call_id", "")), output)
    if kind == "reasoning":
        return None
    rest = {name: value for name, value in item.items() if name not in _BOOKKEEPING_FIELDS}
    return (kind, json.dumps(rest, sort_keys=True, ensure_ascii=False))


Labelled = Sequence[tuple[str, Any]]
"""Conversation items, each with where it came from (``"input[2]"``, ``"instructions"``, ...)."""


def _fold(entries: Iterable[tuple[NormItem, str]]) -> tuple[Key, tuple[str, ...]]:
    """Strip message texts; merge each run of assistant messages and function calls, and the leading
    system messages (see the package docstring). Each folded item keeps the label of its first source."""
    folded: list[tuple[NormItem, str]] = []
    texts: list[str] = []
    text_label: list[str] = []
    calls: list[tuple[NormItem, str]] = []

    def flush() -> None:
        text = _THINK_BLOCK.sub("", "".join(texts)).strip()
        if text:
            folded.append((("message", "assistant", text), text_label[0]))
        folded.extend(calls)
        texts.clear()
        text_label.clear()
        calls.clear()

    for item, label in entries:
        if item[:2] == ("message", "assistant"):
            texts.append(item[2])
            text_label.append(label)
        elif item[0] == "function_call":
            calls.append((item, label))
        else:
            flush()
            folded.append(((*item[:2], item[2].strip()) if item[0] == "message" else item, label))
    flush()
    systems = 0
    while systems < len(folded) and folded[systems][0][:2] == ("message", "system"):
        systems += 1
    if systems > 1:
        joined = "\n\n".join(entry[0][2] for entry in folded[:systems])
        folded[:systems] = [(("message", "system", joined), folded[0][1])]
    return tuple(entry[0] for entry in folded), tuple(entry[1] for entry in folded)


def normalise_labelled(items: Labelled) -> tuple[Key, tuple[str, ...]]:
    """:func:`normalise_items` of labelled items, with the label of each normalised item."""
    entries: list[tuple[NormItem, str]] = []
    for label, item in items:
        if not isinstance(item, Mapping):
            raise ValueError(f"conversation item {label} is a {type(item).__name__}, not an object")
        entry = normalise_item(item)
        if entry is not None:
            entries.append((entry, label))
    return _fold(entries)


def normalise_items(items: Iterable[Any]) -> Key:
    """Normal form of a conversation given as Responses items (the lookup key).

    Raises ``ValueError`` when an item is not a JSON object.
    """
    return normalise_labelled([(f"#{position}", item) for position, item in enumerate(items)])[0]


def _metadata_audio(metadata: Any) -> list[dict[str, Any]]:
    """Audio parts of the ``metadata`` side channel, in the precedence Gym's vllm_model gives its keys."""
    if not isinstance(metadata, Mapping):
        return []
    if isinstance(metadata.get("audio_data"), str) and metadata["audio_data"]:
        return [{"type": "audio_url", "audio_url": {"url": metadata["audio_data"]}}]
    if isinstance(metadata.get("audio_path"), str) and metadata["audio_path"]:
        return [{"type": "audio", "path": metadata["audio_path"]}]
    paths = metadata.get("audio_paths")
    if isinstance(paths, list) and paths:
        return [{"type": "audio", "path": str(path)} for path in paths]
    return []


def labelled_request_items(params: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """:func:`request_items` with labels: ``instructions``, ``input[i]``."""
    raw_input = params.get("input")
    items: list[tuple[str, Any]]
    if raw_input is None:
        items = []
    elif isinstance(raw_input, str):
        items = [("input", {"type": "message", "role": "user", "content": raw_input})]
    elif isinstance(raw_input, list):
        items = [(f"input[{position}]", item) for position, item in enumerate(raw_input)]
    else:
        raise ValueError(f"`input` must be a string or a list of items, not {type(raw_input).__name__}")
    instructions = params.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        raise ValueError(f"`instructions` must be a string, not {type(instructions).__name__}")
    if instructions:
        items.insert(0, ("instructions", {"type": "message", "role": "system", "content": instructions}))
    audio = _metadata_audio(params.get("metadata"))
    if audio:
        for position in range(len(items) - 1, -1, -1):
            label, item = items[position]
            if isinstance(item, Mapping) and item_type(item) == "message" and item.get("role") == "user":
                content = item.get("content")
                rest = [{"type": "input_text", "text": content}] if isinstance(content, str) else content or []
                items[position] = (label, {**item, "content": [*audio, *rest]})
                break
        else:
            items.append(("metadata", {"type": "message", "role": "user", "content": audio}))
    return items


def request_items(params: Mapping[str, Any]) -> list[Any]:
    """Conversation items of Responses create-params: ``instructions`` (as a leading system message)
    followed by ``input`` (a string is one user message; missing or null is empty), with the
    ``metadata`` audio side channel spliced into the last user message (see the package docstring).

    Raises ``ValueError`` when ``input`` is neither a string nor a list, or ``instructions`` is not a string.
    """
    return [item for _, item in labelled_request_items(params)]


def _labelled_chat_items(messages: Sequence[Any]) -> list[tuple[str, dict[str, Any]]]:
    """:func:`chat_messages_to_items` with labels: ``messages[i]``, ``messages[i].tool_calls[j]``."""
    items: list[tuple[str, dict[str, Any]]] = []
    for position, message in enumerate(messages):
        label = f"messages[{position}]"
        if not isinstance(message, Mapping):
            raise ValueError(f"message #{position} is a {type(message).__name__}, not an object")
        role = message.get("role")
        if role == "tool":
            output = {"type": "function_call_output", "call_id": message.get("tool_call_id", ""),
                      "output": message.get("content")}  # fmt: skip
            items.append((label, output))
            continue
        content = message.get("content")
        refusal = message.get("refusal")
        if isinstance(refusal, str) and refusal:
            parts = [{"type": "text", "text": content}] if isinstance(content, str) else list(content or [])
            content = [*parts, {"type": "refusal", "refusal": refusal}]
        items.append((label, {"type": "message", "role": role, "content": content}))
        for number, call in enumerate(message.get("tool_calls") or []):
            if not isinstance(call, Mapping):
                raise ValueError(f"a tool call of message #{position} is not an object")
            function = call.get("function") or {}
            function_call = {"type": "function_call", "call_id": call.get("id", ""),
                             "name": function.get("name", ""), "arguments": function.get("arguments", "")}  # fmt: skip
            items.append((f"{label}.tool_calls[{number}]", function_call))
    return items


def chat_messages_to_items(messages: Sequence[Any]) -> list[dict[str, Any]]:
    """Chat-completions ``messages`` as Responses items, so both APIs share one normal form.

    An assistant message becomes a message item (its ``refusal`` a refusal part) plus one
    ``function_call`` per ``tool_calls`` entry (call_id = the tool call's ``id``); a ``tool`` message
    becomes a ``function_call_output`` with call_id = ``tool_call_id``; any other message keeps its role
    and content. Raises ``ValueError`` when a message or tool call is not a JSON object.
    """
    return [item for _, item in _labelled_chat_items(messages)]


def tools_signature(tools: Any) -> Tools | None:
    """Normal form of tool definitions (Responses or chat form), or None when there are none.

    Each tool becomes canonical JSON of its type and definition (a chat tool's nested ``function``/
    ``custom`` object unwrapped, a chat grammar format flattened as Responses has it), without ``strict``,
    ``defer_loading`` and empty values; the list is sorted, so order does not count.
    """
    if not isinstance(tools, list) or not tools:
        return None
    signature = []
    for tool in tools:
        if not isinstance(tool, Mapping):
            signature.append(canonical(tool))
            continue
        kind = tool.get("type")
        nested = tool.get(kind) if isinstance(kind, str) else None
        body = dict(nested) if isinstance(nested, Mapping) else {k: v for k, v in tool.items() if k != "type"}
        grammar = body.get("format")
        if isinstance(grammar, Mapping) and isinstance(grammar.get("grammar"), Mapping):
            body["format"] = {"type": grammar.get("type"), **grammar["grammar"]}
        kept = {
            name: value
            for name, value in body.items()
            if name not in ("strict", "defer_loading") and value is not None and value != "" and value != {}
        }
        signature.append(canonical({"type": kind, **kept}))
    return tuple(sorted(signature))


def repeat_tag(body: Mapping[str, Any]) -> int | None:
    """The repeat a request is tagged with (``metadata[REPEAT_TAG]``, a non-negative integer or its decimal
    string), or None when untagged. Raises ``ValueError`` for a tag that is not such a number."""
    metadata = body.get("metadata")
    if not isinstance(metadata, Mapping) or metadata.get(REPEAT_TAG) is None:
        return None
    value = metadata[REPEAT_TAG]
    if isinstance(value, str) and value.isascii() and value.isdigit():
        return int(value)
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    raise ValueError(f"`metadata.{REPEAT_TAG}` must be a non-negative integer, not {value!r}")


@dataclass(frozen=True)
class Conversation:
    """A normalised conversation: ``key`` its items, ``where`` the label of each item's first source
    (``"input[3]"``, ``"instructions"``, ``"messages[2]"``, ``"output[1]"``), ``tools`` its tool definitions
    (:func:`tools_signature`)."""

    key: Key
    where: tuple[str, ...]
    tools: Tools | None


def request_conversation(body: Mapping[str, Any], *, chat: bool = False) -> Conversation:
    """The conversation of a request body: Responses create-params (``chat=False``: ``instructions`` +
    ``input``) or chat-completions params (``messages``), with its ``tools``.

    Raises ``ValueError`` for an ill-formed ``input``, ``instructions`` or ``messages``.
    """
    if chat:
        messages = body.get("messages")
        if not isinstance(messages, list):
            raise ValueError("`messages` must be a list")
        labelled: Labelled = _labelled_chat_items(messages)
    else:
        labelled = labelled_request_items(body)
    key, where = normalise_labelled(labelled)
    return Conversation(key, where, tools_signature(body.get("tools")))


def conversation_key(params: Mapping[str, Any]) -> Key:
    """The normal form of a task's request (``responses_create_params``): how a rollout finds its recordings
    (with :func:`tools_signature` of its ``tools``). Raises ``ValueError`` for an ill-formed ``input``."""
    return request_conversation(params).key
