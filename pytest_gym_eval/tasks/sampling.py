"""Sampling options (``--gym-temperature``, ``--gym-top-p``, ``--gym-max-output-tokens``, ``--gym-seed``,
``--gym-param KEY=VALUE``) and how they reach every row's request.

Every row Gym gets carries its request in ``responses_create_params`` (OpenAI Responses API create
parameters). The options are written into that object of each row of the session's Gym input
(:func:`apply_sampling`, called by :func:`~pytest_gym_eval.tasks.plan.write_gym_input`), so ``gym-input.jsonl`` shows
exactly what was asked for.

:func:`apply_sampling` (its docstring has the precedence rule and the seed's route) writes them; :class:`Sampling`
holds them. What users see: docs/models.md ("Sampling").
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

PARAMS_KEY = "responses_create_params"
SEED_MODEL_TYPES = ("vllm_model",)
"""Gym model server types that pass ``metadata.extra_body`` (and so a seed) on to the endpoint."""

PRECEDENCE = "option over row"
"""Recorded in the report's meta as ``sampling.precedence``: an option's value replaces the row's own."""
POLICY_PRECEDENCE = "policy over option over row"
"""``sampling.precedence`` of a session whose policies (``--gym-policy``) carry sampling values of their own: a
policy's value replaces the option's, which replaces the row's."""

_OWN_OPTIONS = {
    "temperature": "--gym-temperature",
    "top_p": "--gym-top-p",
    "max_output_tokens": "--gym-max-output-tokens",
}
_FORBIDDEN_PARAMS = {"input": "it would replace every row's prompt", "seed": "use --gym-seed"}


class SamplingError(ValueError):
    """A sampling option's value makes no sense; ``str()`` names the option."""


def value_problem(key: str, value: float) -> str | None:
    """Why ``value`` cannot be the ``responses_create_params`` key ``key`` (``temperature``: a finite number >= 0;
    ``top_p``: in (0, 1]; ``max_output_tokens``: a whole number >= 1), or None when it can (or ``key`` is none of
    them). One rule for the session's options and a policy's own values (``--gym-policy NAME=URL,temperature=T``)."""
    if key == "temperature" and not (math.isfinite(value) and value >= 0):
        return f"expected a finite number >= 0, got {value!r}"
    if key == "top_p" and not (math.isfinite(value) and 0 < value <= 1):
        return f"expected a number in (0, 1], got {value!r}"
    if key == "max_output_tokens" and value < 1:
        return f"must be at least 1, got {value}"
    return None


@dataclass(frozen=True)
class Sampling:
    """The sampling parameters of a session; None (or empty) means "leave the row's own value".

    ``temperature`` >= 0; ``top_p`` in (0, 1]; ``max_output_tokens`` >= 1 (the policy model's output tokens per
    model call); ``seed`` the base seed (repeat ``k`` uses ``seed + k``); ``params`` extra ``(key, value)``
    pairs of ``responses_create_params`` from ``--gym-param``, values already parsed from JSON.
    """

    temperature: float | None = None
    top_p: float | None = None
    max_output_tokens: int | None = None
    seed: int | None = None
    params: tuple[tuple[str, Any], ...] = ()

    def __post_init__(self) -> None:
        for key, option in _OWN_OPTIONS.items():
            value = getattr(self, key)
            if value is not None and (problem := value_problem(key, value)):
                raise SamplingError(f"{option}: {problem}")
        for key, _ in self.params:
            if key in _OWN_OPTIONS:
                raise SamplingError(f"--gym-param {key}=...: use {_OWN_OPTIONS[key]} for {key!r}")
            if key in _FORBIDDEN_PARAMS:
                raise SamplingError(f"--gym-param {key}=...: not allowed ({_FORBIDDEN_PARAMS[key]})")

    @property
    def is_empty(self) -> bool:
        """Whether no sampling option was given (rows then go to Gym unchanged)."""
        return not self.request_params() and self.seed is None

    def request_params(self) -> dict[str, Any]:
        """The ``responses_create_params`` keys these options set (the seed is not one of them)."""
        values: dict[str, Any] = {}
        for key in ("temperature", "top_p", "max_output_tokens"):
            value = getattr(self, key)
            if value is not None:
                values[key] = value
        values.update(self.params)
        return values

    def over(self, other: Sampling) -> Sampling:
        """These values where given, else ``other``'s (``params`` merged key by key, these winning): a policy's own
        sampling over the session's options."""
        return Sampling(
            temperature=self.temperature if self.temperature is not None else other.temperature,
            top_p=self.top_p if self.top_p is not None else other.top_p,
            max_output_tokens=self.max_output_tokens if self.max_output_tokens is not None else other.max_output_tokens,
            seed=self.seed if self.seed is not None else other.seed,
            params=tuple({**dict(other.params), **dict(self.params)}.items()),
        )

    def check_model_type(self, model_type: str) -> None:
        """Raise :class:`SamplingError` when ``--gym-seed`` is given for a model type that cannot pass it on."""
        if self.seed is not None and model_type not in SEED_MODEL_TYPES:
            raise SamplingError(
                f"--gym-seed: Gym's {model_type} server has no way to pass a seed to the endpoint (the Responses "
                f"API has no seed); use --gym-model-type={SEED_MODEL_TYPES[0]} (chat completions) or drop --gym-seed"
            )

    def meta(self) -> dict[str, object]:
        """Facts for the JSON report's ``meta`` and the JUnit suite properties: ``sampling.<key>`` per value
        given (``--gym-param`` values that are not numbers or strings as compact JSON), and
        ``sampling.precedence`` when any is given; empty when none is."""
        if self.is_empty:
            return {}
        meta: dict[str, object] = {}
        for key, value in self.request_params().items():
            plain = isinstance(value, (str, int, float)) and not isinstance(value, bool)
            meta[f"sampling.{key}"] = value if plain else json.dumps(value, separators=(",", ":"), sort_keys=True)
        if self.seed is not None:
            meta["sampling.seed"] = self.seed
        meta["sampling.precedence"] = PRECEDENCE
        return meta


