"""Gym environments: which config files make one up in a checkout (found the way Gym finds them), which servers
those configs define, and the tools those servers need.
"""

from __future__ import annotations

import contextlib
import re
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

from pytest_gym_eval.provision.errors import ProvisionError

DEFAULT_ENVIRONMENTS: tuple[str, ...] = ("mcqa",)
SERVER_TYPES = ("resources_servers", "responses_api_agents", "responses_api_models", "environment_servers")
"""Gym's server folders: a config's instance ``name: {<server type>: {<folder>: {entrypoint: ...}}}`` runs the
server in ``<server type>/<folder>/``, whose venv ``gym env prefetch`` builds."""
PREFETCH_ARGS = (
    "--model-type",
    "openai_model",
    "++policy_base_url=http://127.0.0.1:9/v1",
    "++policy_api_key=unused",
    "++policy_model_name=unused",
    "+skip_venv_if_present=true",
)
_ENVIRONMENT_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*(/[A-Za-z0-9][A-Za-z0-9_.-]*)?$")


def normalise_environments(environments: Sequence[str]) -> list[str]:
    if isinstance(environments, str):
        environments = [environments]
    result: list[str] = []
    for name in environments:
        if not _ENVIRONMENT_RE.match(name):
            raise ProvisionError(f"invalid environment name {name!r}")
        if name not in result:
            result.append(name)
    return result


_KEY_LINE = re.compile(r"^( *)([A-Za-z0-9_][A-Za-z0-9_.-]*)[ \t]*:[ \t]*(#.*)?$")


def config_servers(text: str) -> list[tuple[str, str, str]]:
    """``(instance, server type, folder)`` for every server a Gym config file's text defines.

    Gym's configs are block-style YAML: ``<instance>: {<server type>: {<folder>: {entrypoint: ..., ...}}}``,
    where the server type is one of ``SERVER_TYPES``; e.g. Gym 0.7.0's
    ``resources_servers/equivalence_rule/configs/lc.yaml`` gives ``("lc_equivalence_rule",
    "resources_servers", "equivalence_rule")``, ``("lc_equivalence_rule_simple_agent", "responses_api_agents",
    "simple_agent")`` and an ``environment_servers`` one. Read line by line (the plugin has no YAML
    dependency): a key with nothing after it opens a mapping; the first deeper line sets each level's indent.
    """
    servers: list[tuple[str, str, str]] = []
    instance: str | None = None
    kind: str | None = None
    type_indent: int | None = None
    folder_indent: int | None = None
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        indent = len(line) - len(line.lstrip(" "))
        match = _KEY_LINE.match(line)
        if indent == 0:
            instance = match.group(2) if match else None
            kind, type_indent, folder_indent = None, None, None
            continue
        if instance is None:
            continue
        if type_indent is None:
            type_indent = indent
        if indent == type_indent:
            kind = match.group(2) if match and match.group(2) in SERVER_TYPES else None
            folder_indent = None
            continue
        if kind is None or indent < type_indent:
            continue
        if folder_indent is None:
            folder_indent = indent
        if indent == folder_indent and match:
            servers.append((instance, kind, match.group(2)))
    return servers


def _defines_resources_server(config: Path) -> bool:
    try:
        text = config.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    return any(kind == "resources_servers" for _, kind, _ in config_servers(text))


