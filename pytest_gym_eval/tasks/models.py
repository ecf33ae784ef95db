"""Several policy models in one session (``--gym-policy``): parsing their specs, naming their items and the agent
instance each one runs in Gym, and the Gym config blocks that serve them all from one Gym.

A spec is ``NAME=URL[,model=SERVED_NAME][,key=ENV_VAR][,temperature=T][,top_p=P][,max_output_tokens=N]`` (an
OpenAI-style endpoint; the API key is read from the environment variable ``ENV_VAR``, never given itself; the
sampling values are the policy's own, :func:`policy_sampling`) or ``NAME=replay:ROLLOUTS.jsonl`` (the replay model
serving that file's recorded answers). The first policy named is the baseline unless ``--gym-baseline-policy`` names
another.

In Gym (notes: ``gym-notes.md``, "Several policy models in one Gym") the first policy is Gym's ``policy_model``
and each dataset's agent runs against it unchanged; every other policy ``NAME`` gets a model server instance
``NAME_policy_model``, a copy of each agent bound to it (``<agent>__NAME``) and, in front of that copy, its own
``legacy_agent`` environment server (``<agent>__NAME_environment_server``). Gym 0.6.x has no environment servers
(its ``gym eval run`` posts each row to the agent named in its ``agent_ref``): there the copy alone serves.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_gym_eval.core.credentials import (
    config_url,
    endpoint_url_problem,
    has_secret,
    redact_value,
    url_variable,
)
from pytest_gym_eval.tasks.sampling import POLICY_PRECEDENCE, Sampling, value_problem

NAME_PATTERN = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
"""A policy's name: it ends up in node ids (``-k``) and in Gym server instance names."""

REPLAY_PREFIX = "replay:"
AGENT_SEPARATOR = "__"
"""Between an agent's name and a policy's in the agent instance that runs the policy (``mcqa_simple_agent__cand``)."""

MODEL_FIELDS = {
    "openai_model": ("openai_base_url", "openai_model", "openai_api_key"),
    "vllm_model": ("base_url", "model", "api_key"),
}
"""Per Gym model server type, its config's fields for the base URL, the model name and the API key (Gym 0.7.0's
``responses_api_models/<type>/configs/<type>.yaml``)."""
SAMPLING_FIELDS: dict[str, type[float] | type[int]] = {"temperature": float, "top_p": float, "max_output_tokens": int}
"""The sampling values a policy's spec may carry (``temperature=1.0``), each a ``responses_create_params`` key with
its session option (``--gym-temperature``, ...), and the type its text is read as."""


class PolicySpecError(ValueError):
    """A ``--gym-policy`` value (or ``--gym-baseline-policy``) that cannot be used; the message names the value."""


@dataclass(frozen=True)
class Policy:
    """One policy model of a session: ``name`` (as in node ids), and either ``url`` + ``model`` (+ the environment
    variable ``api_key_env`` holding its key) or ``replay`` (a recordings file to serve)."""

    name: str
    url: str | None = None
    model: str | None = None
    api_key_env: str | None = None
    replay: Path | None = None
    sampling: Sampling = field(default_factory=Sampling)
    """The policy's own sampling values (``temperature``, ``top_p``, ``max_output_tokens``; None where the spec
    gives none), which beat the session's options (:func:`policy_sampling`)."""


def parse_policy(text: str, base: Path, api_key_env: str) -> Policy:
    """One ``--gym-policy`` value. ``base`` resolves a relative replay path (the working directory for the command
    line, the ini file's folder for the ini); ``api_key_env`` is the key's variable when the spec names none.
    Raises :class:`PolicySpecError` naming ``text`` for a missing ``=``, a bad name, an empty URL, an unknown or
    repeated ``key=value`` part, a URL without ``model=``, a sampling value that is not a number or out of its
    range (:func:`~pytest_gym_eval.tasks.sampling.value_problem`), or a replay path that is a URL or no file."""
    shown = redact_value(text)  # a URL's password never in a message
    name, equals, rest = text.partition("=")
    name = name.strip()
    if not equals or not rest.strip():
        raise PolicySpecError(
            f"{shown!r}: expected NAME=URL[,model=M][,key=VAR][,temperature=T][,top_p=P][,max_output_tokens=N] or "
            "NAME=replay:ROLLOUTS.jsonl"
        )
    if not NAME_PATTERN.match(name) or AGENT_SEPARATOR in name:
        raise PolicySpecError(
            f"{shown!r}: a policy's name is a letter then letters, digits or single underscores, got {name!r}"
        )
    rest = rest.strip()
    if rest.startswith(REPLAY_PREFIX):
        if "://" in rest:
            raise PolicySpecError(f"{shown!r}: expected a recordings file path after {REPLAY_PREFIX}, got a URL")
        if not rest.removeprefix(REPLAY_PREFIX).strip():
            raise PolicySpecError(f"{shown!r}: expected a recordings file after {REPLAY_PREFIX}, got none")
        path = (base / Path(rest.removeprefix(REPLAY_PREFIX)).expanduser()).resolve()
        if not path.is_file():
            raise PolicySpecError(f"{shown!r}: no such recordings file: {path}")
        return Policy(name, replay=path)
    url, *parts = (part.strip() for part in rest.split(","))
    fields: dict[str, str] = {}
    for part in parts:
        key, eq, value = (piece.strip() for piece in part.partition("="))
        if not eq or key not in ("model", "key", *SAMPLING_FIELDS) or not value or key in fields:
            raise PolicySpecError(
                f"{shown!r}: {part!r} is not model=SERVED_NAME, key=ENV_VAR, {'=, '.join(SAMPLING_FIELDS)}= "
                "(each at most once)"
            )
        fields[key] = value
    if not url or "model" not in fields:
        raise PolicySpecError(f"{shown!r}: an endpoint needs its URL and model=SERVED_NAME")
    if problem := endpoint_url_problem(url):
        raise PolicySpecError(f"{shown!r}: {problem} (key=ENV_VAR)")
    values: dict[str, Any] = {key: _sampling_value(text, key, fields[key]) for key in SAMPLING_FIELDS if key in fields}
    sampling = Sampling(**values)
    return Policy(name, url=url, model=fields["model"], api_key_env=fields.get("key", api_key_env), sampling=sampling)


