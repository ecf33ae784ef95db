"""The JUnit XML file is valid for its ``junit_family`` (the project's schemas in tests/support) however the session
selected its items and however it ended: a selection that skips or deselects the ``gym-gate`` item or rollouts, a
quarantine, a policy comparison, ``-x``, ``--lf``, Ctrl-C during a test's call, Gym that will not start, a crashed
pytest-xdist worker. Against the stand-in ``gym``."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from pytest_gym_eval.reporting.junit_values import parse_system_out
from tests.support.fakes import FakeGym
from tests.support.junit import validate_junit

ROWS = {"a": 1.0, "b": 1.0, "c": 0.0}

INTERRUPT_IN_A_CALL = """
def pytest_gym_eval_rollout_passed(item, record, reward, threshold):
    if item.nodeid.endswith("::a[r0]"):
        raise KeyboardInterrupt  # Ctrl-C while a[r0]'s call phase runs (its setup has reported)
"""

WORKER_CRASH_IN_C = """
import os


def pytest_runtest_call(item):
    if item.nodeid.endswith("::c[r0]"):
        os._exit(3)  # the xdist worker running c[r0] dies
"""


@dataclass(frozen=True)
class Case:
    """One way a session selects its items or ends: its pytest ``args``, a ``conftest`` text, ``env`` variables;
    ``first``: the args of a session run before it (``--lf`` reads its failures); ``replay``: pass the stand-in's
    ``--gym-replay`` (a policy comparison names its policies instead)."""

    args: tuple[str, ...]
    conftest: str = ""
    env: dict[str, str] = field(default_factory=dict)
    first: tuple[str, ...] | None = None
    replay: bool = True


CASES = {
    "deselect one rollout": Case(("--deselect", "mcqa.jsonl::a[r0]")),
    "-k gym-gate": Case(("-k", "gym-gate")),
    "-k one row": Case(("-k", "b",)),
    "-k one row and the gate": Case(("-k", "b or gym-gate")),
    "-x": Case(("-x",)),
    "--lf": Case(("--lf",), first=()),
    "quarantine": Case(("--gym-quarantine=quarantine.txt",)),
    "policies": Case(("--gym-policy=one=replay:{recording}", "--gym-policy=two=replay:{recording}"), replay=False),
    "Ctrl-C in a call": Case((), conftest=INTERRUPT_IN_A_CALL),
    "Ctrl-C in a call, deselected rollout": Case(("--deselect", "mcqa.jsonl::b[r0]"), conftest=INTERRUPT_IN_A_CALL),
    "Gym will not start": Case((), env={"FAKE_GYM_START": "fail"}),
    "xdist worker crash": Case(("-n", "2"), conftest=WORKER_CRASH_IN_C),
    "xdist worker crash, deselected rollout": Case(("-n", "2", "--deselect", "mcqa.jsonl::a[r0]"),
                                                   conftest=WORKER_CRASH_IN_C),
}  # fmt: skip


def session(
    pytester: pytest.Pytester, fake_gym: FakeGym, monkeypatch: pytest.MonkeyPatch, case: Case, family: str
) -> Path:
    """Run ``case``'s session (after its ``first`` one) with ``--junitxml`` and a pass-rate gate; the JUnit file."""
    rows = [{"id": t, "responses_create_params": {"input": f"Q {t}"}, "fake": {"reward": r}} for t, r in ROWS.items()]
    lines = [json.dumps(row) for row in rows]
    (pytester.path / "mcqa.jsonl").write_text("\n".join(lines) + "\n")
    (pytester.path / "quarantine.txt").write_text("mcqa.jsonl  c  2999-01-01  flips since the prompt change\n")
    if case.conftest:
        pytester.makeconftest(case.conftest)
    for name, value in case.env.items():
        monkeypatch.setenv(name, value)
    base = [arg for arg in fake_gym.args if case.replay or not arg.startswith("--gym-replay")]
    if case.first is not None or "--lf" in case.args:  # --lf reads the cache the session before wrote
        base = [arg for arg in base if arg not in ("-p", "no:cacheprovider")]
    common = [*base, "mcqa.jsonl", "--gym-min-pass-rate=0.4", "-o", f"junit_family={family}"]
    if case.first is not None:
        pytester.runpytest_subprocess(*common, *case.first)
    args = [arg.format(recording=fake_gym.recording) for arg in case.args]
    result = pytester.runpytest_subprocess(*common, "--junitxml=junit.xml", *args)
    junit = pytester.path / "junit.xml"
    assert junit.is_file(), result.stdout.str()[-3000:]
    return junit


XUNIT1 = ("deselect one rollout", "Ctrl-C in a call")
"""The cases also run under ``junit_family=xunit1`` (testcase properties are valid there: a testcase's name is not
optional in either family)."""


@pytest.mark.parametrize(
    ("case", "family"),
    [pytest.param(case, "xunit2", id=name) for name, case in CASES.items()]
    + [pytest.param(CASES[name], "xunit1", id=f"{name}-xunit1") for name in XUNIT1],
)
def test_junit_is_valid_in_every_selection_and_ending(
    pytester: pytest.Pytester, fake_gym: FakeGym, monkeypatch: pytest.MonkeyPatch, case: Case, family: str
) -> None:
    junit = session(pytester, fake_gym, monkeypatch, case, family)
    validate_junit(junit, family)


