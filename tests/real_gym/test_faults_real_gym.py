"""Faults at the model endpoint, against real Gym: each reaches the user as an item error naming its cause and
the log line that shows it, and rollouts hung at the endpoint error together after one bounded wait.

One child pytest session (its own Gym, ~3 minutes) evaluates Gym's mcqa example with the policy model behind the
fault proxy (tests/support/fault_proxy.py) in front of the project's replay model. Each row's prompt is tagged
``[case NAME]`` and the proxy misbehaves for that tag only: the endpoint answering 429, a 500, a 400
``invalid_prompt``, a Responses body missing the fields Gym's ``NeMoGymResponse`` requires (what a llama.cpp
server answered, issue 12), a body that is not JSON, two requests that hang; one row has no recording (the
replay model's 404); one is answered normally.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pytest_gym_eval.gym.processes import session_members
from pytest_gym_eval.replay import ReplayServer
from tests.support.fault_proxy import RESPONSES_FIELDS_GYM_NEEDS, FaultProxy, Rule, openai_error
from tests.support.real_gym import GymExample

ROLLOUT_TIMEOUT = 20.0
"""The session's --gym-rollout-timeout: well above the ~1 s Gym's retries take, small for the tier's time."""

RULES = {
    "rate-limit": Rule("status", status=429, body=openai_error(
        "Rate limit reached for gpt-4.1 in organization org-abc on tokens per min (TPM): Limit 30000, Used 30000.",
        "requests", "rate_limit_exceeded")),
    "server-error": Rule("status", status=500, body=openai_error(
        "The server had an error while processing your request. Sorry about that!", "server_error", None)),
    "invalid-prompt": Rule("status", status=400, body=openai_error(
        "Invalid prompt: your prompt was flagged as potentially violating our usage policy.",
        "invalid_request_error", "invalid_prompt")),
    "bad-body": Rule("drop_fields", fields=RESPONSES_FIELDS_GYM_NEEDS),
    "not-json": Rule("not_json"),
    "hang-one": Rule("hang"),
    "hang-two": Rule("hang"),
}  # fmt: skip
CASES = ["ok", *RULES, "no-recording"]

EXPECTED = {
    "rate-limit": (
        "policy model: HTTP 429 rate_limit_exceeded: Rate limit reached for gpt-4.1 in organization org-abc on "
        "tokens per min (TPM): Limit 30000, Used 30000.",
        "model_http_429",
        "status=429",
    ),
    "server-error": (
        "policy model: HTTP 500 server_error: The server had an error while processing your request. Sorry about that!",
        "model_http_500",
        "status=500",
    ),
    "invalid-prompt": (
        "policy model: HTTP 400 invalid_prompt: Invalid prompt: your prompt was flagged as potentially violating "
        "our usage policy.",
        "model_http_400",
        "status=400",
    ),
    "bad-body": (
        "policy model: response rejected by Gym (ValidationError: 4 validation errors for NeMoGymResponse: "
        "parallel_tool_calls, tool_choice, tools, usage.output_tokens_details: Field required)",
        "model_bad_response",
        "ValidationError: 4 validation errors for NeMoGymResponse",
    ),
    "not-json": (
        "policy model: response rejected by Gym (JSONDecodeError: *)",
        "model_bad_response",
        "JSONDecodeError: ",
    ),
    "no-recording": (
        "policy model: HTTP 404 no_recording: no recorded answer: the conversation departs from the closest "
        'recording*"[[]case no-recording]*',
        "replay_no_recording",
        "status=404",
    ),
}
"""Per faulty case: the error's first line (fnmatch pattern), its failure class, text of the log line it cites."""

ERROR_TIMES_CONFTEST = """
import json, os
def pytest_runtest_logreport(report):
    if report.when == "setup" and report.failed:
        with open(os.path.join(os.path.dirname(__file__), "error-times.jsonl"), "a") as f:
            f.write(json.dumps({"nodeid": report.nodeid, "stop": report.stop}) + "\\n")
"""


