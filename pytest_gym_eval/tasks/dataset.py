"""Reading a Gym dataset (JSON lines, one task per row) into tasks with stable ids.

A task id is the row's own id field when it has one, else the first 12 hex digits of the sha256 of the
row's canonical JSON. Nothing here knows about pytest: the collector in ``items.py`` calls
:func:`read_tasks` and turns :class:`DatasetError` into a collection error.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import os
import re
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import jsonlines

DEFAULT_ID_FIELDS = ("id", "uuid", "task_id")
"""Fields tried, in order, for a row's own task id when ``gym_id_field`` is not set."""

GYM_PRIVATE_PREFIX = "_ng_"
"""Keys Gym stamps on rows (``_ng_task_index``, ``_ng_rollout_index``, ...); never part of a task's identity."""

_FORBIDDEN_IN_ID = re.compile(r"::|\[|\]|[\x00-\x1f\x7f\x85\u2028\u2029]")
"""What a task id may not hold: ``::``, ``[``, ``]`` (pytest's node id syntax) and control characters or line
breaks (which -k, --deselect, --lf and terminals do not keep)."""

Row = dict[str, Any]
TaskIdHook = Callable[[Row, Path, int], "str | None"]
"""``(row, dataset path, line number) -> task id or None``: a plugin's override of the task id."""


class DatasetError(Exception):
    """A dataset that cannot be collected; ``str()`` names ``file:line`` and what is wrong."""

    def __init__(self, path: Path, line: int | None, message: str) -> None:
        self.path = path
        self.line = line
        self.message = message
        where = f"{path}:{line}" if line is not None else str(path)
        super().__init__(f"{where}: {message}")


@dataclass(frozen=True, slots=True)
class Task:
    """One dataset row as a task.

    ``line`` is the 1-based line number of the row's first occurrence; ``duplicate_lines`` holds the lines of
    identical rows that collapsed into it; ``agent`` is the row's own ``agent_ref.name``, if any. ``digest`` is
    the row's :func:`row_digest` when collection needed it (the row has no id of its own, two rows of the
    dataset share an id, or a ``task_id_hook`` is in use), else None. The row itself is not kept (a
    100,000-row dataset must collect in little memory): :func:`row_offsets` and :func:`parse_row` read it again
    when Gym's input is written.
    """

    task_id: str
    line: int
    digest: str | None
    duplicate_lines: tuple[int, ...] = ()
    agent: str | None = None


_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, check_circular=False).encode
"""``json.dumps(..., sort_keys=True, separators=(",", ":"), ensure_ascii=False)`` without making an encoder per
call, nor checking for cycles (a parsed row has none; the check cost ~15% of hashing a row)."""


def canonical_json(row: Row) -> str:
    """The row as compact JSON with sorted keys and Gym's ``_ng_*`` keys removed (the basis of a task hash)."""
    return _CANONICAL({key: value for key, value in row.items() if not key.startswith(GYM_PRIVATE_PREFIX)})


def row_digest(row: Row) -> str:
    """Hex sha256 of :func:`canonical_json` (64 characters). Raises UnicodeEncodeError for a row holding a lone
    surrogate (see :data:`LONE_SURROGATE`)."""
    return hashlib.sha256(canonical_json(row).encode("utf-8")).hexdigest()


def _digest(row: Row, path: Path, line: int) -> str:
    """:func:`row_digest` of the row on ``line`` of ``path``; raises :class:`DatasetError` for a lone surrogate."""
    try:
        return row_digest(row)
    except UnicodeEncodeError:
        raise DatasetError(path, line, LONE_SURROGATE) from None


def own_task_id(row: Row, id_fields: Sequence[str]) -> str | None:
    """The first of ``id_fields`` present in ``row`` with a string or integer value, as a string, else None.

    Non-scalar values (Gym's materialised rows carry a ``task_id`` object) are skipped.
    """
    for field in id_fields:
        value = row.get(field)
        if isinstance(value, bool):
            continue
        if isinstance(value, (str, int)):
            return str(value)
    return None