def _sampling_value(spec: str, key: str, text: str) -> float | int:
    """``text`` read as the sampling value ``key`` of the spec ``spec``; :class:`PolicySpecError` naming both when it
    is not a number of the key's type or out of its range."""
    kind = SAMPLING_FIELDS[key]
    try:
        value = kind(text)
    except ValueError:
        expected = "a whole number" if kind is int else "a number"
        raise PolicySpecError(f"{redact_value(spec)!r}: {key}: expected {expected}, got {text!r}") from None
    if problem := value_problem(key, value):
        raise PolicySpecError(f"{redact_value(spec)!r}: {key}: {problem}")
    return value


def order_policies(policies: Sequence[Policy], baseline: str | None) -> tuple[Policy, ...]:
    """``policies`` with the baseline first (``baseline``, else the first named). Raises :class:`PolicySpecError`
    for a name given twice, two names that differ only by case (``base`` and ``Base``: pytest's ``-k`` matches the
    items' ids, ``r0-base``, ignoring case, and a case-insensitive file system or a reader would not tell them
    apart), a single policy, or a ``baseline`` no policy has."""
    names = [policy.name for policy in policies]
    if duplicate := next((name for name in names if names.count(name) > 1), None):
        raise PolicySpecError(f"policy {duplicate!r} is named twice")
    first: dict[str, str] = {}
    for name in names:
        if (other := first.setdefault(name.casefold(), name)) != name:
            raise PolicySpecError(
                f"policies {other!r} and {name!r} differ only by case: name them apart (pytest's -k matches "
                f"their items' ids, r0-{other} and r0-{name}, ignoring case)"
            )
    if len(policies) < 2:
        raise PolicySpecError("name two or more policies to compare them (one policy: --gym-model-url/--gym-replay)")
    if baseline is None:
        return tuple(policies)
    if baseline not in names:
        raise PolicySpecError(f"baseline policy {baseline!r} is not one of the policies named: {', '.join(names)}")
    index = names.index(baseline)
    return (policies[index], *policies[:index], *policies[index + 1 :])


def item_id(repeat: int, policy: str | None) -> str:
    """The parametrization id of an item: ``r<repeat>``, or with several policies ``r<repeat>-<policy>``."""
    return f"r{repeat}" if policy is None else f"r{repeat}-{policy}"


def agent_instance(agent: str, policies: Sequence[Policy], policy: str | None) -> str:
    """The Gym agent instance that rolls out ``agent``'s rows against ``policy``: the agent itself for the first
    policy (Gym's ``policy_model``) or without policies, else ``<agent>__<policy>``."""
    if policy is None or policy == policies[0].name:
        return agent
    return f"{agent}{AGENT_SEPARATOR}{policy}"


def base_agent(instance: str, policies: Sequence[Policy]) -> str:
    """The agent an agent instance (:func:`agent_instance`) copies; ``instance`` itself when it is no copy."""
    for policy in policies[1:]:
        suffix = f"{AGENT_SEPARATOR}{policy.name}"
        if instance.endswith(suffix):
            return instance.removesuffix(suffix)
    return instance


def policy_of(instance: str, policies: Sequence[str]) -> str:
    """The policy an agent instance (:func:`agent_instance`) rolls out against: ``NAME`` for ``<agent>__NAME`` when
    NAME is a policy other than the first, else the first (the baseline). ``policies`` are names, baseline first
    (non-empty, else IndexError)."""
    for name in policies[1:]:
        if instance.endswith(f"{AGENT_SEPARATOR}{name}"):
            return name
    return policies[0]


