"""The plugin as it ships: the wheel and sdist ``uv build`` makes, installed into fresh venvs with the oldest and
the newest supported pytest (the rest of the plugin's portability: tests/plugin/test_portability.py).

These tests (the ``compat`` tier, marked by this folder's conftest) build the wheel and sdist once and need the
package index or uv's cache (``-m "not compat"`` leaves them out offline). The last two run the whole fast tier in
a venv of each combination (the compatibility matrix).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from dataclasses import dataclass
from email.parser import Parser
from pathlib import Path

import pytest
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "pytest_gym_eval"
ONE_TEST = "def test_one():\n    assert True\n"


def _package_files() -> set[str]:
    """The package's files as the wheel and sdist name them (``pytest_gym_eval/...``), caches left out."""
    return {
        path.relative_to(ROOT).as_posix()
        for path in PACKAGE.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"
    }


def _uv() -> str:
    uv = shutil.which("uv", path=str(Path(sys.executable).parent))
    if uv:
        return uv
    import uv as uv_package

    return str(uv_package.find_uv_bin())


def _uv_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "UV_PYTHON", "PYTHONPATH")}
    env["UV_PYTHON_DOWNLOADS"] = "never"
    return env


def _run(argv: list[str], cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    result = subprocess.run(argv, cwd=cwd, env=env or _uv_env(), capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, f"{' '.join(argv)} exited {result.returncode}:\n{result.stdout}\n{result.stderr}"
    return result.stdout


# ---------------------------------------------------------------------------------------------------------
# The wheel and sdist as shipped; the plugin installed with the oldest and the newest supported pytest


@dataclass(frozen=True)
class Dists:
    wheel: Path
    sdist: Path


@pytest.fixture(scope="session")
def dists(tmp_path_factory: pytest.TempPathFactory) -> Dists:
    """The wheel and sdist ``uv build`` makes from a copy of the package's files (the checkout stays as it is;
    the wheel is built from the sdist, as an installer building from the sdist would)."""
    source = tmp_path_factory.mktemp("source")
    for name in ("pyproject.toml", "README.md", "LICENSE", "MANIFEST.in"):
        shutil.copy2(ROOT / name, source / name)
    shutil.copytree(PACKAGE, source / PACKAGE.name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    shutil.copy2(ROOT / "conftest.py", source / "conftest.py")  # these are here to prove they are left out
    for name in ("tests", "benchmarks", "examples"):
        shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    out = tmp_path_factory.mktemp("dist")
    _run([_uv(), "build", "--sdist", "--wheel", "--out-dir", str(out), str(source)])
    (wheel,) = out.glob("*.whl")
    (sdist,) = out.glob("*.tar.gz")
    return Dists(wheel, sdist)


def _metadata(wheel: Path) -> tuple[list[str], dict[str, list[str]]]:
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        (metadata,) = [n for n in names if n.endswith(".dist-info/METADATA")]
        message = Parser().parsestr(archive.read(metadata).decode("utf-8"))
    fields: dict[str, list[str]] = {}
    for key, value in message.items():
        fields.setdefault(key, []).append(value)
    return names, fields


def test_the_wheel_holds_the_package_licence_and_entry_point(dists: Dists) -> None:
    names, fields = _metadata(dists.wheel)
    assert _package_files() <= set(names)
    assert not [n for n in names if n.startswith(("tests/", "benchmarks/", "examples/", "conftest"))]
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert fields["License-Expression"] == ["Apache-2.0"]
    assert "Operating System :: POSIX :: Linux" in fields["Classifier"]
    assert {"Homepage, https://pypi.org/project/pytest-gym-eval/"} <= set(fields["Project-URL"])
    runtime = sorted(r for r in fields["Requires-Dist"] if "extra ==" not in r)
    assert [re.split(r"[<>=!~ ;\[]", r)[0] for r in runtime] == ["jsonlines", "pluggy", "pytest"]
    assert any(r.startswith("uv>=") and 'extra == "provision"' in r for r in fields["Requires-Dist"])
    with zipfile.ZipFile(dists.wheel) as archive:
        (entry_points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
        assert "gym_eval = pytest_gym_eval.plugin" in archive.read(entry_points).decode("utf-8")


def test_the_sdist_ships_no_tests(dists: Dists) -> None:
    # The tests need the repository's conftest, stand-ins and a provisioned Gym: the sdist ships none of them
    # rather than tests that cannot run.
    with tarfile.open(dists.sdist) as archive:
        names = {member.name.split("/", 1)[1] for member in archive.getmembers() if member.isfile()}
    top = {name.split("/")[0] for name in names}
    assert top == {
        "LICENSE", "MANIFEST.in", "PKG-INFO", "README.md", "pyproject.toml", "setup.cfg",
        "pytest_gym_eval", "pytest_gym_eval.egg-info",
    }  # fmt: skip
    assert {n for n in names if n.startswith("pytest_gym_eval/")} == _package_files()


def _floors(wheel: Path) -> list[str]:
    """``name==floor`` for each runtime requirement of the wheel (``pytest>=8.0`` -> ``pytest==8.0``)."""
    _, fields = _metadata(wheel)
    pins = []
    for requirement in fields["Requires-Dist"]:
        if "extra ==" in requirement:
            continue
        match = re.fullmatch(r"([A-Za-z0-9_.-]+)\s*>=\s*([0-9][0-9.]*)", requirement.strip())
        assert match, f"a runtime requirement without a plain floor: {requirement}"
        pins.append(f"{match.group(1)}=={match.group(2)}")
    return pins


COMBINATIONS = {"oldest": "3.10", "newest": "3.13"}
"""The compatibility matrix: the oldest combination the metadata allows (Python 3.10, every dependency at its
declared floor: uv's lowest-direct resolution) and the newest (Python 3.13, the newest releases on the index)."""
RESOLUTION = {
    "oldest": ["--resolution", "lowest-direct"],
    "newest": ["--upgrade", "--refresh-package", "pytest", "--refresh-package", "pluggy"],
}
"""How each combination resolves what is installed into its venv (uv pip install options)."""


def _interpreter(minor: str) -> str:
    """Python ``minor`` (e.g. ``"3.10"``): pyenv's newest patch release of it, else one uv finds (never
    downloading); never this interpreter in its place (a matrix row that silently ran on another Python would
    prove nothing). Fails the test when there is none."""
    root = (
        subprocess.run(["pyenv", "root"], capture_output=True, text=True).stdout.strip()
        if shutil.which("pyenv")
        else ""
    )
    versions = Path(root or os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    found = sorted(versions.glob(f"{minor}.*/bin/python3"), key=lambda p: Version(p.parents[1].name))
    if found:
        return str(found[-1])
    major, minor_number = minor.split(".")
    uv_found = subprocess.run(
        [_uv(), "python", "find", "--no-project", "--no-config", f">={minor}, <{major}.{int(minor_number) + 1}"],
        env=_uv_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    python = uv_found.stdout.strip().splitlines()[-1] if uv_found.returncode == 0 and uv_found.stdout.strip() else ""
    assert python and python != sys.executable, f"no Python {minor} on this machine (pyenv or uv): the matrix needs it"
    return python


def combination_venv(combination: str, venv: Path, *requirements: str) -> Path:
    """A fresh venv at ``venv`` on the Python of ``combination`` (a key of :data:`COMBINATIONS`, refused when the
    machine has no such Python) with ``requirements`` (uv pip install arguments) installed by the combination's
    :data:`RESOLUTION`. Returns the venv's python. The one way both the plain-project test and the fast-tier test
    build a combination's venv."""
    _run([_uv(), "venv", "--quiet", "--python", _interpreter(COMBINATIONS[combination]), str(venv)])
    python = venv / "bin" / "python"
    _run([_uv(), "pip", "install", "--quiet", "--python", str(python), *RESOLUTION[combination], *requirements])
    return python


@pytest.mark.parametrize("combination", list(COMBINATIONS))
def test_a_plain_project_passes_with_the_plugin_installed(dists: Dists, tmp_path: Path, combination: str) -> None:
    """pytest 8.0 to 9.0 with the plugin installed failed every run with `INTERNALERROR ... unhashable type:
    'ResultsCollector'`: the oldest combination (Python 3.10, every runtime dependency at its floor) and the
    newest (Python 3.13, the newest pytest and pluggy on the index) each run a one-test project."""
    floors = _floors(dists.wheel) if combination == "oldest" else []  # the floors pinned, not only resolved low
    python = combination_venv(combination, tmp_path / "venv", str(dists.wheel), *floors)
    project = tmp_path / "project"
    project.mkdir()
    (project / "test_one.py").write_text(ONE_TEST, encoding="utf-8")
    env = {k: v for k, v in _uv_env().items() if not k.startswith("PYTEST_")}
    result = subprocess.run(
        [str(python), "-m", "pytest", "-p", "no:cacheprovider", "-W", "error"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "INTERNALERROR" not in output
    assert re.search(r"^plugins:.*\bgym-eval-", output, re.M), output
    assert re.search(r"^=+ 1 passed", output, re.M), output
    if combination == "oldest":
        code = "import pytest, pluggy; print(pytest.__version__, pluggy.__version__)"
        installed = _run([str(python), "-c", code]).split()
        pinned = dict(pin.split("==") for pin in floors)
        assert [Version(v) for v in installed] == [Version(pinned["pytest"]), Version(pinned["pluggy"])]


def test_the_provision_extra_is_all_provisioning_needs(
    dists: Dists, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """`pip install 'pytest-gym-eval[provision]'` and then `python -m pytest_gym_eval provision`, with no uv
    anywhere else (not on PATH, not in a pyenv version, not in the test's own venv): the stand-in Gym sdist is
    provisioned from a local index."""
    from tests.plugin.test_provision import VERSION, FakeIndex, _build_fake_sdist

    venv = tmp_path / "venv"
    _run([_uv(), "venv", "--quiet", "--python", sys.executable, str(venv)])
    _run([_uv(), "pip", "install", "--quiet", "--python", str(venv / "bin" / "python"), f"{dists.wheel}[provision]"])
    index = FakeIndex(_build_fake_sdist(tmp_path_factory.mktemp("sdist"), ">=3.10"))
    nowhere = tmp_path / "nowhere"
    nowhere.mkdir()
    env = {
        "HOME": str(tmp_path),
        "PATH": os.pathsep.join(p for p in ("/usr/local/bin", "/usr/bin", "/bin") if not (Path(p) / "uv").exists()),
        "PYENV_ROOT": str(nowhere),
        "PIP_INDEX_URL": index.url,
        "PYTEST_GYM_EVAL_CACHE": str(tmp_path / "cache"),
        "UV_OFFLINE": "1",
        "FAKE_GYM_RECORD": str(tmp_path / "record.jsonl"),
    }
    if shutil.which("python3", path=env["PATH"]) is None:
        env["PATH"] += os.pathsep + str(Path(sys.base_prefix) / "bin")  # some Python >= 3.10 for the stand-in
    try:
        result = subprocess.run(
            [str(venv / "bin" / "python"), "-m", "pytest_gym_eval", "provision"],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
    finally:
        index.close()
    assert result.returncode == 0, result.stderr
    checkout = Path(result.stdout.strip())
    assert checkout == tmp_path / "cache" / f"gym-{VERSION}"
    manifest = json.loads((checkout / ".pytest-gym-eval" / "manifest.json").read_text("utf-8"))
    assert Path(manifest["uv"]["path"]).is_relative_to(venv)  # the uv of the extra built it
    assert "[preflight] done" in result.stderr and "[manifest] done" in result.stderr


# ---------------------------------------------------------------------------------------------------------
# The whole fast tier on the oldest and the newest combination


@pytest.mark.parametrize("combination", list(COMBINATIONS))
def test_the_fast_tier_passes_on_the_combination(tmp_path: Path, combination: str) -> None:
    """The project with its dev extra installed (editable) into a fresh venv of the combination, then its whole
    fast tier (``-m "not gym and not compat"``) run there, in one process: these two tests are one unit of work
    under ``-n 2`` (the root conftest), run on the worker that does not run Gym, while the other runs the Gym tiers."""
    python = str(combination_venv(combination, tmp_path / "venv", "-e", f"{ROOT}[dev]"))
    code = "import sys; from importlib.metadata import version as v; print(sys.version_info[:2], v('pytest'))"
    installed = _run([python, "-c", code])
    assert installed.startswith(str(tuple(int(n) for n in COMBINATIONS[combination].split(".")))), installed
    env = {k: v for k, v in _uv_env().items() if not k.startswith(("PYTEST_", "COV_"))}
    result = subprocess.run(
        [python, "-m", "pytest", "-m", "not gym and not compat", "-q", "-p", "no:cacheprovider", "--color=no"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=3600,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"{combination} ({installed.strip()}): the fast tier failed:\n{output[-20000:]}"
    assert re.search(r"^\d+ passed", output.splitlines()[-1]), output[-2000:]
