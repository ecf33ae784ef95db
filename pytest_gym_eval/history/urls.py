"""Database URLs without their secrets: :func:`redact_url` for every message, :func:`scrub` for a driver's text."""

from __future__ import annotations

from urllib.parse import quote, unquote, urlsplit

from pytest_gym_eval.core.credentials import redact_value, secret_spans

_POSTGRES_SCHEMES = ("postgresql", "postgres")


def redact_url(target: str) -> str:
    """``target`` with any password replaced by ``***``: the ``user:password@`` part of a URL and a query
    parameter named like a credential (libpq's ``password``); :func:`pytest_gym_eval.core.credentials.redact_value`,
    the one redaction of option values. A path or a URL without a password is returned unchanged."""
    return redact_value(target)


def _secrets(target: str) -> list[str]:
    """The password(s) a URL holds (:func:`~pytest_gym_eval.core.credentials.secret_spans`), as written,
    percent-decoded and percent-encoded (to scrub them from driver messages)."""
    found = [target[start:end] for start, end, _ in secret_spans(target)]
    return [variant for secret in found for variant in {secret, unquote(secret), quote(secret, safe="")} if variant]


def scrub(text: str, target: str) -> str:
    """``text`` with the target replaced by its redacted form and any password in it replaced by ``***``."""
    text = text.replace(target, redact_url(target))
    for secret in _secrets(target):
        text = text.replace(secret, "***")
    return text


def is_postgres_url(target: str) -> bool:
    """Whether ``target`` names a PostgreSQL database (``postgresql://`` or ``postgres://``), well-formed or not
    (:func:`target_problem` says whether it is)."""
    scheme, sep, _ = target.partition("://")
    return bool(sep) and scheme.strip().lower() in _POSTGRES_SCHEMES


def target_problem(target: str) -> str | None:
    """Why ``target`` cannot be a history (a SQLite file path or a ``postgresql://`` URL), or None: a URL of
    another scheme (``mysql://``, ``sqlite:///``, ``http://``: a path made of it would lose its ``//``), or a
    PostgreSQL URL libpq cannot parse (through psycopg when it is installed, else the standard URL parser, which
    sees unbalanced brackets). The text names the target with its secrets redacted."""
    shown = redact_url(target)
    if not is_postgres_url(target):
        if "://" in target:
            return f"expected a SQLite file path or a postgresql:// URL, got {shown!r}"
        return None
    try:
        from psycopg import Error as PsycopgError
        from psycopg.conninfo import conninfo_to_dict
    except ImportError:
        try:
            urlsplit(target)
        except ValueError as error:
            return f"not a valid PostgreSQL URL {shown!r}: {scrub(str(error), target)}"
        return None
    try:
        conninfo_to_dict(target)
    except PsycopgError as error:  # libpq's own words, which quote the URL (again)
        reason = " ".join(scrub(str(error), target).split()).replace(f' in URI: "{shown}"', "")
        return f"not a valid PostgreSQL URL {shown!r}: {reason}"
    return None
