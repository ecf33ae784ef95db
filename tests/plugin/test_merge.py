"""``python -m pytest_gym_eval merge``: shard reports merged into the summary, verdict and exit status of one
session over the same rollouts, and every reason a set of reports cannot be merged. The shard reports come
from real pytest sessions against the stand-in ``gym`` (tests/real_gym/test_scale_real_gym.py does it against real Gym).
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from pytest_gym_eval.reporting.json_report import SCHEMA_PATH
from pytest_gym_eval.reporting.junit_values import parse_system_out
from pytest_gym_eval.reporting.merge import (
    EXIT_CANNOT_MERGE,
    merge_reports,
)
from pytest_gym_eval.reporting.shard_report import MergeError, read_shard_report
from pytest_gym_eval.tasks.shard import assign_shards
from tests.support.fakes import make_fake_checkout, write_recording
from tests.support.junit import junit_aggregates, junit_suite_properties

COLUMNS = "100"
REWARDS: dict[str, object] = {
    "a": 1.0, "b": 0.0, "c": 1.0, "d": 0.5, "e": "error", "f": 1.0, "g": 1.0, "h": 0.0, "i": 1.0, "j": 1.0,
}  # fmt: skip
OTHER: dict[str, object] = {"x": 1.0, "y": 1.0, "z": 0.0}


@dataclass
class Sessions:
    """One folder with two datasets, the stand-in Gym, three shard reports and one unsharded session's."""

    root: Path
    args: list[str]
    alone: subprocess.CompletedProcess[str]
    shards: list[subprocess.CompletedProcess[str]]

    def report(self, name: str) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((self.root / name).read_text())
        return data

    def write(self, name: str, report: dict[str, Any]) -> Path:
        path = self.root / name
        path.write_text(json.dumps(report))
        return path

    def merge(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "pytest_gym_eval", "merge", *args],
            cwd=self.root, capture_output=True, text=True, env={**os.environ, "COLUMNS": COLUMNS}, timeout=120,
        )  # fmt: skip


def write_dataset(path: Path, rewards: dict[str, object]) -> None:
    lines = []
    for task_id, reward in rewards.items():
        fake = {"failure": "agent_run_error"} if reward == "error" else {"reward": reward}
        lines.append(json.dumps({"id": task_id, "responses_create_params": {"input": f"Q {task_id}"}, "fake": fake}))
    path.write_text("\n".join(lines) + "\n")


def run_pytest(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", *args],
        cwd=root, capture_output=True, text=True, env={**os.environ, "COLUMNS": COLUMNS}, timeout=300,
    )  # fmt: skip


@pytest.fixture(scope="module")
def sessions(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sessions]:
    """Three shard sessions and one unsharded session over the same two datasets (3 repeats; gates that
    fail on the mean reward of mcqa and pass on other), each writing its report and JUnit XML."""
    root = tmp_path_factory.mktemp("merge")
    checkout = make_fake_checkout(root)
    recording = write_recording(root / "recording_rollouts.jsonl")
    write_dataset(root / "mcqa.jsonl", REWARDS)
    write_dataset(root / "other.jsonl", OTHER)
    (root / "pytest.ini").write_text(
        "[pytest]\ngym_dataset_settings =\n    mcqa.jsonl: min_mean_reward=0.75\n    other.jsonl: min_pass_at_k=3:0.6\n"
    )
    args = [
        f"--gym-checkout={checkout}", f"--gym-replay={recording}", "-p", "no:cacheprovider", "-p", "no:randomly",
        "mcqa.jsonl", "other.jsonl", "--gym-repeats=3", "--gym-agent=mcqa_simple_agent", "-rA",
    ]  # fmt: skip
    calls = root / "calls.jsonl"
    previous = os.environ.get("FAKE_GYM_CALLS")
    os.environ["FAKE_GYM_CALLS"] = str(calls)
    try:
        alone = run_pytest(root, *args, "--gym-report=alone.json", "--junitxml=alone.xml")
        shards = [
            run_pytest(root, *args, f"--gym-shard={i}/3", f"--gym-report=s{i}.json", f"--junitxml=s{i}.xml")
            for i in (1, 2, 3)
        ]
    finally:
        if previous is None:
            del os.environ["FAKE_GYM_CALLS"]
        else:
            os.environ["FAKE_GYM_CALLS"] = previous
    assert (root / "alone.json").exists(), alone.stdout[-3000:]
    yield Sessions(root, args, alone, shards)


