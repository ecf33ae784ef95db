"""benchmarks/judge_fidelity.py: the comparison of raw Gym's run with the session's, and the stand-in's answers
(the runs themselves need real Gym: ``python benchmarks/judge_fidelity.py``, docs/judge-fidelity.md)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import judge_fidelity  # noqa: E402

ROWS = [
    {"id": "a", "responses_create_params": {"input": "one"}, "expected_answer": "1"},
    {"id": "b", "responses_create_params": {"input": "two"}, "expected_answer": "2"},
]


def aggregate(mean: float, latency: float, name: str = "env_simple_agent") -> list[dict[str, Any]]:
    return [{"agent_ref": {"name": name}, "agent_metrics": {"mean/reward": mean, "mean/latency_ms": latency},
             "key_metrics": {"mean/reward": mean}}]  # fmt: skip


def report(rewards: dict[str, float | None], mean: float, errors: tuple[str, ...] = ()) -> dict[str, Any]:
    rollouts = [{"task_id": task, "reward": reward, "status": "error" if task in errors else "passed"}
                for task, reward in rewards.items()]  # fmt: skip
    return {"rollouts": rollouts, "datasets": [{"mean_reward": {"estimate": mean}}]}


def raw(rewards: list[float]) -> list[dict[str, Any]]:
    return [{"_ng_task_index": index, "reward": reward} for index, reward in reversed(list(enumerate(rewards)))]


def test_equal_runs_compare_equal_whatever_their_timings() -> None:
    result = judge_fidelity.compare(
        ROWS, raw([1.0, 0.0]), aggregate(0.5, 12.0), report({"a": 1.0, "b": 0.0}, 0.5), aggregate(0.5, 99.0)
    )
    assert result["rewards_equal"] and result["aggregate_equal"] and result["mean_equal"]
    assert result["raw_rewards"] == [1.0, 0.0] == result["session_rewards"]
    assert result["aggregate_figures"] == 2  # the two means; the latency is a timing
    assert result["errors"] == []


def test_a_differing_reward_a_missing_row_or_figure_and_the_mean_each_count() -> None:
    differing = judge_fidelity.compare(
        ROWS, raw([1.0, 0.0]), aggregate(0.5, 1.0), report({"a": 1.0, "b": 1.0}, 1.0), aggregate(1.0, 1.0)
    )
    assert not differing["rewards_equal"] and not differing["mean_equal"] and not differing["aggregate_equal"]
    assert differing["aggregate_differences"] == [
        "env_simple_agent/agent_metrics/mean/reward",
        "env_simple_agent/key_metrics/mean/reward",
    ]
    missing = judge_fidelity.compare(
        ROWS, raw([1.0]), aggregate(1.0, 1.0), report({"a": 1.0}, 1.0), aggregate(1.0, 1.0)
    )
    assert missing["raw_rewards"] == [1.0, None] and not missing["rewards_equal"]
    errored = judge_fidelity.compare(
        ROWS, raw([1.0, 0.0]), aggregate(0.5, 1.0), report({"a": 1.0, "b": None}, 1.0, errors=("b",)),
        aggregate(0.5, 1.0, name="other_agent"),
    )  # fmt: skip
    assert errored["errors"] == ["b"] and not errored["rewards_equal"] and not errored["aggregate_equal"]
    empty = judge_fidelity.compare(ROWS, raw([1.0, 0.0]), [], report({"a": 1.0, "b": 0.0}, 0.5), [])
    assert not empty["aggregate_equal"] and not empty["mean_equal"]  # nothing compared is no equality


def test_the_stand_in_judge_is_deterministic_and_says_what_the_verifier_parses() -> None:
    verdicts = {judge_fidelity.verdict("false_statement_judge", f"request {n}") for n in range(40)}
    assert verdicts == set(judge_fidelity.VERDICTS["false_statement_judge"])
    assert judge_fidelity.verdict("simpleqa", "q") == judge_fidelity.verdict("simpleqa", "q")
    assert judge_fidelity.policy_text({"sql": "SELECT 1"}) == "```sql\nSELECT 1\n```"
    answers = {judge_fidelity.policy_text({"expected_answer": 7, "n": n}) for n in range(20)}
    assert len(answers) == 2 and any("\\boxed{7}" in text for text in answers)  # right for some rows, wrong for others
    row = {"question": "q"}
    assert judge_fidelity.policy_text(row) == judge_fidelity.policy_text(dict(row))  # identical rows, one answer
