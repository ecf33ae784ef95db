"""Small file helpers used everywhere: an atomic write, a file's digest, reading JSON lines.

A leaf module: it imports only the standard library and ``jsonlines``, so every layer may use it.
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonlines


def write_text_atomic(path: str | os.PathLike[str], text: str, *, errors: str = "strict") -> Path:
    """Write ``text`` (UTF-8) to ``path`` through a temporary file beside it and a rename, so a reader never
    sees half a file; creates missing parent directories and returns the path written.

    ``errors`` is the encoder's error handler (e.g. "backslashreplace" for text that may hold lone
    surrogates). Raises OSError when the file cannot be written (the temporary file is removed).
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = target.with_name(f".{target.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(temporary, "x", encoding="utf-8", errors=errors) as stream:
            stream.write(text)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, target)
    except OSError as error:  # a folder that cannot be written, a path that is a directory: name the path asked
        temporary.unlink(missing_ok=True)
        raise type(error)(error.errno, error.strerror, str(target)) from None
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    return target


def write_json_atomic(path: str | os.PathLike[str], value: Any, *, indent: int | None = 2) -> Path:
    """Write ``value`` as JSON (UTF-8, keys in the order given, a trailing newline) to ``path`` atomically (see
    :func:`write_text_atomic`). Raises TypeError/ValueError for a value JSON cannot hold, OSError as above."""
    return write_text_atomic(path, json.dumps(value, indent=indent, ensure_ascii=False) + "\n")


def file_sha256(path: str | os.PathLike[str], *, chunk_size: int = 1024 * 1024) -> str:
    """The sha256 (64 hex digits) of a file's bytes, read ``chunk_size`` bytes at a time (memory stays flat for a
    dataset of any size). Raises OSError when the file cannot be read."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(chunk_size):
            digest.update(chunk)
    return digest.hexdigest()


def iter_json_lines(path: str | os.PathLike[str]) -> Iterator[tuple[int, Any]]:
    """Yield ``(line_number, value)`` for each non-blank line of a JSON-lines file (physical line numbers from 1).

    Raises OSError when the file cannot be read and ``jsonlines.InvalidLineError`` (whose ``lineno`` is the
    physical line) for a line that is not JSON; callers that must tolerate a half-written last line catch it.
    """
    with open(path, "rb") as handle:
        for number, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            try:
                yield number, jsonlines.Reader([raw]).read()
            except jsonlines.InvalidLineError as error:
                cause = error.__cause__ or error
                raise jsonlines.InvalidLineError(f"{path}: line is not JSON: {cause}", raw, number) from None
