"""The real-Gym tier: Gym 0.7.0 from the ``nemo-gym`` sdist, its mcqa example, the project's replay model.

Expected rewards are never written here: they come from Gym's own ``gym eval reverify`` of the recorded
answers (fixture ``gym_verdicts``) and from Gym's own output files. Most tests attach to one Gym started for
the tier (``shared_gym``); those about start-up and teardown start their own.
"""

from __future__ import annotations

import json
import shutil
import signal
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from pytest_gym_eval.gym.processes import session_members
from pytest_gym_eval.replay import ReplayServer
from pytest_gym_eval.reporting.json_report import SCHEMA_PATH
from tests.support.children import (
    DOCKER_STOP,
    GITHUB_CANCEL,
    REPORT_ARGS,
    REPORTS_WITHIN,
    assert_interrupted,
    gym_commands,
    interrupt_once_reported,
    processes_with_environment,
    run_until_reported,
    started_processes,
    stop_like_a_runner,
    wait_until,
)
from tests.support.junit import junit_aggregates, junit_rollouts, junit_suite_properties, validate_junit
from tests.support.real_gym import GymExample, SharedGym


def copy_example(pytester: pytest.Pytester, example: GymExample) -> str:
    """Gym's example tasks as ``datasets/<environment>.jsonl`` in the test's folder (the name picks the agent)."""
    target = pytester.path / "datasets" / f"{example.name}.jsonl"
    target.parent.mkdir(exist_ok=True)
    shutil.copy(example.dataset, target)
    return f"datasets/{example.name}.jsonl"


def junit_rewards(path: Path) -> dict[str, tuple[str, float | None]]:
    """node name -> (task id, reward) from the JUnit XML's testcases (validated against its family's schema)."""
    validate_junit(path)
    found = {}
    for name, values in junit_rollouts(path).items():
        if "task_id" in values:
            reward = values.get("reward")
            found[name] = (values["task_id"], None if reward is None else float(reward))
    return found


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def run_dirs(root: Path) -> list[Path]:
    return sorted(p for p in root.iterdir() if p.is_dir())


def started_sessions(run_dir: Path) -> list[int]:
    return [process["sid"] for process in started_processes(run_dir)]


def test_example_rewards_equal_gyms_own_verdicts(
    pytester: pytest.Pytester, shared_gym: SharedGym, gym_example: GymExample, gym_verdicts: dict[str, float]
) -> None:
    dataset = copy_example(pytester, gym_example)
    result = pytester.runpytest(*shared_gym.args, dataset, "--gym-repeats=2", "--junitxml=junit.xml")
    rewards = junit_rewards(pytester.path / "junit.xml")
    assert len(rewards) == 10
    for name, (task_id, reward) in rewards.items():
        assert reward == gym_verdicts[task_id], name
    passed = sum(1 for _, reward in rewards.values() if reward == 1.0)
    result.assert_outcomes(passed=passed, failed=10 - passed)
    # Gym 0.7.0 accepts one answer its recording scored 0.0: the recording alone would have been wrong.
    recorded = [json.loads(line)["reward"] for line in gym_example.recordings.read_text().splitlines()]
    assert sorted(gym_verdicts.values()) != sorted(recorded)


def test_k_rolls_out_only_that_task(pytester: pytest.Pytester, shared_gym: SharedGym, gym_example: GymExample) -> None:
    dataset = copy_example(pytester, gym_example)
    task = json.loads(gym_example.dataset.read_text().splitlines()[2])["uuid"]
    result = pytester.runpytest(*shared_gym.args, dataset, "--gym-repeats=2", "-k", task, "--gym-run-dir=runs")
    assert result.parseoutcomes().get("deselected") == 8
    (run_dir,) = run_dirs(pytester.path / "runs")
    materialized = [json.loads(line) for line in (run_dir / "gym-output" / "rollouts_materialized_inputs.jsonl").open()]
    assert [row["uuid"] for row in materialized] == [task, task]


def test_last_failed_rolls_out_only_the_failed_pairs(
    pytester: pytest.Pytester, shared_gym: SharedGym, gym_example: GymExample, gym_verdicts: dict[str, float]
) -> None:
    dataset = copy_example(pytester, gym_example)
    pytester.runpytest(*shared_gym.args, dataset, "--gym-repeats=2", "--gym-run-dir=runs")
    failing = sorted(task for task, reward in gym_verdicts.items() if reward < 1.0)
    assert failing, "the example must have a task that fails"
    result = pytester.runpytest(*shared_gym.args, dataset, "--gym-repeats=2", "--gym-run-dir=runs", "--lf")
    result.assert_outcomes(failed=2 * len(failing), deselected=10 - 2 * len(failing))
    newest = max(run_dirs(pytester.path / "runs"), key=lambda p: p.stat().st_mtime)
    materialized = [json.loads(line) for line in (newest / "gym-output" / "rollouts_materialized_inputs.jsonl").open()]
    assert sorted(row["uuid"] for row in materialized) == sorted(failing * 2)


