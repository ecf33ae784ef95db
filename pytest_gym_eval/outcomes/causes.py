"""The root cause of a rollout Gym recorded as failed, found in its failure record and its servers' logs.

Whatever goes wrong at the model endpoint, Gym's failures file says the same thing: ``agent_run_error``, ``500,
message='Internal Server Error', url=.../run``. The cause is further in, in two places this module reads: the record's
``_ng_failure_response_body`` (the body the agent's ``/run`` answered with, one layer per server: :func:`unwrap` has its
shape) and the servers' logs (:class:`~pytest_gym_eval.outcomes.server_logs.ServerLogs` has what they hold).

:func:`diagnose` turns a failure record into a :class:`Cause`: a one-line summary naming the server that failed,
the HTTP status and the endpoint's own error text, a failure class (see :data:`CLASSES`) and the ``path:line`` of
the log line that shows it. :class:`ServerLogs` indexes the logs once, reading only what was appended since.
:func:`redact` keeps API keys out of every text this module returns. What users see: docs/outcomes.md.
"""

from __future__ import annotations

import codecs
import errno
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_gym_eval.core.credentials import redact_value
from pytest_gym_eval.outcomes.server_logs import TRIP_LINE as TRIP_LINE
from pytest_gym_eval.outcomes.server_logs import TRIP_MARKER as TRIP_MARKER
from pytest_gym_eval.outcomes.server_logs import (
    Claimant,
    LoggedException,
    UpstreamFailure,
    _repr_type,
    json_string,
    trim,
)
from pytest_gym_eval.outcomes.server_logs import ServerLogs as ServerLogs
from pytest_gym_eval.outcomes.server_logs import eval_progress as eval_progress

GYM_START = "gym_start"
GYM_EXITED = "gym_exited"
ROLLOUT_TIMEOUT = "rollout_timeout"
SESSION_STOPPED = "session_stopped"
NOT_PLANNED = "not_planned"
BAD_REWARD = "bad_reward"
REPLAY_NO_RECORDING = "replay_no_recording"
MODEL_BAD_RESPONSE = "model_bad_response"
VERIFIER_ERROR = "verifier_error"
AGENT_ERROR = "agent_error"
MODEL_SERVER_ERROR = "model_server_error"
SERVER_ERROR = "server_error"
RUN_DIR_FULL = "run_dir_full"
OS_ERROR = "os_error"
UNEXPECTED = "unexpected_exception"
UNKNOWN = "unknown"

CLASSES: dict[str, str] = {
    GYM_START: "Gym could not start (its servers, its config, or the model endpoint never became ready)",
    GYM_EXITED: "Gym ended (crashed, was killed, or `gym eval run` finished) without writing this rollout",
    ROLLOUT_TIMEOUT: "no rollout landed for `--gym-rollout-timeout` seconds; every pending rollout errors then",
    SESSION_STOPPED: "the session stopped (Ctrl-C, SIGTERM, `-x`) before this rollout arrived",
    NOT_PLANNED: "the item was not in the session's plan (a plugin bug: please report it)",
    BAD_REWARD: "the rollout has no reward, or one that is not a finite number",
    "model_http_<status>": "the policy model's endpoint (or a judge model's) answered an HTTP error after Gym's "
    "own retries, e.g. `model_http_429`, `model_http_400`",
    "model_http_error": "the same, when no log shows the status (servers attached with `--gym-head-server` keep "
    "their logs elsewhere)",
    REPLAY_NO_RECORDING: "the replay model has no recorded answer for the conversation (its HTTP 404 `no_recording`)",
    MODEL_BAD_RESPONSE: "Gym rejected the endpoint's answer (e.g. a Responses body missing fields Gym requires, "
    "or a body that is not JSON)",
    MODEL_SERVER_ERROR: "Gym's model server raised for another reason",
    "<role>_http_<status>": "another server's upstream call answered an HTTP error (`agent_http_500`, "
    "`resources_http_502`, `server_http_…` for a server of unknown role; `…_http_error` without the status)",
    VERIFIER_ERROR: "the resources server (the verifier) raised while scoring the rollout",
    AGENT_ERROR: "the agent server raised",
    SERVER_ERROR: "a Gym server of unknown role raised",
    RUN_DIR_FULL: "the run directory's file system is full (no space left on device): Gym could not write the "
    "rollout, or the plugin its files; the error names the path",
    OS_ERROR: "the operating system refused a file operation of the plugin (the error names the path and why)",
    UNEXPECTED: "the item raised outside Gym's verdict: a fixture of yours, or the plugin itself (a bug: please "
    "report it); the traceback shows which",
    UNKNOWN: "a row of Gym's failures file that names no class of its own",
    "agent_run_error": "Gym's own class (also `agent_request_failed`, `environment_server_failed`, ...), when the "
    "cause could not be traced past Gym's record",
}
"""The failure classes an errored item can carry (terminal ``errors`` line, JUnit ``failure_class``
property, JSON report ``failure_class``), with what each means."""

