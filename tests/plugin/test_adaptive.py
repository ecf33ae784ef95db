"""``--gym-adaptive`` end to end with the stand-in ``gym`` (the paths real Gym cannot be made to take on demand:
errors, rewards outside the range, uneven selections, pytest-xdist). The real-Gym proof is
tests/real_gym/test_adaptive_real_gym.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_gym_eval.gym.waves import GroupPolicy, WaveLog, WavePlanner, rectangular
from pytest_gym_eval.stats.gates import Gate
from pytest_gym_eval.tasks.plan import RunPlan
from tests.support.fakes import FakeGym


def rows(rewards: list[float], **fake: object) -> str:
    return "".join(
        json.dumps({"id": f"t{i}", "responses_create_params": {"input": "q"}, "fake": {"reward": r, **fake}}) + "\n"
        for i, r in enumerate(rewards)
    )


def run(pytester: pytest.Pytester, fake_gym: FakeGym, data: str, *args: str) -> pytest.RunResult:
    (pytester.path / "mcqa.jsonl").write_text(data)
    return pytester.runpytest(*fake_gym.args, "mcqa.jsonl", "--gym-run-dir=runs", "-rs", *args)


def wave_log(pytester: pytest.Pytester) -> list[dict[str, Any]]:
    (run_dir,) = sorted((pytester.path / "runs").iterdir())
    return [json.loads(line) for line in (run_dir / "waves.jsonl").read_text().splitlines()]


def eval_runs(fake_gym: FakeGym) -> int:
    return sum(1 for call in fake_gym.calls() if "eval" in call["argv"] and "run" in call["argv"])


def test_decided_gates_skip_the_rest_with_the_reason(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    result = run(
        pytester, fake_gym, rows([1.0] * 12), "--gym-adaptive", "--gym-repeats=8", "--gym-min-mean-reward=0.5",
        "--gym-report=report.json",
    )  # fmt: skip
    assert result.ret == 0
    result.assert_outcomes(passed=12 * 2 + 1, skipped=12 * 6)
    result.stdout.fnmatch_lines(
        ["SKIPPED * not needed: mean-reward gate decided PASS after 2 repeats, lower bound 0.* >= 0.50"]
    )
    assert eval_runs(fake_gym) == 1
    (summary,) = json.loads((pytester.path / "report.json").read_text())["datasets"]
    assert summary["adaptive"]["skipped"] == 72 and summary["adaptive"]["saving"] == 0.75
    assert summary["selected"] == 24 and summary["unreported"] == 0


def test_a_hopeless_gate_fails_after_the_first_wave(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    result = run(pytester, fake_gym, rows([0.0] * 10), "--gym-adaptive", "--gym-repeats=6", "--gym-min-pass-rate=0.9")
    assert result.ret == 1
    result.assert_outcomes(failed=10 * 2 + 1, skipped=10 * 4)
    result.stdout.fnmatch_lines(
        ["SKIPPED * not needed: pass-rate gate decided FAIL after 2 repeats, upper bound 0.* < 0.90"]
    )


def test_an_undecided_gate_runs_every_wave_to_the_ceiling(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    # Half the tasks pass: a gate at 0.5 stays undecided, so waves of 1, 2, 4 repeats run to the ceiling of 4.
    result = run(
        pytester, fake_gym, rows([1.0, 0.0] * 3), "--gym-adaptive", "--gym-repeats=4", "--gym-min-repeats=1",
        "--gym-min-mean-reward=0.5", "--gym-report=report.json",
    )  # fmt: skip
    assert [w["rollouts"] for w in wave_log(pytester) if "wave" in w] == [6, 6, 12]
    assert eval_runs(fake_gym) == 3
    result.assert_outcomes(passed=12, failed=13, skipped=0)  # the gate item fails too
    assert result.ret == 1  # INCONCLUSIVE at the ceiling fails, as without --gym-adaptive
    result.stdout.fnmatch_lines(
        ["*mean reward * straddles 0.50: INCONCLUSIVE*", "*3 waves, 24 of 24 rollouts (0% saved)*"]
    )


def test_errors_decide_the_dataset(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    data = rows([1.0] * 3) + json.dumps({"id": "bad", "responses_create_params": {"input": "q"},
                                         "fake": {"failure": "agent_run_error"}}) + "\n"  # fmt: skip
    result = run(pytester, fake_gym, data, "--gym-adaptive", "--gym-repeats=4", "--gym-min-mean-reward=0.5")
    assert result.ret == 1
    # The gate item fails too: its gate is judged on part of the selection (the 2 errored rollouts).
    result.assert_outcomes(passed=6, failed=1, errors=2, skipped=8)
    result.stdout.fnmatch_lines(["SKIPPED * not needed: 2 rollouts errored, which fails the dataset's gates"])


def test_a_reward_outside_the_declared_range_rolls_the_rest_out_whole(
    pytester: pytest.Pytester, fake_gym: FakeGym
) -> None:
    result = run(
        pytester, fake_gym, rows([3.0, 1.0, 2.0]), "--gym-adaptive", "--gym-repeats=8", "--gym-min-mean-reward=0.5",
        "--gym-pass-threshold=1",
    )  # fmt: skip
    assert [w["rollouts"] for w in wave_log(pytester) if "wave" in w] == [6, 18]
    result.assert_outcomes(passed=25, skipped=0)
    result.stdout.fnmatch_lines(["*a reward lies outside [[]0, 1]*", "*judged without the*"])
    declared = run(
        pytester, fake_gym, rows([3.0, 1.0, 2.0]), "--gym-adaptive", "--gym-repeats=8", "--gym-min-mean-reward=0.5",
        "--gym-reward-range=0:3",
    )  # fmt: skip
    assert declared.ret == 0
    declared.stdout.fnmatch_lines(["*not needed: mean-reward gate decided PASS after 2 repeats*"])


def test_ungated_datasets_and_uneven_selections_roll_out_whole(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    result = run(pytester, fake_gym, rows([1.0] * 4), "--gym-adaptive", "--gym-repeats=4")
    result.assert_outcomes(passed=16)
    assert eval_runs(fake_gym) == 1
    uneven = run(
        pytester, fake_gym, rows([1.0] * 4), "--gym-adaptive", "--gym-repeats=4", "--gym-min-mean-reward=0.5",
        "--deselect", "mcqa.jsonl::t0[r3]",
    )  # fmt: skip
    # 15 rollouts in one wave; the gate item is skipped: --deselect left part of the dataset out
    uneven.assert_outcomes(passed=15, skipped=1, deselected=1)


def test_xdist_workers_follow_the_waves(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    (pytester.path / "mcqa.jsonl").write_text(rows([1.0, 1.0, 1.0, 0.0] * 3))
    common = [*fake_gym.args, "mcqa.jsonl", "--gym-adaptive", "--gym-repeats=8", "--gym-min-mean-reward=0.5"]
    alone = pytester.runpytest_subprocess(*common, "--gym-report=alone.json")
    two = pytester.runpytest_subprocess(*common, "--gym-report=two.json", "-n", "2")
    assert alone.ret == two.ret == 0
    # 3 of 4 tasks pass: undecided after 2 repeats, decided PASS after 4 (two waves).
    expected = {"passed": 9 * 4 + 1, "failed": 3 * 4, "skipped": 12 * 4}
    alone.assert_outcomes(**expected)
    two.assert_outcomes(**expected)
    reports = [json.loads((pytester.path / name).read_text())["datasets"][0] for name in ("alone.json", "two.json")]
    assert reports[0]["adaptive"] == reports[1]["adaptive"] and reports[0]["gates"] == reports[1]["gates"]


def test_the_planner_writes_the_log_every_process_reads(tmp_path: Path) -> None:
    data = tmp_path / "d.jsonl"
    plan = RunPlan.build((f"d.jsonl::t{t}[r{r}]", data, t + 1, f"t{t}", r, "agent") for t in range(3) for r in range(4))
    assert rectangular(plan.rollouts) == 4
    planner = WavePlanner(plan, {"d.jsonl": GroupPolicy((Gate("mean_reward", 0.01),), 1.0)}, 2, tmp_path)
    wave = planner.first()
    assert wave is not None and [r.repeat for r in wave.plan.rollouts] == [0, 1] * 3
    wave.output.write_text(
        "".join(json.dumps({"_ng_task_index": r.stamp, "reward": 1.0}) + "\n" for r in wave.plan.rollouts)
    )
    assert planner.after(wave) is None  # decided: no second wave
    log = WaveLog.read(tmp_path / "waves.jsonl")
    assert log.waves == 1 and sorted(log.skipped) == sorted(r.stamp for r in plan.rollouts if r.repeat >= 2)
    (record,) = log.records(plan, lambda name: GroupPolicy((), 1.0).reward_range).values()
    assert record.waves == 1
    assert (record.ends, record.rollouts, record.ceiling, record.skipped) == ((2,), 6, 12, 6)
    assert record.reason.startswith("not needed: mean-reward gate decided PASS after 2 repeats")


def test_sharded_adaptive_runs_merge_without_the_pairs_the_waves_never_asked_for(
    pytester: pytest.Pytester, fake_gym: FakeGym
) -> None:
    # Each shard's report holds as selected only the pairs its waves rolled out: the merge must not count the
    # pairs a decided gate skipped as rollouts a shard lost.
    data = rows([1.0] * 12)
    for index in (1, 2):
        result = run(
            pytester, fake_gym, data, "--gym-adaptive", "--gym-repeats=8", "--gym-min-mean-reward=0.5",
            f"--gym-shard={index}/2", f"--gym-report=s{index}.json",
        )  # fmt: skip
        assert result.ret == 0
        (dataset,) = json.loads((pytester.path / f"s{index}.json").read_text())["plan"]["datasets"]
        assert dataset["selected"] and all(sorted(r) == [0, 1] for r in dataset["selected"].values())
    merged = subprocess.run(
        [sys.executable, "-m", "pytest_gym_eval", "merge", "s1.json", "s2.json", "--gym-report=merged.json"],
        cwd=pytester.path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert merged.returncode == 0, merged.stdout + merged.stderr
    (summary,) = json.loads((pytester.path / "merged.json").read_text())["datasets"]
    assert summary["selected"] == summary["rollouts"] == 24 and summary["unreported"] == summary["errors"] == 0
