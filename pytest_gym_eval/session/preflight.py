"""What can be checked before Gym starts: the configuration errors that would otherwise surface only once
Gym is asked to start, as one error on every selected item (and a reward summary of ``n/a``, which CI reads as
"the model regressed").

Checked against the Gym checkout's files alone (no Gym import, no subprocess): the agent each dataset uses is
defined by one of the checkout's configs, a ``resources_server=`` setting names an environment the checkout
has, ``--gym-model-type`` names one of its model servers, and every model server an environment's config names
(a judge, a reward model, a user simulator: :func:`model_server_problems`) is the policy, bound with
``--gym-model-server`` or defined there with a usable URL. Each problem is one message naming what the
checkout does have; the session reports it as a usage error (exit status 4) at collection time.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pytest_gym_eval import provision
from pytest_gym_eval.core.gym_yaml import read_yaml_files
from pytest_gym_eval.tasks.model_servers import OPTION, POLICY_SERVER, RESOURCES_REF_TYPE, ServerReference

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


MODEL_REF_TYPE = "responses_api_models"
"""The ``type`` of a reference to a model server in a Gym config (``{type: responses_api_models, name: X}``)."""
UNSET_VALUES = ("", "MISSING", "???", "null", "None")
"""Values of a URL field (or of the variable it reads) that leave it unset."""
PLACEHOLDERS = ("<host_url>", "unset.local")
"""Parts of a URL that show it is a placeholder to fill in."""
LOCAL_WEIGHTS = ("local_vllm_model", "local_vllm_model_proxy", "genrm_model")
"""Model server types that serve model weights themselves (vLLM on a local GPU)."""
URL_FIELDS = ("openai_base_url", "base_url")
ENV_INTERPOLATION = re.compile(r"^\$\{oc\.env:([A-Za-z_][A-Za-z0-9_]*)(?:,(.*))?\}$")
SELECT_INTERPOLATION = re.compile(r"^\$\{oc\.select:([A-Za-z_][A-Za-z0-9_.]*)(?:,(.*))?\}$")
VARIABLE_INTERPOLATION = re.compile(r"^\$\{([A-Za-z_][A-Za-z0-9_.]*)\}$")


@dataclass(frozen=True)
class ModelServerNeed:
    """A model server a resources server's config names: ``environment`` (the resources server instance),
    ``config`` (the file), ``key`` (the key path inside the resources server's block, ``judge_model_server``) and
    ``server`` (the model server instance named, ``judge_model`` or ``policy_model``)."""

    environment: str
    config: Path
    key: str
    server: str
    kind: str = ""
    """The resources server's type (the key under ``resources_servers``)."""

    def reference(self) -> ServerReference:
        """The need as :func:`~pytest_gym_eval.tasks.model_servers.dataset_bindings` takes it."""
        return ServerReference(self.environment, self.kind, self.key, self.server)


def agent_environments(loaded: Mapping[Path, Mapping[str, Any]], agent: str) -> list[str]:
    """The resources server instances the agent ``agent`` runs (each ``{type: resources_servers, name: X}`` inside
    its block) in the loaded configs ``loaded``, in order; when its block names none, those its config file
    defines; none when no config defines it."""
    found: list[str] = []
    for data in loaded.values():
        block = data.get(agent)
        if not isinstance(block, dict):
            continue
        named = [name for _, name in _refs(block, (), RESOURCES_REF_TYPE)]
        if not named:
            named = [name for name, value in data.items() if isinstance(value, dict) and "resources_servers" in value]
        found += [str(name) for name in named if name not in found]
    return found


def agent_resources_refs(loaded: Mapping[Path, Mapping[str, Any]], agent: str) -> list[tuple[str, str, str]]:
    """The resources servers the agent ``agent`` names in the loaded configs, as ``(environment, agent server type,
    key path of the reference inside that type's block)``, e.g. ``("mcqa", "simple_agent", "resources_server")``."""
    found: list[tuple[str, str, str]] = []
    for data in loaded.values():
        block = data.get(agent)
        servers = block.get("responses_api_agents") if isinstance(block, dict) else None
        if not isinstance(servers, dict):
            continue
        for kind, fields in servers.items():
            found += [(name, str(kind), key) for key, name in _refs(fields, (), RESOURCES_REF_TYPE)]
    return found


def model_server_needs(loaded: Mapping[Path, Mapping[str, Any]]) -> list[ModelServerNeed]:
    """Every reference ``{type: responses_api_models, name: X}`` inside a resources server's block
    (``<env>: {resources_servers: {<kind>: {...}}}``) of the loaded configs, in file order."""
    return [
        ModelServerNeed(environment, path, key, server, kind)
        for path, environment, kind, fields in _resources_server_blocks(loaded)
        for key, server in _refs(fields, ())
    ]


def _resources_server_blocks(loaded: Mapping[Path, Mapping[str, Any]]) -> Iterator[tuple[Path, str, str, object]]:
    """``(config, environment, server kind, block)`` of every resources server block
    (``<env>: {resources_servers: {<kind>: {...}}}``) of the loaded configs, in file order."""
    for path, data in loaded.items():
        for environment, block in data.items():
            servers = block.get("resources_servers") if isinstance(block, dict) else None
            if isinstance(servers, dict):
                for kind, fields in servers.items():
                    yield path, str(environment), str(kind), fields


def _refs(value: object, path: tuple[str, ...], kind: str = MODEL_REF_TYPE) -> Iterator[tuple[str, str]]:
    if isinstance(value, dict):
        if value.get("type") == kind and isinstance(value.get("name"), str) and path:
            yield ".".join(path), value["name"]
            return
        for key, inner in value.items():
            yield from _refs(inner, (*path, str(key)), kind)
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            yield from _refs(inner, (*path, str(index)), kind)


def unbound_reason(server: str, merged: Mapping[str, Any], bound: set[str], environ: Mapping[str, str]) -> str | None:
    """Why the model server ``server`` cannot serve as the configs ``merged`` (their top-level keys, later files
    winning) define it, or None when it can: the policy's own (``policy_model``), bound (``bound``), or defined
    with a URL that is set (not null, ``MISSING``, ``???`` or a placeholder; a ``${var}`` that resolves to one, or
    ``${oc.env:VAR}`` with ``VAR`` unset in ``environ`` and no usable default, is unset too)."""
    if server == POLICY_SERVER or server in bound:
        return None
    block = merged.get(server)
    types = block.get(MODEL_REF_TYPE) if isinstance(block, dict) else None
    if not isinstance(types, dict) or not types:
        return "no config of the run defines it"
    for model_type, fields in types.items():
        if model_type in LOCAL_WEIGHTS:
            return f"it is a {model_type} server, which serves model weights on a local GPU"
        if not isinstance(fields, dict):
            continue
        url_field = next((field for field in URL_FIELDS if field in fields), None)
        if url_field is None:
            return f"its {model_type} block has no URL"
        if problem := _url_problem(fields[url_field], merged, environ, depth=0):
            return f"its {url_field} {problem}"
    return None


def _url_problem(value: object, merged: Mapping[str, Any], environ: Mapping[str, str], depth: int) -> str | None:
    if value is None or (isinstance(value, str) and value.strip() in UNSET_VALUES):
        return f"is {value!r}" if value in ("MISSING", "???") else "is not set"
    if not isinstance(value, str) or depth > 5:
        return None
    if any(placeholder in value for placeholder in PLACEHOLDERS):
        return f"is the placeholder {value!r}"
    if match := ENV_INTERPOLATION.match(value.strip()):
        variable, default = match.groups()
        if environ.get(variable):
            return None
        if default is None or _url_problem(default.strip() or None, merged, environ, depth + 1):
            return f"comes from ${variable}, which is not set"
        return None
    if match := SELECT_INTERPOLATION.match(value.strip()):
        name, default = match.groups()
        chosen = merged.get(name)
        if chosen is None:
            chosen = default.strip() if default else None
        problem = _url_problem(chosen, merged, environ, depth + 1)
        return f"is ${{{name}}}, which {problem}" if problem else None
    if match := VARIABLE_INTERPOLATION.match(value.strip()):
        name = match.group(1)
        problem = _url_problem(merged.get(name), merged, environ, depth + 1)
        return f"is ${{{name}}}, which {problem}" if problem else None
    return None


def load_configs(checkout: Path, configs: Sequence[Path]) -> dict[Path, dict[str, Any]]:
    """The Gym config files ``configs`` read (:func:`~pytest_gym_eval.core.gym_yaml.read_yaml_files`), those that
    hold a mapping."""
    return {path: data for path, data in read_yaml_files(configs, checkout).items() if isinstance(data, dict)}


def model_server_problems(
    checkout: Path,
    configs: Sequence[Path],
    bound: set[str],
    environ: Mapping[str, str] | None = None,
    bound_in: Mapping[str, set[str]] | None = None,
    loaded: Mapping[Path, Mapping[str, Any]] | None = None,
) -> list[str]:
    """One message per model server the resources servers of ``configs`` (the run's Gym config files) name that
    cannot serve (:func:`unbound_reason`), naming the environment, the config key, the server and the
    ``--gym-model-server`` to add; ``bound`` are the names bound with it, ``bound_in`` those the datasets running
    an environment bind for it (``model_server=`` in ``gym_dataset_settings``; by environment), ``environ`` the
    environment Gym gets (``os.environ`` by default), ``loaded`` the configs already read (:func:`load_configs`).
    Each server is named once (with every environment and key that names it)."""
    if loaded is None:
        loaded = load_configs(checkout, configs)
    bound_in = bound_in or {}
    merged: dict[str, Any] = {}
    for data in loaded.values():
        merged.update(data)
    environ = os.environ if environ is None else environ
    users: dict[str, list[ModelServerNeed]] = {}
    for need in model_server_needs(loaded):
        if need.server.strip() in UNSET_VALUES:
            continue  # a name the config leaves to fill in (`???`): Gym names the missing value itself
        if need.server in bound_in.get(need.environment, ()):
            continue
        users.setdefault(need.server, []).append(need)
    problems = []
    for server, needs in users.items():
        if (reason := unbound_reason(server, merged, bound, environ)) is None:
            continue
        where = "; ".join(f"{need.environment} ({_shown_path(need.config, checkout)}): {need.key}" for need in needs)
        problems.append(
            f"the model server {server!r} is not bound ({reason}), named by {where}; add "
            f"{OPTION} {server}=URL,model=SERVED_NAME[,key=ENV_VAR][,type=responses|chat] "
            f"(or {server}=policy to use the policy model's endpoint)"
        )
    return problems


def unused_binding_warnings(names: Sequence[str], loaded: Mapping[Path, Mapping[str, Any]]) -> list[str]:
    """One warning per session-wide ``--gym-model-server`` binding in ``names`` that no server block of the run's
    configs ``loaded`` refers to (``{type: responses_api_models, name: NAME}`` anywhere in them), naming those the
    configs do refer to: a misspelt ``judge_modle=...`` is served by Gym and called by no rollout, while the judge
    the environment does call keeps its config's endpoint. A warning, not an error: an ini file may bind judges for
    datasets this run did not select."""
    referred = sorted({server for data in loaded.values() for _, server in _refs(data, ())})
    they = f"they name {', '.join(referred)}" if referred else "they name no model server besides the policy's"
    return [
        f"{OPTION} {name}: no config of the selected environments names the model server {name!r} ({they}); "
        "it is served, and no rollout of this run calls it"
        for name in names
        if name not in referred
    ]


def _shown_path(path: Path, checkout: Path) -> str:
    try:
        return str(path.relative_to(checkout))
    except ValueError:
        return str(path)


OWN_CLIENT_KEY = re.compile(r"^(?P<prefix>[A-Za-z0-9_]*?)(?:base_url|api_key|model|model_name)$")
"""A key of a resources server's block that may configure a model client of the verifier's own: ``base_url``,
``api_key``, ``model`` or ``model_name`` after a prefix (``judge_``, ``anthropic_``, none)."""
JUDGE_VARIABLE = re.compile(
    r"""(?:environ(?:\.get)?\s*[\[(]|getenv\s*\()\s*["']([A-Z0-9_]*JUDGE[A-Z0-9_]*(?:URL|API_KEY|MODEL|MODEL_NAME|ARGS))["']"""
)
"""An environment variable a server's code reads that names a judge's endpoint, key, model or client arguments
(``os.environ["JUDGE_SERVER_ARGS"]``, ``LAB_JUDGE_BASE_URL``)."""


@dataclass(frozen=True)
class UnmanagedJudge:
    """An environment whose verifier calls a model with a client of its own: ``environment`` (the resources
    server instance), ``config`` (its file), ``keys`` (the key paths in its block that configure the client) and
    ``variables`` (judge environment variables its server's code reads)."""

    environment: str
    config: Path
    keys: tuple[str, ...]
    variables: tuple[str, ...]


def unmanaged_judges(checkout: Path, loaded: Mapping[Path, Mapping[str, Any]]) -> list[UnmanagedJudge]:
    """The environments of the loaded configs (``loaded``, :func:`load_configs`) whose verifier calls its judge
    (or another model) with its own OpenAI client: a resources server block holding ``<prefix>base_url`` keys
    with their ``<prefix>api_key``, ``<prefix>model`` and ``<prefix>model_name`` (``judge_base_url``,
    ``judge_api_key``, ``judge_model``), or whose server code in ``checkout`` reads a judge's endpoint, key, model
    or client arguments from an environment variable (``JUDGE_SERVER_ARGS``, ``LAB_JUDGE_BASE_URL``). A value
    that is the policy's own (``${policy_base_url}``, which the session sets) is managed and left out. Such a judge
    is no model server: ``--gym-model-server`` cannot bind it, nor a replay serve it."""
    found = []
    for path, environment, kind, fields in _resources_server_blocks(loaded):
        keys = tuple(_own_client_keys(fields, ()))
        variables = tuple(_judge_variables(checkout / "resources_servers" / kind))
        if keys or variables:
            found.append(UnmanagedJudge(environment, path, keys, variables))
    return found


def _own_client_keys(value: object, path: tuple[str, ...]) -> Iterator[str]:
    if not isinstance(value, dict) or value.get("type") == MODEL_REF_TYPE:
        return
    prefixes = {m["prefix"] for key in value if (m := OWN_CLIENT_KEY.match(str(key))) and str(key).endswith("base_url")}
    for key, inner in value.items():
        match = OWN_CLIENT_KEY.match(str(key))
        own = match is not None and match["prefix"] in prefixes
        if own and not (isinstance(inner, str) and "${policy_" in inner):
            yield ".".join((*path, str(key)))
        elif isinstance(inner, dict):
            yield from _own_client_keys(inner, (*path, str(key)))


def _judge_variables(folder: Path) -> list[str]:
    found: list[str] = []
    for source in sorted(folder.glob("*.py")):
        try:
            text = source.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        found += JUDGE_VARIABLE.findall(text)
    return list(dict.fromkeys(found))


def unmanaged_judge_warning(judge: UnmanagedJudge, checkout: Path) -> str:
    """The preflight's warning for ``judge``: names the environment, its config and the keys / variables."""
    parts = []
    if judge.keys:
        parts.append(f"the keys {', '.join(judge.keys)} of its resources server block")
    if judge.variables:
        parts.append(f"the environment variables {', '.join('$' + v for v in judge.variables)} its server reads")
    return (
        f"judge endpoint not managed by pytest-gym-eval: the environment {judge.environment} "
        f"({_shown_path(judge.config, checkout)}) calls its judge with a client of its own configured by "
        f"{' and '.join(parts)}; --gym-model-server cannot bind it and its calls are neither recorded nor "
        "replayed (set those keys or variables yourself)"
    )
