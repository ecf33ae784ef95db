"""Small file helpers used everywhere: an atomic write, a file's digest, reading JSON lines (a finished file,
or a growing one as it grows).

A leaf module: it imports only the standard library and ``jsonlines``, so every layer may use it.
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import jsonlines


def write_text_atomic(
    path: str | os.PathLike[str], text: str, *, errors: str = "strict", mode: int | None = None
) -> Path:
    """Write ``text`` (UTF-8) to ``path`` through a temporary file beside it and a rename, so a reader never
    sees half a file; creates missing parent directories and returns the path written.

    ``errors`` is the encoder's error handler (e.g. "backslashreplace" for text that may hold lone
    surrogates). ``mode`` (e.g. ``0o600`` for owner-only) is set on the temporary file before anything is
    written to it, whatever the umask; None leaves the umask's default. Raises OSError when the file cannot be
    written (the temporary file is removed).
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = target.with_name(f".{target.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666 if mode is None else mode)
        with open(descriptor, "w", encoding="utf-8", errors=errors) as stream:
            if mode is not None:
                os.fchmod(descriptor, mode)  # the umask may have taken bits the caller asked for
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


def write_json_atomic(
    path: str | os.PathLike[str], value: Any, *, indent: int | None = 2, mode: int | None = None
) -> Path:
    """Write ``value`` as JSON (UTF-8, keys in the order given, a trailing newline) to ``path`` atomically (see
    :func:`write_text_atomic`, also for ``mode``). Raises TypeError/ValueError for a value JSON cannot hold,
    OSError as above."""
    return write_text_atomic(path, json.dumps(value, indent=indent, ensure_ascii=False) + "\n", mode=mode)


def file_sha256(path: str | os.PathLike[str], *, chunk_size: int = 1024 * 1024) -> str:
    """The sha256 (64 hex digits) of a file's bytes, read ``chunk_size`` bytes at a time (memory stays flat for a
    dataset of any size). Raises OSError when the file cannot be read."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(chunk_size):
            digest.update(chunk)
    return digest.hexdigest()


def iter_json_lines(
    path: str | os.PathLike[str], *, growing: bool = False, skip_invalid: bool = False
) -> Generator[tuple[int, Any], None, None]:
    """Yield ``(line_number, value)`` for each non-blank line of a JSON-lines file (physical line numbers from 1).

    ``growing``: the file may still be written, so a last line without its newline is left out whatever it
    holds (the writer is mid-line). ``skip_invalid``: a line that is not JSON is passed over (a log several
    writers append to, a reader that only wants what it understands) instead of raising.

    Raises OSError when the file cannot be read (lazily: at the first value asked for) and, unless
    ``skip_invalid``, ``jsonlines.InvalidLineError`` (whose ``lineno`` is the physical line) naming the file and
    the line for a line that is not JSON.
    """
    with open(path, "rb") as handle:
        for number, raw in enumerate(handle, start=1):
            if growing and not raw.endswith(b"\n"):
                return
            if not raw.strip():
                continue
            try:
                value = jsonlines.Reader([raw]).read()
            except jsonlines.InvalidLineError as error:
                if skip_invalid:
                    continue
                cause = error.__cause__ or error
                raise jsonlines.InvalidLineError(f"{path}: line is not JSON: {cause}", raw, number) from None
            yield number, value


READ_CHUNK = 1024 * 1024
"""Bytes a :class:`LineFollower` reads at a time, so memory stays bounded whatever the backlog (a 1 GB file that is
already there when following starts is read 1 MiB at a time, not at once)."""


class LineFollower:
    """Complete lines appended to a growing file since the last look (handles a file that appears late or is
    replaced, and a half-written last line, which waits for its newline)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._inode: int | None = None
        self._offset = 0  # bytes read so far
        self._line = 0  # complete lines handed out so far
        self._line_start = 0  # byte offset of the line being read
        self._partial: list[bytes] = []  # the pieces read so far of an incomplete last line

    def new_lines(self) -> Iterator[tuple[int, int, bytes]]:
        """Yield ``(1-based line number, byte offset, raw line without its newline)`` for every complete non-blank
        line not seen before (nothing while the file does not exist).

        Reads what the file holds now, :data:`READ_CHUNK` bytes at a time; raises OSError (other than a missing
        file) when it cannot be read.
        """
        try:
            stat = os.stat(self.path)
            if stat.st_ino == self._inode and stat.st_size == self._offset:
                return  # nothing new
            handle = self.path.open("rb")
        except FileNotFoundError:
            return
        with handle:
            stat = os.fstat(handle.fileno())
            if stat.st_ino != self._inode or stat.st_size < self._offset:
                self._inode, self._offset, self._line, self._line_start = stat.st_ino, 0, 0, 0
                self._partial = []
            handle.seek(self._offset)
            while self._offset < stat.st_size:
                data = handle.read(min(READ_CHUNK, stat.st_size - self._offset))
                if not data:
                    return
                base, self._offset = self._offset, self._offset + len(data)
                start = 0
                while (end := data.find(b"\n", start)) >= 0:
                    raw = data[start:end]
                    if self._partial:
                        raw, self._partial = b"".join([*self._partial, raw]), []
                    self._line += 1
                    offset, self._line_start = self._line_start, base + end + 1
                    if raw.strip():
                        yield self._line, offset, raw
                    start = end + 1
                if start < len(data):
                    self._partial.append(data[start:])
