"""pytest's FAILURES section in linear time (:class:`finish.TeardownReportIndex`): the same text, without one scan of
every report per failure."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.support.fakes import FakeGym

COUNTING_CONFTEST = """
import os

import pytest

from pytest_gym_eval.session.finish import index_teardown_reports


@pytest.hookimpl(trylast=True)
def pytest_configure(config):
    # Count the reporter's scans of every passed setup and teardown report (getreports(""): one per failure in
    # pytest's own FAILURES section), into the file the test names.
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    original = reporter.getreports

    def counting(name):
        if name == "":
            with open(os.environ["SCANS_FILE"], "a") as out:
                out.write("scan\\n")
        return original(name)

    reporter.getreports = counting
    if os.environ.get("INDEXED"):
        index_teardown_reports(reporter)
"""

TESTS = """
import pytest


@pytest.fixture
def noisy(request):
    yield
    print(f"teardown of {request.node.name}")


@pytest.mark.parametrize("i", range(12))
def test_it(noisy, i):
    print(f"call of {i}")
    assert i % 3, f"failure {i}"
"""


def failures_section(text: str) -> str:
    """The FAILURES section of a pytest run's output."""
    return re.search(r"=+ FAILURES =+\n(.*?)\n=+ short test summary", text, re.S).group(1)  # type: ignore[union-attr]


def scans(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def test_the_index_gives_pytests_failures_section_unchanged_without_a_scan_per_failure(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makeconftest(COUNTING_CONFTEST)
    pytester.makepyfile(test_many=TESTS)
    sections = {}
    for indexed in (False, True):
        scans_file = pytester.path / f"scans-{indexed}.txt"
        monkeypatch.setenv("SCANS_FILE", str(scans_file))
        monkeypatch.setenv("INDEXED", "1" if indexed else "")
        result = pytester.runpytest("-p", "no:cacheprovider", "-rf")
        result.assert_outcomes(passed=8, failed=4)
        sections[indexed] = failures_section(result.stdout.str())
        assert scans(scans_file) == (0 if indexed else 4)
    assert sections[True] == sections[False]
    assert "teardown of test_it[3]" in sections[True]  # the teardown sections are there, each under its failure
    assert sections[True].index("teardown of test_it[3]") < sections[True].index("failure 6")


def test_a_gym_session_indexes_its_failures_teardown_reports(
    pytester: pytest.Pytester, fake_gym: FakeGym, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makeconftest(COUNTING_CONFTEST)
    question = {"input": [{"role": "user", "content": "?"}]}
    rows = [{"id": f"t{i}", "responses_create_params": question, "fake": {"reward": i % 2}} for i in range(6)]
    (pytester.path / "mcqa.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    scans_file = pytester.path / "scans.txt"
    monkeypatch.setenv("SCANS_FILE", str(scans_file))
    result = pytester.runpytest(*fake_gym.args, "mcqa.jsonl")
    result.assert_outcomes(passed=3, failed=3)
    result.stdout.fnmatch_lines(["*= FAILURES =*"])
    assert scans(scans_file) == 0
