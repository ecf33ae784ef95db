"""What a keeper starts (:class:`WarmSpec`, ``<home>/spec.json``) and the warm Gym's timings; see
:mod:`pytest_gym_eval.warm`."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pytest_gym_eval.core.defaults import DEFAULT_KEEP_ALIVE
from pytest_gym_eval.gym.processes import DEFAULT_GRACE
from pytest_gym_eval.warm.registry import (
    write_private,
)

HEAD_PATIENCE = 10.0
"""Seconds a warm Gym's head server gets to answer ``GET /readyz`` before it counts as not answering: it answers
503 for a moment after Gym prints that its servers are ready (``mark_ready`` in Gym's ``server_utils.py``)."""

KEEPER_MODULE = "pytest_gym_eval.warm"
REPLAY_MODEL_NAME = "replay"
WATCH_EVERY = 1.0
"""Seconds between two looks of the keeper at its leases and its servers (the idle clock's resolution)."""
LOCK_FOR_IDLE_STOP = 5.0
"""Seconds a keeper stopping on a signal tries to take its key's lock to unregister itself (the one who asked,
``stop`` or a session discarding it, may hold the lock; it then unregisters the entry itself)."""


@dataclass(frozen=True)
class WarmSpec:
    """What a keeper starts: written by the session to ``<home>/spec.json`` (0600), never holding a key.

    ``configuration`` is the Gym configuration (its components) and ``key`` its key; ``checkout`` the Gym
    checkout; ``gym_configs`` the config files of the agents; ``model_type`` Gym's model server; either
    ``replay`` (recordings the keeper's own replay model serves) or ``model_url``/``model``/``api_key_env`` (an
    endpoint, the key read from that variable); times in seconds; ``lease`` the starting session's
    :data:`~pytest_gym_eval.gym.orphans.MARKER` value (its lease is written when Gym is ready); ``record_latency``
    (``--gym-latency``) turns on the servers' model-call observability, which records each rollout's latency;
    ``model_servers`` and ``rewired`` the bound model servers and the references rewired to them.
    """

    key: str
    configuration: dict[str, Any]
    registry: str
    checkout: str
    gym_configs: tuple[str, ...]
    model_type: str
    replay: tuple[str, ...] = ()
    model_url: str | None = None
    model: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    startup_timeout: float = 900.0
    idle_timeout: float = DEFAULT_KEEP_ALIVE
    stop_grace: float = DEFAULT_GRACE
    lease: str = ""
    record_latency: bool = False
    model_servers: tuple[dict[str, Any], ...] = ()
    """The model servers the session binds (``--gym-model-server``, datasets' own ``model_server=``), each as
    :func:`~pytest_gym_eval.tasks.model_servers.binding_record` writes it (a URL's password masked; the keeper reads
    the URL from its environment); the keeper serves a replay binding itself."""
    rewired: dict[str, Any] = field(default_factory=dict)
    """Config blocks pointing environments at a dataset binding's own instance
    (:attr:`~pytest_gym_eval.tasks.model_servers.DatasetBindings.rewired`)."""

    def save(self, path: Path) -> None:
        """Write the spec as JSON, owner-only."""
        write_private(path, asdict(self))

    @classmethod
    def load(cls, path: Path) -> WarmSpec:
        """Read a spec :meth:`save` wrote. Raises OSError, ValueError or TypeError for a bad file."""
        data = json.loads(path.read_text(encoding="utf-8"))
        data["gym_configs"] = tuple(data["gym_configs"])
        data["replay"] = tuple(data.get("replay") or ())
        data["model_servers"] = tuple(data.get("model_servers") or ())
        return cls(**data)
