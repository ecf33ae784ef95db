"""``--gym-adaptive`` with two policy models against real Gym 0.7.0: Gym's mcqa example replayed from its own
recordings (the baseline) and from a copy with one wrong answer made right (the candidate), rolled out in waves
through one Gym until the non-inferiority gate is decided, the later repeats skipped. Expected rewards are never
written here: the baseline's are Gym's own ``gym eval reverify`` of the recorded answers (``gym_verdicts``), the
candidate's the same but for the one changed answer."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import jsonschema
import pytest

from pytest_gym_eval.reporting.json_report import SCHEMA_PATH
from tests.support.junit import junit_rollouts, junit_suite_properties
from tests.support.real_gym import GymExample

CEILING = 8
MARGIN = 0.2
"""Five tasks, the candidate better on one: the paired sequence after 2 repeats is about [-0.39, 0.78], after 4
about [-0.17, 0.51] (a difference of +1 on one task in five, 0 on the rest; tests/unit/test_comparison.py checks
such sequences), so non-inferiority at -0.2 is decided after the second wave, 4 of 8 repeats."""


def test_non_inferiority_is_decided_before_the_ceiling_and_the_later_waves_are_skipped(
    pytester: pytest.Pytester, gym_example: GymExample, gym_verdicts: dict[str, float]
) -> None:
    dataset = pytester.path / "datasets" / "mcqa.jsonl"
    dataset.parent.mkdir()
    dataset.write_bytes(gym_example.dataset.read_bytes())
    rows = [json.loads(line) for line in gym_example.dataset.read_text().splitlines()]
    recordings = [json.loads(line) for line in gym_example.recordings.read_text().splitlines()]
    # The candidate answers one task Gym scores 0.0 rightly.
    better = next(row for row in rows if gym_verdicts[row["uuid"]] == 0.0)
    prompts = {row["responses_create_params"]["input"][0]["content"]: row["uuid"] for row in rows}
    for recording in recordings:
        if prompts[recording["responses_create_params"]["input"][0]["content"]] == better["uuid"]:
            text = f"The answer is \\boxed{{{better['expected_answer']}}}"
            recording["response"]["output"][-1]["content"][0]["text"] = text
    candidate = pytester.path / "candidate_rollouts.jsonl"
    candidate.write_text("".join(json.dumps(r) + "\n" for r in recordings))

    result = pytester.runpytest_subprocess(
        f"--gym-checkout={gym_example.checkout}", "datasets/mcqa.jsonl", f"--gym-repeats={CEILING}",
        f"--gym-policy=base=replay:{gym_example.recordings}", f"--gym-policy=cand=replay:{candidate}",
        "--gym-adaptive", f"--gym-max-regression={MARGIN}", "--junitxml=junit.xml", "--gym-report=r.json",
        "--gym-run-dir=runs", "-p", "no:cacheprovider", "-rs",
    )  # fmt: skip
    tail = result.stdout.str()[-3000:]
    assert result.ret == 0, tail

    # Two waves, 2 then 2 more repeats of every task for both policies; repeats 4..7 never rolled out.
    (run_dir,) = (pytester.path / "runs").iterdir()
    log = [json.loads(line) for line in (run_dir / "waves.jsonl").read_text().splitlines()]
    tasks = len(gym_verdicts)
    assert [entry["rollouts"] for entry in log if "wave" in entry] == [2 * 2 * tasks, 2 * 2 * tasks], tail
    found = {name: props for name, props in junit_rollouts(pytester.path / "junit.xml").items() if "task_id" in props}
    rewards = {name: float(values["reward"]) for name, values in found.items() if "reward" in values}
    candidate_verdicts = {**gym_verdicts, better["uuid"]: 1.0}
    expected = {
        f"{task}[r{repeat}-{policy}]": verdicts[task]
        for policy, verdicts in (("base", gym_verdicts), ("cand", candidate_verdicts))
        for task in gym_verdicts
        for repeat in range(4)
    }
    assert rewards == expected, tail
    skipped = {
        case.get("name", ""): case.find("skipped").get("message", "")  # type: ignore[union-attr]
        for case in ET.parse(pytester.path / "junit.xml").getroot().iter("testcase")
        if case.find("skipped") is not None
    }
    assert sorted(skipped) == sorted(
        f"{task}[r{repeat}-{policy}]"
        for task in gym_verdicts
        for repeat in range(4, CEILING)
        for policy in ("base", "cand")
    )
    for message in skipped.values():
        assert message.startswith(
            "not needed: cand vs base: non-inferiority comparison decided PASS after 4 repeats, lower bound"
        ), message

    report = json.loads((pytester.path / "r.json").read_text())
    jsonschema.validate(report, json.loads(SCHEMA_PATH.read_text()))
    (entry,) = report["comparisons"]
    assert entry["adaptive"] == {"waves": 2, "repeats": [2, 4], "repeats_used": 4, "max_repeats": CEILING}
    (gate,) = entry["gates"]
    assert gate["verdict"] == "PASS" and gate["sequential"] is True and gate["interval"]["low"] >= -MARGIN
    assert entry["pairs"] == 4 * tasks
    properties = junit_suite_properties(pytester.path / "junit.xml")
    assert properties["gym::datasets/mcqa.jsonl::compare.cand.repeats"] == "4"
    assert properties["gym::datasets/mcqa.jsonl::compare.cand.sequential"] == "true"
