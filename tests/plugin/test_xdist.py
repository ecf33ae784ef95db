"""pytest-xdist: one Gym for the whole run, every rollout once, one summary. Against the stand-in ``gym``;
tests/real_gym/test_real_gym.py repeats the main checks against real Gym."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import xml.etree.ElementTree as ET

import pytest

from pytest_gym_eval.gym.processes import session_members
from tests.support.children import assert_interrupted, child_pytest_argv, outcomes
from tests.support.fakes import FakeGym

VOLATILE = (
    "gym.created", "gym.run_dir", "gym.head_server", "gym.model_url", "gym.startup_seconds", "gym.session_id",
)  # fmt: skip


def dataset(pytester: pytest.Pytester) -> str:
    rewards = {"a": 1.0, "b": 0.0, "c": 1.0, "d": 0.5, "e": "error", "f": 1.0}
    lines = []
    for task_id, reward in rewards.items():
        fake = {"failure": "agent_run_error"} if reward == "error" else {"reward": reward}
        lines.append(json.dumps({"id": task_id, "responses_create_params": {"input": f"Q {task_id}"}, "fake": fake}))
    (pytester.path / "mcqa.jsonl").write_text("\n".join(lines) + "\n")
    (pytester.path / "other.jsonl").write_text(lines[0] + "\n" + lines[1] + "\n")
    return "mcqa.jsonl"


def summary_section(result: pytest.RunResult) -> list[str]:
    start = next(i for i, line in enumerate(result.outlines) if "gym reward summary" in line)
    end = next(i for i, line in enumerate(result.outlines) if line.startswith("gym run directory"))
    return [line for line in result.outlines[start:end] if "wall time" not in line]


def suite_properties(path: str) -> dict[str, str]:
    root = ET.parse(path).getroot()
    props = root.find("testsuite").find("properties")  # type: ignore[union-attr]
    assert props is not None
    return {
        p.get("name", ""): p.get("value", "")
        for p in props
        if p.get("name") not in VOLATILE and not p.get("name", "").endswith("wall_time")
    }


XDIST_MODES = [
    ["-n", "2"],
    ["-n", "auto"],
    ["-n", "2", "--dist", "loadfile"],
    ["-n", "2", "--dist", "loadscope"],
    ["-n", "2", "--dist", "worksteal"],
]


@pytest.mark.parametrize("xdist_args", XDIST_MODES)
def test_xdist_gives_the_same_results_as_one_process(
    pytester: pytest.Pytester, fake_gym: FakeGym, xdist_args: list[str]
) -> None:
    name = dataset(pytester)
    common = [*fake_gym.args, name, "other.jsonl", "--gym-repeats=2", "-rA", "--gym-min-mean-reward=0.5",
              "--gym-agent=mcqa_simple_agent"]  # fmt: skip
    alone = pytester.runpytest_subprocess(*common, "--junitxml=alone.xml")
    calls_alone = len(fake_gym.calls())
    spread = pytester.runpytest_subprocess(*common, "--junitxml=spread.xml", *xdist_args)
    assert outcomes(spread) == outcomes(alone) and len(outcomes(alone)) == 18  # 16 rollouts and 2 gates
    assert spread.ret == alone.ret == 1  # an errored rollout fails a gated session
    assert summary_section(spread) == summary_section(alone)
    assert suite_properties(str(pytester.path / "spread.xml")) == suite_properties(str(pytester.path / "alone.xml"))
    calls = fake_gym.calls()[calls_alone:]
    assert [c["argv"][:2] for c in calls] == [["env", "start"], ["eval", "run"]]  # one Gym, one batch


def materialized_pairs(run_dir: object) -> list[tuple[int, int]]:
    path = run_dir / "gym-output" / "rollouts_materialized_inputs.jsonl"  # type: ignore[operator]
    return sorted((r["_ng_task_index"], r["_ng_rollout_index"]) for r in map(json.loads, path.read_text().splitlines()))


def test_every_pair_is_rolled_out_once(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    """Every repeat selected: one input row per task and --num-repeats 3, whichever worker collected."""
    name = dataset(pytester)
    result = pytester.runpytest_subprocess(*fake_gym.args, name, "--gym-repeats=3", "-n", "2", "--gym-run-dir=runs")
    (run_dir,) = (pytester.path / "runs").iterdir()
    rows = [json.loads(line) for line in (run_dir / "gym-input.jsonl").read_text().splitlines()]
    assert sorted(r["id"] for r in rows) == list("abcdef")
    assert sorted(r["_ng_task_index"] for r in rows) == list(range(6))
    (run,) = [c["argv"] for c in fake_gym.calls() if c["argv"][:2] == ["eval", "run"]]
    assert run[run.index("--num-repeats") + 1] == "3"
    assert materialized_pairs(run_dir) == [(task, repeat) for task in range(6) for repeat in range(3)]
    result.assert_outcomes(passed=9, failed=6, errors=3)  # a, c, f pass; b, d fail; e errors (3 repeats each)


def test_a_partial_selection_is_rolled_out_pair_by_pair(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    name = dataset(pytester)
    args = [*fake_gym.args, name, "--gym-repeats=3", "-n", "2", "--gym-run-dir=runs", "-k", "not r0"]
    result = pytester.runpytest_subprocess(*args)
    (run_dir,) = (pytester.path / "runs").iterdir()
    rows = [json.loads(line) for line in (run_dir / "gym-input.jsonl").read_text().splitlines()]
    assert sorted(r["id"] for r in rows) == sorted(t for t in "abcdef" for _ in range(2))
    assert sorted(r["_ng_task_index"] for r in rows) == list(range(12))
    (run,) = [c["argv"] for c in fake_gym.calls() if c["argv"][:2] == ["eval", "run"]]
    assert run[run.index("--num-repeats") + 1] == "1"
    result.assert_outcomes(passed=6, failed=4, errors=2)


def test_crashed_worker_leaves_nothing_running(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    name = dataset(pytester)
    pytester.makeconftest(
        """
