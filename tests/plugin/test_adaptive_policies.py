"""``--gym-adaptive`` with several policy models (``--gym-policy``) against the stand-in ``gym``: every wave rolls out
every policy's (task, repeat) pairs interleaved, the comparison gates are judged on the paired confidence sequence
after each wave, and the rest is skipped once every gate is decided (real Gym:
tests/real_gym/test_adaptive_policies_real_gym.py; the planner alone: tests/unit/test_policy_waves.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from pytest_gym_eval.reporting.json_report import SCHEMA_PATH
from tests.support.fakes import FakeGym
from tests.support.junit import junit_suite_properties

BASE, CAND = "mcqa_simple_agent", "mcqa_simple_agent__cand"
CEILING = 8


def write_tasks(path: Path, base: list[float], cand: list[float]) -> None:
    """Tasks t0, t1, ...: task i gets reward ``base[i]`` from the baseline and ``cand[i]`` from the candidate."""
    rows = [
        {
            "id": f"t{i}", "responses_create_params": {"input": [{"role": "user", "content": "ping"}]},
            "fake": {"reward_by_agent": {BASE: b, CAND: c}},
        }
        for i, (b, c) in enumerate(zip(base, cand, strict=True))
    ]  # fmt: skip
    (path / "mcqa.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))


def run(pytester: pytest.Pytester, fake_gym: FakeGym, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(
        f"--gym-checkout={fake_gym.checkout}", "-p", "no:cacheprovider", "-p", "no:randomly",
        f"--gym-policy=base=replay:{fake_gym.recording}", f"--gym-policy=cand=replay:{fake_gym.recording}",
        "mcqa.jsonl", "--gym-adaptive", f"--gym-repeats={CEILING}", "--gym-run-dir=runs", "--gym-report=r.json",
        "--junitxml=j.xml", "-rs", *args,
    )  # fmt: skip


def wave_inputs(pytester: pytest.Pytester) -> list[list[dict[str, Any]]]:
    """The rows of each wave's Gym input, in wave order."""
    (run_dir,) = sorted((pytester.path / "runs").iterdir())
    log = [json.loads(line) for line in (run_dir / "waves.jsonl").read_text().splitlines()]
    numbers = [entry["wave"] for entry in log if "wave" in entry]
    paths = [run_dir / ("gym-input.jsonl" if n == 1 else f"gym-input-wave-{n}.jsonl") for n in numbers]
    return [[json.loads(line) for line in path.read_text().splitlines()] for path in paths]


def test_a_clear_regression_fails_after_the_first_wave_and_skips_the_rest(
    pytester: pytest.Pytester, fake_gym: FakeGym
) -> None:
    """Ten tasks the baseline passes and the candidate fails: after wave 1 (2 repeats) the sequence's upper bound
    (-0.42, tests/unit/test_comparison.py) is below -0.10: non-inferiority FAILS, the 6 later repeats of both
    policies are skipped, and the session fails on the comparison."""
    write_tasks(pytester.path, [1.0] * 10, [0.0] * 10)
    result = run(pytester, fake_gym, "--gym-max-regression=0.1")
    assert result.ret == 1
    result.assert_outcomes(passed=20, failed=20, skipped=2 * 10 * (CEILING - 2))
    result.stdout.fnmatch_lines(
        ["SKIPPED * not needed: cand vs base: non-inferiority comparison decided FAIL after 2 repeats, upper bound *"]
    )
    result.stdout.fnmatch_lines(["*adaptive*judged on the anytime-valid 95% confidence sequence: 1 wave, 2 of*"])
    (wave,) = wave_inputs(pytester)
    agents = [row["agent_ref"]["name"] for row in wave]
    assert agents == [BASE, CAND] * 20  # every pair's two rollouts adjacent in Gym's input
    report = json.loads((pytester.path / "r.json").read_text())
    jsonschema.validate(report, json.loads(SCHEMA_PATH.read_text()))
    (entry,) = report["comparisons"]
    assert entry["adaptive"] == {"waves": 1, "repeats": [2], "repeats_used": 2, "max_repeats": CEILING}
    (gate,) = entry["gates"]
    assert gate["verdict"] == "FAIL" and gate["sequential"] is True and gate["interval"]["high"] < -0.1
    properties = junit_suite_properties(pytester.path / "j.xml")
    prefix = "gym::mcqa.jsonl::compare.cand."
    assert (properties[prefix + "sequential"], properties[prefix + "repeats"]) == ("true", "2")
    assert properties[prefix + "verdict"] == "FAIL"


