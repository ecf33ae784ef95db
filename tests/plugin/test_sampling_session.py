"""Sampling options in a pytest session against the stand-in ``gym``: they reach Gym's input and the reports
(the rules alone: tests/unit/test_sampling.py)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from pytest_gym_eval.tasks.plan import REPEAT_TAG
from pytest_gym_eval.tasks.sampling import PRECEDENCE
from tests.support.fakes import FakeGym


def dataset(pytester: pytest.Pytester) -> str:
    rows = [
        {"id": "a", "responses_create_params": {"input": "A?", "temperature": 0.7}},
        {"id": "b", "responses_create_params": {"input": "B?"}},
    ]
    (pytester.path / "mcqa.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return "mcqa.jsonl"


def gym_input(pytester: pytest.Pytester) -> list[dict[str, Any]]:
    (run_dir,) = (pytester.path / "runs").iterdir()
    return [json.loads(line) for line in (run_dir / "gym-input.jsonl").read_text().splitlines()]


def test_options_reach_every_row_of_gyms_input_and_the_reports(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    name = dataset(pytester)
    result = pytester.runpytest(
        *fake_gym.args, name, "--gym-run-dir=runs", "--gym-temperature=0", "--gym-max-output-tokens=32",
        "--gym-param", "user=ci", "--gym-report=report.json", "--junitxml=junit.xml",
    )  # fmt: skip
    result.assert_outcomes(passed=2)
    requests = [row["responses_create_params"] for row in gym_input(pytester)]
    tag = {"metadata": {REPEAT_TAG: "0"}}  # the stand-in Gym replays a recording: rows carry their repeat
    assert requests == [
        {"input": "A?", "temperature": 0.0, "max_output_tokens": 32, "user": "ci", **tag},
        {"input": "B?", "temperature": 0.0, "max_output_tokens": 32, "user": "ci", **tag},
    ]
    meta = json.loads((pytester.path / "report.json").read_text())["meta"]
    assert meta["sampling.temperature"] == 0.0 and meta["sampling.max_output_tokens"] == 32
    assert meta["sampling.user"] == "ci" and meta["sampling.precedence"] == PRECEDENCE
    suite = ET.parse(pytester.path / "junit.xml").getroot().find("testsuite")
    assert suite is not None
    properties = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert properties["gym.sampling.temperature"] == "0" and properties["gym.sampling.max_output_tokens"] == "32"


def test_ini_values_apply_and_the_command_line_beats_them(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    pytester.makeini("[pytest]\ngym_temperature = 0.5\ngym_top_p = 0.9\ngym_params =\n    user=from-ini\n")
    name = dataset(pytester)
    pytester.runpytest(*fake_gym.args, name, "--gym-run-dir=runs", "--gym-top-p=0.25").assert_outcomes(passed=2)
    requests = [row["responses_create_params"] for row in gym_input(pytester)]
    assert [(r["temperature"], r["top_p"], r["user"]) for r in requests] == [(0.5, 0.25, "from-ini")] * 2


@pytest.mark.parametrize(
    ("args", "ini", "message"),
    [
        (["--gym-seed=1"], "", "*--gym-seed: Gym's openai_model server has no way to pass a seed*"),
        (["--gym-top-p=2"], "", "*--gym-top-p: expected a number in (0, 1]*"),
        (["--gym-param=nokey"], "", "*--gym-param: expected KEY=VALUE*"),
        ([], "gym_max_output_tokens = many", "*gym_max_output_tokens: expected a whole number, got 'many'*"),
        (["--gym-price-per-mtok=1"], "", "*--gym-price-per-mtok: expected IN:OUT prices*"),
    ],
)
def test_bad_sampling_options_are_usage_errors(
    pytester: pytest.Pytester, fake_gym: FakeGym, args: list[str], ini: str, message: str
) -> None:
    if ini:
        pytester.makeini(f"[pytest]\n{ini}\n")
    result = pytester.runpytest(*fake_gym.args, dataset(pytester), *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])
    assert fake_gym.calls() == []


def test_the_seed_reaches_vllm_model_rows(pytester: pytest.Pytester, fake_gym: FakeGym, tmp_path: Path) -> None:
    name = dataset(pytester)
    result = pytester.runpytest(
        *fake_gym.args, name, "--gym-run-dir=runs", "--gym-model-type=vllm_model", "--gym-seed=11", "--gym-repeats=2"
    )
    result.assert_outcomes(passed=4)
    seeds = [
        json.loads(row["responses_create_params"]["metadata"]["extra_body"])["seed"] for row in gym_input(pytester)
    ]
    assert sorted(seeds) == [11, 11, 12, 12]
