"""Provision a NeMo Gym checkout that the plugin can shell out to.

``python -m pytest_gym_eval provision [--gym-version 0.7.0] [--dest DIR] [--environment mcqa ...]``
builds, in seven named steps, a checkout of Gym with its own Python environment:

1. ``preflight``: everything that can be checked before anything is downloaded: uv (>= 0.9.30, the
   ``provision`` extra installs it), the ``nemo-gym`` sdist of that version on the package index (PEP 691
   JSON simple API, with a PEP 503 HTML fallback) and its ``requires-python``, and an interpreter that
   satisfies it (or, when only an older patch release of the right minor version exists, e.g. 3.13.0 for
   ``>=3.13.14``, one uv can be told to treat as the required version: then uv >= 0.10.8).
2. ``download``: download the sdist into the cache and verify its sha256 against the index.
3. ``unpack``: extract it as the checkout (top folder stripped, unsafe members refused); find each requested
   environment's configs in it (see ``environment_configs``) and the tools their servers need.
4. ``python``: check the interpreter against the checkout's own ``requires-python``; with the workaround,
   tell uv to pretend the required version (one warning says so).
5. ``venv``: build ``<checkout>/.venv`` with uv (``uv sync --frozen --extra dev``, or, with the workaround,
   ``uv venv`` + ``uv export`` + ``uv pip install --python-version``).
6. ``prefetch``: ``gym env prefetch --config <config>`` for each config of each requested environment, which
   builds the server venvs.
7. ``manifest``: write ``<checkout>/.pytest-gym-eval/manifest.json``, last and atomically.

The manifest is the validity marker: a checkout without a valid manifest is half-built and is deleted and
rebuilt from scratch (Python venvs hard-code absolute paths, so a checkout cannot be built elsewhere and
renamed into place). An exclusive ``fcntl.flock`` on ``<checkout>.lock`` serialises concurrent runs. Each step
logs to ``<checkout>/.pytest-gym-eval/logs/<step>.log``.

Gym runs on Linux only (the plugin stops Gym's processes through ``/proc`` and POSIX process groups, and
locks with ``fcntl``): on any other platform ``provision`` and ``load_checkout`` raise ``ProvisionError``
saying so, and nothing POSIX-only is imported when this module loads, so the plugin never breaks a pytest run
that has no Gym dataset.

The plugin never imports Gym: it runs ``GymCheckout.gym_executable`` with ``gym_environment(...)``.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import datetime
import hashlib
import importlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from glob import escape as glob_escape
from pathlib import Path, PurePosixPath
from typing import IO, Any, NamedTuple

from pytest_gym_eval import cli

__all__ = [
    "DEFAULT_ENVIRONMENTS",
    "DEFAULT_GYM_VERSION",
    "OLDEST_GYM_VERSION",
    "SUPPORTED_GYM_VERSIONS",
    "GymCheckout",
    "InterpreterChoice",
    "ProvisionError",
    "PythonCandidate",
    "cache_root",
    "choose_interpreter",
    "default_checkout_path",
    "environment_configs",
    "find_uv",
    "gym_environment",
    "gym_version_problem",
    "load_checkout",
    "load_supported_checkout",
    "main",
    "parse_requires_python",
    "platform_problem",
    "provision",
    "python_satisfies",
    "read_requires_python",
    "require_supported_gym",
]

DEFAULT_GYM_VERSION = "0.7.0"
OLDEST_GYM_VERSION = "0.6.0"
"""The oldest Gym release the plugin supports: ``.ci/run`` runs the main job on it as on the default release
(measured: the mcqa example's mean reward 0.75 on both). Gym 0.5.1 ran that example alike too, but 0.5.x routes
rows differently under ``--agent`` and retries a 429 answer without bound, unlike what the plugin is built and
tested on, so it is outside the range."""
NEWEST_GYM_SERIES = (0, 7)
"""The newest Gym minor series the plugin supports (every 0.7.x release)."""
SUPPORTED_GYM_VERSIONS = f">={OLDEST_GYM_VERSION}, <{NEWEST_GYM_SERIES[0]}.{NEWEST_GYM_SERIES[1] + 1}"
"""The supported Gym releases as a version specifier (``>=0.6.0, <0.8``): 0.6.0 to 0.7.x."""
DEFAULT_ENVIRONMENTS: tuple[str, ...] = ("mcqa",)
DEFAULT_INDEX_URL = "https://pypi.org/simple"
MIN_UV_VERSION = (0, 9, 30)
"""Gym's own floor (it prints "required uv version" below it)."""
MIN_UV_WORKAROUND_VERSION = (0, 10, 8)
"""uv before 0.10.8 checks an editable project's ``requires-python`` against the real interpreter, not the
``--python-version`` it was given, so the Python-version workaround fails (measured: 0.10.7 fails, 0.10.8
works)."""
INSTALL_HINT = "pip install 'pytest-gym-eval[provision]'"
"""How a user gets what provisioning needs from the package index (uv)."""
MANIFEST_FORMAT = 1
STATE_DIR = ".pytest-gym-eval"
"""Folder inside the checkout for the manifest, the step logs and provisioning state."""
MANIFEST_NAME = "manifest.json"
BUILD_MARKER = "provisioning"
"""File in STATE_DIR written before the first step: a checkout with it but without a valid manifest is
half-built (and may be deleted); a folder without it was not made by ``provision`` and is never deleted."""
STEPS = ("preflight", "download", "unpack", "python", "venv", "prefetch", "manifest")

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
new start helps, see :data:`pytest_gym_eval.run.START_ATTEMPTS`.)"""
RAY_START_WAIT_DEFAULT = "60"
"""What :data:`RAY_START_WAIT` is unless the caller's environment sets it: twice Ray's own 30 s, not more, as
the same wait is also how long Ray takes to notice a raylet that died at start-up."""
DROPPED_ENVIRONMENT = ("VIRTUAL_ENV", "PYTHONHOME", "PYTHONPATH", "UV_PROJECT_ENVIRONMENT", "UV_PYTHON")
"""Variables of the calling process (an activated venv, another Python's paths) that must not reach Gym's
Python 3.13 environment or the uv commands that build it."""

PREFETCH_ARGS = (
    "--model-type",
    "openai_model",
    "++policy_base_url=http://127.0.0.1:9/v1",
    "++policy_api_key=unused",
    "++policy_model_name=unused",
    "+skip_venv_if_present=true",
)

_SIMPLE_JSON = "application/vnd.pypi.simple.v1+json"
_VERSION_RE = re.compile(r"^[0-9A-Za-z][0-9A-Za-z.+!_-]*$")
_ENVIRONMENT_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*(/[A-Za-z0-9][A-Za-z0-9_.-]*)?$")
SERVER_TYPES = ("resources_servers", "responses_api_agents", "responses_api_models", "environment_servers")
"""Gym's server folders: a config's instance ``name: {<server type>: {<folder>: {entrypoint: ...}}}`` runs the
server in ``<server type>/<folder>/``, whose venv ``gym env prefetch`` builds."""
_LOG_TAIL_LINES = 8

Version3 = tuple[int, int, int]


class ProvisionError(Exception):
    """Provisioning failed, or a folder is not a usable Gym checkout.

    ``step`` is the failed step's name (one of ``STEPS``) and ``log_path`` its log file, both ``None`` when
    the error belongs to no step. The message names both and ends with the last lines of the log.
    """

    def __init__(self, message: str, *, step: str | None = None, log_path: Path | None = None) -> None:
        super().__init__(message)
        self.step = step
        self.log_path = log_path


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


class PythonCandidate(NamedTuple):
    """An interpreter found while searching: path, ``(major, minor, patch)`` and where it was found."""

    path: Path
    version: Version3
    source: str = ""


class InterpreterChoice(NamedTuple):
    """The interpreter for Gym's venv.

    ``workaround`` is true when ``version`` does not satisfy ``requires-python`` and uv must be told to
    treat it as ``pretend_version`` (e.g. 3.13.0 treated as 3.13.14); ``pretend_version`` is ``None``
    otherwise.
    """

    path: Path
    version: Version3
    workaround: bool
    pretend_version: str | None


class _Clause(NamedTuple):
    op: str
    release: tuple[int, ...]
    wildcard: bool


# ---------------------------------------------------------------------------------------------------------
# Supported Gym releases

_GYM_RELEASE_RE = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?(.*)$")


def _supported_range_text() -> str:
    newest = f"{NEWEST_GYM_SERIES[0]}.{NEWEST_GYM_SERIES[1]}.x"
    return f"NeMo Gym {OLDEST_GYM_VERSION} to {newest} ({SUPPORTED_GYM_VERSIONS})"


def gym_version_problem(version: str) -> str | None:
    """Why Gym ``version`` (e.g. ``"0.5.1"``, ``"0.7.1rc2"``) is outside :data:`SUPPORTED_GYM_VERSIONS`, or None
    when it is inside. A pre-release counts as below its release (``0.6.0rc1`` is older than 0.6.0); a version
    that is no ``MAJOR.MINOR[.PATCH]...`` string is outside."""
    match = _GYM_RELEASE_RE.match(version.strip())
    oldest = tuple(int(part) for part in OLDEST_GYM_VERSION.split("."))
    if match is None:
        return f"{version!r} is no Gym release number; supported: {_supported_range_text()}"
    release = (int(match.group(1)), int(match.group(2)), int(match.group(3) or 0))
    suffix = match.group(4).lstrip(".-_").lower()
    pre = bool(suffix) and not suffix.startswith(("post", "+"))
    too_old = release < oldest or (release == oldest and pre)
    too_new = release[:2] > NEWEST_GYM_SERIES
    if too_old or too_new:
        return f"Gym {version} is not supported: this pytest-gym-eval supports {_supported_range_text()}"
    return None


def require_supported_gym(version: str | None, where: str) -> None:
    """Raise ``ProvisionError`` when Gym ``version`` is outside :data:`SUPPORTED_GYM_VERSIONS`, naming ``where``
    it came from (``--gym-version``, a checkout's path) and the supported range. ``None`` (a checkout whose
    version cannot be read) passes."""
    if version is None:
        return
    problem = gym_version_problem(version)
    if problem is not None:
        raise ProvisionError(
            f"{where}: {problem}. Provision a supported one: `python -m pytest_gym_eval provision "
            f"--gym-version {DEFAULT_GYM_VERSION}` (or --gym-version {OLDEST_GYM_VERSION})"
        )


# ---------------------------------------------------------------------------------------------------------
# Platform

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


def _require_platform() -> None:
    problem = platform_problem()
    if problem is not None:
        raise ProvisionError(problem)


# ---------------------------------------------------------------------------------------------------------
# Paths


def _abspath(path: Path | str) -> Path:
    return Path(os.path.abspath(os.path.expanduser(str(path))))


def cache_root() -> Path:
    """The cache folder: ``$PYTEST_GYM_EVAL_CACHE``, else ``$XDG_CACHE_HOME/pytest-gym-eval``, else
    ``~/.cache/pytest-gym-eval``. It holds default checkouts, ``sdists/``, ``uv-cache/`` and ``tmp/``."""
    override = os.environ.get("PYTEST_GYM_EVAL_CACHE")
    if override:
        return _abspath(override)
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".cache"
    return _abspath(base / "pytest-gym-eval")


def default_checkout_path(version: str = DEFAULT_GYM_VERSION) -> Path:
    """Where ``provision`` puts Gym ``version`` without ``dest``: ``<cache_root()>/gym-<version>``."""
    return cache_root() / f"gym-{version}"


def _lock_path(checkout: Path) -> Path:
    return checkout.with_name(checkout.name + ".lock")


def _pyenv_root() -> Path:
    return _abspath(os.environ.get("PYENV_ROOT") or "~/.pyenv")


def _is_shim(path: Path | str) -> bool:
    """True for pyenv-style shims, which fail inside a checkout whose .python-version is not installed."""
    parent = Path(path).parent
    return parent.name == "shims" and (parent.parent == _pyenv_root() or "pyenv" in str(parent).lower())


def _path_without_shims(path_value: str | None = None) -> str:
    value = os.environ.get("PATH", "") if path_value is None else path_value
    return os.pathsep.join(entry for entry in value.split(os.pathsep) if entry and not _is_shim(Path(entry, "x")))


def _which_real(name: str) -> Path | None:
    """``shutil.which(name)`` that skips pyenv shims, then looks in ``$(pyenv root)/versions/*/bin``."""
    found = shutil.which(name, path=_path_without_shims())
    if found:
        return _abspath(found)
    for bin_dir in sorted(_pyenv_root().glob("versions/*/bin"), reverse=True):
        candidate = bin_dir / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


# ---------------------------------------------------------------------------------------------------------
# requires-python


def parse_requires_python(spec: str) -> list[_Clause]:
    """Parse a simple ``requires-python`` such as ``">=3.13.14"`` or ``">=3.10, <4"``.

    Returns ``(op, release, wildcard)`` clauses, e.g. ``[(">=", (3, 13, 14), False)]``. Supports the operators
    ``>= > <= < == != ~=`` (and ``==X.Y.*`` / ``!=X.Y.*``) on purely numeric versions.
    Raises ``ValueError`` for anything else (pre-releases, ``===``, empty clauses).
    """
    clauses: list[_Clause] = []
    for raw in spec.split(","):
        text = raw.strip()
        match = re.fullmatch(r"(~=|==|!=|<=|>=|<|>)\s*(\d+(?:\.\d+)*)(\.\*)?", text)
        if not match:
            raise ValueError(f"cannot parse requires-python clause {text!r} in {spec!r}")
        op, release, star = (
            match.group(1),
            tuple(int(p) for p in match.group(2).split(".")),
            bool(match.group(3)),
        )
        if star and op not in ("==", "!="):
            raise ValueError(f"wildcard only allowed with == or != in {spec!r}")
        if op == "~=" and len(release) < 2:
            raise ValueError(f"~= needs at least two version components in {spec!r}")
        clauses.append(_Clause(op, release, star))
    return clauses


def _pad(release: Sequence[int], length: int = 3) -> tuple[int, ...]:
    return tuple(release) + (0,) * max(0, length - len(release))


def _clause_ok(version: Version3, clause: _Clause) -> bool:
    op, release, wildcard = clause
    if wildcard:
        prefix_match = version[: len(release)] == release
        return prefix_match if op == "==" else not prefix_match
    length = max(len(release), 3)
    have, want = _pad(version, length), _pad(release, length)
    if op == "~=":
        return have >= want and version[: len(release) - 1] == release[:-1]
    return {
        ">=": have >= want,
        ">": have > want,
        "<=": have <= want,
        "<": have < want,
        "==": have == want,
        "!=": have != want,
    }[op]


def python_satisfies(version: Sequence[int], spec: str | None) -> bool:
    """Whether ``version`` (``(major, minor, patch)``) satisfies ``spec``; ``None`` or ``""`` allows all.

    Raises ``ValueError`` when ``spec`` cannot be parsed (see ``parse_requires_python``)."""
    if not spec or not spec.strip():
        return True
    v = tuple(_pad(version))[:3]
    version3: Version3 = (v[0], v[1], v[2])
    return all(_clause_ok(version3, clause) for clause in parse_requires_python(spec))


def read_requires_python(pyproject: Path) -> str | None:
    """The ``[project] requires-python`` of a ``pyproject.toml`` (``None`` when absent).

    Uses ``tomllib`` when the running Python has it, else a regex on the line. Raises ``OSError`` when the
    file cannot be read."""
    text = pyproject.read_text(encoding="utf-8")
    return _project_field(text, "requires-python")


def _project_field(pyproject_text: str, key: str) -> str | None:
    try:
        tomllib: Any = importlib.import_module("tomllib")
    except ImportError:  # Python 3.10: a regex on the line is enough for simple string fields
        match = re.search(rf"""^\s*{re.escape(key)}\s*=\s*["']([^"']*)["']""", pyproject_text, re.M)
        return match.group(1) if match else None
    try:
        project = tomllib.loads(pyproject_text).get("project", {})
    except ValueError:  # tomllib.TOMLDecodeError
        return None
    value = project.get(key) if isinstance(project, dict) else None
    return value if isinstance(value, str) else None


def _lower_bound(clauses: Sequence[_Clause]) -> Version3 | None:
    bounds = [_pad(c.release) for c in clauses if c.op in (">=", "~=") and not c.wildcard]
    if not bounds:
        return None
    best = max(bounds)
    return (best[0], best[1], best[2])


def _fmt(version: Sequence[int]) -> str:
    return ".".join(str(part) for part in version)


def choose_interpreter(
    requires_python: str | None,
    candidates: Sequence[PythonCandidate],
    searched: Sequence[str] = (),
) -> InterpreterChoice:
    """Pick the interpreter for Gym's venv among ``candidates`` (in order of preference).

    - Some candidates satisfy ``requires_python``: the one with the lowest ``major.minor`` (closest to what
      the project asks for), highest patch first, earlier candidates winning ties. Without
      ``requires_python``, the highest version.
    - None does, but one has the same ``major.minor`` as the ``>=`` lower bound with an older patch (3.13.0
      for ``>=3.13.14``), and the bound itself satisfies every clause: the newest such candidate, with
      ``workaround=True`` and ``pretend_version`` = the bound (``"3.13.14"``).
    - Otherwise raises ``ProvisionError`` naming the candidates found and ``searched`` (where was looked).
      Also raises it when ``requires_python`` cannot be parsed.
    """
    try:
        clauses = parse_requires_python(requires_python) if requires_python else []
    except ValueError as exc:
        raise ProvisionError(f"checkout's requires-python: {exc}") from exc
    indexed = list(enumerate(candidates))
    if not clauses:
        py3 = [(i, c) for i, c in indexed if c.version[0] >= 3] or indexed
        if py3:
            _, best = max(py3, key=lambda ic: (ic[1].version, -ic[0]))
            return InterpreterChoice(best.path, best.version, False, None)
    satisfying = [(i, c) for i, c in indexed if all(_clause_ok(c.version, cl) for cl in clauses)]
    if satisfying:
        _, best = min(satisfying, key=lambda ic: (ic[1].version[:2], -ic[1].version[2], ic[0]))
        return InterpreterChoice(best.path, best.version, False, None)
    bound = _lower_bound(clauses)
    if bound is not None and all(_clause_ok(bound, cl) for cl in clauses):
        same_minor = [(i, c) for i, c in indexed if c.version[:2] == bound[:2] and c.version < bound]
        if same_minor:
            _, best = max(same_minor, key=lambda ic: (ic[1].version, -ic[0]))
            return InterpreterChoice(best.path, best.version, True, _fmt(bound))
    found = ", ".join(f"{c.path} ({_fmt(c.version)})" for c in candidates) or "none"
    where = "; ".join(searched) or "nowhere"
    raise ProvisionError(
        f"no Python satisfies requires-python {requires_python!r} (nor one of the same minor version for the "
        f"python-version workaround). Interpreters found: {found}. Searched: {where}. "
        "Install a matching Python (e.g. with pyenv) and run provision again."
    )


# ---------------------------------------------------------------------------------------------------------
# Environments


def _base_environment() -> dict[str, str]:
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
    env = _base_environment()
    env.update(checkout.env)
    env.update(RAY_ENVIRONMENT)
    env.setdefault(RAY_START_WAIT, RAY_START_WAIT_DEFAULT)
    run_dir = _abspath(run_dir)
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


def _checkout_env(manifest: Mapping[str, Any]) -> dict[str, str]:
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


# ---------------------------------------------------------------------------------------------------------
# Manifest


def _manifest_path(checkout: Path) -> Path:
    return checkout / STATE_DIR / MANIFEST_NAME


def _read_manifest(checkout: Path, version: str | None) -> tuple[dict[str, Any] | None, str]:
    """``(manifest, "")`` when valid for ``checkout`` (and ``version`` unless ``None``), else
    ``(None, why)``."""
    path = _manifest_path(checkout)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None, "no manifest"
    except (OSError, ValueError) as exc:
        return None, f"unreadable manifest {path}: {exc}"
    if not isinstance(data, dict) or data.get("format_version") != MANIFEST_FORMAT:
        return None, f"manifest {path} has an unknown format"
    if version is not None and data.get("gym_version") != version:
        return None, f"manifest {path} is for Gym {data.get('gym_version')}, not {version}"
    if data.get("checkout") != str(checkout):
        return None, f"manifest {path} was written for {data.get('checkout')} (was the checkout moved?)"
    envs = data.get("environments")
    if not isinstance(envs, list) or not all(isinstance(e, str) for e in envs):
        return None, f"manifest {path} has no environment list"
    gym = data.get("gym_executable")
    if not isinstance(gym, str) or not os.path.exists(gym):
        return None, f"gym executable {gym} of manifest {path} is missing"
    return data, ""


def _checkout_from_manifest(manifest: Mapping[str, Any]) -> GymCheckout:
    return GymCheckout(
        path=Path(manifest["checkout"]),
        gym_executable=Path(manifest["gym_executable"]),
        version=str(manifest["gym_version"]),
        env=_checkout_env(manifest),
        environments=tuple(manifest["environments"]),
    )


def _write_manifest(checkout: Path, manifest: Mapping[str, Any]) -> None:
    path = _manifest_path(checkout)
    tmp = path.with_name(f"{path.name}.tmp-{os.getpid()}")
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(manifest, fh, indent=2, sort_keys=False)
        fh.write("\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def _read_checkout_version(checkout: Path) -> str | None:
    with contextlib.suppress(OSError):
        version = _project_field((checkout / "pyproject.toml").read_text(encoding="utf-8"), "version")
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
    _require_platform()
    path = _abspath(path)
    hint = f"run `python -m pytest_gym_eval provision --dest {shlex.quote(str(path))}` to build one"
    state = path / STATE_DIR
    if _manifest_path(path).exists():
        manifest, why = _read_manifest(path, None)
        if manifest is None:
            raise ProvisionError(f"{path} is not a usable Gym checkout: {why}; {hint}")
        return _checkout_from_manifest(manifest)
    if (state / BUILD_MARKER).exists():
        raise ProvisionError(f"{path} is a half-built Gym checkout (provisioning never finished); {hint}")
    gym = path / ".venv" / "bin" / "gym"
    if not (path / "nemo_gym").is_dir() or not gym.exists():
        raise ProvisionError(
            f"{path} is not a NeMo Gym checkout (it needs a nemo_gym/ folder and .venv/bin/gym); {hint}"
        )
    return GymCheckout(path=path, gym_executable=gym, version=_read_checkout_version(path), env={})


def load_supported_checkout(path: Path) -> GymCheckout:
    """:func:`load_checkout`, then :func:`require_supported_gym` on its version: the checkout ``--gym-checkout``
    names. Raises ``ProvisionError`` as both do (a Gym release outside :data:`SUPPORTED_GYM_VERSIONS` is refused
    with a message naming the checkout and the range; a checkout whose version cannot be read is accepted)."""
    checkout = load_checkout(path)
    require_supported_gym(checkout.version, f"--gym-checkout {checkout.path}")
    return checkout


# ---------------------------------------------------------------------------------------------------------
# Steps


def _log_stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _tail(path: Path, lines: int = _LOG_TAIL_LINES) -> list[str]:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - 16384))
            text = fh.read().decode("utf-8", "replace")
    except OSError:
        return []
    kept = [line.rstrip()[:300] for line in text.splitlines() if line.strip()]
    return kept[-lines:]