def test_equivalent_policies_pass_non_inferiority_after_two_waves(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    """Both policies score every task alike (the difference is 0 on every pair): after 4 repeats the sequence is
    [-0.16, 0.16] (tests/unit/test_comparison.py), within the margin 0.2: PASS, the last 4 repeats skipped. Each
    policy's own gate (--gym-min-mean-reward=0.1, decided after wave 1 for both) does not stop the run alone."""
    write_tasks(pytester.path, [1.0] * 5 + [0.0] * 5, [1.0] * 5 + [0.0] * 5)
    result = run(pytester, fake_gym, "--gym-max-regression=0.2", "--gym-min-mean-reward=0.1")
    assert result.ret == 0, result.stdout.str()[-3000:]
    result.assert_outcomes(passed=2 * 5 * 4 + 1, failed=2 * 5 * 4, skipped=2 * 10 * (CEILING - 4))
    result.stdout.fnmatch_lines(
        [
            "SKIPPED * not needed: base: mean-reward gate decided PASS after 4 repeats, lower bound * >= 0.10; cand: "
            "mean-reward gate decided PASS *; cand vs base: non-inferiority comparison decided PASS after 4 repeats, "
            "lower bound -0.16 >= -0.20"
        ]
    )
    first, second = wave_inputs(pytester)
    assert [row["agent_ref"]["name"] for row in first] == [BASE, CAND] * 20
    assert [row["agent_ref"]["name"] for row in second] == [BASE, CAND] * 20
    report = json.loads((pytester.path / "r.json").read_text())
    jsonschema.validate(report, json.loads(SCHEMA_PATH.read_text()))
    (entry,) = report["comparisons"]
    assert entry["adaptive"] == {"waves": 2, "repeats": [2, 4], "repeats_used": 4, "max_repeats": CEILING}
    assert [(g["verdict"], g["sequential"]) for g in entry["gates"]] == [("PASS", True)]
    assert entry["pairs"] == 40
    assert {s["policy"]: s["adaptive"]["rollouts"] for s in report["datasets"]} == {"base": 40, "cand": 40}


def test_a_comparison_undecided_at_the_ceiling_is_judged_on_the_sequence_and_reported_so(
    pytester: pytest.Pytester, fake_gym: FakeGym, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three tasks both policies score alike: 24 zero differences leave the sequence around 0 wider than the margin
    0.1, so the comparison is undecided at the ceiling (waves of 2, 4, 8 repeats). Gym writes its metrics and
    then takes a while to exit (as real Gym does, ~2 s): the reports are written meanwhile, and still judge the
    last wave on the sequence (INCONCLUSIVE, marked sequential, with the waves), not on the fixed-sample interval
    of 24 equal differences (a zero-width [0, 0] before issue 35: a "certain" PASS)."""
    monkeypatch.setenv("FAKE_GYM_AGGREGATE_DELAY", "0")
    monkeypatch.setenv("FAKE_GYM_EXIT_DELAY", "3")
    write_tasks(pytester.path, [1.0, 0.0, 1.0], [1.0, 0.0, 1.0])
    result = run(pytester, fake_gym, "--gym-max-regression=0.1")
    assert result.ret == 1  # INCONCLUSIVE fails, as without --gym-adaptive
    result.assert_outcomes(passed=2 * 2 * CEILING, failed=2 * CEILING, skipped=0)
    (run_dir,) = sorted((pytester.path / "runs").iterdir())
    log = [json.loads(line) for line in (run_dir / "waves.jsonl").read_text().splitlines()]
    groups = [entry for entry in log if "group" in entry]
    assert sorted(tuple(entry["group"]) for entry in groups) == [("mcqa.jsonl", BASE), ("mcqa.jsonl", CAND)]
    assert all(entry["ends"] == [2, 4, CEILING] and entry["sequential"] for entry in groups)
    report = json.loads((pytester.path / "r.json").read_text())
    (entry,) = report["comparisons"]
    adaptive = {"waves": 3, "repeats": [2, 4, CEILING], "repeats_used": CEILING, "max_repeats": CEILING}
    assert entry["adaptive"] == adaptive
    (gate,) = entry["gates"]
    assert (gate["verdict"], gate["sequential"]) == ("INCONCLUSIVE", True)
    assert gate["interval"]["low"] < -0.1 < 0.0 < gate["interval"]["high"]
    assert {s["policy"]: s["adaptive"]["sequential"] for s in report["datasets"]} == {"base": True, "cand": True}
    properties = junit_suite_properties(pytester.path / "j.xml")
    assert properties["gym::mcqa.jsonl::compare.cand.sequential"] == "true"
