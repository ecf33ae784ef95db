"""Unit tests of the leaf file helpers (:mod:`pytest_gym_eval.core.files`)."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import jsonlines
import pytest

from pytest_gym_eval.core.files import LineFollower, iter_json_lines, write_json_atomic, write_text_atomic


def test_write_text_atomic_mode_is_set_whatever_the_umask(tmp_path: Path) -> None:
    previous = os.umask(0o077)
    try:
        shared = write_text_atomic(tmp_path / "shared.json", "{}", mode=0o644)
    finally:
        os.umask(previous)
    private = write_json_atomic(tmp_path / "sub" / "private.json", {"key": 1}, mode=0o600)
    assert stat.S_IMODE(shared.stat().st_mode) == 0o644
    assert stat.S_IMODE(private.stat().st_mode) == 0o600
    assert json.loads(private.read_text(encoding="utf-8")) == {"key": 1}
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["private.json", "shared.json", "sub"]


def test_write_text_atomic_without_mode_follows_the_umask(tmp_path: Path) -> None:
    previous = os.umask(0o027)
    try:
        path = write_text_atomic(tmp_path / "plain.txt", "text")
    finally:
        os.umask(previous)
    assert stat.S_IMODE(path.stat().st_mode) == 0o640


def test_write_text_atomic_replaces_a_private_file_keeping_it_private(tmp_path: Path) -> None:
    path = tmp_path / "entry.json"
    write_json_atomic(path, {"n": 1}, mode=0o600)
    write_json_atomic(path, {"n": 2}, mode=0o600)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert json.loads(path.read_text(encoding="utf-8")) == {"n": 2}


def test_iter_json_lines_gives_physical_line_numbers_past_blank_lines(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_bytes(b'{"a": 1}\n\n   \n[2]\n"three"')
    assert list(iter_json_lines(path)) == [(1, {"a": 1}), (4, [2]), (5, "three")]


def test_iter_json_lines_names_the_file_and_line_of_a_bad_line(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_bytes(b'{"a": 1}\n\n{"a": \n{"a": 3}\n')
    values = iter_json_lines(path)
    assert next(values) == (1, {"a": 1})
    with pytest.raises(jsonlines.InvalidLineError) as caught:
        next(values)
    assert caught.value.lineno == 3
    assert str(caught.value).startswith(f"{path}: line is not JSON: ")


def test_iter_json_lines_skip_invalid_passes_over_bad_lines(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(b'{"a": 1}\nnot json\n\xff\xfe\n{"a": 4}\n')
    assert list(iter_json_lines(path, skip_invalid=True)) == [(1, {"a": 1}), (4, {"a": 4})]


def test_iter_json_lines_growing_leaves_out_a_half_written_last_line(tmp_path: Path) -> None:
    path = tmp_path / "rollouts.jsonl"
    path.write_bytes(b'{"a": 1}\n{"a": 2}\n{"a": 3')
    assert list(iter_json_lines(path, growing=True)) == [(1, {"a": 1}), (2, {"a": 2})]
    path.write_bytes(b'{"a": 1}\n{"a": 2}\n12')  # valid JSON so far, but the writer may be mid-number
    assert list(iter_json_lines(path, growing=True)) == [(1, {"a": 1}), (2, {"a": 2})]
    path.write_bytes(b'{"a": 1}\n{"a": 3')
    with pytest.raises(jsonlines.InvalidLineError) as caught:  # a finished file: a cut last line is an error
        list(iter_json_lines(path))
    assert caught.value.lineno == 2


def test_iter_json_lines_raises_oserror_for_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        list(iter_json_lines(tmp_path / "missing.jsonl"))


def test_line_follower_hands_out_each_complete_line_once(tmp_path: Path) -> None:
    path = tmp_path / "rollouts.jsonl"
    follower = LineFollower(path)
    assert list(follower.new_lines()) == []  # not there yet
    path.write_bytes(b'{"a": 1}\n\n{"a": ')
    assert list(follower.new_lines()) == [(1, 0, b'{"a": 1}')]
    assert list(follower.new_lines()) == []
    with path.open("ab") as handle:
        handle.write(b'2}\n{"a": 3}\n')
    assert list(follower.new_lines()) == [(3, 10, b'{"a": 2}'), (4, 19, b'{"a": 3}')]


def test_line_follower_starts_over_when_the_file_is_replaced(tmp_path: Path) -> None:
    path = tmp_path / "waves.jsonl"
    path.write_bytes(b"[1]\n[2]\n")
    follower = LineFollower(path)
    assert [line for line, _, _ in follower.new_lines()] == [1, 2]
    replacement = tmp_path / "new.jsonl"
    replacement.write_bytes(b"[9]\n")
    os.replace(replacement, path)
    assert list(follower.new_lines()) == [(1, 0, b"[9]")]