def unusable_id(row: Row, id_fields: Sequence[str]) -> tuple[str, object] | None:
    """The first of ``id_fields`` whose value :func:`own_task_id` cannot take (a boolean, a fraction, null, an
    array) as ``(field, value)``, or None. An object is not reported: Gym's materialised rows carry one."""
    for field in id_fields:
        if field in row and not isinstance(row[field], dict):
            return field, row[field]
    return None


def row_agent(row: Row) -> str | None:
    """The agent a row names itself (``agent_ref.name``), or None."""
    ref = row.get("agent_ref")
    name = ref.get("name") if isinstance(ref, dict) else None
    return name if isinstance(name, str) and name else None


def check_task_id(task_id: str) -> str | None:
    """Why ``task_id`` cannot be part of a pytest node id, or None when it can."""
    if not task_id.strip():
        return "the task id is empty"
    found = _FORBIDDEN_IN_ID.search(task_id)
    if found is None:
        return None
    return (
        f"the task id {task_id!r} contains {found.group()!r}, which pytest's node ids cannot hold ('::' separates a "
        "file from its items, '[...]' holds the repeat, and -k, --deselect and --lf read them so; control "
        "characters and line breaks do not survive them); give the rows ids without '::', '[', ']', control "
        "characters or line breaks, take them from another field with the ini option gym_id_field, or map rows "
        "to ids with the pytest_gym_eval_task_id hook"
    )


def check_row(row: Row) -> str | None:
    """Why ``row`` is not a Gym task, or None when it looks like one.

    Gym needs ``responses_create_params`` (an object) on every row, except materialised task rows
    (``task_input``) and rows that name a ``task_source``.
    """
    if "task_input" in row or "task_source" in row:
        return None
    params = row.get("responses_create_params")
    if params is None:
        return "the row has no 'responses_create_params' (Gym sends it to the agent as the task's request)"
    if not isinstance(params, dict):
        return f"'responses_create_params' must be a JSON object, not {_json_type(params)}"
    return None


def _json_type(value: object) -> str:
    names = {
        list: "an array",
        str: "a string",
        int: "a number",
        float: "a number",
        bool: "a boolean",
        dict: "an object",
    }
    return "null" if value is None else names.get(type(value), type(value).__name__)


_JSONLINES_SKIPS = ("\x1e", "\ufeff")
"""Characters :mod:`jsonlines` drops from the start of a line (RFC 7464's record separator, a UTF-8 BOM)."""
_SKIPPABLE_FIRST_BYTES = (b"\x1e", b"\xef")
"""The first byte of each of :data:`_JSONLINES_SKIPS` in UTF-8."""


class NotGymJSON(ValueError):
    """A value Python's :mod:`json` reads but JSON (RFC 8259) does not have, so Gym's reader (orjson) refuses
    the whole input file: ``NaN``, ``Infinity``, ``-Infinity``, a number beyond a 64-bit float's range."""


def _refuse_constant(name: str) -> Any:
    raise NotGymJSON(f"{name} is not JSON (RFC 8259) and Gym's reader refuses it: write null or a string")


def _finite_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise NotGymJSON(
            f"the number {text[:40]} is beyond a 64-bit float's range and Gym's reader refuses it: write a string"
        )
    return value


_decode = json.JSONDecoder(parse_constant=_refuse_constant, parse_float=_finite_float).decode


def _loads(text: str | bytes) -> Any:
    """:func:`json.loads`, refusing what is not JSON (:class:`NotGymJSON`)."""
    return _decode(text if isinstance(text, str) else text.decode("utf-8"))


LONE_SURROGATE = (
    "a string holds a lone surrogate (a \\uD800-\\uDFFF escape without its pair): it is not Unicode text, and Gym's "
    "reader refuses it"
)
"""Why a row whose strings Python read from a lone ``\\uD8xx`` escape cannot go to Gym: it cannot be written as
UTF-8. Found when the row is first encoded (its digest, or Gym's input), not by scanning every line for it (~1 us
a row)."""


