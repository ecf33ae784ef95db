"""One verdict, told the same everywhere (issue 36, item 3): for many generated gate configurations (datasets of the
stand-in ``gym``'s rewards, gates of every kind: reward statistics, a custom metric from the command line or a test's
mark, a policy comparison's hypotheses; ``-k`` selections, ``-x`` stopping the session early, errored rollouts,
inconclusive passing, shards then ``merge``), every artefact gives each gate the same verdict and the session the
same exit status: the exit status, the terminal summary (each gate's line, word for word), the JUnit file, the JSON
report's ``verdicts``, the Markdown summary and the GitHub annotations.

Seeded (:data:`SEED`), so a failure names its configuration and reproduces."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from pytest_gym_eval.reporting.json_reading import verdict_from_json
from pytest_gym_eval.reporting.json_report import SCHEMA_PATH
from pytest_gym_eval.reporting.junit import gate_testcase_id
from pytest_gym_eval.reporting.verdicts import NOT_DATASET_GATES
from tests.support.fakes import FakeGym

SEED = 36
CONFIGS = 8
"""Generated session configurations (1 to 4 s each against the stand-in, by the machine's load)."""

TESTS = """
import pytest


@pytest.mark.gym_rollouts("mcqa.jsonl"{mark})
def test_shape(gym_rollout):
    gym_rollout.record_metric("boxed", "boxed" in gym_rollout.output_text)
"""


@dataclass
class Config:
    """One generated session: its tasks' rewards (per policy agent), the command-line arguments, and whether it
    compares policies or uses test functions."""

    name: str
    rows: list[dict[str, Any]]
    args: list[str] = field(default_factory=list)
    mark: str = ""
    policies: bool = False
    metric_tests: bool = False
    dataset_items: bool = True
    """Whether the session collects the dataset file itself (its rollout items and ``gym-gate`` item), not only
    the test functions over it."""


def generate(rng: random.Random, index: int) -> Config:
    """A random configuration; the first ones are the cases issue 36 names (a failing custom metric's gate set on
    the command line, then by a mark; a failing comparison gate), the rest drawn at random."""
    policies = index == 2 or (index > 3 and rng.random() < 0.35)
    tasks = rng.randint(3, 6)
    rows = []
    for number in range(tasks):
        fake: dict[str, Any] = {"text": rng.choice(["\\boxed{A}", "plain"])}
        if policies:
            fake["reward_by_agent"] = {
                "mcqa_simple_agent": float(rng.random() < 0.7),
                "mcqa_simple_agent__cand": float(rng.random() < (0.2 if index == 2 else 0.6)),
            }
        elif index > 3 and rng.random() < 0.1:
            fake = {"failure": "agent_run_error"}
        else:
            fake["reward"] = float(rng.random() < 0.6)
        rows.append({"id": f"t{number}", "responses_create_params": {"input": "Q"}, "fake": fake})
    config = Config(f"config {index}", rows, policies=policies)
    if index == 0:  # test functions only: no gym-gate item
        config.metric_tests, config.dataset_items, config.args = True, False, ["--gym-min-metric=boxed:0.99"]
        rows[0]["fake"]["text"] = "plain"
        return config
    if index == 1:
        config.metric_tests, config.mark = True, ', min_metric={"boxed": 0.99}'
        rows[0]["fake"]["text"] = "plain"
        return config
    if index == 2:
        config.args = ["--gym-min-improvement=0", "--gym-max-regression=0.1"]
        return config
    if index == 3:
        config.args = ["--gym-min-mean-reward=0.2", "-k", "t0"]
        return config
    gates = []
    if rng.random() < 0.5:
        gates.append(f"--gym-min-mean-reward={rng.choice([0.3, 0.5, 0.8])}")
    if rng.random() < 0.3:
        gates.append(f"--gym-min-pass-rate={rng.choice([0.4, 0.7])}")
    if policies:
        if rng.random() < 0.6:
            gates.append(f"--gym-max-regression={rng.choice([0.1, 0.6])}")
        if rng.random() < 0.6:
            gates.append(f"--gym-min-improvement={rng.choice([0.0, 0.2])}")
    else:
        config.metric_tests = rng.random() < 0.6
        if config.metric_tests and rng.random() < 0.6:
            gates.append(f"--gym-min-metric=boxed:{rng.choice([0.3, 0.6, 0.9])}")
    if index == 6 or (not policies and rng.random() < 0.25):  # errored rollouts judged by the error-rate gate
        if not policies:
            rows[0]["fake"] = {"failure": "agent_run_error"}
        gates.append(f"--gym-max-error-rate={rng.choice([0.1, 0.5])}")
    if rng.random() < 0.3:
        gates.append("--gym-gate-on=lower-bound")
    if rng.random() < 0.3:
        gates.append("--gym-inconclusive=pass")
    if rng.random() < 0.15:
        gates += ["-k", "t1 or t2"]
    if index == 5 or rng.random() < 0.15:  # pytest stops the session at the first failure: gates judged on part
        gates.append("-x")
    config.args = gates
    return config


def write(pytester: pytest.Pytester, config: Config) -> None:
    (pytester.path / "mcqa.jsonl").write_text("".join(json.dumps(row) + "\n" for row in config.rows))
    if config.metric_tests:
        pytester.makepyfile(test_shape=TESTS.format(mark=config.mark))


def session_args(fake_gym: FakeGym, config: Config) -> list[str]:
    common = [f"--gym-checkout={fake_gym.checkout}", "-p", "no:cacheprovider", "-p", "no:randomly"]
    if config.policies:
        common += [f"--gym-policy=base=replay:{fake_gym.recording}", f"--gym-policy=cand=replay:{fake_gym.recording}"]
    else:
        common += [f"--gym-replay={fake_gym.recording}", "--gym-agent=mcqa_simple_agent"]
    files = [*(["mcqa.jsonl"] if config.dataset_items else []), *(["test_shape.py"] if config.metric_tests else [])]
    return [*common, "--gym-run-dir=runs", *files, *config.args]


OUTPUTS = ["--gym-report=r.json", "--junitxml=j.xml", "--gym-markdown=s.md"]


def flat(text: str) -> str:
    return " ".join(text.split())


def check_agreement(where: Path, status: int, terminal: str, label: str) -> None:
    """Every artefact in ``where`` (r.json, j.xml, s.md) and the terminal output (with its GitHub annotations) tells
    each gate's verdict and the session's exit status ``status`` alike."""
    report = json.loads((where / "r.json").read_text())
    jsonschema.validate(report, json.loads(SCHEMA_PATH.read_text()))
    verdicts = [verdict_from_json(entry) for entry in report.get("verdicts", [])]
    gated = status in (0, 1) and report["session"]["exit_status"] in (0, 1) and "gym gates" in terminal
    gated = gated and "gym gates: not judged" not in terminal  # a -k selection's gates set no exit status
    assert report["session"]["exit_status"] == status, label
    suite = ET.parse(where / "j.xml").getroot()
    properties = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert properties.get("gym.exit_status") == str(int(status)), label  # (an ExitCode prints its name before 3.11)
    failing_cases = {  # by testcase name (the node id's last part)
        str(case.get("name")): str(failure.get("message") or "")
        for case in suite.iter("testcase")
        if "gym-gate" in (case.get("name") or "") and (failure := case.find("failure")) is not None
    }
    annotations = [line for line in terminal.splitlines() if line.startswith("::") and "title=gym gate" in line]
    errors = [line for line in annotations if line.startswith("::error")]
    markdown = (where / "s.md").read_text()
    # The session's exit status, told alike.
    if gated:
        assert bool(failing_cases) == (status == 1), (label, failing_cases)
        assert bool(errors) == (status == 1) or any(v.kind == "errors" for v in verdicts), (label, annotations)
        assert markdown.startswith("### Gym eval: ❌ FAIL" if status == 1 else "### Gym eval: ✅ PASS"), label
        assert any(v.fails for v in verdicts) == (status == 1), (label, verdicts)
    # Each gate's verdict, told alike.
    for verdict in verdicts:
        words = verdict.message.split(": ", 1)[1].split(" (judged on", 1)[0]
        if verdict.kind != "errors" and verdict.verdict != "NOT_APPLICABLE":
            assert words in flat(terminal), (label, words)
        if verdict.kind not in NOT_DATASET_GATES:  # the terminal's gate line is the verdict's own, verdict and all
            assert verdict.verdict in verdict.text and flat(verdict.text) in flat(terminal), (label, verdict.text)
        case = gate_testcase_id(verdict).split("::", 1)[1]
        if verdict.kind == "errors":  # told by the errored rollouts' own testcases
            assert any(case.find("error") is not None for case in suite.iter("testcase")), label
        elif verdict.fails:
            # (a gym-gate item that failed when it ran keeps its own message: the gate's words, without the title)
            core = verdict.message.split(": ", 1)[1].split(" (", 1)[0]
            assert core in failing_cases.get(case, ""), (label, case, failing_cases)
        shown = verdict.verdict not in ("PASS", "NOT_APPLICABLE") and verdict.kind != "errors"
        level = "::error " if verdict.fails else "::warning "
        told = [line for line in annotations if flat(verdict.message) in flat(line.replace("%0A", " "))]
        if shown:
            assert told and all(line.startswith(level) for line in told), (label, verdict, annotations)
        else:
            assert not told, (label, verdict, annotations)
        if verdict.kind in ("non-inferiority", "superiority"):
            row = [
                line for line in markdown.splitlines() if line.startswith("| `mcqa.jsonl` |") and verdict.gate in line
            ]
            assert row and verdict.verdict in row[0], (label, verdict.gate, markdown)
        elif verdict.kind not in ("errors",) and verdict.verdict != "NOT_APPLICABLE":
            assert any(verdict.gate in line and verdict.verdict in line for line in markdown.splitlines()), label
    for case in failing_cases:  # no failing gym-gate testcase without a verdict that fails
        assert any(gate_testcase_id(v).endswith(f"::{case}") and v.fails for v in verdicts), (label, case, verdicts)


def run_session(pytester: pytest.Pytester, fake_gym: FakeGym, config: Config, *extra: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(*session_args(fake_gym, config), *extra)


@pytest.fixture
def github(monkeypatch: pytest.MonkeyPatch) -> None:
    """The sessions run as on GitHub Actions: they print their annotations."""
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)


def test_every_artefact_tells_each_gate_alike(pytester: pytest.Pytester, fake_gym: FakeGym, github: None) -> None:
    rng = random.Random(SEED)
    disagreements = []
    for index in range(CONFIGS):
        config = generate(rng, index)
        write(pytester, config)
        result = run_session(pytester, fake_gym, config, *OUTPUTS)
        label = f"{config.name}: {config.args} policies={config.policies} tests={config.metric_tests} {config.mark}"
        assert result.ret in (0, 1, 5), (label, result.stdout.str()[-3000:])
        try:
            check_agreement(pytester.path, result.ret, result.stdout.str(), label)
        except AssertionError as error:  # every configuration's story, not only the first that disagrees
            disagreements.append(str(error).splitlines()[0])
        (pytester.path / "test_shape.py").unlink(missing_ok=True)
    assert not disagreements, "\n".join(disagreements)


def test_a_merge_of_shards_tells_each_gate_alike(pytester: pytest.Pytester, fake_gym: FakeGym, github: None) -> None:
    """Two shards, then ``merge`` with a reward gate and a custom metric's gate: the merged artefacts agree."""
    config = generate(random.Random(SEED), 5)
    config.policies, config.metric_tests = False, True
    config.args = ["--gym-min-mean-reward=0.9", "--gym-min-metric=boxed:0.9"]
    config.rows = [
        {"id": f"t{n}", "responses_create_params": {"input": "Q"}, "fake": {"text": "plain", "reward": float(n % 2)}}
        for n in range(4)
    ]
    write(pytester, config)
    for shard in (1, 2):
        run_session(pytester, fake_gym, config, f"--gym-shard={shard}/2", f"--gym-report=s{shard}.json")
    merged = subprocess.run(
        [sys.executable, "-m", "pytest_gym_eval", "merge", "s1.json", "s2.json", *OUTPUTS, *config.args],
        cwd=pytester.path, capture_output=True, text=True, timeout=120, env={**os.environ, "GITHUB_ACTIONS": "true"},
    )  # fmt: skip
    assert merged.returncode == 1, merged.stdout + merged.stderr
    check_agreement(pytester.path, merged.returncode, merged.stdout, f"merge ({config.args})")
