"""Rollouts on demand: one row a test builds itself, rolled out by the session's running Gym over HTTP, without a
``gym eval run`` (docs/hooks-and-api.md, "Rollouts on demand").

Gym's head server lists its servers (``GET /server_instances``: ``process_name``, ``server_type``, ``url``, ...);
from Gym 0.7.0 an agent is fronted by an environment server (``server_type`` ``environment_servers``) whose
``POST /run`` takes a row (only ``responses_create_params`` is required, plus the environment's own fields) and
answers the verifier's record: ``reward``, ``response`` and the environment's fields. Gym 0.6.x has no environment
servers: there the agent server's own ``POST /run`` takes the row and answers the same record (it is what that
release's ``gym eval run`` posts each row to). This module finds the server, posts the row with its own timeout
(standard library only) and turns the answer, or the failure, into a
:class:`~pytest_gym_eval.outcomes.rollout.Rollout` or an :class:`OnDemandError`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_gym_eval.outcomes.causes import unwrap
from pytest_gym_eval.outcomes.rollout import Rollout

ENVIRONMENT_SERVERS = "environment_servers"
AGENT_SERVERS = "responses_api_agents"
ON_DEMAND_PROPERTY = "gym_on_demand_reward"
"""The ``user_properties`` name under which a test records each of its on-demand rollouts' rewards (JUnit shows it)."""
DEFAULT_TIMEOUT = 600.0
"""Seconds one on-demand rollout may take (Gym's ``/run`` has no timeout of its own)."""


class OnDemandError(Exception):
    """An on-demand rollout got no verdict: Gym refused the row or failed it, did not answer in time, or cannot be
    reached; ``str()`` names the agent, the URL and the cause. The test that asked errors (it does not fail)."""


@dataclass(frozen=True)
class Servers:
    """What the head server's ``GET /server_instances`` says: ``agents`` (process names of the agent servers, in
    order), ``environments`` (environment server process name -> its base URL) and ``agent_urls`` (agent server
    process name -> its base URL, where the head server gives one)."""

    agents: tuple[str, ...]
    environments: dict[str, str]
    agent_urls: dict[str, str] = field(default_factory=dict)

    @classmethod
    def parse(cls, instances: Any) -> Servers:
        """From the decoded answer (a list of dicts); raises :class:`OnDemandError` for any other shape."""
        if not isinstance(instances, list):
            raise OnDemandError(f"Gym's head server listed no servers (GET /server_instances: {instances!r:.200})")
        agents: list[str] = []
        environments: dict[str, str] = {}
        agent_urls: dict[str, str] = {}
        for instance in instances:
            if not isinstance(instance, Mapping):
                continue
            name = str(instance.get("process_name") or instance.get("config_path") or "")
            kind = instance.get("server_type")
            url = instance.get("url")
            if not url and instance.get("port"):
                url = f"http://{instance.get('host') or '127.0.0.1'}:{instance['port']}"
            if kind == AGENT_SERVERS and name:
                agents.append(name)
                if url:
                    agent_urls[name] = str(url).rstrip("/")
            elif kind == ENVIRONMENT_SERVERS and name and url:
                environments[name] = str(url).rstrip("/")
        return cls(tuple(agents), environments, agent_urls)

    def agent_for(self, agent: str | None) -> str:
        """``agent``, checked to be one Gym runs; None: the only agent Gym runs. Raises :class:`OnDemandError`
        naming the agents Gym has."""
        if agent is None:
            if len(self.agents) == 1:
                return self.agents[0]
            raise OnDemandError(f"which agent should roll the row out? Gym runs {_names(self.agents)}: pass agent=NAME")
        if agent not in self.agents:
            raise OnDemandError(
                f"Gym runs no agent {agent!r}; it runs {_names(self.agents)}. A session starts the agents of its "
                f"selected datasets and --gym-agent's: start this one with --gym-agent={agent} (ini gym_agent), or "
                "select a dataset it runs"
            )
        return agent

    def environment_for(self, agent: str) -> str:
        """The base URL whose ``POST /run`` rolls a row out with ``agent``: the environment server that fronts it
        (the only one, or the one named as Gym's configs name it: ``<env>_simple_agent`` is fronted by
        ``<env>_environment_server``), or, when Gym runs no environment server at all (Gym 0.6.x), the agent
        server itself. Raises :class:`OnDemandError` when none (or no single one) fits."""
        if not self.environments and agent in self.agent_urls:
            return self.agent_urls[agent]
        if len(self.environments) == 1:
            return next(iter(self.environments.values()))
        stem = agent.removesuffix("_agent").removesuffix("_simple")
        fits = [
            url
            for name, url in self.environments.items()
            if name in (f"{stem}_environment_server", f"{agent}_environment_server")
        ]
        if len(fits) == 1:
            return fits[0]
        raise OnDemandError(
            f"no single environment server of Gym fronts the agent {agent!r} "
            f"(environment servers: {_names(tuple(self.environments))})"
        )


def _names(names: Sequence[str]) -> str:
    return ", ".join(repr(name) for name in names) if names else "no agent"


