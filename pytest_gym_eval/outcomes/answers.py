"""Which rollouts gave the same policy answer: a digest of the policy's answer in a Gym rollout record, so that the
rewards one answer got from several judgments (repeats over replayed answers) can be told from the rewards of
different answers (:mod:`pytest_gym_eval.stats.judge_noise`)."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any

DIGEST_CHARS = 16
"""Hex characters of :func:`answer_digest` (64 bits: two different answers of one task never share one)."""

_THINK = re.compile(r"<think>.*?</think>", re.DOTALL)
_NOT_CONTENT = frozenset({"id", "status", "call_id"})


def _text(value: Any) -> Any:
    """A message's content or a tool call's output as compared: text with ``<think>`` blocks removed and runs of
    whitespace made one space; a JSON text parsed; a list of parts each so (a text part as its text)."""
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError:
            return " ".join(_THINK.sub("", value).split())
        return parsed if isinstance(parsed, (dict, list)) else " ".join(_THINK.sub("", value).split())
    if isinstance(value, list):
        parts: list[Any] = [part.get("text") if isinstance(part, dict) and "text" in part else part for part in value]
        texts = [part for part in parts if isinstance(part, str)]
        if len(texts) == len(parts):
            return " ".join(_THINK.sub("", "".join(texts)).split())
        return [_text(part) if isinstance(part, str) else _canonical(part) for part in parts]
    return _canonical(value)


def _canonical(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _canonical(item) for key, item in value.items() if key not in _NOT_CONTENT}
    if isinstance(value, list):
        return [_canonical(item) for item in value]
    return value


def _item(item: Mapping[str, Any]) -> Any:
    kind = item.get("type", "message")
    if kind == "message":
        return ["message", item.get("role"), _text(item.get("content"))]
    if kind == "function_call":
        return ["function_call", item.get("name"), _text(item.get("arguments"))]
    if kind == "function_call_output":
        return ["function_call_output", _text(item.get("output"))]
    return [kind, _canonical(dict(item))]


def answer_digest(record: Mapping[str, Any]) -> str | None:
    """A digest of the policy's answer in a Gym rollout record (``response.output``), the same for two records
    exactly when their answers are the same: every output item in order but ``reasoning`` items (the reasoning a
    verifier is not shown, and which a replayed or a temperature-0 policy may vary), messages by role and text
    (``<think>`` blocks removed, whitespace runs as one space), tool calls by name and arguments and tool results by
    output (JSON compared parsed, call ids ignored), any other item without its ``id``/``status``/``call_id``.
    :data:`DIGEST_CHARS` hex characters of its SHA-256; None when the record has no ``response.output`` list.
    Never raises."""
    response = record.get("response")
    output = response.get("output") if isinstance(response, Mapping) else None
    if not isinstance(output, list):
        return None
    items = [_item(item) for item in output if isinstance(item, Mapping) and item.get("type") != "reasoning"]
    text = json.dumps(items, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:DIGEST_CHARS]
