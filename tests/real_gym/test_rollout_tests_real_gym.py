"""Rollouts as fixture values against real Gym: a test function over the project's mcqa example's rollouts asserts on
their output text and tokens; listed before or after the dataset, and under ``-n 2``, the outcomes are the same, and
each session runs one ``gym eval run`` that rolls out each pair once."""

from __future__ import annotations

import json
import shutil

import pytest

from tests.support import PROJECT_EXAMPLE
from tests.support.children import gym_commands, outcomes
from tests.support.real_gym import SharedGym

RECORDINGS = PROJECT_EXAMPLE / "recordings" / "mcqa_rollouts.jsonl"

TESTS = """
import pytest

OUTPUT_TOKENS = {tokens!r}


@pytest.mark.gym_rollouts("datasets/mcqa.jsonl")
def test_answer_is_boxed_short_and_right(gym_rollout):
    assert gym_rollout.output_text.rstrip().endswith("}}") and "\\\\boxed{{" in gym_rollout.output_text
    assert gym_rollout.output_tokens == OUTPUT_TOKENS[gym_rollout.output_text] < 512
    assert gym_rollout.input_tokens > 0 and gym_rollout.record_path.is_file()
    assert gym_rollout.verifier_fields["extracted_answer"] == gym_rollout.row["expected_answer"]
"""


def test_a_test_function_asserts_on_the_mcqa_examples_rollouts(
    pytester: pytest.Pytester, shared_gym: SharedGym
) -> None:
    shutil.copy(PROJECT_EXAMPLE / "pytest.ini", pytester.path / "pytest.ini")  # 2 repeats, the agent, a 0.7 gate
    shutil.copytree(PROJECT_EXAMPLE / "datasets", pytester.path / "datasets")
    recorded = [json.loads(line) for line in RECORDINGS.read_text().splitlines()]
    answers = [r["response"] for r in recorded]
    tokens = {a["output"][-1]["content"][0]["text"]: a["usage"]["output_tokens"] for a in answers}
    pytester.makepyfile(test_answers=TESTS.format(tokens=tokens))
    common = [f"--gym-replay={RECORDINGS}", "-rA", "-p", "no:cacheprovider"]
    attached = [*shared_gym.args, *common]

    before = pytester.runpytest_subprocess(*attached, "test_answers.py", "datasets/mcqa.jsonl", "--gym-run-dir=before")
    after = pytester.runpytest_subprocess(*attached, "datasets/mcqa.jsonl", "test_answers.py", "--gym-run-dir=after")
    spread = pytester.runpytest_subprocess(
        f"--gym-checkout={shared_gym.checkout}", *common, "test_answers.py", "datasets/mcqa.jsonl", "-n", "2",
        "--gym-run-dir=spread",
    )  # fmt: skip

    found = outcomes(before)
    assert outcomes(after) == outcomes(spread) == found
    # The recorded answers to mcqa-004, -009 and -011 are wrong: their dataset items fail, and so does the test's
    # own check on each of their rollouts; every other answer is boxed, short and right (2 repeats each).
    tests = {nodeid: word for nodeid, word in found.items() if nodeid.startswith("test_answers.py::")}
    items = {nodeid: word for nodeid, word in found.items() if nodeid.startswith("datasets/mcqa.jsonl::mcqa")}
    wrong = {"mcqa-004", "mcqa-009", "mcqa-011"}
    assert len(tests) == len(items) == 24, before.stdout.str()[-3000:]
    for task in (f"mcqa-{n:03d}" for n in range(1, 13)):
        for repeat in (0, 1):
            word = "FAILED" if task in wrong else "PASSED"
            assert tests[f"test_answers.py::test_answer_is_boxed_short_and_right[{task}-r{repeat}]"] == word
            assert items[f"datasets/mcqa.jsonl::{task}[r{repeat}]"] == word
    assert found["datasets/mcqa.jsonl::gym-gate"] == "PASSED"

    for name, result in (("before", before), ("after", after), ("spread", spread)):
        (run_dir,) = (pytester.path / name).iterdir()
        started = gym_commands(run_dir)
        if name == "spread":  # its own Gym, started once (twice only when Ray's start-up timed out)
            assert started in (["gym env start", "gym eval run"], ["gym env start", "gym env start", "gym eval run"])
        else:  # attached to the tier's Gym
            assert started == ["gym eval run"], started
        materialized = (run_dir / "gym-output" / "rollouts_materialized_inputs.jsonl").read_text().splitlines()
        pairs = sorted((json.loads(line)["id"], json.loads(line)["_ng_rollout_index"]) for line in materialized)
        assert pairs == [(f"mcqa-{n:03d}", r) for n in range(1, 13) for r in (0, 1)], name  # each pair once
        assert "12 tasks, 24 rollouts (24 scored, 0 errors)" in result.stdout.str()  # each counted once


METRIC_TESTS = """
import pytest


@pytest.mark.gym_rollouts("datasets/mcqa.jsonl")
def test_correct(gym_rollout):
    expected = gym_rollout.row["expected_answer"]
    gym_rollout.record_metric("correct", gym_rollout.verifier_fields["extracted_answer"] == expected)
"""


def test_a_custom_metric_over_the_mcqa_examples_rollouts_gates_the_session(
    pytester: pytest.Pytester, shared_gym: SharedGym
) -> None:
    """``correct`` (the verifier's extracted answer is the expected one) is 1 for 9 tasks and 0 for mcqa-004, -009
    and -011 (both repeats): mean 0.75; the errors clustered by task sum to 9 * 0.5² + 3 * 1.5² = 9 over N = 24,
    so the standard error is sqrt(12/11 * 9 / 24²) = 0.1306. A metric in [0, 1] gets the mean reward's
    task-clustered Clopper-Pearson interval: n_eff = 0.75 * 0.25 / 0.1306² = 11.0, n* = 11.0 * (1.95996 /
    2.20099)² = 8.72, Clopper-Pearson of 6.54 successes in 8.72: [0.37, 0.96]."""
    shutil.copy(PROJECT_EXAMPLE / "pytest.ini", pytester.path / "pytest.ini")
    shutil.copytree(PROJECT_EXAMPLE / "datasets", pytester.path / "datasets")
    pytester.makepyfile(test_metric=METRIC_TESTS)
    common = [*shared_gym.args, f"--gym-replay={RECORDINGS}", "-p", "no:cacheprovider", "test_metric.py"]
    met = pytester.runpytest_subprocess(*common, "--gym-min-metric=correct:0.7", "--gym-report=r.json")
    text = " ".join(met.stdout.str().split())
    assert met.ret == 0, met.stdout.str()[-3000:]
    assert "metric correct 0.75 [0.37, 0.96] 95% CI over 12 tasks" in text, text[-3000:]
    assert "metric correct 0.75 [0.37, 0.96] >= 0.70: PASS" in text
    metric = json.loads((pytester.path / "r.json").read_text())["datasets"][0]["metrics"]["correct"]
    assert metric["estimate"] == 0.75 and metric["n"] == 12 and round(metric["low"], 2) == 0.37
    failed = pytester.runpytest_subprocess(*common, "--gym-min-metric=correct:0.8")
    assert failed.ret == 1, failed.stdout.str()[-3000:]
    assert "metric correct 0.75 [0.37, 0.96] < 0.80: FAIL" in " ".join(failed.stdout.str().split())