@dataclass
class FaultyRun:
    """The child session's results: its output, exit status, run directory, JUnit and JSON report, when each
    item's error was reported (epoch seconds) and every request the proxy saw."""

    root: Path
    output: str
    returncode: int
    proxy: FaultProxy
    times: dict[str, float]

    @property
    def run_dir(self) -> Path:
        (run_dir,) = (self.root / "runs").iterdir()
        return run_dir

    def error_section(self, case: str) -> list[str]:
        """The lines of the ``ERROR at setup of <case>[r0]`` section."""
        lines = self.output.splitlines()
        header = re.compile(rf"ERROR at setup of {re.escape(case)}\[r0\]")
        start = next(i for i, line in enumerate(lines) if header.search(line))
        end = next(i for i in range(start + 1, len(lines)) if re.match(r"^(_{3,} |={3,} |-{3,} )", lines[i]))
        return lines[start + 1 : end]

    def junit_classes(self) -> dict[str, str | None]:
        from tests.support.junit import junit_rollouts

        return {
            name.removesuffix("[r0]"): values.get("failure_class")
            for name, values in junit_rollouts(self.root / "junit.xml").items()
        }

    def report(self) -> dict[str, Any]:
        return json.loads((self.root / "report.json").read_text())


def tagged(row: dict[str, Any], case: str) -> dict[str, Any]:
    """A copy of a row (or a recording) whose first user message starts with ``[case <case>] ``."""
    copy = json.loads(json.dumps(row))
    message = copy["responses_create_params"]["input"][0]
    message["content"] = f"[case {case}] " + message["content"]
    return copy


@pytest.fixture(scope="module")
def faulty_run(gym_example: GymExample, tmp_path_factory: pytest.TempPathFactory) -> Iterator[FaultyRun]:
    root = tmp_path_factory.mktemp("faults")
    rows = [json.loads(line) for line in gym_example.dataset.read_text().splitlines()]
    recordings = {  # by the conversation's first message (the recordings add bookkeeping fields to it)
        r["responses_create_params"]["input"][0]["content"]: r
        for r in map(json.loads, gym_example.recordings.read_text().splitlines())
    }
    dataset, recorded = [], []
    for number, case in enumerate(CASES):
        row = rows[number % len(rows)]
        dataset.append({**tagged(row, case), "uuid": case})
        if case != "no-recording":
            recorded.append(tagged(recordings[row["responses_create_params"]["input"][0]["content"]], case))
    (root / "datasets").mkdir()
    (root / "datasets" / "mcqa.jsonl").write_text("".join(json.dumps(r) + "\n" for r in dataset))
    (root / "recordings.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recorded))
    (root / "pytest.ini").write_text("[pytest]\n")
    (root / "conftest.py").write_text(ERROR_TIMES_CONFTEST)
    rules = [Rule(**{**vars(rule), "prompt": f"[case {case}]", "used": 0}) for case, rule in RULES.items()]
    with (
        ReplayServer([root / "recordings.jsonl"], log_path=root / "replay.jsonl") as replay,
        FaultProxy(replay.base_url, rules) as proxy,
    ):
        child = subprocess.run(
            [
                sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rA",
                f"--gym-checkout={gym_example.checkout}", f"--gym-model-url={proxy.base_url}", "--gym-model=replay",
                "--gym-run-dir=runs",
                f"--gym-rollout-timeout={ROLLOUT_TIMEOUT:g}", "--junitxml=junit.xml", "--gym-report=report.json",
                "datasets/mcqa.jsonl",
            ],
            cwd=root, capture_output=True, text=True, timeout=1200, env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )  # fmt: skip
    (root / "child-output.txt").write_text(child.stdout + child.stderr)  # for a reader of a failed test
    times_path = root / "error-times.jsonl"
    times = {
        row["nodeid"].split("::")[-1].removesuffix("[r0]"): row["stop"]
        for row in map(json.loads, times_path.read_text().splitlines() if times_path.exists() else [])
    }
    yield FaultyRun(root, child.stdout + child.stderr, child.returncode, proxy, times)


@pytest.mark.parametrize("case", list(EXPECTED))
def test_an_endpoint_fault_names_its_cause_and_log_line(faulty_run: FaultyRun, case: str) -> None:
    summary, failure_class, logged = EXPECTED[case]
    section = faulty_run.error_section(case)
    assert section, faulty_run.output[-5000:]
    assert re.fullmatch(_fnmatch_regex(summary), section[0]), "\n".join(section)
    assert section[1].startswith("log: "), "\n".join(section)
    path, _, line = section[1].removeprefix("log: ").rpartition(":")
    assert Path(path) == faulty_run.run_dir / "logs" / "gym-servers" / "policy_model.log"
    cited = Path(path).read_text(errors="replace").splitlines()[int(line) - 1]
    assert logged in cited, cited
    assert section[2].startswith("Gym recorded the rollout as failed (agent_run_error: 500")
    assert re.fullmatch(r"record: .*/gym-output/rollouts_failures\.jsonl:\d+", section[3])
    assert faulty_run.junit_classes()[case] == failure_class


def _fnmatch_regex(pattern: str) -> str:
    import fnmatch

    return fnmatch.translate(pattern).removesuffix(r"\Z").removeprefix("(?s:").removesuffix(")")


def test_failure_classes_agree_in_terminal_junit_and_report(faulty_run: FaultyRun) -> None:
    report = faulty_run.report()
    classes = Counter(r["failure_class"] for r in report["rollouts"] if r["status"] == "error")
    junit = Counter(c for c in faulty_run.junit_classes().values() if c is not None)
    assert classes == junit == Counter(
        {"model_http_429": 1, "model_http_500": 1, "model_http_400": 1, "model_bad_response": 2,
         "replay_no_recording": 1, "rollout_timeout": 2}
    )  # fmt: skip
    lines = faulty_run.output.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("  errors      "))
    text = lines[start].removeprefix("  errors      ")
    for line in lines[start + 1 :]:  # the line wraps under its value column
        if not line.startswith(" " * 14) or not line.strip():
            break
        text += " " + line.strip()
    shown = dict(part.rsplit(" ", 1) for part in text.split(", "))
    assert {name: int(count) for name, count in shown.items()} == dict(classes)
    assert report["rollouts"][0]["status"] == "passed"  # the row answered normally


