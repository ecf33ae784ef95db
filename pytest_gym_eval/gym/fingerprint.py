"""What makes two Gym runs the same: the Gym configuration of a session, and its key.

A warm Gym (``--gym-keep-alive``, :mod:`pytest_gym_eval.warm`) serves the next session only when that session would have
started the very same Gym, and a resumed run (``--gym-resume``, :mod:`pytest_gym_eval.gym.resume`) reuses rollouts only
of a
run whose Gym did the same. Both compare a :class:`GymConfiguration` (its docstring lists what is in it, what is left
out on purpose, and how the key is computed). What users see: docs/warm-and-resume.md.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_gym_eval.core.credentials import redact_value
from pytest_gym_eval.core.files import file_sha256
from pytest_gym_eval.provision import GymCheckout, config_servers

FORMAT = 1
"""Bumped whenever what goes into the configuration changes (an old key then never matches a new one)."""

SOURCE_SUFFIXES = (".py", ".yaml", ".yml", ".toml", ".txt", ".json", ".jinja", ".j2")
"""Files of a source tree that count for its digest (code, configs, requirements, prompt templates)."""

SKIPPED_FOLDERS = frozenset({".venv", "venv", "__pycache__", "tests", "data", ".git", ".pytest_cache", "node_modules"})
"""Folders a source digest leaves out: virtualenvs, caches, tests and datasets (which do not change a server)."""


def tree_digest(root: Path) -> str | None:
    """The sha256 of the source files under ``root`` (:data:`SOURCE_SUFFIXES`, outside :data:`SKIPPED_FOLDERS`):
    of each file's path relative to ``root`` and its content's sha256, in sorted order. None when ``root`` is no
    folder. Gym 0.7.0's ``nemo_gym/`` and mcqa's three server folders (219 files, 3 MB) take ~25 ms."""
    if not root.is_dir():
        return None
    entries = []
    for folder, subfolders, files in os.walk(root):
        subfolders[:] = sorted(name for name in subfolders if name not in SKIPPED_FOLDERS)
        for name in files:
            if name.endswith(SOURCE_SUFFIXES):
                path = Path(folder) / name
                try:
                    digest = file_sha256(path)
                except OSError:
                    continue
                entries.append(f"{path.relative_to(root).as_posix()}\0{digest}")
    return hashlib.sha256("\n".join(sorted(entries)).encode()).hexdigest()


def _relative(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return str(path.resolve())


COMPONENT_NAMES = {
    "gym_checkout": "the Gym checkout",
    "gym_version": "Gym's version",
    "gym_source": "the source of the checkout's nemo_gym package",
    "configs": "the Gym config files of the agents",
    "servers": "the source of Gym's servers",
    "model": "the policy model",
    "model_servers": "the bound model servers",
}
"""How :meth:`GymConfiguration.differences` names each component."""


@dataclass(frozen=True)
class GymConfiguration:
    """Everything that changes what Gym's servers do, as a JSON-ready mapping.

    What is in it:

    - ``gym_checkout`` and ``gym_version``: the checkout's absolute path and Gym's version;
    - ``gym_source``: the sha256 of the source files of the checkout's ``nemo_gym/`` package (see
      :func:`tree_digest`), so an edited checkout is another Gym;
    - ``configs``: each Gym config file that defines one of the session's agents (path relative to the checkout and
      the sha256 of its content), and ``servers``: the source digest of every server folder those configs name
      (``resources_servers/mcqa``, ``responses_api_agents/simple_agent``, ...) and of the model server
      (``responses_api_models/<model type>``): an edited verifier is another Gym;
    - ``model``: the policy model: ``model_type``, and either ``replay`` with the sha256 of each recordings file's
      content (in the order given: recordings sharing a conversation are answered in file order) or the endpoint's
      ``url``, ``name`` and ``api_key_env`` (the *name* of the variable holding the key; never the key).

    The key is the sha256 of the canonical JSON of that object (sorted keys, compact). Left out on purpose: the datasets
    (Gym's servers do not depend on them; a resumed run compares each row itself), the API key's value (see
    :mod:`pytest_gym_eval.warm.keeper` for what a changed key does), timeouts and ``--gym-concurrency`` (they change how
    long Gym takes, not what it answers).
    """

    components: Mapping[str, Any]

    @classmethod
    def build(
        cls,
        checkout: GymCheckout,
        gym_configs: Sequence[Path],
        model_type: str,
        *,
        replay: Sequence[Path] = (),
        model_url: str | None = None,
        model: str | None = None,
        api_key_env: str | None = None,
        head_server: str | None = None,
        model_servers: Mapping[str, Any] | None = None,
    ) -> GymConfiguration:
        """The configuration of a Gym started from ``checkout`` with the config files ``gym_configs`` and the
        model server ``model_type``, whose policy model replays ``replay`` (recordings files) or calls
        ``model_url`` serving ``model`` with the key in ``$api_key_env``; or, with ``head_server``
        (``host:port``), of servers someone else started (the model is then theirs). ``model_servers``: what may be
        shown of each bound model server by name, ``--gym-model-server``'s and the datasets' own
        (:func:`~pytest_gym_eval.tasks.model_servers.binding_fingerprint`: URL without its password, model, key
        *variable*, API and Gym server type, a replay binding's recordings by sha256; no key), a component only
        when there are bindings (a configuration without keeps its key): a warm Gym bound to another judge is
        another Gym. Raises OSError when a config file or a recordings file cannot be
        read."""
        root = checkout.path
        configs = {}
        folders = {f"responses_api_models/{model_type}"}
        for config in gym_configs:
            text = config.read_bytes()
            configs[_relative(config, root)] = hashlib.sha256(text).hexdigest()
            for _, kind, folder in config_servers(text.decode("utf-8", "replace")):
                folders.add(f"{kind}/{folder}")
        model_part: dict[str, Any] = {"model_type": model_type}
        if head_server is not None:
            model_part["head_server"] = head_server
        if replay:
            model_part["replay"] = [file_sha256(path) for path in replay]
        else:
            url = redact_value(model_url) if model_url is not None else None  # a manifest holds no password
            model_part.update(url=url, name=model, api_key_env=api_key_env)
        components = {
            "format": FORMAT,
            "gym_checkout": str(root),
            "gym_version": checkout.version,
            "gym_source": tree_digest(root / "nemo_gym"),
            "configs": dict(sorted(configs.items())),
            "servers": {folder: tree_digest(root / folder) for folder in sorted(folders)},
            "model": model_part,
        }
        if model_servers:
            components["model_servers"] = {name: dict(model_servers[name]) for name in sorted(model_servers)}
        return cls(components)

    @property
    def key(self) -> str:
        """The sha256 (64 hex digits) of the canonical JSON of :attr:`components`."""
        canonical = json.dumps(self.components, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()

    def differences(self, earlier: Mapping[str, Any]) -> list[str]:
        """What differs between ``earlier`` (another configuration's components) and this one, one phrase per
        component, e.g. ``"the policy model: name 'gpt-4.1' then, 'gpt-4.1-mini' now"``. Config files and server
        folders are compared where both have them (a resumed run may select datasets of other agents too)."""
        found = []
        if earlier.get("format") != self.components.get("format"):
            found.append(f"the configuration's format: {earlier.get('format')} then, {FORMAT} now")
        for name, label in COMPONENT_NAMES.items():
            then, now = earlier.get(name), self.components.get(name)
            if name in ("configs", "servers") and isinstance(then, dict) and isinstance(now, dict):
                changed = sorted(part for part in then.keys() & now.keys() if then[part] != now[part])
                if changed:
                    found.append(f"{label} changed ({', '.join(changed)})")
            elif then == now:
                continue
            elif isinstance(then, dict) and isinstance(now, dict):
                parts = [
                    f"{key} {_shown(then.get(key))} then, {_shown(now.get(key))} now"
                    for key in sorted(then.keys() | now.keys())
                    if then.get(key) != now.get(key)
                ]
                found.append(f"{label}: {'; '.join(parts)}")
            elif name == "gym_source":
                found.append(f"{label} changed")
            else:
                found.append(f"{label}: {_shown(then)} then, {_shown(now)} now")
        return found


def _shown(value: object) -> str:
    if value is None:
        return "none"
    if isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value):
        return f"sha256 {value[:12]}"
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return "[" + ", ".join(_shown(v) for v in value) + "]"
    return repr(value)
