"""``python -m pytest_gym_eval history``: each view on a SQLite history of five runs, and its errors."""

from __future__ import annotations

import csv
import sqlite3
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

import pytest

from pytest_gym_eval.__main__ import main
from pytest_gym_eval.history.backends import open_store
from pytest_gym_eval.history.store import RolloutRecord, RunRecord

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=timezone.utc)


@pytest.fixture
def history(tmp_path: Path) -> Path:
    """Five runs of mcqa.jsonl (tasks 1-3, one rollout each): task 2 alternates right/wrong, task 3 failed in the
    last two runs; the last run has an error on task 1."""
    path = tmp_path / "gym-history.db"
    with open_store(path) as store:
        for index in range(5):
            statuses = {
                "1": "error" if index == 4 else "passed",
                "2": "passed" if index % 2 == 0 else "failed",
                "3": "passed" if index < 3 else "failed",
            }
            rollouts = [
                RolloutRecord(
                    "mcqa.jsonl", task, 0, "policy-a", status, {"passed": 1.0, "failed": 0.0}.get(status), {"k": 1}
                )
                for task, status in statuses.items()
            ]
            run = RunRecord(T0 + timedelta(hours=index), "policy-a", "0.7.0", {"mcqa.jsonl": "d1"}, f"{index:040x}")
            store.append_run(run, rollouts)
    return path


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    status = main(["history", *args])
    out, err = capsys.readouterr()
    return status, out, err


