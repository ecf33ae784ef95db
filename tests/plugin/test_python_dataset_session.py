"""Datasets built in Python: a ``pytest_gym_eval.Dataset`` of rows written in a test module, given to the
``gym_rollouts`` mark, is rolled out in the session's one ``gym eval run`` as a dataset of its own, with its summary,
gates, custom metrics and JSON report entry. Against the stand-in ``gym``."""

from __future__ import annotations

import json

import pytest

from tests.plugin.test_rollout_tests import dataset_summary, eval_runs, input_rows, write_dataset
from tests.support.children import outcomes
from tests.support.fakes import FakeGym

WEATHER = """
import pytest
from pytest_gym_eval import Dataset, Rollout


def case(city, reward):
    fake = {"text": f"sunny in {city}", "reward": reward, "usage": {"input_tokens": 3, "output_tokens": 7}}
    return {"responses_create_params": {"input": f"weather in {city}?"}, "fake": fake}


WEATHER_CASES = Dataset(
    "weather-cases",
    [case("Paris", 1.0), case("Oslo", 0.0), {**case("Rome", 1.0), "id": "rome"}],
    agent="mcqa_simple_agent",  # the stand-in Gym's one agent (the convention would say weather-cases_simple_agent)
)


@pytest.mark.gym_rollouts(WEATHER_CASES)
def test_weather(gym_rollout: Rollout) -> None:
    gym_rollout.record_metric("mentions_sun", "sunny" in gym_rollout.output_text)
    assert gym_rollout.agent == "mcqa_simple_agent"
    assert gym_rollout.reward == 1.0
"""

NAME = "test_weather.py:weather-cases"

INI = """
[pytest]
gym_dataset_settings =
    test_weather.py:weather-*: min_mean_reward=0.9
"""


def run(pytester: pytest.Pytester, fake_gym: FakeGym, *args: str) -> pytest.RunResult:
    common = [*fake_gym.args, "--gym-run-dir=runs", "-rA"]  # no --gym-agent: the Dataset names its agent
    return pytester.runpytest_subprocess(*common, *args)