def _blank(raw: bytes) -> bool:
    """Whether a line is blank as jsonlines' ``skip_empty`` has it, after the one character jsonlines drops from
    a line's start (a BOM, a record separator): a file starting with a BOM and a blank line is not malformed."""
    if not raw.rstrip():
        return True
    if raw[:1] not in _SKIPPABLE_FIRST_BYTES:
        return False
    text = raw.decode("utf-8", errors="replace")
    return text.startswith(_JSONLINES_SKIPS) and not text[1:].rstrip()


def _plain_row(raw: bytes) -> Row | None:
    """The row on ``raw`` when the line is plainly a UTF-8 JSON object (nearly every line), else None.

    The same value ``jsonlines.Reader.read(type=dict)`` returns for such a line (it decodes UTF-8 strictly and
    calls :func:`json.loads`), without its per-line bookkeeping, which cost ~1 s of the ~1.7 s it took to read a
    100,000-row dataset of 1 KB rows. For anything else (bytes that are not UTF-8, malformed JSON, a value that
    is not an object, a leading BOM or record separator) it returns None and :func:`parse_row` lets jsonlines
    judge the line, so errors and edge cases stay exactly jsonlines'.
    """
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if text.startswith(_JSONLINES_SKIPS):
        return None
    try:
        value = _loads(text)
    except ValueError:
        return None
    return value if type(value) is dict else None


def iter_rows(path: Path) -> Iterator[tuple[int, Row]]:
    """Yield ``(line number, row)`` for every non-blank line of the JSON-lines file ``path``.

    Raises :class:`DatasetError` naming the line for bytes that are not UTF-8, malformed JSON, JSON Gym cannot
    read (``NaN``, ``Infinity``, a number beyond a float's range, a lone surrogate), or a line that
    is not a JSON object, and for a file that cannot be read.
    """
    for number, _, row in _iter_rows_at(path):
        yield number, row


def _iter_rows_at(path: Path) -> Iterator[tuple[int, int, Row]]:
    """:func:`iter_rows` with each row's byte offset: ``(line number, offset, row)``."""
    try:
        handle = path.open("rb")
    except OSError as error:
        raise DatasetError(path, None, f"cannot read the dataset: {error.strerror or error}") from error
    with handle:
        end = 0
        for number, raw in enumerate(handle, 1):
            offset, end = end, end + len(raw)
            if _blank(raw):
                continue
            row = _plain_row(raw)
            yield number, offset, parse_row(raw, path, number) if row is None else row


def parse_row(raw: bytes, path: Path, line: int) -> Row:
    """The row on one raw line of a dataset (``line`` of ``path``, for errors), as :func:`iter_rows` reads it.

    Raises :class:`DatasetError` naming the line when it is not a UTF-8 JSON object (jsonlines' rules) or holds
    what Gym's reader refuses (:class:`NotGymJSON`, a lone surrogate).
    """
    row = _plain_row(raw)
    if row is not None:
        return row
    import jsonlines  # only for the lines _plain_row leaves to it: importing it (and attrs) took ~30 ms

    try:
        parsed: Row = jsonlines.Reader([raw], loads=_loads).read(type=dict)
    except jsonlines.InvalidLineError as error:
        hint = likely_encoding(raw, line)
        raise DatasetError(path, line, _describe_invalid_line(error) + (f": {hint}" if hint else "")) from error
    return parsed


_BOMS = (
    (b"\x00\x00\xfe\xff", "UTF-32"),
    (b"\xff\xfe\x00\x00", "UTF-32"),
    (b"\xfe\xff", "UTF-16"),
    (b"\xff\xfe", "UTF-16"),
)


