"""Replay is exact, against real Gym: Gym's circle_count example, whose rows differ only in their image.

Rows 2 and 5 of ``resources_servers/circle_count/data/example.jsonl`` ask the same question with the same
instruction about two different images. Expected rewards are never written here: they come from the recordings
(paired with their rows by their raw request) and from Gym's own verifier asked about the recorded answers.
"""

from __future__ import annotations

import json
import re
import shutil
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from pytest_gym_eval.replay import explain_unmatched
from pytest_gym_eval.tasks.dataset import row_digest
from pytest_gym_eval.tasks.plan import REPEAT_TAG
from tests.support.junit import junit_rollouts
from tests.support.real_gym import GymExample, SharedGym


@pytest.fixture(scope="module")
def image_example(gym_examples: dict[str, GymExample]) -> GymExample:
    return gym_examples["circle_count"]


@pytest.fixture(scope="module")
def image_verdicts(shared_gym: SharedGym, image_example: GymExample) -> dict[str, float]:
    """Gym's verifier on each recorded answer: task id -> reward, from the shared Gym's circle_count resources
    server (``POST /verify`` with the row and the recorded response, as Gym's agent calls it; found through the
    head server's ``/server_instances``). Asking the running server spares a second Gym start, whose Ray
    start-up times out on a loaded machine; ``gym eval reverify`` would also refuse this server without
    ``force`` (it does not declare its verifier stateless)."""
    instances = http_json(f"http://{shared_gym.head_server}/server_instances")
    (server,) = [i for i in instances if i.get("name") == image_example.name and i.get("port")]
    rows = {raw_input(row): row for row in read_jsonl(image_example.dataset)}
    verdicts = {}
    for recording in read_jsonl(image_example.recordings):
        row = rows[raw_input(recording)]
        body = {
            **row,
            "responses_create_params": recording["responses_create_params"],
            "response": recording["response"],
        }
        verified = http_json(f"http://{server.get('host') or '127.0.0.1'}:{server['port']}/verify", body)
        verdicts[row_digest(row)[:12]] = float(verified["reward"])
    assert len(verdicts) == 5
    return verdicts


def http_json(url: str, body: object = None) -> Any:
    """GET (or POST ``body`` as JSON to) a loopback URL; the decoded JSON answer."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(request, timeout=60) as answer:
        return json.load(answer)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def raw_input(row: dict[str, Any]) -> str:
    """A row's (or recording's, or request's) last user message as canonical JSON: how the test pairs them,
    without the replay's own normalisation (a recording adds ``"type": "message"`` to each input item and lists
    a content part's keys in another order)."""
    messages = row["responses_create_params"]["input"]
    return json.dumps([m for m in messages if m.get("role") == "user"][-1]["content"], sort_keys=True)


def recorded(example: GymExample) -> dict[str, tuple[int, float]]:
    """task id -> (line of its recording, recorded reward), one recording per row."""
    lines = {raw_input(r): (number, float(r["reward"])) for number, r in enumerate(read_jsonl(example.recordings), 1)}
    return {row_digest(row)[:12]: lines[raw_input(row)] for row in read_jsonl(example.dataset)}


def copy_dataset(pytester: pytest.Pytester, example: GymExample) -> str:
    target = pytester.path / "datasets" / f"{example.name}.jsonl"
    target.parent.mkdir(exist_ok=True)
    shutil.copy(example.dataset, target)
    return f"datasets/{example.name}.jsonl"


def junit_rewards(path: Path) -> dict[str, tuple[str, float | None]]:
    """node name -> (task id, reward) from the JUnit XML's per-rollout values (either family)."""
    found = {}
    for name, values in junit_rollouts(path).items():
        reward = values.get("reward")
        found[name] = (values["task_id"], None if reward is None else float(reward))
    return found


def served(replay_log: Path, example: GymExample) -> list[tuple[str, object, int]]:
    """(task id, repeat tag, recording line) of every answered request of ``example``'s rows in a replay log."""
    tasks = {raw_input(row): row_digest(row)[:12] for row in read_jsonl(example.dataset)}
    answers = []
    for entry in read_jsonl(replay_log):
        request = entry.get("request") or {}
        asked = isinstance(request, dict) and isinstance(request.get("input"), list)
        task = tasks.get(raw_input({"responses_create_params": request})) if asked else None
        if task is not None and entry["status"] == 200:
            source = str(entry["answer"]["recording"])
            assert source.rsplit(":", 1)[0] == str(example.recordings)
            answers.append((task, (request.get("metadata") or {}).get(REPEAT_TAG), int(source.rsplit(":", 1)[1])))
    return answers


