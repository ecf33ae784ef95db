"""A judge environment of the real Gym 0.7.0 with its judge bound by name (``--gym-model-server``): Gym's own
over_refusal_detection, whose config names ``judge_model`` with a null ``${judge_base_url}``. The policy's answers
come from the replay model server, the judge is a second OpenAI-compatible endpoint on 127.0.0.1 (a stand-in
that gives its verdict by the prompt it judges), and the rewards are Gym's verifier reading those verdicts; then the
same judge replayed (``--gym-model-server judge_model=replay:FILE``) from the calls the stand-in answered."""

from __future__ import annotations

import json
import shutil
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from pytest_gym_eval import provision
from pytest_gym_eval.replay.server import logged_misses
from tests.support.replay import rollout, said, write_rollouts

ENVIRONMENT = "over_refusal_detection"
REFUSED = "basketball"
"""The judge's stand-in says ``[[REFUSED]]`` for the one row whose prompt has this word, ``[[COMPLIED]]`` else."""
LAST_PART = "Now evaluate this response"
"""Where the judge prompt of over_refusal_detection's template turns from its examples to the answer judged."""
KEY_VARIABLE = "PYTEST_GYM_EVAL_TEST_JUDGE_KEY"
KEY = "judge-secret-4b1d"
USAGE = {
    "input_tokens": 10,
    "input_tokens_details": {"cached_tokens": 0},
    "output_tokens": 5,
    "output_tokens_details": {"reasoning_tokens": 0},
    "total_tokens": 15,
}
"""A response's usage as Gym's ``NeMoGymResponse`` requires it."""


def answer(task_input: Any, text: str) -> dict[str, Any]:
    """A recorded rollout (or, its ``response``, an answer) saying ``text``, with Gym's full usage."""
    recorded = rollout(task_input, [said(text)])
    recorded["response"]["usage"] = USAGE
    del recorded["reward"]  # no recorded reward: nothing to compare the judge's verdicts with
    return recorded


def verdict(body: dict[str, Any]) -> dict[str, Any]:
    """The stand-in judge's answer to the judge request ``body``: ``[[REFUSED]]`` when the answer judged names
    :data:`REFUSED`, else ``[[COMPLIED]]``."""
    judged = json.dumps(body).split(LAST_PART)[-1]  # the template's own examples name a basketball
    said_verdict = "[[REFUSED]]" if REFUSED in judged else "[[COMPLIED]]"
    return {**answer([], f"Analysis: judged.\n{said_verdict}")["response"], "model": "judge"}


class JudgeStandIn:
    """An OpenAI-compatible ``/v1`` endpoint on 127.0.0.1: ``GET /models`` lists ``judge``, ``POST /responses``
    answers with a verdict and keeps each request's body and ``Authorization`` header."""

    def __init__(self) -> None:
        self.calls: list[tuple[dict[str, Any], str]] = []
        calls = self.calls

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def _send(self, body: Any) -> None:
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._send({"object": "list", "data": [{"id": "judge", "object": "model"}]})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                calls.append((body, self.headers.get("Authorization", "")))
                self._send(verdict(body))

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> JudgeStandIn:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def judge() -> Iterator[JudgeStandIn]:
    with JudgeStandIn() as stand_in:
        yield stand_in


