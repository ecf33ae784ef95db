"""The HTML report in a real browser (headless Chromium, fixture ``chromium``): first a page written by a real-Gym
run of Gym's mcqa example (its numbers against the JSON report, a failed rollout's transcript, the errors
filter, the replay flips), then a large synthetic page (pages of tasks, sorting, filters, continuous rewards,
a tool-calling transcript), the history section and two policies compared. Every test saves a screenshot in its tmp
dir and fails on a console error.
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.select import Select
from selenium.webdriver.support.ui import WebDriverWait

from pytest_gym_eval.__main__ import main as cli
from pytest_gym_eval.history.drift import cusum_drift
from pytest_gym_eval.history.stability import RunOutcome, assess
from pytest_gym_eval.history.summary import DatasetHistory, summary_json
from pytest_gym_eval.options.gym_options import GymOptions
from pytest_gym_eval.outcomes.outcome import output_text
from pytest_gym_eval.reporting import fmt, html, policies_page
from pytest_gym_eval.reporting.baseline import compare_to_baseline
from pytest_gym_eval.reporting.conclusion import Conclusion, Flip
from pytest_gym_eval.reporting.json_report import build_report
from pytest_gym_eval.reporting.summary import RolloutResult, summarize
from pytest_gym_eval.reporting.verdicts import session_verdict
from pytest_gym_eval.session.conclude import conclude
from pytest_gym_eval.stats.gates import Gate, GateMode
from pytest_gym_eval.tasks.models import Policy
from tests.support.browser import open_page
from tests.support.real_gym import GymExample, SharedGym

UNRECORDED = "What colour is a clear daytime sky on Earth?"
"""The question of the row added to Gym's example: no recording answers it, so its rollouts error."""


def by_css(driver: Any, selector: str) -> list[Any]:
    return list(driver.find_elements("css selector", selector))


def one(driver: Any, selector: str) -> Any:
    return driver.find_element("css selector", selector)


def click(driver: Any, selector: str) -> None:
    one(driver, selector).click()


def shot(driver: Any, tmp_path: Path, name: str) -> Path:
    path = tmp_path / f"{name}.png"
    assert driver.save_screenshot(str(path)) and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    return path


def read_record(location: str) -> dict[str, Any]:
    path, line = location.rsplit(":", 1)
    record: dict[str, Any] = json.loads(Path(path).read_text().splitlines()[int(line) - 1])
    return record


# --- A page from a real-Gym run ---------------------------------------------------------------------------


@dataclass(frozen=True)
class GymPage:
    folder: Path
    page: Path
    report: dict[str, Any]
    output: str


@pytest.fixture(scope="module")
def gym_page(shared_gym: SharedGym, gym_example: GymExample, tmp_path_factory: pytest.TempPathFactory) -> GymPage:
    """Gym's mcqa example, 2 repeats, plus one row no recording answers, run by real Gym with the replay model
    (``--gym-replay`` compares with the recordings: one task flips), writing the page and the JSON report."""
    folder = tmp_path_factory.mktemp("mcqa-page")
    rows = gym_example.dataset.read_text().splitlines()
    extra = json.loads(rows[0])
    extra["uuid"] = "unrecorded-question"
    extra["responses_create_params"]["input"][-1]["content"] = UNRECORDED
    (folder / "mcqa.jsonl").write_text("\n".join([*rows, json.dumps(extra)]) + "\n")
    shutil.copy(gym_example.recordings, folder / "recordings.jsonl")
    command = [
        sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly", *shared_gym.args,
        "--gym-replay=recordings.jsonl", "mcqa.jsonl", "--gym-repeats=2", "--gym-min-mean-reward=0.5",
        "--gym-html=report.html", "--gym-report=report.json", "--gym-run-dir=runs",
    ]  # fmt: skip
    done = subprocess.run(command, cwd=folder, capture_output=True, text=True, timeout=900)
    assert (folder / "report.html").is_file(), done.stdout[-4000:] + done.stderr[-2000:]
    return GymPage(folder, folder / "report.html", json.loads((folder / "report.json").read_text()), done.stdout)


