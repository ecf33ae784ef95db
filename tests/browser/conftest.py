"""The browser tier: every test here is marked ``browser`` (the HTML report in headless Chromium; fixture
``chromium`` in tests/support/browser.py). Those that open a page a real-Gym run wrote are marked ``gym`` too."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.tiers import mark_folder


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    mark_folder(items, Path(__file__).parent, pytest.mark.browser)
