"""The live-model tier: every test here is marked ``live`` and ``gym`` (a real local model evaluated by real Gym;
fixture ``local_model`` in tests/support/live.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.tiers import mark_folder


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    mark_folder(items, Path(__file__).parent, pytest.mark.gym, pytest.mark.live)