def test_gym_retries_a_failing_endpoint_three_times_at_most(faulty_run: FaultyRun) -> None:
    # Gym's model server retries 404/408/429/500/502/503/504/520 (3 attempts in all, 0.5 s apart): a cause shows
    # about a second after the first refusal, and a 429 forever does not hold the run.
    attempts = Counter(
        case for request in faulty_run.proxy.seen() for case in CASES if f"[case {case}]" in request.body
    )
    assert attempts["rate-limit"] == attempts["server-error"] == attempts["no-recording"] == 3
    assert attempts["invalid-prompt"] == attempts["bad-body"] == attempts["not-json"] == 1
    limited = [r.time for r in faulty_run.proxy.seen() if "[case rate-limit]" in r.body]
    assert max(limited) - min(limited) < 10


def test_hung_rollouts_error_together_after_one_bounded_wait(faulty_run: FaultyRun) -> None:
    one, two = faulty_run.times["hang-one"], faulty_run.times["hang-two"]
    # One timeout after another would put them ROLLOUT_TIMEOUT apart; a stall gives up every pending rollout at once.
    assert abs(one - two) < 1.0
    # The wait counts from the last progress: the last rollout that landed (the faulty ones, ~1 s after their
    # last request reached the proxy), not from each item's start.
    last_request = max(
        r.time for r in faulty_run.proxy.seen() if not any(f"[case hang-{n}]" in r.body for n in ("one", "two"))
    )
    assert ROLLOUT_TIMEOUT - 1 <= min(one, two) - last_request <= ROLLOUT_TIMEOUT + 30
    for case in ("hang-one", "hang-two"):
        section = faulty_run.error_section(case)
        assert section[0] == (
            f"no rollout landed for {ROLLOUT_TIMEOUT:g} s (--gym-rollout-timeout, counted from the last rollout Gym "
            "wrote; 7 had landed), so every rollout still pending errors now"
        )
        assert (
            section[1] == "still pending (2 of 9): datasets/mcqa.jsonl::hang-one[r0], datasets/mcqa.jsonl::hang-two[r0]"
        )
        eval_log = faulty_run.run_dir / "logs" / "gym-eval-run.log"
        assert re.fullmatch(
            rf"gym eval run's last progress: Finished 7 / 9 rollouts \(77%\) .* Examples left: mcqa_simple_agent: 2 "
            rf"\({re.escape(str(eval_log))}:\d+\)",
            section[2],
        ), section[2]
    assert faulty_run.junit_classes()["hang-one"] == faulty_run.junit_classes()["hang-two"] == "rollout_timeout"
    # The faulty rows, whose failures Gym had recorded, report their own causes at that moment too.
    assert all(abs(faulty_run.times[case] - one) < 1.0 for case in EXPECTED)


def test_nothing_is_left_running(faulty_run: FaultyRun) -> None:
    started = [json.loads(line) for line in (faulty_run.run_dir / "processes.jsonl").read_text().splitlines()]
    assert started and [p["sid"] for p in started if session_members(p["sid"])] == []
    assert faulty_run.returncode == pytest.ExitCode.TESTS_FAILED
