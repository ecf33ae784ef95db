"""Replay recorded NeMo Gym rollouts through a loopback OpenAI-compatible model server.

A Gym rollouts file (``*_rollouts.jsonl``) holds one recorded rollout per line: the request sent for
a task (``responses_create_params``) and the Responses API object the agent returned (``response``),
whose ``output`` is the whole trajectory: model items (``reasoning``, assistant ``message``,
``function_call``) interleaved with the items the environment added (``function_call_output``, and
user messages in multi-turn environments).

Every maximal run of model items in ``output`` is one *turn*. It is indexed under the normalised
conversation that preceded it (instructions + input + the earlier output items), so an agent that
re-sends that conversation, through ``POST /v1/responses`` or ``POST /v1/chat/completions``, gets the
recorded turn back.

**The conversation** is everything the model is shown as context, in order, and all of it takes part in
the match:

- the request's ``instructions`` (as a leading system message);
- every ``input`` item (``messages`` for chat completions): system, developer (read as system), user and
  assistant messages with all their content parts: text, images (``input_image``; chat ``image_url``),
  files (``input_file``; chat ``file``), audio (``input_audio``; vLLM's ``audio_url``; and the
  ``metadata.audio_data``/``audio_path``/``audio_paths`` side channel, spliced before the content of the
  last user message as Gym's ``vllm_model`` does), video (``input_video``, ``video_url``) and refusals;
- tool calls (name, arguments, call id) and tool results (call id, output with all its parts);
- any other item type (``computer_call``, ...), as its canonical JSON without ``id`` and ``status``;
- the tool definitions, when the recording has any (non-empty ``tools``): the request must then offer the
  same set (type, name, description, parameters; order and ``strict`` ignored). A recording without tools
  matches whatever tools the request offers, since agents may add tools of their own that the recorded
  row does not carry.

Not part of it: generation settings (``model``, ``temperature``, ``max_output_tokens``, ``reasoning``,
``text``, ``tool_choice``, ...), ``metadata`` other than the audio side channel, item ids and ``status``,
and reasoning (``reasoning`` items and ``<think>...</think>`` blocks). Reasoning is the model's own
earlier output echoed back, and whether it reaches the model depends on the model server (Gym's
``openai_model`` passes reasoning items through or drops them, its ``vllm_model`` keeps one ``<think>``
block per message as ``reasoning_content`` or none, and this server's chat answers carry none), so it
cannot be compared across the two APIs; a later turn stays with its recording through the tool call ids
and texts of the turns before it, and through the repeat tag.

Normal form (:func:`normalise_items`), one for Responses items and chat messages
(:func:`chat_messages_to_items`), so that what Gym changes between the dataset row and the request that
reaches the model does not matter:

- a message is ``("message", role, content)``. Its content is its text parts joined, each non-text part
  replaced by a marker ``"\\x00<kind> <identity>[ <attribute>]\\x00"`` in its place. An image, file, audio
  or video is identified by the sha256 of its bytes when they are inline (a base64 or percent-encoded
  ``data:`` URL, or bare base64) or an absolute path to a readable file, else by its URL or ``file_id``;
  so ``input_image`` with ``image_url`` as a string or as ``{"url": ...}``, and chat's ``image_url``
  part, are one image. An image's ``detail`` counts unless it is ``auto`` (the default), a file's
  ``filename`` counts. Surrounding whitespace is ignored.
- a ``function_call`` is ``("function_call", name, arguments, call_id)``, a ``function_call_output``
  ``("function_call_output", call_id, output)``; arguments and a JSON output are re-dumped with sorted
  keys (tools and recordings differ in whitespace), an output's parts become content as above.
- any other item is ``(type, canonical JSON without id/status)``.
- Responses→chat converters (Gym's among them) merge a model turn into one assistant message and fold a
  leading run of system messages into one, so the normal form does the same: each run of assistant
  messages and function calls becomes one assistant message (texts joined, ``<think>`` blocks removed,
  omitted when empty) followed by the calls in order, and a leading run of system messages becomes one
  message joined by blank lines.

**Which recording answers.** The recordings of one task (one conversation and tool set) are put in
*repeat order*: by ``_ng_rollout_index`` (recordings that have one first), then file order. A request
whose ``metadata`` carries :data:`~pytest_gym_eval.plan.REPEAT_TAG` = *r* (the plugin tags each row of
Gym's input with its repeat under ``--gym-replay``; Gym's model servers pass ``metadata`` through to the
endpoint) is answered at every turn from recording *r mod n* of its task's *n*, whatever order requests
arrive in, and a retried request gets the same answer; should no recorded turn of that recording share
the conversation, the one at *r mod m* in repeat order among the *m* that do answers. An untagged
request is answered by a counter per conversation: the *k*-th request (from 0) of one conversation gets
the *k mod m*-th of its recorded turns in repeat order, so the order of arrival decides which repeat
gets which recording, never which answers are served.

**No recording.** A conversation with no recorded turn gets HTTP 404 with a one-line message
(:meth:`ReplayIndex.unmatched_message`) naming the closest recording (the longest shared prefix of normalised
items; ties go to the one sharing more of the first item that differs, then to file order) and where
the request departs from it, e.g. ``no recorded answer: the conversation departs from the closest
recording (r.jsonl:3) at input[1] (user message): request has "[image sha256:1a2b3c4d5e6f]How many...",
recording has "[image sha256:9f8e7d6c5b4a]How many..." (5 recordings loaded)``.

Command line: ``python -m pytest_gym_eval replay ROLLOUTS.jsonl [...] [--port N] [--model-name NAME]
[--log PATH] [--delay SECONDS]``.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import contextlib
import copy
import functools
import hashlib
import json
import math
import os
import re
import signal
import socket
import socketserver
import sys
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import jsonlines

from pytest_gym_eval import cli
from pytest_gym_eval.plan import REPEAT_TAG

__all__ = [
    "REPEAT_TAG",
    "Conversation",
    "Recording",
    "RecordingError",
    "ReplayIndex",
    "ReplayServer",
    "Turn",
    "canonical_arguments",
    "chat_answer",
    "chat_messages_to_items",
    "content_normal",
    "content_text",
    "conversation_key",
    "display",
    "explain_unmatched",
    "is_model_item",
    "item_type",
    "load_recordings",
    "main",
    "normalise_item",
    "normalise_items",
    "part_normal",
    "recorded_conversation",
    "recording_turns",
    "repeat_tag",
    "request_conversation",
    "request_items",
    "responses_answer",
    "split_turns",
    "tools_signature",
]

NormItem = tuple[str, ...]
"""One normalised conversation item, e.g. ``("message", "user", "Hi")``."""

Key = tuple[NormItem, ...]
"""A normalised conversation: the lookup key of a recorded turn."""

Tools = tuple[str, ...]
"""Normalised tool definitions (:func:`tools_signature`): sorted canonical JSON, one per tool."""

_THINK_BLOCK = re.compile(r"<think>.*?</think>", re.DOTALL)
_BOOKKEEPING_FIELDS = frozenset({"id", "status"})
_TEXT_PARTS = frozenset({"input_text", "output_text", "text", "summary_text", "reasoning_text"})
_MARK = "\x00"
_MARKER = re.compile("\x00([^\x00]*)\x00")
_DIGEST = re.compile(r"sha256:([0-9a-f]{12})[0-9a-f]{52}")


class RecordingError(ValueError):
    """A rollouts file cannot be replayed; the message starts with ``file:line`` (or ``file``)."""


# --------------------------------------------------------------------------------------------------
# Normalisation
# --------------------------------------------------------------------------------------------------


def item_type(item: Mapping[str, Any]) -> str:
    """The ``type`` of a Responses item; an item without ``type`` but with a ``role`` is a ``message``."""
    kind = item.get("type")
    if kind is None and "role" in item:
        return "message"
    return str(kind)


def content_text(content: Any) -> str:
    """Text of a message content or tool output: a string as is, a list of parts as their ``text`` joined.

    Parts without a string ``text`` (images, audio) contribute nothing; any other value gives ``""``.
    This is the text an answer shows, not the matching form (see :func:`content_normal`).
    """
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part["text"] for part in content if isinstance(part, dict) and isinstance(part.get("text"), str))
    return ""


def canonical_arguments(arguments: Any) -> str:
    """Function-call arguments as canonical text: JSON re-dumped with sorted keys, else the raw string."""
    if isinstance(arguments, str):
        try:
            parsed = json.loads(arguments)
        except ValueError:
            return arguments
    else:
        parsed = arguments
    return json.dumps(parsed, sort_keys=True, ensure_ascii=False)


def _canonical(value: Any) -> str:
    """Compact canonical JSON (sorted keys) of any JSON value."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def _marker(kind: str, identity: str, *attributes: str) -> str:
    """A non-text content part as it stands in normalised content (see the module docstring)."""
    return _MARK + " ".join((kind, identity, *attributes)) + _MARK


