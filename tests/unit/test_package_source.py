"""Rules about the package's source that its tools cannot check, read from the source itself (``ast``).

- Every import of one of the package's own modules is one the layers contract sees (``lint-imports`` follows
  ``import`` statements, not ``importlib.import_module("pytest_gym_eval....")``).
- No file name of a run directory is spelled outside :class:`~pytest_gym_eval.core.rundir.RunPaths`: code asks it
  for the path.
- No module is over :data:`MAX_LINES` lines but those of :data:`OVER_MAX_LINES`, each at most as long as it is
  listed: a ratchet that only goes down.
"""

from __future__ import annotations

import ast
import functools
import inspect
import re
from pathlib import Path

from pytest_gym_eval.core.rundir import RunPaths

PACKAGE = Path(__file__).resolve().parents[2] / "pytest_gym_eval"


@functools.cache
def package_modules() -> tuple[tuple[str, ast.Module], ...]:
    """Every module of the package: (its path relative to the package, e.g. ``core/rundir.py``, its syntax tree),
    parsed once for every test here."""
    paths = sorted(PACKAGE.rglob("*.py"))
    return tuple((path.relative_to(PACKAGE).as_posix(), ast.parse(path.read_text("utf-8"))) for path in paths)


def dynamic_imports_of_the_package(tree: ast.Module) -> list[str]:
    """The package modules ``tree`` imports by a string literal (``importlib.import_module("pytest_gym_eval.x")``,
    ``__import__("pytest_gym_eval.x")``): imports the layers contract cannot see."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        function = node.func
        name = function.attr if isinstance(function, ast.Attribute) else getattr(function, "id", None)
        first = node.args[0]
        literal = first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else ""
        if name in ("import_module", "__import__") and literal.split(".")[0] == "pytest_gym_eval":
            found.append(literal)
    return found


def test_the_scan_finds_a_dynamic_import_of_the_package() -> None:
    tree = ast.parse('import importlib\nmodule = importlib.import_module("pytest_gym_eval.reporting.html")')
    assert dynamic_imports_of_the_package(tree) == ["pytest_gym_eval.reporting.html"]
    assert dynamic_imports_of_the_package(ast.parse('importlib.import_module("uv")')) == []


def test_the_package_imports_its_modules_only_where_the_layers_contract_sees_it() -> None:
    """(The command dispatcher ``__main__`` imports from a table, not literals: it is the top layer.)"""
    hidden = {path: names for path, tree in package_modules() if (names := dynamic_imports_of_the_package(tree))}
    assert hidden == {}, "import these with an import statement, which lint-imports checks"


SAMPLE = {int: 7, str: "somepolicy"}
"""The argument each :class:`RunPaths` method is called with to see the names it makes, per parameter type."""

SAME_NAME_ELSEWHERE = {
    ("provision/manifest.py", "manifest.json"): "a provisioned Gym checkout's manifest",
    ("cli/replay.py", "replay-model"): "the replay command's own log, in the temp folder",
}
"""A run directory's file name spelled outside ``core/rundir.py`` for a file that is not in a run directory."""


def run_directory_names() -> set[str]:
    """The names :class:`RunPaths` gives the files and folders of a run directory that could not be mistaken for
    another word: those with a ``.``, ``-`` or ``_`` (``state.json``, ``gym-output``; not ``logs``). A name made
    from an argument counts up to it (``gym-env-start`` of ``gym-env-start-7.log``)."""
    paths = RunPaths(Path("/run"))
    made: list[Path] = []
    for name, member in vars(RunPaths).items():
        if isinstance(member, property):
            made.append(getattr(paths, name))
        elif inspect.isfunction(member) and not name.startswith("_"):
            parameters = list(inspect.signature(member, eval_str=True).parameters.values())[1:]
            made.append(getattr(paths, name)(*(SAMPLE[parameter.annotation] for parameter in parameters)))
    names = set()
    for path in made:
        for part in path.relative_to("/run").parts:
            cut = re.split(r"-?(?:7|somepolicy)", part)[0]
            if re.search(r"[._-]", cut):
                names.add(cut)
    return names