def summary_section(output: str) -> list[str]:
    """The ``gym reward summary`` section up to the verdict's reason, without wall times and the replay line."""
    lines = output.replace("\n\nverifier flips against the recording: none", "").splitlines()
    start = next(i for i, line in enumerate(lines) if "gym reward summary" in line)
    end = next(i for i, line in enumerate(lines) if line.startswith("gym gates:"))
    return [line for line in lines[start : end + 1] if "wall time" not in line]


def without_wall_time(datasets: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{key: value for key, value in entry.items() if key != "wall_time"} for entry in datasets]


def test_merged_shards_equal_one_session(sessions: Sessions) -> None:
    merged = sessions.merge("s1.json", "s2.json", "s3.json", "--gym-report=merged.json", "--junitxml=merged.xml")
    assert merged.returncode == sessions.alone.returncode == 1, merged.stdout + merged.stderr
    assert summary_section(merged.stdout) == summary_section(sessions.alone.stdout)
    assert "gym gates: FAIL - mcqa.jsonl mean reward" in merged.stdout  # the comparison is not vacuous
    alone, report = sessions.report("alone.json"), sessions.report("merged.json")
    jsonschema.validate(report, json.loads(SCHEMA_PATH.read_text()))
    assert without_wall_time(report["datasets"]) == without_wall_time(alone["datasets"])
    assert [r["nodeid"] for r in report["rollouts"]] == [r["nodeid"] for r in alone["rollouts"]]
    assert [r["reward"] for r in report["rollouts"]] == [r["reward"] for r in alone["rollouts"]]
    assert report["plan"]["shard"] is None and report["meta"]["merged_shards"] == "3 of 3"
    assert "dataset_sha256.mcqa.jsonl" in report["meta"] and "run_dir" not in report["meta"]
    # The wall time spans the three sessions' rollouts.
    starts = [r["start"] for name in ("s1.json", "s2.json", "s3.json") for r in sessions.report(name)["rollouts"]]
    stops = [r["stop"] for name in ("s1.json", "s2.json", "s3.json") for r in sessions.report(name)["rollouts"]]
    assert report["datasets"][0]["wall_time"] <= max(stops) - min(starts)
    datasets = ("gym::mcqa", "gym::other")
    assert junit_aggregates(sessions.root / "merged.xml", datasets) == junit_aggregates(
        sessions.root / "alone.xml", datasets
    )
    assert junit_cases(sessions.root / "merged.xml") == junit_cases(sessions.root / "alone.xml")
    assert all(values for *_, values in junit_cases(sessions.root / "merged.xml"))  # not vacuous: each has values
    # The suite carries the merge's exit status and reason, as a session's carries its own.
    merged_suite, alone_suite = (junit_suite_properties(sessions.root / name) for name in ("merged.xml", "alone.xml"))
    assert merged_suite["gym.exit_status"] == alone_suite["gym.exit_status"] == "1"
    assert merged_suite["gym.reason"] == alone_suite["gym.reason"] == report["session"]["reason"]


SHUFFLE = """
import os, random, pytest
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items):
    random.Random(int(os.environ["SHUFFLE_SEED"])).shuffle(items)  # as pytest-randomly does, another seed a job
"""


def test_shards_whose_items_were_shuffled_merge(sessions: Sessions, monkeypatch: pytest.MonkeyPatch) -> None:
    """pytest-randomly shuffles each shard's items with its own seed: the reports record the plan in the files'
    order, so the shards agree and merge to what unshuffled shards merge to."""
    conftest = sessions.root / "conftest.py"
    conftest.write_text(SHUFFLE)
    try:
        for i in (1, 2, 3):
            monkeypatch.setenv("SHUFFLE_SEED", str(i))
            run_pytest(sessions.root, *sessions.args, f"--gym-shard={i}/3", f"--gym-report=r{i}.json")
    finally:
        conftest.unlink()
    plans = [[entry["tasks"] for entry in sessions.report(f"r{i}.json")["plan"]["datasets"]] for i in (1, 2, 3)]
    assert plans[0] == plans[1] == plans[2] == [list(REWARDS), list(OTHER)]
    shuffled = sessions.merge("r1.json", "r2.json", "r3.json")
    assert shuffled.returncode == sessions.alone.returncode, shuffled.stderr
    assert summary_section(shuffled.stdout) == summary_section(sessions.merge("s1.json", "s2.json", "s3.json").stdout)