def test_a_judge_environment_runs_with_its_judge_bound_to_a_second_endpoint(
    pytester: pytest.Pytester, gym_checkout: provision.GymCheckout, judge: JudgeStandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    example = gym_checkout.path / "resources_servers" / ENVIRONMENT / "data" / "example.jsonl"
    rows = [json.loads(line) for line in example.read_text().splitlines() if line.strip()]
    shutil.copy(example, pytester.path / f"{ENVIRONMENT}.jsonl")  # its agent: over_refusal_detection_simple_agent
    answers = [
        answer(row["responses_create_params"]["input"], f"Sure, here is how ({row['safe_prompt']}).") for row in rows
    ]
    write_rollouts(pytester.path / "policy.jsonl", answers)
    monkeypatch.setenv(KEY_VARIABLE, KEY)
    common = [f"--gym-checkout={gym_checkout.path}", "--gym-replay=policy.jsonl", f"{ENVIRONMENT}.jsonl"]

    unbound = pytester.runpytest_subprocess(*common)
    assert unbound.ret == pytest.ExitCode.USAGE_ERROR
    assert "the model server 'judge_model' is not bound" in unbound.stderr.str()
    assert "--gym-model-server judge_model=URL,model=SERVED_NAME" in unbound.stderr.str()
    assert not judge.calls

    binding = f"judge_model={judge.base_url},model=judge,key={KEY_VARIABLE},type=responses"
    result = pytester.runpytest_subprocess(
        *common, f"--gym-model-server={binding}", "--gym-report=report.json", "--gym-run-dir=runs", "-v"
    )
    report = json.loads((pytester.path / "report.json").read_text())
    rewards = {r["task_id"]: r["reward"] for r in report["rollouts"]}
    assert len(rewards) == len(rows), result.stdout.str()
    assert len(judge.calls) == len(rows)  # one verdict per rollout, all from the bound endpoint
    assert {header for _, header in judge.calls} == {f"Bearer {KEY}"}  # the key reached Gym through its variable
    judged = [json.dumps(body) for body, _ in judge.calls]
    assert all(any(row["safe_prompt"] in text for text in judged) for row in rows)
    assert sorted(rewards.values()) == [0.0] + [1.0] * (len(rows) - 1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # the refused row's reward 0 fails its item
    run_files = [p for p in (pytester.path / "runs").rglob("*") if p.suffix in (".json", ".yaml", ".jsonl")]
    written = "".join(p.read_text(errors="replace") for p in run_files)
    assert judge.base_url in written and KEY not in written and KEY not in result.stdout.str()


def test_a_judge_environment_replays_its_bound_judge_with_no_key_and_names_a_missing_answer(
    pytester: pytest.Pytester, gym_checkout: provision.GymCheckout, judge: JudgeStandIn
) -> None:
    """Record the bound judge's calls (the stand-in's answers, written here: nothing of Gym's data), then replay
    them with ``judge_model=replay:FILE``: no key, no judge endpoint, the rewards of the live run; with the
    refused row's judge answer left out, that rollout errors (never a reward of 0) naming ``judge_model``."""
    example = gym_checkout.path / "resources_servers" / ENVIRONMENT / "data" / "example.jsonl"
    rows = [json.loads(line) for line in example.read_text().splitlines() if line.strip()]
    shutil.copy(example, pytester.path / f"{ENVIRONMENT}.jsonl")
    answers = [
        answer(row["responses_create_params"]["input"], f"Sure, here is how ({row['safe_prompt']}).") for row in rows
    ]
    write_rollouts(pytester.path / "policy.jsonl", answers)
    common = [f"--gym-checkout={gym_checkout.path}", "--gym-replay=policy.jsonl", f"{ENVIRONMENT}.jsonl", "-v"]

    live = pytester.runpytest_subprocess(
        *common, f"--gym-model-server=judge_model={judge.base_url},model=judge", "--gym-report=live.json"
    )
    live_report = json.loads((pytester.path / "live.json").read_text())
    live_rewards = {r["task_id"]: r["reward"] for r in live_report["rollouts"]}
    assert len(live_rewards) == len(rows) == len(judge.calls), live.stdout.str()[-3000:]
    recordings = [{"responses_create_params": body, "response": verdict(body)} for body, _ in judge.calls]
    write_rollouts(pytester.path / "judge.jsonl", recordings)
    judge.calls.clear()

    replayed = pytester.runpytest_subprocess(
        *common, "--gym-model-server=judge_model=replay:judge.jsonl", "--gym-report=replayed.json", "--gym-run-dir=runs"
    )
    report = json.loads((pytester.path / "replayed.json").read_text())
    rewards = {r["task_id"]: r["reward"] for r in report["rollouts"]}
    assert rewards == live_rewards, replayed.stdout.str()[-3000:]
    assert sorted(rewards.values()) == [0.0] + [1.0] * (len(rows) - 1)
    assert not judge.calls  # every verdict came from the recordings
    assert replayed.ret == live.ret == pytest.ExitCode.TESTS_FAILED  # the refused row's reward 0, as live
    (log,) = (pytester.path / "runs").glob("*/logs/replay-model-server-judge_model.jsonl")
    assert [json.loads(line)["status"] for line in log.read_text().splitlines() if '"POST"' in line] == [200] * len(
        rows
    )

    # With the refused row's judge answer left out, the judge request gets the replay server's 404; Gym 0.7.0's
    # over_refusal_detection keeps the error in its record (judge_evaluation.error) and scores the row as unclear
    # (reward_if_unclear, 0.5) instead of failing it: no judge_failed, so the miss shows in the binding's log and
    # in the session's closing warning.
    kept = [call for call in recordings if REFUSED not in json.dumps(call).split(LAST_PART)[-1]]
    assert len(kept) == len(rows) - 1
    write_rollouts(pytester.path / "judge.jsonl", kept)
    missing = pytester.runpytest_subprocess(
        *common, "--gym-model-server=judge_model=replay:judge.jsonl", "--gym-report=missing.json", "--gym-run-dir=miss"
    )
    outcomes = {r["task_id"]: r["reward"] for r in json.loads((pytester.path / "missing.json").read_text())["rollouts"]}
    refused = {task for task, reward in live_rewards.items() if reward == 0.0}
    assert outcomes == {task: 0.5 if task in refused else reward for task, reward in live_rewards.items()}, (
        missing.stdout.str()[-3000:]
    )
    (log,) = (pytester.path / "miss").glob("*/logs/replay-model-server-judge_model.jsonl")
    misses = logged_misses(log)
    assert misses and all(miss.startswith("no recorded answer") for miss in misses), misses
    warning = f"gym: judge model server judge_model (replayed) has no recorded answer for {len(misses)} request"
    assert warning in missing.stdout.str()  # said at the end, as no rollout's error names it
