"""Rollouts as fixture values: a test function marked ``gym_rollouts`` gets each (task, repeat) rollout of a dataset,
planned into the session's one ``gym eval run`` beside the dataset's own items. Against the stand-in ``gym``;
tests/real_gym/test_rollout_tests_real_gym.py checks the mcqa example against real Gym."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from pytest_gym_eval.reporting.json_report import SCHEMA_PATH
from tests.support.children import outcomes
from tests.support.fakes import FakeGym

ANSWERS = {"q1": "\\boxed{A}", "q2": "no box here", "q3": "\\boxed{C}"}

TESTS = """
import pytest
from pytest_gym_eval import Rollout


@pytest.mark.gym_rollouts("mcqa.jsonl")
def test_boxed(gym_rollout: Rollout) -> None:
    assert isinstance(gym_rollout, Rollout)
    assert gym_rollout.row["id"] == gym_rollout.task_id
    assert gym_rollout.record_path is not None and gym_rollout.record_line >= 1
    assert gym_rollout.output_tokens == 7 and gym_rollout.input_tokens == 3
    assert "\\\\boxed{" in gym_rollout.output_text
"""


def write_dataset(path: Path, extra: dict[str, dict[str, object]] | None = None) -> None:
    rows = []
    for task_id, text in ANSWERS.items():
        usage = {"input_tokens": 3, "output_tokens": 7}
        fake: dict[str, object] = {"text": text, "reward": 1.0 if "boxed" in text else 0.0, "usage": usage}
        fake.update((extra or {}).get(task_id, {}))
        rows.append({"id": task_id, "responses_create_params": {"input": f"Q {task_id}"}, "fake": fake})
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


def dataset_summary(result: pytest.RunResult, dataset: str = "mcqa.jsonl") -> str:
    """The reward summary's lines of ``dataset`` (its name line and the indented lines below it)."""
    lines = result.outlines
    start = lines.index(dataset)
    end = next((i for i in range(start + 1, len(lines)) if not lines[i].startswith("  ")), len(lines))
    return "\n".join(lines[start:end])


def input_rows(pytester: pytest.Pytester) -> list[dict[str, object]]:
    """The rows of the one run's Gym input (the run directory under ``runs``)."""
    (run_dir,) = (pytester.path / "runs").iterdir()
    return [json.loads(line) for line in (run_dir / "gym-input.jsonl").read_text().splitlines()]


def run(pytester: pytest.Pytester, fake_gym: FakeGym, *args: str) -> pytest.RunResult:
    common = [*fake_gym.args, "--gym-agent=mcqa_simple_agent", "--gym-run-dir=runs", "-rA"]
    return pytester.runpytest_subprocess(*common, *args)


def eval_runs(fake_gym: FakeGym) -> int:
    return sum(1 for call in fake_gym.calls() if call["argv"][:2] == ["eval", "run"])


