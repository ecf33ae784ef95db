"""Real Gym kept warm between sessions (``--gym-keep-alive``) and an interrupted run resumed (``--gym-resume``).

Gym 0.7.0's mcqa example; expected rewards from Gym's own ``gym eval reverify`` (fixture ``gym_verdicts``). Each
test has its own registry of warm Gyms (fixture ``warm_registry``, which stops every warm Gym in it at the end), so
tests running at once, and other sessions on the machine, never see each other's warm Gyms. The stand-in versions
of these (fast, for the error paths) are in tests/plugin/test_warm.py and tests/plugin/test_resume.py. Every wait
polls a state against a deadline.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_gym_eval.gym.orphans import run_processes
from pytest_gym_eval.gym.processes import session_members
from pytest_gym_eval.replay import ReplayServer
from pytest_gym_eval.warm.registry import Entry, Registry
from tests.support.children import (
    assert_interrupted,
    gym_commands,
    interrupt_once_reported,
    started_processes,
    wait_until,
)
from tests.support.junit import junit_rollouts, validate_junit
from tests.support.real_gym import GymExample

STOP_DEADLINE = 120.0
"""Seconds real Gym may take to stop (SIGINT, Gym's own shutdown of ~9 s, SIGKILL of the rest)."""


def copy_example(path: Path, example: GymExample) -> str:
    target = path / "datasets" / f"{example.name}.jsonl"
    target.parent.mkdir(exist_ok=True)
    shutil.copy(example.dataset, target)
    return f"datasets/{example.name}.jsonl"


def rewards(junit: Path) -> dict[str, float | None]:
    """task id[rN] -> reward, from a JUnit XML file (validated)."""
    validate_junit(junit)
    found = {}
    for values in junit_rollouts(junit).values():
        if "task_id" in values:
            reward = values.get("reward")
            found[f"{values['task_id']}[r{values['repeat']}]"] = None if reward is None else float(reward)
    return found


def expected(verdicts: dict[str, float], repeats: int) -> dict[str, float | None]:
    return {f"{task}[r{r}]": reward for task, reward in verdicts.items() for r in range(repeats)}


def gone(entry: Entry) -> bool:
    """Whether nothing of a warm Gym runs: its keeper, every process session it started, every process marked
    as its keeper's."""
    sessions = [entry.servers, *(p["sid"] for p in started_processes(entry.home))]
    marked = run_processes().get(entry.keeper_owner, [])
    return not entry.keeper_owner.alive() and not any(session_members(s) for s in sessions) and not marked


def newest(folder: Path) -> Path:
    return max(folder.iterdir(), key=lambda p: p.stat().st_mtime)


def started_in(home: Path) -> list[str]:
    """The Gym commands started in a warm Gym's home or a run directory (less the Ray head that comes first)."""
    return gym_commands(home)


@pytest.fixture
def endpoint(gym_example: GymExample) -> Iterator[ReplayServer]:
    """Gym's recorded answers served as a model endpoint the sessions name by URL and model name."""
    with ReplayServer([gym_example.recordings]) as server:
        yield server


def test_warm_sessions_start_gym_once_another_model_starts_another_and_stop_all_leaves_nothing(
    pytester: pytest.Pytester,
    gym_example: GymExample,
    gym_verdicts: dict[str, float],
    endpoint: ReplayServer,
    warm_registry: Path,
) -> None:
    dataset = copy_example(pytester.path, gym_example)
    common = [f"--gym-checkout={gym_example.checkout}", f"--gym-model-url={endpoint.base_url}", dataset]
    common += ["--gym-repeats=2", "--gym-keep-alive=600", "--gym-run-dir=runs", "-p", "no:cacheprovider"]

    first = pytester.runpytest(*common, "--gym-model=replay", "--junitxml=first.xml")
    assert rewards(pytester.path / "first.xml") == expected(gym_verdicts, 2), first.stdout.str()[-3000:]
    first.stdout.fnmatch_lines(["gym: started warm Gym *"])
    (entry,) = Registry(warm_registry).entries()
    assert started_in(entry.home) in (["gym env start"], ["gym env start", "gym env start"])  # (Ray's retry)
    assert started_processes(entry.home)[0]["name"] == "ray head"  # the keeper's Ray head, without the dashboard

    second = pytester.runpytest(*common, "--gym-model=replay", "--junitxml=second.xml")
    assert rewards(pytester.path / "second.xml") == expected(gym_verdicts, 2), second.stdout.str()[-3000:]
    second.stdout.fnmatch_lines([f"gym: attached to warm Gym {entry.short} *: no `gym env start`*"])
    run_dir = newest(pytester.path / "runs")
    assert json.loads((run_dir / "warm.json").read_text())["attached"] is True
    assert started_in(run_dir) == ["gym eval run"]
    config = json.loads((run_dir / "gym-config.yaml").read_text())
    assert (config["head_server"]["host"], config["head_server"]["port"]) == entry.head_server
    assert started_in(entry.home) in (["gym env start"], ["gym env start", "gym env start"])  # still once
    assert Registry(warm_registry).entries() == [entry]

    third = pytester.runpytest(*common, "--gym-model=replay-b", "--junitxml=third.xml")
    assert rewards(pytester.path / "third.xml") == expected(gym_verdicts, 2), third.stdout.str()[-3000:]
    third.stdout.fnmatch_lines(["gym: started warm Gym *"])
    warm = Registry(warm_registry).entries()
    assert len(warm) == 2 and {e.model["model"] for e in warm} == {"replay", "replay-b"}

    stop = subprocess.run(
        [sys.executable, "-m", "pytest_gym_eval", "stop", "--all"], capture_output=True, text=True, timeout=300
    )
    assert stop.returncode == 0, stop.stdout + stop.stderr
    assert Registry(warm_registry).entries() == []
    for each in warm:
        assert gone(each), each.home


def test_a_warm_gym_records_each_rollouts_latency_with_gym_latency(
    pytester: pytest.Pytester, gym_example: GymExample, endpoint: ReplayServer, warm_registry: Path
) -> None:
    dataset = copy_example(pytester.path, gym_example)
    args = [f"--gym-checkout={gym_example.checkout}", f"--gym-model-url={endpoint.base_url}", "--gym-model=replay"]
    args += [dataset, "--gym-keep-alive=600", "--gym-latency", "--junitxml=latency.xml", "-p", "no:cacheprovider"]
    result = pytester.runpytest(*args)
    result.stdout.fnmatch_lines(["gym: started warm Gym *", "  latency *median * over 5 rollouts"])
    validate_junit(pytester.path / "latency.xml")
    cases = [values for values in junit_rollouts(pytester.path / "latency.xml").values() if "task_id" in values]
    assert cases and all(float(values["latency"]) > 0 for values in cases), cases


def test_a_killed_keepers_gym_is_cleaned_by_the_next_session_and_an_idle_gym_stops_itself(
    pytester: pytest.Pytester, gym_example: GymExample, gym_verdicts: dict[str, float], warm_registry: Path
) -> None:
    dataset = copy_example(pytester.path, gym_example)
    common = [f"--gym-checkout={gym_example.checkout}", f"--gym-replay={gym_example.recordings}", dataset]
    common += ["--gym-run-dir=runs", "-p", "no:cacheprovider"]
    pytester.runpytest(*common, "--gym-keep-alive=600").assert_outcomes(
        passed=sum(1 for r in gym_verdicts.values() if r == 1.0), failed=sum(1 for r in gym_verdicts.values() if r < 1)
    )
    (stale,) = Registry(warm_registry).entries()
    os.kill(stale.keeper_owner.pid, signal.SIGKILL)
    wait_until(lambda: not stale.keeper_owner.alive(), "the keeper died")
    assert session_members(stale.servers)  # its Gym is still up, with nobody to stop it

    result = pytester.runpytest(*common, "--gym-keep-alive=3", "--junitxml=junit.xml")
    assert rewards(pytester.path / "junit.xml") == expected(gym_verdicts, 1), result.stdout.str()[-3000:]
    result.stdout.fnmatch_lines(
        [f"gym: warm Gym {stale.short}: its keeper (pid {stale.keeper_owner.pid}) is gone; stopping it and starting*"]
    )
    assert gone(stale)
    (fresh,) = Registry(warm_registry).entries()
    assert fresh.keeper != stale.keeper

    # Nobody uses it now: 3 s later it stops itself, leaving nothing running.
    wait_until(lambda: gone(fresh) and not Registry(warm_registry).entries(), "the idle Gym stopped", STOP_DEADLINE)
    assert "idle for 3 s: unregistered, stopping" in (fresh.home / "logs" / "keeper.log").read_text()


def snapshot(folder: Path) -> dict[str, str]:
    return {
        str(path): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("*"))
        if path.is_file() and not path.is_symlink()
    }


