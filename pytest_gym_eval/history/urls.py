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
    """Whether ``target`` names a PostgreSQL database (``postgresql://`` or ``postgres://``)."""
    return urlsplit(target).scheme.lower() in _POSTGRES_SCHEMES if "://" in target else False