def test_a_row_alone_gets_its_own_images_answer(
    pytester: pytest.Pytester, shared_gym: SharedGym, image_example: GymExample, image_verdicts: dict[str, float]
) -> None:
    rows = read_jsonl(image_example.dataset)
    second, fifth = rows[1], rows[4]
    # The premise: the two rows ask the same question with the same instruction, about different images.
    question = next(m for m in fifth["responses_create_params"]["input"] if m["role"] == "user")["content"]
    assert [part["type"] for part in question] == ["input_image", "input_text"]
    assert second["responses_create_params"]["input"][0] == fifth["responses_create_params"]["input"][0]
    assert second["responses_create_params"]["input"][1]["content"][1] == question[1]
    assert second["responses_create_params"]["input"][1]["content"][0]["image_url"] != question[0]["image_url"]
    task, other = row_digest(fifth)[:12], row_digest(second)[:12]
    expected = recorded(image_example)
    assert expected[task][1] == image_verdicts[task] == 1.0
    # ... and their recorded answers count differently, so row 2's answer would score 0 on row 5.
    answers = [
        recording["response"]["output"][-1]["content"][0]["text"] for recording in read_jsonl(image_example.recordings)
    ]
    boxed = [re.findall(r"\\boxed\{(\d+)\}", answers[expected[t][0] - 1])[-1] for t in (task, other)]
    assert boxed[0] != boxed[1], boxed

    dataset = copy_dataset(pytester, image_example)
    result = pytester.runpytest(
        *shared_gym.args, f"--gym-replay={image_example.recordings}", dataset, "-k", task,
        "--junitxml=junit.xml", "--gym-run-dir=runs",
    )  # fmt: skip
    assert list(junit_rewards(pytester.path / "junit.xml").values()) == [(task, expected[task][1])]
    result.stdout.fnmatch_lines(["verifier flips against the recording: none"])
    (run_dir,) = (pytester.path / "runs").iterdir()
    (row,) = read_jsonl(run_dir / "gym-input.jsonl")
    assert row["responses_create_params"]["metadata"] == {REPEAT_TAG: "0"}
    (record,) = read_jsonl(run_dir / "gym-output" / "rollouts.jsonl")  # what the flip check reads back
    assert record["responses_create_params"]["metadata"] == {REPEAT_TAG: "0"}
    assert {(t, line) for t, _, line in served(shared_gym.replay_log, image_example) if t == task} == {
        (task, expected[task][0])
    }

    # Without row 5's recording, the replay model's 404 for the request Gym sent says which image differs from
    # the closest recording: row 2's, the same question about another image.
    (request, *_) = (
        entry["request"]
        for entry in read_jsonl(shared_gym.replay_log)
        if isinstance(entry.get("request"), dict) and isinstance(entry["request"].get("input"), list)
        and raw_input({"responses_create_params": entry["request"]}) == raw_input(fifth)
    )  # fmt: skip
    lines = image_example.recordings.read_text().splitlines(keepends=True)
    del lines[expected[task][0] - 1]
    without = pytester.path / "without_row_5_rollouts.jsonl"
    without.write_text("".join(lines))
    message = explain_unmatched(request, [without])
    assert message is not None and "\n" not in message and len(message) - len(str(without)) < 300, message
    line = [raw_input(json.loads(text)) for text in lines].index(raw_input(second)) + 1
    assert message.startswith(
        f"no recorded answer: the conversation departs from the closest recording ({without}:{line}) at "
        'input[1] (user message): request has "[image sha256:'
    ), message
    assert ', recording has "[image sha256:' in message and message.endswith(" (4 recordings loaded)"), message


def test_every_image_row_and_repeat_replays_its_own_recording(
    pytester: pytest.Pytester, shared_gym: SharedGym, image_example: GymExample, image_verdicts: dict[str, float]
) -> None:
    expected = recorded(image_example)
    dataset = copy_dataset(pytester, image_example)
    result = pytester.runpytest(
        *shared_gym.args, f"--gym-replay={image_example.recordings}", dataset, "--gym-repeats=2",
        "--junitxml=junit.xml",
    )  # fmt: skip
    rewards = junit_rewards(pytester.path / "junit.xml")
    assert len(rewards) == 10
    for name, (task, reward) in rewards.items():
        assert reward == expected[task][1] == image_verdicts[task], name
    result.stdout.fnmatch_lines(["verifier flips against the recording: none"])
    # Each task's one recording answers both of its repeats. (With one recording per conversation Gym is handed
    # whole tasks, --num-repeats 2, and the rows carry no repeat tag; the replay model needs none.)
    answers = served(shared_gym.replay_log, image_example)
    answered = Counter(task for task, _, _ in answers)
    assert all(answered[task] >= 2 for task in expected), answered
    assert all(line == expected[task][0] for task, _, line in answers)
