"""The Python examples of docs/hooks-and-api.md that are lines of a test's body (fragments) run as written against
recorded rollouts: the tool-call matchers' assertion against a recording of those calls
(tests/support/recordings/tool_calls_rollouts.jsonl, written for it) with the page's explanation of a mismatch, and
the reason example against the mcqa example's recordings. The page's test functions run against real Gym in
tests/real_gym/test_docs_examples_real_gym.py; this also checks every block is one of the two."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from typing import Any

import pytest

from pytest_gym_eval import Rollout, call, expect_tool_calls
from pytest_gym_eval.outcomes.tool_matchers import explain
from tests.support import PROJECT_EXAMPLE, SUPPORT
from tests.support.docs_blocks import HOOKS_AND_API, Block, python_blocks

TOOL_CALLS = SUPPORT / "recordings" / "tool_calls_rollouts.jsonl"


def recorded(path: Any) -> list[Rollout]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return [
        Rollout.from_record(json.loads(line), task_id=str(n), repeat=0, status="passed", reward=1.0)
        for n, line in enumerate(lines)
    ]


def fragment(section: str) -> Block:
    (block,) = [b for b in python_blocks() if b.kind == "fragment" and b.section == section]
    return block


def test_every_block_is_run_by_one_of_the_docs_tests() -> None:
    kinds = [(block.section, block.kind) for block in python_blocks()]
    assert [kind for _, kind in kinds].count("fragment") == 2, kinds  # the two below
    assert {kind for _, kind in kinds} == {"hooks", "tests", "fragment"}


def test_the_tool_call_matchers_example_holds_on_a_recording_of_those_calls() -> None:
    block = fragment("Tool-call matchers")
    first, second = recorded(TOOL_CALLS)
    exec(compile(block.code, f"{HOOKS_AND_API}:{block.line}", "exec"), {"rollout": first})  # passes
    with pytest.raises(AssertionError):
        exec(compile(block.code, f"{HOOKS_AND_API}:{block.line}", "exec"), {"rollout": second})  # a third call


def test_the_explanation_the_page_shows_is_the_one_pytest_gives() -> None:
    page = HOOKS_AND_API.read_text(encoding="utf-8")
    section = page[page.index("### Tool-call matchers") : page.index("### Custom metrics")]
    (shown,) = re.findall(r"^```text\n(.*?)^```$", section, flags=re.MULTILINE | re.DOTALL)
    _, second = recorded(TOOL_CALLS)
    expectation = expect_tool_calls(  # the page's, expecting bob@example.com second, as its text says
        call("get_weather", {"city": "Paris"}), call("send_email", {"to": "bob@example.com"}), ordered=True, only=True
    )
    assert second.tool_calls != expectation
    assert [line.removeprefix("E   ") for line in shown.splitlines()] == explain(expectation, second.tool_calls)


def test_the_reason_example_records_its_metric_with_its_reason() -> None:
    block = fragment("Custom metrics")
    answers = recorded(PROJECT_EXAMPLE / "recordings" / "mcqa_rollouts.jsonl")
    for answer in answers:
        got: list[tuple[str, float, str | None]] = []
        rollout = replace(answer, recorder=lambda *given, into=got: into.append(given))
        exec(compile(block.code, f"{HOOKS_AND_API}:{block.line}", "exec"), {"re": re, "gym_rollout": rollout})
        sentences = len(re.findall(r"[.!?](\s|$)", answer.output_text))
        assert got == [("terse", float(sentences <= 1), f"{sentences} sentences, not 1")]
