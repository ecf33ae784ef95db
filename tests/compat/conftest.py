"""The compatibility tier: every test here is marked ``compat`` (the built wheel installed into fresh venvs; needs the
package index or uv's cache)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.tiers import mark_folder


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    mark_folder(items, Path(__file__).parent, pytest.mark.compat)
