"""What Gym's server logs say about failed rollouts: :class:`ServerLogs` indexes each server's upstream HTTP
failures and logged exceptions (for :func:`pytest_gym_eval.outcomes.causes.diagnose`), :func:`eval_progress` reads
``gym eval run``'s progress line, and :func:`failure_reason` the line that says why a Gym command failed."""

from __future__ import annotations

import dataclasses
import json
import re
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeAlias

READ_CHUNK = 1024 * 1024
"""Bytes of a server log read at a time."""
MAX_OCCURRENCES = 100_000
"""Log lines of one identical error kept (each a path and a line number), one for each rollout it failed."""
Claimant: TypeAlias = "tuple[object, object] | None"
"""Who cites a log line: a rollout's ``(_ng_task_index, _ng_rollout_index)``, or None for anyone."""

_LINE_PREFIX = re.compile(r"^\((?P<server>[^)\s]+)\) ")
_UPSTREAM = re.compile(
    r"\[upstream_request_failed\] server=(?P<key>\S+) method=(?P<method>\S+) url=(?P<url>\S+) status=(?P<status>\d+)"
)
_CONTENT = "Response content: "
TRIP_MARKER = b"[model_retry_stop "
"""The start of that line: a cheap search in bytes for a whole log before the line is parsed."""
TRIP_LINE = re.compile(r"\[model_retry_stop url=(?P<url>\S+) status=(?P<status>\d+)")
"""What Gym 0.7.0's model client logs when it stops calling an endpoint for good (a 401/403 saying the key is
invalid, a 429 saying the quota is spent): every later request of that server fails the same way, unsent."""
_CAUGHT = re.compile(r"Caught an exception printed above in (?P<name>\S+) \((?P<cls>[^)]+)\)")
_REPR = "repr(e): "
_EXCEPTION_LINE = re.compile(
    r"^(?P<type>[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning)\w*)(?:: (?P<msg>.*))?$"
)
_CONNECTION_RETRY = re.compile(r"\[request_retry [^\]]*\]?|Hit an exception while making a request")
"""A server's log line about a request it retries for a connection error: unlike HTTP errors (3 attempts, then
the rollout fails), Gym retries these without end, so they are what a run that stopped making progress shows."""

# The server logs.


@dataclass(frozen=True)
class UpstreamFailure:
    """An ``[upstream_request_failed]`` entry: server ``key`` got HTTP ``status`` from ``url`` with ``body``
    (Gym keeps 2,000 characters), logged at ``path``:``line`` (1-based)."""

    key: str
    method: str
    url: str
    status: int
    body: str
    path: Path
    line: int


@dataclass(frozen=True)
class LoggedException:
    """An exception a server's handler raised: server ``name`` (class ``cls``), the exception's ``type``
    (without its module) and ``message`` (every line of it), ``repr`` its ``repr()`` as Gym returned it, logged
    at ``path``:``line`` (the traceback's last line, which names the exception)."""

    name: str
    cls: str
    type: str
    message: str
    repr: str
    path: Path
    line: int


@dataclass
class _FileState:
    offset: int = 0
    line: int = 0
    partial: bytes = b""
    pending_upstream: tuple[re.Match[str], int] | None = None
    caught: tuple[str, str] | None = None
    exception: tuple[int, str, list[str]] | None = None  # line, type, message lines so far
    recent: deque[tuple[int, str]] = field(default_factory=lambda: deque(maxlen=3))


