"""Two policy models in one session against real Gym (``--gym-policy``): Gym's mcqa example replayed from its own
recordings (the baseline) and from a copy made here with two answers changed so that those tasks flip (the
candidate). Expected rewards are never written here: the baseline's are Gym's own ``gym eval reverify`` of the
recorded answers (``gym_verdicts``), the candidate's the same but for the two changed answers (one made right, one
made wrong). One Gym serves both policies and one ``gym eval run`` rolls out both.

Then Gym's own ``gym eval compare`` of such a session's output, beside ours, with the comparison gate's verdict
and exit status either way: recordings written here from Gym's with every answer made right (the expected answer,
which the first test shows mcqa's verifier scores 1.0) or wrong (another letter, 0.0)."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from pytest_gym_eval import provision
from tests.support.children import gym_commands
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
    assert gym_commands(run_dir) == ["gym env start", "gym eval run"]
    # Gym's own aggregate: one entry per agent instance, the candidate's being the copy bound to its model.
    metrics = run_dir / "gym-output" / "rollouts_aggregate_metrics.json"
    agents = {entry["agent_ref"]["name"] for entry in json.loads(metrics.read_text())}
    assert agents == {"mcqa_simple_agent", "mcqa_simple_agent__cand"}


RIGHT_BY_REPEAT = {
    # Per task (the example's five, in dataset order), whether each of 3 repeats answers right. The baseline's
    # repeats share a bad moment (repeat 1 wrong everywhere); the candidate answers right one more repeat of every
    # task (two of the last task's) and repeat 1 right almost everywhere, so it is better on every task by 1/3
    # (2/3 on the last) of a repeat, which pairing by task shows, while its per-repeat means (0.8, 1.0, 0.8) against
    # the baseline's (0.8, 0.0, 0.6) leave an unpaired Welch interval over 3 repeats a side wide around 0:
    # ours 0.40 [-0.03, 0.61] (MOVER on gains and losses: no loss in 15 pairs of 5 tasks cannot rule out losses up
    # to 0.39), Gym's 0.40 [-0.55, 1.35]; tasks 0, 2 and 4 go from failing to passing.
    "better": [(1, 0, 0), (1, 0, 1), (0, 0, 1), (1, 0, 1), (1, 0, 0)],
    "worse": [(1, 1, 0), (1, 1, 1), (0, 1, 1), (1, 1, 1), (1, 1, 1)],
}


def _recordings(rows: list[dict], recordings: list[dict], right: list[tuple[int, ...]]) -> str:  # type: ignore[type-arg]
    """Gym's recorded mcqa rollouts, each task's recorded 3 times (``_ng_rollout_index`` 0..2, the repeat that
    recording answers) with its answer made right or wrong as ``right`` says (rows in dataset order)."""
    by_prompt = {recording["responses_create_params"]["input"][0]["content"]: recording for recording in recordings}
    lines = []
    for row, answers in zip(rows, right, strict=True):
        wrong = next(letter for letter in "ABCDEFGHIJ" if letter != row["expected_answer"])
        for repeat, is_right in enumerate(answers):
            recording = json.loads(json.dumps(by_prompt[row["responses_create_params"]["input"][0]["content"]]))
            letter = row["expected_answer"] if is_right else wrong
            recording["response"]["output"][-1]["content"][0]["text"] = f"The answer is \\boxed{{{letter}}}"
            lines.append(json.dumps({**recording, "_ng_rollout_index": repeat}) + "\n")
    return "".join(lines)


@pytest.mark.parametrize("direction", ["better", "worse"])
def test_gyms_own_compare_of_a_policy_session_agrees_with_ours_but_for_the_unpaired_interval(
    pytester: pytest.Pytester, gym_checkout: provision.GymCheckout, gym_example: GymExample, direction: str
) -> None:
    """One session per direction, gated at --gym-max-regression=0.1 (every rollout item passes: pass threshold 0):
    a better candidate PASSES (exit 0), the same recordings swapped (a worse candidate) are INCONCLUSIVE (exit 1:
    five tasks cannot rule out unseen gains). Then Gym's ``gym eval compare`` of the session's own aggregate
    (baseline agent vs the candidate's copy) agrees with our delta and flips, while its Welch interval is about three
    times as wide as our paired one."""
    dataset = pytester.path / "datasets" / "mcqa.jsonl"
    dataset.parent.mkdir()
    shutil.copy(gym_example.dataset, dataset)
    rows = [json.loads(line) for line in gym_example.dataset.read_text().splitlines()]
    recorded = [json.loads(line) for line in gym_example.recordings.read_text().splitlines()]
    lower, upper = RIGHT_BY_REPEAT["better"], RIGHT_BY_REPEAT["worse"]
    baseline_right, candidate_right = (lower, upper) if direction == "better" else (upper, lower)
    (pytester.path / "base.jsonl").write_text(_recordings(rows, recorded, baseline_right))
    (pytester.path / "cand.jsonl").write_text(_recordings(rows, recorded, candidate_right))

    result = pytester.runpytest_subprocess(
        f"--gym-checkout={gym_example.checkout}", "datasets/mcqa.jsonl", "--gym-repeats=3",
        "--gym-policy=base=replay:base.jsonl", "--gym-policy=cand=replay:cand.jsonl",
        "--gym-max-regression=0.1", "--gym-pass-threshold=0", "--gym-report=report.json",
        "--junitxml=junit.xml", "--gym-run-dir=runs", "-p", "no:cacheprovider",
    )  # fmt: skip
    output = result.stdout.str()[-4000:]

    # Every rollout came back to its own item: each item's reward is the answer its policy's recording gave.
    found = junit_rollouts(pytester.path / "junit.xml")
    rewards = {name: float(props["reward"]) for name, props in found.items() if "task_id" in props}
    expected = {
        f"{row['uuid']}[r{repeat}-{policy}]": float(answers[repeat])
        for policy, right in (("base", baseline_right), ("cand", candidate_right))
        for row, answers in zip(rows, right, strict=True)
        for repeat in range(3)
    }
    assert rewards == expected, output
    (comparison,) = json.loads((pytester.path / "report.json").read_text())["comparisons"]
    ours = comparison["delta"]
    if direction == "better":
        assert (result.ret, comparison["verdict"]) == (0, "PASS"), output
        assert ours["low"] == pytest.approx(-0.0301238, abs=1e-6), comparison
    else:
        assert (result.ret, comparison["verdict"]) == (1, "INCONCLUSIVE"), output
        assert ours["high"] == pytest.approx(0.0301238, abs=1e-6), comparison

    # Gym's input: each task's six rows (3 repeats x 2 policies) under one task index.
    (run_dir,) = (pytester.path / "runs").iterdir()
    inputs = [json.loads(line) for line in (run_dir / "gym-input.jsonl").read_text().splitlines()]
    task_of = {row["_ng_task_index"]: row["uuid"] for row in inputs}
    assert len(task_of) == 5 and len(inputs) == 30

    report_dir = pytester.path / "gym-compare"
    rollouts = run_dir / "gym-output" / "rollouts.jsonl"
    command = [
        str(gym_checkout.gym_executable), "eval", "compare", "--baseline", str(rollouts), "--candidates", str(rollouts),
        "--baseline-agent", "mcqa_simple_agent", "--candidate-agents", "mcqa_simple_agent__cand",
        "--output-dir", str(report_dir), "--report-format", "json",
    ]  # fmt: skip
    env = provision.gym_environment(gym_checkout, pytester.path / "ray")
    done = subprocess.run(command, env=env, cwd=gym_checkout.path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    (gym,) = json.loads((report_dir / "compare_report.json").read_text())["comparisons"]
    assert (gym["baseline_repeat_count"], gym["candidate_repeat_counts"]) == (3, [3])
    (mean,) = [row for row in gym["metrics"] if row["metric"] == "mean/reward"]
    (theirs,) = mean["candidates"]
    assert theirs["delta"] == pytest.approx(ours["estimate"], abs=1e-9)
    assert theirs["delta_ci_low"] < 0 < theirs["delta_ci_high"], theirs  # unpaired: wide around 0
    assert theirs["delta_ci_high"] - theirs["delta_ci_low"] > 2.5 * (ours["high"] - ours["low"])
    (flips,) = gym["flips"]
    assert (flips["mode"], flips["common_task_count"], flips["tied_count"]) == ("binary", 5, 0), flips
    gained = {task_of[flip["task_index"]] for flip in flips["flips"] if flip["direction"] == "fail_to_pass"}
    lost = {task_of[flip["task_index"]] for flip in flips["flips"] if flip["direction"] == "pass_to_fail"}
    assert (gained, lost) == (set(comparison["flips"]["only_candidate"]), set(comparison["flips"]["only_baseline"]))
    assert flips["unchanged_count"] == len(comparison["flips"]["both"]) + len(comparison["flips"]["neither"])
    assert gained | lost, flips  # the case has flips to agree on
