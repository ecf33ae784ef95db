"""The unit tier, the fast loop (``pytest tests/unit``): plain functions and classes of the package, no pytest
session and no child process. Tests that run pytest (``pytester``) or the stand-in ``gym`` are in tests/plugin."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.tiers import mark_folder

HANG_LIMIT = 300
"""Seconds after which a unit test fails as hung (pytest-timeout): a unit test takes well under 10 s even on a
loaded machine, and a test that waits forever would otherwise stop the fast loop without a word."""


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    mark_folder(items, Path(__file__).parent, pytest.mark.timeout(HANG_LIMIT))
