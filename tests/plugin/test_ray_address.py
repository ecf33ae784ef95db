"""--gym-ray-address: the option, and the Gym config that carries it (against the stand-in ``gym``;
tests/real_gym/test_scale_real_gym.py runs real Gym on a real two-node Ray cluster)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_gym_eval.gym.run import ModelEndpoint, write_gym_config
from tests.support.fakes import FakeGym


def test_the_config_names_the_cluster_only_when_given(tmp_path: Path) -> None:
    model = ModelEndpoint("http://127.0.0.1:9/v1", "m", "openai_model", "RAY_TEST_NO_SUCH_KEY")
    write_gym_config(tmp_path / "with.yaml", model, ("127.0.0.1", 11000), ray_address="127.0.0.1:6379")
    write_gym_config(tmp_path / "without.yaml", model, ("127.0.0.1", 11000))
    assert json.loads((tmp_path / "with.yaml").read_text())["ray_head_node_address"] == "127.0.0.1:6379"
    assert "ray_head_node_address" not in json.loads((tmp_path / "without.yaml").read_text())


@pytest.mark.parametrize("source", ["option", "ini"])
def test_the_session_hands_the_address_to_gym(pytester: pytest.Pytester, fake_gym: FakeGym, source: str) -> None:
    (pytester.path / "mcqa.jsonl").write_text(
        json.dumps({"id": "a", "responses_create_params": {"input": "Q"}, "fake": {"reward": 1.0}}) + "\n"
    )
    args = [*fake_gym.args, "mcqa.jsonl", "--gym-run-dir=runs"]
    if source == "ini":
        pytester.makeini("[pytest]\ngym_ray_address = 127.0.0.1:6380\n")
    else:
        args.append("--gym-ray-address=127.0.0.1:6380")
    result = pytester.runpytest(*args)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*starting Gym's servers on the Ray cluster at 127.0.0.1:6380*"])
    (run_dir,) = (pytester.path / "runs").iterdir()
    config = json.loads((run_dir / "gym-config.yaml").read_text())
    assert config["ray_head_node_address"] == "127.0.0.1:6380"
    starts = [call["argv"] for call in fake_gym.calls() if call["argv"][:2] == ["env", "start"]]
    assert len(starts) == 1 and str(run_dir / "gym-config.yaml") in starts[0]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--gym-ray-address=127.0.0.1"], "--gym-ray-address (ini gym_ray_address): expected HOST:PORT"),
        (["--gym-ray-address=:6379"], "expected HOST:PORT"),
        (["--gym-ray-address=host:99999"], "expected HOST:PORT"),
        (
            ["--gym-ray-address=127.0.0.1:6379", "--gym-head-server=127.0.0.1:11000"],
            "--gym-ray-address cannot be combined with --gym-head-server",
        ),
        (
            ["--gym-ray-address=127.0.0.1:6379", "--gym-keep-alive"],
            "--gym-ray-address cannot be combined with --gym-keep-alive",
        ),
    ],
)
def test_bad_ray_addresses_are_usage_errors(pytester: pytest.Pytester, args: list[str], message: str) -> None:
    result = pytester.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert message in result.stderr.str()


def test_a_ray_client_address_passes(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(
        "def pytest_sessionstart(session):\n"
        "    from pytest_gym_eval.session.gym_session import SESSION_KEY\n"
        "    print('ray address:', session.config.stash[SESSION_KEY].options.ray_address)\n"
    )
    result = pytester.runpytest("--gym-ray-address=ray://10.0.0.5:10001", "-s")
    result.stdout.fnmatch_lines(["ray address: ray://10.0.0.5:10001"])
