"""The plugin is safe to load wherever pytest runs: it imports nothing only rare paths need, every object it
registers is hashable (pytest < 9.1 keeps plugins in a set), and a Python without the POSIX modules never breaks a
run. The wheel and sdist it ships, installed with the oldest and the newest supported pytest (the ``compat``
tier): tests/compat/test_compat.py.
"""

from __future__ import annotations

import importlib
import inspect
import os
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import pytest_gym_eval

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "pytest_gym_eval"
POSIX_ONLY_MODULES = ("fcntl", "resource", "pwd", "grp", "termios", "tty", "pty", "syslog", "_posixshmem")
"""Modules Windows' Python lacks (``os``, ``signal``, ``socket``, ``subprocess`` exist everywhere)."""
ONE_TEST = "def test_one():\n    assert True\n"


# ---------------------------------------------------------------------------------------------------------
# Whatever the plugin registers with pytest's plugin manager must be hashable: pytest < 9.1 keeps plugins in
# a set, and an unhashable one (a @dataclass with eq=True) broke every pytest run (INTERNALERROR).


def _plugin_classes() -> list[type]:
    classes = []
    for info in pkgutil.walk_packages(pytest_gym_eval.__path__, "pytest_gym_eval."):
        module = importlib.import_module(info.name)
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ == module.__name__ and any(name.startswith("pytest_") for name in vars(cls)):
                classes.append(cls)
    return classes


def test_loading_the_plugin_imports_nothing_only_rare_paths_need() -> None:
    # Every pytest session on a machine with the plugin installed pays for what it imports: HTTP, TLS and
    # xml.sax (which imports urllib.request) cost ~10 ms and only the merge, the local model and the replay
    # server use them.
    rare = ["urllib.request", "ssl", "http.client", "http.server", "xml.sax.saxutils"]
    code = f"import sys, pytest_gym_eval.plugin; print([m for m in {rare!r} if m in sys.modules])"
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert found.stdout.strip() == "[]"


def test_every_class_with_pytest_hooks_is_hashable() -> None:
    classes = _plugin_classes()
    assert {cls.__name__ for cls in classes} >= {"ResultsCollector", "XdistController"}
    unhashable = [cls.__qualname__ for cls in classes if cls.__hash__ is None]
    assert unhashable == [], "registered as pytest plugins, these must be hashable (e.g. @dataclass(eq=False))"


REGISTERED_CONFTEST = """
import json, os

def pytest_sessionfinish(session):
    config = session.config
    mine = [
        (name, type(plugin).__name__)
        for name, plugin in config.pluginmanager.list_name_plugin()
        if type(plugin).__module__.startswith("pytest_gym_eval.")
    ]
    for _, plugin in config.pluginmanager.list_name_plugin():
        if type(plugin).__module__.startswith("pytest_gym_eval."):
            hash(plugin)
    role = "worker" if hasattr(config, "workerinput") else "main"
    with open(os.path.join(str(config.rootpath), f"registered-{role}-{os.getpid()}.json"), "w") as fh:
        json.dump(mine, fh)
"""


@pytest.mark.parametrize("xdist", [False, True], ids=["one process", "xdist"])
def test_every_object_the_plugin_registers_is_hashable(pytester: pytest.Pytester, xdist: bool) -> None:
    pytester.makeconftest(REGISTERED_CONFTEST)
    pytester.makepyfile(test_one=ONE_TEST)
    # A Gym option makes the session (and its plugin objects) without a dataset; a run with neither registers none.
    args = ["-p", "no:cacheprovider", "--gym-repeats=1", *(["-n", "1"] if xdist else [])]
    result = pytester.runpytest_subprocess(*args)
    result.assert_outcomes(passed=1)
    registered = {path.name.split("-")[1]: path.read_text() for path in pytester.path.glob("registered-*.json")}
    assert '"ResultsCollector"' in registered["main"]
    if xdist:
        assert '"XdistController"' in registered["main"]
        assert '"ResultsCollector"' in registered["worker"]


# ---------------------------------------------------------------------------------------------------------
# Without the POSIX modules and functions (as on Windows) the plugin loads, a run without a Gym dataset passes,
# and using Gym says clearly why it cannot run.

POSIX_ONLY_ATTRIBUTES = {
    "os": ("killpg", "getpgid", "setsid", "getsid", "fork", "getuid"),
    "signal": ("SIGKILL", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGALRM", "SIGCHLD", "SIGPIPE"),
}
"""Names of ``os`` and ``signal`` Windows' Python lacks."""
BLOCKING_SITECUSTOMIZE = """
import os, signal, sys
for name in {modules!r}:
    sys.modules.pop(name, None)
    sys.modules[name] = None  # `import name` now raises ImportError, as where the module does not exist
for module, names in {attributes!r}.items():
    for name in names:
        if hasattr(sys.modules[module], name):
            delattr(sys.modules[module], name)
"""


@pytest.fixture
def without_posix_modules(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Path:
    shim = pytester.mkdir("no-posix-shim")
    text = BLOCKING_SITECUSTOMIZE.format(modules=POSIX_ONLY_MODULES, attributes=POSIX_ONLY_ATTRIBUTES)
    (shim / "sitecustomize.py").write_text(text, "utf-8")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(shim), os.environ.get("PYTHONPATH")])))
    return shim


def test_without_posix_modules_the_plugin_never_breaks_a_run(
    pytester: pytest.Pytester, without_posix_modules: Path
) -> None:
    pytester.makepyfile(
        test_one=f"""
import sys

def test_the_posix_modules_are_gone():
    import os, signal
    assert not hasattr(os, "killpg") and not hasattr(signal, "SIGKILL")
    for name in {POSIX_ONLY_MODULES!r}:
        assert sys.modules.get(name, None) is None
        try:
            __import__(name)
        except ImportError:
            continue
        raise AssertionError(name + " imported")

def test_the_plugin_is_loaded(pytestconfig):
    assert pytestconfig.pluginmanager.has_plugin("gym_eval")
"""
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)
    assert result.ret == 0


def test_without_posix_modules_using_gym_says_why_it_cannot_run(
    pytester: pytest.Pytester, without_posix_modules: Path
) -> None:
    pytester.makefile(".jsonl", data='{"id": "t1", "responses_create_params": {"input": "hi"}}\n')
    checkout = pytester.mkdir("some-gym")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", f"--gym-checkout={checkout}", "data.jsonl")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*cannot run NeMo Gym with this Python: fcntl, os.killpg are unavailable*"])
    assert "Traceback" not in result.stdout.str()
    provision = subprocess.run(
        [sys.executable, "-m", "pytest_gym_eval", "provision", "--dest", str(pytester.path / "gym")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert provision.returncode == 1
    assert "fcntl, os.killpg are unavailable" in provision.stderr
    assert not (pytester.path / "gym").exists()
