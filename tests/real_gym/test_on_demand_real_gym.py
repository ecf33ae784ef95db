"""Rollouts on demand against real Gym: a test builds an mcqa row itself (a question of the project's mcqa example,
which the replay model has a recorded answer to) and ``gym_run_row`` rolls it out through the agent's environment
server, without a ``gym eval run``; the reward is Gym's verifier's. Errors (an unknown agent, a row the recordings
do not hold, a malformed row) error the test with their cause."""

from __future__ import annotations

import json

import pytest

from tests.support import PROJECT_EXAMPLE
from tests.support.children import gym_commands
from tests.support.real_gym import SharedGym

RECORDINGS = PROJECT_EXAMPLE / "recordings" / "mcqa_rollouts.jsonl"
ROWS = {
    row["id"]: row for row in map(json.loads, (PROJECT_EXAMPLE / "datasets" / "mcqa.jsonl").read_text().splitlines())
}

TESTS = """
import pytest

RIGHT = {right!r}
WRONG = {wrong!r}


def question(text, options, expected):
    return {{
        "responses_create_params": {{"input": [{{"role": "user", "content": text}}]}},
        "options": options,
        "expected_answer": expected,
        "grading_mode": "strict_single_letter_boxed",
    }}


def test_right_answer(gym_run_row):
    rollout = gym_run_row(question(*RIGHT), agent="mcqa_simple_agent", task_id="mine")
    assert rollout.verifier_fields["extracted_answer"] == RIGHT[2]
    assert rollout.reward == 1.0 and rollout.passed and rollout.task_id == "mine"
    assert rollout.agent == "mcqa_simple_agent" and rollout.output_tokens > 0
    assert "\\\\boxed{{" + RIGHT[2] + "}}" in rollout.output_text


def test_wrong_answer_is_a_zero_reward(gym_run_row):
    rollout = gym_run_row(question(*WRONG), agent="mcqa_simple_agent")
    assert rollout.verifier_fields["extracted_answer"] != WRONG[2]
    assert rollout.reward == 0.0 and rollout.status == "failed"


def test_unknown_agent(gym_run_row):
    gym_run_row(question(*RIGHT), agent="no_such_agent")


def test_not_recorded(gym_run_row):
    row = question("What is 6 x 7? Put the letter in \\\\boxed{{}}.", [{{"A": "42"}}], "A")
    gym_run_row(row, agent="mcqa_simple_agent")


def test_malformed_row(gym_run_row):
    gym_run_row({{"responses_create_params": {{"input": 5}}}}, agent="mcqa_simple_agent")
"""


def as_question(row: dict) -> tuple[str, list, str]:
    return (row["responses_create_params"]["input"][0]["content"], row["options"], row["expected_answer"])


def outcomes(result: pytest.RunResult) -> dict[str, str]:
    found = {}
    for line in result.outlines:
        for word in ("PASSED", "FAILED", "ERROR"):
            if line.startswith(word + " "):
                found[line.split()[1].split("::")[-1]] = word
    return found


def write_tests(pytester: pytest.Pytester) -> None:
    # mcqa-001's recorded answer is right, mcqa-004's wrong (tests/real_gym/test_rollout_tests_real_gym.py)
    pytester.makepyfile(
        test_mine=TESTS.format(right=as_question(ROWS["mcqa-001"]), wrong=as_question(ROWS["mcqa-004"]))
    )


def test_rows_written_in_a_test_are_rolled_out_by_the_attached_gym(
    pytester: pytest.Pytester, shared_gym: SharedGym
) -> None:
    write_tests(pytester)
    result = pytester.runpytest_subprocess(
        *shared_gym.args, "--gym-agent=mcqa_simple_agent", "-rA", "-p", "no:cacheprovider", "--gym-run-dir=runs"
    )
    text = result.stdout.str()
    assert outcomes(result) == {
        "test_right_answer": "PASSED",
        "test_wrong_answer_is_a_zero_reward": "PASSED",
        "test_unknown_agent": "ERROR",
        "test_not_recorded": "ERROR",
        "test_malformed_row": "ERROR",
    }, text[-4000:]
    assert "Gym runs no agent 'no_such_agent'; it runs " in text and "'mcqa_simple_agent'" in text
    assert "answered HTTP 500: no recorded answer: the conversation departs from the closest recording" in text
    assert "(through SimpleAgent___mcqa_simple_agent -> " in text
    assert "answered HTTP 422" in text
    (run_dir,) = (pytester.path / "runs").iterdir()
    assert not (run_dir / "processes.jsonl").exists()  # attached: nothing started, no `gym eval run`


def test_a_session_of_on_demand_tests_alone_starts_gym_once_under_xdist(
    pytester: pytest.Pytester, shared_gym: SharedGym
) -> None:
    """No dataset, no attached Gym: the session starts Gym's servers once (with --gym-agent's agent and the replay
    model) for its on-demand tests, each pytest-xdist worker calls them, and no `gym eval run` runs."""
    write_tests(pytester)
    result = pytester.runpytest_subprocess(
        f"--gym-checkout={shared_gym.checkout}", f"--gym-replay={RECORDINGS}", "--gym-agent=mcqa_simple_agent",
        "-rA", "-p", "no:cacheprovider", "--gym-run-dir=runs", "-n", "2", "-k", "answer or malformed",
    )  # fmt: skip
    assert outcomes(result) == {
        "test_right_answer": "PASSED",
        "test_wrong_answer_is_a_zero_reward": "PASSED",
        "test_malformed_row": "ERROR",
    }, result.stdout.str()[-4000:]
    (run_dir,) = (pytester.path / "runs").iterdir()
    started = gym_commands(run_dir)
    assert started in (["gym env start"], ["gym env start", "gym env start"])  # twice only after Ray's timeout