def policy_sampling(policy: Policy, session: Sampling) -> Sampling:
    """The sampling of ``policy``'s requests: **the policy's own value beats the session's option**, which beats
    the row's own (:func:`~pytest_gym_eval.tasks.sampling.apply_sampling`). ``--gym-seed`` and ``--gym-param`` are the
    session's for every policy."""
    return policy.sampling.over(session)


def instance_sampling(instance: str, policies: Sequence[Policy], session: Sampling) -> Sampling:
    """The sampling of the rollouts of agent instance ``instance`` (:func:`agent_instance`): its policy's
    (:func:`policy_sampling`), or ``session`` without policies."""
    if not policies:
        return session
    name = policy_of(instance, [policy.name for policy in policies])
    return policy_sampling(next(policy for policy in policies if policy.name == name), session)


def sampling_meta(policies: Sequence[Policy], session: Sampling) -> dict[str, object]:
    """Facts for the JSON report's ``meta`` (and the JUnit suite properties) of a session comparing ``policies``:
    ``policy.<name>.<key>`` for each request parameter a policy's rollouts are sent with (:func:`policy_sampling`:
    its own or the session's), ``policy.<name>.seed`` with ``--gym-seed``, and ``sampling.precedence`` =
    :data:`~pytest_gym_eval.tasks.sampling.POLICY_PRECEDENCE` when a policy has values of its own. Never a URL or key.
    Empty without policies."""
    meta: dict[str, object] = {}
    for policy in policies:
        for key, value in policy_sampling(policy, session).meta().items():
            if key.startswith("sampling.") and key != "sampling.precedence":
                meta[f"policy.{policy.name}.{key.removeprefix('sampling.')}"] = value
    if any(not policy.sampling.is_empty for policy in policies):
        meta["sampling.precedence"] = POLICY_PRECEDENCE
    return meta


def policy_url_environment(endpoints: Sequence[tuple[str, str, str, str | None]]) -> dict[str, str]:
    """What Gym's environment needs for the URLs :func:`server_blocks` writes of ``endpoints`` (same shape):
    ``{PYTEST_GYM_EVAL_POLICY_URL_<policy>: url}`` for each URL holding a secret."""
    return {url_variable(policy): url for policy, url, _, _ in endpoints if has_secret(url)}


def model_server_name(policy: str) -> str:
    """The Gym model server instance serving a policy other than the first."""
    return f"{policy}_policy_model"


def server_blocks(
    agents: Sequence[str],
    endpoints: Sequence[tuple[str, str, str, str | None]],
    model_type: str,
    environment_servers: bool = True,
) -> dict[str, Any]:
    """The Gym config blocks that serve every policy but the first, for ``gym env start`` only (``gym eval run``
    cannot resolve the copies' references).

    ``agents`` are the agent instances of the run (copies included); ``endpoints`` one ``(policy, base URL,
    served model name, API key environment variable or None)`` per policy but the first; ``model_type`` is
    Gym's model server type (a key of :data:`MODEL_FIELDS`, else :class:`PolicySpecError`). The key enters as
    ``${oc.env:VAR}``, resolved inside Gym's processes; without a variable the key is ``no-key``. A URL holding a
    password enters as ``${oc.env:PYTEST_GYM_EVAL_POLICY_URL_<policy>}``
    (:func:`~pytest_gym_eval.core.credentials.config_url`; Gym's environment needs :func:`policy_url_environment`).
    ``environment_servers``: whether the Gym checkout has environment servers (Gym 0.7.0 and later,
    :func:`~pytest_gym_eval.provision.has_environment_servers`); without them no block fronts the copies.
    """
    if model_type not in MODEL_FIELDS:
        raise PolicySpecError(f"--gym-policy works with model types {', '.join(MODEL_FIELDS)}, not {model_type!r}")
    url_field, model_field, key_field = MODEL_FIELDS[model_type]
    blocks: dict[str, Any] = {}
    for policy, url, model, key_env in endpoints:
        key = f"${{oc.env:{key_env}}}" if key_env else "no-key"
        fields = {url_field: config_url(url, url_variable(policy)), model_field: model, key_field: key}
        blocks[model_server_name(policy)] = {"_copy": "policy_model", "responses_api_models": {model_type: fields}}
        for instance in agents:
            suffix = f"{AGENT_SEPARATOR}{policy}"
            if not instance.endswith(suffix):
                continue
            agent = instance.removesuffix(suffix)
            model_server = {"type": "responses_api_models", "name": model_server_name(policy)}
            blocks[instance] = {
                "_copy": agent,
                "responses_api_agents": {"simple_agent": {"model_server": model_server}},
            }
            if not environment_servers:
                continue
            legacy = {"entrypoint": "app.py", "agent_server": {"type": "responses_api_agents", "name": instance}}
            blocks[f"{instance}_environment_server"] = {"environment_servers": {"legacy_agent": legacy}}
    return blocks
