"""Gym's own figures beside the plugin's (its aggregate metrics file), and fractional rewards explained."""

from __future__ import annotations

import json
from pathlib import Path

from test_report import results_for

from pytest_gym_eval.reporting import terminal
from pytest_gym_eval.reporting.gym_metrics import read_gym_metrics
from pytest_gym_eval.reporting.summary import summarize
from pytest_gym_eval.stats.gates import GateMode

MRCR_REWARDS = {"t0": [0.9613], "t1": [0.9765], "t2": [0.9940], "t3": [0.9735], "t4": [0.9449]}


def aggregate(run_dir: Path, agent: str, key: dict[str, float], means: dict[str, float]) -> Path:
    """An ``*_aggregate_metrics.json`` of the shape ``gym eval run`` 0.7.0 writes (one entry per agent)."""
    path = run_dir / "gym-output" / "rollouts_aggregate_metrics.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    entry = {
        "agent_ref": {"name": agent},
        "agent_metrics": {
            **{f"mean/{k}": v for k, v in means.items()},
            "max/reward": 1.0,
            "pass@1/accuracy": 97.0,
            **({"majority@2/no_answer": 0.0} if "answer_f1" in means else {}),
        },
        "key_metrics": {"mean/input_tokens": 0.0, "mean/output_tokens": 0.0, **key},
        "group_level_metrics": [],
    }
    path.write_text(json.dumps([entry]))
    return path


def render(rewards: dict[str, list[float]], run_dir: Path | None = None, agent: str = "mcqa_simple_agent") -> str:
    results = results_for(rewards, agent=agent)
    summaries = summarize(results, thresholds={}, gates={}, mode=GateMode.POINT)
    lines = terminal.render_summary(
        summaries, verbose=False, results=results, width=100, gym_metrics=read_gym_metrics(run_dir)
    )
    return "\n".join(lines)


def test_fractional_rewards_say_what_the_pass_rate_and_the_mean_count(tmp_path: Path) -> None:
    # mrcr: rewards 0.94-0.99; at the default threshold 1.0 nothing passes, while the mean is 0.97 and Gym's own
    # pass@1 for the same rollouts is 97.0.
    aggregate(tmp_path, "mcqa_simple_agent", {"pass@1/accuracy": 97.0047, "pass@1[avg-of-1]/accuracy": 97.0047}, {})
    text = render(MRCR_REWARDS, tmp_path)
    assert "pass rate   0.00" in text and "mean reward 0.97" in text
    flat = " ".join(text.split())
    assert (
        "rewards fractional, from 0.94 to 0.99: the pass rate and pass@k count a rollout as passed at reward >= 1.00"
        " (the pass threshold; 0 of 5 reach it), while the mean reward averages the rewards themselves, which is"
        " what Gym's pass@1 reports (x100)"
    ) in flat
    assert "gym's own pass@1/accuracy 97, pass@1[avg-of-1]/accuracy 97 (agent mcqa_simple_agent," in flat
    assert "input_tokens" not in flat  # token means are the tokens line's business
    # Rewards of 0 and 1 need no explaining.
    assert "fractional" not in render({"a": [1.0], "b": [0.0]})


def test_the_verifiers_other_scores_appear_as_secondary_metrics(tmp_path: Path) -> None:
    # hotpotqa records answer_em, answer_f1 and is_correct per rollout beside the reward; Gym averages each.
    aggregate(tmp_path, "hotpotqa_agent", {"majority@2/accuracy": 80.0}, {"reward": 0.8, "answer_em": 0.8,
              "answer_f1": 0.8333, "is_correct": 0.8, "input_tokens": 0.0})  # fmt: skip
    flat = " ".join(render({"a": [1.0, 1.0], "b": [1.0, 0.0]}, tmp_path, agent="hotpotqa_agent").split())
    assert "secondary answer_em 0.8, answer_f1 0.8333, is_correct 0.8 (means over the rollouts, Gym's)" in flat
    assert (
        "gym's own majority@2/accuracy 80, majority@2/no_answer 0 (agent hotpotqa_agent, "
        "rollouts_aggregate_metrics.json)"
    ) in flat
    # Another agent's figures are not this dataset's.
    assert "gym's own" not in render({"a": [1.0]}, tmp_path, agent="other_agent")


def test_unreadable_or_foreign_metrics_files_are_left_out(tmp_path: Path) -> None:
    output = tmp_path / "gym-output"
    output.mkdir()
    (output / "a_aggregate_metrics.json").write_text("{not json")
    (output / "b_aggregate_metrics.json").write_text(json.dumps([{"agent_ref": "x"}, 3, {"key_metrics": {}}]))
    assert read_gym_metrics(tmp_path) == {} and read_gym_metrics(None) == {}
    assert read_gym_metrics(tmp_path / "missing") == {}
