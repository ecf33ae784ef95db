"""Rollout transcripts for the HTML report: the full records Gym wrote, read back from ``path:line`` and cut
down to what a person reads (every message, tool call and tool result, the final output, what the verifier
recorded, token usage, and Gym's failure details for an errored rollout).

A transcript is plain JSON data (it is embedded in the page as JSON and rendered on click)::

    {"items": [{"kind": "message", "role": "user", "text": "..."},
               {"kind": "tool_call", "name": "get_weather", "arguments": "{...}", "call_id": "call_1"},
               {"kind": "tool_result", "call_id": "call_1", "text": "..."},
               {"kind": "reasoning", "text": "..."},
               {"kind": "other", "type": "web_search_call", "text": "{...}"}],
     "output_from": 1,          # items before this index are the request, from it on the model's turns
     "final": 3,                # index of the model's last message with text, or null
     "expected": "C",           # the expected answer when the record has one, else null
     "verifier": {"extracted_answer": null},  # what the verifier recorded beside the reward, nulls included
     "usage": {"input_tokens": 70, "output_tokens": 40, "total_tokens": 110},  # or null
     "failure": {"message": "...", "http_status": 500},   # Gym's other _ng_failure_* keys, or null
     "tools": ["get_weather"]}

Every text is cut to :data:`TEXT_LIMIT` characters (its start and end kept, the cut marked), so one huge
record cannot make the page unusable; the record itself stays whole in Gym's file.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_gym_eval.core.files import iter_json_lines
from pytest_gym_eval.outcomes.outcome import clean_gym_message, expected_answer, message_text

TEXT_LIMIT = 20_000
"""Characters of any one text (message, tool result, verifier value) a transcript keeps."""
VALUE_LIMIT = 2_000
"""Characters of one verifier or failure value (compact JSON when it is not a string)."""

_EXPECTED_KEYS = ("expected_answer", "expected_output", "answer", "ground_truth", "target")
_NOT_VERIFIER = {"responses_create_params", "response", "reward", "agent_ref"}
_FAILURE_PREFIX = "_ng_failure_"


def cut(text: str, limit: int = TEXT_LIMIT) -> str:
    """``text`` whole when it fits ``limit`` characters, else its first three quarters and last quarter of
    ``limit`` around a line saying how many characters were left out (of the record, still whole on disk)."""
    if len(text) <= limit:
        return text
    head, tail = limit * 3 // 4, limit // 4
    return f"{text[:head]}\n[… {len(text) - head - tail:,} characters left out here: see the record …]\n{text[-tail:]}"


def _compact(value: object, limit: int = VALUE_LIMIT) -> object:
    """A scalar as it is (strings cut to ``limit``; NaN and infinities, which JSON cannot hold, as text);
    anything else as compact JSON text cut to ``limit``."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, str):
        return cut(value, limit)
    return cut(json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str), limit)  # NaN as NaN


def _item(entry: object) -> dict[str, Any]:
    """One Responses API input or output item as a transcript item."""
    if isinstance(entry, str):
        return {"kind": "message", "role": "user", "text": cut(entry)}
    if not isinstance(entry, Mapping):
        return {"kind": "other", "type": type(entry).__name__, "text": str(_compact(entry, TEXT_LIMIT))}
    kind = entry.get("type") or ("message" if "role" in entry else "")
    if kind == "message":
        return {"kind": "message", "role": str(entry.get("role") or "assistant"), "text": cut(_text(entry))}
    if kind in ("function_call", "custom_tool_call"):
        arguments = entry.get("arguments", entry.get("input", ""))
        return {
            "kind": "tool_call",
            "name": str(entry.get("name") or ""),
            "arguments": cut(arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)),
            "call_id": str(entry.get("call_id") or entry.get("id") or ""),
        }
    if kind in ("function_call_output", "custom_tool_call_output"):
        output = entry.get("output", "")
        text = output if isinstance(output, str) else message_text(output) or json.dumps(output, ensure_ascii=False)
        return {"kind": "tool_result", "call_id": str(entry.get("call_id") or ""), "text": cut(text)}
    if kind == "reasoning":
        parts = [message_text(entry.get(key)) for key in ("summary", "content")]
        return {"kind": "reasoning", "text": cut("\n\n".join(part for part in parts if part))}
    return {"kind": "other", "type": str(kind or "unknown"), "text": str(_compact(dict(entry), TEXT_LIMIT))}