SUMMARY_LIMIT = 300
"""Characters of an endpoint's error text the summary line keeps."""
_WRAPPER = re.compile(r"Hit an exception in (?P<key>\S+) calling an inner server: b(?P<quote>['\"])", re.S)
_SECRET_PATTERNS = (
    # a provider key (OpenAI sk-..., NVIDIA nvapi-..., Hugging Face hf_...): long, with a digit (names are not)
    (re.compile(r"\b(?:sk|pk|rk|nvapi|hf|gsk|xai)[-_](?=[A-Za-z0-9_\-]*\d)[A-Za-z0-9_\-]{16,}"), "[redacted]"),
    (re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9_\-.=+/]{8,}"), r"\1 [redacted]"),
    (
        re.compile(r"(?i)\b((?:api[_-]?key|access[_-]?token|secret|password)[\"']?\s*[:=]\s*[\"']?)[^\s\"',}]{6,}"),
        r"\1[redacted]",
    ),
    (re.compile(r"(https?://[^\s?'\"]+)\?[^\s'\"]*"), r"\1?[redacted]"),
)


FULL_BELOW = 1024 * 1024
"""Free bytes below which a file system counts as full (Gym, Ray and the plugin write logs all the time)."""
MIN_FREE = 16 * 1024 * 1024
"""Free bytes a run directory needs at the start: Gym's and Ray's logs, Gym's input and its rollouts."""


def disk_full(path: Path, below: int = FULL_BELOW) -> str:
    """``no space left on the device of <path> (12 KiB free)`` when the file system holding ``path`` has fewer
    than ``below`` bytes free, else '' (also when it cannot be asked)."""
    import shutil

    try:
        free = shutil.disk_usage(path).free
    except OSError:
        return ""
    return f"no space left on the device of {path} ({free // 1024:,} KiB free)" if free < below else ""