def test_a_test_function_gets_each_rollout_of_the_dataset(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    """A test-only run (the dataset not on the command line): one test per pair, ids <task>-r<k>, one Gym run."""
    write_dataset(pytester.path / "mcqa.jsonl")
    pytester.makepyfile(test_answers=TESTS)
    result = run(pytester, fake_gym, "test_answers.py")
    assert outcomes(result) == {
        "test_answers.py::test_boxed[q1-r0]": "PASSED",
        "test_answers.py::test_boxed[q2-r0]": "FAILED",
        "test_answers.py::test_boxed[q3-r0]": "PASSED",
    }
    assert sorted(row["id"] for row in input_rows(pytester)) == ["q1", "q2", "q3"]
    assert eval_runs(fake_gym) == 1
    # The dataset's rollouts are counted as its own in the reward summary (2 of 3 rewards are 1.0).
    summary = dataset_summary(result)
    assert "3 rollouts (3 scored, 0 errors)" in summary and "mean reward 0.67" in summary, summary


@pytest.mark.parametrize("order", ["dataset first", "tests first"])
def test_a_pair_both_need_is_rolled_out_once_in_either_order(
    pytester: pytest.Pytester, fake_gym: FakeGym, order: str
) -> None:
    write_dataset(pytester.path / "mcqa.jsonl")
    pytester.makepyfile(test_answers=TESTS)
    files = ["mcqa.jsonl", "test_answers.py"]
    result = run(pytester, fake_gym, *(files if order == "dataset first" else files[::-1]))
    assert outcomes(result) == {
        "mcqa.jsonl::q1[r0]": "PASSED",
        "mcqa.jsonl::q2[r0]": "FAILED",
        "mcqa.jsonl::q3[r0]": "PASSED",
        "test_answers.py::test_boxed[q1-r0]": "PASSED",
        "test_answers.py::test_boxed[q2-r0]": "FAILED",
        "test_answers.py::test_boxed[q3-r0]": "PASSED",
    }
    assert sorted(row["id"] for row in input_rows(pytester)) == ["q1", "q2", "q3"]  # once each, not twice
    assert eval_runs(fake_gym) == 1
    summary = dataset_summary(result)
    assert "3 rollouts (3 scored, 0 errors)" in summary and "mean reward 0.67" in summary, summary  # not six


def test_repeats_and_a_task_filter_select_the_pairs(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    (pytester.path / "data").mkdir()
    write_dataset(pytester.path / "data" / "mcqa.jsonl")
    pytester.makepyfile(
        **{
            "data/test_some": """
import pytest

@pytest.mark.gym_rollouts("mcqa.jsonl", repeats=2, tasks="q1 or q3")
def test_filtered(gym_rollout):
    assert gym_rollout.task_id in ("q1", "q3") and gym_rollout.repeat in (0, 1)
    assert gym_rollout.dataset == "data/mcqa.jsonl" and gym_rollout.reward == 1.0 and gym_rollout.passed

@pytest.mark.gym_rollouts("mcqa.jsonl", tasks=["q2"])
def test_listed(gym_rollout):
    assert gym_rollout.task_id == "q2" and gym_rollout.status == "failed"
"""
        }
    )
    result = run(pytester, fake_gym, "data/test_some.py")
    assert sorted(outcomes(result)) == [
        "data/test_some.py::test_filtered[q1-r0]",
        "data/test_some.py::test_filtered[q1-r1]",
        "data/test_some.py::test_filtered[q3-r0]",
        "data/test_some.py::test_filtered[q3-r1]",
        "data/test_some.py::test_listed[q2-r0]",
    ]
    result.assert_outcomes(passed=5)
    assert sorted(row["id"] for row in input_rows(pytester)) == ["q1", "q1", "q2", "q3", "q3"]


def test_dash_k_selects_by_task_id_and_plans_only_the_selected(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    write_dataset(pytester.path / "mcqa.jsonl")
    pytester.makepyfile(test_answers=TESTS)
    result = run(pytester, fake_gym, "test_answers.py", "mcqa.jsonl", "-k", "q3")
    assert outcomes(result) == {"mcqa.jsonl::q3[r0]": "PASSED", "test_answers.py::test_boxed[q3-r0]": "PASSED"}
    assert [row["id"] for row in input_rows(pytester)] == ["q3"]


def test_an_errored_rollout_errors_the_test_with_its_cause(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    write_dataset(pytester.path / "mcqa.jsonl", {"q2": {"failure": "agent_run_error"}})
    pytester.makepyfile(test_answers=TESTS)
    result = run(pytester, fake_gym, "test_answers.py")
    assert outcomes(result)["test_answers.py::test_boxed[q2-r0]"] == "ERROR"
    result.assert_outcomes(passed=2, errors=1)
    error = result.stdout.str()
    assert "agent_run_error" in error and "fake agent failure" in error
    assert "rollout_for" not in error  # the cause alone, no traceback into the plugin


def test_under_xdist_the_outcomes_are_the_same(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    write_dataset(pytester.path / "mcqa.jsonl")
    pytester.makepyfile(test_answers=TESTS)
    alone = run(pytester, fake_gym, "test_answers.py", "mcqa.jsonl")
    for run_dir in (pytester.path / "runs").iterdir():
        run_dir.rename(pytester.path / "alone-run")
    spread = run(pytester, fake_gym, "test_answers.py", "mcqa.jsonl", "-n", "2")
    assert outcomes(spread) == outcomes(alone) and len(outcomes(alone)) == 6
    same = [line for line in dataset_summary(alone).splitlines() if "wall time" not in line]
    assert [line for line in dataset_summary(spread).splitlines() if "wall time" not in line] == same
    assert "3 rollouts (3 scored, 0 errors)" in dataset_summary(spread)  # the controller counts each once
    assert sorted(row["id"] for row in input_rows(pytester)) == ["q1", "q2", "q3"]
    assert eval_runs(fake_gym) == 2  # one a session


def test_a_bad_mark_is_a_collection_error_naming_the_test(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    write_dataset(pytester.path / "mcqa.jsonl")
    pytester.makepyfile(
        test_bad="""
import pytest

@pytest.mark.gym_rollouts("mcqa.jsonl", tasks="nothing-like-this")
def test_none(gym_rollout):
    pass

@pytest.mark.gym_rollouts("missing.jsonl")
def test_missing(gym_rollout):
    pass
"""
    )
    result = run(pytester, fake_gym, "test_bad.py")
    text = result.stdout.str()
    assert "test_bad.py::test_none: gym_rollouts: tasks='nothing-like-this' selects no task" in text
    assert result.ret == pytest.ExitCode.INTERRUPTED and "Traceback" not in text


def test_the_fixture_without_the_mark_errors_saying_so(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    pytester.makepyfile(test_plain="def test_plain(gym_rollout):\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "test_plain.py")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*the gym_rollout fixture needs @pytest.mark.gym_rollouts(dataset) on the test*"])


def test_under_shards_a_tests_pair_goes_where_its_task_does(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    write_dataset(pytester.path / "mcqa.jsonl")
    pytester.makepyfile(test_answers=TESTS)
    tasks_of: dict[str, set[str]] = {"dataset": set(), "tests": set()}
    for shard in ("1/2", "2/2"):
        both = run(pytester, fake_gym, "mcqa.jsonl", "test_answers.py", f"--gym-shard={shard}")
        found = outcomes(both)
        items = {nodeid.split("::")[1].split("[")[0] for nodeid in found if nodeid.startswith("mcqa.jsonl::")}
        tests = {nodeid.split("[")[1].split("-r")[0] for nodeid in found if nodeid.startswith("test_answers.py::")}
        assert items == tests and items, both.stdout.str()
        alone = run(pytester, fake_gym, "test_answers.py", f"--gym-shard={shard}")  # the same shard without the file
        assert {nodeid for nodeid in outcomes(alone)} == {n for n in found if n.startswith("test_answers.py::")}
        tasks_of["dataset"] |= items
        tasks_of["tests"] |= tests
    assert tasks_of["dataset"] == tasks_of["tests"] == set(ANSWERS)


def test_resuming_a_test_only_run_reuses_its_rollouts(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    write_dataset(pytester.path / "mcqa.jsonl")
    pytester.makepyfile(test_answers=TESTS)
    first = run(pytester, fake_gym, "test_answers.py")
    (old,) = (pytester.path / "runs").iterdir()
    calls = len(fake_gym.calls())
    again = run(pytester, fake_gym, "test_answers.py", f"--gym-resume={old}")
    again.stdout.fnmatch_lines([f"gym: resuming {old}: 3 of 3 rollouts reused, 0 to roll out"])
    assert outcomes(again) == outcomes(first) and len(outcomes(first)) == 3
    assert fake_gym.calls()[calls:] == []  # no Gym started, no `gym eval run`


def test_last_failed_reruns_and_rolls_out_only_the_failed_pairs(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    write_dataset(pytester.path / "mcqa.jsonl")
    pytester.makepyfile(test_answers=TESTS)
    args = [f"--gym-checkout={fake_gym.checkout}", f"--gym-replay={fake_gym.recording}"]
    pytester.runpytest_subprocess(*args, "--gym-run-dir=first", "test_answers.py").assert_outcomes(passed=2, failed=1)
    again = pytester.runpytest_subprocess(*args, "--gym-run-dir=runs", "-rA", "--lf", "test_answers.py")
    assert outcomes(again) == {"test_answers.py::test_boxed[q2-r0]": "FAILED"}
    assert [row["id"] for row in input_rows(pytester)] == ["q2"]


def test_a_warm_gym_serves_the_next_sessions_test_functions(
    pytester: pytest.Pytester, fake_gym: FakeGym, warm_registry: Path
) -> None:
    write_dataset(pytester.path / "mcqa.jsonl")
    pytester.makepyfile(test_answers=TESTS)
    first = run(pytester, fake_gym, "--gym-keep-alive=600", "mcqa.jsonl")
    second = run(pytester, fake_gym, "--gym-keep-alive=600", "test_answers.py")
    assert len(outcomes(first)) == len(outcomes(second)) == 3
    assert [outcome for _, outcome in sorted(outcomes(second).items())] == ["PASSED", "FAILED", "PASSED"]
    second.stdout.fnmatch_lines(["gym: attached to warm Gym *: no `gym env start`*"])
    assert [call["argv"][:2] for call in fake_gym.calls()].count(["env", "start"]) == 1


def test_shard_reports_of_test_functions_alone_merge(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    """Shards that ran only test functions over a dataset (no dataset item) merge into what one session over the
    same pairs reports, as dataset shards do. The merge judges the rollouts and gates (exit 0: the gate passes); a
    test's own failing assertion (q2's answer is not boxed) fails its shard's job, as in the one session."""
    import subprocess
    import sys

    write_dataset(pytester.path / "mcqa.jsonl")
    pytester.makepyfile(test_answers=TESTS)
    alone = run(pytester, fake_gym, "test_answers.py", "--gym-report=alone.json", "--gym-min-mean-reward=0.5")
    for shard in (1, 2):
        run(pytester, fake_gym, "test_answers.py", f"--gym-shard={shard}/2", f"--gym-report=s{shard}.json")
    merged = subprocess.run(
        [sys.executable, "-m", "pytest_gym_eval", "merge", "s1.json", "s2.json", "--gym-min-mean-reward=0.5",
         "--gym-report=merged.json"],
        cwd=pytester.path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert merged.returncode == 0, merged.stdout + merged.stderr
    assert alone.ret == pytest.ExitCode.TESTS_FAILED
    reports = [json.loads((pytester.path / name).read_text()) for name in ("alone.json", "merged.json")]
    (one,), (both,) = (report["datasets"] for report in reports)
    assert both["rollouts"] == one["rollouts"] == 3
    assert both["mean_reward"]["estimate"] == one["mean_reward"]["estimate"] == pytest.approx(2 / 3)
    assert "mean reward 0.67" in merged.stdout, merged.stdout


def test_dash_x_stops_after_the_first_failing_test_function(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    """``-x``: q2's answer is not boxed, so its test fails and q3's test never runs; pytest says it stopped."""
    write_dataset(pytester.path / "mcqa.jsonl", {"q3": {"hold": True}})  # Gym never scores q3
    pytester.makepyfile(test_answers=TESTS)
    result = run(pytester, fake_gym, "test_answers.py", "-x")
    assert outcomes(result) == {
        "test_answers.py::test_boxed[q1-r0]": "PASSED",
        "test_answers.py::test_boxed[q2-r0]": "FAILED",
    }, result.stdout.str()[-3000:]
    result.stdout.fnmatch_lines(["*stopping after 1 failures*", "*1 failed, 1 passed*"])
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    # The summary counts what Gym scored and names q3's rollout, which Gym never scored, as never reported (not as
    # an error).
    summary = " ".join(dataset_summary(result).split())
    assert "2 of 3 selected rollouts reported (2 scored, 0 errors)" in summary, summary
    assert "1 of 3 selected rollouts never reported (the session stopped before Gym scored them: -x" in summary


def test_junit_xml_of_test_functions_is_valid_xunit2(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    """Under pytest's default family (xunit2, whose testcases have no ``<properties>``) a test function's rollout
    values, its custom metrics and an on-demand test's rewards go to the testcase's ``<system-out>`` line, as a
    dataset item's do; under xunit1 they stay properties."""
    from tests.support.junit import junit_rollouts, validate_junit

    write_dataset(pytester.path / "mcqa.jsonl")
    pytester.makepyfile(
        test_answers=TESTS + '\n    gym_rollout.record_metric("boxed", 1.0)\n',
        test_rows_on_demand="""
def test_two_rows(gym_run_row):
    for reward in (1.0, 0.0):
        gym_run_row({"responses_create_params": {"input": "hi"}, "fake": {"reward": reward}})
""",
    )
    for family in ("xunit2", "xunit1"):
        run(pytester, fake_gym, "test_answers.py", "test_rows_on_demand.py", f"--junitxml={family}.xml",
            "-o", f"junit_family={family}")  # fmt: skip
        validate_junit(pytester.path / f"{family}.xml", family)
        cases = junit_rollouts(pytester.path / f"{family}.xml")
        assert cases["test_boxed[q1-r0]"]["gym_rollout"] == "mcqa.jsonl::q1[r0]", cases
        assert cases["test_boxed[q1-r0]"]["reward"] == "1.0" and cases["test_boxed[q1-r0]"]["output_tokens"] == "7"
        assert cases["test_boxed[q1-r0]"]["gym_metric.boxed"] == "1.0"
        rewards = cases["test_two_rows"]["gym_on_demand_reward"]
        assert rewards == ("[1.0, 0.0]" if family == "xunit2" else "0.0"), cases  # xunit1: one property per call


SOFT = """
import pytest


@pytest.mark.gym_rollouts("mcqa.jsonl")
def test_soft(gym_rollout) -> None:
    gym_rollout.expect("\\\\boxed{" in gym_rollout.output_text, "no boxed answer", metric="boxed")
    gym_rollout.expect(gym_rollout.output_tokens < 5, f"{gym_rollout.output_tokens} output tokens, not under 5")
    gym_rollout.record_metric("terse", 1.0 if gym_rollout.output_tokens < 10 else 0.0)  # recorded after both


@pytest.mark.gym_rollouts("mcqa.jsonl", tasks=["q2"])
def test_hard_then_soft(gym_rollout) -> None:
    gym_rollout.expect(False, "the soft one")
    assert gym_rollout.passed, "the hard one"
"""


def test_soft_expectations_fail_the_test_at_its_end_and_keep_every_metric(
    pytester: pytest.Pytester, fake_gym: FakeGym
) -> None:
    write_dataset(pytester.path / "mcqa.jsonl")
    pytester.makepyfile(test_soft=SOFT)
    result = run(pytester, fake_gym, "test_soft.py", "--gym-min-metric=terse:0.5", "--gym-report=r.json")
    assert outcomes(result) == {
        "test_soft.py::test_soft[q1-r0]": "FAILED",  # 7 output tokens: the second expectation
        "test_soft.py::test_soft[q2-r0]": "FAILED",
        "test_soft.py::test_soft[q3-r0]": "FAILED",
        "test_soft.py::test_hard_then_soft[q2-r0]": "FAILED",
    }
    result.stdout.fnmatch_lines(
        [
            "*test_soft[[]q2-r0[]]*",
            "2 soft expectations failed:",
            "  - no boxed answer",
            "  - 7 output tokens, not under 5",
        ]
    )
    # A test that failed of its own shows its soft expectations beside its assertion.
    result.stdout.fnmatch_lines(["*AssertionError: the hard one*", "*soft expectations*", "  - the soft one"])
    # The metrics recorded after a failed expectation are all there: every rollout's.
    rollouts = {r["nodeid"]: r for r in json.loads((pytester.path / "r.json").read_text())["rollouts"]}
    assert {task: rollouts[f"mcqa.jsonl::{task}[r0]"]["metrics"] for task in ANSWERS} == {
        "q1": {"boxed": 1.0, "terse": 1.0},
        "q2": {"boxed": 0.0, "terse": 1.0},
        "q3": {"boxed": 1.0, "terse": 1.0},
    }


HARD_BEFORE_METRIC = """
import pytest


@pytest.mark.gym_rollouts("mcqa.jsonl")
def test_terse(gym_rollout) -> None:
    assert "q2" not in gym_rollout.task_id, "an assert before the metric"
    gym_rollout.record_metric("terse", 1.0)
"""


def test_a_metric_gate_judged_on_fewer_rollouts_than_its_tests_got_is_warned_of(
    pytester: pytest.Pytester, fake_gym: FakeGym
) -> None:
    """A failed ``assert`` before ``record_metric`` leaves its rollout without the metric: the metric's gate is
    judged on 2 of the 3 rollouts its test got, and the summary says so (a gate that silently sees only the rollouts
    that passed the test is what soft expectations exist to avoid), as the JSON report (``warnings``, valid against
    its schema) and the Markdown summary do: the conclusion carries the warning to every output."""
    write_dataset(pytester.path / "mcqa.jsonl")
    pytester.makepyfile(test_terse=HARD_BEFORE_METRIC)
    outputs = ["--gym-report=r.json", "--gym-markdown=s.md"]
    result = run(pytester, fake_gym, "test_terse.py", "--gym-min-metric=terse:0.5", *outputs)
    result.stdout.fnmatch_lines(
        ["gym warning: metric terse's gate on mcqa.jsonl is judged on 2 of 3 rollouts its test functions got*"]
    )
    report = json.loads((pytester.path / "r.json").read_text())
    jsonschema.validate(report, json.loads(SCHEMA_PATH.read_text()))
    (warning,) = report["warnings"]
    assert warning.startswith("metric terse's gate on mcqa.jsonl is judged on 2 of 3 rollouts") and warning in (
        " ".join(result.stdout.str().split())
    )
    assert f"> ⚠️ warning: {warning}" in (pytester.path / "s.md").read_text()
    pytester.makepyfile(test_terse=HARD_BEFORE_METRIC.replace("q2", "no task"))
    assert (
        "gym warning: metric terse"
        not in run(pytester, fake_gym, "test_terse.py", "--gym-min-metric=terse:0.5", *outputs).stdout.str()
    )
    assert "warnings" not in json.loads((pytester.path / "r.json").read_text())
    assert "warning:" not in (pytester.path / "s.md").read_text()


SOFT_THEN_SKIP = """
import unittest

import pytest


@pytest.mark.gym_rollouts("mcqa.jsonl", tasks=["q1", "q2"])
def test_soft_then_skip(gym_rollout) -> None:
    if gym_rollout.task_id == "q1":
        gym_rollout.expect(False, "checked before the skip", metric="checked")
    pytest.skip("nothing more to check")


@pytest.mark.gym_rollouts("mcqa.jsonl", tasks=["q3"])
def test_soft_then_unittest_skip(gym_rollout) -> None:
    gym_rollout.expect(False, "checked before the skip")
    raise unittest.SkipTest("nothing more")
"""


def test_a_failed_soft_expectation_is_not_undone_by_a_skip(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    """A test that skips after a soft expectation failed fails (the expectation already did), and its rollout counts
    as a failed test's does; a test that skips with no failed expectation still skips."""
    write_dataset(pytester.path / "mcqa.jsonl")
    pytester.makepyfile(test_skip=SOFT_THEN_SKIP)
    result = run(pytester, fake_gym, "test_skip.py", "--gym-report=r.json")
    assert outcomes(result) == {
        "test_skip.py::test_soft_then_skip[q1-r0]": "FAILED",
        "test_skip.py::test_soft_then_unittest_skip[q3-r0]": "FAILED",
    }
    result.assert_outcomes(failed=2, skipped=1)  # q2's test: no failed expectation, a skip as any
    result.stdout.fnmatch_lines(
        [
            "1 soft expectation failed:",
            "  - checked before the skip",
            "metrics:",
            "  checked = 0 (checked before the skip)",
            "then the test skipped (nothing more to check): a skip does not undo a failed expectation",
        ]
    )
    assert "--- soft expectations ---" not in result.stdout.str()  # said once, in the failure itself
    rollouts = {r["nodeid"]: r for r in json.loads((pytester.path / "r.json").read_text())["rollouts"]}
    assert sorted(rollouts) == ["mcqa.jsonl::q1[r0]", "mcqa.jsonl::q3[r0]"]  # q2's test skipped: not counted
    assert rollouts["mcqa.jsonl::q1[r0]"]["metrics"] == {"checked": 0.0}


EXTRA_REPEATS = """
import pytest


@pytest.mark.gym_rollouts("mcqa.jsonl", repeats=3, tasks=["q2"])
def test_q2_thrice(gym_rollout) -> None:
    pass
"""

SKIPS = """
import pytest


@pytest.mark.gym_rollouts("mcqa.jsonl", tasks=["q1", "q2"])
def test_skips_q1(gym_rollout) -> None:
    if gym_rollout.task_id == "q1":
        pytest.skip("not this one")
"""


@pytest.mark.parametrize("with_items", [False, True])
def test_a_test_functions_extra_repeats_do_not_weigh_its_task_more(
    pytester: pytest.Pytester, fake_gym: FakeGym, with_items: bool
) -> None:
    """``repeats=3`` on q2 (reward 0) rolls q2 out three times, but the dataset's statistics count its own 1 repeat:
    q2 weighs as q1 and q3 do, and the summary says what it left out."""
    write_dataset(pytester.path / "mcqa.jsonl")
    pytester.makepyfile(test_diag=EXTRA_REPEATS)
    files = ["mcqa.jsonl", "test_diag.py"] if with_items else ["test_diag.py"]
    result = run(pytester, fake_gym, *files, "--gym-report=r.json")
    tests = {nodeid: outcome for nodeid, outcome in outcomes(result).items() if nodeid.startswith("test_diag.py")}
    assert tests == {f"test_diag.py::test_q2_thrice[q2-r{k}]": "PASSED" for k in range(3)}  # rolled out, reported
    summary = " ".join(dataset_summary(result).split())
    if with_items:  # q1 (1.0), q2 (0.0), q3 (1.0): each once
        assert "3 tasks, 3 rollouts (3 scored, 0 errors)" in summary and "mean reward 0.67" in summary, summary
    else:
        assert "1 task, 1 rollout (1 scored, 0 errors)" in summary, summary
    assert (
        "not counted 2 rollouts of test functions beyond the dataset's 1 repeat (test_diag.py::test_q2_thrice: "
        "repeats=3; count=True in the mark counts them)" in summary
    ), summary
    assert "never reported" not in summary, summary
    (dataset,) = json.loads((pytester.path / "r.json").read_text())["datasets"]
    assert (dataset["rollouts"], dataset["unreported"]) == ((3, 0) if with_items else (1, 0))


@pytest.mark.parametrize("with_items", [False, True])
def test_a_test_function_that_skips_leaves_its_rollout_out(
    pytester: pytest.Pytester, fake_gym: FakeGym, with_items: bool
) -> None:
    """A test function that calls ``pytest.skip()`` after getting q1's rollout leaves it out of the statistics, as a
    skipped dataset item does, unless another item counts it: with the dataset's items selected, q1's item does."""
    write_dataset(pytester.path / "mcqa.jsonl")
    pytester.makepyfile(test_diag=SKIPS)
    files = ["mcqa.jsonl", "test_diag.py"] if with_items else ["test_diag.py"]
    result = run(pytester, fake_gym, *files)
    summary = " ".join(dataset_summary(result).split())
    if with_items:
        assert "3 tasks, 3 rollouts (3 scored, 0 errors)" in summary and "not counted" not in summary, summary
    else:  # q2 (0.0) alone
        assert "1 task, 1 rollout (1 scored, 0 errors)" in summary and "mean reward 0.00" in summary, summary
        assert "not counted 1 skipped by its test (test_diag.py::test_skips_q1[q1-r0])" in summary, summary
        assert "never reported" not in summary, summary


def test_count_true_counts_a_test_functions_extra_repeats(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    write_dataset(pytester.path / "mcqa.jsonl")
    pytester.makepyfile(
        test_counted="""
import pytest

@pytest.mark.gym_rollouts("mcqa.jsonl", repeats=3, tasks=["q2"], count=True)
def test_q2_thrice(gym_rollout) -> None:
    pass
"""
    )
    result = run(pytester, fake_gym, "test_counted.py")
    summary = " ".join(dataset_summary(result).split())
    assert "1 task, 3 rollouts (3 scored, 0 errors)" in summary and "not counted" not in summary, summary


def test_under_xdist_a_test_functions_diagnostics_are_left_out_alike(
    pytester: pytest.Pytester, fake_gym: FakeGym
) -> None:
    write_dataset(pytester.path / "mcqa.jsonl")
    pytester.makepyfile(test_repeats=EXTRA_REPEATS, test_skips=SKIPS)
    result = run(pytester, fake_gym, "test_repeats.py", "test_skips.py", "-n", "2")
    summary = " ".join(dataset_summary(result).split())
    assert "1 task, 1 rollout (1 scored, 0 errors)" in summary, summary  # q2's r0, which both tests got, once
    assert "1 skipped by its test" in summary and "2 rollouts of test functions beyond" in summary, summary