def gate_values(junit: Path) -> dict[str, object]:
    """The values the ``gym-gate`` testcase carries: its ``<properties>`` or its ``<system-out>`` line."""
    (case,) = [c for c in ET.parse(junit).getroot().iter("testcase") if c.get("name") == "gym-gate"]
    values: dict[str, object] = {p.get("name", ""): p.get("value", "") for p in case.iter("property")}
    for out in case.iter("system-out"):
        values.update(parse_system_out(out.text or "") or {})
    return values


@pytest.mark.parametrize("family", ["xunit2", "xunit1"])
def test_a_skipped_gate_keeps_its_values_where_the_family_allows_them(
    pytester: pytest.Pytester, fake_gym: FakeGym, monkeypatch: pytest.MonkeyPatch, family: str
) -> None:
    """A gate judged on a ``--deselect`` selection is skipped; its selection and verdicts are in its testcase."""
    junit = session(pytester, fake_gym, monkeypatch, CASES["deselect one rollout"], family)
    values = gate_values(junit)
    assert values["selection"] == "judged on a --deselect selection: 2 of 3 tasks", values
    assert "gates" in values or "gate" in values, values


@pytest.mark.parametrize("family", ["xunit2", "xunit1"])
def test_every_rollout_the_suite_counts_has_its_testcase_with_the_same_outcome(
    pytester: pytest.Pytester, fake_gym: FakeGym, monkeypatch: pytest.MonkeyPatch, family: str
) -> None:
    """Ctrl-C during a[r0]'s call: b and c never run, but Gym scored all three and the suite's properties count
    them (the session's end judges them from Gym's records). Each gets its testcase, with the outcome counted
    (a and b passed, c failed) and why the session judged it; a[r0], which pytest opened at its setup and never
    named, is finished so, not left without a name (that read as passed) nor errored against the count."""
    junit = session(pytester, fake_gym, monkeypatch, CASES["Ctrl-C in a call"], family)
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None
    properties = {p.get("name"): p.get("value") for p in suite.iter("property")}
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    assert set(cases) == {"a[r0]", "b[r0]", "c[r0]", "gym-gate"}, ET.tostring(suite)
    rollouts = [cases[name] for name in ("a[r0]", "b[r0]", "c[r0]")]
    assert properties["gym::mcqa.jsonl::rollouts"] == str(len(rollouts))
    assert [c.find("failure") is not None for c in rollouts] == [False, False, True]
    assert all(c.find("error") is None and c.find("skipped") is None for c in rollouts)
    assert suite.get("failures") == "1" and suite.get("errors") == "1"  # c; the gate that never ran
    for case, reward in zip(rollouts, (1.0, 1.0, 0.0), strict=True):
        values = {p.get("name", ""): p.get("value", "") for p in case.iter("property")}
        for out in case.iter("system-out"):
            values.update(parse_system_out(out.text or "") or {})
        assert float(values["reward"]) == reward
        assert "(interrupted)" in str(values["judged_at_end"]), values
    assert cases["a[r0]"].get("classname") == "mcqa.jsonl"
    validate_junit(junit, family)


PLANTED_VERDICTS = """
import dataclasses

from pytest_gym_eval.session import gym_session

conclude = gym_session.GymSession.conclude


def planted(self):
    # The verdict list says every gate fails though the summaries' gates pass: the session's end must follow it.
    conclusion = conclude(self)
    if conclusion is not None:
        verdicts = tuple(
            dataclasses.replace(v, verdict="FAIL", fails=True, message=f"{v.subject}: planted FAIL")
            for v in conclusion.verdicts
        )
        conclusion = self.conclusion = dataclasses.replace(conclusion, verdicts=verdicts)
    return conclusion


gym_session.GymSession.conclude = planted


def pytest_unconfigure(config):
    from pathlib import Path

    from pytest_gym_eval.plugin import gym_of

    Path("overruled.txt").write_text("\\n".join(gym_of(config).overruled_gates))
"""


@pytest.mark.parametrize("args", [(), ("-x",)], ids=["gate item ran", "-x stopped first"])
def test_the_session_end_takes_each_gates_failure_from_the_verdict_list(
    pytester: pytest.Pytester, fake_gym: FakeGym, monkeypatch: pytest.MonkeyPatch, args: tuple[str, ...]
) -> None:
    """Which gates fail is decided once, in the conclusion's verdict list: the session's end never judges the
    summaries' gates again. Given a list that fails a gate the summary passes, the ``gym-gate`` testcase is not a pass
    (with ``-x`` its item never ran, and the session's end judged every rollout: it used to add a passed testcase,
    judged again from the summaries), and the terminal says the gate item counted passed was failed (it did not)."""
    junit = session(pytester, fake_gym, monkeypatch, Case(args, conftest=PLANTED_VERDICTS), "xunit2")
    validate_junit(junit, "xunit2")
    case = next(c for c in ET.parse(junit).getroot().iter("testcase") if c.get("name") == "gym-gate")
    assert case.find("failure") is not None or case.find("error") is not None, ET.tostring(case).decode()
    overruled = (pytester.path / "overruled.txt").read_text()
    if not args:
        assert "planted FAIL" in (case.find("failure").get("message") or "")  # type: ignore[union-attr]
        assert "mcqa.jsonl::gym-gate is counted PASSED above" in overruled and "planted FAIL" in overruled
    else:
        assert not overruled
