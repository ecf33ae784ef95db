"""Gates on a partial selection say so: a gate judged on a selection by name, marker or last outcome (``-k``,
``--lf``, ``--deselect``, ...) is labelled with it and does not set the exit status (the items' own outcomes do);
a shard's gates are labelled and still decide its job's status. Against the stand-in ``gym``."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from pytest_gym_eval.tasks.selection import Selection
from tests.support.fakes import FakeGym


def write_dataset(pytester: pytest.Pytester, rewards: dict[str, float]) -> str:
    rows = [
        {"id": task, "responses_create_params": {"input": f"Question {task}?"}, "fake": {"reward": reward}}
        for task, reward in rewards.items()
    ]
    (pytester.path / "mcqa.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    return "mcqa.jsonl"


EIGHT = {"x1": 0.5, "x2": 0.5, "x3": 1.0, "x4": 1.0, "x5": 1.0, "x6": 1.0, "x7": 1.0, "x8": 1.0}
"""8 tasks, mean reward 0.875: the gate below passes on all of them, fails on x1 and x2 alone."""
GATE = ["--gym-min-mean-reward=0.8", "--gym-pass-threshold=0.5"]


def verdict_line(result: pytest.RunResult) -> str:
    """The summary's verdict line, with the lines it wraps onto, its spaces collapsed."""
    (start,) = [i for i, line in enumerate(result.outlines) if line.strip().startswith("verdict ")]
    lines = [result.outlines[start]]
    for line in result.outlines[start + 1 :]:
        if not line.startswith("     "):
            break
        lines.append(line)
    return " ".join(" ".join(lines).split())


