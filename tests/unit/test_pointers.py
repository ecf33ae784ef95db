"""Pointers the project's files give a reader resolve: every path of the repository that the CI script, the
project file, the set-up scripts and the examples' scripts name exists, every test file any text names exists, and
every dotted name of the package (``pytest_gym_eval.gym.servers.START_ATTEMPTS``) in the docs, the code and the
tests names a module or an attribute that exists. (``scripts/check_links.py`` checks the Markdown links.)"""

from __future__ import annotations

import dataclasses
import importlib
import re
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPTS = [".ci/run", "pyproject.toml", "conftest.py", "tests/*/conftest.py", "scripts/*", "examples/**/*.sh",
           "examples/**/*.yml"]  # fmt: skip
"""Files where any path of the repository is a pointer to it (a step to run, a file to read)."""

TEXTS = ["README.md", "docs/*.md", "examples/**/*.md", "pytest_gym_eval/**/*.py", "tests/**/*.py",
         "benchmarks/**/*.py", "examples/**/*.py", *SCRIPTS]  # fmt: skip
"""Every text of the project, for the test files and dotted names it names (the docs' own examples name a
user's files, ``tests/test_weather.py``, which are not this repository's)."""

ANY_PATH = re.compile(r"(?<![\w./$-])((?:tests|docs|scripts|examples|benchmarks|pytest_gym_eval|\.ci)/[\w./*-]*[\w*])")
TEST_FILE = re.compile(r"(?<![\w./$-])(tests/(?:unit|plugin|real_gym|live|browser|compat|support)/[\w/]+\.py)\b")
DOTTED = re.compile(r"\bpytest_gym_eval(?:\.\w+)+")

NOT_NAMES = {
    "pytest_gym_eval.egg": "the pytest_gym_eval.egg-info folder a build writes",
    "pytest_gym_eval.newcomer": "the module tests/plugin/test_layers.py adds to a copy of the package",
    "pytest_gym_eval.x": "an example in a test of the source scan",
    "pytest_gym_eval.NoSuchThing": "a name a test asks for to see the error",
}


def files(patterns: Iterable[str]) -> list[Path]:
    """The repository's files matching any of the glob ``patterns`` (relative to its root), sorted, once each; not
    this file, whose examples are stale on purpose."""
    here = Path(__file__).resolve()
    return sorted({path for pattern in patterns for path in ROOT.glob(pattern) if path.is_file() and path != here})


def missing_paths(text: str, pattern: re.Pattern[str]) -> list[str]:
    """The repository paths ``pattern`` finds in ``text`` that name nothing (a glob: that matches nothing)."""
    found = (match.group(1).rstrip(".") for match in pattern.finditer(text))
    return [path for path in found if not (any(ROOT.glob(path)) if "*" in path else (ROOT / path).exists())]


def resolves(name: str) -> bool:
    """Whether the dotted ``name`` is a module of the package or an attribute (a dataclass field included) of one."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            target: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for part in parts[cut:]:
            fields = {field.name for field in dataclasses.fields(target)} if dataclasses.is_dataclass(target) else ()
            if part in fields:
                return part == parts[-1]
            if not hasattr(target, part):
                return False
            target = getattr(target, part)
        return True
    return False


def test_the_scans_see_a_stale_pointer() -> None:
    assert missing_paths("see tests/plugin/test_ci_workflow.py and tests/unit/test_ci_workflow.py", ANY_PATH) == [
        "tests/plugin/test_ci_workflow.py"
    ]
    assert missing_paths("a user's tests/test_weather.py", TEST_FILE) == []
    assert not resolves("pytest_gym_eval.gym.run.START_ATTEMPTS")
    assert resolves("pytest_gym_eval.gym.servers.START_ATTEMPTS")
    assert resolves("pytest_gym_eval.tasks.shard.CollectedPlan.marks")  # a dataclass field
    # Names that moved when their modules were split by concern: the old pointers are stale.
    for old, new in [
        ("session.results.conclude", "session.conclude.conclude"),
        ("session.results.final_status", "session.status.final_status"),
        ("session.results.find_flips", "session.conclude.find_flips"),
        ("reporting.junit.write_junit_xml", "reporting.junit_file.write_junit_xml"),
        ("reporting.junit.parse_system_out", "reporting.junit_values.parse_system_out"),
        ("reporting.junit.RolloutValuesInJunit", "reporting.junit_plugin.RolloutValuesInJunit"),
        ("reporting.json_report.conclusion_from_report", "reporting.json_reading.conclusion_from_report"),
        ("history.store.open_store", "history.backends.open_store"),
        ("options.gym_options.COMPARISON_OPTIONS", "options.readers.COMPARISON_OPTIONS"),
        ("options.register.GymOptions", "options.gym_options.GymOptions"),
    ]:
        assert not resolves(f"pytest_gym_eval.{old}"), old
        assert resolves(f"pytest_gym_eval.{new}"), new


def test_every_path_the_scripts_name_exists() -> None:
    missing = {
        str(path.relative_to(ROOT)): paths
        for path in files(SCRIPTS)
        if (paths := missing_paths(path.read_text(encoding="utf-8"), ANY_PATH))
    }
    assert missing == {}


def test_every_test_file_a_text_names_exists() -> None:
    missing = {
        str(path.relative_to(ROOT)): paths
        for path in files(TEXTS)
        if (paths := missing_paths(path.read_text(encoding="utf-8"), TEST_FILE))
    }
    assert missing == {}


def test_every_dotted_name_of_the_package_exists() -> None:
    names = {
        (str(path.relative_to(ROOT)), match.group(0).rstrip("."))
        for path in files(TEXTS)
        for match in DOTTED.finditer(path.read_text(encoding="utf-8"))
    }
    stale = sorted(
        (where, name)
        for where, name in names
        if name not in NOT_NAMES and not name.endswith((".py", ".json")) and not resolves(name)
    )
    assert stale == []
