"""Writing report files: whole or not at all."""

from __future__ import annotations

import os
import uuid
from pathlib import Path


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