def test_a_k_selection_labels_the_verdict_and_the_items_decide(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    name = write_dataset(pytester, EIGHT)
    common = [*fake_gym.args, name, *GATE, "--gym-report=report.json", "--junitxml=junit.xml"]
    result = pytester.runpytest(*common, "-k", "x1 or x2", "--gym-markdown=summary.md", "--gym-html=page.html")
    # x1 and x2 pass their threshold (0.5): the session is green, though the gate fails on them alone (0.50 < 0.80).
    assert result.ret == pytest.ExitCode.OK
    assert verdict_line(result).startswith("verdict FAIL (judged on a -k selection: 2 of 8 tasks, not on the dataset")
    result.stdout.fnmatch_lines(["*gym gates: not judged on the whole dataset, the items decide: mcqa.jsonl judged*"])
    report = json.loads((pytester.path / "report.json").read_text())
    (summary,) = report["datasets"]
    assert summary["selection"] == {
        "tasks": 2, "of_tasks": 8, "rollouts": 2, "of_rollouts": 8, "how": "-k", "shard": "", "partial": True,
        "decides": False, "label": "judged on a -k selection: 2 of 8 tasks",
    }  # fmt: skip
    label = "judged on a -k selection: 2 of 8 tasks, not on the dataset"
    assert label in (pytester.path / "summary.md").read_text() and label in (pytester.path / "page.html").read_text()
    suite = ET.parse(pytester.path / "junit.xml").getroot().find("testsuite")
    assert suite is not None
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert props["gym::mcqa.jsonl::selection"] == "judged on a -k selection: 2 of 8 tasks"
    assert props["gym::mcqa.jsonl::gates_decide"] == "false"
    # The whole dataset: judged on all of it, the gate decides, no label.
    whole = pytester.runpytest(*common)
    assert whole.ret == pytest.ExitCode.OK and verdict_line(whole) == "verdict PASS"
    assert "selection" not in json.loads((pytester.path / "report.json").read_text())["datasets"][0]


def test_a_selected_gate_item_on_a_partial_selection_is_skipped_with_the_verdict(
    pytester: pytest.Pytester, fake_gym: FakeGym
) -> None:
    name = write_dataset(pytester, EIGHT)
    result = pytester.runpytest(*fake_gym.args, name, *GATE, "-rs", "-k", "x1 or x2 or gym-gate")
    assert result.ret == pytest.ExitCode.OK
    result.assert_outcomes(passed=2, skipped=1)
    result.stdout.fnmatch_lines(
        ["SKIPPED*judged on a -k selection: 2 of 8 tasks, not the whole dataset*mean reward 0.50*< 0.80: FAIL*"]
    )


def test_last_failed_labels_the_verdict(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    name = write_dataset(pytester, {**EIGHT, "x1": 0.0, "x2": 0.0})
    cache = fake_gym.args.index("no:cacheprovider")  # --lf needs pytest's cache
    args = [*fake_gym.args[: cache - 1], *fake_gym.args[cache + 1 :], name, *GATE]
    first = pytester.runpytest(*args, "--gym-min-mean-reward=0.7")
    assert first.ret == pytest.ExitCode.OK  # mean 0.75: the gate passes; x1 and x2 fail their threshold
    again = pytester.runpytest(*args, "--gym-min-mean-reward=0.7", "--lf")
    # Judged on the two rollouts that failed before, the gate would say 0.00 < 0.70: no verdict on the dataset.
    assert verdict_line(again).startswith("verdict FAIL (judged on a --lf selection: 2 of 8 tasks, not on the dataset")
    assert again.ret == pytest.ExitCode.TESTS_FAILED  # x1 and x2 still fail: the items' own outcomes
    again.stdout.fnmatch_lines(["gym gates: not judged on the whole dataset, the items decide: mcqa.jsonl judged*"])


def test_a_shards_gates_still_decide_and_say_which_shard(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    name = write_dataset(pytester, EIGHT)
    lines = []
    for index in (1, 2):
        result = pytester.runpytest(*fake_gym.args, name, "--gym-min-mean-reward=0.99", f"--gym-shard={index}/2")
        line = verdict_line(result)
        assert line.startswith("verdict") and f"(judged on shard {index}/2: 4 of 8 tasks)" in line
        lines.append((line, result.ret))
    # Every task has a reward below 1 in one shard or the other: that shard's gate fails and sets its status.
    assert {ret for _, ret in lines} >= {pytest.ExitCode.TESTS_FAILED}
    assert all((ret == pytest.ExitCode.OK) == line.startswith("verdict PASS") for line, ret in lines)


def test_a_k_selection_under_xdist_is_labelled_as_in_one_process(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    name = write_dataset(pytester, EIGHT)
    args = [*fake_gym.args, name, *GATE, "-k", "x1 or x2"]
    alone = pytester.runpytest_subprocess(*args)
    spread = pytester.runpytest_subprocess(*args, "-n", "2")
    assert spread.ret == alone.ret == pytest.ExitCode.OK
    assert verdict_line(spread) == verdict_line(alone)
    assert "judged on a -k selection: 2 of 8 tasks" in verdict_line(spread)


@pytest.mark.parametrize(
    ("selection", "label"),
    [
        (Selection(8, 8, 8, 8), "judged on all 8 tasks"),
        (Selection(2, 8, 2, 8, how="-k"), "judged on a -k selection: 2 of 8 tasks"),
        (Selection(8, 8, 8, 24, how="-k"), "judged on a -k selection: 8 of 8 tasks, 8 of 24 rollouts"),
        (Selection(4, 8, 4, 8, shard="2/2"), "judged on shard 2/2: 4 of 8 tasks"),
        (
            Selection(1, 8, 1, 8, how="--lf and -k", shard="2/2"),
            "judged on a --lf and -k selection of shard 2/2: 1 of 8 tasks",
        ),
        (Selection(3, 8, 3, 8, how="a selection"), "judged on a selection: 3 of 8 tasks"),
    ],
)  # fmt: skip
def test_selection_labels(selection: Selection, label: str) -> None:
    assert selection.describe() == label
    assert selection.biased == bool(selection.how)


def test_last_failed_with_only_the_gate_failed_skips_it(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    name = write_dataset(pytester, {"x1": 0.5, "x2": 0.5})
    cache = fake_gym.args.index("no:cacheprovider")  # --lf needs pytest's cache
    args = [*fake_gym.args[: cache - 1], *fake_gym.args[cache + 1 :], name, *GATE, "-rs"]
    first = pytester.runpytest(*args)
    first.assert_outcomes(passed=2, failed=1)  # every rollout passes its threshold; the gate fails (0.50 < 0.80)
    again = pytester.runpytest(*args, "--lf")
    # --lf selects the gate item alone: nothing to judge it on, so it is no failure of the dataset either.
    again.assert_outcomes(skipped=1, deselected=2)
    again.stdout.fnmatch_lines(["SKIPPED*judged on a --lf selection: 0 of 2 tasks, not the whole dataset*"])
