"""Evals as pytest code, over the mcqa example (examples/mcqa): a test function over its rollouts, a custom metric
that run.sh gates, and a row this file writes itself, rolled out on demand. README.md in this folder says more."""

import re

import pytest

from pytest_gym_eval import Rollout


@pytest.mark.gym_rollouts("../mcqa/datasets/mcqa.jsonl")  # one test per (task, repeat) of the mcqa example
def test_answer_is_boxed_and_short(gym_rollout: Rollout) -> None:
    boxed = re.search(r"\\boxed\{[A-Z]\}\s*$", gym_rollout.output_text) is not None
    gym_rollout.record_metric("boxed", boxed)  # gated with --gym-min-metric=boxed:0.9
    assert boxed, gym_rollout.output_text
    assert gym_rollout.output_tokens < 512


QUESTION = (  # mcqa-001's question: the replay model has a recorded answer to it
    "Answer the multiple-choice question below. You may reason step by step first, then put only the letter of"
    " your final choice inside \\boxed{}.\n\nWhich planet in our solar system takes the least time to orbit the"
    " Sun?\nA: Mercury\nB: Venus\nC: Earth\nD: Mars"
)


def test_a_row_written_here(gym_run_row) -> None:
    rollout = gym_run_row(
        {
            "responses_create_params": {"input": [{"role": "user", "content": QUESTION}]},
            "options": [{"A": "Mercury"}, {"B": "Venus"}, {"C": "Earth"}, {"D": "Mars"}],
            "expected_answer": "A",
            "grading_mode": "strict_single_letter_boxed",
        },
        agent="mcqa_simple_agent",
    )
    assert rollout.reward == 1.0  # Gym's mcqa verifier's
    assert rollout.verifier_fields["extracted_answer"] == "A"
