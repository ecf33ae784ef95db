"""The README's "Writing tests in Python" section and examples/python-tests agree: each Python block of the section
is a verbatim excerpt of the example's test file (which .ci/run runs against real Gym), and the section's pytest
command is the one the example's run.sh and README run."""

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
    return re.findall(rf"^```{language}\n(.*?)^```$", text, flags=re.MULTILINE | re.DOTALL)


def test_each_python_block_of_the_readme_section_is_in_the_example() -> None:
    readme = section((ROOT / "README.md").read_text(encoding="utf-8"), "Writing tests in Python")
    example = (EXAMPLE / "test_mcqa_answers.py").read_text(encoding="utf-8")
    python = blocks(readme, "python")
    assert len(python) == 2
    for block in python:
        assert block in example, block
    for name in ("gym_rollouts", "gym_rollout", "record_metric", "gym_run_row"):  # the three capabilities
        assert name in "".join(python)


def test_the_readme_the_example_readme_and_run_sh_run_one_command() -> None:
    command = re.compile(r"^pytest (--gym-.*)$", re.MULTILINE)
    readme = section((ROOT / "README.md").read_text(encoding="utf-8"), "Writing tests in Python")
    (in_readme,) = command.findall("".join(blocks(readme, "")))
    (in_example,) = command.findall("".join(blocks((EXAMPLE / "README.md").read_text(encoding="utf-8"), "")))
    (in_run_sh,) = re.findall(r'pytest" (--gym-.*) "\$@"$', (EXAMPLE / "run.sh").read_text(), re.MULTILINE)
    assert in_readme == in_example == in_run_sh
    assert "--gym-min-metric=boxed:0.9" in in_readme