def _step_error(step: str, log_path: Path, reason: str) -> ProvisionError:
    tail = _tail(log_path)
    message = f"provision step '{step}' failed: {reason}\n  log: {log_path}"
    try:
        with open(log_path, "rb") as handle:  # the error line may lie above the tail (a tool's shutdown after it)
            handle.seek(max(0, os.path.getsize(log_path) - 262_144))
            quoted = error_lines(handle.read().decode("utf-8", "replace"))
    except OSError:
        quoted = []
    if quoted and quoted[0] not in tail:
        message += "\n  the error:\n" + "\n".join(f"    {line}" for line in quoted)
    if tail:
        message += "\n  last lines of the log:\n" + "\n".join(f"    {line}" for line in tail)
    return ProvisionError(message, step=step, log_path=log_path)


def _kill_process_group(proc: subprocess.Popen[Any], grace: float = 5.0) -> None:
    """Stop a step's subprocess (started in a session of its own) and everything in its process group."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=grace)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


class _Step:
    """One running step: its log file and the subprocesses it runs."""

    def __init__(self, name: str, log_path: Path, fh: IO[str], log: Callable[[str], None]) -> None:
        self.name = name
        self.log_path = log_path
        self.fh = fh
        self.log = log

    def write(self, text: str) -> None:
        self.fh.write(text if text.endswith("\n") else text + "\n")
        self.fh.flush()

    def run(
        self,
        cmd: Sequence[str],
        *,
        cwd: Path,
        env: Mapping[str, str],
        capture: bool = False,
        check: bool = True,
        timeout: float | None = None,
    ) -> tuple[int, str]:
        """Run ``cmd`` with output into the log (stdout also returned when ``capture``).

        Returns ``(returncode, stdout)``. Raises ``ProvisionError`` on a non-zero exit when ``check``. On any
        interruption (Ctrl-C) or timeout the subprocess's process group is killed before re-raising."""
        self.write(f"$ {shlex.join(cmd)}    # cwd {cwd}")
        proc = subprocess.Popen(
            list(cmd),
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE if capture else self.fh,
            stderr=self.fh,
            start_new_session=True,
            text=True,
        )
        try:
            out, _ = proc.communicate(timeout=timeout)
        except BaseException:
            _kill_process_group(proc)
            self.write(f"(killed {cmd[0]})")
            raise
        out = out or ""
        if capture and out:
            self.write(out)
        if proc.returncode != 0:
            self.write(f"(exit status {proc.returncode})")
            if check:
                raise ProvisionError(f"`{shlex.join(cmd)}` exited with status {proc.returncode}")
        return proc.returncode, out


