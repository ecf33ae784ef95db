"""Judge noise in a whole session: the same policy answer judged again on every repeat (as when a task's recorded
answer is replayed), with rewards that differ, against the stand-in ``gym`` (tests/support/fake_gym.py: a row's
``text`` is every repeat's answer, its ``rewards`` the reward of each repeat)."""

from __future__ import annotations

import json

import jsonschema
import pytest

from pytest_gym_eval.reporting.json_report import SCHEMA_PATH
from pytest_gym_eval.stats.judge_noise import judge_noise
from tests.support.fakes import FakeGym

# Six tasks, three repeats of one answer each; the judge flips on t0, t1 and t4.
REWARDS = {
    "t0": [1.0, 0.0, 1.0],
    "t1": [0.0, 1.0, 0.0],
    "t2": [1.0, 1.0, 1.0],
    "t3": [0.0, 0.0, 0.0],
    "t4": [1.0, 1.0, 0.0],
    "t5": [1.0, 1.0, 1.0],
}


def test_the_report_and_the_summary_give_the_judges_share(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    lines = [
        {"id": task, "responses_create_params": {"input": f"Q {task}"}, "fake": {"rewards": rewards, "text": task}}
        for task, rewards in REWARDS.items()
    ]
    (pytester.path / "mcqa.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    result = pytester.runpytest(
        *fake_gym.args, "mcqa.jsonl", "--gym-repeats=3", "--gym-min-mean-reward=0.5", "--gym-report=report.json"
    )
    report = json.loads((pytester.path / "report.json").read_text())
    jsonschema.validate(report, json.loads(SCHEMA_PATH.read_text()))
    digests: dict[str, set[str]] = {}
    for rollout in report["rollouts"]:
        digests.setdefault(rollout["task_id"], set()).add(rollout["answer"])
    assert all(len(found) == 1 for found in digests.values()) and len(set.union(*digests.values())) == 6
    expected = judge_noise([[rewards] for rewards in REWARDS.values()])
    assert expected is not None
    (dataset,) = report["datasets"]
    noise = dataset["judge_noise"]
    assert (noise["tasks"], noise["answers"], noise["judgments"], noise["repeated"]) == (6, 6, 18, 6)
    assert noise["judge_variance"] == pytest.approx(expected.judge_variance)
    assert noise["judge_share"] == pytest.approx(expected.judge_share)
    assert noise["interval_share"] == pytest.approx(expected.interval_share)
    assert noise["agreement"] == pytest.approx(12 / 18)  # 3 pairs a task; t0, t1, t4 agree on 1 of theirs
    assert noise["dominated_by"] == expected.dominated_by == "neither"
    result.stdout.fnmatch_lines(
        [
            f"  judge noise {expected.judge_share:.0%} [[]*] of the reward's variance is the judge's: 6 of 6",
            "              answers judged again (18 of 18 rollouts), 67% of their pairs of*",
        ]
    )
    assert "the judge's: dominated by neither" in " ".join(" ".join(result.outlines).split())