class ServerLogs:
    """The error entries of Gym's server logs in ``folder`` (``logs/gym-servers``), indexed on first sight.

    :meth:`refresh` reads what the logs gained since the last call (a log of retries can grow for as long as an
    endpoint misbehaves, so nothing is read twice). Lookups return the *first* entry that shows a given error.

    What the logs hold: every line of ``logs/gym-servers/<server>.log`` is prefixed with ``(<server>) ``. A server
    that got an HTTP error from upstream logs ``🚨 [upstream_request_failed] server=<Class>___<name> method=M url=U
    status=N`` and, on the next line, ``Response content: <the body, up to 2,000 characters>``; one whose handler
    raised logs ``🚨 Caught an exception printed above in <name> (<Class>)``, the traceback (its last unindented
    line is ``<module.Type>: <message>``) and ``repr(e): <repr>``. The model client also logs each retry
    (``[model_retry url=U status=N kind=K try=T max_tries=M error_msg=...]``) and connection retries
    (``[request_retry url=U error=E retry=R elapsed_s=S]``). Lines carry no time stamps and no request ids, so a
    failure is matched to its log line by the error text itself (the first line that shows it).
    """

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._files: dict[Path, _FileState] = {}
        self.upstream: list[UpstreamFailure] = []
        self.exceptions: list[LoggedException] = []
        self.tripped: dict[int, str] = {}  # HTTP status -> "path:line" of the log line where a client stopped
        # Every line that logged one error (identical errors of several rollouts are indexed once), and which
        # rollout cites which of them: five rollouts failing alike point to five log lines, in order.
        self._upstream_at: dict[tuple[str, int, str], list[tuple[Path, int]]] = {}
        self._exception_at: dict[tuple[str, str], list[tuple[Path, int]]] = {}
        self._claims: dict[tuple[object, ...], dict[Claimant, int]] = {}

    def refresh(self) -> None:
        """Index every line appended to the folder's ``*.log`` files since the last call."""
        try:
            paths = sorted(self.folder.glob("*.log"))
        except OSError:
            return
        for path in paths:
            state = self._files.setdefault(path, _FileState())
            try:
                with path.open("rb") as handle:
                    handle.seek(state.offset)
                    while data := handle.read(READ_CHUNK):  # memory stays bounded however much the log grew
                        state.offset += len(data)
                        lines = (state.partial + data).split(b"\n")
                        state.partial = lines.pop()
                        for raw in lines:
                            state.line += 1
                            self._index(path, state, raw.decode("utf-8", "replace").rstrip("\r"))
            except OSError:
                continue

    def _index(self, path: Path, state: _FileState, text: str) -> None:
        text = _LINE_PREFIX.sub("", text, count=1)
        number = state.line
        if state.pending_upstream is not None:
            match, at = state.pending_upstream
            state.pending_upstream = None
            if text.startswith(_CONTENT):
                body = text[len(_CONTENT) :]
                key = (match["key"], int(match["status"]), body)
                seen = self._upstream_at.setdefault(key, [])
                if len(seen) < MAX_OCCURRENCES:
                    seen.append((path, at))
                if len(seen) == 1:
                    self.upstream.append(
                        UpstreamFailure(
                            match["key"], match["method"], match["url"], int(match["status"]), body, path, at
                        )
                    )
        if (upstream := _UPSTREAM.search(text)) is not None:
            state.pending_upstream = (upstream, number)
            return
        if (trip := TRIP_LINE.search(text)) is not None:
            self.tripped.setdefault(int(trip["status"]), f"{path}:{number}")
            return
        if (caught := _CAUGHT.search(text)) is not None:
            state.caught, state.exception = (caught["name"], caught["cls"]), None
            return
        if state.caught is not None:
            if text.startswith(_REPR):
                self._add_exception(path, state, text[len(_REPR) :])
            elif text.startswith(("Traceback", "During handling", "The above exception")):
                state.exception = None
            elif (exc := _EXCEPTION_LINE.match(text)) is not None:
                state.exception = (number, exc["type"].rsplit(".", 1)[-1], [exc["msg"] or ""])
            elif state.exception is not None:
                state.exception[2].append(text)
            return
        if _CONNECTION_RETRY.search(text):
            state.recent.append((number, text))

    def _add_exception(self, path: Path, state: _FileState, first_repr_line: str) -> None:
        assert state.caught is not None
        name, cls = state.caught
        state.caught = None
        if state.exception is not None:
            line, type_, message_lines = state.exception
        else:
            line, type_, message_lines = state.line, _repr_type(first_repr_line), [first_repr_line]
        state.exception = None
        key = (name, first_repr_line)
        seen = self._exception_at.setdefault(key, [])
        if len(seen) < MAX_OCCURRENCES:
            seen.append((path, line))
        if len(seen) > 1:
            return
        message = "\n".join(message_lines).strip()
        self.exceptions.append(LoggedException(name, cls, type_, message, first_repr_line, path, line))

    def _claim(self, key: tuple[object, ...], at: list[tuple[Path, int]], claimant: Claimant) -> tuple[Path, int]:
        """The occurrence of one logged error ``claimant`` cites: the one it was given before, else the first no
        other rollout cites (the last when every one is cited), else, without a claimant, the first."""
        if claimant is None or len(at) < 2:
            return at[0]
        claims = self._claims.setdefault(key, {})
        if claimant not in claims:
            claims[claimant] = min(len(claims), len(at) - 1)
        return at[claims[claimant]]

    def find_upstream(self, key: str | None, body: str, claimant: Claimant = None) -> UpstreamFailure | None:
        """The first upstream failure logged by server ``key`` (any server when None) whose body is ``body``
        (or begins with it, or it begins with the logged body: either may be cut short).

        Gym's lines carry no request id: when several rollouts failed with one error, each ``claimant`` (a
        rollout's ``(task index, rollout index)``) gets a line of its own, in the order they ask."""
        wanted = _comparable(body)
        if len(wanted) < 8:
            return None
        for entry in self.upstream:
            if key is not None and entry.key != key:
                continue
            logged = _comparable(entry.body)
            if logged == wanted or (len(logged) >= 8 and (logged.startswith(wanted) or wanted.startswith(logged))):
                found = (entry.key, entry.status, entry.body)
                path, line = self._claim(found, self._upstream_at.get(found) or [(entry.path, entry.line)], claimant)
                return dataclasses.replace(entry, path=path, line=line)
        return None

    def find_exception(self, text: str, claimant: Claimant = None) -> LoggedException | None:
        """The first exception whose ``repr`` (first line) or message (first line) is the first line of
        ``text`` (for each ``claimant`` a logged occurrence of its own, as :meth:`find_upstream`)."""
        first = text.strip().splitlines()[0].strip() if text.strip() else ""
        if len(first) < 4:
            return None
        for entry in self.exceptions:
            if first in (entry.repr.strip(), entry.message.splitlines()[0].strip() if entry.message else ""):
                found = (entry.name, entry.repr)
                path, line = self._claim(found, self._exception_at.get(found) or [(entry.path, entry.line)], claimant)
                return dataclasses.replace(entry, path=path, line=line)
        return None

    def recent_activity(self, limit: int = 4) -> list[str]:
        """The last connection-retry lines of the logs (each log's last three, ``limit`` in all), as
        ``path:line: text``: what Gym's servers were doing when nothing landed (an endpoint that drops or refuses
        connections; an endpoint that never answers leaves no line)."""
        found: list[tuple[Path, int, str]] = []
        for path, state in self._files.items():
            found += [(path, number, text) for number, text in state.recent]
        found.sort(key=lambda entry: (entry[0].name, entry[1]))
        return [f"{path}:{number}: {trim(text, 240)}" for path, number, text in found[-limit:]]