def _opener() -> Any:
    """A urllib opener that ignores proxy settings: Gym's servers listen on the loopback interface."""
    import urllib.request  # here: importing urllib.request costs ~15 ms, which only on-demand rollouts need

    return urllib.request.build_opener(urllib.request.ProxyHandler({}))


def server_instances(head_server: str, timeout: float = 10.0) -> Servers:
    """``GET http://<head_server>/server_instances`` (``head_server``: ``"host:port"``), parsed. Raises
    :class:`OnDemandError` when the head server does not answer."""
    url = f"http://{head_server}/server_instances"
    try:
        with _opener().open(url, timeout=timeout) as answer:
            return Servers.parse(json.loads(answer.read()))
    except OnDemandError:
        raise
    except (OSError, ValueError) as error:
        raise OnDemandError(f"Gym's head server did not list its servers (GET {url}): {_cause(error)}") from None


def post_row(url: str, row: Mapping[str, Any], timeout: float) -> dict[str, Any]:
    """``POST <url>/run`` with ``row`` as JSON; the decoded answer (a dict). ``timeout`` in seconds bounds the
    whole call. Raises :class:`OnDemandError` naming the cause: an HTTP error (with the body Gym answered, e.g. a
    500's JSON string or a 422's validation details), no answer in time, a refused connection, an answer that is
    not a JSON object."""
    import urllib.error
    import urllib.request

    target = f"{url}/run"
    try:
        body = json.dumps(row).encode()
    except (TypeError, ValueError) as error:
        raise OnDemandError(f"the row is not JSON: {error}") from None
    request = urllib.request.Request(target, data=body, headers={"Content-Type": "application/json"})
    try:
        with _opener().open(request, timeout=timeout) as answer:
            text = answer.read()
    except urllib.error.HTTPError as error:
        raise OnDemandError(f"POST {target} answered HTTP {error.code}: {_error_body(error)}") from None
    except TimeoutError:
        raise OnDemandError(f"POST {target} did not answer within {timeout:g} s") from None
    except (urllib.error.URLError, OSError) as error:
        raise OnDemandError(f"POST {target} failed: {_cause(error)}") from None
    try:
        record = json.loads(text)
    except ValueError:
        raise OnDemandError(f"POST {target} answered no JSON: {text[:200]!r}") from None
    if not isinstance(record, dict):
        raise OnDemandError(f"POST {target} answered {record!r:.200}, not a record")
    return record


def _error_body(error: Any) -> str:
    """The body of an HTTP error, as the innermost error of Gym's chain of servers (:func:`causes.unwrap`: ``Hit an
    exception in <server> calling an inner server: b'...'`` layers, each escaped once more) named by the servers it
    passed through; an OpenAI-style ``{"error": {"message"}}`` by its message, other JSON compact; at most 1000
    characters."""
    try:
        raw = error.read().decode("utf-8", "replace")
    except OSError:
        return str(error.reason or "")
    chain = unwrap(raw)
    text = chain.innermost
    try:
        value = json.loads(text)
    except ValueError:
        pass
    else:
        inner = value.get("error") if isinstance(value, dict) else None
        if isinstance(inner, dict) and isinstance(inner.get("message"), str):
            text = inner["message"]
        elif not isinstance(value, str):
            text = json.dumps(value)
    through = f" (through {' -> '.join(chain.servers)})" if chain.servers else ""
    return (text[:1000] + through) or str(error.reason)


def _cause(error: BaseException) -> str:
    reason = getattr(error, "reason", None)
    if isinstance(reason, ConnectionRefusedError):
        return "connection refused (is Gym still running?)"
    if isinstance(reason, TimeoutError):
        return "timed out"
    return str(reason or error)


def rollout_from_answer(
    record: Mapping[str, Any], row: Mapping[str, Any], *, agent: str, task_id: str, threshold: float, where: str
) -> Rollout:
    """The :class:`Rollout` of an environment server's ``/run`` answer ``record`` for ``row``: ``passed`` when its
    reward reaches ``threshold``, else ``failed`` (a reward of 0 is an ordinary rollout). ``where`` (the URL) goes
    into the error. Raises :class:`OnDemandError` when Gym marked the rollout failed (``failure_kind``) or its
    reward is missing or not a finite number."""
    failure = record.get("failure_kind") or record.get("_ng_failure_class")
    if failure:
        reason = record.get("failure_reason") or record.get("_ng_failure_message") or ""
        raise OnDemandError(f"Gym failed the rollout of agent {agent!r} ({where}): {failure}: {reason}".rstrip(": "))
    reward = record.get("reward")
    if isinstance(reward, bool) or not isinstance(reward, (int, float)) or not math.isfinite(reward):
        raise OnDemandError(f"Gym's answer ({where}) has no usable reward: {reward!r}")
    return Rollout.from_record(
        record,
        task_id=task_id,
        repeat=0,
        status="passed" if reward >= threshold else "failed",
        reward=float(reward),
        row=row,
        agent=agent,
    )


def head_server_of(config: Path) -> str | None:
    """``"host:port"`` of the head server a run's Gym config (``RunPaths.config``, JSON) names, or None."""
    try:
        head = json.loads(config.read_text(encoding="utf-8")).get("head_server") or {}
        return f"{head['host']}:{int(head['port'])}"
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
