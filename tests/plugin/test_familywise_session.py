"""``--gym-familywise=holm`` in a session against the stand-in gym: the session's gates judged as one family (Holm),
reported as such, and the hint every INCONCLUSIVE verdict carries."""

from __future__ import annotations

import html
import json

import jsonschema
import pytest

from pytest_gym_eval.reporting.json_report import SCHEMA_PATH
from tests.plugin.test_summary import rows
from tests.support.fakes import FakeGym


@pytest.fixture
def two_datasets(pytester: pytest.Pytester) -> list[str]:
    """Two datasets of 24 tasks, 18 of which pass: mean reward 0.75 against 0.5 has two-sided p 0.039 (its
    task-clustered Clopper-Pearson interval, n_eff 23), so each passes at 95% alone but not at Holm's first level,
    0.05 / 2. The hint, from that interval at 97.5%: about 23 more tasks (47 tasks at 0.75 decide it 83% of the
    time in a simulation; the Student t planner's 6 more, 30 tasks, only half of the time)."""
    rewards: dict[str, float | str] = {f"t{i}": 1.0 if i < 18 else 0.0 for i in range(24)}
    (pytester.path / "more").mkdir()
    for name in ("mcqa.jsonl", "more/mcqa.jsonl"):
        (pytester.path / name).write_text(rows(rewards))
    return ["mcqa.jsonl", "more/mcqa.jsonl"]


GATE = ["--gym-min-mean-reward=0.5", "--gym-gate-on=lower-bound", "--gym-report=report.json"]


def test_each_gate_alone_passes(pytester: pytest.Pytester, fake_gym: FakeGym, two_datasets: list[str]) -> None:
    result = pytester.runpytest(*fake_gym.args, *two_datasets, *GATE)
    assert result.ret == 0  # 7 rollouts of each fail, but the gates decide: both PASS
    result.stdout.fnmatch_lines(["*gym gates: all 2 gates pass*"])
    gates = [gate for d in json.loads((pytester.path / "report.json").read_text())["datasets"] for gate in d["gates"]]
    assert [gate["verdict"] for gate in gates] == ["PASS", "PASS"]
    assert [gate["familywise"] for gate in gates] == [None, None]


def test_holm_judges_the_sessions_gates_as_one_family(
    pytester: pytest.Pytester, fake_gym: FakeGym, two_datasets: list[str]
) -> None:
    result = pytester.runpytest(*fake_gym.args, *two_datasets, *GATE, "--gym-familywise=holm")
    assert result.ret == 1
    text = " ".join(result.stdout.str().split())  # the summary wraps at 80 columns
    assert "gates 1 judged on intervals Holm adjusted for the session's family of gates (lower-bound mode)" in text
    assert (
        "mean reward 0.75 [0.48, 0.93]: interval straddles 0.50: INCONCLUSIVE (Holm over 2 gates: 97.5% interval, "
        "p 0.039) (set on the command line); about 23 more tasks would likely decide it (same repeats)"
    ) in text
    assert text.count("verdict INCONCLUSIVE (family-wise: Holm over 2 gates of the session)") == 2
    assert "gym gates (family-wise, Holm over 2): INCONCLUSIVE - mcqa.jsonl mean reward" in text
    report = json.loads((pytester.path / "report.json").read_text())
    jsonschema.validate(report, json.loads(SCHEMA_PATH.read_text()))
    gates = [gate for d in report["datasets"] for gate in d["gates"]]
    assert [gate["verdict"] for gate in gates] == ["INCONCLUSIVE", "INCONCLUSIVE"]
    assert gates[0]["familywise"] == {"method": "Holm", "family": 2, "p_value": pytest.approx(0.0387, abs=1e-4),
                                      "level": pytest.approx(0.025)}  # fmt: skip
    hint = gates[0]["inconclusive_hint"]
    assert hint == {"more": 23, "unit": "tasks", "repeats_per_task": None, "text": hint["text"]}
    assert hint["text"] in text
    assert "family-wise, Holm over 2" in report["session"]["reason"]


def test_bad_familywise_value_is_a_usage_error(pytester: pytest.Pytester, two_datasets: list[str]) -> None:
    pytester.makeini("[pytest]\ngym_familywise = bonferroni\n")
    result = pytester.runpytest(*two_datasets)
    result.stderr.fnmatch_lines(["*gym_familywise: expected off or holm, got 'bonferroni'*"])


def test_holm_takes_the_policy_comparison_gates_into_the_family(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    """Two policies on 24 tasks (the baseline passes all, the candidate 21): the mean reward gate of each policy's
    summary and the candidate's non-inferiority gate are one family of 3, every verdict says so."""
    from tests.plugin.test_policies_session import policy_args

    rows_ = [
        {
            "id": f"t{i}",
            "responses_create_params": {"input": [{"role": "user", "content": "ping"}]},
            "fake": {"reward_by_agent": {"mcqa_simple_agent": 1.0, "mcqa_simple_agent__cand": float(i >= 3)}},
        }
        for i in range(24)
    ]
    (pytester.path / "mcqa.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows_))
    args = [
        *policy_args(fake_gym),
        "mcqa.jsonl",
        *GATE,
        "--gym-max-regression=0.3",
        "--gym-familywise=holm",
        "--gym-markdown=summary.md",
    ]
    pytester.runpytest_subprocess(*args)
    report = json.loads((pytester.path / "report.json").read_text())
    jsonschema.validate(report, json.loads(SCHEMA_PATH.read_text()))
    comparison = [v for v in report["verdicts"] if v["kind"] == "non-inferiority"]
    assert len(comparison) == 1 and "(Holm over 3 gates: " in comparison[0]["message"]
    (policy,) = report["comparisons"]
    assert policy["gates"][0]["familywise"]["family"] == 3
    gates = [gate for d in report["datasets"] for gate in d["gates"]]
    assert [gate["familywise"]["family"] for gate in gates] == [3, 3]
    markdown = (pytester.path / "summary.md").read_text()
    assert "non-inferiority: candidate - baseline >= -0.30: family-wise: Holm over 3 gates: " in markdown


def test_markdown_and_html_say_family_wise_and_what_would_decide(
    pytester: pytest.Pytester, fake_gym: FakeGym, two_datasets: list[str]
) -> None:
    """The Markdown summary and the HTML page show what the terminal adds to an INCONCLUSIVE family-wise verdict:
    its Holm level and p-value, and about how many more tasks would decide it."""
    outputs = ["--gym-markdown=summary.md", "--gym-html=report.html"]
    pytester.runpytest(*fake_gym.args, *two_datasets, *GATE, "--gym-familywise=holm", *outputs)
    said = (
        "mean reward >= 0.50: family-wise: Holm over 2 gates: 97.5% interval, p 0.039; about 23 more tasks would "
        "likely decide it (same repeats)"
    )
    markdown = (pytester.path / "summary.md").read_text()
    assert markdown.count(f"- {said}") == 2
    page = (pytester.path / "report.html").read_text()
    assert page.count(f'<p class="muted gate-note">{html.escape(said)}</p>') == 2