@pytest.mark.gym
def test_page_shows_the_numbers_of_the_json_report(chromium: Any, gym_page: GymPage, tmp_path: Path) -> None:
    open_page(chromium, gym_page.page)
    (summary,) = gym_page.report["datasets"]
    (section,) = by_css(chromium, ".gym-group")
    assert section.get_attribute("data-dataset") == summary["dataset"] == "mcqa.jsonl"
    for name in ("mean_reward", "pass_rate"):
        row = one(chromium, f'.metric[data-metric="{name}"]')
        for key in ("estimate", "low", "high"):
            assert float(row.get_attribute(f"data-{key}")) == pytest.approx(summary[name][key]), (name, key)
        shown = fmt.interval(html_interval(summary[name]))
        assert row.find_element("css selector", ".value").text == shown
    counts = one(chromium, '.metric[data-metric="tasks"]')
    assert [int(counts.get_attribute(f"data-{key}")) for key in ("tasks", "rollouts", "scored", "errors")] == [
        summary["tasks"], summary["rollouts"], summary["scored"], summary["errors"]
    ]  # fmt: skip
    assert summary["tasks"] == 6 and summary["rollouts"] == 12 and summary["errors"] == 2
    (gate,) = by_css(chromium, "tr.gate")
    assert gate.get_attribute("data-verdict") == summary["gates"][0]["verdict"]
    # The histogram counts the scored rollouts by reward; the grid has one cell per rollout, coloured or marked.
    bars = {
        float(bar.get_attribute("data-from")): int(bar.get_attribute("data-count")) for bar in by_css(chromium, ".bar")
    }
    rewards = [r["reward"] for r in gym_page.report["rollouts"] if r["status"] != "error"]
    assert bars == {value: rewards.count(value) for value in set(rewards)}
    cells = {
        cell.get_attribute("data-nodeid"): cell.get_attribute("data-status")
        for cell in by_css(chromium, ".cell[data-i]")
    }
    assert cells == {r["nodeid"]: r["status"] for r in gym_page.report["rollouts"]}
    verdict = one(chromium, ".session-verdict")
    assert verdict.get_attribute("data-exit-status") == "1" and verdict.text == "FAIL"  # two rollouts errored
    shot(chromium, tmp_path, "page")


def html_interval(entry: dict[str, Any]) -> Any:
    from pytest_gym_eval.stats.intervals import Interval

    return Interval(entry["estimate"], entry["low"], entry["high"], entry["n"])


@pytest.mark.gym
def test_clicking_a_failed_cell_shows_what_the_model_answered(chromium: Any, gym_page: GymPage, tmp_path: Path) -> None:
    open_page(chromium, gym_page.page)
    failed = next(r for r in gym_page.report["rollouts"] if r["status"] == "failed")
    click(chromium, f'.cell[data-nodeid="{failed["nodeid"]}"]')
    drawer = one(chromium, "#drawer")
    assert drawer.is_displayed() and drawer.get_attribute("data-status") == "failed"
    assert one(chromium, ".drawer-title").text == failed["nodeid"]
    record = read_record(failed["record"])
    answer = output_text(record)
    assert answer and one(chromium, "#drawer .final-output").text == answer.strip()
    assert str(record["expected_answer"]) in one(chromium, "#drawer .answer .facts").text
    facts = one(chromium, "#drawer .facts").text
    assert f"reward\n{failed['reward']:g} (pass threshold 1)" in facts
    assert failed["record"] in facts and "tokens" in facts
    prompt = record["responses_create_params"]["input"][-1]["content"]
    assert prompt.splitlines()[-1] in one(chromium, "#drawer .conversation").text
    shot(chromium, tmp_path, "failed-rollout")
    ActionChains(chromium).send_keys(Keys.ESCAPE).perform()
    assert not drawer.is_displayed()