class _Build:
    def __init__(self, logs_dir: Path, log: Callable[[str], None]) -> None:
        self.logs_dir = logs_dir
        self.log = log
        self.seconds: dict[str, float] = {}

    @contextlib.contextmanager
    def step(self, name: str) -> Iterator[_Step]:
        log_path = self.logs_dir / f"{name}.log"
        self.logs_dir.mkdir(parents=True, exist_ok=True)
        self.log(f"pytest-gym-eval provision: [{name}] started (log: {log_path})")
        start = time.monotonic()
        with open(log_path, "a", encoding="utf-8") as fh:
            step = _Step(name, log_path, fh, self.log)
            step.write(f"=== step {name} started {_utc_now()}")
            try:
                yield step
            except ProvisionError as exc:
                step.write(f"error: {exc}")
                self.log(f"pytest-gym-eval provision: [{name}] failed after {time.monotonic() - start:.1f} s")
                if exc.step is not None:
                    raise
                raise _step_error(name, log_path, str(exc)) from exc
            except Exception as exc:
                step.write(f"error: {type(exc).__name__}: {exc}")
                self.log(f"pytest-gym-eval provision: [{name}] failed after {time.monotonic() - start:.1f} s")
                raise _step_error(name, log_path, f"{type(exc).__name__}: {exc}") from exc
            except BaseException:
                step.write("interrupted")
                self.log(f"pytest-gym-eval provision: [{name}] interrupted; no manifest written")
                raise
            elapsed = time.monotonic() - start
            step.write(f"=== step {name} done in {elapsed:.1f} s")
        self.seconds[name] = round(elapsed, 3)
        self.log(f"pytest-gym-eval provision: [{name}] done in {elapsed:.1f} s")


