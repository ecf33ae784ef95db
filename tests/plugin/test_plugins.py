"""The plugins teams already run beside this one, each loaded for real into a pytest session with the stand-in
Gym (the interplay is the plugin's own logic, not Gym's): pytest-timeout, pytest-rerunfailures, pytest-html,
pytest-randomly, pytest-sugar, pytest-cov and ``-p no:terminal``. The real-Gym tier runs pytest-timeout against
a real Gym start-up too (test_real_gym.py)."""

from __future__ import annotations

import html
import json
import re
import xml.etree.ElementTree as ET

import pytest

from pytest_gym_eval.integrations import RERUN_MESSAGE
from tests.support.fakes import FakeGym
from tests.support.junit import junit_rollouts


def rows(rewards: dict[str, float]) -> str:
    return "".join(
        json.dumps({"id": task, "responses_create_params": {"input": f"Q {task}"}, "fake": {"reward": reward}}) + "\n"
        for task, reward in rewards.items()
    )


@pytest.fixture
def mcqa(pytester: pytest.Pytester) -> str:
    (pytester.path / "mcqa.jsonl").write_text(rows({"a": 1.0, "b": 0.0, "c": 1.0}))
    return "mcqa.jsonl"


def outcomes(result: pytest.RunResult) -> dict[str, str]:
    found = {}
    for line in result.outlines:
        match = re.match(r"(PASSED|FAILED|ERROR|RERUN) (\S+)", line)
        if match:
            found.setdefault(match.group(2), []).append(match.group(1))
    return {nodeid: " ".join(seen) for nodeid, seen in found.items()}