@pytest.mark.gym
def test_filtering_to_errors_shows_the_errored_task_and_gyms_cause(
    chromium: Any, gym_page: GymPage, tmp_path: Path
) -> None:
    open_page(chromium, gym_page.page)
    errored = [r for r in gym_page.report["rollouts"] if r["status"] == "error"]
    assert {r["task_id"] for r in errored} == {"unrecorded-question"}
    click(chromium, '.filters button[data-filter="errored"]')
    rows = by_css(chromium, ".grid tbody tr")
    assert [row.get_attribute("data-task") for row in rows] == ["unrecorded-question"]
    assert one(chromium, ".pager .range").text == "tasks 1\u20131 of 1"
    click(chromium, ".cell.error")
    failure = one(chromium, "#drawer .failure")
    assert f"Error: {errored[0]['failure_class']}" in failure.text
    record = read_record(errored[0]["record"])
    assert str(record["_ng_failure_http_status"]) in failure.text
    assert UNRECORDED in one(chromium, "#drawer .conversation").text  # the prompt Gym could not answer
    shot(chromium, tmp_path, "errors")
    click(chromium, '.filters button[data-filter="all"]')
    assert len(by_css(chromium, ".grid tbody tr")) == 6


@pytest.mark.gym
def test_replay_flips_are_listed_and_open(chromium: Any, gym_page: GymPage, tmp_path: Path) -> None:
    open_page(chromium, gym_page.page)
    flips = gym_page.report["flips"]
    assert len(flips) == 2  # Gym 0.7.0 scores one recorded answer differently, on both repeats
    block = one(chromium, ".flips")
    assert int(block.get_attribute("data-count")) == 2
    click(chromium, '.filters button[data-filter="flipped"]')
    assert [row.get_attribute("data-task") for row in by_css(chromium, ".grid tbody tr")] == [
        flips[0]["nodeid"].split("::")[1].split("[")[0]
    ]
    click(chromium, ".flips button.open-rollout")
    assert one(chromium, ".drawer-title").text == flips[0]["nodeid"]
    assert "the reward flipped" in one(chromium, "#drawer .facts").text
    shot(chromium, tmp_path, "flips")


@pytest.mark.gym
def test_page_made_afterwards_from_the_report_is_the_same(gym_page: GymPage, tmp_path: Path) -> None:
    again = tmp_path / "again.html"
    assert cli(["html", str(gym_page.folder / "report.json"), "-o", str(again)]) == 0
    assert again.read_text() == gym_page.page.read_text()


# --- A large synthetic page -------------------------------------------------------------------------------


TOOL_TURNS = [
    {"type": "reasoning", "summary": [{"type": "summary_text", "text": "Look the weather up."}]},
    {"type": "function_call", "name": "get_weather", "arguments": '{"city": "Oslo"}', "call_id": "call_7"},
    {"type": "function_call_output", "call_id": "call_7", "output": '{"weather": "snow"}'},
    {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "It snows in Oslo."}]},
]


@pytest.fixture(scope="module")
def large_page(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, list[RolloutResult], Conclusion]]:
    """1,200 tasks x 3 repeats of a judge-graded dataset (rewards in [0, 1]), a few errors, a baseline, a flip."""
    folder = tmp_path_factory.mktemp("large-page")
    rng = random.Random(7)
    dataset = "judge.jsonl"
    records, results = [], []
    for task in range(1200):
        for repeat in range(3):
            line = len(records) + 1
            error = task % 97 == 5 and repeat == 1
            reward = None if error else round(rng.random() ** 0.5, 3)
            status = "error" if reward is None else "passed" if reward >= 0.5 else "failed"
            outcome = {"_ng_failure_class": "agent_run_error", "_ng_failure_message": "boom"} if error else {}
            record = {
                "responses_create_params": {"input": [{"role": "user", "content": f"Weather in Oslo? ({task})"}]},
                "response": {"output": TOOL_TURNS},
                **(outcome or {"reward": reward}),
            }
            records.append(json.dumps(record))
            results.append(
                RolloutResult(
                    f"{dataset}::task-{task:04d}[r{repeat}]", dataset, f"task-{task:04d}", repeat, "judge_agent",
                    status, reward, "agent_run_error" if error else None, f"{folder}/rollouts.jsonl:{line}",
                )
            )  # fmt: skip
    (folder / "rollouts.jsonl").write_text("\n".join(records) + "\n")
    old = [RolloutResult(r.nodeid, r.dataset, r.task_id, r.repeat, r.agent, "passed", 0.75) for r in results]
    baseline = build_report([], old, {})
    summaries = summarize(
        results, thresholds={dataset: 0.5}, gates={dataset: [Gate("pass_rate", 0.7)]}, mode=GateMode.POINT
    )
    status, reason = session_verdict(summaries, inconclusive_passes=False)
    flips = [Flip(results[0].nodeid, results[0].reward or 0.0, (0.0,))]
    conclusion = Conclusion(summaries, compare_to_baseline(baseline, results), flips, status, reason)
    page = folder / "large.html"
    assert html.write_page(page, conclusion, results, {"model": "judge-test"}, baseline=baseline) == []
    yield page, results, conclusion