def spelled_names(tree: ast.Module, names: set[str]) -> list[str]:
    """Which of ``names`` the string literals of ``tree`` (f-strings' literal parts included, docstrings not)
    spell as a file name: the whole literal, or a part of it that starts at its start or after a ``/``."""
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
    }
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            text = node.value
            found += [name for name in names if re.search(rf"(?:^|/){re.escape(name)}(?:$|[/.-])", text)]
    return sorted(set(found))


def test_the_run_directory_names_are_read_from_run_paths() -> None:
    names = run_directory_names()
    assert {"state.json", "gym-output", "rollouts.jsonl", "manifest.json", "gym-env-start", "replay-model"} <= names
    assert "logs" not in names


def test_the_scan_finds_a_run_directory_name_spelled_out() -> None:
    names = run_directory_names()
    tree = ast.parse('def f(run_dir, n):\n    """Reads manifest.json."""\n    return run_dir / "manifest.json"')
    assert spelled_names(tree, names) == ["manifest.json"]
    tree = ast.parse('log = logs / f"gym-env-start-{attempt}.log"\nother = "logs/gym-output/x"')
    assert spelled_names(tree, names) == ["gym-env-start", "gym-output"]
    assert spelled_names(ast.parse('"see the state.json of that run"'), names) == []


def test_no_run_directory_name_is_spelled_outside_run_paths() -> None:
    names = run_directory_names()
    spelled = {
        path: found
        for path, tree in package_modules()
        if path != "core/rundir.py"
        and (found := [name for name in spelled_names(tree, names) if (path, name) not in SAME_NAME_ELSEWHERE])
    }
    assert spelled == {}, "ask RunPaths (pytest_gym_eval/core/rundir.py) for these paths"


MAX_LINES = 500
"""The most lines a module of the package may have (one concern a module: split a longer one by concern)."""

OVER_MAX_LINES = {
    "session/gym_session.py": 621,
    "stats/comparison.py": 618,
    "reporting/summary.py": 533,
    "session/collect.py": 522,
}
"""The modules still over :data:`MAX_LINES`, each with the most lines it may keep: lower an entry when its module
shrinks, delete it once the module is within :data:`MAX_LINES`; never add one or raise one."""


def module_lengths() -> dict[str, int]:
    """Every module of the package (its path relative to the package) and its number of lines."""
    return {
        path.relative_to(PACKAGE).as_posix(): len(path.read_text("utf-8").splitlines())
        for path in sorted(PACKAGE.rglob("*.py"))
    }


def too_long(lengths: dict[str, int], allowed: dict[str, int], most: int = MAX_LINES) -> dict[str, str]:
    """Per module breaking the ratchet, why: over ``most`` lines and not in ``allowed``, longer than ``allowed``
    lets it be, or listed in ``allowed`` though it is within ``most`` (or gone): the entry is stale."""
    found = {}
    for path, lines in lengths.items():
        if lines > allowed.get(path, most):
            limit = f"its allowed {allowed[path]}" if path in allowed else f"{most}"
            found[path] = f"{lines} lines, over {limit}: split it by concern"
    for path, limit in allowed.items():
        if lengths.get(path, 0) <= most:
            found[path] = f"within {most} lines now (or gone): delete its entry in OVER_MAX_LINES"
        elif lengths[path] < limit:
            found[path] = f"{lengths[path]} lines, its entry allows {limit}: lower the entry to {lengths[path]}"
    return found


def test_the_ratchet_sees_a_long_module_a_grown_one_and_a_stale_entry() -> None:
    lengths = {"a.py": 501, "b.py": 500, "c.py": 610, "d.py": 600, "e.py": 400}
    allowed = {"c.py": 600, "d.py": 650, "e.py": 520, "gone.py": 700}
    assert sorted(too_long(lengths, allowed)) == ["a.py", "c.py", "d.py", "e.py", "gone.py"]
    assert too_long({"a.py": 501, "b.py": 500}, {"a.py": 501}) == {}


def test_no_module_is_longer_than_the_ratchet_allows() -> None:
    assert too_long(module_lengths(), OVER_MAX_LINES) == {}, f"at most {MAX_LINES} lines a module"