import os
def pytest_runtest_call(item):
    if item.nodeid.endswith("c[r0]"):
        os._exit(3)
"""
    )
    result = pytester.runpytest_subprocess(*fake_gym.args, name, "-n", "2", "-rA")
    found = outcomes(result)
    assert found.pop("mcqa.jsonl::c[r0]") == "FAILED"
    assert "crashed" in result.stdout.str()
    assert found == {"mcqa.jsonl::a[r0]": "PASSED", "mcqa.jsonl::b[r0]": "FAILED", "mcqa.jsonl::d[r0]": "FAILED",
                     "mcqa.jsonl::e[r0]": "ERROR", "mcqa.jsonl::f[r0]": "PASSED"}  # fmt: skip
    starts = [c for c in fake_gym.calls() if c["argv"][:2] == ["env", "start"]]
    assert len(starts) == 1  # the replacement worker joined the same run
    assert [c["sid"] for c in fake_gym.calls() if session_members(int(c["sid"]))] == []


@pytest.mark.parametrize(
    ("sig", "group"),
    [(signal.SIGINT, True), (signal.SIGTERM, False), (signal.SIGTERM, True)],
    ids=["SIGINT-group", "SIGTERM-controller", "SIGTERM-group"],
)
def test_interrupted_xdist_run_leaves_nothing_running(
    pytester: pytest.Pytester, fake_gym: FakeGym, sig: signal.Signals, group: bool
) -> None:
    # Ctrl-C reaches the controller and the workers (the terminal's process group). SIGTERM reaches the
    # controller alone (timeout, a CI runner's cancel), or the whole group (kill -TERM -PGID): the workers then
    # die at once, and the controller, which owns Gym, still stops it.
    # Several quick rollouts before a held one: an xdist worker runs an item only once it knows the next one.
    rows = [{"id": f"quick{i}", "responses_create_params": {"input": str(i)}, "fake": {}} for i in range(6)]
    rows.append({"id": "held", "responses_create_params": {"input": "held"}, "fake": {"hold": True}})
    (pytester.path / "mcqa.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    process = subprocess.Popen(
        child_pytest_argv(*fake_gym.args, "-n", "2", "-v", "mcqa.jsonl"),
        cwd=pytester.path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"}, start_new_session=True,
    )  # fmt: skip
    assert process.stdout is not None
    watchdog = threading.Timer(120, lambda: os.killpg(process.pid, signal.SIGKILL))
    watchdog.start()
    try:
        for line in process.stdout:
            if "PASSED" in line:
                if group:
                    os.killpg(process.pid, sig)
                else:
                    process.send_signal(sig)
                break
        output = process.communicate(timeout=120)[0]
    finally:
        watchdog.cancel()
    assert_interrupted(process.returncode, output)
    assert [c["sid"] for c in fake_gym.calls() if session_members(int(c["sid"]))] == []


@pytest.mark.parametrize("xdist", [[], ["-n", "2"]], ids=["one-process", "xdist"])
def test_x_with_gates_exits_1_under_xdist_as_in_one_process(
    pytester: pytest.Pytester, fake_gym: FakeGym, xdist: list[str]
) -> None:
    """pytest-xdist ends a session -x stopped with its own KeyboardInterrupt: the exit status was 2 and the reason
    blamed Ctrl-C. With gates it is 1, the gates' cut-short verdict, as in one process; no resume command."""
    name = dataset(pytester)
    args = [*fake_gym.args, name, "-x", "--gym-min-mean-reward=0.1", "--gym-report=report.json", *xdist]
    result = pytester.runpytest_subprocess(*args)
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()[-3000:]
    session = json.loads((pytester.path / "report.json").read_text())["session"]
    assert session["exit_status"] == 1 and session["reason"].startswith("gym gates: INCONCLUSIVE"), session
    assert "resume this run" not in result.stdout.str()
