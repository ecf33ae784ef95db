"""Judge recordings from Gym's own rollouts: every judge call the examples shipped with Gym 0.7.0 record
(``judge_evaluations``) is answered by the replay server with its recorded output (the synthetic records:
tests/unit/test_judge_recordings.py)."""

from __future__ import annotations

import json
from pathlib import Path

from pytest_gym_eval.provision import GymCheckout
from pytest_gym_eval.replay import ReplayServer, load_recordings
from pytest_gym_eval.replay.judge_recordings import judge_recordings, write_judge_recordings
from tests.support.replay import post


def test_every_judge_call_in_gyms_examples_is_replayed_as_recorded(gym_checkout: GymCheckout, tmp_path: Path) -> None:
    files = [
        path
        for path in sorted((gym_checkout.path / "resources_servers").glob("*/data/*rollouts*.jsonl"))
        if "judge_evaluations" in path.read_text(encoding="utf-8")
    ]
    answered: dict[str, int] = {}
    for path in files:
        calls = judge_recordings([path])
        if not calls:
            continue
        output = tmp_path / f"{path.parents[1].name}-{path.stem}.jsonl"
        assert write_judge_recordings([path], output) == len(calls)
        assert len(load_recordings([output])) == len(calls)
        with ReplayServer([output]) as server:
            for call in calls:
                params = {name: value for name, value in call["responses_create_params"].items() if value is not None}
                status, answer = post(f"{server.base_url}/responses", params)
                assert status == 200, (call["judge_of"], answer)
                assert json.dumps(answer["output"]) == json.dumps(call["response"]["output"]), call["judge_of"]
                answered[path.parents[1].name] = answered.get(path.parents[1].name, 0) + 1
    # Measured on Gym 0.7.0: 46 judge calls in 7 environments' examples.
    assert {"equivalence_llm_judge", "math_with_judge", "text_to_sql", "terminus_judge"} <= set(answered), answered
    assert sum(answered.values()) >= 40, answered