def _bytes_identity(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


@functools.lru_cache(maxsize=1024)
def _url_identity(url: str) -> str:
    """Identity of media given by URL: the sha256 of the bytes of a ``data:`` URL, else the URL itself."""
    if not url.startswith("data:"):
        return url
    header, comma, payload = url.partition(",")
    if not comma:
        return url
    if header.endswith(";base64"):
        try:
            return _bytes_identity(base64.b64decode(payload))
        except (binascii.Error, ValueError):
            return _bytes_identity(payload.encode("utf-8", errors="surrogatepass"))
    return _bytes_identity(urllib.parse.unquote_to_bytes(payload))


@functools.lru_cache(maxsize=1024)
def _data_identity(data: str) -> str:
    """Identity of inline media: a ``data:`` URL as :func:`_url_identity`, else bare base64's bytes."""
    if data.startswith("data:"):
        return _url_identity(data)
    try:
        return _bytes_identity(base64.b64decode(data, validate=True))
    except (binascii.Error, ValueError):
        return _bytes_identity(data.encode("utf-8", errors="surrogatepass"))


def _path_identity(path: str) -> str:
    """Identity of media named by a path: the sha256 of an absolute path's file, else the path itself."""
    if os.path.isabs(path):
        with contextlib.suppress(OSError):
            digest = hashlib.sha256()
            with open(path, "rb") as stream:
                for block in iter(lambda: stream.read(1 << 20), b""):
                    digest.update(block)
            return "sha256:" + digest.hexdigest()
    return "path:" + path


def _source(value: Any) -> str | None:
    """A media source given as a string or as ``{"url": ...}``."""
    if isinstance(value, Mapping):
        value = value.get("url")
    return value if isinstance(value, str) and value else None


def _media_identity(part: Mapping[str, Any], *url_fields: str) -> str:
    """Identity of a media part: its first URL field, else inline data, ``file_id``, path or URL."""
    for name in url_fields:
        url = _source(part.get(name))
        if url is not None:
            return _url_identity(url)
    for name, identify in (("file_data", _data_identity), ("data", _data_identity), ("path", _path_identity)):
        value = part.get(name)
        if isinstance(value, str) and value:
            return identify(value)
    for name in ("file_id", "file_url"):
        value = part.get(name)
        if isinstance(value, str) and value:
            return f"{name}:{value}" if name == "file_id" else value
    return _canonical({name: value for name, value in part.items() if name != "type"})


def part_normal(part: Any) -> str:
    """One content part in normal form: a text part's text, any other part a marker (module docstring)."""
    if isinstance(part, str):
        return part
    if not isinstance(part, Mapping):
        return _marker("part", _canonical(part))
    kind = part.get("type")
    if kind in _TEXT_PARTS or (kind is None and isinstance(part.get("text"), str)):
        text = part.get("text")
        return text if isinstance(text, str) else ""
    if kind == "refusal":
        return _marker("refusal", str(part.get("refusal", "")))
    if kind in ("input_image", "image_url", "image"):
        source = part.get("image_url")
        detail = source.get("detail") if isinstance(source, Mapping) else None
        detail = detail or part.get("detail")
        extra = () if detail in (None, "auto") else (f"detail={detail}",)
        return _marker("image", _media_identity(part, "image_url"), *extra)
    if kind in ("input_file", "file"):
        nested = part.get("file")
        body: Mapping[str, Any] = nested if isinstance(nested, Mapping) else part
        filename = body.get("filename")
        extra = (f"filename={filename}",) if isinstance(filename, str) and filename else ()
        return _marker("file", _media_identity(body), *extra)
    if kind in ("input_audio", "audio_url", "audio"):
        nested = part.get("input_audio")
        return _marker("audio", _media_identity(nested if isinstance(nested, Mapping) else part, "audio_url"))
    if kind in ("input_video", "video_url", "video"):
        return _marker("video", _media_identity(part, "video_url", "video"))
    return _marker(str(kind), _canonical({name: value for name, value in part.items() if name != "type"}))


def content_normal(content: Any) -> str:
    """A message content or tool output in normal form: a string as is, a list of parts as
    :func:`part_normal` of each joined; null or missing is ``""``, any other value its canonical JSON."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part_normal(part) for part in content)
    return _canonical(content)


def normalise_item(item: Mapping[str, Any]) -> NormItem | None:
    """Normal form of one Responses item (see the module docstring); ``None`` for a ``reasoning`` item.

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
    system messages (see the module docstring). Each folded item keeps the label of its first source."""
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


def _normalise_labelled(items: Labelled) -> tuple[Key, tuple[str, ...]]:
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
    return _normalise_labelled([(f"#{position}", item) for position, item in enumerate(items)])[0]


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


def _labelled_request_items(params: Mapping[str, Any]) -> list[tuple[str, Any]]:
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
    ``metadata`` audio side channel spliced into the last user message (see the module docstring).

    Raises ``ValueError`` when ``input`` is neither a string nor a list, or ``instructions`` is not a string.
    """
    return [item for _, item in _labelled_request_items(params)]


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
            signature.append(_canonical(tool))
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
        signature.append(_canonical({"type": kind, **kept}))
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
        labelled = _labelled_request_items(body)
    key, where = _normalise_labelled(labelled)
    return Conversation(key, where, tools_signature(body.get("tools")))


def conversation_key(params: Mapping[str, Any]) -> Key:
    """The normal form of a task's request (``responses_create_params``): how a rollout finds its recordings
    (with :func:`tools_signature` of its ``tools``). Raises ``ValueError`` for an ill-formed ``input``."""
    return request_conversation(params).key


# --------------------------------------------------------------------------------------------------
# Recordings and turns
# --------------------------------------------------------------------------------------------------


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
    labelled = _labelled_request_items(recording.params)
    labelled += [(f"output[{position}]", item) for position, item in enumerate(recording.response["output"])]
    key, where = _normalise_labelled(labelled)
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


# --------------------------------------------------------------------------------------------------
# The index: which recorded turn answers a conversation, and why none does
# --------------------------------------------------------------------------------------------------


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
    """Every recorded turn by conversation, with each task's recordings in repeat order (module docstring).

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
        naming the closest recording and where the conversation departs from it (module docstring), about 250
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
    return [part for part in re.split(f"({_MARK}[^{_MARK}]*{_MARK})", text) if part]


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


def display(text: str) -> str:
    """Normalised content as people read it: media markers as ``[image sha256:1a2b3c4d5e6f]``."""
    return _MARKER.sub(lambda match: "[" + _DIGEST.sub(r"sha256:\1", match[1]) + "]", text)


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


# --------------------------------------------------------------------------------------------------
# Answers
# --------------------------------------------------------------------------------------------------


def _turn_text(turn: Turn) -> str:
    """Joined text of the turn's assistant messages."""
    return "".join(
        content_text(item.get("content"))
        for item in turn.items
        if item_type(item) == "message" and item.get("role") == "assistant"
    )


def responses_answer(turn: Turn, *, response_id: str, model: str, now: float) -> dict[str, Any]:
    """A Responses API object for ``turn``: a copy of the recorded response with the turn's items as
    ``output``, the given ``id``, ``model`` and ``created_at`` (``now``, seconds since the epoch), and
    ``parallel_tool_calls``/``tool_choice``/``tools`` defaulted to ``True``/``"auto"``/``[]``.
    A non-final turn is reported ``completed`` (the recorded status describes the whole trajectory).
    """
    answer = copy.deepcopy(turn.response)
    answer.update(
        id=response_id, object="response", created_at=now, model=model, output=copy.deepcopy(list(turn.items))
    )
    for name, default in (("parallel_tool_calls", True), ("tool_choice", "auto"), ("tools", [])):
        if answer.get(name) is None:
            answer[name] = default
    if not turn.final:
        answer["status"] = "completed"
        answer["incomplete_details"] = None
    return answer


def _arguments_text(arguments: Any) -> str:
    """Recorded function-call arguments as the JSON string chat completions carry."""
    return arguments if isinstance(arguments, str) else json.dumps(arguments)


def chat_answer(turn: Turn, *, completion_id: str, model: str, now: float) -> dict[str, Any]:
    """A ``chat.completion`` object for ``turn``: one assistant choice whose ``content`` is the joined
    message text (``None`` when empty) and whose ``tool_calls`` (present only when the turn has
    function calls) carry the recorded call ids; reasoning is omitted. ``now`` is in seconds."""
    calls = [
        {
            "id": item.get("call_id", ""),
            "type": "function",
            "function": {
                "name": item.get("name", ""),
                "arguments": _arguments_text(item.get("arguments", "")),
            },
        }
        for item in turn.items
        if item_type(item) == "function_call"
    ]
    message: dict[str, Any] = {"role": "assistant", "content": _turn_text(turn) or None}
    if calls:
        message["tool_calls"] = calls
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": int(now),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}],
        "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
    }