def test_merge_order_and_gate_overrides(sessions: Sessions) -> None:
    forward = sessions.merge("s1.json", "s2.json", "s3.json", "--gym-report=forward.json")
    backward = sessions.merge("s3.json", "s1.json", "s2.json", "--gym-report=backward.json")
    assert summary_section(forward.stdout) == summary_section(backward.stdout)
    assert sessions.report("forward.json")["rollouts"] == sessions.report("backward.json")["rollouts"]
    # The merge's gate options beat what the reports recorded, as the command line does in a session; errored
    # rollouts still fail the verdict: the gate passing on the rest is INCONCLUSIVE.
    lowered = sessions.merge("s1.json", "s2.json", "s3.json", "--gym-min-mean-reward=0.1")
    reason = " ".join(lowered.stdout.split())
    assert lowered.returncode == 1
    assert "gym gates: INCONCLUSIVE - mcqa.jsonl mean reward 0.72 judged on 27 of 30 selected rollouts" in reason
    assert reason.endswith("; 3 rollouts errored")
    sessions.merge("s1.json", "s2.json", "s3.json", "--gym-min-mean-reward=0.1", "--gym-report=l.json")
    gates = [gate["label"] for entry in sessions.report("l.json")["datasets"] for gate in entry["gates"]]
    assert gates == ["mean reward >= 0.10", "mean reward >= 0.10", "pass@3 >= 0.60"]


def test_merge_judges_family_wise_when_the_shards_did(sessions: Sessions) -> None:
    """Shards whose plan records ``--gym-familywise=holm`` merge to gates judged as one family (Holm), as the
    session over every shard would; ``--gym-familywise`` given to the merge beats what the reports recorded."""
    holm = []
    for i in (1, 2, 3):
        report = sessions.report(f"s{i}.json")
        assert report["plan"]["familywise"] == "off"
        report["plan"]["familywise"] = "holm"
        holm.append(str(sessions.write(f"holm{i}.json", report)))
    lower = "--gym-gate-on=lower-bound"
    merged = sessions.merge(*holm, lower, "--gym-report=holm.json")
    assert merged.returncode != EXIT_CANNOT_MERGE, merged.stderr
    report = sessions.report("holm.json")
    assert report["plan"]["familywise"] == "holm"
    gates = [gate for entry in report["datasets"] for gate in entry["gates"]]
    members = [gate["familywise"] for gate in gates if gate["familywise"] is not None]
    assert members and all(member["family"] == len(members) for member in members), gates
    assert f"Holm over {len(members)}" in " ".join(merged.stdout.split())
    alone = sessions.merge(*holm, lower, "--gym-familywise=off", "--gym-report=off.json")
    assert alone.returncode != EXIT_CANNOT_MERGE, alone.stderr
    assert [g["familywise"] for e in sessions.report("off.json")["datasets"] for g in e["gates"]] == [None] * len(gates)
    sessions.merge("s1.json", "s2.json", "s3.json", lower, "--gym-familywise=holm", "--gym-report=given.json")
    given = [g["familywise"] for e in sessions.report("given.json")["datasets"] for g in e["gates"]]
    assert given == [gate["familywise"] for gate in gates]


def test_one_unsharded_report_merges_to_itself(sessions: Sessions) -> None:
    merged = sessions.merge("alone.json", "--gym-report=same.json")
    assert merged.returncode == sessions.alone.returncode
    assert without_wall_time(sessions.report("same.json")["datasets"]) == without_wall_time(
        sessions.report("alone.json")["datasets"]
    )


def test_missing_shard_and_missing_rollouts_are_errors_named(sessions: Sessions) -> None:
    merged = sessions.merge("s1.json", "s3.json", "--gym-report=partial.json")
    assert merged.returncode == 1
    assert "gym merge: shard 2/3 has no report: its rollouts are missing" in merged.stdout
    report = sessions.report("partial.json")
    missing = [r for r in report["rollouts"] if r["failure_class"] == "missing"]
    shard2 = sessions.report("s2.json")
    assert sorted(r["nodeid"] for r in missing) == sorted(r["nodeid"] for r in shard2["rollouts"])
    assert all(r["status"] == "error" and r["reward"] is None for r in missing)
    for rollout in missing[:10]:
        assert f"  {rollout['nodeid']}" in merged.stdout.splitlines()
    # A pair a shard selected but never reported (its session was interrupted) is missing too.
    shard1 = sessions.report("s1.json")
    lost = shard1["rollouts"].pop(0)
    cut = sessions.write("cut1.json", shard1)
    merged = sessions.merge(str(cut), "s2.json", "s3.json", "--gym-report=cut.json")
    assert merged.returncode == 1
    assert f"  {lost['nodeid']}" in merged.stdout.splitlines()
    assert "1 selected rollout is in no report" in merged.stdout
    (entry,) = [r for r in sessions.report("cut.json")["rollouts"] if r["nodeid"] == lost["nodeid"]]
    assert entry["status"] == "error" and entry["failure_class"] == "missing"