def test_collect_only_starts_no_process(
    pytester: pytest.Pytester, gym_example: GymExample, monkeypatch: pytest.MonkeyPatch
) -> None:
    dataset = copy_example(pytester, gym_example)
    probe = str(pytester.path)  # every process the session starts inherits it; nothing else on the machine has it
    monkeypatch.setenv("COLLECT_ONLY_PROBE", probe)
    result = pytester.runpytest_subprocess(
        f"--gym-checkout={gym_example.checkout}", f"--gym-replay={gym_example.recordings}", dataset,
        "--collect-only", "--gym-run-dir=runs",
    )  # fmt: skip
    assert result.ret == 0 and "5 tests collected" in result.stdout.str()
    assert not (pytester.path / "runs").exists()
    assert processes_with_environment("COLLECT_ONLY_PROBE", probe) == []


def test_changed_recording_flips_the_reward_and_teardown_leaves_nothing(
    pytester: pytest.Pytester, gym_example: GymExample, gym_verdicts: dict[str, float]
) -> None:
    dataset = copy_example(pytester, gym_example)
    recordings = [json.loads(line) for line in gym_example.recordings.read_text().splitlines()]
    rows = [json.loads(line) for line in gym_example.dataset.read_text().splitlines()]
    # Change the answer of one task Gym scores 1.0 to a letter that is certainly wrong.
    target = next(row for row in rows if gym_verdicts[row["uuid"]] == 1.0)
    wrong = next(letter for letter in "ABCDEFGHIJ" if letter != target["expected_answer"])
    prompt = target["responses_create_params"]["input"][0]["content"]
    for recording in recordings:
        if recording["responses_create_params"]["input"][0]["content"] == prompt:
            recording["response"]["output"][-1]["content"][0]["text"] = f"The answer is \\boxed{{{wrong}}}"
    changed = pytester.path / "changed_rollouts.jsonl"
    changed.write_text("".join(json.dumps(r) + "\n" for r in recordings))

    result = pytester.runpytest_subprocess(
        f"--gym-checkout={gym_example.checkout}", f"--gym-replay={changed}", dataset,
        "--junitxml=junit.xml", "--gym-run-dir=runs", "-p", "no:cacheprovider",
    )  # fmt: skip
    rewards = {task: reward for task, reward in junit_rewards(pytester.path / "junit.xml").values()}
    expected = {**gym_verdicts, target["uuid"]: 0.0}
    assert rewards == expected, result.stdout.str()[-3000:]
    (run_dir,) = run_dirs(pytester.path / "runs")
    sessions = started_sessions(run_dir)
    assert len(sessions) >= 2  # gym env start and gym eval run
    assert [sid for sid in sessions if session_members(sid)] == []


@pytest.fixture
def slow_replay(gym_example: GymExample, tmp_path: Path) -> ReplayServer:
    """The recorded answers, each held back 2 s: rollouts stay in flight long enough to interrupt them."""
    server = ReplayServer([gym_example.recordings], delay=2.0, log_path=tmp_path / "slow-replay.jsonl")
    server.start()
    yield server  # type: ignore[misc]
    server.stop()