_FINISHED = re.compile(r"Finished \d+ / \d+ rollouts.*")
_LEFT = re.compile(r"^\d+\. (?P<agent>\S+): (?P<count>\d+)\s*$")


def eval_progress(log: Path) -> str:
    """What ``gym eval run`` last said of its progress, from its log: ``Finished 7 / 9 rollouts (77%) in
    0:00:01 (253.39 rollouts/min). Examples left: mcqa_simple_agent: 2 (<log>:<line>)``, or '' when it said
    nothing yet. Reads the log once, line by line."""
    found, line_number = "", 0
    left: list[str] = []
    try:
        with log.open("rb") as handle:
            collecting = False
            for number, raw in enumerate(handle, 1):
                text = raw.decode("utf-8", "replace").rsplit("\r", 1)[-1].strip()
                match = _FINISHED.search(text)
                if match is not None:
                    found, line_number, left, collecting = match.group(0), number, [], True
                    continue
                if collecting and (item := _LEFT.match(text)) is not None:
                    left.append(f"{item['agent']}: {item['count']}")
                else:
                    collecting = False
    except OSError:
        return ""
    if not found:
        return ""
    return f"{found}{' ' + ', '.join(left) if left else ''} ({log}:{line_number})"


SERVER_EXITED = re.compile(r"Process `(?P<name>[^`]+)` finished unexpectedly!|Head server finished unexpectedly!")
"""What ``gym env start`` prints when one of its servers exits (``nemo_gym/cli/env.py``, ``poll``), then raises it
as a ``RuntimeError``: the line says which server died, the server's own log says why."""
_TRACEBACK = "Traceback (most recent call last):"
_ANY_PREFIX = re.compile(r"^\([^()]*\) ")
"""A prefix a line of another process carries in a log: Gym's ``(<server>) ``, Ray's ``(pid=1234) ``."""
_GYM_ERROR = re.compile(r"^Error: \S")
"""How Gym's commands print a configuration error they exit on (``[red]Error:[/red] <message>``, no traceback)."""
REASON_LIMIT = 500
"""Characters of a quoted reason line kept."""


