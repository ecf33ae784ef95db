"""The real-Gym tier: every test here is marked ``gym`` (a provisioned Gym 0.7.0; fixtures in
tests/support/real_gym.py). Run it alone with ``-m "gym and not live"``, under the shared lock on a shared machine."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.tiers import mark_folder


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    mark_folder(items, Path(__file__).parent, pytest.mark.gym)