def test_killing_gyms_process_group_mid_run_errors_the_rest(
    pytester: pytest.Pytester, gym_example: GymExample, slow_replay: ReplayServer
) -> None:
    dataset = copy_example(pytester, gym_example)
    pytester.makeconftest(
        """
import json, os, signal
from pathlib import Path
def pytest_runtest_logreport(report):
    if report.when == "call" and not os.environ.get("KILLED"):
        os.environ["KILLED"] = "1"
        (run_dir,) = Path("runs").iterdir()
        started = [json.loads(line) for line in (run_dir / "processes.jsonl").read_text().splitlines()]
        (servers,) = [process for process in started if process["name"] == "gym env start"]
        os.killpg(servers["pid"], signal.SIGKILL)
"""
    )
    result = pytester.runpytest_subprocess(
        f"--gym-checkout={gym_example.checkout}", f"--gym-model-url={slow_replay.base_url}", "--gym-model=replay",
        dataset, "--gym-concurrency=1", "--gym-run-dir=runs", "-p", "no:cacheprovider", "-rA",
    )  # fmt: skip
    outcomes = result.parseoutcomes()
    assert outcomes.get("errors", 0) >= 3, result.stdout.str()[-3000:]
    assert outcomes.get("passed", 0) + outcomes.get("failed", 0) + outcomes["errors"] == 5
    result.stdout.fnmatch_lines(["*Gym's servers exited*during the run*"])
    (run_dir,) = run_dirs(pytester.path / "runs")
    assert [sid for sid in started_sessions(run_dir) if session_members(sid)] == []


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_sigint_or_sigterm_to_pytest_leaves_nothing_running(
    pytester: pytest.Pytester, gym_example: GymExample, slow_replay: ReplayServer, sig: signal.Signals
) -> None:
    dataset = copy_example(pytester, gym_example)
    args = [
        f"--gym-checkout={gym_example.checkout}", f"--gym-model-url={slow_replay.base_url}", "--gym-model=replay",
        "--gym-concurrency=1", "--gym-run-dir=runs", "-p", "no:cacheprovider", "-v", dataset,
    ]  # fmt: skip
    returncode, output = interrupt_once_reported(
        pytester.path, args, lambda line: " PASSED" in line or " FAILED" in line, sig, timeout=300
    )
    assert_interrupted(returncode, output)
    (run_dir,) = run_dirs(pytester.path / "runs")
    assert [sid for sid in started_sessions(run_dir) if session_members(sid)] == []


@pytest.mark.parametrize("schedule", [DOCKER_STOP, GITHUB_CANCEL], ids=["sigterm-sigkill", "github-cancel"])
def test_a_runners_stop_mid_run_finds_every_report_written(
    pytester: pytest.Pytester,
    gym_example: GymExample,
    slow_replay: ReplayServer,
    schedule: tuple[tuple[signal.Signals, float], ...],
) -> None:
    """Stopped mid-run as ``docker stop`` on a busy runner (SIGTERM, SIGKILL 3 s later) or as GitHub Actions
    cancels (SIGINT, SIGTERM 7.5 s later, SIGKILL 2.5 s after), the session has written the JUnit XML, the JSON
    report, the HTML page and the Markdown summary within 3 s, and nothing of Gym is left running."""
    dataset = copy_example(pytester, gym_example)
    args = [
        f"--gym-checkout={gym_example.checkout}", f"--gym-model-url={slow_replay.base_url}", "--gym-model=replay",
        "--gym-concurrency=1", "--gym-run-dir=runs", "-p", "no:cacheprovider", "-v", dataset, *REPORT_ARGS,
    ]  # fmt: skip
    process, seen = run_until_reported(pytester.path, args, lambda line: " PASSED" in line or " FAILED" in line)
    complete_at, rest = stop_like_a_runner(process, pytester.path, schedule)
    output = "".join(seen) + rest
    assert complete_at is not None and complete_at <= REPORTS_WITHIN, (complete_at, output[-3000:])
    assert "gym: stopping Gym ..." in output or process.returncode == -signal.SIGKILL, output[-3000:]
    validate_junit(pytester.path / "junit.xml")
    assert junit_suite_properties(pytester.path / "junit.xml")["gym.exit_status"] == "2"
    report = json.loads((pytester.path / "report.json").read_text())
    jsonschema.validate(report, json.loads(SCHEMA_PATH.read_text()))
    assert report["session"]["exit_status"] == 2 and report["rollouts"], report["session"]
    (run_dir,) = run_dirs(pytester.path / "runs")
    wait_until(
        lambda: not [sid for sid in started_sessions(run_dir) if session_members(sid)],
        "every process of the run is gone (the plugin's stop, or the watchdog's after SIGKILL)",
        timeout=120,
    )


def gym_mean_reward(run_dir: Path) -> float:
    """The mean reward Gym's own aggregate metrics report for a run."""
    (entry,) = json.loads((run_dir / "gym-output" / "rollouts_aggregate_metrics.json").read_text())
    return float(entry["agent_metrics"]["mean/reward"])