def test_a_python_dataset_is_rolled_out_as_a_dataset_of_its_own(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    """Its rows (ids from ``id``, else the index) join a file dataset's in the one ``gym eval run``, by the
    Dataset's agent (no ``--gym-agent``); it has its own summary block, its ``gym_dataset_settings`` gate is judged
    (and fails the session), its custom metric is reported, and the JSON report has its entry and rollouts."""
    write_dataset(pytester.path / "mcqa.jsonl")
    pytester.makepyfile(test_weather=WEATHER)
    pytester.makeini(INI)
    reports = ["--gym-report=r.json", "--gym-html=r.html", "--gym-markdown=r.md", "--junitxml=j.xml"]
    result = run(pytester, fake_gym, "test_weather.py", "mcqa.jsonl", *reports)
    assert outcomes(result) == {
        "test_weather.py::test_weather[0-r0]": "PASSED",
        "test_weather.py::test_weather[1-r0]": "FAILED",
        "test_weather.py::test_weather[rome-r0]": "PASSED",
        "mcqa.jsonl::q1[r0]": "PASSED",
        "mcqa.jsonl::q2[r0]": "FAILED",
        "mcqa.jsonl::q3[r0]": "PASSED",
    }
    assert eval_runs(fake_gym) == 1
    rows = input_rows(pytester)
    assert sorted(str(row["id"]) for row in rows) == ["0", "1", "q1", "q2", "q3", "rome"]
    summary = dataset_summary(result, NAME)
    assert "3 rollouts (3 scored, 0 errors)" in summary and "mean reward 0.67" in summary, summary
    assert "metric mentions_sun" in summary, summary
    assert "FAIL" in summary and "0.9" in summary, summary  # its gate: mean reward 0.67 < 0.9
    assert result.ret == 1
    report = json.loads((pytester.path / "r.json").read_text())
    (entry,) = [d for d in report["datasets"] if d["dataset"] == NAME]
    assert entry["metrics"]["mentions_sun"]["estimate"] == 1.0
    nodeids = sorted(r["nodeid"] for r in report["rollouts"] if r["nodeid"].startswith(NAME))
    assert nodeids == [f"{NAME}::0[r0]", f"{NAME}::1[r0]", f"{NAME}::rome[r0]"]
    assert NAME in (pytester.path / "r.html").read_text() and NAME in (pytester.path / "r.md").read_text()
    assert f'name="gym::{NAME}::metric.mentions_sun"' in (pytester.path / "j.xml").read_text()


def test_under_xdist_a_python_dataset_is_the_same(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    """Every worker writes the same file: one run, the same outcomes and summary as in one process."""
    pytester.makepyfile(test_weather=WEATHER)
    alone = run(pytester, fake_gym, "test_weather.py")
    for run_dir in (pytester.path / "runs").iterdir():
        run_dir.rename(pytester.path / "alone-run")
    spread = run(pytester, fake_gym, "test_weather.py", "-n", "2")
    assert outcomes(spread) == outcomes(alone) and len(outcomes(alone)) == 3
    same = [line for line in dataset_summary(alone, NAME).splitlines() if "wall time" not in line]
    assert [line for line in dataset_summary(spread, NAME).splitlines() if "wall time" not in line] == same
    assert "3 rollouts (3 scored, 0 errors)" in dataset_summary(spread, NAME)
    assert sorted(str(row["id"]) for row in input_rows(pytester)) == ["0", "1", "rome"]
    assert eval_runs(fake_gym) == 2  # one a session


def test_a_bad_row_is_a_collection_error_naming_the_module_and_the_row(
    pytester: pytest.Pytester, fake_gym: FakeGym
) -> None:
    pytester.makepyfile(
        test_bad="""
import pytest
from pytest_gym_eval import Dataset

CASES = Dataset("cases", [{"responses_create_params": {"input": "hi"}}, {"input": "no params"}])


@pytest.mark.gym_rollouts(CASES)
def test_case(gym_rollout):
    pass
"""
    )
    result = run(pytester, fake_gym, "test_bad.py")
    assert result.ret == 2
    result.stdout.fnmatch_lines(["*test_bad.py*Dataset 'cases': row 1 has no 'responses_create_params' dict*"])


def test_shards_split_a_python_dataset_and_their_reports_merge(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    """Under ``--gym-shard`` each shard rolls out its share of the Python dataset's tasks; ``merge`` of the shard
    reports gives the one session's summary, and judges its gate (exit 0: mean reward 0.67 >= 0.5)."""
    import subprocess
    import sys

    pytester.makepyfile(test_weather=WEATHER)
    alone = run(pytester, fake_gym, "test_weather.py", "--gym-report=alone.json", "--gym-min-mean-reward=0.5")
    shares = []
    for shard in (1, 2):
        result = run(pytester, fake_gym, "test_weather.py", f"--gym-shard={shard}/2", f"--gym-report=s{shard}.json")
        shares.append(set(outcomes(result)))
    assert shares[0] and shares[1] and not shares[0] & shares[1]
    assert shares[0] | shares[1] == set(outcomes(alone))
    merged = subprocess.run(
        [sys.executable, "-m", "pytest_gym_eval", "merge", "s1.json", "s2.json", "--gym-min-mean-reward=0.5",
         "--gym-report=merged.json"],
        cwd=pytester.path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert merged.returncode == 0, merged.stdout + merged.stderr
    reports = [json.loads((pytester.path / name).read_text()) for name in ("alone.json", "merged.json")]
    (one,), (both,) = (report["datasets"] for report in reports)
    assert one["dataset"] == both["dataset"] == NAME
    assert both["rollouts"] == one["rollouts"] == 3
    assert both["mean_reward"]["estimate"] == one["mean_reward"]["estimate"] == pytest.approx(2 / 3)


def test_resuming_reuses_a_python_datasets_rollouts(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    """The next session writes the same rows into its own run directory: ``--gym-resume`` reuses every rollout."""
    pytester.makepyfile(test_weather=WEATHER)
    first = run(pytester, fake_gym, "test_weather.py")
    (old,) = (pytester.path / "runs").iterdir()
    calls = len(fake_gym.calls())
    again = run(pytester, fake_gym, "test_weather.py", f"--gym-resume={old}")
    again.stdout.fnmatch_lines([f"gym: resuming {old}: 3 of 3 rollouts reused, 0 to roll out"])
    assert outcomes(again) == outcomes(first) and len(outcomes(first)) == 3
    assert fake_gym.calls()[calls:] == []


def test_history_keeps_a_python_datasets_series(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    """Two sessions with ``--gym-history``: the Python dataset is one series of two runs under its name."""
    pytester.makepyfile(test_weather=WEATHER)
    history = f"--gym-history={pytester.path / 'h.db'}"
    run(pytester, fake_gym, "test_weather.py", history)
    for run_dir in (pytester.path / "runs").iterdir():
        run_dir.rename(pytester.path / "first-run")
    second = run(pytester, fake_gym, "test_weather.py", history)
    second.stdout.fnmatch_lines([f"history {NAME}: 2 runs, *"])


def test_two_datasets_of_one_name_are_a_collection_error(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    pytester.makepyfile(
        test_twice="""
import pytest
from pytest_gym_eval import Dataset

ONE = Dataset("cases", [{"responses_create_params": {"input": "one"}}])
TWO = Dataset("cases", [{"responses_create_params": {"input": "two"}}])


@pytest.mark.gym_rollouts(ONE)
def test_one(gym_rollout):
    pass


@pytest.mark.gym_rollouts(TWO)
def test_two(gym_rollout):
    pass
"""
    )
    result = run(pytester, fake_gym, "test_twice.py")
    assert result.ret == 2
    result.stdout.fnmatch_lines(["*test_twice.py::test_two: two Datasets are named test_twice.py:cases*"])
