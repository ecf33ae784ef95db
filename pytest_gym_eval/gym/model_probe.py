"""The model endpoints a Gym start waits for (the policy model's, and each ``--gym-model-server`` binding's own URL):
``GET <url>/models`` probed until it answers, with a note while it does not and a warning when it does not list the
model the reports will name."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Sequence

from pytest_gym_eval.gym.config import ModelEndpoint
from pytest_gym_eval.gym.servers import GymStartError
from pytest_gym_eval.outcomes.causes import redact
from pytest_gym_eval.tasks.model_servers import ModelServerBinding

PROBE_NOTE_EVERY = 60.0
"""Seconds between two notes that the model endpoint still does not answer."""


def unlisted_model(name: str, body: bytes, option: str = "--gym-model") -> str | None:
    """What to say when ``GET /models`` answered ``body`` (OpenAI's ``{"data": [{"id": ...}]}``) without ``name``
    among its ids, or None (listed, or a body of another shape); ``option`` is where the name was given. Some
    servers answer any model name with the one they serve (llama.cpp does), so a typo would credit every report to
    a model that never ran."""
    try:
        listed = [str(entry["id"]) for entry in json.loads(body)["data"]]
    except (ValueError, KeyError, TypeError):
        return None
    if not listed or name in listed:
        return None
    shown = ", ".join(listed[:5]) + (f" and {len(listed) - 5} more" if len(listed) > 5 else "")
    return f"does not list the model {name!r} ({option}) in GET /models ({shown}); the reports name {name!r}"


def without_userinfo(url: str) -> tuple[str, str]:
    """``url`` without its ``user:password@`` and that userinfo as HTTP Basic credentials (base64, percent-decoded
    first), or ``(url, "")`` when it has none."""
    import base64
    from urllib.parse import unquote, urlsplit, urlunsplit

    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url, ""
    userinfo, _, host = parts.netloc.rpartition("@")
    user, _, password = userinfo.partition(":")
    basic = base64.b64encode(f"{unquote(user)}:{unquote(password)}".encode()).decode("ascii")
    return urlunsplit(parts._replace(netloc=host)), basic


def probe_model(
    model: ModelEndpoint,
    deadline: float,
    stopping: threading.Event,
    on_wait: Callable[[str], None] | None = None,
    server: str | None = None,
) -> None:
    """Wait until ``GET <url>/models`` answers 2xx (retrying refused connections until ``deadline``, a
    ``time.monotonic()`` value). While it does not, ``on_wait`` gets a note (what went wrong, how long this
    waits at most) after the first try and then every :data:`PROBE_NOTE_EVERY` seconds, so a mistyped URL
    does not look like a hang. ``server`` names the model server a ``--gym-model-server`` binding serves (None:
    the policy's), in every message. Raises :class:`GymStartError` on a 401/403 or when the deadline passes."""
    import urllib.error  # here: importing urllib.request (http.client, ssl) took ~15 ms of every session's start
    import urllib.request

    url, basic = without_userinfo(model.url)  # urllib takes a URL's user:password@ for part of the host name
    request = urllib.request.Request(url.rstrip("/") + "/models")
    key = model.api_key()
    if key or basic:
        request.add_header("Authorization", f"Bearer {key}" if key else f"Basic {basic}")
    last = ""
    next_note = time.monotonic()
    shown = redact(model.url)  # the terminal, JUnit and the reports show these messages: no password or query
    shown += f" (model server {server})" if server else ""
    option = f"model= of --gym-model-server {server}" if server else "--gym-model"
    while not stopping.is_set():
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                if 200 <= response.status < 300:
                    if on_wait is not None and (
                        unlisted := unlisted_model(model.model, response.read(1 << 20), option)
                    ):
                        on_wait(f"warning: the model endpoint {shown} {unlisted}")
                    return
                last = f"HTTP {response.status}"
        except urllib.error.HTTPError as error:
            if error.code in (401, 403):
                hint = (
                    f"is ${model.api_key_env} set to a valid key?"
                    if model.api_key_env
                    else "it needs a key: name its variable (key=ENV_VAR of --gym-model-server)"
                )
                raise GymStartError(
                    f"the model endpoint {shown} refused the API key (HTTP {error.code}); {hint}"
                ) from None
            last = f"HTTP {error.code}"
        except (urllib.error.URLError, OSError) as error:
            last = str(getattr(error, "reason", error))
        now = time.monotonic()
        if now >= deadline:
            raise GymStartError(f"the model endpoint {shown} did not answer GET /models ({last})")
        if on_wait is not None and now >= next_note:
            on_wait(
                f"the model endpoint {shown} does not answer GET /models yet ({last}); "
                f"waiting up to {deadline - now:.0f} s more (--gym-startup-timeout)"
            )
            next_note = now + PROBE_NOTE_EVERY
        stopping.wait(1.0)


def bound_endpoints(bindings: Sequence[ModelServerBinding], model_type: str) -> list[ModelEndpoint]:
    """The endpoints of the ``--gym-model-server`` bindings that name a URL of their own (not ``NAME=policy``,
    whose endpoint is the policy's), to wait for before Gym starts (:func:`probe_model`): Gym itself probes every
    model server's ``GET /models`` at start and gives up on one that does not answer. ``model_type`` is the
    policy's (``--gym-model-type``), the type of a binding without ``type=``."""
    return [
        ModelEndpoint(b.url, b.model, b.model_type(model_type), b.api_key_env or "")
        for b in bindings
        if b.url is not None and b.model is not None
    ]
