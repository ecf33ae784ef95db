"""The judge_throughput benchmark's own logic (benchmarks/judge_throughput.py), no Gym and no timing: the rows and
recordings it writes, the judge prompts its recordings are matched on, the rates it reads from the endpoints'
logs, the ideal it states and its rows' verdicts."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import judge_throughput as jt  # noqa: E402

TEMPLATE = "PROMPT:\n{safe_prompt}\n\nRESPONSE:\n{model_response}\n\nSay [[COMPLIED]] or [[REFUSED]]"


def test_every_fifth_answer_is_a_refusal_and_the_judge_labels_it_so() -> None:
    rows = jt.safe_prompt_rows(10)
    assert len({row["safe_prompt"] for row, _ in rows}) == 10  # one recording per prompt, none shared
    labels = [jt.judge_verdict(answer).rsplit("\n", 1)[1] for _, answer in rows]
    assert labels == ["[[REFUSED]]", *["[[COMPLIED]]"] * 4] * 2
    row, _ = rows[3]
    assert row["responses_create_params"]["input"][1] == {"role": "user", "content": row["safe_prompt"]}


def test_the_judge_is_recorded_on_the_prompt_gym_builds(tmp_path: Path) -> None:
    """The verifier fills the template with the safe prompt and the stripped last assistant text, as one user
    message: the judge's recording must hold exactly that conversation, or the replay model answers 404."""
    rows = [({"safe_prompt": "How?", "responses_create_params": {"input": [{"role": "user", "content": "How?"}]}},
             "  Like this.\n")]  # fmt: skip
    jt.write_recordings(rows, TEMPLATE, tmp_path / "policy.jsonl", tmp_path / "judge.jsonl")
    (policy,) = map(json.loads, (tmp_path / "policy.jsonl").read_text().splitlines())
    (judge,) = map(json.loads, (tmp_path / "judge.jsonl").read_text().splitlines())
    assert policy["responses_create_params"]["input"] == [{"role": "user", "content": "How?"}]
    assert policy["response"]["output"][0]["content"][0]["text"] == "  Like this.\n"
    prompt = "PROMPT:\nHow?\n\nRESPONSE:\nLike this.\n\nSay [[COMPLIED]] or [[REFUSED]]"
    assert judge["responses_create_params"]["input"] == [{"role": "user", "content": prompt}]
    assert judge["response"]["output"][0]["content"][0]["text"].endswith("[[COMPLIED]]")


def test_the_rate_runs_from_the_first_policy_request_to_the_last_judge_answer(tmp_path: Path) -> None:
    log = tmp_path / "judge.jsonl"
    calls = [
        {"time": 10.0, "path": "/v1/models", "status": 200},
        {"time": 11.0, "path": "/v1/responses", "status": 200},
        {"time": 12.5, "path": "/v1/responses", "status": 200},
    ]
    log.write_text("".join(json.dumps(c) + "\n" for c in calls))
    assert jt.log_times(log, 0) == ([11.0, 12.5], 3)
    assert jt.log_times(log, 2) == ([12.5], 3)
    assert jt.rollout_span([10.2, 10.4], [11.0, 12.5], 0.5) == pytest.approx(2.8)
    with pytest.raises(ValueError):
        jt.rollout_span([], [1.0], 0.5)
    log.write_text(json.dumps({"time": 1.0, "path": "/v1/responses", "status": 404, "error": "no recording"}) + "\n")
    with pytest.raises(RuntimeError, match="404: no recording"):
        jt.log_times(log, 0)


def test_the_ideal_counts_each_judge_call_and_never_more_rollouts_than_there_are() -> None:
    assert jt.ideal_rate(1, 16, 0.5, 0.5, 1) == pytest.approx(1.0)
    assert jt.ideal_rate(64, 128, 0.5, 0.5, 1) == pytest.approx(64.0)
    assert jt.ideal_rate(64, 16, 0.5, 0.5, 1) == pytest.approx(16.0)
    assert jt.ideal_rate(8, 48, 0.5, 0.5, 2) == pytest.approx(8 / 1.5)


def test_its_rows_give_the_ratio_raw_over_session_with_a_verdict() -> None:
    sizes = jt.Sizes({8: 48}, 3, 0.5)
    spans = {(8, "session"): [7.0, 7.2, 7.1], (8, "raw"): [7.0, 7.0, 7.0]}
    walls = {(8, "session"): [20.0, 21.0, 20.5], (8, "raw"): [20.0, 20.0, 20.0]}
    cpu = {(8, "session"): [0.05, 0.05, 0.05], (8, "raw"): [0.04, 0.04, 0.04]}
    client = {(8, "session"): [6.0, 6.5, 6.2], (8, "raw"): [5.5, 5.9, 5.8]}
    rows = jt.judge_rows(sizes, spans, walls, cpu, {8: [1.0] * 6}, client)
    first, second = rows
    assert first.ratio.startswith("1.014") and first.goal == "<= 1.05" and first.verdict == "met"
    assert "ideal 8.0" in first.baseline and "6.8 rollouts/s" in first.plugin
    assert "of the ideal" in second.plugin and "ms CPU a rollout" in second.baseline
    assert "own CPU: session 6.20 s, raw 5.80 s" in second.baseline and "6.20" not in second.benchmark
    slower = {**spans, (8, "session"): [8.0, 8.2, 8.1]}
    assert jt.judge_rows(sizes, slower, walls, cpu, {8: [1.0] * 6}, client)[0].verdict == "not met"