def unexpected_error(error: BaseException) -> tuple[str, str]:
    """``(failure class, text)`` of an exception a rollout item raised that is not one of the plugin's own
    verdicts: an OS error gets one line naming the path (``run_dir_full`` for no space left on the device,
    else ``os_error``); anything else ``unexpected_exception`` and '' (pytest's traceback stays)."""
    if not isinstance(error, OSError):
        return UNEXPECTED, ""
    where = f": {error.filename}" if error.filename else ""
    if error.errno == errno.ENOSPC:
        return RUN_DIR_FULL, (
            f"no space left on device{where} (the disk of the run directory is full: free some space, or point "
            "--gym-run-dir elsewhere)"
        )
    return OS_ERROR, f"{error.strerror or error}{where} ({type(error).__name__})"


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with anything that looks like an API key replaced by ``[redacted]``: each of ``secrets``
    (exact values, e.g. the key's environment variable), ``sk-...``-style tokens, ``Bearer`` credentials,
    ``api_key=...``-style assignments, URL query strings (where Gym's own logs say keys travel) and the password
    of a URL's ``user:password@``."""
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, "[redacted]")
    text = redact_value(text, "[redacted]")  # a URL's user:password@ and ?password=, as every option value
    for pattern, replacement in _SECRET_PATTERNS:
        text = pattern.sub(replacement, text)
    return text


# Unwrapping the failure body.


@dataclass(frozen=True)
class ErrorChain:
    """A failure body unwrapped: ``servers`` are the ``<Class>___<name>`` keys of the servers it passed
    through, outermost first; ``innermost`` is the text at the centre (an endpoint's error body or an
    exception's ``repr``); ``truncated`` says Gym cut the body short (the end of ``innermost`` is missing)."""

    servers: tuple[str, ...]
    innermost: str
    truncated: bool


def unwrap(body: str) -> ErrorChain:
    """Peel the ``Hit an exception in ... calling an inner server: b'...'`` layers off a failure body.

    Where it comes from: the record's ``_ng_failure_response_body``, the body the agent's ``/run`` answered with. Each
    Gym server that catches an HTTP error from the server it called answers 500 with ``Hit an exception in
    <Class>___<name> calling an inner server: b'<that server's body>'``, so the body nests one layer per server (agent
    ``/run``, agent ``/v1/responses``, policy model) around the endpoint's own error body (e.g. an OpenAI-style
    ``{"error": {"message", "type", "code"}}``) or around the ``repr()`` of the exception a server raised (e.g. a
    pydantic ``ValidationError`` when Gym rejects the endpoint's Responses body). Gym keeps the first 2,000 characters
    of it, and the escaping doubles with each layer, so the innermost text may be cut short.

    Tolerates a body Gym cut at 2,000 characters (an unfinished escape at the end is dropped). Never raises.
    """
    text = body.strip()
    truncated = text.endswith("…")
    servers: list[str] = []
    for _ in range(32):  # a chain is a few layers deep; the bound only guards against a pathological body
        text, cut = json_string(text)
        truncated = truncated or cut
        match = _WRAPPER.match(text)
        if match is None:
            break
        servers.append(match["key"])
        inner = text[match.end() :]
        if inner.endswith(match["quote"]):
            inner = inner[:-1]
        else:
            truncated = True
        text = _bytes_literal(inner)
    text, cut = json_string(text)
    return ErrorChain(tuple(servers), text.strip(), truncated or cut)


def _bytes_literal(inner: str) -> str:
    """The text of a Python bytes literal's body (``repr(bytes)`` without ``b'`` and ``'``), UTF-8 decoded."""
    raw = inner.encode("utf-8", "backslashreplace")
    for cut in range(5):  # drop an unfinished escape at a cut end
        try:
            decoded, _ = codecs.escape_decode(raw[: len(raw) - cut])
        except ValueError:
            continue
        return str(bytes(decoded).decode("utf-8", "replace"))
    return inner


@dataclass(frozen=True)
class EndpointError:
    """An OpenAI-style error body: ``{"error": {"message", "type", "code"}}`` (``code`` and ``type`` may be
    None; ``message`` may be '')."""

    message: str
    type: str | None
    code: str | None

    @property
    def label(self) -> str:
        """The error's own name: its ``code``, else its ``type``, else ''."""
        return self.code or ("no_recording" if self.no_recording else self.type or "")

    @property
    def no_recording(self) -> bool:
        """Whether this is the replay model's 404 for a conversation it has no recording of (its ``code`` is
        ``no_recording``; when a long message pushed the code past what Gym kept, its message says so)."""
        return self.code == "no_recording" or (
            self.code is None and self.type in (None, "not_found") and self.message.startswith("no recorded answer")
        )


def endpoint_error(text: str) -> EndpointError | None:
    """The OpenAI-style error in ``text`` (a JSON body, possibly cut short), or None when it is not one."""
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if isinstance(value, dict):
        error = value.get("error")
        if isinstance(error, dict):
            return EndpointError(str(error.get("message") or ""), _str(error.get("type")), _str(error.get("code")))
        if isinstance(error, str):
            return EndpointError(str(value.get("message") or error), None, error)
        if isinstance(value.get("detail"), str):  # FastAPI's own errors
            return EndpointError(value["detail"], None, None)
        return None
    if not text.lstrip().startswith("{") or '"error"' not in text:
        return None
    fields = {}
    for name in ("message", "type", "code"):  # a body cut short: take what is there
        found = re.search(rf'"{name}"\s*:\s*"((?:[^"\\]|\\.)*)', text)
        fields[name] = json_string(f'"{found.group(1)}"')[0] if found else None
    return EndpointError(fields["message"] or "", fields["type"], fields["code"])


def _str(value: object) -> str | None:
    return str(value) if value not in (None, "") else None


# The diagnosis.


@dataclass(frozen=True)
class Cause:
    """Why a rollout failed: ``summary`` is one line naming the server, the status and the endpoint's own error
    text; ``failure_class`` one of :data:`CLASSES`; ``log`` the ``path:line`` of the log line that shows it
    ('' when no log shows it); ``found`` whether the cause was traced past Gym's own wrapper."""

    summary: str
    failure_class: str
    log: str = ""
    found: bool = True


def server_label(key: str, cls: str | None = None) -> tuple[str, str]:
    """``(human name, role)`` of a Gym server from its ``<Class>___<name>`` key (or its name and ``cls``):
    ``("policy model", "model")``, ``("agent mcqa_simple_agent", "agent")``, ``("resources server mcqa",
    "resources")``; role ``server`` when the class says nothing."""
    if "___" in key:
        cls, _, name = key.partition("___")
    else:
        name = key
    kind = (cls or "").lower()
    if name == "policy_model":
        return "policy model", "model"
    if "model" in kind:
        return f"model server {name}", "model"
    if "agent" in kind:
        return f"agent {name}", "agent"
    if "resource" in kind or "verif" in kind:
        return f"resources server {name}", "resources"
    return name, "server"


def diagnose(record: Mapping[str, Any], logs: ServerLogs | None = None, secrets: Sequence[str] = ()) -> Cause:
    """The root cause of a failures-file record (a dict as Gym wrote it), traced through its body and, when
    ``logs`` is given, Gym's server logs. Every text is passed through :func:`redact` with ``secrets``.

    Falls back to Gym's own class and message (``found`` False) when neither says more. Never raises.
    """
    gym_class = str(record.get("_ng_failure_class") or UNKNOWN)
    body = record.get("_ng_failure_response_body")
    try:
        stamps = (record.get("_ng_task_index"), record.get("_ng_rollout_index"))
        claimant: Claimant = None if stamps == (None, None) else (str(stamps[0]), str(stamps[1]))
        cause = _trace(body, logs, claimant) if isinstance(body, str) and body.strip() else None
    except Exception:  # a body of an unforeseen shape must not hide the rollout's error behind a crash
        cause = None
    if cause is None:
        message = next(
            (str(record[k]) for k in ("_ng_failure_message", "failure_reason", "error") if record.get(k)), ""
        )
        text = f"Gym recorded the rollout as failed ({gym_class})" + (f": {_flatten(message)}" if message else "")
        cause = Cause(text, gym_class, found=False)
    summary = cause.summary
    status = cause.failure_class.removeprefix("model_http_")
    if logs is not None and status.isdigit() and (stopped := logs.tripped.get(int(status))) is not None:
        summary += (
            f" (Gym's model client stopped calling this endpoint after an HTTP {status} like it ({stopped}): every"
            " later request of that server fails so without reaching the endpoint, until Gym restarts)"
        )
    return Cause(redact(summary, secrets), cause.failure_class, cause.log, cause.found)


def _trace(body: str, logs: ServerLogs | None, claimant: Claimant = None) -> Cause | None:
    chain = unwrap(body)
    inner = chain.innermost
    if not inner:
        return None
    if logs is not None:
        logs.refresh()
        raised = logs.find_exception(inner, claimant) if not inner.startswith("{") else None
        if raised is not None:
            return _from_exception(raised)
    key = chain.servers[-1] if chain.servers else None
    upstream = logs.find_upstream(key, inner, claimant) if logs is not None else None
    if upstream is not None:
        return _from_upstream(upstream)
    if key is None:
        return None
    who, role = server_label(key)
    error = endpoint_error(inner)
    if error is not None:
        kind = REPLAY_NO_RECORDING if error.no_recording else f"{role}_http_error"
        label = f"{error.label}: " if error.label else ""
        text = error.message or inner
        return Cause(f"{who}: HTTP error {label}{trim(_flatten(text), SUMMARY_LIMIT)}", kind, "")
    first = inner.splitlines()[0]
    return Cause(f"{who}: {trim(_flatten(first), SUMMARY_LIMIT)}", _class_of_exception(role, _repr_type(first)))


def _from_upstream(entry: UpstreamFailure) -> Cause:
    who, role = server_label(entry.key)
    error = endpoint_error(json_string(entry.body)[0])
    if error is not None:
        label = f" {error.label}" if error.label else ""
        text = error.message or entry.body
    else:
        label, text = "", entry.body
    no_recording = error is not None and error.no_recording
    failure_class = REPLAY_NO_RECORDING if no_recording else f"{role}_http_{entry.status}"
    summary = f"{who}: HTTP {entry.status}{label}: {trim(_flatten(text), SUMMARY_LIMIT)}"
    return Cause(summary, failure_class, f"{entry.path}:{entry.line}")


def _from_exception(entry: LoggedException) -> Cause:
    who, role = server_label(entry.name, entry.cls)
    detail = _validation_summary(entry.message) if entry.type == "ValidationError" else ""
    text = detail or _flatten(entry.message.splitlines()[0] if entry.message else entry.repr)
    failure_class = _class_of_exception(role, entry.type)
    if failure_class == MODEL_BAD_RESPONSE:
        summary = f"{who}: response rejected by Gym ({entry.type}: {trim(text, SUMMARY_LIMIT)})"
        if entry.type == "ValidationError" and _usage_rejected(entry.message):
            summary += USAGE_HINT
    else:
        summary = f"{who}: {entry.type}: {trim(text, SUMMARY_LIMIT)}"
    return Cause(summary, failure_class, f"{entry.path}:{entry.line}")


USAGE_HINT = (
    "; its token counts (usage) are not the Responses API's (a chat completion's prompt_tokens and "
    "completion_tokens, as in recordings made through vllm_model): --gym-model-type=vllm_model takes them as they "
    "are and replays such a recording exactly"
)
"""Appended to the cause of a Responses body Gym rejected for its ``usage`` fields."""


def _usage_rejected(message: str) -> bool:
    """Whether a pydantic ``ValidationError`` text names a ``usage`` field (its unindented location lines) and
    shows chat completions' token counts (``prompt_tokens``, ``completion_tokens``) in the value it rejected."""
    named = any(line.startswith("usage") for line in message.splitlines()[1:])
    return named and ("'prompt_tokens'" in message or "'completion_tokens'" in message)


def _class_of_exception(role: str, type_: str) -> str:
    if role == "model":
        return MODEL_BAD_RESPONSE if "Validation" in type_ or "Decode" in type_ else MODEL_SERVER_ERROR
    return {"resources": VERIFIER_ERROR, "agent": AGENT_ERROR}.get(role, SERVER_ERROR)


def _validation_summary(message: str) -> str:
    """``4 validation errors for NeMoGymResponse: parallel_tool_calls, tools: Field required`` from pydantic's
    multi-line text (a header, then per error its location and an indented description)."""
    lines = message.splitlines()
    if not lines:
        return ""
    by_reason: dict[str, list[str]] = {}
    location = None
    for line in lines[1:]:
        if not line.startswith(" "):
            location = line.strip()
        elif location is not None and not line.strip().startswith("For further information"):
            reason = line.strip().split(" [", 1)[0]
            by_reason.setdefault(reason, []).append(location)
            location = None
    parts = [f"{', '.join(where)}: {reason}" for reason, where in by_reason.items()]
    return lines[0].strip() + (": " + "; ".join(parts) if parts else "")


def _flatten(text: str) -> str:
    return " ".join(text.split())
