"""The project's own tests: the helpers live in ``tests/support/`` (importable, ``from tests.support.<module>
import ...``); each tier is a folder whose ``conftest.py`` marks its tests (``tests/unit`` is the fast loop).

Here only what every test needs: the fixtures of ``tests/support`` (``pytest_plugins``), a hermetic environment for
the pytest runs tests start, and how long each tier took (printed at the end, for .ci/run's log).
"""

from __future__ import annotations

import contextlib
import os

import pytest

from tests.support.children import CHILD_ADDOPTS, CI_ENVIRONMENT, restore_ctrl_c

# psycopg is imported once, here: an in-process pytester run drops from sys.modules what it imported, and a psycopg
# imported again has new exception classes while its compiled half still raises the old ones (no `except
# psycopg.Error` would catch them). Without the postgres extra its tests skip.
with contextlib.suppress(ImportError):
    import psycopg  # noqa: F401

pytest_plugins = ["tests.support.fakes", "tests.support.real_gym", "tests.support.live", "tests.support.browser"]


def pytest_configure(config: pytest.Config) -> None:
    """Child pytest processes (``subprocess``, not ``pytester``) inherit :data:`CHILD_ADDOPTS`; Ctrl-C works in
    every test (:func:`restore_ctrl_c`)."""
    addopts = os.environ.get("PYTEST_ADDOPTS", "")
    if CHILD_ADDOPTS not in addopts:
        os.environ["PYTEST_ADDOPTS"] = f"{addopts} {CHILD_ADDOPTS}".strip()
    restore_ctrl_c()


@pytest.fixture(autouse=True)
def _hermetic_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test's pytest runs (``pytester`` and child processes) print the same on a laptop and on CI: the
    :data:`CI_ENVIRONMENT` variables are unset for the test's duration (the outer run keeps them)."""
    for name in CI_ENVIRONMENT:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def pytester(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """pytest's ``pytester``, whose pytest runs load pytest-randomly and pytest-sugar (dev dependencies, for
    tests/plugin/test_plugins.py, that change the order and the output of every run they load into) only when asked
    for (``-p randomly``, ``-p sugar``). (Pytester clears ``PYTEST_ADDOPTS`` when it starts: set it after.)"""
    monkeypatch.setenv("PYTEST_ADDOPTS", CHILD_ADDOPTS)
    return pytester


def pytest_report_header() -> list[str]:
    checkout = os.environ.get("PYTEST_GYM_EVAL_CHECKOUT")
    return [f"real Gym checkout: {checkout or '(default provisioned)'}"]


# The README's command runs the tiers on two pytest-xdist workers (``-n 2``): the tests that start real Gym (the
# real-Gym, live and browser folders) are one unit of work, run one after another on one worker, while the other
# worker runs the compatibility matrix and the fast tier. (pytest-xdist's own ``--dist loadgroup`` cannot group
# them on pytest 9.2: it renames ``item._nodeid``, which pytest 9.2 no longer reads.)
SERIAL_FOLDERS = ("tests/real_gym/", "tests/live/", "tests/browser/")
# The fast tier run again on the oldest and the newest combination (tests/compat): one unit of work too, the second
# largest, so that pytest-xdist (which hands out the units with the most tests first) gives it to the other worker
# at the start and the fast tier's own tests fill both workers at the end.
COMPAT_FAST_TIER = "tests/compat/test_compat.py::test_the_fast_tier_passes_on_the_combination"


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    from xdist.scheduler import LoadScopeScheduling

    class TierScheduling(LoadScopeScheduling):
        """pytest-xdist's ``loadscope`` with one scope for every test that starts Gym, one for the compatibility
        matrix's two runs of the fast tier, one per test otherwise."""

        def _split_scope(self, nodeid: str) -> str:
            if nodeid.startswith(SERIAL_FOLDERS):
                return "real-gym"
            return "compat-fast-tier" if nodeid.startswith(COMPAT_FAST_TIER) else nodeid

    return TierScheduling(config, log)


# How long each tier took, for .ci/run's log: the summed durations of the items' phases (fixtures' set-up
# included), from the reports, which the pytest-xdist controller receives too.
_TIER_SECONDS: dict[str, float] = {}
# (marker, tier); the first match wins; the rest is the fast tier (tests/unit and tests/plugin)
_TIERS = (("browser", "browser"), ("live", "live"), ("gym", "real-Gym"), ("compat", "compat"))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    tier = next((name for mark, name in _TIERS if mark in report.keywords), "fast")
    _TIER_SECONDS[tier] = _TIER_SECONDS.get(tier, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _TIER_SECONDS:
        times = ", ".join(f"{tier} {seconds:.0f} s" for tier, seconds in sorted(_TIER_SECONDS.items()))
        terminalreporter.write_line(f"tier times: {times}")