def _utc_now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


# ---------------------------------------------------------------------------------------------------------
# download


@dataclass(frozen=True)
class _IndexFile:
    filename: str
    url: str
    sha256: str | None
    size: int | None
    yanked: bool = False
    requires_python: str | None = None


def _index_url() -> str:
    for name in ("PIP_INDEX_URL", "UV_INDEX_URL"):
        value = os.environ.get(name, "").strip()
        if value:
            return value.split()[0]
    return DEFAULT_INDEX_URL


def _redact(url: str) -> str:
    return re.sub(r"//[^/@]*@", "//***@", url)


def _open_url(url: str, accept: str | None, timeout: float = 60.0) -> Any:
    """urlopen with credentials from the URL's user:password moved into a Basic auth header."""
    import urllib.parse
    import urllib.request

    parts = urllib.parse.urlsplit(url)
    headers = {"User-Agent": "pytest-gym-eval"}
    if accept:
        headers["Accept"] = accept
    if parts.username is not None:
        credentials = f"{urllib.parse.unquote(parts.username)}:{urllib.parse.unquote(parts.password or '')}"
        headers["Authorization"] = "Basic " + base64.b64encode(credentials.encode()).decode()
        netloc = parts.hostname or ""
        if parts.port:
            netloc += f":{parts.port}"
        url = urllib.parse.urlunsplit(parts._replace(netloc=netloc))
    if parts.scheme == "file":
        local = Path(urllib.request.url2pathname(parts.path))
        if local.is_dir():
            for name in ("index.json", "index.html"):
                if (local / name).is_file():
                    url = (local / name).as_uri()
                    break
    return urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=timeout)


def _parse_html_index(text: str, base_url: str) -> list[_IndexFile]:
    from html.parser import HTMLParser
    from urllib.parse import urldefrag, urljoin

    files: list[_IndexFile] = []

    class Parser(HTMLParser):
        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            if tag != "a":
                return
            attributes = dict(attrs)
            href = attributes.get("href")
            if not href:
                return
            url, fragment = urldefrag(urljoin(base_url, href))
            digest = dict(p.split("=", 1) for p in fragment.split("&") if "=" in p).get("sha256")
            name = url.rstrip("/").rsplit("/", 1)[-1]
            requires = attributes.get("data-requires-python") or None  # HTMLParser unescapes &gt;
            files.append(_IndexFile(name, url, digest, None, "data-yanked" in attributes, requires))

    Parser().feed(text)
    return files


