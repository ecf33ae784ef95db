"""This machine: whether Gym can run on it (Linux, the POSIX modules), and where things are on it (the cache,
pyenv, ``PATH`` without pyenv's shims).

Nothing POSIX-only is imported when this module loads, so the plugin never breaks a pytest run that has no Gym
dataset.
"""

from __future__ import annotations

import importlib
import os
import shutil
import sys
from pathlib import Path

from pytest_gym_eval.provision.errors import ProvisionError
from pytest_gym_eval.provision.versions import DEFAULT_GYM_VERSION

POSIX_MODULES = ("fcntl",)
"""POSIX-only modules provisioning and running Gym import (lazily, never at plugin load)."""


def platform_problem() -> str | None:
    """Why NeMo Gym cannot be run from this process, or None when it can.

    Gym runs on Linux only here: the plugin stops Gym's processes through POSIX process groups and sessions
    (``os.killpg``, ``start_new_session``) and ``/proc``, and serialises provisioning with ``fcntl.flock``.
    So anything but Linux, or a Python without one of ``POSIX_MODULES`` or ``os.killpg``, is a problem.
    """
    if not sys.platform.startswith("linux"):
        return (
            f"pytest-gym-eval runs NeMo Gym on Linux only, and this is {sys.platform!r}: it stops Gym's processes "
            "through POSIX process groups and /proc. Run Gym datasets on Linux (e.g. in a container or WSL); "
            "tests without a Gym dataset run anywhere"
        )
    missing = []
    for name in POSIX_MODULES:
        try:
            importlib.import_module(name)
        except ImportError:
            missing.append(name)
    if not hasattr(os, "killpg"):
        missing.append("os.killpg")
    if missing:
        return (
            f"pytest-gym-eval cannot run NeMo Gym with this Python: {', '.join(missing)} "
            f"{'is' if len(missing) == 1 else 'are'} unavailable (Gym runs on Linux, with the POSIX modules). "
            "Tests without a Gym dataset are not affected"
        )
    return None


def require_platform() -> None:
    problem = platform_problem()
    if problem is not None:
        raise ProvisionError(problem)


def abspath(path: Path | str) -> Path:
    return Path(os.path.abspath(os.path.expanduser(str(path))))


def cache_root() -> Path:
    """The cache folder: ``$PYTEST_GYM_EVAL_CACHE``, else ``$XDG_CACHE_HOME/pytest-gym-eval``, else
    ``~/.cache/pytest-gym-eval``. It holds default checkouts, ``sdists/``, ``uv-cache/`` and ``tmp/``."""
    override = os.environ.get("PYTEST_GYM_EVAL_CACHE")
    if override:
        return abspath(override)
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".cache"
    return abspath(base / "pytest-gym-eval")


def default_checkout_path(version: str = DEFAULT_GYM_VERSION) -> Path:
    """Where ``provision`` puts Gym ``version`` without ``dest``: ``<cache_root()>/gym-<version>``."""
    return cache_root() / f"gym-{version}"


def lock_path(checkout: Path) -> Path:
    return checkout.with_name(checkout.name + ".lock")


def pyenv_root() -> Path:
    return abspath(os.environ.get("PYENV_ROOT") or "~/.pyenv")


def _is_shim(path: Path | str) -> bool:
    """True for pyenv-style shims, which fail inside a checkout whose .python-version is not installed."""
    parent = Path(path).parent
    return parent.name == "shims" and (parent.parent == pyenv_root() or "pyenv" in str(parent).lower())


def path_without_shims(path_value: str | None = None) -> str:
    value = os.environ.get("PATH", "") if path_value is None else path_value
    return os.pathsep.join(entry for entry in value.split(os.pathsep) if entry and not _is_shim(Path(entry, "x")))


def which_real(name: str) -> Path | None:
    """``shutil.which(name)`` that skips pyenv shims, then looks in ``$(pyenv root)/versions/*/bin``."""
    found = shutil.which(name, path=path_without_shims())
    if found:
        return abspath(found)
    for bin_dir in sorted(pyenv_root().glob("versions/*/bin"), reverse=True):
        candidate = bin_dir / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None
