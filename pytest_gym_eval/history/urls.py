"""Database URLs without their secrets: :func:`redact_url` for every message, :func:`scrub` for a driver's text."""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit, urlunsplit

_POSTGRES_SCHEMES = ("postgresql", "postgres")


def redact_url(target: str) -> str:
    """``target`` with any password replaced by ``***``: the ``user:password@`` part of a URL and a ``password``
    query parameter (libpq's). A path or a URL without a password is returned unchanged."""
    try:
        parts = urlsplit(target)
    except ValueError:
        return re.sub(r"://([^/@:]*):[^/@]*@", r"://\1:***@", target)
    if not parts.scheme or not parts.netloc:
        return target
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, host = netloc.rpartition("@")
        if ":" in userinfo:
            user = userinfo.split(":", 1)[0]
            netloc = f"{user}:***@{host}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        if any(key.lower() == "password" for key, _ in pairs):
            query = urlencode([(key, "***" if key.lower() == "password" else value) for key, value in pairs], safe="*")
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def _secrets(target: str) -> list[str]:
    """The password(s) a URL holds, as written and percent-decoded (to scrub them from driver messages)."""
    try:
        parts = urlsplit(target)
    except ValueError:
        return []
    found = []
    if parts.password:
        found.append(parts.password)
    found += [value for key, value in parse_qsl(parts.query) if key.lower() == "password" and value]
    return [variant for secret in found for variant in {secret, unquote(secret), quote(secret, safe="")} if variant]


def scrub(text: str, target: str) -> str:
    """``text`` with the target replaced by its redacted form and any password in it replaced by ``***``."""
    text = text.replace(target, redact_url(target))
    for secret in _secrets(target):
        text = text.replace(secret, "***")
    return text


def is_postgres_url(target: str) -> bool:
    """Whether ``target`` names a PostgreSQL database (``postgresql://`` or ``postgres://``)."""
    return urlsplit(target).scheme.lower() in _POSTGRES_SCHEMES if "://" in target else False
