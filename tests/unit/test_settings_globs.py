"""Which ``gym_dataset_settings`` globs match no file on disk (:func:`settings.matches_no_file`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_gym_eval.options import settings
from pytest_gym_eval.options.settings import matches_no_file


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "datasets" / "hard").mkdir(parents=True)
    (tmp_path / "datasets" / "quiz.jsonl").write_text("{}\n")
    (tmp_path / "datasets" / "hard" / "math.jsonl").write_text("{}\n")
    return tmp_path


@pytest.mark.parametrize(
    ("pattern", "unmatched"),
    [
        ("datasets/quiz.jsonl", False),
        ("datasets/quizz.jsonl", True),  # a typo in a plain path
        ("datasets/*.jsonl", False),
        ("datasets/**/*.jsonl", False),  # **/ also matches no folder
        ("datasets/**/math.jsonl", False),
        ("*/hard/*.jsonl", False),  # a wildcard first: the whole rootdir is searched
        ("datasets/*.json", True),
        ("dataset/*.jsonl", True),  # its folder is not there
        ("datasets/hard", True),  # a folder is no dataset
    ],
)
def test_globs_that_match_no_file(root: Path, pattern: str, unmatched: bool) -> None:
    assert matches_no_file(pattern, root) is unmatched


def test_absolute_and_outside_globs(root: Path) -> None:
    inner = root / "datasets"
    assert not matches_no_file(str(root / "datasets" / "*.jsonl"), inner)
    assert not matches_no_file("../quiz.jsonl", inner / "hard")
    assert matches_no_file(str(root / "nowhere" / "*.jsonl"), inner)


def test_a_search_that_reaches_its_bound_counts_as_a_match(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(settings, "MAX_FILES_SEARCHED", 1)
    assert not matches_no_file("datasets/**/*.nothing", root)  # gave up after one file: no false alarm
    monkeypatch.setattr(settings, "MAX_FILES_SEARCHED", 100)
    assert matches_no_file("datasets/**/*.nothing", root)