def test_large_page_pages_sorts_and_filters(
    chromium: Any, large_page: tuple[Path, list[RolloutResult], Conclusion], tmp_path: Path
) -> None:
    page, results, conclusion = large_page
    open_page(chromium, page)
    assert one(chromium, ".pager .range").text == "tasks 1\u2013100 of 1,200"
    assert len(by_css(chromium, ".cell[data-i]")) == 300
    # With a baseline the largest drop comes first.
    changes = [float(cell.text) for cell in by_css(chromium, ".grid td.change")]
    lowest = min(m - 0.75 for m in task_means(results).values())
    assert changes == sorted(changes) and changes[0] == pytest.approx(lowest, abs=0.005)  # shown to 2 decimals
    click(chromium, ".pager .next")
    assert one(chromium, ".pager .range").text == "tasks 101\u2013200 of 1,200"
    Select(one(chromium, ".sort")).select_by_value("id")
    assert one(chromium, ".grid tbody tr").get_attribute("data-task") == "task-0000"
    errored = sorted({r.task_id for r in results if r.status == "error"})
    click(chromium, '.filters button[data-filter="errored"]')
    assert [row.get_attribute("data-task") for row in by_css(chromium, ".grid tbody tr")] == errored
    assert one(chromium, '.filters button[data-filter="errored"] .count').text == str(len(errored))
    click(chromium, '.filters button[data-filter="all"]')
    search = one(chromium, ".search")
    search.send_keys("task-004")
    assert [row.get_attribute("data-task") for row in by_css(chromium, ".grid tbody tr")] == [
        f"task-{n:04d}" for n in range(40, 50)
    ]
    # Continuous rewards: 20 equal bins, all scored rollouts counted.
    bars = by_css(chromium, ".bar")
    assert len(bars) == 20 and sum(int(b.get_attribute("data-count")) for b in bars) == conclusion.summaries[0].scored
    shot(chromium, tmp_path, "large")


def task_means(results: list[RolloutResult]) -> dict[str, float]:
    scored: dict[str, list[float]] = {}
    for r in results:
        if r.score is not None:
            scored.setdefault(r.task_id, []).append(r.score)
    return {task: sum(values) / len(values) for task, values in scored.items()}


def test_tool_calling_transcript_shows_every_turn(
    chromium: Any, large_page: tuple[Path, list[RolloutResult], Conclusion], tmp_path: Path
) -> None:
    page, results, _ = large_page
    open_page(chromium, page)
    Select(one(chromium, ".sort")).select_by_value("order")
    click(chromium, f'.cell[data-nodeid="{results[4].nodeid}"]')
    turns = by_css(chromium, "#drawer .turn")
    kinds = [turn.get_attribute("class").split()[1] for turn in turns]
    assert kinds == ["user", "reasoning", "tool_call", "tool_result", "assistant"]
    assert "get_weather" in turns[2].text and '{"city": "Oslo"}' in turns[2].text
    assert '{"weather": "snow"}' in turns[3].text
    assert one(chromium, "#drawer .final-output").text == "It snows in Oslo."
    shot(chromium, tmp_path, "tool-call")
    # A link to one rollout opens it.
    chromium.get("about:blank")
    chromium.get(page.resolve().as_uri() + "#rollout=" + quote(results[7].nodeid))
    WebDriverWait(chromium, 30).until(lambda d: one(d, ".drawer-title").text == results[7].nodeid)


