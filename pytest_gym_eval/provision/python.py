"""The tools a checkout is built with: uv, and the interpreter for Gym's venv (one satisfying its
``requires-python``, or one of the same minor version that uv is told to treat as the required one).
"""

from __future__ import annotations

import contextlib
import importlib
import os
import re
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

from pytest_gym_eval.provision.checkout import base_environment
from pytest_gym_eval.provision.errors import ProvisionError
from pytest_gym_eval.provision.host import abspath, path_without_shims, pyenv_root, which_real
from pytest_gym_eval.provision.steps import Step
from pytest_gym_eval.provision.versions import (
    Version3,
    format_version,
    lower_bound,
    requires_python_specifiers,
    satisfies,
)

MIN_UV_VERSION = (0, 9, 30)
"""Gym's own floor (it prints "required uv version" below it)."""
MIN_UV_WORKAROUND_VERSION = (0, 10, 8)
"""uv before 0.10.8 checks an editable project's ``requires-python`` against the real interpreter, not the
``--python-version`` it was given, so the Python-version workaround fails (measured: 0.10.7 fails, 0.10.8
works)."""
INSTALL_HINT = "pip install 'pytest-gym-eval[provision]'"
"""How a user gets what provisioning needs from the package index (uv)."""


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
    from packaging.specifiers import SpecifierSet  # not at module level: see pytest_gym_eval.provision.versions

    try:
        specifiers = requires_python_specifiers(requires_python) if requires_python else SpecifierSet()
    except ValueError as exc:
        raise ProvisionError(f"checkout's requires-python: {exc}") from exc
    indexed = list(enumerate(candidates))
    if not requires_python:
        py3 = [(i, c) for i, c in indexed if c.version[0] >= 3] or indexed
        if py3:
            _, best = max(py3, key=lambda ic: (ic[1].version, -ic[0]))
            return InterpreterChoice(best.path, best.version, False, None)
    satisfying = [(i, c) for i, c in indexed if satisfies(c.version, specifiers)]
    if satisfying:
        _, best = min(satisfying, key=lambda ic: (ic[1].version[:2], -ic[1].version[2], ic[0]))
        return InterpreterChoice(best.path, best.version, False, None)
    bound = lower_bound(specifiers)
    if bound is not None and satisfies(bound, specifiers):
        same_minor = [(i, c) for i, c in indexed if c.version[:2] == bound[:2] and c.version < bound]
        if same_minor:
            _, best = max(same_minor, key=lambda ic: (ic[1].version, -ic[0]))
            return InterpreterChoice(best.path, best.version, True, format_version(bound))
    found = ", ".join(f"{c.path} ({format_version(c.version)})" for c in candidates) or "none"
    where = "; ".join(searched) or "nowhere"
    raise ProvisionError(
        f"no Python satisfies requires-python {requires_python!r} (nor one of the same minor version for the "
        f"python-version workaround). Interpreters found: {found}. Searched: {where}. "
        "Install a matching Python (e.g. with pyenv) and run provision again."
    )


def find_uv() -> Path:
    """The uv executable: ``$PYTEST_GYM_EVAL_UV``, else ``uv.find_uv_bin()`` when the ``uv`` package is
    importable, else ``uv`` on ``PATH`` (pyenv shims skipped, ``$(pyenv root)/versions/*/bin`` searched).

    Raises ``ProvisionError`` (naming ``pip install 'pytest-gym-eval[provision]'``) when there is none."""
    override = os.environ.get("PYTEST_GYM_EVAL_UV")
    if override:
        path = abspath(override)
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise ProvisionError(f"$PYTEST_GYM_EVAL_UV={override} is not an executable file")
        return path
    try:
        uv_module = importlib.import_module("uv")
        found = uv_module.find_uv_bin()
        if found and os.path.isfile(found):
            return abspath(found)
    except (ImportError, FileNotFoundError, AttributeError):
        pass
    on_path = which_real("uv")
    if on_path is not None:
        return on_path
    raise ProvisionError(
        f"uv not found: provisioning builds Gym's environments with uv. Install it with {INSTALL_HINT} (or "
        "pip install uv), or set $PYTEST_GYM_EVAL_UV to its path"
    )


def uv_version(uv: Path, step: Step, cwd: Path) -> Version3:
    _, out = step.run([str(uv), "--version"], cwd=cwd, env=base_environment(), capture=True, timeout=60)
    match = re.search(r"(\d+)\.(\d+)\.(\d+)", out)
    if not match:
        raise ProvisionError(f"cannot read uv's version from {out.strip()!r}")
    version: Version3 = (int(match.group(1)), int(match.group(2)), int(match.group(3)))
    if version < MIN_UV_VERSION:
        raise ProvisionError(
            f"uv {format_version(version)} at {uv} is too old: Gym needs uv >= {format_version(MIN_UV_VERSION)} "
            f"({INSTALL_HINT.replace('pip install', 'pip install -U')}, or set $PYTEST_GYM_EVAL_UV)"
        )
    return version


_QUERY = "import sys; print('%d.%d.%d' % tuple(sys.version_info[:3]))"


def discover_pythons(
    uv: Path, requires_python: str | None, step: Step, cwd: Path
) -> tuple[list[PythonCandidate], list[str]]:
    """Candidates from ``uv python find``, ``python3.X``/``python3`` on PATH and pyenv's versions."""
    env = base_environment()
    env["UV_PYTHON_DOWNLOADS"] = "never"
    env["PATH"] = path_without_shims(env.get("PATH", ""))
    paths: list[tuple[Path, str]] = []
    searched: list[str] = []

    requests: list[str] = []
    if requires_python:
        requests.append(requires_python)
        with contextlib.suppress(ValueError):
            bound = lower_bound(requires_python_specifiers(requires_python))
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
    pyenv_versions = pyenv_root() / "versions"
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
            step.write(f"candidate {path}: Python {format_version(version)} (from {source})")
    return candidates, searched


def check_uv_for(choice: InterpreterChoice, uv: Path, uv_version: Version3) -> None:
    """Raise ``ProvisionError`` when ``choice`` needs the Python-version workaround and ``uv`` is too old for it
    (``MIN_UV_WORKAROUND_VERSION``)."""
    if choice.workaround and uv_version < MIN_UV_WORKAROUND_VERSION:
        raise ProvisionError(
            f"uv {format_version(uv_version)} at {uv} cannot use {choice.path} "
            f"(Python {format_version(choice.version)}) as "
            f"{choice.pretend_version}: that needs uv >= {format_version(MIN_UV_WORKAROUND_VERSION)} "
            f"({INSTALL_HINT.replace('pip install', 'pip install -U')}), or install Python {choice.pretend_version}"
        )
