"""Real Gym handed whole tasks (one input row per task, ``--num-repeats 3``): every rollout comes back to the item
of its own repeat, also when the repeats of a task disagree.

The policy model is the project's replay server used as a plain endpoint (``--gym-model-url``), holding three
different answers per task of Gym's mcqa example: one wrong letter and two right ones, the wrong one at a
different repeat for each task. It answers the k-th request of a conversation with its k-th answer, and with
``--gym-concurrency=1`` Gym sends the repeats of a task in order, so repeat r gets answer r. Rewards come from
Gym's own verifier, read from Gym's own output file, never written here.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from pytest_gym_eval.replay import ReplayServer
from tests.support.junit import junit_rollouts
from tests.support.real_gym import GymExample

REPEATS = 3


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def prompt(row: dict[str, Any]) -> str:
    return str([m for m in row["responses_create_params"]["input"] if m.get("role") == "user"][-1]["content"])


def answer_letters(row: dict[str, Any], task: int) -> list[str]:
    """The letter each repeat's answer gives: the right one, except a wrong one at repeat ``task % REPEATS``."""
    right = row["expected_answer"]
    wrong = next(letter for letter in "ABCDEFGHIJ" if letter != right)
    return [wrong if repeat == task % REPEATS else right for repeat in range(REPEATS)]


@pytest.fixture
def disagreeing_model(gym_example: GymExample, tmp_path: Path) -> tuple[ReplayServer, dict[str, list[str]]]:
    """The replay server with three answers per task (its recordings in repeat order); yields it and, per task
    uuid, the letter answer r gives."""
    rows = {prompt(row): row for row in read_jsonl(gym_example.dataset)}
    letters: dict[str, list[str]] = {}
    recordings = []
    for task, recorded in enumerate(read_jsonl(gym_example.recordings)):
        row = rows[prompt(recorded)]
        letters[row["uuid"]] = answer_letters(row, task)
        for repeat, letter in enumerate(letters[row["uuid"]]):
            copy = json.loads(json.dumps(recorded))
            copy["response"]["output"][-1]["content"][0]["text"] = f"The answer is \\boxed{{{letter}}}"
            copy["_ng_rollout_index"] = repeat
            recordings.append(copy)
    path = tmp_path / "disagreeing_rollouts.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in recordings))
    server = ReplayServer([path], log_path=tmp_path / "model.jsonl")
    server.start()
    yield server, letters  # type: ignore[misc]
    server.stop()


def test_whole_tasks_give_each_item_its_own_rollouts_reward(
    pytester: pytest.Pytester, gym_example: GymExample, disagreeing_model: tuple[ReplayServer, dict[str, list[str]]]
) -> None:
    server, letters = disagreeing_model
    target = pytester.path / "datasets" / "mcqa.jsonl"
    target.parent.mkdir()
    shutil.copy(gym_example.dataset, target)
    result = pytester.runpytest_subprocess(
        f"--gym-checkout={gym_example.checkout}", f"--gym-model-url={server.base_url}", "--gym-model=replay",
        "datasets/mcqa.jsonl", f"--gym-repeats={REPEATS}", "--gym-concurrency=1", "--junitxml=junit.xml",
        "--gym-run-dir=runs", "-p", "no:cacheprovider",
    )  # fmt: skip
    (run_dir,) = (pytester.path / "runs").iterdir()
    # Whole tasks: one input row per task, Gym's rollouts numbered 0..2 per row.
    rows = read_jsonl(run_dir / "gym-input.jsonl")
    assert len(rows) == len(letters) == 5, result.stdout.str()[-3000:]
    uuid_of = {row["_ng_task_index"]: row["uuid"] for row in rows}
    eval_log = (run_dir / "logs" / "gym-eval-run.log").read_text()
    assert "Repeating rows 3 times" in eval_log
    records = read_jsonl(run_dir / "gym-output" / "rollouts.jsonl")
    assert len(records) == len(letters) * REPEATS
    by_pair = {(uuid_of[r["_ng_task_index"]], r["_ng_rollout_index"]): r for r in records}

    rollouts = junit_rollouts(pytester.path / "junit.xml")
    items = {name: values for name, values in rollouts.items() if "task_id" in values}
    assert len(items) == len(letters) * REPEATS
    for name, values in items.items():
        task, repeat = values["task_id"], int(values["repeat"])
        own = by_pair[(task, repeat)]
        assert float(values["reward"]) == own["reward"], name  # the item's reward is its own rollout's
        record_path, _, line = values["record"].rpartition(":")
        pointed = read_jsonl(Path(record_path))[int(line) - 1]
        assert (uuid_of[pointed["_ng_task_index"]], pointed["_ng_rollout_index"]) == (task, repeat), name
        text = own["response"]["output"][-1]["content"][0]["text"]
        assert text.endswith(f"\\boxed{{{letters[task][repeat]}}}"), (name, text)  # repeat r got answer r
    for task in letters:  # the repeats disagree, by Gym's own verifier
        assert {by_pair[(task, repeat)]["reward"] for repeat in range(REPEATS)} == {0.0, 1.0}, task
    passed = sum(1 for values in items.values() if float(values["reward"]) == 1.0)
    result.assert_outcomes(passed=passed, failed=len(items) - passed)
