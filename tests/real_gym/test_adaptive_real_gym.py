"""``--gym-adaptive`` against real Gym 0.7.0: the mcqa example rolled out in waves through one Gym, stopping once
the gates are decided, with the same exit status as the fixed run up to the ceiling."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema
import pytest

from pytest_gym_eval.reporting.json_report import SCHEMA_PATH
from tests.support.junit import validate_junit
from tests.support.real_gym import GymExample, SharedGym

CEILING = 8


def copy_example(pytester: pytest.Pytester, example: GymExample) -> str:
    target = pytester.path / "datasets" / f"{example.name}.jsonl"
    target.parent.mkdir(exist_ok=True)
    target.write_bytes(example.dataset.read_bytes())
    return f"datasets/{example.name}.jsonl"


def skipped_cases(junit: Path) -> dict[str, str]:
    """Testcase name -> its skip message, for every skipped testcase."""
    validate_junit(junit)
    found = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        skipped = case.find("skipped")
        if skipped is not None:
            found[case.get("name", "")] = skipped.get("message", "")
    return found


def test_a_far_gate_stops_after_the_first_wave_and_exits_as_the_fixed_run(
    pytester: pytest.Pytester, shared_gym: SharedGym, gym_example: GymExample, gym_verdicts: dict[str, float]
) -> None:
    dataset = copy_example(pytester, gym_example)
    gate = "--gym-min-mean-reward=0.1"  # far below the example's mean
    common = [*shared_gym.args, dataset, f"--gym-repeats={CEILING}", gate]
    adaptive = pytester.runpytest(
        *common, "--gym-adaptive", "--junitxml=adaptive.xml", "--gym-report=adaptive.json", "--gym-run-dir=runs"
    )
    fixed = pytester.runpytest(*common, "--gym-run-dir=fixed")
    assert adaptive.ret == fixed.ret == 0

    # The first wave rolled out 2 repeats of each of the 5 tasks, in one `gym eval run`; the gate was decided.
    tasks = len(gym_verdicts)
    passes = sum(1 for reward in gym_verdicts.values() if reward == 1.0)
    adaptive.assert_outcomes(passed=2 * passes + 1, failed=2 * (tasks - passes), skipped=(CEILING - 2) * tasks)
    (run_dir,) = sorted((pytester.path / "runs").iterdir())
    waves = [json.loads(line) for line in (run_dir / "waves.jsonl").read_text().splitlines()]
    assert [w["rollouts"] for w in waves if "wave" in w] == [2 * tasks]
    assert (run_dir / "logs" / "gym-eval-run.log").read_text().count("Finished") >= 1
    assert not (run_dir / "gym-output" / "wave-2").exists()

    # Every unneeded repeat is skipped, with the reason.
    skipped = skipped_cases(pytester.path / "adaptive.xml")
    assert len(skipped) == (CEILING - 2) * tasks
    assert all(name.endswith(tuple(f"[r{r}]" for r in range(2, CEILING))) for name in skipped)
    for message in skipped.values():
        assert "not needed: mean-reward gate decided PASS after 2 repeats, lower bound 0." in message
        assert ">= 0.10" in message
    adaptive.stdout.fnmatch_lines(["*adaptive*1 wave, 10 of 40 rollouts (75% saved): not needed: mean-reward*"])

    report = json.loads((pytester.path / "adaptive.json").read_text())
    jsonschema.validate(report, json.loads(SCHEMA_PATH.read_text()))
    (summary,) = report["datasets"]
    assert summary["adaptive"]["waves"] == 1 and summary["adaptive"]["repeats"] == [2]
    assert (summary["adaptive"]["rollouts"], summary["adaptive"]["max_rollouts"]) == (2 * tasks, CEILING * tasks)
    assert summary["selected"] == summary["rollouts"] == 2 * tasks and summary["unreported"] == 0
    (gate_result,) = summary["gates"]
    assert gate_result["verdict"] == "PASS" and gate_result["low"] >= 0.1


def test_a_nearer_gate_takes_a_second_wave_through_the_same_gym(
    pytester: pytest.Pytester, shared_gym: SharedGym, gym_example: GymExample, gym_verdicts: dict[str, float]
) -> None:
    dataset = copy_example(pytester, gym_example)
    gate = "--gym-min-mean-reward=0.45"  # the first wave's 10 rollouts cannot tell; 20 can
    common = [*shared_gym.args, dataset, f"--gym-repeats={CEILING}", gate]
    adaptive = pytester.runpytest(*common, "--gym-adaptive", "--gym-report=adaptive.json", "--gym-run-dir=runs")
    fixed = pytester.runpytest(*common, "--gym-run-dir=fixed")
    assert adaptive.ret == fixed.ret == 0

    tasks = len(gym_verdicts)
    (run_dir,) = sorted((pytester.path / "runs").iterdir())
    waves = [json.loads(line) for line in (run_dir / "waves.jsonl").read_text().splitlines()]
    assert [w["rollouts"] for w in waves if "wave" in w] == [2 * tasks, 2 * tasks]
    # Wave 2 ran through the same Gym into a folder of its own; its items read their rollouts from there.
    assert len((run_dir / "gym-output" / "wave-2" / "rollouts.jsonl").read_text().splitlines()) == 2 * tasks
    report = json.loads((pytester.path / "adaptive.json").read_text())
    (summary,) = report["datasets"]
    assert summary["adaptive"]["repeats"] == [2, 4] and summary["rollouts"] == 4 * tasks
    assert summary["adaptive"]["reason"].startswith("not needed: mean-reward gate decided PASS after 4 repeats")
    records = {r["nodeid"]: r["record"] for r in report["rollouts"]}
    assert all(("wave-2" in record) == n.endswith(("[r2]", "[r3]")) for n, record in records.items())
    adaptive.assert_outcomes(
        passed=4 * sum(1 for r in gym_verdicts.values() if r == 1.0) + 1,
        failed=4 * sum(1 for r in gym_verdicts.values() if r != 1.0),
        skipped=(CEILING - 4) * tasks,
    )