def _text(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):  # Responses API parts: output_text, input_text, refusal, ...
        parts = []
        for part in content:
            if isinstance(part, Mapping):
                parts.append(str(part.get("text") or part.get("refusal") or ""))
        return "".join(parts)
    return message_text(content)


def transcript(record: Mapping[str, Any], row: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The transcript (layout in the module docstring) of one record of Gym's rollouts or failures file.

    ``row`` is the rollout's input row (see :func:`input_rows`): the request and the expected answer come from
    it when the record has none (Gym's failures file keeps neither).
    """
    params = record.get("responses_create_params")
    if not isinstance(params, Mapping) and row is not None:
        params = row.get("responses_create_params")
    params = params if isinstance(params, Mapping) else {}
    items: list[dict[str, Any]] = []
    instructions = params.get("instructions")
    if isinstance(instructions, str) and instructions:
        items.append({"kind": "message", "role": "instructions", "text": cut(instructions)})
    request = params.get("input")
    items.extend(_item(entry) for entry in (request if isinstance(request, list) else [request] if request else []))
    output_from = len(items)
    response = record.get("response")
    response = response if isinstance(response, Mapping) else {}
    outputs = response.get("output")
    items.extend(_item(entry) for entry in (outputs if isinstance(outputs, list) else []))
    final = None
    for index in range(len(items) - 1, output_from - 1, -1):
        item = items[index]
        if item["kind"] == "message" and item["role"] == "assistant" and item["text"]:
            final = index
            break
    expected = expected_answer(dict(record), dict(row) if row is not None else None)
    expected_key = next((key for key in _EXPECTED_KEYS if record.get(key) not in (None, "")), None)
    verifier = {
        key: _compact(value)
        for key, value in record.items()
        if key not in _NOT_VERIFIER and key != expected_key and not key.startswith("_ng_")
    }  # nulls included: ``extracted_answer: null`` is what explains a reward of 0
    failure = {
        key[len(_FAILURE_PREFIX) :]: _compact(value)
        for key, value in record.items()
        if key.startswith(_FAILURE_PREFIX) and key != _FAILURE_PREFIX + "class" and value is not None
    }  # the class is the rollout's failure_class, shown with it
    for key, value in failure.items():
        if isinstance(value, str):  # Gym's messages nest escaped server replies: collapse the escaping
            failure[key] = clean_gym_message(value, VALUE_LIMIT)
    tools = params.get("tools")
    return {
        "items": items,
        "output_from": output_from,
        "final": final,
        "expected": None if expected is None else cut(expected, VALUE_LIMIT),
        "verifier": verifier,
        "usage": _usage(response.get("usage")),
        "failure": failure or None,
        "tools": [str(t.get("name")) for t in tools if isinstance(t, Mapping) and t.get("name")]
        if isinstance(tools, list)
        else [],
    }


def _usage(usage: object) -> dict[str, int] | None:
    """Token counts of a Responses API ``usage`` (input, output, total, and reasoning/cached when given)."""
    if not isinstance(usage, Mapping):
        return None
    counts: dict[str, int] = {}
    for key in ("input_tokens", "output_tokens", "total_tokens", "prompt_tokens", "completion_tokens"):
        value = usage.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            counts[key] = value
    for details, key in (("output_tokens_details", "reasoning_tokens"), ("input_tokens_details", "cached_tokens")):
        inner = usage.get(details)
        value = inner.get(key) if isinstance(inner, Mapping) else None
        if isinstance(value, int) and not isinstance(value, bool) and value:
            counts[key] = value
    return counts or None


def read_records(locations: Sequence[str | None]) -> tuple[list[dict[str, Any] | None], list[str]]:
    """The records at each ``path:LINE`` of ``locations`` (1-based lines), and the problems met.

    One entry per location: the record's JSON object, or None when the location is None, its file or line
    does not exist, or the line is not a JSON object. Each file is read once, front to back, however many of
    its lines are asked for (10,000 records of one rollouts file: one pass). The problems are sentences naming
    the file, e.g. ``/run/gym-output/rollouts.jsonl: no such file (24 records)``.
    """
    wanted: dict[str, dict[int, list[int]]] = {}
    for index, location in enumerate(locations):
        if not location:
            continue
        path, _, line = location.rpartition(":")
        if not path or not line.isdigit():
            continue
        wanted.setdefault(path, {}).setdefault(int(line), []).append(index)
    records: list[dict[str, Any] | None] = [None] * len(locations)
    problems: list[str] = []
    for path, lines in wanted.items():
        count = sum(len(indices) for indices in lines.values())
        try:
            found = _read_lines(Path(path), lines, records)
        except FileNotFoundError:
            problems.append(f"{path}: no such file ({count} record{'s' if count != 1 else ''})")
            continue
        except OSError as error:
            problems.append(f"{path}: cannot be read ({error.strerror or error})")
            continue
        missing = len(lines) - found
        if missing:
            problems.append(f"{path}: {missing} of the {len(lines)} lines asked for are missing or not JSON objects")
    return records, problems


def _read_lines(path: Path, lines: Mapping[int, list[int]], records: list[dict[str, Any] | None]) -> int:
    """Put the JSON object on each wanted line of ``path`` into ``records`` at the indices ``lines`` maps it
    to; returns how many wanted lines held one. Stops after the last wanted line."""
    last = max(lines)
    found = 0
    values = iter_json_lines(path, skip_invalid=True)
    try:
        for number, value in values:
            if number > last:
                break
            if number in lines and isinstance(value, dict):
                found += 1
                for index in lines[number]:
                    records[index] = value
            if number == last:
                break
    finally:
        values.close()  # closes the file now, also after an early stop
    return found


MATERIALIZED_SUFFIX = "_materialized_inputs.jsonl"
"""``gym eval run --output X.jsonl`` writes every input row it ran, stamped, to ``X_materialized_inputs.jsonl``."""


def input_rows(
    locations: Sequence[str | None], records: Sequence[Mapping[str, Any] | None]
) -> list[dict[str, Any] | None]:
    """The input row of each record that lacks its request (``responses_create_params``), else None.

    Gym's failures file (``X_failures.jsonl``) keeps only the failure and the row's ``_ng_task_index`` /
    ``_ng_rollout_index``; the row itself is in ``X_materialized_inputs.jsonl`` beside it, found by those two
    stamps. Each such file is read once; a file that is gone or unreadable leaves the rows None.
    """
    wanted: dict[Path, dict[tuple[object, object], list[int]]] = {}
    for index, (location, record) in enumerate(zip(locations, records, strict=True)):
        if not location or record is None or isinstance(record.get("responses_create_params"), Mapping):
            continue
        path = Path(location.rpartition(":")[0])
        stem = path.name.removesuffix(".jsonl").removesuffix("_failures")
        key = (record.get("_ng_task_index"), record.get("_ng_rollout_index", 0))
        wanted.setdefault(path.with_name(stem + MATERIALIZED_SUFFIX), {}).setdefault(key, []).append(index)
    rows: list[dict[str, Any] | None] = [None] * len(locations)
    for path, keys in wanted.items():
        try:
            for _, row in iter_json_lines(path, skip_invalid=True):
                if not isinstance(row, dict):
                    continue
                for index in keys.get((row.get("_ng_task_index"), row.get("_ng_rollout_index", 0)), []):
                    rows[index] = row
        except OSError:
            continue
    return rows
