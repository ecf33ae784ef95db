"""Every test function of docs/hooks-and-api.md runs as written against real Gym and recorded answers: the page's
blocks that define tests become test modules of a project beside the mcqa example's dataset (``../datasets/mcqa.jsonl``
from a ``tests/`` folder, as the page writes it), its hooks block the project's conftest, and the session, attached
to the tier's Gym, replays the mcqa example's answers and the weather answers written for the page's weather
examples (examples/python-tests/recordings). The page's fragments (lines of a test's body) run in
tests/unit/test_docs_examples.py."""

from __future__ import annotations

import json
import shutil

import pytest

from tests.support import PROJECT_EXAMPLE
from tests.support.children import outcomes
from tests.support.docs_blocks import PRELUDE, python_blocks, weather_tool
from tests.support.real_gym import WEATHER, SharedGym

MCQA_RECORDINGS = PROJECT_EXAMPLE / "recordings" / "mcqa_rollouts.jsonl"


def test_every_test_function_of_the_page_runs_against_the_recordings(
    pytester: pytest.Pytester, shared_gym: SharedGym
) -> None:
    blocks = python_blocks()
    shutil.copytree(PROJECT_EXAMPLE / "datasets", pytester.path / "datasets")
    (pytester.path / "tests").mkdir()
    modules = {}
    for block in blocks:
        if block.kind == "hooks":
            (pytester.path / "conftest.py").write_text(block.code)
        elif block.kind == "tests":
            name = f"test_docs_line_{block.line}"
            (pytester.path / "tests" / f"{name}.py").write_text(PRELUDE + weather_tool(blocks) + "\n\n" + block.code)
            modules[name] = block
    assert len(modules) == 6, sorted(modules)  # every block that defines tests
    result = pytester.runpytest_subprocess(
        *shared_gym.args, f"--gym-replay={MCQA_RECORDINGS}", f"--gym-replay={WEATHER}", "--gym-report=r.json",
        "-rA", "-p", "no:cacheprovider", "tests",
    )  # fmt: skip
    found = outcomes(result)
    text = result.stdout.str()
    assert "error" not in result.parseoutcomes(), text[-4000:]  # no collection error, no rollout without an answer
    ran = {nodeid.split("::")[0].removeprefix("tests/").removesuffix(".py") for nodeid in found}
    assert ran == set(modules), (sorted(ran), text[-4000:])  # every block's tests ran
    assert "no recorded answer" not in text
    by_test = {}
    for nodeid, word in found.items():
        by_test.setdefault(nodeid.split("::")[1].partition("[")[0], set()).add(word)
    # The weather examples: the Python-built dataset's 3 cases x 2 repeats and the on-demand row, all answered
    # with a get_weather call.
    assert by_test["test_asks_for_the_weather"] == {"PASSED"}
    assert by_test["test_the_agent_asks_for_the_weather"] == {"PASSED"}
    report = json.loads((pytester.path / "r.json").read_text())
    weather = next(d for d in report["datasets"] if d["dataset"].endswith(":weather-cases"))
    assert (weather["rollouts"], weather["mean_reward"]["estimate"]) == (3, 1.0)  # its own 1 repeat counts
    assert "not counted 3 rollouts of test functions beyond the dataset's 1 repeat" in text
    assert weather["metrics"]["called_tool"]["estimate"] == 1.0
    # The mcqa examples: every recorded answer is boxed and under 512 output tokens.
    assert by_test["test_boxed_and_short"] == {"PASSED"}
    mcqa = next(d for d in report["datasets"] if d["dataset"] == "datasets/mcqa.jsonl")
    assert {"boxed", "output_tokens", "terse"} <= set(mcqa["metrics"]), mcqa["metrics"]