# --------------------------------------------------------------------------------------------------
# HTTP server
# --------------------------------------------------------------------------------------------------


class _HttpError(Exception):
    """An error answered as ``{"error": {...}}`` with an HTTP status."""

    def __init__(self, status: int, message: str, error_type: str, code: str) -> None:
        super().__init__(message)
        self.status = status
        self.body = {"error": {"message": message, "type": error_type, "code": code}}


class _HttpServer(ThreadingHTTPServer):
    """Threading HTTP server that knows its :class:`ReplayServer` and can drop open connections."""

    daemon_threads = True
    request_queue_size = socket.SOMAXCONN
    """The listen backlog. socketserver's default of 5 overflowed when Gym opened many connections at once: the
    kernel dropped the extra SYNs and each of those requests waited for TCP's retransmissions (1, 3, 7, 15 s),
    which stalled a 200-rollout run from ~10 s to ~36 s at random (``TcpExtListenOverflows`` counted them)."""

    def __init__(self, address: tuple[str, int], replay: ReplayServer) -> None:
        self.replay = replay
        self._connections: set[socket.socket] = set()
        self._connections_lock = threading.Lock()
        super().__init__(address, _Handler)

    def server_bind(self) -> None:
        """Bind without HTTPServer's reverse DNS lookup of the host (slow on some machines)."""
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = str(self.server_address[0]), int(self.server_address[1])

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._connections_lock:
            self._connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._connections_lock:
            self._connections.discard(request)
        super().shutdown_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hung up before its answer was written (Gym gave up on a request) is no error of the
        server's: say nothing. Anything else is printed as socketserver prints it."""
        if isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            return
        super().handle_error(request, client_address)

    def close_connections(self) -> None:
        """Shut down idle keep-alive connections so their handler threads end."""
        with self._connections_lock:
            connections = list(self._connections)
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)


