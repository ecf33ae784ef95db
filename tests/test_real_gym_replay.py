"""Replay is exact, against real Gym: Gym's circle_count example, whose rows differ only in their image.

Rows 2 and 5 of ``resources_servers/circle_count/data/example.jsonl`` ask the same question with the same
instruction about two different images. Expected rewards are never written here: they come from the recordings
(paired with their rows by their raw request) and from Gym's own ``gym eval reverify`` of the recorded answers.
"""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from conftest import GymExample, SharedGym, reverify
from pytest_gym_eval.dataset import row_digest
from pytest_gym_eval.plan import REPEAT_TAG
from pytest_gym_eval.provision import GymCheckout
from pytest_gym_eval.replay import explain_unmatched

pytestmark = pytest.mark.gym


@pytest.fixture(scope="module")
def image_example(gym_examples: dict[str, GymExample]) -> GymExample:
    return gym_examples["circle_count"]


@pytest.fixture(scope="module")
def image_verdicts(
    gym_checkout: GymCheckout, image_example: GymExample, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, float]:
    """Gym's verifier on each recorded answer: task id -> reward (circle_count does not declare its verifier
    stateless, so Gym is told to reverify anyway; it only parses the answer's ``\\boxed{}``)."""
    return reverify(gym_checkout, image_example, tmp_path_factory.mktemp("reverify-images"), force=True)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def raw_input(row: dict[str, Any]) -> str:
    """A row's (or recording's) request input as canonical JSON: how the test pairs them, without the replay's
    own normalisation."""
    return json.dumps(row["responses_create_params"]["input"], sort_keys=True)


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
    """node name -> (task id, reward) from the JUnit XML's testcase properties."""
    found = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        props = {p.get("name"): p.get("value") for p in case.iter("property")}
        reward = props.get("reward")
        found[case.get("name", "")] = (props["task_id"], None if reward is None else float(reward))
    return found


def served(replay_log: Path, example: GymExample) -> list[tuple[str, object, int]]:
    """(task id, repeat tag, recording line) of every answered request of ``example``'s rows in a replay log."""
    tasks = {raw_input(row): row_digest(row)[:12] for row in read_jsonl(example.dataset)}
    answers = []
    for entry in read_jsonl(replay_log):
        request = entry.get("request") or {}
        task = tasks.get(json.dumps(request.get("input"), sort_keys=True)) if isinstance(request, dict) else None
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
    assert expected[task][1] == image_verdicts[task] != expected[other][1]  # the two answers score differently

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
        if isinstance(entry.get("request"), dict) and entry["request"].get("input") is not None
        and raw_input({"responses_create_params": entry["request"]}) == raw_input(fifth)
    )  # fmt: skip
    lines = image_example.recordings.read_text().splitlines(keepends=True)
    del lines[expected[task][0] - 1]
    without = pytester.path / "without_row_5_rollouts.jsonl"
    without.write_text("".join(lines))
    message = explain_unmatched(request, [without])
    assert message is not None and "\n" not in message and len(message) < 400, message
    line = [raw_input(json.loads(text)) for text in lines].index(raw_input(second)) + 1
    assert message.startswith(
        f"no recorded answer for this conversation: it departs from the closest recording ({without}:{line}) at "
        'input[1] (user message): request has "[image sha256:'
    ), message
    assert message.endswith('How many yellow circles are in the image?" (4 recordings loaded)'), message


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
    # Each task's one recording answers both of its repeats (repeat r gets recording r mod 1).
    answers = served(shared_gym.replay_log, image_example)
    assert {(task, "1") for task in expected} <= {(task, repeat) for task, repeat, _ in answers}
    assert all(line == expected[task][0] for task, _, line in answers)
