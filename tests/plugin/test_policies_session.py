"""Several policy models in one session (``--gym-policy``) against the stand-in ``gym``: node ids, one Gym and one
``gym eval run`` for every policy, each rollout attributed to its policy, and the usage errors (specs alone:
tests/unit/test_models.py; real Gym: tests/real_gym/test_policies_real_gym.py)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from pytest_gym_eval.reporting.json_report import SCHEMA_PATH
from tests.support.fakes import FakeGym
from tests.support.junit import junit_suite_properties

REWARDS = {
    "ta": {"mcqa_simple_agent": 1.0, "mcqa_simple_agent__cand": 0.0},
    "tb": {"mcqa_simple_agent": 0.0, "mcqa_simple_agent__cand": 1.0},
}
"""Per task, the stand-in Gym's reward for the baseline's agent and for the candidate's copy of it."""


def write_dataset(pytester: pytest.Pytester) -> None:
    rows = [
        {
            "id": task,
            "responses_create_params": {"input": [{"role": "user", "content": "ping"}]},
            "fake": {"reward_by_agent": rewards},
        }
        for task, rewards in REWARDS.items()
    ]
    (pytester.path / "mcqa.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))


def policy_args(fake_gym: FakeGym, *specs: str) -> list[str]:
    """The stand-in Gym without its ``--gym-replay`` (each policy names its own recordings)."""
    given = specs or (f"base=replay:{fake_gym.recording}", f"cand=replay:{fake_gym.recording}")
    return [
        f"--gym-checkout={fake_gym.checkout}", "-p", "no:cacheprovider", "-p", "no:randomly",
        *(f"--gym-policy={spec}" for spec in given),
    ]  # fmt: skip


def test_each_task_and_repeat_is_an_item_per_policy_named_after_it(
    pytester: pytest.Pytester, fake_gym: FakeGym
) -> None:
    write_dataset(pytester)
    result = pytester.runpytest_subprocess(
        *policy_args(fake_gym), "mcqa.jsonl", "--gym-repeats=2", "--collect-only", "-q"
    )
    ids = [line for line in result.outlines if line.startswith("mcqa.jsonl::")]
    assert ids == [
        f"mcqa.jsonl::{task}[r{repeat}-{policy}]"
        for task in ("ta", "tb")
        for repeat in (0, 1)
        for policy in ("base", "cand")
    ]
    selected = pytester.runpytest_subprocess(*policy_args(fake_gym), "mcqa.jsonl", "-k", "cand", "--collect-only", "-q")
    assert [line for line in selected.outlines if line.startswith("mcqa.jsonl::")] == [
        "mcqa.jsonl::ta[r0-cand]",
        "mcqa.jsonl::tb[r0-cand]",
    ]


def test_one_gym_rolls_out_every_policy_in_one_eval_run(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    write_dataset(pytester)
    result = pytester.runpytest_subprocess(*policy_args(fake_gym), "mcqa.jsonl", "--gym-run-dir=runs", "-rA")
    outcomes = {line.split()[1]: line.split()[0] for line in result.outlines if line.startswith(("PASSED ", "FAILED "))}
    assert outcomes == {
        "mcqa.jsonl::ta[r0-base]": "PASSED",
        "mcqa.jsonl::ta[r0-cand]": "FAILED",
        "mcqa.jsonl::tb[r0-base]": "FAILED",
        "mcqa.jsonl::tb[r0-cand]": "PASSED",
    }
    argvs = [call["argv"] for call in fake_gym.calls()]
    assert [argv[:2] for argv in argvs] == [["env", "start"], ["eval", "run"]]
    start, run = argvs
    (run_dir,) = (pytester.path / "runs").iterdir()
    servers_config = run_dir / "gym-policies.yaml"
    assert str(servers_config) in start and str(servers_config) not in run  # `gym eval run` cannot resolve the copies
    blocks = json.loads(servers_config.read_text())
    assert sorted(blocks) == [
        "cand_policy_model",
        "mcqa_simple_agent__cand",
        "mcqa_simple_agent__cand_environment_server",
    ]
    assert "--agent" not in run  # each row goes to its own agent_ref
    rows = [json.loads(line) for line in (run_dir / "gym-input.jsonl").read_text().splitlines()]
    # A row per rollout, the policies interleaved, a task's rows sharing its index (Gym numbers their rollouts).
    assert [(row["id"], row["agent_ref"]["name"], row["_ng_task_index"]) for row in rows] == [
        ("ta", "mcqa_simple_agent", 0), ("ta", "mcqa_simple_agent__cand", 0),
        ("tb", "mcqa_simple_agent", 1), ("tb", "mcqa_simple_agent__cand", 1),
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("selection", "shared"),
    [
        ((), True),  # all: each task's 4 rows (2 repeats x 2 policies) under its index
        (("-k", "cand"), True),  # each task's 2 candidate rows
        (("-k", "ta or cand"), False),  # ta has 4 rollouts, tb 2: an index per row
    ],
)
def test_every_selected_rollout_comes_back_to_its_policys_item(
    pytester: pytest.Pytester, fake_gym: FakeGym, selection: tuple[str, ...], shared: bool
) -> None:
    write_dataset(pytester)
    args = (*policy_args(fake_gym), "mcqa.jsonl", "--gym-repeats=2", "--gym-run-dir=runs", "-rA", *selection)
    result = pytester.runpytest_subprocess(*args)
    outcomes = {line.split()[1]: line.split()[0] for line in result.outlines if line.startswith(("PASSED ", "FAILED "))}
    agents = {"base": "mcqa_simple_agent", "cand": "mcqa_simple_agent__cand"}
    expected = {
        f"mcqa.jsonl::{task}[r{repeat}-{policy}]": "PASSED" if REWARDS[task][agent] == 1.0 else "FAILED"
        for task in REWARDS
        for repeat in (0, 1)
        for policy, agent in agents.items()
        if not selection or policy == "cand" or (selection[1] == "ta or cand" and task == "ta")
    }
    assert outcomes == expected, result.stdout.str()[-3000:]
    (run_dir,) = (pytester.path / "runs").iterdir()
    rows = [json.loads(line) for line in (run_dir / "gym-input.jsonl").read_text().splitlines()]
    indices = [row["_ng_task_index"] for row in rows]
    assert len(set(indices)) == (2 if shared else len(rows))


def test_a_row_naming_its_own_agent_is_routed_to_each_policys_copy(
    pytester: pytest.Pytester, fake_gym: FakeGym
) -> None:
    row = {
        "id": "ta",
        "agent_ref": {"type": "responses_api_agents", "name": "mcqa_simple_agent"},
        "responses_create_params": {"input": [{"role": "user", "content": "ping"}]},
        "fake": {"reward_by_agent": REWARDS["ta"]},
    }
    (pytester.path / "data.jsonl").write_text(json.dumps(row) + "\n")
    result = pytester.runpytest_subprocess(*policy_args(fake_gym), "data.jsonl", "--gym-run-dir=runs", "-rA")
    result.assert_outcomes(passed=1, failed=1)
    (run_dir,) = (pytester.path / "runs").iterdir()
    rows = [json.loads(line) for line in (run_dir / "gym-input.jsonl").read_text().splitlines()]
    assert [row["agent_ref"] for row in rows] == [
        {"type": "responses_api_agents", "name": "mcqa_simple_agent"},
        {"type": "responses_api_agents", "name": "mcqa_simple_agent__cand"},
    ]


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (
            ["--gym-policy=base=replay:{rec}", "--gym-policy=base=replay:{rec}"],
            "--gym-policy: policy 'base' is named twice",
        ),
        (
            ["--gym-policy=base=replay:{rec}", "--gym-policy=Base=replay:{rec}"],
            "--gym-policy: policies 'base' and 'Base' differ only by case: name them apart",
        ),
        (
            ["--gym-policy=a=replay:{rec}", "--gym-policy=b=replay:{rec}", "--gym-baseline-policy=z"],
            "baseline policy 'z' is not one of the policies named: a, b",
        ),
        (
            ["--gym-policy=a=replay:{rec}", "--gym-policy=b=http://h/v1"],
            "--gym-policy: 'b=http://h/v1': an endpoint needs its URL and model=",
        ),
        (
            ["--gym-policy=a=replay:{rec}", "--gym-policy=b=replay:{rec}", "--gym-replay={rec}"],
            "--gym-policy cannot be combined with --gym-replay",
        ),
        (["--gym-baseline-policy=a"], "--gym-baseline-policy=a: no --gym-policy named"),
    ],
)
def test_policies_that_cannot_run_are_usage_errors(
    pytester: pytest.Pytester, fake_gym: FakeGym, extra: list[str], says: str
) -> None:
    write_dataset(pytester)
    args = [a.format(rec=fake_gym.recording) for a in extra]
    result = pytester.runpytest_subprocess(
        f"--gym-checkout={fake_gym.checkout}", "-p", "no:cacheprovider", "mcqa.jsonl", *args
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert says in result.stderr.str()
    assert fake_gym.calls() == []


def test_the_ini_file_names_policies_relative_to_itself(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    write_dataset(pytester)
    (pytester.path / "recs").mkdir()
    (pytester.path / "recs" / "rec.jsonl").write_text(Path(fake_gym.recording).read_text())
    pytester.makeini(
        "[pytest]\ngym_policy =\n    old=replay:recs/rec.jsonl\n    new=replay:recs/rec.jsonl\n"
        "gym_baseline_policy = new\n"
    )
    result = pytester.runpytest_subprocess(
        f"--gym-checkout={fake_gym.checkout}",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:randomly",
        "mcqa.jsonl",
        "--collect-only",
        "-q",
    )
    assert [line for line in result.outlines if line.startswith("mcqa.jsonl::ta")] == [
        "mcqa.jsonl::ta[r0-new]",
        "mcqa.jsonl::ta[r0-old]",
    ]


def test_each_policy_gets_its_own_summary_and_gates(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    """The baseline scores 1.0 on both tasks, the candidate 0.0 and 1.0: each policy's summary and gate are judged
    on its own rollouts only (a pooled mean would be 0.75 for both), each labelled by the policy's name (not by the
    Gym agent instance that ran it) in the terminal, the JSON report and the JUnit property names."""
    rewards = {"ta": [1.0, 0.0], "tb": [1.0, 1.0]}
    rows = [
        {
            "id": task, "responses_create_params": {"input": [{"role": "user", "content": "ping"}]},
            "fake": {"reward_by_agent": {"mcqa_simple_agent": base, "mcqa_simple_agent__cand": cand}},
        }
        for task, (base, cand) in rewards.items()
    ]  # fmt: skip
    (pytester.path / "mcqa.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    result = pytester.runpytest_subprocess(
        *policy_args(fake_gym), "mcqa.jsonl", "--gym-min-mean-reward=0.8", "--gym-report=r.json", "--junitxml=j.xml"
    )
    report = json.loads((pytester.path / "r.json").read_text())
    jsonschema.validate(report, json.loads(SCHEMA_PATH.read_text()))
    summaries = {(s["policy"], s["agent"]): (s["mean_reward"]["estimate"], s["verdict"]) for s in report["datasets"]}
    assert summaries == {
        ("base", "mcqa_simple_agent"): (1.0, "PASS"),
        ("cand", "mcqa_simple_agent__cand"): (0.5, "FAIL"),
    }
    assert "mcqa.jsonl (policy base)" in result.outlines and "mcqa.jsonl (policy cand)" in result.outlines
    assert "(agent mcqa_simple_agent" not in result.stdout.str()
    result.stdout.fnmatch_lines(["*gym gates: FAIL - mcqa.jsonl (policy cand) mean reward 0.50*"])
    properties = junit_suite_properties(pytester.path / "j.xml")
    assert (properties["gym::mcqa.jsonl::base::verdict"], properties["gym::mcqa.jsonl::cand::verdict"]) == (
        "PASS",
        "FAIL",
    )


def write_tasks(pytester: pytest.Pytester, base: list[float], cand: list[float]) -> None:
    """Tasks t0, t1, ...: the stand-in Gym gives task i the reward ``base[i]`` for the baseline and ``cand[i]`` for
    the candidate, every repeat."""
    rows = [
        {
            "id": f"t{i}", "responses_create_params": {"input": [{"role": "user", "content": "ping"}]},
            "fake": {"reward_by_agent": {"mcqa_simple_agent": b, "mcqa_simple_agent__cand": c}},
        }
        for i, (b, c) in enumerate(zip(base, cand, strict=True))
    ]  # fmt: skip
    (pytester.path / "mcqa.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))


def test_the_candidate_is_compared_with_the_baseline_in_every_report(
    pytester: pytest.Pytester, fake_gym: FakeGym
) -> None:
    """Ten tasks; the candidate loses t0 and gains t9: differences -1, +1 and eight 0, so the paired difference is
    0 with MOVER on gains and losses (each 1 of 10 pairs, [0.0005, 0.5428] on the clustered effective sample, r =
    -1/9) [-0.46, 0.46], within the margin 0.5: PASS, exit 0 (the failed rollouts themselves do not fail a gated
    session)."""
    write_tasks(pytester, [1.0] * 9 + [0.0], [0.0] + [1.0] * 9)
    result = pytester.runpytest_subprocess(
        *policy_args(fake_gym), "mcqa.jsonl", "--gym-max-regression=0.5", "--gym-report=r.json", "--junitxml=j.xml",
        "--gym-html=r.html",
    )  # fmt: skip
    assert result.ret == 0
    block = [
        "mcqa.jsonl: cand vs base",
        "  delta       +0.00 [-0.46, 0.46]  95% CI over 10 tasks, paired",
        "  mean        0.90 base, 0.90 cand (10 rollout pairs)",
        "  flips       1 lost, 1 gained, 8 both pass, 0 neither; McNemar exact p = 1.000",
        "    lost: t0",
        "    gained: t9",
        "  gate        non-inferiority: candidate - baseline 0.00 [-0.46, 0.46], lower",
        "              bound -0.46 >= -0.50: PASS (Gym: PASS) (set on the command line)",
    ]
    start = result.outlines.index(block[0])
    assert result.outlines[start : start + len(block)] == block
    report = json.loads((pytester.path / "r.json").read_text())
    jsonschema.validate(report, json.loads(SCHEMA_PATH.read_text()))
    (entry,) = report["comparisons"]
    assert (entry["dataset"], entry["baseline"], entry["candidate"], entry["pairs"]) == (
        "mcqa.jsonl",
        "base",
        "cand",
        10,
    )
    assert entry["flips"]["only_baseline"] == ["t0"] and entry["flips"]["only_candidate"] == ["t9"]
    assert (entry["verdict"], entry["gym_verdict"], entry["mcnemar_p"]) == ("PASS", "PASS", 1.0)
    assert entry["delta"]["estimate"] == 0.0
    assert entry["delta"]["high"] == pytest.approx(0.464498, abs=1e-5)
    properties = junit_suite_properties(pytester.path / "j.xml")
    prefix = "gym::mcqa.jsonl::compare.cand."
    assert (properties[prefix + "delta"], properties[prefix + "verdict"], properties[prefix + "p_value"]) == (
        "0", "PASS", "1",
    )  # fmt: skip
    assert float(properties[prefix + "delta.high"]) == pytest.approx(entry["delta"]["high"], rel=1e-5)
    page = (pytester.path / "r.html").read_text(encoding="utf-8")
    assert '<a href="#policies">Policies compared</a>' in page and 'data-verdict="PASS"' in page
    assert flipping_transcripts(page, report) == {
        "t0": ["mcqa.jsonl::t0[r0-base]", "mcqa.jsonl::t0[r0-cand]"],
        "t9": ["mcqa.jsonl::t9[r0-base]", "mcqa.jsonl::t9[r0-cand]"],
    }


def flipping_transcripts(page: str, report: dict[str, object]) -> dict[str, list[str]]:
    """Per flipping task on the HTML page, the node ids of the rollouts whose transcripts sit side by side (each
    column's ``data-i`` is its rollout's index in the JSON report's ``rollouts``)."""
    rollouts = report["rollouts"]
    assert isinstance(rollouts, list)
    return {
        task: [rollouts[int(i)]["nodeid"] for i in re.findall(r'class="policy-transcript" data-i="(\d+)"', body)]
        for task, body in re.findall(
            r'<details class="policy-flip" data-task="([^"]+)"[^>]*>(.*?)</details>', page, re.S
        )
    }


def test_max_regression_fails_the_session_when_the_candidate_regresses_beyond_the_margin(
    pytester: pytest.Pytester, fake_gym: FakeGym
) -> None:
    """The candidate loses eight of ten tasks: difference -0.8 [-0.99, -0.21] (MOVER on gains and losses: no gain
    in 10 pairs still leaves room for gains up to 0.39, 0 of n* = 10 (1.96 / 2.2622)² = 7.51 by Clopper-Pearson,
    so six lost tasks of ten, [-0.92, -0.04], would not yet decide δ = 0.1); upper bound -0.21 < -0.1: FAIL,
    exit 1."""
    write_tasks(pytester, [1.0] * 10, [0.0] * 8 + [1.0] * 2)
    result = pytester.runpytest_subprocess(*policy_args(fake_gym), "mcqa.jsonl", "--gym-max-regression=0.1")
    assert result.ret == 1
    assert "  flips       8 lost, 0 gained, 2 both pass, 0 neither; McNemar exact p = 0.008" in result.outlines
    assert "    lost: t0, t1, t2, t3, t4, t5, t6, t7" in result.outlines
    reason = " ".join(" ".join(line.split()) for line in result.outlines)
    assert (
        "gym gates: FAIL - mcqa.jsonl cand vs base: non-inferiority: candidate - baseline -0.80 [-0.99, -0.21]"
        in reason
    )
    assert "upper bound -0.21 < -0.10: FAIL" in reason and "< -0.10: FAIL" in reason


def merge_two_shards(
    pytester: pytest.Pytester, *extra: str
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any], dict[str, Any]]:
    """``merge`` of ``s1.json`` and ``s2.json`` into ``merged.json`` and ``merged.xml`` (plus ``extra`` options):
    the finished command, the merged report (checked against the report's schema) and ``alone.json``."""
    merged = subprocess.run(
        [sys.executable, "-m", "pytest_gym_eval", "merge", "s1.json", "s2.json", "--gym-report=merged.json",
         "--junitxml=merged.xml", *extra],
        cwd=pytester.path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert (pytester.path / "merged.json").exists(), merged.stdout + merged.stderr
    report, one = (json.loads((pytester.path / name).read_text()) for name in ("merged.json", "alone.json"))
    jsonschema.validate(report, json.loads(SCHEMA_PATH.read_text()))
    return merged, report, one


@pytest.mark.parametrize("gate", ["max-regression", "min-improvement"])
def test_comparison_gates_need_two_policies(pytester: pytest.Pytester, fake_gym: FakeGym, gate: str) -> None:
    write_dataset(pytester)
    result = pytester.runpytest_subprocess(*fake_gym.args, "mcqa.jsonl", f"--gym-{gate}=0.1")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    ini = "gym_" + gate.replace("-", "_")
    assert f"--gym-{gate} (ini {ini}) compares policies: name two or more with --gym-policy" in result.stderr.str()
    assert fake_gym.calls() == []


def test_a_negative_min_improvement_is_a_usage_error(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    write_dataset(pytester)
    result = pytester.runpytest_subprocess(*policy_args(fake_gym), "mcqa.jsonl", "--gym-min-improvement=-0.1")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--gym-min-improvement: expected a margin >= 0, got -0.1" in result.stderr.str()


@pytest.mark.parametrize(
    ("option", "claim"),
    [("max-regression=1.5", "every candidate would pass non-inferiority"), ("min-improvement=1", "no candidate could")],
)
def test_a_margin_as_wide_as_the_reward_range_is_a_usage_error(
    pytester: pytest.Pytester, fake_gym: FakeGym, option: str, claim: str
) -> None:
    """Rewards in [0, 1] (the range when none is declared): a difference of mean rewards lies in [-1, 1], so a margin
    of 1 or more judges nothing. Refused before Gym starts, naming the option and the dataset."""
    write_dataset(pytester)
    result = pytester.runpytest_subprocess(*policy_args(fake_gym), "mcqa.jsonl", f"--gym-{option}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    name, margin = option.split("=")
    assert (
        f"--gym-{name}={margin} (ini gym_{name.replace('-', '_')}): a margin of {margin} is not below the width 1 of "
        f"the reward range [0, 1]: {claim}" in result.stderr.str()
    )
    named = "(dataset mcqa.jsonl; declare its range with reward_range=LO:HI or --gym-reward-range)"
    assert named in result.stderr.str()
    assert fake_gym.calls() == []


BETTER = ([0.0] * 8 + [1.0] * 2, [1.0] * 10)
"""The candidate gains eight of ten tasks: difference +0.8 [0.21, 0.99] (the mirror of the eight lost tasks of
``test_max_regression_fails_the_session_when_the_candidate_regresses_beyond_the_margin``)."""
SLIGHTLY_WORSE = ([0.98] * 10, [1.0] * 2 + [0.94] * 8)
"""The candidate scores 0.04 below the baseline on eight tasks and 0.02 above on two: difference -0.028
[-0.046, -0.005] (MOVER on the gains' and losses' clustered intervals). Some gain is needed for a narrow upper
bound: with none at all (0.02 or 0.04 below on every task) the gains' interval is that of 0 in 10 pairs, and the
upper bound reaches 0.36 (tests/unit/test_comparison.py). (Equal scores on every task would show no spread between
tasks: [-0.31, 0.31], both gates INCONCLUSIVE.)"""


@pytest.mark.parametrize(
    ("rewards", "status", "verdicts"),
    [(BETTER, 0, ("PASS", "PASS")), (SLIGHTLY_WORSE, 1, ("PASS", "FAIL"))],
    ids=["better", "slightly-worse"],
)
def test_min_improvement_passes_a_clearly_better_candidate_and_fails_a_slightly_worse_one(
    pytester: pytest.Pytester,
    fake_gym: FakeGym,
    rewards: tuple[list[float], list[float]],
    status: int,
    verdicts: tuple[str, str],
) -> None:
    """Both gates set: non-inferiority at 0.1 passes either candidate; superiority at 0.1 passes the better one
    (lower bound 0.21 > 0.10) and fails the slightly worse one (upper bound -0.01 <= 0.10), which alone fails the
    session. The ini file sets both, the command line superiority: merged by hypothesis, each says where it was set."""
    write_tasks(pytester, *rewards)
    pytester.makeini("[pytest]\ngym_max_regression = 0.1\ngym_min_improvement = 0.3\n")
    result = pytester.runpytest_subprocess(
        *policy_args(fake_gym), "mcqa.jsonl", "--gym-min-improvement=0.1", "--gym-report=r.json", "--junitxml=j.xml",
    )  # fmt: skip
    assert result.ret == status
    gates = [line.split(":")[0] for line in result.outlines if line.startswith("  gate")]
    assert gates == ["  gate        non-inferiority", "  gate        superiority"]
    reason = " ".join(" ".join(line.split()) for line in result.outlines)
    assert "non-inferiority: candidate" in reason and ") (set in the ini file)" in reason, reason
    assert "(set on the command line)" in reason, reason
    if status:
        failures = reason.split("gym gates: FAIL - ")[1]
        assert failures.startswith("mcqa.jsonl cand vs base: superiority: candidate - baseline -0.03 [-0.05, -0.01]")
        assert "upper bound -0.01 <= 0.10: FAIL" in failures and "non-inferiority" not in failures
    else:
        assert "lower bound 0.21 > 0.10: PASS (Gym: PASS)" in reason
    report = json.loads((pytester.path / "r.json").read_text())
    jsonschema.validate(report, json.loads(SCHEMA_PATH.read_text()))
    (entry,) = report["comparisons"]
    assert [(g["hypothesis"], g["margin"], g["verdict"]) for g in entry["gates"]] == [
        ("non-inferiority", 0.1, verdicts[0]),
        ("superiority", 0.1, verdicts[1]),
    ]
    assert entry["verdict"] == verdicts[0]
    assert report["plan"]["min_improvement"] == 0.1 and report["plan"]["max_regression"] == 0.1
    assert report["plan"]["comparison_sources"] == {"non-inferiority": "ini", "superiority": "command line"}
    properties = junit_suite_properties(pytester.path / "j.xml")
    prefix = "gym::mcqa.jsonl::compare.cand."
    assert (properties[prefix + "verdict"], properties[prefix + "superiority.verdict"]) == verdicts
    assert float(properties[prefix + "superiority.margin"]) == 0.1


def test_a_one_policy_session_reports_no_comparison(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    (pytester.path / "mcqa.jsonl").write_text(
        json.dumps({"id": "ta", "responses_create_params": {"input": [{"role": "user", "content": "ping"}]}}) + "\n"
    )
    result = pytester.runpytest_subprocess(*fake_gym.args, "mcqa.jsonl", "--gym-report=r.json", "--junitxml=j.xml")
    assert " vs " not in result.stdout.str()
    report = json.loads((pytester.path / "r.json").read_text())
    assert "comparisons" not in report
    assert [(s["dataset"], s["agent"]) for s in report["datasets"]] == [("mcqa.jsonl", None)]
    assert "policy" not in report["datasets"][0]
    assert "(policy " not in result.stdout.str()
    assert not any(
        ".compare." in name or "::compare." in name for name in junit_suite_properties(pytester.path / "j.xml")
    )


@pytest.mark.parametrize(("margin", "status"), [("0.1", 1), ("0.99", 0)])
def test_merged_shards_compare_the_policies_as_one_session(
    pytester: pytest.Pytester, fake_gym: FakeGym, margin: str, status: int
) -> None:
    """The candidate loses eight of ten tasks (difference -0.8 [-0.99, -0.21]): two shards merged give the
    comparison, the --gym-max-regression verdict and the exit status of one session over the same rollouts (FAIL at
    margin 0.1, PASS at 0.99), in the terminal, the JSON report and JUnit."""
    write_tasks(pytester, [1.0] * 10, [0.0] * 8 + [1.0] * 2)
    args = [*policy_args(fake_gym), "mcqa.jsonl", f"--gym-max-regression={margin}"]
    alone = pytester.runpytest_subprocess(*args, "--gym-report=alone.json", "--junitxml=alone.xml")
    for index in (1, 2):
        pytester.runpytest_subprocess(*args, f"--gym-shard={index}/2", f"--gym-report=s{index}.json")
    shards = [json.loads((pytester.path / f"s{i}.json").read_text()) for i in (1, 2)]
    assert all(0 < len(shard["rollouts"]) < 20 for shard in shards)  # each shard ran part of the tasks
    assert shards[0]["plan"]["policies"] == ["base", "cand"] and shards[0]["plan"]["max_regression"] == float(margin)
    del shards[1]["plan"]["min_improvement"]  # as a report written before the plan recorded it: no such gate
    (pytester.path / "s2.json").write_text(json.dumps(shards[1]))
    merged, report, one = merge_two_shards(pytester, "--gym-html=merged.html")
    assert merged.returncode == alone.ret == status, merged.stdout + merged.stderr
    assert report["comparisons"] == one["comparisons"]
    assert report["comparisons"][0]["flips"]["only_baseline"] == [f"t{k}" for k in range(8)]
    assert report["comparisons"][0]["verdict"] == ("FAIL" if status else "PASS")
    flipping = flipping_transcripts((pytester.path / "merged.html").read_text(encoding="utf-8"), report)
    assert flipping == {f"t{k}": [f"mcqa.jsonl::t{k}[r0-base]", f"mcqa.jsonl::t{k}[r0-cand]"] for k in range(8)}
    assert report["session"] == one["session"]
    assert [s["policy"] for s in report["datasets"]] == ["base", "cand"]
    block = [line for line in alone.outlines if line.startswith(("mcqa.jsonl: cand vs base", "  delta", "  flips"))]
    assert len(block) == 3 and all(line in merged.stdout.splitlines() for line in block)
    compared = [
        {name: value for name, value in junit_suite_properties(pytester.path / xml).items() if "::compare." in name}
        for xml in ("merged.xml", "alone.xml")
    ]
    assert (
        compared[0] == compared[1]
        and compared[0]["gym::mcqa.jsonl::compare.cand.verdict"] == report["comparisons"][0]["verdict"]
    )


@pytest.mark.parametrize(("margin", "verdict", "status"), [("0.1", "PASS", 0), ("0.5", "INCONCLUSIVE", 1)])
def test_merged_shards_judge_min_improvement_as_one_session(
    pytester: pytest.Pytester, fake_gym: FakeGym, margin: str, verdict: str, status: int
) -> None:
    """The candidate gains eight of ten tasks (+0.8 [0.21, 0.99]): superiority at 0.1 PASSES, at 0.5 the interval
    straddles the margin (INCONCLUSIVE, which fails); two shards merged give the same verdict and exit status as one
    session, the margin taken from the shards' plans."""
    write_tasks(pytester, *BETTER)
    args = [*policy_args(fake_gym), "mcqa.jsonl", f"--gym-min-improvement={margin}"]
    alone = pytester.runpytest_subprocess(*args, "--gym-report=alone.json", "--junitxml=alone.xml")
    for index in (1, 2):
        pytester.runpytest_subprocess(*args, f"--gym-shard={index}/2", f"--gym-report=s{index}.json")
    plans = [json.loads((pytester.path / f"s{i}.json").read_text())["plan"] for i in (1, 2)]
    assert [(plan["min_improvement"], plan["max_regression"]) for plan in plans] == [(float(margin), None)] * 2
    merged, report, one = merge_two_shards(pytester)
    assert merged.returncode == alone.ret == status, merged.stdout + merged.stderr
    assert report["comparisons"] == one["comparisons"]
    assert report["comparisons"][0]["gates"][0]["verdict"] == verdict
    assert report["comparisons"][0]["verdict"] is None  # no --gym-max-regression
    assert report["plan"]["min_improvement"] == float(margin)
    gate = next(line for line in alone.outlines if line.startswith("  gate"))
    assert gate.startswith("  gate        superiority:") and gate in merged.stdout.splitlines()
    properties = junit_suite_properties(pytester.path / "merged.xml")
    assert properties["gym::mcqa.jsonl::compare.cand.superiority.verdict"] == verdict


def test_both_policies_tokens_and_latency_are_reported_side_by_side(
    pytester: pytest.Pytester, fake_gym: FakeGym
) -> None:
    """Tasks ta, tb, tc with 100 input tokens each; output tokens 20, 40, 60 for the baseline and 80, 100, 120 for
    the candidate, latencies 1, 2, 4 s and 2, 3, 5 s. Baseline: 420 tokens, 140 a rollout, median 2 s, p95
    2 + 0.9 (4 - 2) = 3.8 s; candidate: 600, 200 a rollout, median 3 s, p95 4.8 s; ratios 200 / 140 = 1.43 and
    3 / 2 = 1.5. Two shards merged give the same figures."""
    agents = ("mcqa_simple_agent", "mcqa_simple_agent__cand")
    rows = [
        {
            "id": task, "responses_create_params": {"input": [{"role": "user", "content": "ping"}]},
            "fake": {
                "reward_by_agent": dict.fromkeys(agents, 1.0),
                "usage_by_agent": {
                    agent: {"input_tokens": 100, "output_tokens": out, "total_tokens": 100 + out}
                    for agent, out in zip(agents, outs, strict=True)
                },
                "latency_ms_by_agent": dict(zip(agents, millis, strict=True)),
            },
        }
        for task, outs, millis in (("ta", (20, 80), (1000, 2000)), ("tb", (40, 100), (2000, 3000)),
                                   ("tc", (60, 120), (4000, 5000)))
    ]  # fmt: skip
    (pytester.path / "mcqa.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    args = [*policy_args(fake_gym), "mcqa.jsonl"]
    result = pytester.runpytest_subprocess(*args, "--gym-report=r.json", "--junitxml=j.xml", "--gym-html=r.html")
    assert result.ret == 0
    assert "  tokens      420 base, 600 cand; 140, 200 per rollout (x1.43)" in result.outlines
    assert "  latency     median 2.0 s base, 3.0 s cand (x1.50); p95 3.8 s, 4.8 s" in result.outlines
    report = json.loads((pytester.path / "r.json").read_text())
    jsonschema.validate(report, json.loads(SCHEMA_PATH.read_text()))
    usage = report["comparisons"][0]["usage"]
    assert usage["baseline"]["tokens"] == {"input": 300, "output": 120, "total": 420, "rollouts": 3, "per_rollout": 140}
    assert usage["candidate"]["latency"] == {"median": 3.0, "p95": pytest.approx(4.8), "n": 3}
    assert usage["ratio"] == {"tokens_per_rollout": pytest.approx(10 / 7), "latency_median": 1.5}
    properties = junit_suite_properties(pytester.path / "j.xml")
    prefix = "gym::mcqa.jsonl::compare.cand."
    assert (properties[prefix + "candidate.total_tokens"], properties[prefix + "baseline.latency_median"]) == (
        "600", "2",
    )  # fmt: skip
    assert properties[prefix + "ratio.latency_median"] == "1.5"
    page = (pytester.path / "r.html").read_text(encoding="utf-8")
    assert "<tr><th>total tokens</th><td>420</td><td>600</td><td></td></tr>" in page

    for index in (1, 2):
        pytester.runpytest_subprocess(*args, f"--gym-shard={index}/2", f"--gym-report=s{index}.json")
    merged = subprocess.run(
        [sys.executable, "-m", "pytest_gym_eval", "merge", "s1.json", "s2.json", "--gym-report=merged.json"],
        cwd=pytester.path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert merged.returncode == 0, merged.stdout + merged.stderr
    assert json.loads((pytester.path / "merged.json").read_text())["comparisons"][0]["usage"] == usage


def test_each_policy_sends_its_own_sampling_in_gyms_input_and_reports_it(
    pytester: pytest.Pytester, fake_gym: FakeGym
) -> None:
    """One endpoint under two names, each with sampling of its own: every row of Gym's input carries its policy's
    values over the session's options (which beat the row's own), and the JSON report's meta and the JUnit suite
    properties say which each policy was sent (a policy URL with a password is refused before the session starts:
    tests/unit/test_models.py)."""
    from pytest_gym_eval.replay import ReplayServer

    rows = [
        {
            "id": task, "fake": {"reward_by_agent": rewards},
            "responses_create_params": {"input": "ping", "temperature": 0.7, "top_p": 0.3, "max_output_tokens": 9},
        }
        for task, rewards in REWARDS.items()
    ]  # fmt: skip
    (pytester.path / "mcqa.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    with ReplayServer([fake_gym.recording]) as server:
        result = pytester.runpytest(
            f"--gym-checkout={fake_gym.checkout}", "-p", "no:cacheprovider", "-p", "no:randomly",
            f"--gym-policy=base={server.base_url},model=replay,temperature=0",
            f"--gym-policy=cand={server.base_url},model=replay,temperature=1.5,top_p=1.0,max_output_tokens=64",
            "--gym-max-output-tokens=32", "--gym-run-dir=runs", "--gym-report=r.json", "--junitxml=j.xml",
            "mcqa.jsonl",
        )  # fmt: skip
    result.assert_outcomes(passed=2, failed=2)
    (run_dir,) = (pytester.path / "runs").iterdir()
    sent = [json.loads(line) for line in (run_dir / "gym-input.jsonl").read_text().splitlines()]
    params = {(row["id"], row["agent_ref"]["name"]): row["responses_create_params"] for row in sent}
    for task in REWARDS:
        assert params[(task, "mcqa_simple_agent")] == {
            "input": "ping", "temperature": 0.0, "top_p": 0.3, "max_output_tokens": 32,
        }  # fmt: skip
        assert params[(task, "mcqa_simple_agent__cand")] == {
            "input": "ping", "temperature": 1.5, "top_p": 1.0, "max_output_tokens": 64,
        }  # fmt: skip
    report = json.loads((pytester.path / "r.json").read_text())
    jsonschema.validate(report, json.loads(SCHEMA_PATH.read_text()))
    shown = {key: value for key, value in report["meta"].items() if key.startswith(("policy.", "sampling."))}
    assert shown == {
        "sampling.max_output_tokens": 32,
        "policy.base.temperature": 0.0,
        "policy.base.max_output_tokens": 32,
        "policy.cand.temperature": 1.5,
        "policy.cand.top_p": 1.0,
        "policy.cand.max_output_tokens": 64,
        "sampling.precedence": "policy over option over row",
        "policy.base.model": "replay",  # each policy's model, as the history stores its rollouts
        "policy.cand.model": "replay",
    }
    properties = junit_suite_properties(pytester.path / "j.xml")
    assert (properties["gym.policy.cand.temperature"], properties["gym.sampling.precedence"]) == (
        "1.5",
        "policy over option over row",
    )


def test_one_policys_selection_is_titled_by_its_policy_and_counted_by_its_items(
    pytester: pytest.Pytester, fake_gym: FakeGym
) -> None:
    """``-k cand`` selects the candidate's 4 items of 2 tasks x 2 repeats (of 8 items, 4 per policy): its only summary
    is the candidate's, titled so on the terminal, in the JSON report and the Markdown summary (not as the dataset,
    which reads as both policies'), and its selection counts every task selected (2 of 2) and the items (4 of 8),
    where the base policy's deselected items made it "0 of 2 tasks"."""
    write_dataset(pytester)
    result = pytester.runpytest_subprocess(
        *policy_args(fake_gym), "mcqa.jsonl", "--gym-repeats=2", "-k", "cand", "--gym-min-pass-rate=0.1",
        "--gym-report=r.json", "--gym-markdown=s.md",
    )  # fmt: skip
    report = json.loads((pytester.path / "r.json").read_text())
    jsonschema.validate(report, json.loads(SCHEMA_PATH.read_text()))
    (summary,) = report["datasets"]
    assert (summary["policy"], summary["tasks"], summary["rollouts"]) == ("cand", 2, 4)
    selection = summary["selection"]
    assert (selection["tasks"], selection["of_tasks"], selection["rollouts"], selection["of_rollouts"]) == (2, 2, 4, 8)
    assert selection["label"] == "judged on a -k selection: 2 of 2 tasks, 4 of 8 rollouts"
    assert "mcqa.jsonl (policy cand)" in result.outlines, result.stdout.str()[-3000:]
    assert "0 of 2 tasks" not in result.stdout.str()
    markdown = (pytester.path / "s.md").read_text()
    assert "mcqa.jsonl (policy cand)" in markdown and "0 of 2 tasks" not in markdown
