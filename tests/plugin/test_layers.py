"""The package's layers contract (``[tool.importlinter]`` in pyproject.toml, run by ``lint-imports`` in .ci/run):
it holds for the package as it is, and it fails, naming the import, when the session imports collection again
(the edge that closed the old import cycle, now a cycle inside the ``session`` package, which the acyclic contract
checks in every package) or when a bottom-layer module imports the plugin."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def lint_copy(tmp_path: Path, module: str | None = None, line: str = "") -> subprocess.CompletedProcess[str]:
    """Run ``lint-imports`` on a copy of the package (with ``line`` appended to ``module``'s file, if given)."""
    shutil.copytree(
        ROOT / "pytest_gym_eval", tmp_path / "pytest_gym_eval", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    if module is not None:
        path = tmp_path / "pytest_gym_eval" / f"{module}.py"
        text = path.read_text(encoding="utf-8") if path.exists() else ""
        path.write_text(text + f"\n{line}\n", encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture(autouse=True)
def _needs_lint_imports() -> None:
    if not LINT_IMPORTS.exists():
        pytest.fail(f"{LINT_IMPORTS} is missing: install the dev extra (import-linter)")


def test_the_package_keeps_its_layers(tmp_path: Path) -> None:
    done = lint_copy(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 kept, 0 broken" in done.stdout


def test_the_session_importing_collection_again_breaks_the_contract(tmp_path: Path) -> None:
    done = lint_copy(
        tmp_path,
        "session/gym_session",
        "def _late() -> None:\n    from pytest_gym_eval.session import collect  # noqa: F401",
    )
    assert done.returncode != 0
    assert "No cycles are allowed in pytest_gym_eval.session." in done.stdout
    assert "- .gym_session -> .collect (1 import)" in done.stdout


def test_a_leaf_importing_the_plugin_breaks_the_contract(tmp_path: Path) -> None:
    done = lint_copy(tmp_path, "core/files", "import pytest_gym_eval.plugin  # noqa: E402, F401")
    assert done.returncode != 0
    assert "- pytest_gym_eval.core.files -> pytest_gym_eval.plugin" in done.stdout


def test_a_module_without_a_layer_breaks_the_contract(tmp_path: Path) -> None:
    done = lint_copy(tmp_path, "newcomer", '"""A module nobody gave a layer."""')
    assert done.returncode != 0
    assert "pytest_gym_eval.newcomer" in done.stdout
