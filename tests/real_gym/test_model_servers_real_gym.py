"""A judge environment of the real Gym 0.7.0 with its judge bound by name (``--gym-model-server``): Gym's own
over_refusal_detection, whose config names ``judge_model`` with a null ``${judge_base_url}``. The policy's answers
come from the replay model server, the judge is a second OpenAI-compatible endpoint on 127.0.0.1 (a stand-in
that gives its verdict by the prompt it judges), and the rewards are Gym's verifier reading those verdicts."""

from __future__ import annotations

import json
import shutil
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from pytest_gym_eval import provision
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
                judged = json.dumps(body).split(LAST_PART)[-1]  # the template's own examples name a basketball
                verdict = "[[REFUSED]]" if REFUSED in judged else "[[COMPLIED]]"
                response = answer([], f"Analysis: judged.\n{verdict}")["response"]
                self._send({**response, "model": "judge"})

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
