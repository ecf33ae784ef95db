"""The manifest, ``<checkout>/.pytest-gym-eval/manifest.json``: written last and atomically by ``provision``, it
marks a checkout as complete; a checkout without a valid one is half-built.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_gym_eval.core.files import write_json_atomic

MANIFEST_FORMAT = 1
STATE_DIR = ".pytest-gym-eval"
"""Folder inside the checkout for the manifest, the step logs and provisioning state."""
MANIFEST_NAME = "manifest.json"
BUILD_MARKER = "provisioning"
"""File in STATE_DIR written before the first step: a checkout with it but without a valid manifest is
half-built (and may be deleted); a folder without it was not made by ``provision`` and is never deleted."""


def manifest_path(checkout: Path) -> Path:
    return checkout / STATE_DIR / MANIFEST_NAME


def read_manifest(checkout: Path, version: str | None) -> tuple[dict[str, Any] | None, str]:
    """``(manifest, "")`` when valid for ``checkout`` (and ``version`` unless ``None``), else
    ``(None, why)``."""
    path = manifest_path(checkout)
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
    if problem := venv_python_problem(Path(gym).with_name("python")):
        return None, problem
    return data, ""


def venv_python_problem(python: Path) -> str | None:
    """Why the interpreter of Gym's venv (``python``, its ``bin/python`` link) cannot run, or None. A venv links
    to the interpreter it was made with: when that is gone (a CI cache restored onto a runner image whose Python
    moved from 3.13.N to 3.13.N+1, or a pyenv version removed), the link dangles and every ``gym`` command fails
    with a FileNotFoundError naming the script, not the interpreter. A venv without the link is not judged."""
    if os.path.lexists(python) and not os.path.exists(python):
        return (
            f"the interpreter {os.path.realpath(python)} of Gym's venv ({python}) is missing (removed, or a cache "
            "restored onto a machine whose Python moved)"
        )
    return None


def write_manifest(checkout: Path, manifest: Mapping[str, Any]) -> None:
    """Write ``manifest`` to the checkout's manifest file atomically (a reader sees the old file or the new one).
    Raises OSError when it cannot be written."""
    write_json_atomic(manifest_path(checkout), manifest)
