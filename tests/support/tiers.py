"""The tiers' marks come from their folders: each tier folder's ``conftest.py`` calls :func:`mark_folder`."""

from __future__ import annotations

from pathlib import Path

import pytest


def mark_folder(items: list[pytest.Item], folder: Path, *marks: pytest.MarkDecorator) -> None:
    """Add ``marks`` to every item collected from a file under ``folder``.

    A folder's ``pytest_collection_modifyitems`` sees every item of the session, not only its own: hence the
    path check. Call it from a ``tryfirst`` hook so that ``-m`` (pytest's own hook) selects on the marks."""
    for item in items:
        if item.path.is_relative_to(folder):
            for mark in marks:
                item.add_marker(mark)
