"""Token usage, latency and cost in a pytest session against the stand-in ``gym`` (reading them:
tests/unit/test_usage.py; against real Gym: tests/real_gym/test_usage_real_gym.py)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from pytest_gym_eval.outcomes.usage import (
    Usage,
)
from pytest_gym_eval.reporting.junit_values import SYSTEM_OUT_PREFIX as PREFIX
from pytest_gym_eval.reporting.summary import RolloutResult
from tests.support.fakes import FakeGym


def result(task: str, reward: float | None, usage: Usage, dataset: str = "d.jsonl") -> RolloutResult:
    status = "error" if reward is None else "passed" if reward >= 1.0 else "failed"
    return RolloutResult(f"{dataset}::{task}[r0]", dataset, task, 0, "agent", status, reward, usage=usage)


def test_token_totals_equal_the_sums_over_gyms_records(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    rows = [
        {"id": f"t{n}", "responses_create_params": {"input": f"Q{n}?"}, "fake": fake}
        for n, fake in enumerate(
            [
                {"usage": {"input_tokens": 120, "output_tokens": 7, "total_tokens": 127}, "latency_ms": 900},
                {"usage": {"input_tokens": 80, "output_tokens": 30, "total_tokens": 110}, "reward": 0.0},
                {"failure": "agent_run_error"},
                {},
            ]
        )
    ]
    (pytester.path / "mcqa.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = pytester.runpytest(
        *fake_gym.args, "mcqa.jsonl", "--gym-run-dir=runs", "--gym-report=report.json", "--junitxml=junit.xml",
        "--gym-price-per-mtok=2:8",
    )  # fmt: skip
    result.assert_outcomes(passed=2, failed=1, errors=1)
    (run_dir,) = (pytester.path / "runs").iterdir()
    records = [json.loads(line) for line in (run_dir / "gym-output" / "rollouts.jsonl").read_text().splitlines()]
    sums = [
        sum(r.get("response", {}).get("usage", {}).get(key, 0) for r in records)
        for key in ("input_tokens", "output_tokens", "total_tokens")
    ]
    assert sums == [200, 37, 237]
    report = json.loads((pytester.path / "report.json").read_text())
    assert report["datasets"][0]["tokens"] == {"input": 200, "output": 37, "total": 237, "rollouts": 2}
    assert report["datasets"][0]["cost"] == pytest.approx((200 * 2 + 37 * 8) / 1e6)
    assert report["meta"]["price_per_mtok.input"] == 2.0
    result.stdout.fnmatch_lines(["*tokens*237 total: 200 in, 37 out, over 2 rollouts*", "*latency*median 0.9 s*"])
    # Per rollout: in the testcase's system-out line under xunit2 (pytest's default family).
    testcases = {c.get("name"): c for c in ET.parse(pytester.path / "junit.xml").getroot().iter("testcase")}
    out = testcases["t0[r0]"].findtext("system-out") or ""
    (line,) = [text for text in out.splitlines() if text.startswith(PREFIX)]
    values = json.loads(line.removeprefix(PREFIX))
    usage = (values["input_tokens"], values["output_tokens"], values["total_tokens"], values["latency"])
    assert usage == (120, 7, 127, 0.9)


def test_latency_option_turns_on_gyms_observability(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    (pytester.path / "mcqa.jsonl").write_text(json.dumps({"id": "a", "responses_create_params": {"input": "?"}}) + "\n")
    pytester.runpytest(*fake_gym.args, "mcqa.jsonl", "--gym-run-dir=runs", "--gym-latency").assert_outcomes(passed=1)
    pytester.runpytest(*fake_gym.args, "mcqa.jsonl", "--gym-run-dir=runs").assert_outcomes(passed=1)
    first, second = sorted((pytester.path / "runs").iterdir(), key=lambda p: p.stat().st_mtime)
    config = json.loads((first / "gym-config.yaml").read_text())
    assert config["observability_enabled"] is True
    assert config["model_call_capture_dir"] == str(first / "gym-output" / "model-calls")
    assert "observability_enabled" not in json.loads((second / "gym-config.yaml").read_text())
