"""Reading known lines of Gym's records file in one pass (:func:`records.records_at`, ``read_record_line``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_gym_eval.outcomes.records import read_record_line, records_at


def test_known_lines_are_read_in_file_order_and_only_they_are_parsed(tmp_path: Path) -> None:
    path = tmp_path / "rollouts.jsonl"
    path.write_text(
        json.dumps({"n": 1}) + "\n" + "not JSON, never parsed\n" + "[3]\n" + json.dumps({"n": 4}) + "\n" + "{broken\n"
    )
    assert list(records_at(path, [4, 1, 3, 9])) == [(1, {"n": 1}), (3, {}), (4, {"n": 4})]  # 9: past the end
    assert list(records_at(path, [])) == []
    assert read_record_line(path, 4) == {"n": 4}
    assert read_record_line(path, 9) == {}
    with pytest.raises(ValueError):
        read_record_line(path, 2)
    with pytest.raises(ValueError):
        list(records_at(path, [1, 5]))
