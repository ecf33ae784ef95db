"""Rules about the package's source that its tools cannot check, read from the source itself (``ast``).

- Every import of one of the package's own modules is one the layers contract sees (``lint-imports`` follows
  ``import`` statements, not ``importlib.import_module("pytest_gym_eval....")``).
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

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
    """(The command dispatcher ``__main__`` and ``options.register``'s lazy names import from tables, not
    literals: ``__main__`` is the top layer, and the lazy names are of ``options`` itself.)"""
    hidden = {path: names for path, tree in package_modules() if (names := dynamic_imports_of_the_package(tree))}
    assert hidden == {}, "import these with an import statement, which lint-imports checks"