@dataclass(frozen=True)
class LogLine:
    """One line of a log: ``text`` (without a process prefix), at ``path``:``line`` (1-based)."""

    text: str
    path: Path
    line: int

    def __str__(self) -> str:
        return f"{trim(self.text, REASON_LIMIT)} ({self.path}:{self.line})"


def exception_line(path: Path) -> LogLine | None:
    """The line of a log that says why its command failed: the exception line of the last Python traceback (the
    first unindented line after ``Traceback (most recent call last):``, e.g. ``ModuleNotFoundError: No module
    named 'x'``; of a chain, the last exception's), or Gym's own ``Error: <message>`` line when that comes later;
    None when the log has neither (or cannot be read). Lines other processes wrote into the log keep working:
    their ``(<server>) `` prefix is dropped first. Reads the log once, line by line."""
    found: LogLine | None = None
    in_traceback = False
    try:
        with path.open("rb") as handle:
            for number, raw in enumerate(handle, 1):
                text = _ANY_PREFIX.sub("", raw.decode("utf-8", "replace").rstrip("\r\n"), count=1)
                if text.startswith(_TRACEBACK):
                    in_traceback = True
                elif in_traceback and text.strip() and not text[0].isspace():
                    found, in_traceback = LogLine(text.strip(), path, number), False
                elif not in_traceback and _GYM_ERROR.match(text):
                    found = LogLine(text.strip(), path, number)
    except OSError:
        return None
    return found


def last_line(path: Path) -> LogLine | None:
    """The last non-blank line of a log (its prefix dropped), or None."""
    found: LogLine | None = None
    try:
        with path.open("rb") as handle:
            for number, raw in enumerate(handle, 1):
                text = _ANY_PREFIX.sub("", raw.decode("utf-8", "replace").strip(), count=1).strip()
                if text:
                    found = LogLine(text, path, number)
    except OSError:
        return None
    return found


def exited_server(log: Path) -> str | None:
    """The process name of the last server ``log`` (a ``gym env start`` log) says finished unexpectedly (``""``: the
    head server), or None when it says none did."""
    found: str | None = None
    try:
        with log.open("rb") as handle:
            for raw in handle:
                match = SERVER_EXITED.search(raw.decode("utf-8", "replace"))
                if match is not None:
                    found = match["name"] or ""
    except OSError:
        return None
    return found


def failure_reason(log: Path, server_logs: Path | None = None) -> LogLine | None:
    """Why the Gym command whose output is ``log`` failed, as the one line to quote (with its file and line), or
    None when no line says (then quote the log's last lines). When the log says a server "finished unexpectedly",
    the reason is in that server's own log (``server_logs/<name>.log``, Gym's ``nemo_gym_log_dir``; ``/`` in the
    name becomes ``_``, as Gym names it): its last exception line (:func:`exception_line`), else its last line;
    Gym's own ``RuntimeError`` saying the server finished is never the reason. Otherwise the command's own last
    exception line."""
    server = exited_server(log)
    if server and server_logs is not None:
        own = server_logs / f"{server.replace('/', '_')}.log"
        if (found := exception_line(own) or last_line(own)) is not None:
            return found
    found = exception_line(log)
    if found is None or SERVER_EXITED.search(found.text):
        return None
    return found


def _comparable(text: str) -> str:
    """An error body as compared between a record and a log: decoded, cut mark and whitespace runs removed."""
    decoded, _ = json_string(text.strip())
    return " ".join(decoded.removesuffix("…").split())


def _repr_type(text: str) -> str:
    match = re.match(r"([A-Za-z_][\w.]*)\(", text)
    return match.group(1).rsplit(".", 1)[-1] if match else "Exception"


def json_string(text: str) -> tuple[str, bool]:
    """A JSON string literal decoded (``text`` itself when it is not one); whether it was cut short."""
    if not text.startswith('"'):
        return text, False
    try:
        value = json.loads(text)
        if isinstance(value, str):
            return value, False
    except ValueError:
        pass
    inner = text[1:].removesuffix("…")
    inner = inner[:-1] if inner.endswith('"') and not inner.endswith('\\"') else inner
    for cut in range(8):  # drop an unfinished escape (a lone backslash, a partial \\uXXXX)
        try:
            value = json.loads('"' + inner[: len(inner) - cut] + '"')
        except ValueError:
            continue
        if isinstance(value, str):
            return value, True
    return text, True


def trim(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
