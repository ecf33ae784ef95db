"""Gym's own figures beside the plugin's (its aggregate metrics file), and fractional rewards explained."""

from __future__ import annotations

import json
import re
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


def test_gyms_own_figures_are_in_the_json_report_the_page_and_the_markdown(tmp_path: Path) -> None:
    """Gym's majority@2 and the verifier's secondary scores were on the terminal only: every report shows them,
    from the summary's ``gym`` (the JSON report's schema holds them, and a page made afterwards from the JSON alone
    shows them too)."""
    import jsonschema

    from pytest_gym_eval.reporting import html, markdown
    from pytest_gym_eval.reporting.conclusion import Conclusion
    from pytest_gym_eval.reporting.gym_metrics import with_gym_figures
    from pytest_gym_eval.reporting.json_reading import conclusion_from_report
    from pytest_gym_eval.reporting.json_report import SCHEMA_PATH, build_report

    aggregate(tmp_path, "hotpotqa_agent", {"majority@2/accuracy": 80.0}, {"answer_f1": 0.8333, "is_correct": 0.8})
    results = results_for({"a": [1.0, 1.0], "b": [1.0, 0.0]}, agent="hotpotqa_agent")
    summaries = summarize(results, thresholds={}, gates={}, mode=GateMode.POINT)
    (summary,) = with_gym_figures(summaries, results, read_gym_metrics(tmp_path))
    report = build_report([summary], results, {})
    jsonschema.validate(report, json.loads(SCHEMA_PATH.read_text()))
    assert report["datasets"][0]["gym"] == {
        "agent": "hotpotqa_agent",
        "key_metrics": {"majority@2/accuracy": 80.0, "majority@2/no_answer": 0.0},
        "secondary": {"answer_f1": 0.8333, "is_correct": 0.8},
        "file": "rollouts_aggregate_metrics.json",
        "datasets": [summary.dataset],
    }
    conclusion = Conclusion([summary], [], None, -1, "")
    key = "majority@2/accuracy 80, majority@2/no_answer 0"
    where = "agent hotpotqa_agent, rollouts_aggregate_metrics.json"
    text = markdown.render_markdown(conclusion, results)
    assert f"| gym's own | {key} ({where}) |" in text
    assert "| secondary | answer_f1 0.8333, is_correct 0.8 (means over the rollouts, Gym's) |" in text
    read_back, rollouts = conclusion_from_report(json.loads(json.dumps(report)))
    for page in (html.render_page(conclusion, results, {}), html.render_page(read_back, rollouts, {})):
        row = re.search(r'<tr class="metric" data-metric="gym.key" >(.*?)</tr>', page, re.S)
        assert row and f'<td class="value">{key}</td><td class="explain">{where}</td>' in row.group(1)
        assert '<td class="value">answer_f1 0.8333, is_correct 0.8</td>' in page


def test_gyms_figures_of_an_agent_that_ran_several_datasets_say_so(tmp_path: Path) -> None:
    from dataclasses import replace

    from pytest_gym_eval.reporting.gym_metrics import with_gym_figures

    aggregate(tmp_path, "mcqa_simple_agent", {"pass@1/accuracy": 75.0}, {})
    results = results_for({"a": [1.0, 1.0]}) + [
        replace(r, dataset="other.jsonl", nodeid=r.nodeid.replace("mcqa", "other")) for r in results_for({"b": [0.0]})
    ]
    summaries = summarize(results, thresholds={}, gates={}, mode=GateMode.POINT)
    figures = [s.gym for s in with_gym_figures(summaries, results, read_gym_metrics(tmp_path))]
    assert [f.datasets if f else None for f in figures] == [(summaries[0].dataset, "other.jsonl")] * 2
    text = " ".join(terminal.render_summary(summaries, verbose=False, results=results, width=100,
                                            gym_metrics=read_gym_metrics(tmp_path)))  # fmt: skip
    assert f"over {summaries[0].dataset}, other.jsonl: Gym aggregates per agent" in " ".join(text.split())
