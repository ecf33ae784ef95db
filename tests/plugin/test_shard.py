"""Sharding in pytest sessions against the stand-in ``gym`` (the assignment rule alone:
tests/unit/test_shard_rule.py)."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

import jsonschema
import pytest

from pytest_gym_eval.reporting.json_report import SCHEMA_PATH
from pytest_gym_eval.tasks.shard import SHARD_RULE, assign_shards
from tests.support.fakes import FakeGym


def write_dataset(path: Path, rewards: dict[str, object]) -> None:
    lines = []
    for task_id, reward in rewards.items():
        fake = {"failure": "agent_run_error"} if reward == "error" else {"reward": reward}
        lines.append(json.dumps({"id": task_id, "responses_create_params": {"input": f"Q {task_id}"}, "fake": fake}))
    path.write_text("\n".join(lines) + "\n")


REWARDS: dict[str, object] = {f"t{i:02d}": [1.0, 0.0, 0.5, 1.0][i % 4] for i in range(10)}


def selected_ids(report: dict[str, object]) -> list[str]:
    return [r["nodeid"] for r in report["rollouts"]]  # type: ignore[index]


def test_three_shards_split_the_tasks_and_record_the_plan(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    write_dataset(pytester.path / "mcqa.jsonl", REWARDS)
    write_dataset(pytester.path / "other.jsonl", {"x1": 1.0, "x2": 0.0})
    common = [*fake_gym.args, "mcqa.jsonl", "other.jsonl", "--gym-repeats=2", "--gym-agent=mcqa_simple_agent"]
    seen: list[str] = []
    schema = json.loads(SCHEMA_PATH.read_text())
    for index in (1, 2, 3):
        result = pytester.runpytest(*common, f"--gym-shard={index}/3", f"--gym-report=s{index}.json")
        report = json.loads((pytester.path / f"s{index}.json").read_text())
        jsonschema.validate(report, schema)
        ids = selected_ids(report)
        # pytest reports the other shards' items as deselected, as -k does.
        assert result.parseoutcomes().get("deselected") == 24 - len(ids)
        assert report["meta"]["shard"] == f"{index}/3"
        plan = report["plan"]
        assert plan["shard"] == {"index": index, "count": 3} and plan["rule"] == SHARD_RULE
        mcqa, other = plan["datasets"]
        assert mcqa["tasks"] == list(REWARDS) and mcqa["repeats"] == 2 and other["tasks"] == ["x1", "x2"]
        assert mcqa["agent"] == "mcqa_simple_agent" and mcqa["agents"] == {} and mcqa["threshold"] == 1.0
        # Every repeat of a task is in the same shard.
        tasks = Counter(r["task_id"] for r in report["rollouts"])
        assert set(tasks.values()) == {2}
        assert {t: sorted(r) for t, r in mcqa["selected"].items()} == {
            r["task_id"]: [0, 1] for r in report["rollouts"] if r["dataset"] == "mcqa.jsonl"
        }
        seen += ids
    assert len(seen) == len(set(seen)) == 24
    per_shard = Counter(assign_shards("mcqa.jsonl", REWARDS, 3).values())
    assert sorted(per_shard.values()) == [3, 3, 4]


def test_shard_composes_with_k_and_is_an_ini_setting(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    write_dataset(pytester.path / "mcqa.jsonl", REWARDS)
    pytester.makeini("[pytest]\ngym_shard = 2/3\ngym_repeats = 2\n")
    mine = sorted(task for task, shard in assign_shards("mcqa.jsonl", REWARDS, 3).items() if shard == 2)
    result = pytester.runpytest(*fake_gym.args, "mcqa.jsonl", "-k", mine[0], "--gym-report=r.json", "-v")
    result.assert_outcomes(**_outcomes(REWARDS[mine[0]], 2), deselected=18)
    report = json.loads((pytester.path / "r.json").read_text())
    assert {r["task_id"] for r in report["rollouts"]} == {mine[0]}
    assert report["plan"]["datasets"][0]["selected"] == {mine[0]: [0, 1]}
    # A task of another shard: -k selects it, the shard does not.
    other = next(task for task, shard in assign_shards("mcqa.jsonl", REWARDS, 3).items() if shard != 2)
    result = pytester.runpytest(*fake_gym.args, "mcqa.jsonl", "-k", other)
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    result.stdout.fnmatch_lines(["*20 deselected*"])


def _outcomes(reward: object, repeats: int) -> dict[str, int]:
    return {"passed": repeats} if reward == 1.0 else {"failed": repeats}


def test_a_gated_dataset_without_tasks_in_the_shard_has_no_gate_item(
    pytester: pytest.Pytester, fake_gym: FakeGym
) -> None:
    write_dataset(pytester.path / "tiny.jsonl", {"only": 1.0})
    owner = assign_shards("tiny.jsonl", ["only"], 2)["only"]
    other = 3 - owner
    args = [*fake_gym.args, "tiny.jsonl", "--gym-agent=mcqa_simple_agent", "--gym-min-mean-reward=0.5", "--co", "-q"]
    empty = pytester.runpytest(*args, f"--gym-shard={other}/2")
    empty.stdout.fnmatch_lines(["*2 deselected*"])
    full = pytester.runpytest(*args, f"--gym-shard={owner}/2")
    full.stdout.fnmatch_lines(["tiny.jsonl::only[[]r0[]]", "tiny.jsonl::gym-gate", "2 tests collected*"])


@pytest.mark.parametrize(("value", "message"), [("0/2", "numbered from 1"), ("x", "expected I/N")])
def test_a_bad_shard_is_a_usage_error(pytester: pytest.Pytester, value: str, message: str) -> None:
    result = pytester.runpytest(f"--gym-shard={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*--gym-shard*{message}*"])


def test_xdist_shard_report_has_the_plan(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    write_dataset(pytester.path / "mcqa.jsonl", REWARDS)
    args = [*fake_gym.args, "mcqa.jsonl", "--gym-repeats=2", "--gym-shard=1/3"]
    pytester.runpytest_subprocess(*args, "--gym-report=alone.json")
    pytester.runpytest_subprocess(*args, "--gym-report=spread.json", "-n", "2")
    alone, spread = (json.loads((pytester.path / name).read_text()) for name in ("alone.json", "spread.json"))
    assert spread["plan"] == alone["plan"] and spread["plan"]["datasets"][0]["selected"]
    assert sorted(selected_ids(spread)) == sorted(selected_ids(alone))


def test_shard_composes_with_last_failed(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    write_dataset(pytester.path / "mcqa.jsonl", REWARDS)
    owners = assign_shards("mcqa.jsonl", REWARDS, 3)
    # A shard with tasks that pass and tasks that fail, so that --lf has something to leave out.
    index = next(i for i in (1, 2, 3) if len({REWARDS[t] == 1.0 for t, s in owners.items() if s == i}) == 2)
    mine = [task for task, shard in owners.items() if shard == index]
    failing = [task for task in mine if REWARDS[task] != 1.0]
    args = [a for a in fake_gym.args if a not in ("-p", "no:cacheprovider")]
    args += ["mcqa.jsonl", "--gym-repeats=2", f"--gym-shard={index}/3", "--gym-report=r.json"]
    first = pytester.runpytest(*args)
    first.assert_outcomes(passed=2 * (len(mine) - len(failing)), failed=2 * len(failing), deselected=20 - 2 * len(mine))
    again = pytester.runpytest(*args, "--lf")
    again.assert_outcomes(failed=2 * len(failing), deselected=20 - 2 * len(failing))
    report = json.loads((pytester.path / "r.json").read_text())
    assert sorted({r["task_id"] for r in report["rollouts"]}) == sorted(failing)
    assert sorted(report["plan"]["datasets"][0]["selected"]) == sorted(failing)


def test_an_empty_shard_passes_and_writes_a_report_the_merge_takes(
    pytester: pytest.Pytester, fake_gym: FakeGym
) -> None:
    # More shards than tasks: a CI matrix of 2 shards over a 1-task dataset leaves one shard with nothing to run.
    write_dataset(pytester.path / "tiny.jsonl", {"only": 1.0})
    owner = assign_shards("tiny.jsonl", ["only"], 2)["only"]
    args = [*fake_gym.args, "tiny.jsonl", "--gym-agent=mcqa_simple_agent", "--gym-min-mean-reward=0.5"]
    empty = pytester.runpytest(*args, f"--gym-shard={3 - owner}/2", f"--gym-report=r{3 - owner}.json")
    assert empty.ret == pytest.ExitCode.OK, empty.stdout.str()
    empty.stdout.fnmatch_lines([f"*shard {3 - owner}/2 has no task of this run*"])
    report = json.loads((pytester.path / f"r{3 - owner}.json").read_text())
    jsonschema.validate(report, json.loads(SCHEMA_PATH.read_text()))
    assert report["rollouts"] == [] and report["plan"]["datasets"][0]["tasks"] == ["only"]
    assert report["session"]["exit_status"] == 0
    full = pytester.runpytest(*args, f"--gym-shard={owner}/2", f"--gym-report=r{owner}.json")
    assert full.ret == pytest.ExitCode.OK
    merged = pytester.run(sys.executable, "-m", "pytest_gym_eval", "merge", "r1.json", "r2.json", "--gym-report=m.json")
    assert merged.ret == 0, merged.stdout.str() + merged.stderr.str()
    assert "has no report" not in merged.stdout.str()
    merged_report = json.loads((pytester.path / "m.json").read_text())
    (dataset,) = merged_report["datasets"]
    assert dataset["rollouts"] == 1
    # The empty shard started no Gym, so its report has no model or Gym version: the merged run keeps the other's.
    full_meta = json.loads((pytester.path / f"r{owner}.json").read_text())["meta"]
    assert "gym_version" not in report["meta"] and merged_report["meta"]["gym_version"] == full_meta["gym_version"]
    assert merged_report["meta"].get("model") == full_meta.get("model")


def test_a_k_selecting_nothing_in_a_shard_is_still_no_tests(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    # Only the shard's own split makes an empty share pass: a -k that selects nothing is the user's mistake.
    write_dataset(pytester.path / "mcqa.jsonl", REWARDS)
    result = pytester.runpytest(*fake_gym.args, "mcqa.jsonl", "--gym-shard=1/3", "-k", "no_such_task")
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED
