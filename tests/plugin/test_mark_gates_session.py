"""A metric's gate beside its test (issue 39, item 4): ``@pytest.mark.gym_rollouts("mcqa.jsonl",
min_metric={"boxed": 0.9})`` gates that dataset's ``boxed`` metric, and no other dataset's; the command line and the
dataset's own settings override it, the ini file does not; the summary, the JSON report's plan (with its source and
test), pytest-xdist's controller and ``merge`` of shard reports all know it. Against the stand-in ``gym``."""

from __future__ import annotations

import json
import subprocess
import sys

import jsonschema
import pytest

from pytest_gym_eval.reporting.json_report import SCHEMA_PATH
from tests.plugin.test_custom_metrics_session import BOXED, said, write_dataset
from tests.support.fakes import FakeGym

TESTS = """
import pytest


@pytest.mark.gym_rollouts("mcqa.jsonl", repeats=2, min_metric={"boxed": 0.9})
def test_boxed(gym_rollout):
    gym_rollout.record_metric("boxed", "\\\\boxed{" in gym_rollout.output_text)


@pytest.mark.gym_rollouts("other.jsonl", repeats=2)
def test_other(gym_rollout):
    gym_rollout.record_metric("boxed", "\\\\boxed{" in gym_rollout.output_text)
"""
"""``boxed`` is 0.67 on both datasets; only mcqa.jsonl's test declares a gate on it."""

MARK_SAYS = f"metric boxed {BOXED} < 0.90: FAIL (set by a gym_rollouts mark of test_marked.py::test_boxed)"
PLANNED = {
    "metric": "custom",
    "k": None,
    "threshold": 0.9,
    "custom": "boxed",
    "source": "test mark",
    "declared_by": "test_marked.py::test_boxed",
}


def run(pytester: pytest.Pytester, fake_gym: FakeGym, *args: str, tests: str = TESTS) -> pytest.RunResult:
    write_dataset(pytester.path / "mcqa.jsonl")
    write_dataset(pytester.path / "other.jsonl")
    pytester.makepyfile(test_marked=tests)
    common = [*fake_gym.args, "--gym-agent=mcqa_simple_agent", "--gym-run-dir=runs", "-p", "no:randomly"]
    return pytester.runpytest_subprocess(*common, "test_marked.py", *args)


def report(pytester: pytest.Pytester, name: str = "r.json") -> dict[str, object]:
    data: dict[str, object] = json.loads((pytester.path / name).read_text())
    jsonschema.validate(data, json.loads(SCHEMA_PATH.read_text()))
    return data


def by_dataset(data: dict[str, object], key: str) -> dict[str, list[dict[str, object]]]:
    """Each dataset's gates, from the report's ``datasets`` (``key="gates"``) or from its plan (``key="plan"``)."""
    if key == "plan":
        return {d["dataset"]: d["gates"] for d in data["plan"]["datasets"]}  # type: ignore[index]
    return {d["dataset"]: d["gates"] for d in data["datasets"]}  # type: ignore[attr-defined]


@pytest.mark.parametrize("workers", [0, 2], ids=["one process", "-n 2"])
def test_a_marks_gate_is_judged_on_its_dataset_only(pytester: pytest.Pytester, fake_gym: FakeGym, workers: int) -> None:
    result = run(pytester, fake_gym, "--gym-report=r.json", *(["-n", str(workers)] if workers else []))
    assert result.ret == 1, result.stdout.str()
    assert said(result, MARK_SAYS), result.stdout.str()
    data = report(pytester)
    assert by_dataset(data, "plan") == {"mcqa.jsonl": [PLANNED], "other.jsonl": []}
    gates = by_dataset(data, "gates")
    assert [(g["custom"], g["source"], g["declared_by"], g["verdict"]) for g in gates["mcqa.jsonl"]] == [
        ("boxed", "test mark", "test_marked.py::test_boxed", "FAIL")
    ]
    assert gates["other.jsonl"] == []  # the same metric, recorded there too, has no gate there


def test_the_command_line_and_dataset_settings_override_a_mark_and_the_ini_does_not(
    pytester: pytest.Pytester, fake_gym: FakeGym
) -> None:
    cli = run(pytester, fake_gym, "--gym-report=r.json", "--gym-min-metric=boxed:0.5")
    assert cli.ret == 0, cli.stdout.str()
    assert said(cli, f"metric boxed {BOXED} >= 0.50: PASS (set on the command line)"), cli.stdout.str()

    pytester.makeini("[pytest]\ngym_dataset_settings =\n    mcqa.jsonl: min_metric=boxed:0.5\n")
    own = run(pytester, fake_gym)
    assert own.ret == 0, own.stdout.str()
    assert said(own, f"metric boxed {BOXED} >= 0.50: PASS (set in gym_dataset_settings)"), own.stdout.str()

    pytester.makeini("[pytest]\ngym_min_metric =\n    boxed:0.5\n")
    ini = run(pytester, fake_gym, "--gym-report=r.json")
    assert ini.ret == 1, ini.stdout.str()  # the test's own declaration beats the session-wide default ...
    assert said(ini, MARK_SAYS), ini.stdout.str()
    plans = by_dataset(report(pytester), "plan")  # ... which still gates the other dataset that records the metric
    assert plans["mcqa.jsonl"] == [PLANNED]
    assert plans["other.jsonl"] == [
        {"metric": "custom", "k": None, "threshold": 0.5, "custom": "boxed", "source": "ini"}
    ]


@pytest.mark.parametrize("workers", [0, 2], ids=["one process", "-n 2"])
def test_two_marks_with_different_bounds_are_an_error_naming_both(
    pytester: pytest.Pytester, fake_gym: FakeGym, workers: int
) -> None:
    stricter = (
        TESTS
        + """

@pytest.mark.gym_rollouts("mcqa.jsonl", tasks="q1", min_metric={"boxed": 0.95})
def test_strict(gym_rollout):
    gym_rollout.record_metric("boxed", 1)
"""
    )
    result = run(pytester, fake_gym, *(["-n", str(workers)] if workers else []), tests=stricter)
    # A collection error: no test runs (pytest stops with 2; pytest-xdist's controller reports a worker's with 1).
    expected = pytest.ExitCode.TESTS_FAILED if workers else pytest.ExitCode.INTERRUPTED
    assert result.ret == expected and result.parseoutcomes() == {"errors": 1}, result.stdout.str()
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str(), result.stdout.str()
    says = (
        "gym_rollouts marks disagree on the gate of metric 'boxed' on mcqa.jsonl: test_marked.py::test_boxed "
        "declares min_metric={'boxed': 0.9} and test_marked.py::test_strict min_metric={'boxed': 0.95}"
    )
    assert said(result, says), result.stdout.str()
    if not workers:
        same = run(pytester, fake_gym, tests=stricter.replace("0.95", "0.9"))  # the same gate twice is one gate
        assert same.ret == 1 and said(same, MARK_SAYS), same.stdout.str()


def test_a_selection_without_the_declaring_test_leaves_its_gate_out(
    pytester: pytest.Pytester, fake_gym: FakeGym
) -> None:
    """``-k test_plain`` runs every pair of mcqa.jsonl without test_boxed: its gate on ``boxed`` goes with it (it
    was INCONCLUSIVE, "no rollout recorded this metric", and failed the session), while the report's plan, the
    record of the collected plan a merge reads, still names it."""
    plain = (
        TESTS
        + """

@pytest.mark.gym_rollouts("mcqa.jsonl", repeats=2)
def test_plain(gym_rollout):
    assert gym_rollout.reward is not None
"""
    )
    result = run(pytester, fake_gym, "-k", "test_plain", "--gym-report=r.json", tests=plain)
    assert result.ret == 0, result.stdout.str()
    assert "metric boxed" not in result.stdout.str()
    data = report(pytester)
    assert by_dataset(data, "gates")["mcqa.jsonl"] == []
    assert by_dataset(data, "plan")["mcqa.jsonl"] == [PLANNED]


def test_a_bad_min_metric_is_the_test_files_collection_error(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    result = run(pytester, fake_gym, tests=TESTS.replace('{"boxed": 0.9}', '{"boxed": "high"}'))
    assert result.ret == pytest.ExitCode.INTERRUPTED, result.stdout.str()
    says = "test_marked.py::test_boxed: gym_rollouts: min_metric['boxed'] must be a finite number, got 'high'"
    assert said(result, says), result.stdout.str()


def test_merged_shards_judge_the_marks_gate(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    for shard in (1, 2):
        run(pytester, fake_gym, f"--gym-shard={shard}/2", f"--gym-report=s{shard}.json")

    def merge(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "pytest_gym_eval", "merge", "s1.json", "s2.json", *args],
            cwd=pytester.path, capture_output=True, text=True, timeout=120,
        )  # fmt: skip

    merged = merge("--gym-report=merged.json")
    assert merged.returncode == 1, merged.stdout + merged.stderr
    assert MARK_SAYS in " ".join(merged.stdout.split()), merged.stdout
    assert by_dataset(report(pytester, "merged.json"), "plan")["mcqa.jsonl"] == [PLANNED]
    passing = merge("--gym-min-metric=boxed:0.5")  # merge's own gate option is a command line too
    assert passing.returncode == 0, passing.stdout + passing.stderr