def mutated(sessions: Sessions, name: str, change: Any) -> Path:
    report = copy.deepcopy(sessions.report(name))
    change(report)
    return sessions.write(f"bad-{name}", report)


def _set_plan(key: str, value: object) -> Any:
    def change(report: dict[str, Any]) -> None:
        report["plan"][key] = value

    return change


def _set_dataset(key: str, value: object) -> Any:
    def change(report: dict[str, Any]) -> None:
        report["plan"]["datasets"][0][key] = value

    return change


def _duplicate_first_rollout(report: dict[str, Any]) -> None:
    report["rollouts"].append(dict(report["rollouts"][0]))


def _drop_plan(report: dict[str, Any]) -> None:
    del report["plan"]


def _other_model(report: dict[str, Any]) -> None:
    report["meta"]["model"] = "another-model"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (_set_plan("rule", "other-rule"), "by different rules"),
        (_set_plan("shard", {"index": 2, "count": 4}), "different numbers of shards (3 vs 4)"),
        (_set_plan("shard", {"index": 1, "count": 3}), "are both shard 1/3"),
        (_set_plan("gate_mode", "lower-bound"), "judged gates differently"),
        (_set_plan("familywise", "holm"), "/ --gym-familywise)"),
        (_set_plan("policies", ["base", "cand"]), "compared different policies or margins"),
        (_set_plan("min_improvement", 0.1), "--gym-max-regression / --gym-min-improvement"),
        (_set_dataset("sha256", "0" * 64), "do not agree on mcqa.jsonl: the file differs"),
        (_set_dataset("repeats", 2), "the repeats differ (3 vs 2)"),
        (_set_dataset("threshold", 0.5), "the pass threshold differs"),
        (_set_dataset("gates", []), "the gates differ (mean reward >= 0.75 vs none)"),
        (_set_dataset("tasks", ["a"]), "the task ids differ"),
        (_set_dataset("dataset", "renamed.jsonl"), "collected different datasets"),
        (_duplicate_first_rollout, "appears twice"),
        (_drop_plan, "has no 'plan'"),
        (_other_model, "ran with a different model"),
    ],
)
def test_reports_that_do_not_belong_together_are_refused(sessions: Sessions, change: Any, message: str) -> None:
    bad = mutated(sessions, "s2.json", change)
    merged = sessions.merge("s1.json", str(bad), "s3.json")
    assert merged.returncode == EXIT_CANNOT_MERGE
    assert message in merged.stderr, merged.stderr
    assert merged.stderr.startswith("python -m pytest_gym_eval merge: error: ") and "Traceback" not in merged.stderr


def test_a_rollout_of_another_shard_is_refused(sessions: Sessions) -> None:
    one = sessions.report("s1.json")
    foreign = next(r for r in sessions.report("s2.json")["rollouts"])
    one["rollouts"].append(foreign)
    path = sessions.write("foreign.json", one)
    with pytest.raises(MergeError, match=r"belongs to shard 2/3, not 1/3"):
        merge_reports([read_shard_report(path)])


@pytest.mark.parametrize(
    ("content", "message"),
    [("{", "not a valid JSON report"), ('{"schema_version": 9}', "schema_version 9 is not supported")],
)
def test_unreadable_reports_name_the_file(sessions: Sessions, content: str, message: str) -> None:
    (sessions.root / "broken.json").write_text(content)
    merged = sessions.merge("broken.json")
    assert merged.returncode == EXIT_CANNOT_MERGE and "broken.json" in merged.stderr and message in merged.stderr
    absent = sessions.merge("no-such.json")
    assert absent.returncode == EXIT_CANNOT_MERGE and "no-such.json: cannot read the report" in absent.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--gym-min-pass-at-k=0:0.5"], "--gym-min-pass-at-k"),
        (["--gym-min-pass-rate=2"], "--gym-min-pass-rate"),
        (["--gym-max-drop=0.1"], "--gym-max-drop needs --gym-baseline"),
        (["--gym-report=s2.json"], "--gym-report s2.json is an input of this merge (s2.json): write it elsewhere"),
        (["--junitxml=./s1.json"], "--junitxml s1.json is an input of this merge (s1.json)"),
    ],
)
def test_bad_merge_options_are_named(sessions: Sessions, args: list[str], message: str) -> None:
    before = {name: (sessions.root / name).read_bytes() for name in ("s1.json", "s2.json", "s3.json")}
    merged = sessions.merge("s1.json", "s2.json", "s3.json", *args)
    assert merged.returncode == EXIT_CANNOT_MERGE and message in merged.stderr, merged.stderr
    assert {name: (sessions.root / name).read_bytes() for name in before} == before  # no input overwritten


