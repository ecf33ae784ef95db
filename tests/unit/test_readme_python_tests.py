"""The README's "Writing tests in Python" section and examples/python-tests agree: each Python block of the section
is a verbatim excerpt of the example's test file (which .ci/run runs against real Gym, checking its outcome), and the
section's pytest command is the one the example's run.sh and README run."""

from __future__ import annotations

import re

from tests.support import ROOT

EXAMPLE = ROOT / "examples" / "python-tests"


def section(text: str, title: str) -> str:
    """The Markdown section ``## <title>`` of ``text``, up to the next ``## `` heading."""
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def blocks(text: str, language: str) -> list[str]:
    """The fenced code blocks of ``text`` opened with ````` ```<language> ````` (``""``: no language)."""
    found = []
    for opened, body in re.findall(r"^```(\w*)\n(.*?)^```$", text, flags=re.MULTILINE | re.DOTALL):
        if opened == language:  # each fence pairs with the next: a closing fence never opens a block
            found.append(body)
    return found


def test_each_python_block_of_the_readme_section_is_in_the_example() -> None:
    readme = section((ROOT / "README.md").read_text(encoding="utf-8"), "Writing tests in Python")
    example = (EXAMPLE / "test_weather_agent.py").read_text(encoding="utf-8")
    python = blocks(readme, "python")
    assert len(python) == 3
    for block in python:
        assert block in example, block
    # What the section shows: a Python-built dataset, a test over its rollouts, a gate beside the metric, the
    # tool-call matchers, a soft expectation and a metric with a reason.
    for name in ("Dataset(", "gym_rollouts", "gym_rollout", "min_metric=", "expect_tool_calls(", "call(",
                 ".expect(", "record_metric(", "reason="):  # fmt: skip
        assert name in "".join(python), name


def test_the_readme_the_example_readme_and_run_sh_run_one_command() -> None:
    command = re.compile(r"^pytest (--gym-.*)$", re.MULTILINE)
    readme = section((ROOT / "README.md").read_text(encoding="utf-8"), "Writing tests in Python")
    (in_readme,) = command.findall("".join(blocks(readme, "")))
    (in_example,) = command.findall("".join(blocks((EXAMPLE / "README.md").read_text(encoding="utf-8"), "")))
    (in_run_sh,) = re.findall(r'pytest" (--gym-.*) "\$@"$', (EXAMPLE / "run.sh").read_text(), re.MULTILINE)
    assert in_readme == in_example == in_run_sh
    assert in_readme == "--gym-replay=recordings/weather_rollouts.jsonl"