def parse_param(text: str, where: str = "--gym-param") -> tuple[str, Any]:
    """``KEY=VALUE`` as ``(key, value)``: VALUE is read as JSON when it is JSON (``0.5``, ``true``,
    ``{"effort": "low"}``), else kept as a string. Raises :class:`SamplingError` naming ``where``."""
    key, sep, value = text.partition("=")
    key = key.strip()
    if not sep or not key or not key.replace("_", "").isalnum():
        raise SamplingError(f"{where}: expected KEY=VALUE with a responses_create_params key, got {text!r}")
    try:
        parsed: Any = json.loads(value)
    except ValueError:
        parsed = value
    if isinstance(parsed, float) and not math.isfinite(parsed):
        raise SamplingError(f"{where}: {key} must be a finite number, got {value!r}")
    return key, parsed


def parse_params(texts: Sequence[str], where: str = "--gym-param") -> tuple[tuple[str, Any], ...]:
    """Every ``KEY=VALUE`` of ``texts`` (:func:`parse_param`); a key given twice is a :class:`SamplingError`."""
    pairs: dict[str, Any] = {}
    for text in texts:
        key, value = parse_param(text, where)
        if key in pairs:
            raise SamplingError(f"{where}: {key!r} is given twice")
        pairs[key] = value
    return tuple(pairs.items())


def apply_sampling(row: Mapping[str, Any], sampling: Sampling, repeat: int) -> dict[str, Any]:
    """``row`` (a Gym input row) with ``sampling`` written into its ``responses_create_params``.

    Each option's value replaces the row's own (see below); ``--gym-seed N`` becomes
    ``"seed": N + repeat`` inside the JSON string ``metadata.extra_body``, merged with what the row's
    ``extra_body`` already holds. The row itself is not changed; a row without a ``responses_create_params``
    object is returned as it is (collection already rejects such rows).

    Precedence: **an option beats the row's own value** (a row's ``temperature`` is used only when
    ``--gym-temperature`` is not given), as Gym's own run-level ``responses_create_params`` overrides beat a row's
    (``row | overrides`` in Gym 0.7.0's ``rollout_collection``). A value of ``--gym-param`` for a key that has its own
    option (e.g. ``temperature``) is a usage error, so each key has one source. With several policies
    (``--gym-policy NAME=URL,model=M,temperature=T``) ``sampling`` is the rollout's policy's: its own values over the
    options (:meth:`Sampling.over`), so a policy's value beats the option's, which beats the row's
    (:data:`POLICY_PRECEDENCE`).

    The seed is not a Responses API parameter (Gym 0.7.0 rejects unknown request keys). Gym's ``vllm_model`` server
    forwards a per-request seed to the chat-completions endpoint from ``responses_create_params.metadata.extra_body``
    (a JSON string; Gym's own ``num_repeats_add_seed`` uses the same route), so ``--gym-seed`` needs
    ``--gym-model-type=vllm_model``. Repeat ``k`` of a task gets seed ``N + k``: the run is reproducible and the
    repeats still differ.
    """
    params = row.get(PARAMS_KEY)
    if sampling.is_empty or not isinstance(params, dict):
        return dict(row)
    request = {**params, **sampling.request_params()}
    if sampling.seed is not None:
        metadata = dict(request.get("metadata") or {})
        try:
            extra = json.loads(metadata.get("extra_body") or "{}")
        except (TypeError, ValueError):
            extra = {}
        if not isinstance(extra, dict):
            extra = {}
        extra["seed"] = sampling.seed + repeat
        metadata["extra_body"] = json.dumps(extra, separators=(",", ":"))
        request["metadata"] = metadata
    return {**row, PARAMS_KEY: request}
