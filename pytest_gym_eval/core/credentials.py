"""Credentials in option values: where a text's URLs hold a secret (:func:`secret_spans`: a URL's
``user:password@`` and the values of query parameters named like a credential, ``?password=``, ``?api-key=``,
``?token=``) and the one redaction of every option value the plugin records or echoes (:func:`redact_value`,
:func:`redact_args`): the run directory's manifest, the resume command, the reports, the terminal. What users see:
docs/warm-and-resume.md ("Credentials in options")."""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import unquote

REDACTED = "***"
"""What stands in a recorded or echoed option value for each secret it held."""

_URL = re.compile(r"(?i)\b[a-z][a-z0-9+.\-]*:/{1,2}[^\s'\"<>]*")
"""A URL anywhere in a text; ``scheme:/`` too, which is what a path made of a URL keeps of its ``//``
(``Path("http://u:pw@h/x")`` prints ``http:/u:pw@h/x``)."""
_SPEC_GOES_ON = re.compile(r",(?=[A-Za-z_][A-Za-z0-9_-]*=)")
"""Where a query value ends inside a ``--gym-policy`` spec: at a comma followed by the spec's next ``key=``."""
_SECRET_PARAMETER = re.compile(r"(?i)pass|pwd|key|token|secret|auth|sig|credential")
"""A query parameter whose name matches holds a secret (``password``, ``sslpassword``, ``api-key``, ``token``...)."""
_HOST = re.compile(r"[\w.~%:\[\],-]*(?=[/?#]|$)")
"""What follows a URL's ``@`` when that ``@`` ends its userinfo: host names, addresses and ports up to the path,
the query or the end (libpq's ``h1:5432,h2:5433`` too), never a query's ``&`` or ``=``."""


def _userinfo_end(url: str, start: int) -> int:
    """Where the userinfo of ``url`` (its authority starting at ``start``) ends: the position of its last ``@``
    that a host follows, or -1. A database client reads a password up to that ``@`` whatever it holds: libpq and
    SQLAlchemy take ``pa?ss#w`` of ``postgresql://u:pa?ss#w@h/db`` as the password, where a generic URL parser
    would end the authority at the ``?``. A ``--gym-policy`` spec's ``,key=`` ends the search (its values may
    hold an ``@``)."""
    limit = next((m.start() for m in _SPEC_GOES_ON.finditer(url, start)), len(url))
    at = url.rfind("@", start, limit)
    while at >= 0 and not _HOST.match(url[:limit], at + 1):
        at = url.rfind("@", start, at)
    return at


def secret_spans(text: str) -> list[tuple[int, int, str]]:
    """Each secret in ``text``'s URLs (any scheme, anywhere in the text, e.g. inside a ``--gym-policy`` spec or in
    a path made of a URL) as ``(start, end, what)``: ``what`` is ``"password"`` for the password of a URL's
    ``user:password@`` (up to the last ``@`` a host follows, so a password holding ``?``, ``#`` or ``/`` is
    whole), else the name of the query parameter whose value it is (up to the next ``&``: libpq reads a ``#`` as
    part of a value). Spans are in order and never empty or overlapping."""
    spans: list[tuple[int, int, str]] = []
    for found in _URL.finditer(text):
        url, base = found.group(), found.start()
        start = len(url) - len(url[url.index(":") + 1 :].lstrip("/"))  # after the scheme's "://" (or ":/")
        at = _userinfo_end(url, start)
        colon = url.find(":", start, at) if at > 0 else -1
        if colon >= 0 and at > colon + 1 and not any(c in url[start:colon] for c in "/?#"):
            spans.append((base + colon + 1, base + at, "password"))
        netloc_end = next((i for i in range(max(at + 1, start), len(url)) if url[i] in "/?#"), len(url))
        query = url.find("?", netloc_end)
        if query < 0:
            continue
        position = query + 1
        for pair in url[query + 1 :].split("&"):
            name, equals, value = pair.partition("=")
            value = _SPEC_GOES_ON.split(value, 1)[
                0
            ]  # a --gym-policy spec goes on after ",key=" (a password may hold a comma)
            if equals and value and _SECRET_PARAMETER.search(unquote(name)):
                spans.append((base + position + len(name) + 1, base + position + len(name) + 1 + len(value), name))
            position += len(pair) + 1
    return spans


