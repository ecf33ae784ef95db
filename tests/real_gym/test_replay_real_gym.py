"""The replay model server against Gym's own recordings and the requests Gym's own code makes (the synthetic
recordings: tests/unit/test_replay.py)."""

from __future__ import annotations

import contextlib
import json
import subprocess
from pathlib import Path

import jsonlines

from pytest_gym_eval.provision import GymCheckout
from pytest_gym_eval.replay import (
    Conversation,
    RecordingError,
    ReplayIndex,
    ReplayServer,
    load_recordings,
    recording_turns,
    request_conversation,
    split_turns,
    tools_signature,
)
from tests.support.replay import post

# ---- against Gym's own recordings ----------------------------------------------------------------


def test_replays_gym_mcqa_example_rollouts(gym_checkout: GymCheckout) -> None:
    path = gym_checkout.path / "resources_servers" / "mcqa" / "data" / "example_rollouts.jsonl"
    with jsonlines.open(path) as reader:
        recorded = list(reader.iter(skip_empty=True))
    assert recorded
    with ReplayServer([path]) as server:
        for row in recorded:
            status, answer = post(f"{server.base_url}/responses", row["responses_create_params"])
            assert status == 200
            assert answer["output"] == row["response"]["output"]


def test_every_turn_of_gyms_examples_is_answered_as_gyms_model_servers_send_it(gym_checkout: GymCheckout) -> None:
    """Gym's own code makes the request of every recorded turn of every example shipped with Gym: its agent's
    create-params as ``openai_model`` forwards them to ``/responses``, and Gym's ``ResponsesConverter`` output as
    ``vllm_model`` sends it to ``/chat/completions``. Tagged with its recording's repeat, each is answered with
    that recording's turn (images, tool calls and results, reasoning items, ids and Gym's field defaults
    included)."""
    files = sorted((gym_checkout.path / "resources_servers").glob("*/data/example_rollouts.jsonl"))
    script = Path(__file__).parents[1] / "support" / "gym_requests.py"
    made = subprocess.run(
        [str(gym_checkout.gym_executable.parent / "python"), str(script), *map(str, files)],
        capture_output=True, text=True, check=True, timeout=600,
    )  # fmt: skip
    requests = [json.loads(line) for line in made.stdout.splitlines()]
    recordings, indexes = {}, {}
    for path in files:
        with contextlib.suppress(RecordingError):  # a few examples hold lines the replay refuses
            loaded = load_recordings([path])
            indexes[str(path)] = ReplayIndex(loaded)
            recordings.update({recording.source: recording for recording in loaded})
    checked = {"responses": 0, "chat": 0}
    repeats: dict[str, int] = {}
    for request in requests:
        recording = recordings.get(request["source"])
        if recording is None or "error" in request:
            continue
        index = indexes[request["source"].rsplit(":", 1)[0]]
        if recording.source not in repeats:  # the repeat that replays this recording: its first turn's
            # (an agent may add the first messages itself: they are in the output)
            tools = tools_signature(recording.params.get("tools"))
            first = Conversation(recording_turns(recording)[0][0], (), tools)
            served = {r: index.answer(first, r) for r in range(index.recordings)}
            repeats[recording.source] = next(
                r for r, turn in served.items() if turn is not None and turn.source == recording.source
            )
        repeat = repeats[recording.source]
        end = next(stop for start, stop in split_turns(recording.response["output"]) if start == request["start"])
        for form in ("responses", "chat"):
            if form == "chat" and (recording.params.get("metadata") or {}).get("audio_data"):
                continue  # vllm_model splices this audio after the converter (see test_files_and_audio_...)
            turn = index.answer(request_conversation(request[form], chat=form == "chat"), repeat)
            assert turn is not None, (form, request["source"], request["start"])
            assert (turn.source, list(turn.items)) == (
                recording.source,
                recording.response["output"][request["start"] : end],
            ), (form, request["source"], request["start"])
            checked[form] += 1
    assert checked["responses"] > 1500 and checked["chat"] > 1500, checked