def _list_index(step: _Step) -> tuple[str, list[_IndexFile]]:
    from urllib.parse import urldefrag, urljoin

    index = _index_url()
    page = index.rstrip("/") + "/nemo-gym/"
    step.write(f"index page: {_redact(page)}")
    accept = f"{_SIMPLE_JSON}, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.1"
    try:
        with _open_url(page, accept) as response:
            body = response.read()
            content_type = (response.headers.get("Content-Type") or "").split(";")[0].strip()
            final_url = response.geturl()
    except OSError as exc:
        raise ProvisionError(f"cannot read the package index page {_redact(page)}: {exc}") from exc
    text = body.decode("utf-8", "replace")
    if content_type == _SIMPLE_JSON or content_type.endswith("json") or text.lstrip().startswith("{"):
        try:
            data = json.loads(text)
            files = [
                _IndexFile(
                    filename=str(f["filename"]),
                    url=urldefrag(urljoin(final_url, str(f["url"])))[0],
                    sha256=(f.get("hashes") or {}).get("sha256"),
                    size=f.get("size") if isinstance(f.get("size"), int) else None,
                    yanked=bool(f.get("yanked")),
                    requires_python=str(f["requires-python"]) if f.get("requires-python") else None,
                )
                for f in data["files"]
            ]
        except (ValueError, KeyError, TypeError) as exc:
            raise ProvisionError(f"unexpected JSON from {_redact(page)}: {exc}") from exc
    else:
        files = _parse_html_index(text, final_url)
    step.write(f"{len(files)} files listed ({content_type or 'unknown content type'})")
    return page, files


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _find_sdist(version: str, step: _Step) -> _IndexFile:
    """The index's entry for the ``nemo-gym`` ``version`` sdist (one index request, nothing downloaded)."""
    page, files = _list_index(step)
    pattern = re.compile(rf"^nemo[-_.]gym-{re.escape(version)}\.tar\.gz$", re.I)
    matches = [f for f in files if pattern.match(f.filename)]
    if not matches:
        versions = sorted(
            {m.group(1) for f in files if (m := re.match(r"^nemo[-_.]gym-(.+)\.tar\.gz$", f.filename, re.I))}
        )
        raise ProvisionError(
            f"no sdist of nemo-gym {version} on {_redact(page)} "
            f"(sdist versions there: {', '.join(versions[-12:]) or 'none'})"
        )
    chosen = matches[0]
    if chosen.yanked:
        step.write(f"note: {chosen.filename} is yanked on the index; using it because it was asked for")
    if not chosen.sha256 or not re.fullmatch(r"[0-9a-fA-F]{64}", chosen.sha256):
        raise ProvisionError(f"the index gives no sha256 for {chosen.filename}; refusing to use it unverified")
    step.write(f"{chosen.filename}: requires-python {chosen.requires_python!r} (from the index)")
    return chosen


