"""A Gym checkout ready to run (:class:`GymCheckout`): loaded from its manifest or from a user's own clone, and the
environment each ``gym`` call runs with.

The plugin never imports Gym: it runs ``GymCheckout.gym_executable`` with :func:`gym_environment`.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_gym_eval.provision.errors import ProvisionError
from pytest_gym_eval.provision.host import abspath, default_checkout_path, require_platform
from pytest_gym_eval.provision.manifest import (
    BUILD_MARKER,
    STATE_DIR,
    manifest_path,
    read_manifest,
    venv_python_problem,
)
from pytest_gym_eval.provision.versions import DEFAULT_GYM_VERSION, project_field, require_supported_gym


@dataclass(frozen=True)
class GymCheckout:
    """A Gym checkout ready to run.

    ``path``: the checkout folder (absolute). ``gym_executable``: ``<path>/.venv/bin/gym``. ``version``: Gym's
    version (``None`` when it cannot be read from a user's own checkout). ``env``: extra environment variables
    to run ``gym`` with (``{}`` for a checkout not made by ``provision``): ``PATH`` with uv's folder and the
    interpreter's ``bin`` folder in front of the current ``PATH``, ``UV_PYTHON_DOWNLOADS=never``,
    ``UV_CACHE_DIR``, ``TMPDIR``, and ``XDG_CONFIG_DIRS`` when the Python-version workaround applies.
    ``environments``: the resources servers whose venvs were prefetched. Use ``gym_environment`` to get the
    complete environment for one call.
    """

    path: Path
    gym_executable: Path
    version: str | None
    env: dict[str, str]
    environments: tuple[str, ...] = ()


RAY_ENVIRONMENT: Mapping[str, str] = {
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",  # Ray then binds 127.0.0.1 only
    "RAY_USAGE_STATS_ENABLED": "0",
    "PYTHONUNBUFFERED": "1",
    "RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0",  # newer Ray aborts under a `uv run` parent
}
RAY_START_WAIT = "RAY_raylet_start_wait_time_s"
"""Ray's limit (seconds) on waiting for a new node's raylet to register with its GCS. Ray 2.58 (Gym 0.7.0's)
reads it in C++ (``ray_config_def.h``, default 10) inside a 30 s loop that ``ray/_private/node.py`` hard-codes,
so the wait is the larger of the two; a slow registration on a loaded machine ends in ``The current node timed
out during startup``. (The other start-up limit seen failing under load, the raylet's 15 s wait for its
dashboard agent's port file, cannot be set from the environment in Ray 2.58: the raylet then dies, and only a
new start helps, see :data:`pytest_gym_eval.gym.servers.START_ATTEMPTS`.)"""
RAY_START_WAIT_DEFAULT = "60"
"""What :data:`RAY_START_WAIT` is unless the caller's environment sets it: twice Ray's own 30 s, not more, as
the same wait is also how long Ray takes to notice a raylet that died at start-up."""
DROPPED_ENVIRONMENT = ("VIRTUAL_ENV", "PYTHONHOME", "PYTHONPATH", "UV_PROJECT_ENVIRONMENT", "UV_PYTHON")
"""Variables of the calling process (an activated venv, another Python's paths) that must not reach Gym's
Python 3.13 environment or the uv commands that build it."""


def base_environment() -> dict[str, str]:
    env = dict(os.environ)
    for name in DROPPED_ENVIRONMENT:
        env.pop(name, None)
    return env


def gym_environment(checkout: GymCheckout, run_dir: Path) -> dict[str, str]:
    """The complete environment for one ``gym`` call, as a new dict.

    ``os.environ`` (without ``VIRTUAL_ENV``, ``PYTHONHOME``, ``PYTHONPATH``, ``UV_PROJECT_ENVIRONMENT`` and
    ``UV_PYTHON``, which belong to the caller's Python) + ``checkout.env`` (for a provisioned checkout, with
    :data:`BYTECODE_ENVIRONMENT`) + Ray's settings:
    ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``, ``RAY_TMPDIR=<run_dir>``, ``RAY_USAGE_STATS_ENABLED=0``,
    ``PYTHONUNBUFFERED=1``, ``RAY_ENABLE_UV_RUN_RUNTIME_ENV=0``, and ``RAY_raylet_start_wait_time_s=60`` unless
    the caller's environment sets it (:data:`RAY_START_WAIT`). Creates ``run_dir`` and the ``TMPDIR`` of
    ``checkout.env`` when missing. Keep ``run_dir`` short: Ray puts Unix sockets under it (~100 byte limit).
    """
    env = base_environment()
    env.update(checkout.env)
    env.update(RAY_ENVIRONMENT)
    env.setdefault(RAY_START_WAIT, RAY_START_WAIT_DEFAULT)
    run_dir = abspath(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    env["RAY_TMPDIR"] = str(run_dir)
    if "TMPDIR" in checkout.env:
        Path(checkout.env["TMPDIR"]).mkdir(parents=True, exist_ok=True)
    return env


BYTECODE_ENVIRONMENT: Mapping[str, str] = {"PYTHONDONTWRITEBYTECODE": ""}
"""What a provisioned checkout's ``gym`` calls get over the caller's ``PYTHONDONTWRITEBYTECODE`` (an empty value
is unset for Python): its Python caches compiled modules in the checkout's own folders, as it does by default.
uv installs without bytecode, so with the variable set (as in many container images, and on this project's CI
machines) every Gym process compiled Gym, Ray and their dependencies from source again: importing what
``gym eval run`` needs took ~12 s that way and ~6 s from the cache, and Gym's servers pay the same at every
start. A user's own checkout keeps the caller's setting (its folders are not ours to write)."""


def checkout_env(manifest: Mapping[str, Any]) -> dict[str, str]:
    """checkout.env from a manifest, with PATH and XDG_CONFIG_DIRS rebuilt against the current environment and
    :data:`BYTECODE_ENVIRONMENT`."""
    recorded = manifest.get("env") or {}
    env = {str(k): str(v) for k, v in recorded.items() if k not in ("PATH", "XDG_CONFIG_DIRS")}
    env.update(BYTECODE_ENVIRONMENT)
    prepend = [str(p) for p in manifest.get("path_prepend") or []]
    env["PATH"] = os.pathsep.join([*prepend, os.environ.get("PATH", "")]).rstrip(os.pathsep)
    xdg = manifest.get("xdg_config_dir")
    if xdg:
        env["XDG_CONFIG_DIRS"] = os.pathsep.join([str(xdg), os.environ.get("XDG_CONFIG_DIRS") or "/etc/xdg"])
    return env


def checkout_from_manifest(manifest: Mapping[str, Any]) -> GymCheckout:
    return GymCheckout(
        path=Path(manifest["checkout"]),
        gym_executable=Path(manifest["gym_executable"]),
        version=str(manifest["gym_version"]),
        env=checkout_env(manifest),
        environments=tuple(manifest["environments"]),
    )


def _read_checkout_version(checkout: Path) -> str | None:
    with contextlib.suppress(OSError):
        version = project_field((checkout / "pyproject.toml").read_text(encoding="utf-8"), "version")
        if version:
            return version
    with contextlib.suppress(OSError):  # Gym's version is dynamic: nemo_gym/package_info.py
        text = (checkout / "nemo_gym" / "package_info.py").read_text(encoding="utf-8")
        parts = {
            key: m.group(1)
            for key in ("MAJOR", "MINOR", "PATCH", "PRE_RELEASE")
            if (m := re.search(rf"""^{key}\s*=\s*["']?([^"'\s#]*)["']?""", text, re.M))
        }
        if all(k in parts for k in ("MAJOR", "MINOR", "PATCH")):
            return f"{parts['MAJOR']}.{parts['MINOR']}.{parts['PATCH']}{parts.get('PRE_RELEASE', '')}"
    return None


def load_checkout(path: Path) -> GymCheckout:
    """The ``GymCheckout`` for an existing checkout folder. No network, no subprocess.

    - Provisioned by ``provision``: read from its manifest.
    - Any other Gym checkout (a user's own ``uv sync``-ed clone: ``nemo_gym/`` and ``.venv/bin/gym``, no
      manifest): ``env={}``, ``environments=()``, version read from its pyproject (or
      ``nemo_gym/package_info.py``; ``None`` when neither says).
    Raises ``ProvisionError`` naming ``path`` when it is no Gym checkout, a half-built one, or one whose
    manifest is invalid (e.g. moved), telling the user to run ``python -m pytest_gym_eval provision``, and
    on a platform Gym cannot run on (see ``platform_problem``).
    """
    require_platform()
    path = abspath(path)
    hint = f"run `python -m pytest_gym_eval provision --dest {shlex.quote(str(path))}` to build one"
    state = path / STATE_DIR
    if manifest_path(path).exists():
        manifest, why = read_manifest(path, None)
        if manifest is None:
            raise ProvisionError(f"{path} is not a usable Gym checkout: {why}; {hint}")
        return checkout_from_manifest(manifest)
    if (state / BUILD_MARKER).exists():
        raise ProvisionError(f"{path} is a half-built Gym checkout (provisioning never finished); {hint}")
    gym = path / ".venv" / "bin" / "gym"
    if not (path / "nemo_gym").is_dir() or not gym.exists():
        raise ProvisionError(
            f"{path} is not a NeMo Gym checkout (it needs a nemo_gym/ folder and .venv/bin/gym); {hint}"
        )
    if problem := venv_python_problem(gym.with_name("python")):
        raise ProvisionError(f"{path} is not a usable Gym checkout: {problem}; {hint}")
    return GymCheckout(path=path, gym_executable=gym, version=_read_checkout_version(path), env={})


def load_supported_checkout(path: Path) -> GymCheckout:
    """:func:`load_checkout`, then :func:`require_supported_gym` on its version: the checkout ``--gym-checkout``
    names. Raises ``ProvisionError`` as both do (a Gym release outside :data:`SUPPORTED_GYM_VERSIONS` is refused
    with a message naming the checkout and the range; a checkout whose version cannot be read is accepted)."""
    checkout = load_checkout(path)
    require_supported_gym(checkout.version, f"--gym-checkout {checkout.path}")
    return checkout


def provisioned(version: str = DEFAULT_GYM_VERSION) -> GymCheckout | None:
    """The default checkout of Gym ``version`` when its provisioning finished (a valid manifest), else None; never
    builds anything (no lock, no network, no subprocess)."""
    manifest, _ = read_manifest(default_checkout_path(version), version)
    return checkout_from_manifest(manifest) if manifest is not None else None
