"""Turning a rollout into a test outcome, and the text a failed or errored item shows.

A reward at or above the pass threshold passes; below it fails. Anything that is not a verifier's verdict
(a failures-file row, a rollout that never came, a missing, non-numeric or NaN reward) is an *error*, never
a reward of 0. An error's message starts with its cause (for a failures-file row, the root cause
:func:`pytest_gym_eval.outcomes.causes.diagnose` finds: which server failed, the HTTP status, the endpoint's own error
text), then the log line that shows it, then Gym's own record of the failure.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from pytest_gym_eval.outcomes.causes import BAD_REWARD, Cause, diagnose
from pytest_gym_eval.outcomes.records import Missing, RolloutRecord

TRIM = 400
"""Characters of a prompt or an answer a failure message shows."""

Status = Literal["passed", "failed", "error"]
PassHook = Callable[[RolloutRecord, float, float], "bool | None"]
"""``(record, reward, threshold) -> passed?``; None leaves the decision to the threshold."""
Diagnose = Callable[[RolloutRecord], Cause]
"""``(failures-file record) -> its root cause`` (see :func:`pytest_gym_eval.outcomes.causes.diagnose`)."""


@dataclass(frozen=True)
class RolloutOutcome:
    """The verdict on one rollout.

    ``reward`` is the numeric reward (None for an error); ``failure_class`` names an error's cause (one of
    :data:`pytest_gym_eval.outcomes.causes.CLASSES`); ``message`` explains an error, its first line the cause;
    ``log`` names a log to read that ``message`` does not already name; ``cause`` is the root cause found for
    a rollout Gym recorded as failed.
    """

    status: Status
    reward: float | None
    record: RolloutRecord | None = None
    failure_class: str | None = None
    message: str = ""
    log: str = ""
    cause: Cause | None = None


def judge(
    found: RolloutRecord | Missing,
    threshold: float,
    hook: PassHook | None = None,
    explain: Diagnose | None = None,
) -> RolloutOutcome:
    """Decide pass, fail or error for what the feed returned for one rollout.

    ``threshold`` is the minimum passing reward (same units as the verifier's reward). ``hook`` may override
    the pass/fail decision of a scored rollout (see the ``pytest_gym_eval_rollout_passed`` hook). ``explain``
    finds the root cause of a rollout Gym recorded as failed (without it, Gym's own class and message stand).
    """
    if isinstance(found, Missing):
        return RolloutOutcome("error", None, failure_class=found.failure_class, message=found.reason, log=found.log)
    if found.failure_class is not None:
        cause = explain(found) if explain is not None else _gym_cause(found)
        return RolloutOutcome("error", None, found, cause.failure_class, gym_failure_text(found, cause), cause=cause)
    reward = found.numeric_reward()
    if reward is None:
        what = (
            "has no reward" if found.reward is None else f"has a reward that is not a finite number: {found.reward!r}"
        )
        text = f"the rollout {what}\nrecord: {found.path}:{found.line}"
        return RolloutOutcome("error", None, found, BAD_REWARD, text)
    decided = hook(found, reward, threshold) if hook is not None else None
    passed = reward >= threshold if decided is None else bool(decided)
    return RolloutOutcome("passed" if passed else "failed", reward, found)


def _gym_cause(record: RolloutRecord) -> Cause:
    return diagnose({"_ng_failure_class": record.failure_class, "_ng_failure_message": record.failure_message})


def gym_failure_text(record: RolloutRecord, cause: Cause) -> str:
    """The message of a rollout Gym recorded as failed: the cause, the log line that shows it, Gym's own record.

    When the cause was traced past Gym's wrapper (``cause.found``) the lines are ``<cause>``, ``log:
    <path:line>``, ``Gym recorded the rollout as failed (<class>: <Gym's message>)``, ``record: <path:line>``;
    otherwise Gym's class and message come first.
    """
    if not cause.found:
        return f"{clean_gym_message(cause.summary)}\nrecord: {record.path}:{record.line}"
    lines = [cause.summary]
    if cause.log:
        lines.append(f"log: {cause.log}")
    gym = f"Gym recorded the rollout as failed ({record.failure_class}"
    if record.failure_message:
        gym += f": {clean_gym_message(record.failure_message, 200)}"
    lines += [gym + ")", f"record: {record.path}:{record.line}"]
    return "\n".join(lines)


def clean_gym_message(text: str, limit: int = 600) -> str:
    """Gym's failure text with its nested escaping collapsed, trimmed to ``limit`` characters."""
    text = re.sub(r"\\+(['\"])", r"\1", text)
    text = re.sub(r"\\+n", " ", text)
    text = re.sub(r"([\"'])\1+", r"\1", text)
    return trim(" ".join(text.split()), limit)


def trim(text: str, limit: int = TRIM, keep_end: bool = False) -> str:
    """``text`` cut to ``limit`` characters, marking the cut; ``keep_end`` keeps the last characters instead
    (a model's final answer sits at the end of its output)."""
    if len(text) <= limit:
        return text
    return "…" + text[-(limit - 1) :] if keep_end else text[: limit - 1] + "…"


def message_text(content: Any) -> str:
    """The text of a message's ``content`` (a string, or a list of parts with ``text``)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


def prompt_text(record: dict[str, Any], row: dict[str, Any] | None = None) -> str:
    """The last user message of the rollout's request (or of the dataset row), '' when there is none."""
    for source in (record, row or {}):
        params = source.get("responses_create_params")
        if not isinstance(params, dict):
            continue
        items = params.get("input")
        if isinstance(items, str):
            return items
        if isinstance(items, list):
            for item in reversed(items):
                if isinstance(item, dict) and item.get("role") == "user":
                    return message_text(item.get("content"))
    return ""


def output_text(record: dict[str, Any]) -> str:
    """The text of the model's last message in the rollout's response, '' when there is none."""
    response = record.get("response")
    outputs = response.get("output") if isinstance(response, dict) else None
    if not isinstance(outputs, list):
        return ""
    for item in reversed(outputs):
        if isinstance(item, dict) and item.get("type", "message") == "message" and item.get("role") == "assistant":
            text = message_text(item.get("content"))
            if text:
                return text
    return ""


def expected_answer(record: dict[str, Any], row: dict[str, Any] | None = None) -> str | None:
    """The expected answer from the rollout record or the dataset row, when either has one."""
    for source in (record, row or {}):
        for key in ("expected_answer", "expected_output", "answer", "ground_truth", "target"):
            value = source.get(key)
            if value not in (None, ""):
                return str(value)
    return None


MAX_STEPS = 10
"""Tool calls and intermediate messages a failure shows before "… and N more steps"."""
STEP_TRIM = 160
"""Characters of a tool call's arguments, of its result, or of an intermediate message, a failure shows."""

_NOT_TASK_FIELDS = frozenset({"responses_create_params", "response", "agent_ref", "reward", "id", "uuid", "task_id"})


def steps(record: dict[str, Any]) -> list[str]:
    """The rollout's steps before its final answer, one line each: every tool call with its arguments and the
    result it got back (``get_weather({"city":"SF"}) -> {"weather": "cold"}``), and every message the model
    wrote before its last one (``said: ...``); each part trimmed to :data:`STEP_TRIM` characters. Empty for a
    rollout that only answered."""
    response = record.get("response")
    outputs = response.get("output") if isinstance(response, dict) else None
    if not isinstance(outputs, list):
        return []
    items = [item for item in outputs if isinstance(item, dict)]
    results = {item.get("call_id"): item.get("output") for item in items if item.get("type") == "function_call_output"}
    messages = [i for i, item in enumerate(items) if item.get("type", "message") == "message"]
    last_message = messages[-1] if messages else len(items)
    found: list[str] = []
    for index, item in enumerate(items):
        kind = item.get("type", "message")
        if kind == "function_call":
            call = f"{item.get('name', '?')}({trim(_compact(item.get('arguments')), STEP_TRIM)})"
            result = results.get(item.get("call_id"))
            found.append(
                call + (f" -> {trim(_compact(result), STEP_TRIM)}" if result is not None else " -> (no result)")
            )
        elif kind == "message" and index != last_message and item.get("role") == "assistant":
            text = message_text(item.get("content"))
            if text:
                found.append(f"said: {trim(' '.join(text.split()), STEP_TRIM)}")
    return found


def _compact(value: Any) -> str:
    """A tool's arguments or result as one line of text (JSON strings are shown as their JSON)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return " ".join(value.split())
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def task_fields(record: dict[str, Any], row: dict[str, Any] | None = None) -> str:
    """The task's fields that are not its request (from the dataset row, else the record's verifier fields), as
    one trimmed JSON object: what a failure shows when no field holds an expected answer under a known name."""
    source = row if row else record
    fields = {k: v for k, v in source.items() if k not in _NOT_TASK_FIELDS and not k.startswith("_ng_")}
    return trim(json.dumps(fields, ensure_ascii=False, default=str), TRIM) if fields else ""


MAX_VERIFIER_FIELDS = 12
"""Fields the verifier recorded beside the reward that a failure shows before "… and N more fields"."""
_EXPECTED_KEYS = ("expected_answer", "expected_output", "answer", "ground_truth", "target")


def verifier_fields(record: dict[str, Any], row: dict[str, Any] | None = None) -> list[str]:
    """What the verifier recorded beside the reward, one ``name: value`` each (value as compact JSON, so a
    missing extraction shows as ``extracted_answer: null``, each trimmed to :data:`STEP_TRIM` characters).

    Leaves out the request and response, Gym's ``_ng_`` stamps, the task's id fields, the expected answer
    (shown on a line of its own) and every field the dataset row holds with the same value (the task, echoed).
    """
    expected_key = next((key for key in _EXPECTED_KEYS if record.get(key) not in (None, "")), None)
    if expected_key is None and row:
        expected_key = next((key for key in _EXPECTED_KEYS if row.get(key) not in (None, "")), None)
    found = []
    for key, value in record.items():
        if key in _NOT_TASK_FIELDS or key.startswith("_ng_") or key == expected_key:
            continue
        if row and key in row and row[key] == value:
            continue
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
        found.append(f"{key}: {trim(text, STEP_TRIM)}")
    return found


def failure_report(outcome: RolloutOutcome, threshold: float, row: dict[str, Any] | None = None) -> str:
    """The text a failed item shows: the reward, the prompt, the expected answer (else the task's other fields),
    the steps (tool calls with their results, earlier messages), the final output, every field the verifier
    recorded (``verifier:``, nulls included) and where the record is."""
    record = outcome.record
    full = record.read_full() if record is not None else {}
    lines = [f"reward {outcome.reward:g} is below the pass threshold {threshold:g}"]
    if outcome.reward is not None and outcome.reward >= threshold:
        lines = [f"reward {outcome.reward:g} (a pytest_gym_eval_rollout_passed hook failed the rollout)"]
    prompt = prompt_text(full, row)
    lines.append(f"prompt:   {_indent(trim(prompt))}" if prompt else "prompt:   (no user message)")
    expected = expected_answer(full, row)
    if expected is not None:
        lines.append(f"expected: {_indent(trim(expected))}")
    elif fields := task_fields(full, row):
        lines.append(f"task:     {fields}")
    taken = steps(full)
    for number, step in enumerate(taken[:MAX_STEPS], 1):
        lines.append(f"{'steps:' if number == 1 else '':<10}{number}. {step}")
    if len(taken) > MAX_STEPS:
        lines.append(f"{'':<10}… and {len(taken) - MAX_STEPS} more steps")
    answer = output_text(full)
    lines.append(
        f"output:   {_indent(trim(answer, keep_end=True))}" if answer else "output:   (the model gave no text)"
    )
    recorded = verifier_fields(full, row)
    for number, field in enumerate(recorded[:MAX_VERIFIER_FIELDS]):
        lines.append(f"{'verifier:' if number == 0 else '':<10}{field}")
    if len(recorded) > MAX_VERIFIER_FIELDS:
        lines.append(f"{'':<10}… and {len(recorded) - MAX_VERIFIER_FIELDS} more fields")
    if record is not None:
        lines.append(f"record:   {record.path}:{record.line}")
    return "\n".join(lines)


def _indent(text: str) -> str:
    return text.replace("\n", "\n          ")
