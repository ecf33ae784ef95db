"""The private Ray head started for Gym's servers (:mod:`pytest_gym_eval.gym.ray_head`) by whatever starts them (a
session, a warm Gym's keeper, ``serving()``), against a stand-in Python in the fake checkout's venv; with real Gym
and Ray, every session of tests/real_gym/ starts one."""

from __future__ import annotations

import json
import stat
import sys
import threading
import time
from pathlib import Path

import pytest

from pytest_gym_eval.cli.stop import main as stop_main
from pytest_gym_eval.core.rundir import RunPaths
from pytest_gym_eval.gym.processes import GymProcess, session_members
from pytest_gym_eval.gym.ray_head import RayHeadFailed, ray_python, start_ray_head
from pytest_gym_eval.gym.run import ModelEndpoint
from pytest_gym_eval.gym.standalone import serving
from pytest_gym_eval.provision import GymCheckout
from pytest_gym_eval.warm.registry import Registry
from tests.support.children import started_processes
from tests.support.fakes import FakeGym

HEAD = (
    "import signal; print('Started a local Ray instance.'); print('ray head ready at 127.0.0.1:4242', flush=True);"
    " signal.pause()"
)
NO_RAY = "import sys; print('ModuleNotFoundError: No module named ray', flush=True); sys.exit(1)"


def fake_ray_venv(checkout: Path, program: str) -> None:
    """Give the fake checkout's venv a ``ray`` command and a ``python`` that runs ``program`` whatever it is told."""
    bin_dir = checkout / ".venv" / "bin"
    (bin_dir / "ray").write_text("#!/bin/sh\nexit 0\n")
    python = bin_dir / "python"
    python.write_text(f'#!/bin/sh\nexec "{sys.executable}" -c "{program}"\n')
    for path in (bin_dir / "ray", python):
        path.chmod(path.stat().st_mode | stat.S_IXUSR)


def one_task(pytester: pytest.Pytester) -> str:
    row = {"id": "t1", "responses_create_params": {"input": [{"role": "user", "content": "Question?"}]}}
    (pytester.path / "mcqa.jsonl").write_text(json.dumps(row) + "\n")
    return "mcqa.jsonl"


def started(run_dir: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (run_dir / "processes.jsonl").read_text().splitlines()]


def test_only_a_venv_with_ray_gets_a_ray_head(fake_gym: FakeGym) -> None:
    gym = fake_gym.checkout / ".venv" / "bin" / "gym"
    assert ray_python(gym) is None  # a stand-in gym without Ray: Gym starts Ray itself, as it always did
    fake_ray_venv(fake_gym.checkout, HEAD)
    assert ray_python(gym) == gym.parent / "python"


def test_the_head_is_ready_once_it_prints_its_address(fake_gym: FakeGym, tmp_path: Path) -> None:
    fake_ray_venv(fake_gym.checkout, HEAD)
    python = fake_gym.checkout / ".venv" / "bin" / "python"
    seen: list[GymProcess] = []
    process, address = start_ray_head(
        python, {}, tmp_path, tmp_path / "ray-head.log", time.monotonic() + 60, threading.Event(), seen.append
    )
    try:
        assert address == "127.0.0.1:4242"
        assert seen == [process] and process.poll() is None
    finally:
        process.stop(0.5)
    assert not session_members(process.pid)


def test_a_head_that_exits_names_its_log_and_leaves_nothing(fake_gym: FakeGym, tmp_path: Path) -> None:
    fake_ray_venv(fake_gym.checkout, NO_RAY)
    python = fake_gym.checkout / ".venv" / "bin" / "python"
    seen: list[GymProcess] = []
    with pytest.raises(
        RayHeadFailed, match=r"Ray's head exited with status 1; last lines of .*ray-head.log:\n.*No module"
    ):
        start_ray_head(
            python, {}, tmp_path, tmp_path / "ray-head.log", time.monotonic() + 60, threading.Event(), seen.append
        )
    assert not session_members(seen[0].pid)


def test_a_session_hands_gym_its_ray_head_and_stops_it(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    fake_ray_venv(fake_gym.checkout, HEAD)
    result = pytester.runpytest(*fake_gym.args, "--gym-run-dir=runs", one_task(pytester))
    result.assert_outcomes(passed=1)
    (run_dir,) = (pytester.path / "runs").iterdir()
    processes = started(run_dir)
    assert [p["name"] for p in processes] == ["ray head", "gym env start", "gym eval run"]
    assert json.loads((run_dir / "gym-config.yaml").read_text())["ray_head_node_address"] == "127.0.0.1:4242"
    assert not session_members(int(processes[0]["sid"]))  # type: ignore[call-overload]


def test_a_head_that_does_not_start_leaves_ray_to_gym(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    fake_ray_venv(fake_gym.checkout, NO_RAY)
    result = pytester.runpytest(*fake_gym.args, "--gym-run-dir=runs", one_task(pytester))
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["gym: warning: Ray's head exited with status 1; last lines of *ray-head.log:"])
    result.stdout.fnmatch_lines(["Gym starts Ray itself instead"])
    (run_dir,) = (pytester.path / "runs").iterdir()
    assert "ray_head_node_address" not in json.loads((run_dir / "gym-config.yaml").read_text())


def test_serving_hands_gym_its_ray_head_and_stops_it(fake_gym: FakeGym, tmp_path: Path) -> None:
    fake_ray_venv(fake_gym.checkout, HEAD)
    checkout = GymCheckout(fake_gym.checkout, fake_gym.checkout / ".venv" / "bin" / "gym", None, {})
    model = ModelEndpoint("http://127.0.0.1:9/v1", "policy", "openai_model", "PYTEST_GYM_EVAL_TEST_NO_KEY")
    root = tmp_path / "servers"
    with serving(checkout, model, ["mcqa_simple_agent"], root, timeout=60):
        processes = started_processes(root)
        assert [p["name"] for p in processes] == ["ray head", "gym env start"]
        assert session_members(processes[0]["pid"]), "the Ray head is not running inside the block"
        assert json.loads(RunPaths(root).config.read_text())["ray_head_node_address"] == "127.0.0.1:4242"
    assert not any(session_members(p["sid"]) for p in processes)


def test_a_warm_gym_hands_gym_its_ray_head_and_stop_ends_it(
    pytester: pytest.Pytester, fake_gym: FakeGym, warm_registry: Path
) -> None:
    fake_ray_venv(fake_gym.checkout, HEAD)
    result = pytester.runpytest(*fake_gym.args, "--gym-keep-alive=600", "--gym-run-dir=runs", one_task(pytester))
    result.assert_outcomes(passed=1)
    (entry,) = Registry(warm_registry).entries()
    processes = started_processes(entry.home)
    assert [p["name"] for p in processes] == ["ray head", "gym env start"]
    assert session_members(processes[0]["pid"]), "the warm Gym's Ray head is not running between sessions"
    assert json.loads((entry.home / "gym-config.yaml").read_text())["ray_head_node_address"] == "127.0.0.1:4242"
    assert stop_main(["--all"]) == 0
    assert not any(session_members(p["sid"]) for p in processes)