class _Handler(BaseHTTPRequestHandler):
    """Reads one request, lets :meth:`ReplayServer._answer` answer it, writes JSON back."""

    protocol_version = "HTTP/1.1"
    server: _HttpServer

    def log_message(self, format: str, *args: Any) -> None:
        """Silence the default stderr access log."""

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def _serve(self, method: str) -> None:
        length = self.headers.get("Content-Length", "")
        if length.isdigit():
            raw = self.rfile.read(int(length))
        else:  # e.g. a chunked body: unread, so this connection cannot carry another request
            raw = b""
            self.close_connection = True
        status, payload = self.server.replay._answer(method, self.path, raw)
        data = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data)


class ReplayServer:
    """Loopback OpenAI-compatible model server answering from recorded Gym rollouts.

    ``rollouts`` are ``*_rollouts.jsonl`` paths, loaded (and validated) here: ``RecordingError``
    names the bad ``file:line``. Serves ``GET /v1/models``, ``POST /v1/responses`` and
    ``POST /v1/chat/completions`` on ``host`` (an IPv4 address; loopback by default) and ``port``
    (0: a free port chosen by the OS) once :meth:`start` is called. Which recording answers a request is
    :class:`ReplayIndex`'s choice (module docstring); an unmatched conversation gets HTTP 404
    ``{"error": {"type": "not_found", "code": "no_recording", "message": ...}}`` whose message is
    :meth:`ReplayIndex.unmatched_message`, and a malformed request or repeat tag HTTP 400.
    When ``log_path`` is given, each request is appended to it as one JSON line (``time`` in seconds
    since the epoch, ``method``, ``path``, ``status``, ``request`` body, and ``answer`` summary, with the
    ``recording`` and ``repeat`` tag, or ``error``); request headers are never logged. ``model_name`` is
    listed by ``/v1/models`` and used when neither the request nor the recording names a model.
    Usable as a context manager (``with ReplayServer([...]) as server:`` starts and stops it).
    """

    def __init__(
        self,
        rollouts: Sequence[str | os.PathLike[str]],
        *,
        log_path: Path | None = None,
        model_name: str = "replay",
        host: str = "127.0.0.1",
        port: int = 0,
        delay: float = 0.0,
    ) -> None:
        self._index = ReplayIndex(load_recordings(rollouts))
        self._delay = delay
        self._closing = threading.Event()
        self._log_path = log_path
        self._model_name = model_name
        self._host = host
        self._requested_port = port
        self._port: int | None = None
        self._httpd: _HttpServer | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._log_lock = threading.Lock()
        self._requests = 0

    # ---- lifecycle ----------------------------------------------------------------------------

    def start(self) -> None:
        """Bind and serve in a background daemon thread. Raises ``OSError`` when the port cannot be
        bound and ``RuntimeError`` when already started."""
        with self._lock:
            if self._httpd is not None:
                raise RuntimeError("replay server is already running")
            httpd = _HttpServer((self._host, self._requested_port), self)
            self._port = int(httpd.server_address[1])
            self._thread = threading.Thread(target=httpd.serve_forever, name="replay-server", daemon=True)
            self._thread.start()
            self._httpd = httpd

    def stop(self) -> None:
        """Stop serving, close the listening socket and open connections. Idempotent."""
        with self._lock:
            httpd, thread = self._httpd, self._thread
            self._httpd = self._thread = None
        if httpd is None:
            return
        self._closing.set()
        httpd.shutdown()
        httpd.server_close()
        httpd.close_connections()
        if thread is not None:
            thread.join()

    def __enter__(self) -> ReplayServer:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # ---- properties ---------------------------------------------------------------------------

    @property
    def port(self) -> int:
        """The bound TCP port. Raises ``RuntimeError`` before :meth:`start`."""
        if self._port is None:
            raise RuntimeError("replay server has not been started")
        return self._port

    @property
    def base_url(self) -> str:
        """OpenAI base URL, ``http://<host>:<port>/v1``. Raises ``RuntimeError`` before :meth:`start`."""
        return f"http://{self._host}:{self.port}/v1"

    @property
    def recordings(self) -> int:
        """Number of recorded rollouts (non-blank lines) loaded."""
        return self._index.recordings

    @property
    def request_count(self) -> int:
        """Number of HTTP requests received so far (any path or status)."""
        with self._lock:
            return self._requests

    # ---- request handling ---------------------------------------------------------------------

    def _answer(self, method: str, raw_path: str, raw_body: bytes) -> tuple[int, dict[str, Any]]:
        """Answer one request: ``(HTTP status, JSON body)``; logs it when a log path is set."""
        with self._lock:
            self._requests += 1
            number = self._requests
        path = raw_path.split("?", 1)[0].rstrip("/")
        body: Any = None
        entry: dict[str, Any] = {"time": time.time(), "method": method, "path": raw_path}
        try:
            if method == "POST":
                body = _parse_body(raw_body)
            status, payload, summary = self._route(method, path, body, number)
            entry["answer"] = summary
        except _HttpError as exc:
            status, payload = exc.status, exc.body
            entry["error"] = str(exc)
        except Exception as exc:  # a bug must not kill the connection silently
            status = 500
            payload = {"error": {"message": f"replay server error: {exc!r}", "type": "server_error", "code": None}}
            entry["error"] = repr(exc)
        if self._log_path is not None:
            entry["status"] = status
            entry["request"] = body if body is not None else _text(raw_body)
            with self._log_lock, jsonlines.open(self._log_path, mode="a") as log:
                log.write(entry)
        return status, payload

    def _route(self, method: str, path: str, body: Any, number: int) -> tuple[int, dict[str, Any], Any]:
        """Dispatch to an endpoint: ``(status, JSON body, log summary)``; raises ``_HttpError``."""
        if method == "GET" and path == "/v1/models":
            listed = {"id": self._model_name, "object": "model", "created": 0, "owned_by": "pytest-gym-eval"}
            return 200, {"object": "list", "data": [listed]}, "model list"
        if method == "POST" and path in ("/v1/responses", "/v1/chat/completions"):
            return self._replay(body, chat=path == "/v1/chat/completions", number=number)
        raise _HttpError(404, f"no such endpoint: {method} {path or '/'}", "not_found", "unknown_path")

    def _replay(self, body: dict[str, Any], *, chat: bool, number: int) -> tuple[int, dict[str, Any], Any]:
        """Answer a responses (``chat=False``) or chat-completions request from the recordings."""
        try:
            conversation = request_conversation(body, chat=chat)
            repeat = repeat_tag(body)
        except ValueError as exc:
            raise _HttpError(400, f"invalid request: {exc}", "invalid_request_error", "invalid_request") from None
        if self._delay:
            self._closing.wait(self._delay)
        turn = self._index.answer(conversation, repeat)
        if turn is None:
            raise _HttpError(404, self._index.unmatched_message(conversation), "not_found", "no_recording")
        requested = body.get("model")
        model = requested if isinstance(requested, str) and requested else None
        model = model or str(turn.response.get("model") or self._model_name)
        if chat:
            answer = chat_answer(turn, completion_id=f"chatcmpl-replay-{number}", model=model, now=time.time())
        else:
            answer = responses_answer(turn, response_id=f"resp_replay_{number}", model=model, now=time.time())
        summary = {
            "id": answer["id"],
            "recording": turn.source,
            "repeat": repeat,
            "items": [item_type(item) for item in turn.items],
            "text": _turn_text(turn)[:200],
        }
        return 200, answer, summary