def likely_encoding(raw: bytes, line: int) -> str:
    """Why a line that is not a UTF-8 JSON object may be so: ``the file looks gzip-compressed ...`` (line 1
    starts with gzip's magic bytes 1f 8b), ``... UTF-16 (or UTF-32) ...`` (a byte-order mark, or NUL bytes
    between the characters of a file saved without one), each saying what to do; '' when neither fits."""
    if line == 1 and raw.startswith(b"\x1f\x8b"):
        return "the file looks gzip-compressed (it starts with gzip's bytes 1f 8b): decompress it (gunzip) first"
    for bom, encoding in _BOMS:
        if line == 1 and raw.startswith(bom):
            return f"the file looks {encoding}-encoded (it starts with a {encoding} byte-order mark): save it as UTF-8"
    if b"\x00" in raw:
        encoding = "UTF-32" if b"\x00\x00\x00" in raw else "UTF-16"
        return f"the file looks {encoding}-encoded (NUL bytes between its characters): save it as UTF-8"
    return ""


def _describe_invalid_line(error: jsonlines.InvalidLineError) -> str:
    cause = error.__cause__
    if isinstance(cause, NotGymJSON):
        return str(cause)
    if isinstance(cause, UnicodeDecodeError):
        return f"the line is not valid UTF-8 (byte 0x{cause.object[cause.start]:02x} at column {cause.start + 1})"
    if isinstance(cause, json.JSONDecodeError):
        # json's own message may end in "at" ("Unterminated string starting at"): say the column once.
        return f"malformed JSON: {cause.msg.removesuffix(' at')} at column {cause.pos + 1}"
    if "null value" in str(error):
        return "the row is null, not a JSON object"
    if "does not match requested type" in str(error):
        try:
            value = json.loads(error.line)
        except (TypeError, ValueError):
            value = None
        return f"the row is {_json_type(value)}, not a JSON object"
    return str(error).split(" (line")[0]


def read_tasks(
    path: Path,
    id_fields: Sequence[str] = DEFAULT_ID_FIELDS,
    task_id_hook: TaskIdHook | None = None,
) -> tuple[list[Task], list[tuple[int, str]]]:
    """Read ``path`` into tasks in file order, with the warnings collection should show as (1-based line the
    warning points at, message) pairs.

    A row's task id comes from ``task_id_hook`` when it returns one, else :func:`own_task_id`, else the first
    12 hex digits of :func:`row_digest`. Identical rows collapse into one task (a warning names the lines and
    points to repeats). Raises :class:`DatasetError` for an empty dataset, an unreadable or malformed line, a
    row that is not a Gym task, an unusable id, and two different rows sharing one id (naming both lines).
    """
    tasks: dict[str, Task] = {}
    # A row's digest is needed only as its task id (a row without an id) or to tell a duplicate row from a
    # clash when two rows share an id: hashing every row cost ~0.7 s of the ~7 s collection of 100,000 rows.
    # From the first shared id on, and with a hook (which sees the row first), every row is hashed.
    hash_all = task_id_hook is not None
    unusable_ids: list[tuple[int, str, object]] = []  # (line, field, value) of ids own_task_id cannot take
    own_ids = 0
    for line, row in iter_rows(path):
        if not isinstance(row.get("responses_create_params"), dict):  # check_row's common case, inlined
            problem = check_row(row)
            if problem is not None:
                raise DatasetError(path, line, problem)
        digest = _digest(row, path, line) if hash_all else None
        task_id = (task_id_hook(row, path, line) if task_id_hook else None) or own_task_id(row, id_fields)
        if task_id is None:
            digest = digest or _digest(row, path, line)
            task_id = digest[:12]  # hex digits: always a valid id
            if (unusable := unusable_id(row, id_fields)) is not None:
                unusable_ids.append((line, *unusable))
        elif (problem := check_task_id(task_id)) is not None:
            raise DatasetError(path, line, problem)
        else:
            own_ids += 1
        earlier = tasks.get(task_id)
        if earlier is None:
            tasks[task_id] = Task(task_id, line, digest, (), row_agent(row))
            continue
        if not hash_all:
            hash_all = True
            _add_digests(path, tasks, line)
            earlier = tasks[task_id]
        digest = digest or _digest(row, path, line)
        if earlier.digest == digest:
            tasks[task_id] = Task(task_id, earlier.line, digest, (*earlier.duplicate_lines, line), earlier.agent)
        else:
            raise DatasetError(
                path, line, f"task id {task_id!r} is already used by a different row on line {earlier.line}"
            )
    if not tasks:
        raise DatasetError(path, None, "the dataset is empty (no JSON rows)")
    warnings = [
        (
            t.duplicate_lines[0],
            f"{path}: rows on lines {', '.join(map(str, (t.line, *t.duplicate_lines)))} are identical and count "
            f"as one task {t.task_id!r}; to roll a task out several times use repeats (--gym-repeats)",
        )
        for t in tasks.values()
        if t.duplicate_lines
    ]
    if unusable_ids:
        line, field, value = unusable_ids[0]
        count = len(unusable_ids)
        warnings.append((line, (
            f"{path}: the {field!r} of line {line} is {_json_type(value)} ({json.dumps(value)[:40]}), not a string "
            f"or an integer: {'its row gets' if count == 1 else f'its row and {count - 1} more like it get'} a hash "
            "of the row as task id; give string ids, take them from another field (gym_id_field) or map rows to ids "
            "with the pytest_gym_eval_task_id hook"
        )))  # fmt: skip
    if tuple(id_fields) != DEFAULT_ID_FIELDS and own_ids == 0 and not unusable_ids and task_id_hook is None:
        first = min(t.line for t in tasks.values())
        warnings.append((first, (
            f"{path}: no row has {', '.join(map(repr, id_fields))} (gym_id_field): every task id is a hash of its "
            "row"
        )))  # fmt: skip
    return list(tasks.values()), warnings