def test_summary_matches_gyms_aggregate_and_gates_follow_it(
    pytester: pytest.Pytester, shared_gym: SharedGym, gym_example: GymExample
) -> None:
    dataset = copy_example(pytester, gym_example)
    replay = f"--gym-replay={gym_example.recordings}"
    result = pytester.runpytest(
        *shared_gym.args, replay, dataset, "--gym-repeats=2", "--gym-report=report.json", "--gym-run-dir=runs"
    )
    (run_dir,) = run_dirs(pytester.path / "runs")
    mean = gym_mean_reward(run_dir)
    report = json.loads((pytester.path / "report.json").read_text())
    jsonschema.validate(report, json.loads(SCHEMA_PATH.read_text()))
    (summary,) = report["datasets"]
    assert summary["mean_reward"]["estimate"] == pytest.approx(mean)
    result.stdout.fnmatch_lines([f"  mean reward {mean:.2f} *"])
    # The one recording Gym 0.7.0 now scores differently is listed, once per repeat.
    recorded = {
        json.loads(line)["responses_create_params"]["input"][0]["content"]: json.loads(line)["reward"]
        for line in gym_example.recordings.read_text().splitlines()
    }
    flips = [r for r in report["rollouts"] if r["reward"] != recorded[prompt_of(r, pytester)]]
    assert len(flips) == 2
    result.stdout.fnmatch_lines(["verifier flips against the recording: 2"])
    for flip in flips:
        result.stdout.fnmatch_lines([f"  {flip['nodeid']}".replace("[", "[[]"), "      reward 1, recorded 0.0"])

    below = pytester.runpytest(*shared_gym.args, dataset, "--gym-repeats=2", f"--gym-min-mean-reward={mean - 0.1}")
    assert below.ret == 0
    above = pytester.runpytest(*shared_gym.args, dataset, "--gym-repeats=2", f"--gym-min-mean-reward={mean + 0.1}")
    assert above.ret == 1
    above.stdout.fnmatch_lines(["*gym gates: FAIL*mean reward*"])


def prompt_of(rollout: dict[str, object], pytester: pytest.Pytester) -> str:
    path, line = str(rollout["record"]).rsplit(":", 1)
    record = json.loads(Path(path).read_text().splitlines()[int(line) - 1])
    return str(record["responses_create_params"]["input"][0]["content"])


def test_xdist_starts_gym_once_and_matches_one_process(
    pytester: pytest.Pytester, shared_gym: SharedGym, gym_example: GymExample
) -> None:
    dataset = copy_example(pytester, gym_example)
    common = [f"--gym-replay={gym_example.recordings}", dataset, "--gym-repeats=2", "-rA", "--gym-min-pass-rate=0.5"]
    alone = pytester.runpytest_subprocess(*shared_gym.args, *common, "--junitxml=alone.xml")
    # pytest-timeout's 20 s per test is far shorter than Gym's start-up here: it must time each item's own work,
    # never the wait for Gym (see pytest_gym_eval.integrations).
    spread = pytester.runpytest_subprocess(
        f"--gym-checkout={gym_example.checkout}", *common, "-n", "2", "--junitxml=spread.xml", "--gym-run-dir=runs",
        "-p", "timeout", "--timeout=20",
    )  # fmt: skip
    assert spread.ret == alone.ret == 0
    assert sorted(line for line in spread.outlines if line.startswith(("PASSED ", "FAILED ", "ERROR "))) == sorted(
        line for line in alone.outlines if line.startswith(("PASSED ", "FAILED ", "ERROR "))
    )

    def summary(result: pytest.RunResult) -> list[str]:
        start = next(i for i, line in enumerate(result.outlines) if "gym reward summary" in line)
        end = next(i for i, line in enumerate(result.outlines) if line.startswith("gym run directory"))
        return [line for line in result.outlines[start:end] if "wall time" not in line]

    assert summary(spread) == summary(alone)
    datasets = "gym::datasets/"
    assert junit_aggregates(pytester.path / "spread.xml", datasets) == junit_aggregates(
        pytester.path / "alone.xml", datasets
    )
    assert junit_aggregates(pytester.path / "alone.xml", "gym::datasets/")  # not vacuous

    (run_dir,) = run_dirs(pytester.path / "runs")
    started = gym_commands(run_dir)
    # Once for the run, not once per worker (a second `gym env start` only when Ray's start-up timed out).
    assert started in (["gym env start", "gym eval run"], ["gym env start", "gym env start", "gym eval run"])
    materialized = (run_dir / "gym-output" / "rollouts_materialized_inputs.jsonl").read_text().splitlines()
    tasks = [json.loads(line)["uuid"] for line in materialized]
    assert len(tasks) == 10 and all(tasks.count(t) == 2 for t in tasks)
    requests = [json.loads(line) for line in (run_dir / "logs" / "replay-model.jsonl").read_text().splitlines()]
    prompts = [r["request"]["input"][0]["content"] for r in requests if r["path"].endswith("/responses")]
    assert len(prompts) == 10 and all(prompts.count(p) == 2 for p in prompts)


