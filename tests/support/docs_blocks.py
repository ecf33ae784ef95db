"""The Python examples of a docs page as code: its fenced ``python`` blocks, sorted into what runs where (a conftest's
hooks, test modules, fragments of a test's body), for the tests that run every example as written against
recordings (tests/unit/test_docs_examples.py, tests/real_gym/test_docs_examples_real_gym.py)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from tests.support import ROOT

HOOKS_AND_API = ROOT / "docs" / "hooks-and-api.md"

PRELUDE = """import re

import pytest

from pytest_gym_eval import Dataset, Rollout, call, expect_tool_calls

"""
"""What every test module made of a block starts with: the imports the page's blocks take for granted."""


@dataclass(frozen=True)
class Block:
    """One fenced block: its ``code``, the ``line`` of its opening fence (1-based) and the ``section`` heading above."""

    code: str
    line: int
    section: str

    @property
    def kind(self) -> str:
        """``hooks`` (a conftest's hook functions), ``tests`` (a module defining test functions), or ``fragment``
        (lines of a test's body, which run against a rollout given to them)."""
        if "def pytest_gym_eval_" in self.code:
            return "hooks"
        if re.search(r"^def test_", self.code, re.MULTILINE):
            return "tests"
        return "fragment"


def python_blocks(page: Path = HOOKS_AND_API) -> list[Block]:
    """Every fenced ``python`` block of ``page`` (at any indentation: a block inside a list item is dedented), in
    page order."""
    found: list[Block] = []
    lines = page.read_text(encoding="utf-8").splitlines()
    section = ""
    index = 0
    while index < len(lines):
        text = lines[index]
        if text.startswith("#"):
            section = text.lstrip("#").strip()
        fence = re.match(r"^(\s*)```(\w*)$", text)
        if fence is None:
            index += 1
            continue
        indent, language = fence.groups()
        end = next(i for i in range(index + 1, len(lines)) if lines[i].strip() == "```")
        if language == "python":
            body = [line[len(indent) :] if line.startswith(indent) else line for line in lines[index + 1 : end]]
            found.append(Block("\n".join(body) + "\n", index + 1, section))
        index = end + 1
    return found


def weather_tool(blocks: list[Block]) -> str:
    """The page's ``WEATHER = {...}`` definition (the get_weather tool), which other blocks use."""
    for block in blocks:
        if found := re.search(r"^WEATHER = \{.*?^\}\n", block.code, re.MULTILINE | re.DOTALL):
            return found.group(0)
    raise AssertionError("no WEATHER = {...} block on the page")
