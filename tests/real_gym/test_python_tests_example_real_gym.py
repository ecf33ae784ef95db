"""examples/python-tests, run as its README says, attached to the tier's Gym (whose replay model serves the example's
recordings): its test function passes on each of its 4 Python-built cases, the mark's gate on ``looked_up`` passes at
0.75, the session exits 0, and the reason of the one rollout that called no tool reaches the JSON report and the
Markdown summary's "Why" table. (.ci/run runs the example with its own Gym through run.sh and checks its report.)"""

from __future__ import annotations

import json
import shutil

import pytest

from tests.support import ROOT
from tests.support.children import outcomes
from tests.support.real_gym import WEATHER, SharedGym

EXAMPLE = ROOT / "examples" / "python-tests"


def test_the_python_tests_example_gives_its_documented_outcome(
    pytester: pytest.Pytester, shared_gym: SharedGym
) -> None:
    for name in ("pytest.ini", "test_weather_agent.py"):
        shutil.copy(EXAMPLE / name, pytester.path / name)
    result = pytester.runpytest_subprocess(
        *shared_gym.args, f"--gym-replay={WEATHER}", "--gym-report=r.json", "--gym-markdown=summary.md", "-rA",
        "-p", "no:cacheprovider",
    )  # fmt: skip
    test = "test_weather_agent.py::test_looks_up_each_city_it_is_asked_about"
    cases = ("paris", "oslo", "rome-milan", "outside")
    assert outcomes(result) == {f"{test}[{case}-r0]": "PASSED" for case in cases}, result.stdout.str()[-3000:]
    assert result.ret == 0
    report = json.loads((pytester.path / "r.json").read_text())
    (dataset,) = report["datasets"]
    (gate,) = dataset["gates"]
    assert (dataset["dataset"], dataset["rollouts"], dataset["mean_reward"]["estimate"]) == (
        "test_weather_agent.py:weather-cases", 4, 0.75,
    )  # fmt: skip
    assert (gate["label"], gate["verdict"], gate["source"]) == ("metric looked_up >= 0.70", "PASS", "test mark")
    assert dataset["metrics"]["names_every_city"]["estimate"] == 1.0  # the soft expectation held on every case
    reasons = {r["nodeid"].rpartition("::")[2]: r.get("metric_reasons") for r in report["rollouts"]}
    said = "no tool call; it answered 'Which city are you in? Tell me and I will look up its weather.'"
    assert reasons == {"paris[r0]": None, "oslo[r0]": None, "rome-milan[r0]": None, "outside[r0]": {"looked_up": said}}
    markdown = (pytester.path / "summary.md").read_text()
    assert f"| `test_weather_agent.py:weather-cases::outside[r0]` | 0.00 | looked_up = 0 ({said}) |" in markdown
