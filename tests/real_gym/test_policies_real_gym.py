"""Two policy models in one session against real Gym (``--gym-policy``): Gym's mcqa example replayed from its own
recordings (the baseline) and from a copy made here with two answers changed so that those tasks flip (the
candidate). Expected rewards are never written here: the baseline's are Gym's own ``gym eval reverify`` of the
recorded answers (``gym_verdicts``), the candidate's the same but for the two changed answers (one made right, one
made wrong). One Gym serves both policies and one ``gym eval run`` rolls out both."""

from __future__ import annotations

import json
import shutil

import pytest

from tests.support.children import started_processes
from tests.support.junit import junit_rollouts
from tests.support.real_gym import GymExample


def test_two_replayed_policies_roll_out_in_one_gym_and_one_eval_run(
    pytester: pytest.Pytester, gym_example: GymExample, gym_verdicts: dict[str, float]
) -> None:
    dataset = pytester.path / "datasets" / "mcqa.jsonl"
    dataset.parent.mkdir()
    shutil.copy(gym_example.dataset, dataset)
    rows = [json.loads(line) for line in gym_example.dataset.read_text().splitlines()]
    recordings = [json.loads(line) for line in gym_example.recordings.read_text().splitlines()]
    # The candidate answers one task Gym scores 1.0 wrongly and one it scores 0.0 rightly.
    worse = next(row for row in rows if gym_verdicts[row["uuid"]] == 1.0)
    better = next(row for row in rows if gym_verdicts[row["uuid"]] == 0.0)
    wrong = next(letter for letter in "ABCDEFGHIJ" if letter != worse["expected_answer"])
    answers = {worse["uuid"]: wrong, better["uuid"]: better["expected_answer"]}
    prompts = {row["responses_create_params"]["input"][0]["content"]: row["uuid"] for row in rows}
    for recording in recordings:
        task = prompts[recording["responses_create_params"]["input"][0]["content"]]
        if task in answers:
            recording["response"]["output"][-1]["content"][0]["text"] = f"The answer is \\boxed{{{answers[task]}}}"
    candidate = pytester.path / "candidate_rollouts.jsonl"
    candidate.write_text("".join(json.dumps(r) + "\n" for r in recordings))

    result = pytester.runpytest_subprocess(
        f"--gym-checkout={gym_example.checkout}", "datasets/mcqa.jsonl", "--gym-repeats=2",
        f"--gym-policy=base=replay:{gym_example.recordings}", f"--gym-policy=cand=replay:{candidate}",
        "--junitxml=junit.xml", "--gym-run-dir=runs", "-p", "no:cacheprovider",
    )  # fmt: skip

    found = {name: props for name, props in junit_rollouts(pytester.path / "junit.xml").items() if "task_id" in props}
    rewards = {name: float(values["reward"]) for name, values in found.items()}
    candidate_verdicts = {**gym_verdicts, worse["uuid"]: 0.0, better["uuid"]: 1.0}
    expected = {
        f"{task}[r{repeat}-{policy}]": verdicts[task]
        for policy, verdicts in (("base", gym_verdicts), ("cand", candidate_verdicts))
        for task in gym_verdicts
        for repeat in (0, 1)
    }
    assert rewards == expected, result.stdout.str()[-3000:]
    assert {values["policy"] for values in found.values()} == {"base", "cand"}
    (run_dir,) = (pytester.path / "runs").iterdir()
    assert sorted(p["name"] for p in started_processes(run_dir)) == ["gym env start", "gym eval run"]
    # Gym's own aggregate: one entry per agent instance, the candidate's being the copy bound to its model.
    metrics = run_dir / "gym-output" / "rollouts_aggregate_metrics.json"
    agents = {entry["agent_ref"]["name"] for entry in json.loads(metrics.read_text())}
    assert agents == {"mcqa_simple_agent", "mcqa_simple_agent__cand"}