def test_html_page_of_the_merged_run(sessions: Sessions) -> None:
    merged = sessions.merge("s1.json", "s2.json", "s3.json", "--gym-html=merged.html")
    assert merged.returncode == sessions.alone.returncode, merged.stderr
    assert "gym html report: merged.html" in merged.stdout
    assert "mcqa.jsonl" in (sessions.root / "merged.html").read_text()


def test_the_merged_run_lists_every_shards_test_functions(sessions: Sessions) -> None:
    """Each shard's ``tests`` (its test functions' outcomes over its rollouts) are in the merged report and page."""
    written = []
    for number in (1, 2, 3):
        report = copy.deepcopy(sessions.report(f"s{number}.json"))
        first = report["rollouts"][0]
        report["tests"] = [
            {
                "nodeid": f"test_x.py::test_a[{first['task_id']}-r{first['repeat']}]", "rollout": first["nodeid"],
                "dataset": first["dataset"], "task_id": first["task_id"], "repeat": first["repeat"],
                "outcome": "failed", "message": f"AssertionError: shard {number}",
            }
        ]  # fmt: skip
        written.append(str(sessions.write(f"tests-s{number}.json", report)))
    sessions.merge(*written, "--gym-report=tests-merged.json", "--gym-html=tests-merged.html")
    merged = sessions.report("tests-merged.json")
    jsonschema.validate(merged, json.loads(SCHEMA_PATH.read_text()))
    assert [test["message"] for test in merged["tests"]] == [f"AssertionError: shard {n}" for n in (1, 2, 3)]
    page = (sessions.root / "tests-merged.html").read_text(encoding="utf-8")
    assert all(f"AssertionError: shard {n}" in page for n in (1, 2, 3))


def test_markdown_summary_of_the_merged_run(sessions: Sessions) -> None:
    """``--gym-markdown`` writes the merged run's Markdown summary, and ``$GITHUB_STEP_SUMMARY`` gets the same
    text appended after what earlier steps wrote, as a session does (the merge job's step summary)."""
    step_summary = sessions.root / "step-summary.md"
    step_summary.write_text("earlier step\n")
    merged = subprocess.run(
        [sys.executable, "-m", "pytest_gym_eval", "merge", "s1.json", "s2.json", "s3.json",
         "--gym-markdown=merged.md", "--gym-report=merged-md.json"],
        cwd=sessions.root, capture_output=True, text=True, timeout=120,
        env={**os.environ, "COLUMNS": COLUMNS, "GITHUB_STEP_SUMMARY": str(step_summary)},
    )  # fmt: skip
    assert merged.returncode == sessions.alone.returncode, merged.stderr
    assert "gym markdown summary: merged.md" in merged.stdout
    text = (sessions.root / "merged.md").read_text()
    assert "mcqa.jsonl" in text and "other.jsonl" in text and "merged-md.json" in text
    verdict = next(line for line in sessions.alone.stdout.splitlines() if line.startswith("gym gates:"))
    assert text.startswith("### Gym eval: ") and f"\n{verdict}\n" in text, (verdict, text[:300])
    assert step_summary.read_text().startswith("earlier step\n") and text in step_summary.read_text()
    refused = sessions.merge("s1.json", "s2.json", "s3.json", "--gym-markdown=s1.json")
    assert refused.returncode == EXIT_CANNOT_MERGE and "--gym-markdown s1.json is an input" in refused.stderr


def test_the_shard_assignment_in_the_reports_is_the_rule(sessions: Sessions) -> None:
    owners = assign_shards("mcqa.jsonl", REWARDS, 3)
    for index in (1, 2, 3):
        report = sessions.report(f"s{index}.json")
        tasks = {r["task_id"] for r in report["rollouts"] if r["dataset"] == "mcqa.jsonl"}
        assert tasks == {task for task, owner in owners.items() if owner == index}


def junit_cases(path: Path) -> list[tuple[str, str, str, dict[str, str]]]:
    """(classname, name, outcome, the rollout's values without the record's location) of every testcase, sorted:
    the values of its ``<system-out>`` line (xunit2, pytest's default family)."""
    cases = []
    for case in ET.parse(path).getroot().iter("testcase"):
        outcome = next((child.tag for child in case if child.tag in ("failure", "error", "skipped")), "passed")
        values = parse_system_out("".join(out.text or "" for out in case.iter("system-out"))) or {}
        shown = {name: json.dumps(value) for name, value in values.items() if name != "record"}
        cases.append((case.get("classname", ""), case.get("name", ""), outcome, shown))
    return sorted(cases)