def _download_sdist(chosen: _IndexFile, sdist_dir: Path, step: _Step) -> Path:
    assert chosen.sha256 is not None  # _find_sdist refuses entries without one
    expected = chosen.sha256.lower()
    sdist_dir.mkdir(parents=True, exist_ok=True)
    target = sdist_dir / chosen.filename
    if target.exists():
        if _sha256_file(target) == expected:
            step.write(f"using cached {target} (sha256 {expected})")
            step.log(f"pytest-gym-eval provision: [download] using cached {target}")
            return target
        step.write(f"cached {target} has the wrong sha256: downloading again")
        target.unlink()
    part = target.with_name(f"{target.name}.part-{os.getpid()}")
    step.write(f"downloading {_redact(chosen.url)} -> {target}")
    digest = hashlib.sha256()
    try:
        with _open_url(chosen.url, None, timeout=120.0) as response, open(part, "wb") as out:
            total = chosen.size or int(response.headers.get("Content-Length") or 0) or None
            done, next_report = 0, 10
            step.log(
                f"pytest-gym-eval provision: [download] {chosen.filename}"
                + (f" ({total / 1e6:.1f} MB)" if total else "")
            )
            while chunk := response.read(1 << 20):
                out.write(chunk)
                digest.update(chunk)
                done += len(chunk)
                if total and done * 100 >= next_report * total:
                    percent = min(100, done * 100 // total)
                    line = f"[download] {done / 1e6:.1f} / {total / 1e6:.1f} MB ({percent}%)"
                    step.write(line)
                    step.log(f"pytest-gym-eval provision: {line}")
                    next_report = percent // 10 * 10 + 10
        actual = digest.hexdigest()
        step.write(f"downloaded {done} bytes, sha256 {actual}")
        if actual != expected:
            raise ProvisionError(
                f"sha256 mismatch for {chosen.filename}: the index says {expected}, the download has {actual}"
            )
        os.replace(part, target)
    except OSError as exc:
        raise ProvisionError(f"download of {_redact(chosen.url)} failed: {exc}") from exc
    finally:
        with contextlib.suppress(FileNotFoundError):
            part.unlink()
    return target


# ---------------------------------------------------------------------------------------------------------
# unpack


def _unsafe_name(name: str) -> bool:
    return name.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", name) is not None or ".." in name.split("/")


def _unpack(sdist: Path, checkout: Path, step: _Step) -> None:
    import tarfile

    with tarfile.open(sdist, "r:*") as tar:
        members = tar.getmembers()
        for member in members:
            if _unsafe_name(member.name) or (member.islnk() and _unsafe_name(member.linkname)):
                raise ProvisionError(f"refusing archive member {member.name!r}: absolute path or '..'")
        tops = {PurePosixPath(m.name).parts[0] for m in members if PurePosixPath(m.name).parts}
        if len(tops) != 1:
            raise ProvisionError(f"expected one top folder in {sdist.name}, found {sorted(tops)[:5]}")
        selected = []
        for member in members:
            parts = PurePosixPath(member.name).parts
            if len(parts) <= 1:
                continue
            member.name = "/".join(parts[1:])
            if member.islnk():
                member.linkname = "/".join(PurePosixPath(member.linkname).parts[1:])
            selected.append(member)
        if hasattr(tarfile, "data_filter"):
            tar.extractall(checkout, members=selected, filter="data")
        else:  # Python without extraction filters: refuse what the data filter would refuse
            for member in selected:
                if member.issym():
                    target = os.path.normpath(os.path.join(os.path.dirname(member.name), member.linkname))
                    if os.path.isabs(member.linkname) or target.split(os.sep)[0] == "..":
                        raise ProvisionError(f"refusing symlink {member.name!r} -> {member.linkname!r}")
                elif not (member.isfile() or member.isdir() or member.islnk()):
                    raise ProvisionError(f"refusing special archive member {member.name!r}")
            tar.extractall(checkout, members=selected)
    step.write(f"unpacked {len(selected)} members of {sdist} into {checkout}")


# ---------------------------------------------------------------------------------------------------------
# python (and uv)


def find_uv() -> Path:
    """The uv executable: ``$PYTEST_GYM_EVAL_UV``, else ``uv.find_uv_bin()`` when the ``uv`` package is
    importable, else ``uv`` on ``PATH`` (pyenv shims skipped, ``$(pyenv root)/versions/*/bin`` searched).

    Raises ``ProvisionError`` (naming ``pip install 'pytest-gym-eval[provision]'``) when there is none."""
    override = os.environ.get("PYTEST_GYM_EVAL_UV")
    if override:
        path = _abspath(override)
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise ProvisionError(f"$PYTEST_GYM_EVAL_UV={override} is not an executable file")
        return path
    try:
        uv_module = importlib.import_module("uv")
        found = uv_module.find_uv_bin()
        if found and os.path.isfile(found):
            return _abspath(found)
    except (ImportError, FileNotFoundError, AttributeError):
        pass
    on_path = _which_real("uv")
    if on_path is not None:
        return on_path
    raise ProvisionError(
        f"uv not found: provisioning builds Gym's environments with uv. Install it with {INSTALL_HINT} (or "
        "pip install uv), or set $PYTEST_GYM_EVAL_UV to its path"
    )


def _uv_version(uv: Path, step: _Step, cwd: Path) -> Version3:
    _, out = step.run([str(uv), "--version"], cwd=cwd, env=_base_environment(), capture=True, timeout=60)
    match = re.search(r"(\d+)\.(\d+)\.(\d+)", out)
    if not match:
        raise ProvisionError(f"cannot read uv's version from {out.strip()!r}")
    version: Version3 = (int(match.group(1)), int(match.group(2)), int(match.group(3)))
    if version < MIN_UV_VERSION:
        raise ProvisionError(
            f"uv {_fmt(version)} at {uv} is too old: Gym needs uv >= {_fmt(MIN_UV_VERSION)} "
            f"({INSTALL_HINT.replace('pip install', 'pip install -U')}, or set $PYTEST_GYM_EVAL_UV)"
        )
    return version


_QUERY = "import sys; print('%d.%d.%d' % tuple(sys.version_info[:3]))"


def _discover_pythons(
    uv: Path, requires_python: str | None, step: _Step, cwd: Path
) -> tuple[list[PythonCandidate], list[str]]:
    """Candidates from ``uv python find``, ``python3.X``/``python3`` on PATH and pyenv's versions."""
    env = _base_environment()
    env["UV_PYTHON_DOWNLOADS"] = "never"
    env["PATH"] = _path_without_shims(env.get("PATH", ""))
    paths: list[tuple[Path, str]] = []
    searched: list[str] = []

    requests: list[str] = []
    if requires_python:
        requests.append(requires_python)
        with contextlib.suppress(ValueError):
            bound = _lower_bound(parse_requires_python(requires_python))
            if bound is not None:
                requests.append(f"{bound[0]}.{bound[1]}")
    else:
        requests.append("3")
    for request in requests:
        searched.append(f"`uv python find {request}` (UV_PYTHON_DOWNLOADS=never)")
        code, out = step.run(
            [str(uv), "python", "find", "--no-project", "--no-config", request],
            cwd=cwd,
            env=env,
            capture=True,
            check=False,
            timeout=120,
        )
        if code == 0 and out.strip():
            paths.append((Path(out.strip().splitlines()[-1]), f"uv python find {request}"))

    searched.append("python3.X and python3 on PATH (pyenv shims skipped)")
    for entry in env["PATH"].split(os.pathsep):
        with contextlib.suppress(OSError):
            for child in sorted(Path(entry).iterdir()):
                if re.fullmatch(r"python3(\.\d+)?", child.name) and os.access(child, os.X_OK) and child.is_file():
                    paths.append((child, "PATH"))
    pyenv_versions = _pyenv_root() / "versions"
    searched.append(f"{pyenv_versions}/*/bin/python3")
    paths.extend((p, "pyenv") for p in sorted(pyenv_versions.glob("*/bin/python3")))

    candidates: list[PythonCandidate] = []
    seen: set[str] = set()
    for path, source in paths:
        key = os.path.realpath(path)
        if key in seen:
            continue
        seen.add(key)
        try:
            code, out = step.run([str(path), "-c", _QUERY], cwd=cwd, env=env, capture=True, check=False, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as exc:
            step.write(f"cannot run {path}: {exc}")
            continue
        match = re.fullmatch(r"(\d+)\.(\d+)\.(\d+)", out.strip())
        if code == 0 and match:
            version: Version3 = (int(match.group(1)), int(match.group(2)), int(match.group(3)))
            candidates.append(PythonCandidate(path, version, source))
            step.write(f"candidate {path}: Python {_fmt(version)} (from {source})")
    return candidates, searched


# ---------------------------------------------------------------------------------------------------------
# Environments: which configs make one up, and what their servers need

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


def _relative(path: Path, root: Path) -> str:
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
            raise ProvisionError(f"environment {name!r}: no {_relative(config, checkout)} (configs there: {known})")
    elif configs_dir.is_dir():
        default = configs_dir / f"{server}.yaml"
        if default.is_file():
            return (default,)
        flavors = tuple(p for p in sorted(configs_dir.glob("*.yaml")) if _defines_resources_server(p))
        if flavors:
            return flavors
        raise ProvisionError(
            f"environment {name!r}: no config in {_relative(configs_dir, checkout)} defines a resources server"
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


def _resolve_environments(checkout: Path, names: Sequence[str]) -> dict[str, tuple[Path, ...]]:
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


def _missing_tools(checkout: Path, configs: Mapping[str, Sequence[Path]]) -> list[str]:
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
                needing_git.append(_relative(requirements, checkout))
    if needing_git and shutil.which("git") is None:
        return [f"git (not on PATH), which {', '.join(needing_git)} install from"]
    return []


# ---------------------------------------------------------------------------------------------------------
# provision


def _normalise_environments(environments: Sequence[str]) -> list[str]:
    if isinstance(environments, str):
        environments = [environments]
    result: list[str] = []
    for name in environments:
        if not _ENVIRONMENT_RE.match(name):
            raise ProvisionError(f"invalid environment name {name!r}")
        if name not in result:
            result.append(name)
    return result


@contextlib.contextmanager
def _exclusive_lock(path: Path, log: Callable[[str], None]) -> Iterator[None]:
    import fcntl  # POSIX only: imported here, never when the plugin loads (see platform_problem)

    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log(f"pytest-gym-eval provision: waiting for another provisioning process (lock {path}) ...")
            start = time.monotonic()
            fcntl.flock(fd, fcntl.LOCK_EX)
            log(f"pytest-gym-eval provision: got the lock after {time.monotonic() - start:.1f} s")
        yield
    finally:
        os.close(fd)  # releases the lock; the file stays (unlinking lock files races)


_ERROR_LINE = re.compile(r"\b[A-Z]\w*(?:Error|Exception)\b|\berror\b|\bvalidation errors?\b", re.IGNORECASE)
"""A log line that states an error (a Gym config validation error, an exception's last traceback line)."""


def error_lines(text: str, context: int = 2) -> list[str]:
    """The lines of a step's log ``text`` that say what went wrong: the last line stating an error (an
    exception's ``Type: message``, ``ERROR ...``, ``1 validation error for ...``) and up to ``context`` indented
    lines after it (pydantic names the field and the reason there), each trimmed to 300 characters; [] when no
    line states an error. Lines the plugin itself wrote (``$ command``, ``(exit status N)``) do not count."""
    lines = [line.rstrip() for line in text.splitlines()]
    own = ("$ ", "(exit status", "(killed", "--- environment", "=== step", "error: `")
    for index in range(len(lines) - 1, -1, -1):
        line = lines[index]
        if line.strip() and not line.startswith(own) and _ERROR_LINE.search(line):
            after = [n for n in lines[index + 1 : index + 1 + context] if n.startswith((" ", "\t")) and n.strip()]
            return [text[:300] for text in [line.strip(), *(n.strip() for n in after)]]
    return []


def _prefetch(
    checkout: GymCheckout, configs: Mapping[str, Sequence[Path]], step: _Step, log: Callable[[str], None]
) -> dict[str, str]:
    """``gym env prefetch --config <config>`` for each config of each environment (``configs`` as
    ``_resolve_environments`` gives them), one call per config, as ``gym env start --config`` will load it.

    An environment that fails does not stop the others: returns ``{environment: why}`` for each one that
    failed (the command, its exit status and the log lines stating the error, see :func:`error_lines`)."""
    run_dir = checkout.path / STATE_DIR / "run" / "prefetch"
    failed: dict[str, str] = {}
    for name, paths in configs.items():
        start = step.fh.tell()
        try:
            for config in paths:
                step.write(f"--- environment {name}: {config}")
                cmd = [str(checkout.gym_executable), "env", "prefetch", "--config", str(config), *PREFETCH_ARGS]
                step.run(cmd, cwd=checkout.path, env=gym_environment(checkout, run_dir))
        except ProvisionError as error:
            try:
                with open(step.log_path, encoding="utf-8", errors="replace") as handle:
                    handle.seek(start)
                    quoted = error_lines(handle.read())
            except OSError:
                quoted = []
            failed[name] = str(error) + "".join(f"\n      {line}" for line in quoted)
            log(f"pytest-gym-eval provision: [prefetch] {name} failed: {quoted[0] if quoted else error}")
            continue
        shown = ", ".join(_relative(path, checkout.path) for path in paths)
        log(f"pytest-gym-eval provision: [prefetch] {name} ready ({shown})")
    return failed


def _prefetch_failure(failed: Mapping[str, str], log_path: Path, ready: Sequence[str]) -> ProvisionError:
    """One error for every environment whose prefetch failed (each with the log lines stating its error), naming
    the log and the environments that are ready nonetheless."""
    lines = [f"provision step 'prefetch' failed for {len(failed)} environment{'s' if len(failed) != 1 else ''}:"]
    lines += [f"  {name}: {why}" for name, why in failed.items()]
    lines.append(f"  log: {log_path}")
    if ready:
        lines.append(f"  ready nonetheless: {', '.join(ready)}")
    return ProvisionError("\n".join(lines), step="prefetch", log_path=log_path)


@dataclass
class _Plan:
    version: str
    checkout: Path
    environments: list[str]
    log: Callable[[str], None]
    cache: Path = field(default_factory=cache_root)


def provisioned(version: str = DEFAULT_GYM_VERSION) -> GymCheckout | None:
    """The default checkout of Gym ``version`` when its provisioning finished (a valid manifest), else None; never
    builds anything (no lock, no network, no subprocess)."""
    manifest, _ = _read_manifest(default_checkout_path(version), version)
    return _checkout_from_manifest(manifest) if manifest is not None else None


def provision(
    version: str = DEFAULT_GYM_VERSION,
    dest: Path | None = None,
    environments: Sequence[str] = DEFAULT_ENVIRONMENTS,
    *,
    log: Callable[[str], None] = _log_stderr,
) -> GymCheckout:
    """Make sure a Gym ``version`` checkout with the server venvs of ``environments`` exists; return it.

    ``dest`` is the checkout folder (default ``default_checkout_path(version)``). ``log`` receives progress
    lines (default: printed to stderr), including each step's start and duration in seconds.

    When the checkout's manifest is valid and lists every requested environment this returns at once (no
    lock, no network, no subprocess: only a check that the gym executable exists). When only environments
    are missing it runs ``prefetch`` for those and rewrites the manifest. Otherwise it deletes a half-built
    checkout (one with ``.pytest-gym-eval/provisioning`` but no valid manifest) and builds from scratch. All
    of this happens under an exclusive lock on ``<dest>.lock``; a second process waits for it.

    Raises ``ProvisionError`` naming the failed step and its log (with the log's last lines), or when
    ``dest`` exists but was not made by ``provision`` (it is never deleted), or on a platform Gym cannot run
    on (see ``platform_problem``). A missing tool (uv, a Python satisfying Gym's ``requires-python``, git for
    an environment that installs from git) or an environment without configs (see ``environment_configs``)
    is reported before the sdist or any package is downloaded. ``KeyboardInterrupt`` kills the running step's
    subprocess and propagates; no manifest is written.

    ``environments`` are resources servers as ``gym env start --resources-server`` names them (``mcqa``,
    ``format_verification/citation_format``); a server without a default config (``equivalence_rule``) stands
    for all its configs that define a resources server.
    """
    _require_platform()
    if not _VERSION_RE.match(version):
        raise ProvisionError(f"invalid Gym version {version!r}")
    require_supported_gym(version, "--gym-version")
    envs = _normalise_environments(environments)
    checkout = _abspath(dest) if dest is not None else default_checkout_path(version)
    manifest, _ = _read_manifest(checkout, version)
    if manifest is not None and all(e in manifest["environments"] for e in envs):
        return _checkout_from_manifest(manifest)
    with _exclusive_lock(_lock_path(checkout), log):
        return _provision_locked(_Plan(version, checkout, envs, log))


def _provision_locked(plan: _Plan) -> GymCheckout:
    checkout, log = plan.checkout, plan.log
    manifest, why = _read_manifest(checkout, plan.version)
    if manifest is not None:
        missing = [e for e in plan.environments if e not in manifest["environments"]]
        if not missing:
            log(f"pytest-gym-eval provision: {checkout} is ready (provisioned by another process)")
            return _checkout_from_manifest(manifest)
        build = _Build(checkout / STATE_DIR / "logs", log)
        current = _checkout_from_manifest(manifest)
        with build.step("prefetch") as step:
            configs = _resolve_environments(checkout, missing)
            if problems := _missing_tools(checkout, configs):
                raise ProvisionError(f"missing tool: {'; '.join(problems)}")
            failed = _prefetch(current, configs, step, log)
            prefetch_log = step.log_path
        missing = [name for name in missing if name not in failed]
        configs = {name: paths for name, paths in configs.items() if name not in failed}
        updated = dict(manifest)
        updated["environments"] = [*manifest["environments"], *missing]
        updated["environment_configs"] = {
            **(manifest.get("environment_configs") or {}),
            **{name: [_relative(p, checkout) for p in paths] for name, paths in configs.items()},
        }
        updated["step_seconds"] = {
            **(manifest.get("step_seconds") or {}),
            "prefetch": build.seconds["prefetch"],
        }
        updated["updated"] = _utc_now()
        _write_manifest(checkout, updated)
        if failed:
            raise _prefetch_failure(failed, prefetch_log, updated["environments"])
        return _checkout_from_manifest(updated)

    _remove_stale_trash(checkout)
    if checkout.exists():
        if not checkout.is_dir():
            raise ProvisionError(f"{checkout} exists and is not a folder; choose another --dest")
        if _made_by_provision(checkout):
            log(f"pytest-gym-eval provision: {checkout} is half-built ({why}): deleting it and rebuilding from scratch")
            # Rename first, so an interrupted delete never leaves a checkout without its marker.
            trash = checkout.with_name(f"{checkout.name}.deleting-{os.getpid()}")
            os.replace(checkout, trash)
            shutil.rmtree(trash, ignore_errors=True)
        elif any(checkout.iterdir()):
            raise ProvisionError(
                f"{checkout} exists but was not made by `python -m pytest_gym_eval provision` (no "
                f"{STATE_DIR}/{BUILD_MARKER}); refusing to delete it. Choose another --dest, remove it, or "
                "use it directly as a checkout if it is a uv-synced Gym clone"
            )
    return _build(plan)


def _made_by_provision(checkout: Path) -> bool:
    """The build marker exists, or the folder holds nothing but an empty STATE_DIR (a crash right after
    creating it, before the marker was written)."""
    state = checkout / STATE_DIR
    if (state / BUILD_MARKER).exists():
        return True
    return [p.name for p in checkout.iterdir()] == [STATE_DIR] and state.is_dir() and not any(state.iterdir())


def _remove_stale_trash(checkout: Path) -> None:
    """Delete ``<checkout>.deleting-*`` folders left by an interrupted delete (the caller holds the lock)."""
    if checkout.parent.is_dir():
        for trash in checkout.parent.glob(f"{glob_escape(checkout.name)}.deleting-*"):
            shutil.rmtree(trash, ignore_errors=True)


def _check_uv_for(choice: InterpreterChoice, uv: Path, uv_version: Version3) -> None:
    """Raise ``ProvisionError`` when ``choice`` needs the Python-version workaround and ``uv`` is too old for it
    (``MIN_UV_WORKAROUND_VERSION``)."""
    if choice.workaround and uv_version < MIN_UV_WORKAROUND_VERSION:
        raise ProvisionError(
            f"uv {_fmt(uv_version)} at {uv} cannot use {choice.path} (Python {_fmt(choice.version)}) as "
            f"{choice.pretend_version}: that needs uv >= {_fmt(MIN_UV_WORKAROUND_VERSION)} "
            f"({INSTALL_HINT.replace('pip install', 'pip install -U')}), or install Python {choice.pretend_version}"
        )


def _build(plan: _Plan) -> GymCheckout:
    checkout, log, cache = plan.checkout, plan.log, plan.cache
    state = checkout / STATE_DIR
    state.mkdir(parents=True, exist_ok=True)
    (state / BUILD_MARKER).write_text(f"started {_utc_now()} by pid {os.getpid()}\n", encoding="utf-8")
    uv_cache, tmp = cache / "uv-cache", cache / "tmp"
    for folder in (uv_cache, tmp):
        folder.mkdir(parents=True, exist_ok=True)
    build = _Build(state / "logs", log)
    total_start = time.monotonic()

    # Everything that can be missing is looked for before the sdist (44 MB) is downloaded: uv first (before
    # any index request), then the index's entry for the sdist, then a Python for its requires-python.
    with build.step("preflight") as step:
        uv = find_uv()
        uv_version = _uv_version(uv, step, cache)
        step.write(f"uv {_fmt(uv_version)} at {uv}")
        sdist = _find_sdist(plan.version, step)
        candidates, searched = _discover_pythons(uv, sdist.requires_python, step, cache)
        if sdist.requires_python is not None:
            _check_uv_for(choose_interpreter(sdist.requires_python, candidates, searched), uv, uv_version)
        else:
            step.write("the index gives no requires-python: the interpreter is chosen after unpacking")

    with build.step("download") as step:
        sdist_path = _download_sdist(sdist, cache / "sdists", step)

    with build.step("unpack") as step:
        _unpack(sdist_path, checkout, step)
        if not (checkout / "nemo_gym").is_dir():
            raise ProvisionError(f"{sdist.filename} has no nemo_gym/ folder: not a Gym sdist")
        configs = _resolve_environments(checkout, plan.environments)
        for name, paths in configs.items():
            step.write(f"environment {name}: {', '.join(_relative(p, checkout) for p in paths)}")
        if problems := _missing_tools(checkout, configs):
            raise ProvisionError(f"missing tool: {'; '.join(problems)}")

    with build.step("python") as step:
        pyproject = checkout / "pyproject.toml"
        requires_python = read_requires_python(pyproject) if pyproject.exists() else None
        step.write(f"requires-python: {requires_python!r}")
        if requires_python != sdist.requires_python:
            step.write(f"(the index said {sdist.requires_python!r}: looking for interpreters again)")
            candidates, searched = _discover_pythons(uv, requires_python, step, cache)
        choice = choose_interpreter(requires_python, candidates, searched)
        _check_uv_for(choice, uv, uv_version)
        step.write(f"chosen: {choice}")
        uv_bin = state / "bin"
        uv_bin.mkdir(parents=True, exist_ok=True)
        (uv_bin / "uv").symlink_to(uv)  # a folder holding only uv: nothing else shadows Gym's PATH
        xdg_dir: Path | None = None
        if choice.workaround:
            xdg_dir = state / "xdg"
            (xdg_dir / "uv").mkdir(parents=True, exist_ok=True)
            uv_toml = xdg_dir / "uv" / "uv.toml"
            uv_toml.write_text(
                "# Written by pytest-gym-eval provision: no interpreter satisfies requires-python here.\n"
                f'[pip]\npython-version = "{choice.pretend_version}"\n',
                encoding="utf-8",
            )
            warning = (
                f"warning: no Python satisfies Gym's requires-python {requires_python!r}; using "
                f"{choice.path} (Python {_fmt(choice.version)}) and telling uv it is "
                f"{choice.pretend_version} "
                f"(uv pip install --python-version {choice.pretend_version}, and {uv_toml} via "
                "XDG_CONFIG_DIRS for the server venvs Gym builds). Install Python "
                f"{choice.pretend_version} to avoid this workaround."
            )
            step.write(warning)
            log(f"pytest-gym-eval provision: {warning}")

    env: dict[str, str] = {
        "UV_PYTHON_DOWNLOADS": "never",
        "UV_CACHE_DIR": str(uv_cache),
        "TMPDIR": str(tmp),
    }
    path_prepend = [str(uv_bin), str(choice.path.parent)]
    partial_manifest: dict[str, Any] = {
        "env": env,
        "path_prepend": path_prepend,
        "xdg_config_dir": str(xdg_dir) if xdg_dir else None,
    }
    gym = checkout / ".venv" / "bin" / "gym"
    current = GymCheckout(checkout, gym, plan.version, _checkout_env(partial_manifest), ())

    with build.step("venv") as step:
        sub_env = _base_environment()
        sub_env.update(current.env)
        venv = checkout / ".venv"
        venv_python = venv / "bin" / "python"
        if choice.workaround or not (checkout / "uv.lock").exists():
            uvs = str(uv)
            step.run([uvs, "venv", "--python", str(choice.path), str(venv)], cwd=checkout, env=sub_env)
            install = [uvs, "pip", "install", "--python", str(venv_python)]
            if choice.pretend_version:
                install += ["--python-version", choice.pretend_version]
            if (checkout / "uv.lock").exists():
                reqs = state / "requirements.txt"
                export = ["export", "--frozen", "--no-hashes", "--no-emit-project", "--extra", "dev"]
                step.run([uvs, *export, "-o", str(reqs)], cwd=checkout, env=sub_env)
                install += ["-r", str(reqs)]
            else:
                step.write("note: the checkout has no uv.lock; dependencies are resolved afresh")
            step.run([*install, "-e", ".[dev]"], cwd=checkout, env=sub_env)
        else:
            cmd = [str(uv), "sync", "--frozen", "--extra", "dev", "--python", str(choice.path)]
            step.run(cmd, cwd=checkout, env=sub_env)
        if not gym.exists():
            raise ProvisionError(f"the venv has no gym executable ({gym} missing)")

    with build.step("prefetch") as step:
        failed = _prefetch(current, configs, step, log)
        prefetch_log = step.log_path
        if len(failed) == len(configs):  # nothing is ready: no manifest, the next run rebuilds
            raise _prefetch_failure(failed, prefetch_log, [])
    configs = {name: paths for name, paths in configs.items() if name not in failed}

    with build.step("manifest") as step:
        seconds = dict(build.seconds)
        seconds["total"] = round(time.monotonic() - total_start, 3)
        manifest: dict[str, Any] = {
            "format_version": MANIFEST_FORMAT,
            "gym_version": plan.version,
            "checkout": str(checkout),
            "sdist": {"filename": sdist.filename, "sha256": sdist.sha256, "path": str(sdist_path)},
            "python": {
                "path": str(choice.path),
                "version": _fmt(choice.version),
                "requires_python": requires_python,
                "workaround": choice.workaround,
                "pretend_version": choice.pretend_version,
            },
            "gym_executable": str(gym),
            "environments": [name for name in plan.environments if name not in failed],
            "environment_configs": {name: [_relative(p, checkout) for p in paths] for name, paths in configs.items()},
            "env": {
                **env,
                "PATH": current.env["PATH"],
                **({"XDG_CONFIG_DIRS": current.env["XDG_CONFIG_DIRS"]} if xdg_dir else {}),
            },
            "path_prepend": path_prepend,
            "xdg_config_dir": str(xdg_dir) if xdg_dir else None,
            "uv": {"path": str(uv), "version": _fmt(uv_version), "link": str(uv_bin / "uv")},
            "created": _utc_now(),
            "step_seconds": seconds,
        }
        _write_manifest(checkout, manifest)
        step.write(f"wrote {_manifest_path(checkout)}")
    log(f"pytest-gym-eval provision: {checkout} ready in {time.monotonic() - total_start:.1f} s")
    if failed:
        raise _prefetch_failure(failed, prefetch_log, manifest["environments"])
    return _checkout_from_manifest(manifest)


# ---------------------------------------------------------------------------------------------------------
# CLI


def main(argv: list[str]) -> int:
    """``python -m pytest_gym_eval provision ...``: prints the checkout path on stdout and returns 0; prints
    the error on stderr and returns 1 on failure (130 when interrupted, 2 for bad arguments)."""
    parser = argparse.ArgumentParser(
        prog="python -m pytest_gym_eval provision",
        description="Download, unpack and build a NeMo Gym checkout for pytest-gym-eval (idempotent).",
    )
    parser.add_argument("--gym-version", default=DEFAULT_GYM_VERSION, help="nemo-gym version (%(default)s)")
    parser.add_argument("--dest", type=Path, default=None, help="checkout folder (default: <cache>/gym-<version>)")
    parser.add_argument(
        "--environment",
        dest="environments",
        action="extend",
        nargs="+",
        metavar="ENV",
        help="environments whose server venvs to prefetch, named as `gym env start --resources-server` names them "
        f"(mcqa, format_verification/citation_format); default: {' '.join(DEFAULT_ENVIRONMENTS)}",
    )
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 2
    try:
        checkout = provision(args.gym_version, args.dest, args.environments or DEFAULT_ENVIRONMENTS)
    except ProvisionError as exc:
        cli.error("provision", exc)
        return 1
    except KeyboardInterrupt:
        cli.error("provision", "interrupted: no manifest was written; the next run rebuilds")
        return 130
    print(checkout.path)
    return 0
