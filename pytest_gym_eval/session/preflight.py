"""What can be checked before Gym starts: the configuration errors that would otherwise surface only once
Gym is asked to start, as one error on every selected item (and a reward summary of ``n/a``, which CI reads as
"the model regressed").

Checked against the Gym checkout's files alone (no Gym import, no subprocess): the agent each dataset uses is
defined by one of the checkout's configs, a ``resources_server=`` setting names an environment the checkout
has, and ``--gym-model-type`` names one of its model servers. Each problem is one message naming what the
checkout does have; the session reports it as a usage error (exit status 4) at collection time.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from pathlib import Path

import pytest

from pytest_gym_eval import provision

AGENT_CONFIG_GLOBS = ("resources_servers/*/configs/*.yaml", "benchmarks/**/*.yaml", "environments/**/*.yaml")
"""Where :func:`~pytest_gym_eval.gym.run.find_agent_config` looks for an agent's config, in this order."""

MAX_NAMED = 12
"""Names a message lists in full; more (Gym 0.7.0 defines 377 agents) are counted, and the closest shown."""
CLOSEST = 6


def defined_agents(checkout: Path, resources_server: str | None = None) -> list[str]:
    """The agents (instances of ``responses_api_agents`` servers) the checkout's configs define, sorted; with
    ``resources_server`` (``mcqa``, or a flavor ``format_verification/citation_format``) only those of that
    environment's ``configs/`` folder (or that one config)."""
    server, _, flavor = (resources_server or "").partition("/")
    if resources_server:
        globs: Sequence[str] = (f"resources_servers/{server}/configs/{flavor or '*'}.yaml",)
    else:
        globs = AGENT_CONFIG_GLOBS
    found: set[str] = set()
    for glob in globs:
        for path in checkout.glob(glob):
            try:
                text = path.read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            found.update(name for name, kind, _ in provision.config_servers(text) if kind == "responses_api_agents")
    return sorted(found)


def environments(checkout: Path) -> list[str]:
    """The environments (folders of ``resources_servers/``) the checkout has, sorted."""
    folder = checkout / "resources_servers"
    if not folder.is_dir():
        return []
    return sorted(p.name for p in folder.iterdir() if p.is_dir() and p.name.isidentifier())


def model_types(checkout: Path) -> list[str] | None:
    """The model servers (``--gym-model-type`` values: folders of ``responses_api_models/``) the checkout has,
    sorted; None when it has no such folder (nothing to check against)."""
    folder = checkout / "responses_api_models"
    if not folder.is_dir():
        return None
    return sorted(p.name for p in folder.iterdir() if p.is_dir() and p.name.isidentifier())


def model_type_problem(checkout: Path, model_type: str) -> str | None:
    """The message for a ``--gym-model-type`` the checkout has no model server for, naming those it has; None
    when it has one (or the checkout lists none)."""
    known = model_types(checkout)
    if known is None or model_type in known:
        return None
    return f"--gym-model-type: this Gym has no model server {model_type!r} ({', '.join(known)})"


def agent_problem(checkout: Path, agent: str, datasets: Sequence[str], resources_server: str | None) -> str:
    """The message for ``agent`` (used by ``datasets``, their names) that no config of ``checkout`` defines (under
    ``resources_servers/<resources_server>/configs`` when one is set): the environment when the checkout lacks
    it, else the agents it does define (the closest names first when there are many), and how to name another."""
    used = f"used by {', '.join(datasets)}"
    how = "set it with --gym-agent, `agent=` in gym_dataset_settings, or the rows' agent_ref"
    if resources_server:
        server = resources_server.partition("/")[0]
        if not (checkout / "resources_servers" / server).is_dir():
            return (
                f"resources_server={resources_server} (for the agent {agent!r}, {used}): the Gym checkout "
                f"{checkout} has no environment {server!r} under resources_servers/; it has "
                f"{named(environments(checkout), server)}"
            )
        where = f" under resources_servers/{resources_server}/configs"
    else:
        where = ""
    agents = defined_agents(checkout, resources_server)
    defines = f"the agents it defines{where}: {named(agents, agent)}" if agents else f"it defines no agent{where}"
    return f"no Gym config in {checkout}{where} defines the agent {agent!r} ({used}); {defines}; {how}"


def named(names: Sequence[str], wanted: str) -> str:
    """``names`` for a message: all of them when few, else how many and the ones closest to ``wanted`` (or the
    first few, when none is close)."""
    if len(names) <= MAX_NAMED:
        return ", ".join(names) if names else "none"
    stems: dict[str, list[str]] = {}  # compared without the suffix most agent names share
    for name in names:
        stems.setdefault(_stem(name), []).append(name)
    # The wanted name's stem, and each of its leading "_" parts: a typo inside the suffix ("mcqa_simpel_agent")
    # still finds "mcqa_simple_agent" by its leading part "mcqa".
    parts = wanted.split("_")
    tried = [_stem(wanted), *("_".join(parts[:k]) for k in range(1, len(parts)))]
    score: dict[str, float] = {}
    for stem in stems:
        ratio = max(difflib.SequenceMatcher(None, attempt, stem).ratio() for attempt in tried)
        if ratio >= 0.75:
            score[stem] = ratio
    matches = sorted(score, key=lambda stem: -score[stem])[:CLOSEST]
    close = [name for stem in matches for name in stems[stem]][:CLOSEST]
    if close:
        return f"{len(names)} in all, the closest: {', '.join(close)}"
    return f"{len(names)} in all, e.g. {', '.join(names[:CLOSEST])}"


def _stem(name: str) -> str:
    return name.removesuffix("_simple_agent").removesuffix("_agent")


def local_checkout(checkout_option: Path | None) -> Path | None:
    """The Gym checkout a session will use, when it is there without building anything: ``--gym-checkout``'s
    folder, else the provisioned default checkout when its provisioning finished; None otherwise (nothing
    can be checked before Gym starts: the start reports what is wrong). Raises :class:`pytest.UsageError` when
    ``--gym-checkout`` names no folder, a folder that is no (or a half-built) Gym checkout, or a Gym release
    outside the supported range: a session never builds the checkout ``--gym-checkout`` names, so each of these
    would otherwise be one error on every item."""
    if checkout_option is not None:
        if provision.platform_problem() is not None:
            return None  # no Gym runs on this Python: the start says why, on every item
        if not checkout_option.exists():
            raise pytest.UsageError(
                f"--gym-checkout {checkout_option}: no such folder (a typo? without --gym-checkout the session uses "
                "the checkout `python -m pytest_gym_eval provision` builds in its cache)"
            )
        try:
            checkout = provision.load_checkout(checkout_option)
        except provision.ProvisionError as error:
            raise pytest.UsageError(f"--gym-checkout: {error}") from None
        try:  # a Gym release outside the supported range: named before any of its configs is read
            provision.require_supported_gym(checkout.version, f"--gym-checkout {checkout.path}")
        except provision.ProvisionError as error:
            raise pytest.UsageError(str(error)) from None
        return checkout.path
    found = provision.provisioned()
    return found.path if found is not None else None
