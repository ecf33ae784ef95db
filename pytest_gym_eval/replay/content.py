"""Message content and tool output in normal form: text parts as their text, every other part (image, file, audio,
video, refusal) a marker naming it by the sha256 of its bytes, or its URL or file id (see the package docstring).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import functools
import hashlib
import json
import os
import re
import urllib.parse
from collections.abc import Mapping
from typing import Any

from pytest_gym_eval.core.files import file_sha256

_TEXT_PARTS = frozenset({"input_text", "output_text", "text", "summary_text", "reasoning_text"})
MARK = "\x00"
_MARKER = re.compile("\x00([^\x00]*)\x00")
_DIGEST = re.compile(r"sha256:([0-9a-f]{12})[0-9a-f]{52}")


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


def canonical(value: Any) -> str:
    """Compact canonical JSON (sorted keys) of any JSON value."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def _marker(kind: str, identity: str, *attributes: str) -> str:
    """A non-text content part as it stands in normalised content (see the package docstring)."""
    return MARK + " ".join((kind, identity, *attributes)) + MARK


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
            return "sha256:" + file_sha256(path)
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
    return canonical({name: value for name, value in part.items() if name != "type"})


def part_normal(part: Any) -> str:
    """One content part in normal form: a text part's text, any other part a marker (package docstring)."""
    if isinstance(part, str):
        return part
    if not isinstance(part, Mapping):
        return _marker("part", canonical(part))
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
    return _marker(str(kind), canonical({name: value for name, value in part.items() if name != "type"}))


def content_normal(content: Any) -> str:
    """A message content or tool output in normal form: a string as is, a list of parts as
    :func:`part_normal` of each joined; null or missing is ``""``, any other value its canonical JSON."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part_normal(part) for part in content)
    return canonical(content)


def display(text: str) -> str:
    """Normalised content as people read it: media markers as ``[image sha256:1a2b3c4d5e6f]``."""
    return _MARKER.sub(lambda match: "[" + _DIGEST.sub(r"sha256:\1", match[1]) + "]", text)