def test_runs_lists_every_run_oldest_first(history: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = _run(capsys, str(history))
    lines = out.splitlines()
    assert status == 0
    assert lines[1].split()[:6] == ["1", "2026-11-30", "12:00:00", "00000000", "0.7.0", "3"]
    assert lines[5].split()[0] == "5"
    assert lines[-1] == f"5 runs in {history}"


def test_flaky_names_the_alternating_task_with_its_evidence(history: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = _run(capsys, str(history), "flaky")
    assert status == 0
    assert out.splitlines() == [
        "mcqa.jsonl::2  flaky  PFPFP  pass rate 0.60 [0.23, 0.88]"
        "  (outcomes P F P F P over 5 runs, 4 changes, passed 3 of 5 rollouts)",
        "1 flaky of 3 tasks (last 20 runs)",
    ]


def test_task_shows_its_label_and_each_run(history: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = _run(capsys, str(history), "task", "3")
    lines = out.splitlines()
    assert status == 0
    assert lines[0].startswith("mcqa.jsonl::3  regressed  PPPFF")
    assert "failing since run 4" in lines[0]
    assert [line.split()[4] for line in lines[1:]] == ["pass", "pass", "pass", "fail", "fail"]
    status, _, err = _run(capsys, str(history), "task", "99")
    assert status == 2
    assert "error: no scored rollout of task '99'" in err


def test_a_shorter_window_forgets_older_runs(history: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = _run(capsys, str(history), "--last", "2", "task", "2")
    # Runs 4-5 only: F then P, one change: "fixed", though over five runs it is flaky.
    assert out.splitlines()[0].startswith("mcqa.jsonl::2  fixed  FP")


def test_quarantined_lists_active_and_warns_of_expired(
    history: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    quarantine = tmp_path / "gym-quarantine.txt"
    today = datetime.now(timezone.utc).date()
    quarantine.write_text(
        f"mcqa.jsonl 2 {today + timedelta(days=30)} flips between answers\n"
        f"mcqa.jsonl 3 {date(2026, 1, 1)} an old quarantine\n"
    )
    status, out, err = _run(capsys, str(history), "quarantined", "--file", str(quarantine))
    lines = out.splitlines()
    assert status == 0
    assert lines[0] == f"mcqa.jsonl::2  until {today + timedelta(days=30)}  flips between answers  [flaky PFPFP]"
    assert lines[1] == "mcqa.jsonl::3  EXPIRED 2026-01-01 (gated again)  an old quarantine"
    assert lines[2] == f"1 quarantined, 1 expired ({quarantine})"
    assert f"warning: {quarantine}:2: quarantine of task '3' expired on 2026-01-01" in err


def test_a_malformed_quarantine_file_is_an_error_naming_file_and_line(
    history: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    quarantine = tmp_path / "q.txt"
    quarantine.write_text("mcqa.jsonl 2 soon flaky\n")
    status, _, err = _run(capsys, str(history), "quarantined", "--file", str(quarantine))
    assert status == 2
    assert f"history: error: {quarantine}:1: expiry 'soon'" in err


def test_drift_shows_each_run_and_needs_enough_runs(history: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = _run(capsys, str(history), "drift")
    lines = out.splitlines()
    assert status == 0
    assert lines[0] == "mcqa.jsonl: ok: 5 runs: the alarm needs 5 runs to learn the scale and one more (1 to go)"
    assert lines[1].split()[:4] == ["run", "1", "mean", "1.000"]
    assert len(lines) == 6


def test_export_writes_every_rollout_as_csv(history: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "out" / "history.csv"
    status, out, _ = _run(capsys, str(history), "export", "--csv", str(target))
    assert status == 0
    assert out.strip() == f"wrote 15 rollouts to {target}"
    rows = list(csv.DictReader(target.open()))
    assert len(rows) == 15
    assert rows[0]["run_id"] == "1"
    assert rows[0]["digest"] == "d1"
    assert rows[0]["reward"] == "1.0"
    assert rows[0]["metrics"] == '{"k": 1}'
    assert (rows[0]["model"], rows[0]["policy"]) == ("policy-a", "")
    error_row = next(row for row in rows if row["status"] == "error")
    assert (error_row["run_id"], error_row["task_id"], error_row["reward"]) == ("5", "1", "")


def test_a_missing_file_is_not_created(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "none.db"
    status, _, err = _run(capsys, str(missing))
    assert status == 2
    assert not missing.exists()
    assert err.startswith(f"python -m pytest_gym_eval history: error: no history at {missing}")


def test_an_unreachable_database_is_one_line_without_the_password(capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = _run(capsys, "postgresql://gym:hunter2@127.0.0.1:1/evals", "runs")
    assert status == 2
    assert "hunter2" not in err
    assert len(err.strip().splitlines()) == 1
    assert err.startswith("python -m pytest_gym_eval history: error: history postgresql://gym:***@127.0.0.1:1/evals")


def test_a_sqlite_file_that_is_no_history_is_an_error_and_gets_no_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "app.db"
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE users (name TEXT)")
    connection.close()
    before = path.read_bytes()
    status, out, err = _run(capsys, str(path), "runs")
    assert (status, out) == (2, "")
    assert f"history: error: history {path}: not a pytest-gym-eval history (no schema_version table)" in err
    assert path.read_bytes() == before  # reading wrote nothing: no table, no journal mode switched
    assert sorted(p.name for p in tmp_path.iterdir()) == ["app.db"]


def test_a_quarantine_line_that_matches_no_stored_task_is_a_warning(
    history: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    quarantine = tmp_path / "gym-quarantine.txt"
    quarantine.write_text(
        "mcqa.jsonl 2 2999-01-01 known flake\n"
        "data/mcqa.jsonl 3 2999-01-01 the dataset as written elsewhere\n"
        "mcqa.jsonl 17 2999-01-01 a task no run has\n"
        "* 2 2999-01-01 any dataset's task 2\n"
    )
    status, _, err = _run(capsys, str(history), "quarantined", "--file", str(quarantine))
    assert status == 0
    warnings = [line for line in err.splitlines() if "matches nothing" in line]
    assert warnings == [
        f"python -m pytest_gym_eval history: warning: {quarantine}:2: quarantine of task '3' of data/mcqa.jsonl "
        "matches nothing: no dataset is named 'data/mcqa.jsonl' (datasets: mcqa.jsonl)",
        f"python -m pytest_gym_eval history: warning: {quarantine}:3: quarantine of task '17' of mcqa.jsonl "
        "matches nothing: no task '17' in mcqa.jsonl",
    ]
