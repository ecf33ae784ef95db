"""What the reports hold beside the verdicts, in whole sessions against the stand-in ``gym``: Gym's own figures
(its aggregate metrics file) in the JSON report, the HTML page and the Markdown summary as on the terminal; each test
function's outcome over its rollout (which test failed, on which rollout, why) in the JSON report and on the page."""

from __future__ import annotations

import json
import re

import jsonschema
import pytest

from pytest_gym_eval.reporting.json_report import SCHEMA_PATH
from tests.support.fakes import FakeGym


def write_dataset(pytester: pytest.Pytester, rewards: dict[str, float]) -> None:
    rows = [
        {"id": task, "responses_create_params": {"input": [{"role": "user", "content": "ping"}]}, "fake": {"reward": r}}
        for task, r in rewards.items()
    ]
    (pytester.path / "mcqa.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))


def test_gyms_own_figures_are_in_every_report(
    pytester: pytest.Pytester, fake_gym: FakeGym, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stand-in writes Gym's aggregate metrics (pass@1/accuracy 50.0 for rewards 1 and 0): the terminal showed
    them, the JSON report, the page and the Markdown summary did not."""
    monkeypatch.setenv("FAKE_GYM_AGGREGATE_DELAY", "0")
    write_dataset(pytester, {"ta": 1.0, "tb": 0.0})
    result = pytester.runpytest_subprocess(
        *fake_gym.args, "-p", "no:randomly", "mcqa.jsonl", "--gym-report=r.json", "--gym-html=p.html",
        "--gym-markdown=s.md",
    )  # fmt: skip
    figures = "pass@1/accuracy 50 (agent mcqa_simple_agent, rollouts_aggregate_metrics.json)"
    assert figures in " ".join(result.stdout.str().split()), result.stdout.str()[-2000:]
    report = json.loads((pytester.path / "r.json").read_text())
    jsonschema.validate(report, json.loads(SCHEMA_PATH.read_text()))
    gym = report["datasets"][0]["gym"]
    assert (gym["agent"], gym["key_metrics"], gym["datasets"]) == (
        "mcqa_simple_agent",
        {"pass@1/accuracy": 50.0},
        ["mcqa.jsonl"],
    )
    assert f"| gym's own | {figures} |" in (pytester.path / "s.md").read_text()
    page = (pytester.path / "p.html").read_text(encoding="utf-8")
    row = re.search(r'<tr class="metric" data-metric="gym.key" >(.*?)</tr>', page, re.S)
    assert row and '<td class="value">pass@1/accuracy 50</td>' in row.group(1)