def test_a_rollouts_custom_metrics_and_their_reasons_show_in_its_view(chromium: Any, tmp_path: Path) -> None:
    # Issue 39: a metric recorded as 0 said nowhere why, and the rollout view did not show its value.
    records = tmp_path / "rollouts.jsonl"
    records.write_text(json.dumps({"response": {"output": []}, "reward": 0.0}) + "\n")
    result = RolloutResult(
        "d.jsonl::q1[r0]", "d.jsonl", "q1", 0, "a", "failed", 0.0, record=f"{records}:1",
        metrics=(("boxed", 1.0), ("terse", 0.0)), metric_reasons=(("terse", "3 sentences, not 1"),),
    )  # fmt: skip
    summaries = summarize([result], thresholds={}, gates={}, mode=GateMode.POINT)
    conclusion = Conclusion(summaries, [], None, *session_verdict(summaries, inconclusive_passes=False))
    page = tmp_path / "metrics.html"
    assert html.write_page(page, conclusion, [result], {}) == []
    open_page(chromium, page)
    click(chromium, f'.cell[data-nodeid="{result.nodeid}"]')
    metrics = one(chromium, "#drawer .metrics")
    assert metrics.text.splitlines() == ["Custom metrics", "boxed", "1", "terse", "0 \u2014 3 sentences, not 1"]
    shot(chromium, tmp_path, "metrics")


# --- The history section (--gym-history) ------------------------------------------------------------------