def test_an_interrupted_run_resumes_with_the_rewards_of_an_uninterrupted_one(
    pytester: pytest.Pytester, gym_example: GymExample, gym_verdicts: dict[str, float], warm_registry: Path
) -> None:
    # Each answer held back 2 s, one rollout at a time: the session is interrupted with most rollouts to go. The
    # Gym is kept warm, so the resumed session attaches to it instead of starting Gym again.
    with ReplayServer([gym_example.recordings], delay=2.0) as slow:
        dataset = copy_example(pytester.path, gym_example)
        args = [
            f"--gym-checkout={gym_example.checkout}", f"--gym-model-url={slow.base_url}", "--gym-model=replay",
            "--gym-concurrency=1", "--gym-repeats=2", "--gym-keep-alive=600", "--gym-run-dir=runs",
            "-p", "no:cacheprovider", "-p", "no:randomly", "-v", dataset,
        ]  # fmt: skip
        returncode, output = interrupt_once_reported(
            pytester.path, args, lambda line: " PASSED" in line or " FAILED" in line, signal.SIGINT, timeout=300
        )
        assert_interrupted(returncode, output)
        old = newest(pytester.path / "runs")
        line = next(line for line in output.splitlines() if line.startswith("gym: resume this run with: "))
        command = shlex.split(line.split(": ", 2)[2])
        assert command[-1] == f"--gym-resume={old}"
        before = snapshot(old)

        resumed = subprocess.run(
            [*command, "--junitxml=junit.xml", "--gym-report=report.json"], cwd=pytester.path, capture_output=True,
            text=True, timeout=900,
        )  # fmt: skip
    assert resumed.returncode in (0, 1), resumed.stdout[-3000:]
    assert rewards(pytester.path / "junit.xml") == expected(gym_verdicts, 2), resumed.stdout[-3000:]
    report = json.loads((pytester.path / "report.json").read_text())
    nodeids = [rollout["nodeid"] for rollout in report["rollouts"]]
    assert len(nodeids) == len(set(nodeids)) == 10  # every rollout exactly once
    reused = [r for r in report["rollouts"] if "/resumed/rollouts.jsonl:" in r["record"]]
    new = newest(pytester.path / "runs")
    rolled = len((new / "gym-input.jsonl").read_text().splitlines())
    assert reused and rolled == 10 - len(reused), resumed.stdout[-3000:]
    assert f"gym: resuming {old}: {len(reused)} of 10 rollouts reused, {rolled} to roll out" in resumed.stdout
    assert "gym: attached to warm Gym" in resumed.stdout
    assert snapshot(old) == before  # nothing in the earlier run directory changed
    suite = {p.get("name"): p.get("value") for p in ET.parse(pytester.path / "junit.xml").iter("property")}
    assert suite.get(f"gym::{dataset}::rollouts") == "10"