def _add_digests(path: Path, tasks: dict[str, Task], before: int) -> None:
    """Give every task in ``tasks`` (all read from lines before ``before``) its digest, reading those lines again."""
    missing = {task.line: task for task in tasks.values() if task.digest is None}
    for line, row in iter_rows(path):
        if line >= before or not missing:
            return
        task = missing.pop(line, None)
        if task is not None:
            tasks[task.task_id] = replace(task, digest=_digest(row, path, line))


@functools.lru_cache(maxsize=16)
def _line_starts(path: Path, size: int, mtime_ns: int) -> array[int]:
    """Where each line of ``path`` starts (bytes): one raw pass, no JSON parsing, 8 bytes a line. Cached per
    file version (``size`` and ``mtime_ns`` are in the key so that a changed dataset is indexed again)."""
    starts = array("q")
    with path.open("rb") as handle:
        end = 0
        for raw in handle:
            starts.append(end)
            end += len(raw)
    return starts


def read_row_at(path: Path, line: int) -> Row | None:
    """The row on 1-based ``line`` of ``path`` as it is now, for a rollout's failure text and Python tests over
    rollouts; None when that line is gone or blank.

    The first read of a dataset (of this version of it) notes where each of its lines starts and later reads seek
    there, so reading the rows of F failed rollouts of an N-row dataset costs one pass over the file, not F
    (:func:`row_offsets`, which checks every row on its way, would make it F x N row parses).

    Raises :class:`DatasetError` naming the line when the row there is not valid, and OSError when the file
    cannot be read.
    """
    with path.open("rb") as handle:
        stat = os.fstat(handle.fileno())
        starts = _line_starts(path, stat.st_size, stat.st_mtime_ns)
        if not 1 <= line <= len(starts):
            return None
        handle.seek(starts[line - 1])
        raw = handle.readline()
    return None if _blank(raw) else parse_row(raw, path, line)


def row_offsets(path: Path, lines: Iterable[int]) -> dict[int, int]:
    """The byte offsets of the rows on the given 1-based line numbers of ``path`` (one pass over the file);
    :func:`parse_row` reads a row again from its offset. Holding offsets instead of parsed rows keeps the memory
    for a large dataset small.

    Raises :class:`DatasetError` as :func:`iter_rows` does, or when a wanted line is no longer in the file.
    """
    wanted = set(lines)
    found: dict[int, int] = {}
    for line, offset, _ in _iter_rows_at(path):
        if line in wanted:
            found[line] = offset
            if len(found) == len(wanted):
                break
    missing = sorted(wanted - found.keys())
    if missing:
        raise DatasetError(path, missing[0], "the row changed since collection (the line is gone)")
    return found