def relative(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


def environment_configs(checkout: Path, name: str) -> tuple[Path, ...]:
    """The Gym config files (absolute paths) that make up environment ``name`` in ``checkout``, found the way
    Gym finds them (Gym 0.7.0: ``_asset_config_path`` in ``nemo_gym/cli/main.py`` for ``--resources-server``
    and ``--environment``, ``nemo_gym/resources_server_registry.py`` for the flavors of a server):

    - ``server/flavor``: ``resources_servers/<server>/configs/<flavor>.yaml``;
    - ``server`` whose folder has ``configs/<server>.yaml`` (the default flavor, e.g. ``mcqa``): that file;
    - ``server`` without a default flavor: every ``configs/*.yaml`` of that folder that defines a resources
      server, which Gym lists as ``server/<flavor>`` (``equivalence_rule`` -> ``lc.yaml``,
      ``format_verification`` -> ``citation_format.yaml`` and ``freeform_formatting.yaml``); helper configs
      (a judge model's, prompt templates) are left out;
    - no ``resources_servers/<name>`` but ``environments/<name>/config.yaml``: that file.

    The plugin's ``gym env start --config <the config defining the agent>`` loads one of these files, so
    prefetching each of them builds every venv a session of that environment needs. Raises ``ProvisionError``
    naming what the checkout has instead when nothing matches.
    """
    server, _, flavor = name.partition("/")
    folder = checkout / "resources_servers" / server
    configs_dir = folder / "configs"
    if flavor:
        config = configs_dir / f"{flavor}.yaml"
        if config.is_file():
            return (config,)
        if configs_dir.is_dir():
            known = ", ".join(f"{server}/{p.stem}" for p in sorted(configs_dir.glob("*.yaml"))) or "none"
            raise ProvisionError(f"environment {name!r}: no {relative(config, checkout)} (configs there: {known})")
    elif configs_dir.is_dir():
        default = configs_dir / f"{server}.yaml"
        if default.is_file():
            return (default,)
        flavors = tuple(p for p in sorted(configs_dir.glob("*.yaml")) if _defines_resources_server(p))
        if flavors:
            return flavors
        raise ProvisionError(
            f"environment {name!r}: no config in {relative(configs_dir, checkout)} defines a resources server"
        )
    else:
        environment = checkout / "environments" / server / "config.yaml"
        if environment.is_file():
            return (environment,)
    import difflib

    names = sorted(p.parent.name for p in checkout.glob("resources_servers/*/configs"))
    close = difflib.get_close_matches(server, names, n=3)
    hint = f" (did you mean {', '.join(close)}?)" if close else ""
    raise ProvisionError(
        f"environment {name!r}: no resources_servers/{server}/configs or environments/{server}/config.yaml in "
        f"{checkout}{hint}; `gym list resources-servers` in the checkout lists them"
    )


def resolve_environments(checkout: Path, names: Sequence[str]) -> dict[str, tuple[Path, ...]]:
    """``environment_configs`` for each name; one ``ProvisionError`` listing every name that has none."""
    resolved: dict[str, tuple[Path, ...]] = {}
    problems: list[str] = []
    for name in names:
        try:
            resolved[name] = environment_configs(checkout, name)
        except ProvisionError as exc:
            problems.append(str(exc))
    if problems:
        raise ProvisionError("; ".join(problems))
    return resolved


def missing_tools(checkout: Path, configs: Mapping[str, Sequence[Path]]) -> list[str]:
    """Tools the servers of ``configs`` need that this machine lacks (checked before any venv is built).

    Today that is git, for servers whose ``requirements.txt`` installs from a ``git+`` URL (Gym 0.7.0 has
    ten, e.g. ``resources_servers/aviary``)."""
    needing_git: list[str] = []
    folders = [("responses_api_models", PREFETCH_ARGS[1])]
    for paths in configs.values():
        for config in paths:
            with contextlib.suppress(OSError):
                text = config.read_text(encoding="utf-8", errors="replace")
                folders += [(kind, folder) for _, kind, folder in config_servers(text)]
    for kind, folder in dict.fromkeys(folders):
        requirements = checkout / kind / folder / "requirements.txt"
        with contextlib.suppress(OSError):
            if re.search(r"(^|[\s=@])git\+", requirements.read_text(encoding="utf-8", errors="replace"), re.M):
                needing_git.append(relative(requirements, checkout))
    if needing_git and shutil.which("git") is None:
        return [f"git (not on PATH), which {', '.join(needing_git)} install from"]
    return []
