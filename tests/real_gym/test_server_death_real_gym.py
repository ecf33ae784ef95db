"""A server of real Gym that dies at start: the error quotes why from that server's own log (Gym itself only says
the process "finished unexpectedly", and its log's last lines are the other servers' start-up chatter)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_gym_eval import provision
from pytest_gym_eval.gym import standalone
from pytest_gym_eval.gym.config import ModelEndpoint, find_agent_config
from pytest_gym_eval.gym.servers import GymStartError


def test_a_server_dying_at_start_is_explained_by_its_own_log(
    gym_checkout: provision.GymCheckout, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A second config file for mcqa's resources server naming an entrypoint that does not exist: its process
    # exits at once, and `gym env start` exits saying "Process `mcqa` finished unexpectedly!".
    broken = tmp_path / "broken.yaml"
    broken.write_text("mcqa:\n  resources_servers:\n    mcqa:\n      entrypoint: no_such_app.py\n", "utf-8")

    def configs(checkout: Path, agent: str) -> Path | None:
        return broken if agent == "broken" else find_agent_config(checkout, agent)

    monkeypatch.setattr(standalone, "find_agent_config", configs)
    model = ModelEndpoint("http://127.0.0.1:9/v1", "m", "openai_model", "PYTEST_GYM_EVAL_TEST_NO_KEY")
    with (
        pytest.raises(GymStartError) as info,
        standalone.serving(gym_checkout, model, ["mcqa_simple_agent", "broken"], tmp_path / "run", 300),
    ):
        pytest.fail("Gym's servers were ready with a server that cannot start")
    message = str(info.value)
    server_log = tmp_path / "run" / "logs" / "gym-servers" / "mcqa.log"
    assert message.startswith("`gym env start` exited with status 1 before its servers were ready: "), message
    assert "no_such_app.py" in message and f"({server_log}:" in message, message
    assert "finished unexpectedly" not in message and "last lines of" not in message, message
