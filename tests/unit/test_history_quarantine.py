"""The quarantine file: parsing, errors naming file and line, expiry, and the split into gated and quarantined."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from pathlib import Path

import pytest

from pytest_gym_eval.history.quarantine import QuarantineError, parse_quarantine, read_quarantine, split_gated

TODAY = date(2026, 12, 2)
TEXT = """\
# dataset      task   expires      reason
mcqa.jsonl     17     2027-01-31   flips between A and C since the prompt change (#40)

*              smoke  2026-12-02   the fixture server is being replaced   # last day today
mcqa.jsonl     3      2026-12-01   expired yesterday
"""


@dataclass(frozen=True)
class Result:
    dataset: str
    task_id: str
    reward: float


def test_entries_with_reasons_comments_and_the_expiry_day_itself() -> None:
    quarantine = parse_quarantine(TEXT, source="gym-quarantine.txt", today=TODAY)
    assert [(e.dataset, e.task_id, e.expires, e.reason, e.source) for e in quarantine.active] == [
        (
            "mcqa.jsonl",
            "17",
            date(2027, 1, 31),
            "flips between A and C since the prompt change (#40)",
            "gym-quarantine.txt:2",
        ),
        ("*", "smoke", TODAY, "the fixture server is being replaced", "gym-quarantine.txt:4"),
    ]
    assert [(e.task_id, e.source) for e in quarantine.expired] == [("3", "gym-quarantine.txt:5")]


def test_split_keeps_order_and_leaves_expired_entries_gated() -> None:
    quarantine = parse_quarantine(TEXT, source="q.txt", today=TODAY)
    results = [
        Result("mcqa.jsonl", "17", 0.0),
        Result("mcqa.jsonl", "3", 0.0),  # expired: gated again
        Result("other.jsonl", "smoke", 0.0),  # "*" matches every dataset
        Result("other.jsonl", "17", 1.0),  # 17 is quarantined in mcqa.jsonl only
        Result("mcqa.jsonl", "17", 1.0),
    ]
    gated, quarantined = split_gated(results, quarantine)
    assert gated == [results[1], results[3]]
    assert quarantined == [results[0], results[2], results[4]]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("mcqa.jsonl 17 2027-01-31", "the reason is required"),
        ("mcqa.jsonl 17 31.01.2027 flaky", "expiry '31.01.2027' is not a date YYYY-MM-DD"),
        ("mcqa.jsonl 17", "expected 'DATASET TASK_ID YYYY-MM-DD REASON'"),
    ],
)
def test_a_malformed_line_names_file_and_line(line: str, message: str) -> None:
    with pytest.raises(QuarantineError) as raised:
        parse_quarantine(f"# header\n\n{line}\n", source="ci/gym-quarantine.txt", today=TODAY)
    assert str(raised.value).startswith("ci/gym-quarantine.txt:3: ")
    assert message in str(raised.value)


def test_a_task_listed_twice_names_both_lines() -> None:
    text = "mcqa.jsonl 17 2027-01-31 one\nmcqa.jsonl 17 2027-02-28 two\n"
    with pytest.raises(QuarantineError, match=r"^q\.txt:2: task '17' of mcqa\.jsonl is already quarantined on line 1"):
        parse_quarantine(text, source="q.txt", today=TODAY)


def test_reading_a_missing_file_names_it(tmp_path: Path) -> None:
    with pytest.raises(QuarantineError, match=r"missing\.txt: cannot read the quarantine file"):
        read_quarantine(tmp_path / "missing.txt", today=TODAY)


def test_reading_a_file(tmp_path: Path) -> None:
    path = tmp_path / "gym-quarantine.txt"
    path.write_text(TEXT, encoding="utf-8")
    quarantine = read_quarantine(path, today=TODAY)
    assert quarantine.entry_for("mcqa.jsonl", "17") is not None
    assert quarantine.entry_for("mcqa.jsonl", "3") is None
    assert quarantine.active[0].source == f"{path}:2"
