"""The JSON files the package ships (the report's schema) hold no key twice: a JSON reader keeps the last of two,
so an edit to the first would silently do nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "pytest_gym_eval"


def _no_duplicates(pairs: list[tuple[str, object]]) -> dict[str, object]:
    keys = [key for key, _ in pairs]
    twice = sorted({key for key in keys if keys.count(key) > 1})
    assert not twice, f"keys defined twice: {', '.join(twice)}"
    return dict(pairs)


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.json")), ids=lambda p: p.relative_to(PACKAGE).as_posix())
def test_no_key_is_defined_twice(path: Path) -> None:
    json.loads(path.read_text(encoding="utf-8"), object_pairs_hook=_no_duplicates)