def test_pytest_timeout_shorter_than_gyms_start_up_times_only_the_items_call(
    pytester: pytest.Pytester, fake_gym: FakeGym, mcqa: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_GYM_START_DELAY", "3")  # Gym's start-up outlasts the 1 s per-test timeout
    pytester.makeconftest(
        """
import time
def pytest_gym_eval_rollout_passed(item, record, reward, threshold):
    if item.name == "c[r0]":
        time.sleep(30)  # the item's own work hangs: pytest-timeout must stop it
    return None
"""
    )
    result = pytester.runpytest_subprocess(*fake_gym.args, mcqa, "-p", "timeout", "--timeout=1", "-rA")
    assert outcomes(result) == {"mcqa.jsonl::a[r0]": "PASSED", "mcqa.jsonl::b[r0]": "FAILED",
                                "mcqa.jsonl::c[r0]": "FAILED"}  # fmt: skip
    # One timeout, in c[r0]'s hook: never in a wait for Gym.
    result.stdout.fnmatch_lines(["*time.sleep(30)*", "FAILED mcqa.jsonl::c[[]r0[]] - Failed: Timeout (>1.0s) from*"])


def test_pytest_rerunfailures_never_fakes_a_retry_of_a_rollout(
    pytester: pytest.Pytester, fake_gym: FakeGym, mcqa: str
) -> None:
    pytester.makepyfile(
        test_flaky="""
import itertools
calls = itertools.count()
def test_second_time_lucky():
    assert next(calls) > 0
"""
    )
    args = [mcqa, "test_flaky.py", "--reruns=2", "-rA", "--junitxml=junit.xml", "-o", "junit_family=xunit1"]
    result = pytester.runpytest(*fake_gym.args, *args)
    found = outcomes(result)
    assert found["mcqa.jsonl::b[r0]"] == "FAILED"  # once: a rerun would read the same rollout again
    assert found["test_flaky.py::test_second_time_lucky"] == "PASSED"
    assert result.parseoutcomes()["rerun"] == 1  # reruns still work for other tests
    assert result.stdout.str().count(RERUN_MESSAGE) == 1
    cases = ET.parse(pytester.path / "junit.xml").getroot().iter("testcase")
    for case in cases:
        names = [p.get("name") for p in case.iter("property")]
        assert len(names) == len(set(names)), case.get("name")  # no duplicated properties
    assert junit_rollouts(pytester.path / "junit.xml")["b[r0]"]["reward"] == "0.0"


def test_pytest_rerunfailures_notice_is_shown_under_xdist_too(
    pytester: pytest.Pytester, fake_gym: FakeGym, mcqa: str
) -> None:
    """Under pytest-xdist the controller collects nothing and the workers' terminal lines are not shown: the
    controller says it, once, when the workers' collection holds Gym items."""
    result = pytester.runpytest_subprocess(*fake_gym.args, mcqa, "--reruns=2", "-n", "2", "-rA")
    assert outcomes(result)["mcqa.jsonl::b[r0]"] == "FAILED"
    assert result.parseoutcomes().get("rerun", 0) == 0
    assert result.stdout.str().count(RERUN_MESSAGE) == 1
    pytester.makepyfile(test_plain="def test_plain():\n    pass\n")
    plain = pytester.runpytest_subprocess(*fake_gym.args, "test_plain.py", "--reruns=2", "-n", "2")
    assert plain.ret == 0 and RERUN_MESSAGE not in plain.stdout.str()  # no Gym item: nothing to say


def test_pytest_html_shows_rewards_and_the_reward_summary(
    pytester: pytest.Pytester, fake_gym: FakeGym, mcqa: str
) -> None:
    result = pytester.runpytest(*fake_gym.args, mcqa, "--html=report.html", "--gym-min-mean-reward=0.5")
    assert result.ret == 0
    page = (pytester.path / "report.html").read_text()
    # pytest-html 4 keeps its results as JSON in the page's data-jsonblob attribute.
    match = re.search(r'data-jsonblob="([^"]*)"', page)
    assert match is not None
    data = json.loads(html.unescape(match.group(1)))
    assert '<th class="sortable" data-column-type="reward">Reward</th>' in page
    rewards = {test: runs[0]["resultsTableRow"][2] for test, runs in data["tests"].items()}
    assert rewards["mcqa.jsonl::a[r0]"] == '<td class="col-reward">1</td>'
    assert rewards["mcqa.jsonl::b[r0]"] == '<td class="col-reward">0</td>'
    assert rewards["mcqa.jsonl::gym-gate"] == '<td class="col-reward"></td>'
    assert "Gym reward summary" in page
    assert "mean reward 0.67" in page and "gym gates: the gate passes" in page


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["-p", "randomly", "-p", "no:cacheprovider"], id="pytest-randomly"),
        pytest.param(["-p", "sugar"], id="pytest-sugar"),
        pytest.param(["-p", "no:terminal"], id="no-terminal"),
        pytest.param(["--cov=covered", "--cov-report=term"], id="pytest-cov"),
    ],
)
def test_other_plugins_keep_working(pytester: pytest.Pytester, fake_gym: FakeGym, mcqa: str, args: list[str]) -> None:
    pytester.makepyfile(
        covered="def f():\n    return 1\n", test_plain="import covered\ndef test_f():\n    assert covered.f()\n"
    )
    result = pytester.runpytest_subprocess(
        *fake_gym.args, mcqa, "test_plain.py", "--gym-repeats=2", "--gym-min-mean-reward=0.5",
        "--gym-report=report.json", *args,
    )  # fmt: skip
    assert result.ret == 0, result.stdout.str()[-3000:]
    report = json.loads((pytester.path / "report.json").read_text())
    assert sorted((r["task_id"], r["repeat"], r["reward"]) for r in report["rollouts"]) == [
        ("a", 0, 1.0), ("a", 1, 1.0), ("b", 0, 0.0), ("b", 1, 0.0), ("c", 0, 1.0), ("c", 1, 1.0),
    ]  # fmt: skip
    assert report["session"]["exit_status"] == 0 and report["datasets"][0]["verdict"] == "PASS"
    if "no:terminal" not in args:
        result.stdout.fnmatch_lines(["*gym reward summary*"])
