"""Resuming a run (``--gym-resume=RUN_DIR``): the manifest every run writes, reusing scored rollouts, rolling
out the rest, mismatches as usage errors, and the command printed after Ctrl-C or SIGTERM; against the stand-in
``gym`` (tests/support/fake_gym.py). The same with real Gym: tests/real_gym/test_warm_real_gym.py.
"""

from __future__ import annotations

import hashlib
import json
import shlex
import shutil
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from pytest_gym_eval.gym.resume import RESUMED_FROM_KEY, pytest_program, resume_command
from tests.support.children import PYTEST_INTERRUPT_CRASH, assert_interrupted, interrupt_once_reported
from tests.support.fakes import FakeGym

ROW = {"responses_create_params": {"input": [{"role": "user", "content": "ping"}]}}


def write_dataset(folder: Path, fakes: dict[str, dict[str, Any]] | None = None, tasks: int = 3) -> str:
    """``mcqa.jsonl`` with tasks ``t0``..; ``fakes`` gives a task the stand-in's behaviour (``{"failure": ...}``)."""
    rows = [
        {"id": f"t{i}", **ROW, **({"fake": fakes[f"t{i}"]} if fakes and f"t{i}" in fakes else {})} for i in range(tasks)
    ]
    (folder / "mcqa.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    return "mcqa.jsonl"


def snapshot(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` with the sha256 of its content (and every link with its target)."""
    found = {}
    for path in sorted(folder.rglob("*")):
        if path.is_symlink():
            found[str(path)] = f"-> {path.readlink()}"
        elif path.is_file():
            found[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def run_dirs(pytester: pytest.Pytester, folder: str = "runs") -> list[Path]:
    return sorted((pytester.path / folder).iterdir(), key=lambda p: p.stat().st_mtime)


def input_rows(run_dir: Path) -> list[str]:
    """``task[rN]`` of each row of the Gym input a run wrote (what Gym rolled out)."""
    manifest = json.loads((run_dir / "manifest.json").read_text())
    by_stamp = {stamp: f"{task}[r{repeat}]" for stamp, _, task, repeat, _ in manifest["rollouts"]}
    path = run_dir / "gym-input.jsonl"
    if not path.exists():
        return []
    return sorted(by_stamp[json.loads(line)["_ng_task_index"]] for line in path.read_text().splitlines())


def report(pytester: pytest.Pytester, name: str = "report.json") -> dict[str, Any]:
    data: dict[str, Any] = json.loads((pytester.path / name).read_text())
    return data


def test_every_run_writes_a_manifest_of_what_it_asked_for(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    dataset = write_dataset(pytester.path)
    pytester.runpytest(*fake_gym.args, dataset, "--gym-repeats=2", "--gym-run-dir=runs").assert_outcomes(passed=6)
    (run_dir,) = run_dirs(pytester)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["format"] == 1 and manifest["resumed_from"] is None
    assert {"--gym-repeats=2", "--gym-run-dir=runs", dataset} <= set(manifest["command"]["args"])
    assert sorted((task, repeat) for _, _, task, repeat, _ in manifest["rollouts"]) == [
        (f"t{i}", r) for i in range(3) for r in range(2)
    ]
    assert {agent for *_, agent in manifest["rollouts"]} == {"mcqa_simple_agent"}
    assert len(manifest["tasks"]) == 3 and all(len(digest) == 64 for _, _, digest in manifest["tasks"])
    configuration = manifest["configuration"]
    assert configuration["gym_checkout"] == str(fake_gym.checkout)
    assert configuration["model"]["replay"] == [hashlib.sha256(fake_gym.recording.read_bytes()).hexdigest()]


def test_resuming_a_finished_run_reuses_every_rollout_and_starts_no_gym(
    pytester: pytest.Pytester, fake_gym: FakeGym
) -> None:
    dataset = write_dataset(pytester.path)
    args = [*fake_gym.args, dataset, "--gym-repeats=2", "--gym-run-dir=runs"]
    pytester.runpytest(*args, "--gym-report=first.json").assert_outcomes(passed=6)
    (old,) = run_dirs(pytester)
    before = snapshot(old)
    calls = len(fake_gym.calls())

    result = pytester.runpytest(*args, f"--gym-resume={old}", "--gym-report=report.json")
    result.assert_outcomes(passed=6)
    result.stdout.fnmatch_lines([f"gym: resuming {old}: 6 of 6 rollouts reused, 0 to roll out"])
    assert len(fake_gym.calls()) == calls  # no `gym env start`, no `gym eval run`
    assert snapshot(old) == before
    new = run_dirs(pytester)[-1]
    rollouts = report(pytester)["rollouts"]
    assert sorted(r["nodeid"] for r in rollouts) == sorted(
        r["nodeid"] for r in report(pytester, "first.json")["rollouts"]
    )
    for rollout in rollouts:
        path, line = rollout["record"].rsplit(":", 1)
        assert Path(path) == new / "resumed" / "rollouts.jsonl"
        record = json.loads(Path(path).read_text().splitlines()[int(line) - 1])
        assert record[RESUMED_FROM_KEY].startswith(str(old / "gym-output" / "rollouts.jsonl") + ":")
    assert report(pytester)["meta"]["resumed_from"] == str(old)
    # The first run handed Gym whole tasks (one row per task, --num-repeats 2); the resuming one reads its
    # records by that mode, and hands Gym one row per rollout.
    assert json.loads((old / "manifest.json").read_text())["row_repeats"] == 2
    assert json.loads((new / "manifest.json").read_text())["row_repeats"] == 1


def test_resume_rolls_out_only_what_is_missing_or_errored(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    dataset = write_dataset(pytester.path, {"t1": {"failure": "agent_run_error"}})
    args = [*fake_gym.args, dataset, "--gym-run-dir=runs"]
    pytester.runpytest(*args, "--gym-repeats=2", "-k", "t0 or t1").assert_outcomes(passed=2, errors=2)
    (old,) = run_dirs(pytester)
    before = snapshot(old)

    # t0 was scored: reused. t1 errored and t2 was never selected: rolled out. r2 is a new repeat of each.
    result = pytester.runpytest(*args, "--gym-repeats=3", f"--gym-resume={old}", "--gym-report=report.json", "-rA")
    result.assert_outcomes(passed=6, errors=3)
    result.stdout.fnmatch_lines([f"gym: resuming {old}: 2 of 9 rollouts reused, 7 to roll out"])
    new = run_dirs(pytester)[-1]
    assert input_rows(new) == sorted(["t0[r2]", *(f"{t}[r{r}]" for t in ("t1", "t2") for r in range(3))])
    assert snapshot(old) == before
    rollouts = {r["nodeid"]: r for r in report(pytester)["rollouts"]}
    assert len(rollouts) == 9
    assert {n for n, r in rollouts.items() if "resumed" in r["record"]} == {"mcqa.jsonl::t0[r0]", "mcqa.jsonl::t0[r1]"}


def test_a_resumed_run_can_be_resumed_again(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    dataset = write_dataset(pytester.path)
    args = [*fake_gym.args, dataset, "--gym-run-dir=runs"]
    pytester.runpytest(*args, "-k", "t0").assert_outcomes(passed=1)
    (first,) = run_dirs(pytester)
    pytester.runpytest(*args, "-k", "t0 or t1", f"--gym-resume={first}").assert_outcomes(passed=2)
    second = run_dirs(pytester)[-1]
    result = pytester.runpytest(*args, f"--gym-resume={second}")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines([f"gym: resuming {second}: 2 of 3 rollouts reused, 1 to roll out"])
    assert input_rows(run_dirs(pytester)[-1]) == ["t2[r0]"]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ("recording", "this session's Gym configuration differs from that run's: the policy model: replay [[]sha256 *"),
        ("row", "the row of mcqa.jsonl::t1 changed since that run*"),
        ("dataset", "none of this session's tasks was in that run (its datasets: mcqa.jsonl)*"),
        ("checkout", "*the Gym checkout: '*' then, '*' now*"),
    ],
)
def test_a_mismatch_is_a_usage_error_naming_what_differs(
    pytester: pytest.Pytester, fake_gym: FakeGym, change: str, message: str
) -> None:
    dataset = write_dataset(pytester.path)
    pytester.runpytest(*fake_gym.args, dataset, "--gym-run-dir=runs").assert_outcomes(passed=3)
    (old,) = run_dirs(pytester)
    args = [*fake_gym.args, dataset, "--gym-run-dir=runs", f"--gym-resume={old}"]
    if change == "recording":
        fake_gym.recording.write_text(fake_gym.recording.read_text() + "\n")
    elif change == "row":
        rows = (pytester.path / dataset).read_text().replace('"id": "t1", ', '"id": "t1", "hint": "new", ')
        (pytester.path / dataset).write_text(rows)
    elif change == "dataset":
        (pytester.path / "other.jsonl").write_text((pytester.path / dataset).read_text())
        args = [*fake_gym.args, "other.jsonl", "--gym-agent=mcqa_simple_agent", f"--gym-resume={old}"]
    else:
        import shutil

        moved = shutil.copytree(fake_gym.checkout, pytester.path / "another-checkout", symlinks=True)
        args = [f"--gym-checkout={moved}", *fake_gym.args[1:], dataset, f"--gym-resume={old}"]
    calls = len(fake_gym.calls())
    result = pytester.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: --gym-resume={old}: {message}"])
    assert len(fake_gym.calls()) == calls


def test_resume_from_a_folder_that_is_no_run_is_a_usage_error(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    dataset = write_dataset(pytester.path)
    (pytester.path / "empty").mkdir()
    result = pytester.runpytest(*fake_gym.args, dataset, "--gym-resume=empty")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --gym-resume: */empty has no manifest.json: it is no run directory of *"])
    result = pytester.runpytest(*fake_gym.args, dataset, "--gym-resume=missing")
    result.stderr.fnmatch_lines(["ERROR: --gym-resume: no such run directory: */missing"])


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_an_interrupted_run_prints_the_command_that_resumes_it(
    pytester: pytest.Pytester, fake_gym: FakeGym, monkeypatch: pytest.MonkeyPatch, sig: signal.Signals
) -> None:
    dataset = write_dataset(pytester.path, {"t2": {"hold": "FAKE_HOLD"}})  # t2 waits while FAKE_HOLD is set
    monkeypatch.setenv("FAKE_HOLD", "1")
    args = [*fake_gym.args, dataset, "--gym-run-dir=runs", "-v", "-p", "no:randomly"]
    for _ in range(3):
        returncode, output = interrupt_once_reported(
            pytester.path, args, lambda line: "t1[r0] PASSED" in line, sig, timeout=120
        )
        assert_interrupted(returncode, output)
        if not all(text in output for text in PYTEST_INTERRUPT_CRASH):
            break
        # pytest's own crash while reporting the interrupt (a pytest bug, about once in 300 interrupts) can end
        # the session before its terminal summary: interrupt a fresh run.
        shutil.rmtree(pytester.path / "runs")
    (old,) = run_dirs(pytester)
    command = next(line for line in output.splitlines() if line.startswith("gym: resume this run with: "))
    argv = shlex.split(command.split(": ", 2)[2])
    assert argv[-1] == f"--gym-resume={old}" and argv[-1 - len(args) : -1] == args

    monkeypatch.delenv("FAKE_HOLD")
    resumed = subprocess.run(argv, cwd=pytester.path, capture_output=True, text=True, timeout=120)
    assert resumed.returncode == 0, resumed.stdout[-3000:]
    assert f"gym: resuming {old}: 2 of 3 rollouts reused, 1 to roll out" in resumed.stdout
    assert "3 passed" in resumed.stdout.splitlines()[-1]


def test_the_resume_command_replaces_an_earlier_resume() -> None:
    args = ["-x", "--gym-resume=/runs/a", "data.jsonl", "--gym-resume", "/runs/b", "-k", "q 1"]
    assert (
        resume_command(args, Path("/runs/c d"), ["pytest"]) == "pytest -x data.jsonl -k 'q 1' '--gym-resume=/runs/c d'"
    )
    assert pytest_program("/usr/lib/python3/site-packages/pytest/__main__.py", "/venv/bin/python") == [
        "/venv/bin/python", "-m", "pytest",
    ]  # fmt: skip
    assert pytest_program("/nowhere/bin/pytest", "python") == ["/nowhere/bin/pytest"]


def test_resume_under_xdist(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    dataset = write_dataset(pytester.path)
    args = [*fake_gym.args, dataset, "--gym-run-dir=runs"]
    pytester.runpytest(*args, "-k", "t0 or t2").assert_outcomes(passed=2)
    (old,) = run_dirs(pytester)
    result = pytester.runpytest_subprocess(*args, "-n", "2", f"--gym-resume={old}")
    result.assert_outcomes(passed=3)
    assert input_rows(run_dirs(pytester)[-1]) == ["t1[r0]"]
    fake_gym.recording.write_text(fake_gym.recording.read_text() + "\n")
    mismatch = pytester.runpytest_subprocess(*args, "-n", "2", f"--gym-resume={old}")
    assert mismatch.ret == pytest.ExitCode.USAGE_ERROR
    mismatch.stdout.fnmatch_lines(["*--gym-resume=*: this session's Gym configuration differs from that run's*"])