def has_secret(text: str) -> bool:
    """Whether ``text`` holds a URL with a secret (:func:`secret_spans`)."""
    return bool(secret_spans(text))


ENDPOINT_USERINFO = (
    "credentials in the URL (user:password@) cannot reach the endpoint: Gym's model server sends an Authorization "
    "header (Bearer <key>) with every call, which its HTTP client (aiohttp) refuses to combine with credentials in "
    "the URL, so every call would fail; give the key through a variable instead"
)
"""Why a model endpoint's URL must not hold ``user:password@`` (:func:`endpoint_url_problem`)."""
ENDPOINT_QUERY = (
    "a query or fragment (?...) in the URL cannot reach the endpoint: Gym's model server appends the API's path to "
    "the URL (<url>/responses, <url>/chat/completions, <url>/models), which would land inside the query, so every "
    "call would go to the wrong place; give the key through a variable instead"
)
"""Why a model endpoint's URL must not hold a query or a fragment (:func:`endpoint_url_problem`)."""


def endpoint_url_problem(url: str) -> str | None:
    """Why Gym's ``openai_model`` and ``vllm_model`` servers (Gym 0.6.0 and 0.7.0, one client) cannot call the model
    endpoint ``url`` (``http://`` or ``https://``), or None when they can: :data:`ENDPOINT_USERINFO` for userinfo
    (``user@`` or ``user:password@`` before the host; the client sends ``Authorization: Bearer <key>`` with every
    call and aiohttp raises ``ValueError: Cannot combine AUTHORIZATION header with AUTH argument or credentials
    encoded in URL``, measured with a bound judge: every call failed, which over_refusal_detection scored as an
    "unclear" verdict, 0.5), :data:`ENDPOINT_QUERY` for a query or fragment (the client calls
    ``f"{base_url}/responses"``). Other schemes and texts without ``://`` get None (other checks name them)."""
    text = url.strip()
    scheme, separator, rest = text.partition("://")
    if not separator or scheme.lower() not in ("http", "https"):
        return None
    start = len(text) - len(rest)
    at = _userinfo_end(text, start)
    if at >= start and not any(c in text[start:at] for c in "/?#"):
        return ENDPOINT_USERINFO
    return ENDPOINT_QUERY if any(c in text for c in "?#") else None


def redact_value(text: str, marker: str = REDACTED) -> str:
    """``text`` (an option's value, a command-line word, a message naming a URL) with each secret of its URLs
    (:func:`secret_spans`) replaced by ``marker``: ``postgresql://me:***@db/evals``, ``...?password=***``."""
    kept, last = [], 0
    for start, end, _ in secret_spans(text):
        kept += [text[last:start], marker]
        last = end
    return "".join([*kept, text[last:]])


def redact_args(args: Iterable[str]) -> list[str]:
    """Each of ``args`` (a command line) through :func:`redact_value`: what a manifest records of a command."""
    return [redact_value(arg) for arg in args]


URL_VARIABLE = "PYTEST_GYM_EVAL_POLICY_URL"
"""The environment variable that hands Gym the policy model's URL when the URL holds a secret (:func:`config_url`);
another policy ``NAME`` (``--gym-policy``) gets ``PYTEST_GYM_EVAL_POLICY_URL_NAME``."""


def url_variable(policy: str | None = None) -> str:
    """The environment variable of the URL of the first policy model (``policy`` None) or of policy ``policy``."""
    return URL_VARIABLE if policy is None else f"{URL_VARIABLE}_{policy}"


def config_url(url: str, variable: str) -> str:
    """``url`` as a Gym config file holds it: itself, or when it holds a secret (:func:`has_secret`) the
    interpolation ``${oc.env:<variable>}``, resolved inside Gym's processes from their environment (where the
    plugin puts ``{variable: url}``), so that no file of the run holds the secret."""
    return f"${{oc.env:{variable}}}" if has_secret(url) else url