def test_tool_calling_conversations_replay_turn_by_turn(
    pytester: pytest.Pytester, shared_gym: SharedGym, tool_example: GymExample
) -> None:
    # Gym will not reverify this environment (its reward depends on the live tool calls), so the expected rewards
    # are the recorded ones: the replayed conversations, with real tool results, must score the same.
    from pytest_gym_eval.tasks.dataset import row_digest

    rows = {row["responses_create_params"]["input"][-1]["content"]: row for row in read_jsonl(tool_example.dataset)}
    expected = {
        row_digest(rows[rec["responses_create_params"]["input"][-1]["content"]])[:12]: rec["reward"]
        for rec in read_jsonl(tool_example.recordings)
    }
    dataset = copy_example(pytester, tool_example)
    result = pytester.runpytest(
        *shared_gym.args, f"--gym-replay={tool_example.recordings}", dataset, "--junitxml=junit.xml"
    )
    rewards = junit_rewards(pytester.path / "junit.xml")
    assert len(rewards) == 5
    assert {task_id: reward for task_id, reward in rewards.values()} == expected
    result.stdout.fnmatch_lines(["verifier flips against the recording: none"])
    # A conversation that called the tool came back to the model with the real tool's result, and was answered.
    requests = [json.loads(line) for line in shared_gym.replay_log.read_text().splitlines()]
    after_tool = [
        r for r in requests
        if any(item.get("type") == "function_call_output" for item in (r["request"] or {}).get("input") or [])
    ]  # fmt: skip
    assert after_tool and all(r["status"] == 200 for r in after_tool)


def test_a_failed_tool_calling_rollout_shows_its_steps(
    pytester: pytest.Pytester, shared_gym: SharedGym, tool_example: GymExample
) -> None:
    # Every rollout fails at threshold 2 (rewards are 0 or 1): the ones that called the tool show the call, its
    # real result from Gym's tool server, and the final answer.
    dataset = copy_example(pytester, tool_example)
    result = pytester.runpytest(
        *shared_gym.args, f"--gym-replay={tool_example.recordings}", dataset, "--gym-pass-threshold=2"
    )
    result.assert_outcomes(failed=5)
    result.stdout.fnmatch_lines(['steps:    1. get_weather({"city":*}) -> {*"weather_description":*', "output:   *"])


def test_a_gate_on_a_run_cut_short_by_x_is_never_green(
    pytester: pytest.Pytester, shared_gym: SharedGym, gym_example: GymExample
) -> None:
    # A gate that any scored rollout passes (mean reward >= 0); -x stops at the first failed rollout, while Gym (one
    # rollout at a time) has not scored them all: the reports count every rollout Gym wrote, the others never
    # reported, so the gate is INCONCLUSIVE and the session fails, whatever was scored.
    dataset = copy_example(pytester, gym_example)
    args = [dataset, "--gym-repeats=2", "-x", "--gym-min-mean-reward=0", "--gym-inconclusive=pass"]
    args.append("--gym-concurrency=1")
    result = pytester.runpytest(*shared_gym.args, *args, "--gym-report=report.json", "--junitxml=junit.xml")
    report = json.loads((pytester.path / "report.json").read_text())
    (summary,) = report["datasets"]
    output = Path(report["meta"]["run_dir"]) / "gym-output"
    written = sum(
        len(path.read_text().splitlines()) for path in output.glob("rollouts*.jsonl") if "materialized" not in path.name
    )
    # The reports count what Gym had written by the session's end; Gym, stopped only after the reports, may write one
    # more rollout meanwhile, so the files can hold more than the reports counted, never fewer.
    counted = summary["rollouts"]
    assert summary["selected"] == 10 and counted <= written and summary["unreported"] == 10 - counted
    if counted == 10:  # Gym scored every rollout before the session ended: no evaluation was cut short
        pytest.skip("Gym scored every rollout before -x ended the session")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert summary["verdict"] == "INCONCLUSIVE" and summary["gates"][0]["note"].startswith("judged on ")
    assert report["session"]["exit_status"] == 1 and "never reported" in report["session"]["reason"]
    validate_junit(pytester.path / "junit.xml")
    suite = {p.get("name"): p.get("value") for p in ET.parse(pytester.path / "junit.xml").iter("property")}
    assert suite["gym.exit_status"] == "1" and suite[f"gym::{dataset}::verdict"] == "INCONCLUSIVE"