@pytest.fixture(scope="module")
def history_page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A page of two tasks with the history of runs 11-14: task b failed in run 14, which raised the drift alarm."""
    folder = tmp_path_factory.mktemp("history-page")
    results = [
        RolloutResult("mcqa.jsonl::a[r0]", "mcqa.jsonl", "a", 0, "mcqa_simple_agent", "passed", 1.0),
        RolloutResult("mcqa.jsonl::b[r0]", "mcqa.jsonl", "b", 0, "mcqa_simple_agent", "failed", 0.0),
    ]
    runs = [(run, {"a": [1.0], "b": [1.0 if run < 14 else 0.0]}) for run in (11, 12, 13, 14)]
    # The drift alarm's own runs: one task of two passing in each of runs 11-13, then neither (a pass-or-fail
    # series that never varied would be too skewed to judge); with h = 0.5 it fires at run 14.
    means = [(11, {"a": [1.0], "b": [0.0]}), (12, {"a": [0.0], "b": [1.0]}), (13, {"a": [1.0], "b": [0.0]})]
    drift = cusum_drift("mcqa.jsonl", [*means, (14, {"a": [0.0], "b": [0.0]})], reference_runs=3, h=0.5)
    tasks = tuple(
        assess("mcqa.jsonl", task, [RunOutcome(run, int(rewards[task][0]), 1) for run, rewards in runs])
        for task in ("a", "b")
    )
    history = DatasetHistory("mcqa.jsonl", "d1", "policy", 4, tasks, (), ("b",), drift)
    block = {"target": "gym-history.db", "run_id": 14, "error": None, **summary_json([history])}
    summaries = summarize(results, thresholds={"mcqa.jsonl": 1.0}, gates={}, mode=GateMode.POINT)
    conclusion = Conclusion(summaries, [], None, -1, "")
    page = folder / "history.html"
    html.write_page(page, conclusion, results, {"model": "policy"}, history=block)
    return page


def test_the_history_section_draws_the_trend_the_alarm_and_the_sparklines(
    chromium: Any, history_page: Path, tmp_path: Path
) -> None:
    open_page(chromium, history_page)
    assert by_css(chromium, ".grid-body tr")  # the script drew the grid (without it, the next test's page has none)
    click(chromium, 'a[href="#history"]')
    card = one(chromium, '.history-dataset[data-dataset="mcqa.jsonl"]')
    assert card.get_attribute("data-drift") == "true" and card.is_displayed()
    alarm = one(chromium, ".trend circle.mean.alarm")
    assert alarm.get_attribute("data-run") == "14"
    assert chromium.execute_script("return getComputedStyle(arguments[0]).fill", alarm) == "rgb(192, 57, 43)"
    assert len(by_css(chromium, ".trend circle.mean.reference")) == 3
    (row,) = by_css(chromium, ".history-table > table tr.history-task")  # b; the stable task a is folded away
    assert row.get_attribute("data-task") == "b" and row.get_attribute("data-label") == "regressed"
    boxes = row.find_elements("css selector", ".sparkline rect")
    assert [box.get_attribute("class") for box in boxes] == ["o-P", "o-P", "o-P", "o-F"]
    assert all(box.rect["width"] > 0 and box.rect["height"] > 0 for box in boxes)
    click(chromium, ".stable-tasks summary")
    assert one(chromium, '.stable-tasks tr.history-task[data-task="a"]').is_displayed()
    shot(chromium, tmp_path, "history")


def test_the_history_section_reads_without_the_script(chromium: Any, history_page: Path) -> None:
    chromium.execute_cdp_cmd("Emulation.setScriptExecutionDisabled", {"value": True})
    chromium.get(history_page.resolve().as_uri())
    assert by_css(chromium, ".grid-body tr") == []  # the script did not run: it draws the grids
    assert one(chromium, ".trend circle.mean.alarm").is_displayed()
    assert "mean reward moved down: 0.000 at run 14" in one(chromium, ".drift-evidence").text
    assert one(chromium, 'tr.history-task[data-task="b"] .sparkline').is_displayed()


# --- Policies compared (--gym-policy) ---------------------------------------------------------------------


def test_a_flipping_tasks_two_transcripts_are_open_side_by_side(
    chromium: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    agents = {"base": "mcqa_simple_agent", "cand": "mcqa_simple_agent__cand"}
    rewards = {("ta", "base"): 1.0, ("ta", "cand"): 0.0, ("tb", "base"): 1.0, ("tb", "cand"): 1.0}
    results = [
        RolloutResult(
            f"mcqa.jsonl::{task}[r0-{policy}]", "mcqa.jsonl", task, 0, agents[policy],
            "passed" if reward else "failed", reward,
        )
        for (task, policy), reward in rewards.items()
    ]  # fmt: skip
    answers = {"base": "C", "cand": "B"}
    transcripts = [
        {
            "items": [
                {"kind": "message", "role": "user", "text": f"Question {r.task_id}?"},
                {"kind": "message", "role": "assistant", "text": f"Answer {answers[r.nodeid[-5:-1]]}"},
            ],
            "output_from": 1, "final": 1, "expected": "C", "verifier": {}, "usage": None, "tools": [],
        }
        for r in results
    ]  # fmt: skip
    policies = (Policy("base", replay=tmp_path / "b.jsonl"), Policy("cand", replay=tmp_path / "c.jsonl"))
    conclusion = conclude(results, GymOptions(rootdir=tmp_path, policies=policies))
    page = tmp_path / "policies.html"
    page.write_text(html.render_page(conclusion, results, {}, transcripts=transcripts), encoding="utf-8")
    open_page(chromium, page)
    click(chromium, 'a[href="#policies"]')
    (flip,) = by_css(chromium, ".policy-flip")
    assert flip.get_attribute("data-task") == "ta" and flip.get_attribute("open") is not None
    base, cand = flip.find_elements("css selector", ".policy-transcript")
    assert one(base, ".final-output").text == "Answer C" and one(cand, ".final-output").text == "Answer B"
    assert base.is_displayed() and cand.is_displayed() and base.rect["y"] == cand.rect["y"]  # next to each other
    assert base.rect["x"] + base.rect["width"] <= cand.rect["x"]
    shot(chromium, tmp_path, "policies")
    # Past the first flips a task is folded; its transcripts are drawn when it is opened.
    monkeypatch.setattr(policies_page, "OPEN_FLIPS_UP_TO", 0)
    page.write_text(html.render_page(conclusion, results, {}, transcripts=transcripts), encoding="utf-8")
    open_page(chromium, page)
    assert one(chromium, ".policy-flip").get_attribute("open") is None
    assert [column.get_attribute("innerHTML") for column in by_css(chromium, ".policy-transcript")] == ["", ""]
    click(chromium, 'a[href="#policies"]')
    click(chromium, ".policy-flip summary")
    WebDriverWait(chromium, 10).until(lambda d: len(by_css(d, ".policy-transcript .final-output")) == 2)
    assert [node.text for node in by_css(chromium, ".policy-transcript .final-output")] == ["Answer C", "Answer B"]
