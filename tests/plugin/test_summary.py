"""The end of a session: reward summary, CI gates and exit status, JUnit XML, JSON report, baseline, replay
flips. Against the stand-in ``gym`` (tests/support/fake_gym.py), whose rewards the rows dictate."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema
import pytest

from pytest_gym_eval.reporting.json_report import SCHEMA_PATH
from tests.support.fakes import FakeGym
from tests.support.junit import junit_rollouts, junit_suite_properties, validate_junit


def rows(rewards: dict[str, float | str]) -> str:
    lines = []
    for task_id, reward in rewards.items():
        fake = {"failure": "agent_run_error"} if reward == "error" else {"reward": reward}
        lines.append(json.dumps({"id": task_id, "responses_create_params": {"input": f"Q {task_id}"}, "fake": fake}))
    return "\n".join(lines) + "\n"


@pytest.fixture
def four_of_five(pytester: pytest.Pytester) -> str:
    """mcqa.jsonl with 5 tasks, 4 of which always pass: mean reward 0.8."""
    (pytester.path / "mcqa.jsonl").write_text(rows({"a": 1.0, "b": 1.0, "c": 1.0, "d": 1.0, "e": 0.0}))
    return "mcqa.jsonl"


def run(pytester: pytest.Pytester, fake_gym: FakeGym, *args: str) -> pytest.RunResult:
    return pytester.runpytest(*fake_gym.args, *args)


def test_summary_closes_the_report(pytester: pytest.Pytester, fake_gym: FakeGym, four_of_five: str) -> None:
    result = run(pytester, fake_gym, four_of_five, "--gym-repeats=2")
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # no gate: pytest's usual status
    result.stdout.fnmatch_lines(
        [
            "*= gym reward summary =*",
            "mcqa.jsonl",
            "  5 tasks, 10 rollouts (10 scored, 0 errors)*",
            "  mean reward 0.80 [[]*]  95% CI over 5 tasks",
            "  pass rate   0.80 [[]0.44, 0.97]  Clopper-Pearson, 10 rollouts, threshold 1.00",
            "  pass@1      0.80*",
            "  pass@2      0.80*",
            "  flaky tasks 0",
        ]
    )
    start = next(i for i, line in enumerate(result.outlines) if "gym reward summary" in line)
    section = result.outlines[start + 1 : start + 1 + result.outlines[start + 1 :].index("") + 1]
    assert section and all(len(line) <= 80 for line in section)


def test_verbose_adds_a_row_per_task(pytester: pytest.Pytester, fake_gym: FakeGym, four_of_five: str) -> None:
    result = run(pytester, fake_gym, four_of_five, "--gym-repeats=2", "-v")
    result.stdout.fnmatch_lines(["*rewards by task*", "    a  1.00 1.00", "    e  0.00 0.00"])


@pytest.mark.parametrize(
    ("args", "status", "verdict"),
    [
        (["--gym-min-mean-reward=0.7"], 0, "*gym gates: the gate passes*"),
        (["--gym-min-mean-reward=0.9"], 1, "*gym gates: FAIL*mean reward 0.80 < 0.90*"),
        (["--gym-min-pass-rate=0.8"], 0, "*gym gates*pass*"),
        (["--gym-min-pass-at-k=2:0.9"], 1, "*gym gates: FAIL*pass@2*"),
        (["--gym-min-mean-reward=0.5", "--gym-gate-on=lower-bound"], 1, "*straddles 0.50*INCONCLUSIVE*"),
        (["--gym-min-mean-reward=0.5", "--gym-gate-on=lower-bound", "--gym-inconclusive=pass"], 0, "*gym gates*"),
    ],
)
def test_gates_decide_the_exit_status(
    pytester: pytest.Pytester, fake_gym: FakeGym, four_of_five: str, args: list[str], status: int, verdict: str
) -> None:
    result = run(pytester, fake_gym, four_of_five, "--gym-repeats=2", *args)
    assert result.ret == status
    result.stdout.fnmatch_lines([verdict])


def test_an_errored_rollout_fails_a_gated_session(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    (pytester.path / "mcqa.jsonl").write_text(rows({"a": 1.0, "b": 1.0, "c": "error"}))
    # The mean over the scored rollouts passes, but c's rollout errored: the gate item fails (a dashboard reading
    # it must not see PASS), also with --gym-inconclusive=pass, and says why.
    for inconclusive in ("fail", "pass"):
        result = run(
            pytester, fake_gym, "mcqa.jsonl", "--gym-min-mean-reward=0.5", f"--gym-inconclusive={inconclusive}"
        )
        assert result.ret == 1
        assert any(line.startswith("FAILED mcqa.jsonl::gym-gate") for line in result.outlines)
        result.stdout.fnmatch_lines(
            [
                "*mean reward 1.00 [[]0.00, 1.00[]] >= 0.50: INCONCLUSIVE (judged on 2 of 3 selected rollouts)",
                "1 of 3 selected rollouts errored: no gate passes on part of the selection",
            ]
        )
        reason = "gym gates: INCONCLUSIVE - mcqa.jsonl mean reward 1.00 judged on 2 of 3 selected rollouts; 1 rollout"
        assert reason in " ".join(result.stdout.str().split())


@pytest.mark.parametrize("stop", [["-x"], ["--maxfail=1"]])
@pytest.mark.parametrize("inconclusive", ["fail", "pass"])
def test_a_gate_on_a_cut_short_evaluation_is_never_green(
    pytester: pytest.Pytester, fake_gym: FakeGym, stop: list[str], inconclusive: str
) -> None:
    # b[r1] fails; -x stops there while Gym holds c (it never scores c, d, e), and the gate passes over what Gym
    # scored (mean 3/4 >= 0.4).
    fakes = {"a": {}, "b": {"rewards": [1.0, 0.0]}, "c": {"hold": True}, "d": {}, "e": {}}
    lines = [{"id": t, "responses_create_params": {"input": f"Q {t}"}, "fake": fake} for t, fake in fakes.items()]
    (pytester.path / "mcqa.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    gate = ["--gym-min-mean-reward=0.4", f"--gym-inconclusive={inconclusive}", "--gym-report=report.json"]
    result = run(pytester, fake_gym, "mcqa.jsonl", "--gym-repeats=2", *gate, *stop)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "  2 tasks, 4 of 10 selected rollouts reported (4 scored, 0 errors)*",
            "*unreported  6 of 10 selected rollouts never reported*",
            "*mean reward 0.75 * >= 0.40: INCONCLUSIVE (judged on 4 of 10*",
            "gym gates: INCONCLUSIVE - mcqa.jsonl mean reward 0.75 judged on 4 of 10 selected",
        ]
    )
    report = json.loads((pytester.path / "report.json").read_text())
    (dataset,) = report["datasets"]
    assert dataset["selected"] == 10 and dataset["unreported"] == 10 - dataset["rollouts"] > 0
    assert dataset["verdict"] == "INCONCLUSIVE" and dataset["gates"][0]["note"].startswith("judged on ")
    assert report["session"]["exit_status"] == 1 and "never reported" in report["session"]["reason"]


def test_the_report_carries_the_sessions_exit_status_when_a_rollout_errored(
    pytester: pytest.Pytester, fake_gym: FakeGym
) -> None:
    (pytester.path / "mcqa.jsonl").write_text(rows({"a": 1.0, "b": 1.0, "c": "error"}))
    result = run(pytester, fake_gym, "mcqa.jsonl", "--gym-min-mean-reward=0.5", "--gym-report=report.json")
    assert result.ret == 1
    report = json.loads((pytester.path / "report.json").read_text())
    assert report["session"] == {
        "exit_status": 1,
        "reason": "gym gates: INCONCLUSIVE - mcqa.jsonl mean reward 1.00 judged on 2 of 3 selected rollouts; 1 rollout"
        " errored",
    }
    # The mean over the scored rollouts clears the gate, but one errored: INCONCLUSIVE, and the dataset FAILs.
    assert report["datasets"][0]["verdict"] == "FAIL"
    assert report["datasets"][0]["gates"][0]["verdict"] == "INCONCLUSIVE"


def test_gates_never_hide_another_test_failing(pytester: pytest.Pytester, fake_gym: FakeGym, four_of_five: str) -> None:
    pytester.makepyfile(test_plain="def test_broken():\n    assert False\n")
    result = run(pytester, fake_gym, four_of_five, "test_plain.py", "--gym-min-mean-reward=0.5")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*1 other test failed or errored; gym gates: the gate passes*"])


def test_rewards_beyond_one_say_what_the_threshold_means_and_datasets_can_set_it(
    pytester: pytest.Pytester, fake_gym: FakeGym
) -> None:
    # A multi-component reward sums to 3.0; 2 of 3 components pass at the default threshold 1.0.
    (pytester.path / "multi.jsonl").write_text(rows({"a": 3.0, "b": 2.0, "c": 0.0}))
    result = run(pytester, fake_gym, "multi.jsonl", "--gym-agent=mcqa_simple_agent")
    result.stdout.fnmatch_lines(
        ["  rewards     from 0.00 to 3.00, beyond [[]0, 1[]]: a rollout passes at reward >=", "*1.00 (the pass*"]
    )
    pytester.makeini("[pytest]\ngym_dataset_settings =\n    multi.jsonl: agent=mcqa_simple_agent pass_threshold=3\n")
    result = run(pytester, fake_gym, "multi.jsonl")
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(["*a rollout passes at reward >=", "*3.00 (the pass threshold*"])


def test_gates_from_ini_and_dataset_settings(pytester: pytest.Pytester, fake_gym: FakeGym, four_of_five: str) -> None:
    (pytester.path / "other.jsonl").write_text(rows({"x": 1.0}))
    pytester.makeini(
        "[pytest]\n"
        "gym_dataset_settings =\n    mcqa.jsonl: agent=mcqa_simple_agent min_mean_reward=0.9\n"
        "    other.jsonl: agent=mcqa_simple_agent min_pass_rate=1.0\n"
    )
    result = run(pytester, fake_gym, four_of_five, "other.jsonl", "-rA")
    assert result.ret == 1
    result.stdout.fnmatch_lines(["FAILED mcqa.jsonl::gym-gate*"])
    result.stdout.fnmatch_lines(["PASSED other.jsonl::gym-gate*"])


def test_gate_item_runs_after_the_rollouts_and_shows_in_junit(
    pytester: pytest.Pytester, fake_gym: FakeGym, four_of_five: str
) -> None:
    result = run(pytester, fake_gym, four_of_five, "--gym-min-mean-reward=0.9", "--junitxml=junit.xml", "-v")
    names = [line.split()[0] for line in result.outlines if " PASSED" in line or " FAILED" in line]
    assert names[-1] == "mcqa.jsonl::gym-gate"
    cases = {c.get("name"): c for c in ET.parse(pytester.path / "junit.xml").getroot().iter("testcase")}
    gate = cases["gym-gate"]
    assert gate.find("failure") is not None
    assert "mean reward 0.80" in (gate.find("failure").get("message") or "")  # type: ignore[union-attr]


@pytest.mark.parametrize("family", ["xunit2", "xunit1", "legacy"])
def test_junit_carries_rewards_and_aggregates(
    pytester: pytest.Pytester, fake_gym: FakeGym, monkeypatch: pytest.MonkeyPatch, family: str
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-should-never-appear")
    (pytester.path / "mcqa.jsonl").write_text(rows({"a": 1.0, "b": 0.0, "c": "error"}))
    run(pytester, fake_gym, "mcqa.jsonl", "--gym-repeats=2", "--junitxml=junit.xml", "--gym-min-pass-rate=0.4",
        "-o", f"junit_family={family}")  # fmt: skip
    junit = pytester.path / "junit.xml"
    validate_junit(junit, family)
    cases = junit_rollouts(junit)
    assert cases["a[r1]"] == {"task_id": "a", "repeat": "1", "agent": "mcqa_simple_agent", "reward": "1.0",
                              "record": cases["a[r1]"]["record"], "answer": cases["a[r0]"]["answer"]}  # fmt: skip
    assert re.fullmatch("[0-9a-f]{16}", cases["a[r1]"]["answer"])  # the digest of the answer both repeats gave
    assert cases["b[r0]"]["reward"] == "0.0"
    assert cases["c[r0]"]["failure_class"] == "agent_run_error" and "reward" not in cases["c[r0]"]
    # Where the values are is the family's to say: testcase properties only where its schema allows them.
    root = ET.parse(junit).getroot()
    in_properties = any(case.find("properties") is not None for case in root.iter("testcase"))
    assert in_properties == (family != "xunit2")
    suite = junit_suite_properties(junit)
    assert suite["gym::mcqa.jsonl::mean_reward"] == "0.5"
    assert suite["gym::mcqa.jsonl::pass_rate"] == "0.5"
    assert suite["gym::mcqa.jsonl::errors"] == "2"
    assert suite["gym::mcqa.jsonl::gate.pass_rate"] == "INCONCLUSIVE"  # judged on 4 of 6 rollouts
    assert suite["gym::mcqa.jsonl::gate.pass_rate.threshold"] == "0.4"
    assert suite["gym::mcqa.jsonl::verdict"] == "FAIL"  # two rollouts errored
    assert suite["gym.exit_status"] == "1" and "2 rollouts errored" in suite["gym.reason"]
    pass_rate = [float(suite[f"gym::mcqa.jsonl::pass_rate.{end}"]) for end in ("low", "high")]
    assert pass_rate[0] < 0.5 < pass_rate[1]
    assert suite["gym.model"] == "replay" and suite["gym.gym_checkout"] == str(fake_gym.checkout)
    assert len(suite["gym::mcqa.jsonl::sha256"]) == 64
    # Each aggregate once, under its own name only (the 0.1 names, gym.mcqa.jsonl.mean_reward, are gone).
    assert not [name for name in suite if name.startswith(("gym.mcqa.jsonl", "gym.dataset_sha256."))]
    assert "sk-should-never-appear" not in junit.read_text()


def test_suite_property_names_do_not_depend_on_the_gate_threshold(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    (pytester.path / "mcqa.jsonl").write_text(rows({"a": 1.0, "b": 0.0}))
    names = []
    for threshold in ("0.4", "0.6"):
        run(pytester, fake_gym, "mcqa.jsonl", "--junitxml=junit.xml", f"--gym-min-mean-reward={threshold}",
            "--gym-min-pass-at-k=1:0.2")  # fmt: skip
        suite = junit_suite_properties(pytester.path / "junit.xml")
        assert suite["gym::mcqa.jsonl::gate.mean_reward.threshold"] == threshold
        names.append({name for name in suite if name.startswith("gym::")})
    assert names[0] == names[1]
    assert {"gym::mcqa.jsonl::gate.mean_reward", "gym::mcqa.jsonl::gate.pass_at_1"} <= names[0]
    # Every per-dataset name splits into exactly gym, the dataset, and the name.
    assert all(len(name.split("::")) == 3 for name in names[0])


def test_json_report_validates_against_its_schema(
    pytester: pytest.Pytester, fake_gym: FakeGym, four_of_five: str
) -> None:
    run(pytester, fake_gym, four_of_five, "--gym-repeats=2", "--gym-report=out/report.json", "--gym-min-pass-rate=0.5")
    data = json.loads((pytester.path / "out" / "report.json").read_text())
    jsonschema.validate(data, json.loads(SCHEMA_PATH.read_text()))
    (dataset,) = data["datasets"]
    assert dataset["mean_reward"]["estimate"] == 0.8 and dataset["tasks"] == 5
    assert len(data["rollouts"]) == 10
    assert all(r["record"].rsplit(":", 1)[1].isdigit() for r in data["rollouts"])


def test_baseline_flags_drops_and_max_drop_gates(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    tasks = [chr(ord("a") + i) for i in range(8)]
    (pytester.path / "mcqa.jsonl").write_text(rows(dict.fromkeys(tasks, 1.0)))
    run(pytester, fake_gym, "mcqa.jsonl", "--gym-repeats=2", "--gym-report=baseline.json")
    (pytester.path / "mcqa.jsonl").write_text(rows({t: (0.0 if i < 6 else 1.0) for i, t in enumerate(tasks)}))
    result = run(pytester, fake_gym, "mcqa.jsonl", "--gym-repeats=2", "--gym-baseline=baseline.json",
                 "--gym-max-drop=0.2")  # fmt: skip
    assert result.ret == 1
    result.stdout.fnmatch_lines(
        ["*mcqa.jsonl vs baseline*", "*change*-0.75*", "*a  1.00 -> 0.00*", "*gym gates: FAIL*"]
    )


def test_one_task_that_regresses_trips_the_task_level_gate_but_never_the_paired_test(
    pytester: pytest.Pytester, fake_gym: FakeGym
) -> None:
    tasks = [f"t{i:02d}" for i in range(12)]
    (pytester.path / "mcqa.jsonl").write_text(rows(dict.fromkeys(tasks, 1.0)))
    run(pytester, fake_gym, "mcqa.jsonl", "--gym-repeats=2", "--gym-report=baseline.json")
    (pytester.path / "mcqa.jsonl").write_text(rows({t: (0.0 if t == "t07" else 1.0) for t in tasks}))
    common = ["mcqa.jsonl", "--gym-repeats=2", "--gym-baseline=baseline.json", "--gym-max-drop=0.0"]
    # The paired t-test over 12 tasks with one drop: t = -1 whatever the drop, so --gym-max-drop never fires.
    result = run(pytester, fake_gym, *common)
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*change*p = 0.339*", "  regressed   1 (passed on every baseline repeat*", "    t07"])
    result = run(pytester, fake_gym, *common, "--gym-max-regressed-tasks=0")
    assert result.ret == 1
    result.stdout.fnmatch_lines(["gym gates: FAIL - mcqa.jsonl: 1 task regressed (passed on every baseline repeat,",
                                 "  fail on every repeat now: t07), more than the allowed 0"])  # fmt: skip
    assert run(pytester, fake_gym, *common, "--gym-max-regressed-tasks=1").ret == 0


def test_no_significant_drop_passes_max_drop(pytester: pytest.Pytester, fake_gym: FakeGym, four_of_five: str) -> None:
    run(pytester, fake_gym, four_of_five, "--gym-report=baseline.json")
    result = run(pytester, fake_gym, four_of_five, "--gym-baseline=baseline.json", "--gym-max-drop=0.1")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*vs baseline*"])


def test_replay_flips_are_listed_and_can_fail_the_session(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    # Recordings of both tasks say reward 1.0; the verifier (here the stand-in) now gives task b 0.0.
    (pytester.path / "mcqa.jsonl").write_text(rows({"a": 1.0, "b": 0.0}))
    recordings = pytester.path / "recorded_rollouts.jsonl"
    recordings.write_text(
        "".join(
            json.dumps({"responses_create_params": {"input": f"Q {t}"}, "reward": 1.0,
                        "response": {"output": [{"type": "message", "role": "assistant", "content": "x"}]}}) + "\n"
            for t in "ab"
        )
    )  # fmt: skip
    args = [f"--gym-checkout={fake_gym.checkout}", f"--gym-replay={recordings}", "-p", "no:cacheprovider"]
    result = pytester.runpytest(*args, "mcqa.jsonl")
    result.stdout.fnmatch_lines(
        ["verifier flips against the recording: 1", "  mcqa.jsonl::b[[]r0[]]", "      reward 0, recorded 1.0"]
    )
    result = pytester.runpytest(*args, "mcqa.jsonl", "--gym-fail-on-flip", "--deselect=mcqa.jsonl::b[r0]")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["verifier flips against the recording: none"])
    result = pytester.runpytest(*args, "mcqa.jsonl", "--gym-fail-on-flip")
    assert result.ret == 1
    result.stdout.fnmatch_lines(["*gym gates: FAIL*1 rollout reward differ*"])
    # Nothing scored (every rollout errored): nothing was compared, so no "none".
    (pytester.path / "mcqa.jsonl").write_text(rows({"a": "error", "b": "error"}))
    result = pytester.runpytest(*args, "mcqa.jsonl")
    result.stdout.fnmatch_lines(["verifier flips against the recording: not judged: no rollout scored"])


def test_bad_baseline_is_a_usage_error(pytester: pytest.Pytester, fake_gym: FakeGym, four_of_five: str) -> None:
    (pytester.path / "baseline.json").write_text("{not json")
    result = run(pytester, fake_gym, four_of_five, "--gym-baseline=baseline.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--gym-baseline: *baseline.json: not a valid JSON report*"])
    assert fake_gym.calls() == []  # said before anything ran
    result = run(pytester, fake_gym, four_of_five, "--gym-baseline=missing.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--gym-baseline: no such file: *missing.json"])


def test_missing_replay_file_is_a_usage_error(pytester: pytest.Pytester, fake_gym: FakeGym, four_of_five: str) -> None:
    result = pytester.runpytest(f"--gym-checkout={fake_gym.checkout}", "--gym-replay=nonexistent.jsonl", four_of_five)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--gym-replay: no such file: *nonexistent.jsonl"])
    assert "Traceback" not in result.stdout.str() + result.stderr.str()


def test_unreadable_replay_file_errors_every_item_and_fails_cleanly(
    pytester: pytest.Pytester, fake_gym: FakeGym, four_of_five: str
) -> None:
    # The dataset itself passed as the recording: its rows have no `response`.
    result = pytester.runpytest(f"--gym-checkout={fake_gym.checkout}", f"--gym-replay={four_of_five}", four_of_five)
    result.assert_outcomes(errors=5)
    assert result.ret == 1
    output = result.stdout.str()
    assert "Traceback" not in output and "INTERNALERROR" not in output
    result.stdout.fnmatch_lines(["*--gym-replay: *mcqa.jsonl:1: *response*", "*gym reward summary*"])


def test_bad_gate_values_are_usage_errors(pytester: pytest.Pytester, four_of_five: str) -> None:
    result = pytester.runpytest(four_of_five, "--gym-min-pass-at-k=x:1")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--gym-min-pass-at-k*K:V*"])


def test_report_path_is_not_written_without_rollouts(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_plain="def test_plain():\n    pass\n")
    result = pytester.runpytest("--gym-report=report.json", "-p", "no:cacheprovider")
    assert result.ret == 0 and not Path(pytester.path / "report.json").exists()
    assert "gym reward summary" not in result.stdout.str()


def test_no_rollout_starts_before_gym_eval_run_so_wall_time_leaves_gyms_start_up_out(
    pytester: pytest.Pytester, fake_gym: FakeGym, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first item waits for its rollout from its setup on, Gym's start-up included: the dataset whose item ran
    first counted that start-up (a minute and more) as its wall time."""
    monkeypatch.setenv("FAKE_GYM_START_DELAY", "2")
    (pytester.path / "first.jsonl").write_text(rows({"a": 1.0}))
    (pytester.path / "second.jsonl").write_text(rows({"b": 1.0}))
    args = ["first.jsonl", "second.jsonl", "--gym-agent=mcqa_simple_agent", "--gym-report=report.json"]
    args.append("--gym-run-dir=runs")
    result = run(pytester, fake_gym, *args)
    assert result.ret == 0
    (run_dir,) = (pytester.path / "runs").iterdir()
    eval_started = (run_dir / "gym-input.jsonl").stat().st_mtime  # written just before `gym eval run` starts
    report = json.loads((pytester.path / "report.json").read_text())
    starts = [rollout["start"] for rollout in report["rollouts"]]
    assert len(starts) == 2 and min(starts) >= eval_started


def test_a_gate_the_session_judged_after_x_stopped_its_item_agrees_with_the_exit_status(
    pytester: pytest.Pytester, fake_gym: FakeGym
) -> None:
    # -x stops after b's failure, but Gym scored every rollout: the session's end judges the gate on all of them
    # (PASS, exit 0), and the gate item's JUnit testcase, which never ran, says the same.
    (pytester.path / "mcqa.jsonl").write_text(rows({"a": 1.0, "b": 0.0, "c": 1.0, "d": 1.0, "e": 1.0}))
    result = run(pytester, fake_gym, "mcqa.jsonl", "--gym-min-mean-reward=0.5", "-x", "--junitxml=j.xml")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()[-2000:]
    suite = ET.parse(pytester.path / "j.xml").getroot().find("testsuite")
    assert suite is not None
    (gate,) = [case for case in suite.iter("testcase") if case.get("name") == "gym-gate"]
    assert [child.tag for child in gate if child.tag in ("failure", "error", "skipped")] == []
    assert suite.get("errors") == "0"