def _parse_body(raw: bytes) -> dict[str, Any]:
    """A request body as a JSON object; raises ``_HttpError`` (400) otherwise."""
    if not raw:
        raise _HttpError(
            400, "empty request body (send a JSON object with Content-Length)", "invalid_request_error", "bad_json"
        )
    try:
        body = json.loads(raw.decode("utf-8"))
    except ValueError as exc:  # includes UnicodeDecodeError
        raise _HttpError(400, f"request body is not valid JSON: {exc}", "invalid_request_error", "bad_json") from None
    if not isinstance(body, dict):
        raise _HttpError(400, "request body must be a JSON object", "invalid_request_error", "bad_json")
    return body


def _text(raw: bytes) -> str | None:
    """A raw request body for the log (``None`` when empty)."""
    return raw.decode("utf-8", errors="replace") if raw else None


# --------------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------------


def _port(text: str) -> int:
    """An argparse type: a TCP port number, 0 (any free port) to 65535."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number, got {text!r}") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port from 0 (any free one) to 65535, got {port}")
    return port


def _seconds(text: str) -> float:
    """An argparse type: a finite number of seconds >= 0."""
    try:
        seconds = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if not (math.isfinite(seconds) and seconds >= 0):
        raise argparse.ArgumentTypeError(f"expected a finite number of seconds >= 0, got {text!r}")
    return seconds


def main(argv: list[str]) -> int:
    """``python -m pytest_gym_eval replay ROLLOUTS.jsonl [...] [--port N] [--model-name NAME] [--log PATH]``.

    Prints ``replay model server listening on <base_url> (<n> recordings)`` once serving, serves until
    SIGINT or SIGTERM, then stops and returns 0. Returns 2 (error on stderr) for a bad rollouts file or a log
    that cannot be written, 1 when the port cannot be bound; argparse exits with 2 on bad usage (a port outside
    0..65535, a delay that is not a finite number >= 0).
    """
    parser = argparse.ArgumentParser(
        prog="python -m pytest_gym_eval replay",
        description="Serve recorded NeMo Gym rollouts as an OpenAI-compatible model on 127.0.0.1.",
    )
    parser.add_argument("rollouts", nargs="+", metavar="ROLLOUTS.jsonl", help="Gym rollouts file(s) to replay")
    parser.add_argument("--port", type=_port, default=0, help="TCP port (default: a free port)")
    parser.add_argument("--model-name", default="replay", help="model id listed by /v1/models")
    parser.add_argument(
        "--log", type=Path, default=None, metavar="PATH",
        help="append a JSON line per request (default: replay-model-<pid>.jsonl in the temp directory)",
    )  # fmt: skip
    parser.add_argument("--delay", type=_seconds, default=0.0, metavar="SECONDS", help="hold each answer back")
    args = parser.parse_args(argv)
    log_path = args.log or Path(tempfile.gettempdir()) / f"replay-model-{os.getpid()}.jsonl"
    try:  # now, not on the first request (which would fail without an answer)
        with open(log_path, "a", encoding="utf-8"):
            pass
    except OSError as exc:
        cli.error("replay", f"--log: cannot write {log_path}: {exc.strerror or exc}")
        return 2
    try:
        server = ReplayServer(
            args.rollouts, log_path=log_path, model_name=args.model_name, port=args.port, delay=args.delay
        )
    except RecordingError as exc:
        cli.error("replay", exc)
        return 2
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        try:
            server.start()
        except OSError as exc:
            cli.error("replay", f"cannot listen on 127.0.0.1:{args.port}: {exc}")
            return 1
        print(f"replay model server listening on {server.base_url} ({server.recordings} recordings)", flush=True)
        print(f"logging every request and answer to {log_path}", flush=True)
        while not stop.wait(timeout=1.0):
            pass
    finally:
        server.stop()
        for sig, handler in previous.items():
            if handler is not None:
                signal.signal(sig, handler)
    return 0
