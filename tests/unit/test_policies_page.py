"""The HTML page's "Policies compared" section (pytest_gym_eval/reporting/policies_page.py) on hand-made rollouts of
two policies: the comparison's numbers, each task's rewards side by side, both transcripts of each flipping task,
and the same section from the JSON report (a whole session: tests/plugin/test_policies_session.py)."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

from pytest_gym_eval.__main__ import main as cli
from pytest_gym_eval.options.gym_options import GymOptions
from pytest_gym_eval.reporting import html
from pytest_gym_eval.reporting.conclusion import Conclusion
from pytest_gym_eval.reporting.json_report import build_report, comparison_json, write_report
from pytest_gym_eval.reporting.policies_page import OPEN_FLIPS_UP_TO, policies_section
from pytest_gym_eval.reporting.summary import RolloutResult
from pytest_gym_eval.session.conclude import conclude
from pytest_gym_eval.tasks.models import Policy

AGENTS = {"base": "mcqa_simple_agent", "cand": "mcqa_simple_agent__cand"}
BASE = {"ta": [1.0, 1.0], "tb": [0.0, 0.0], "tc": [1.0, 1.0]}
CAND = {"ta": [0.0, 0.0], "tb": [1.0, 1.0], "tc": [1.0, None]}  # tc's second candidate rollout errored


def rollouts() -> list[RolloutResult]:
    """Both policies' rollouts, interleaved as a session runs them."""
    results = []
    for task in BASE:
        for repeat in range(2):
            for policy, rewards in (("base", BASE), ("cand", CAND)):
                reward = rewards[task][repeat]
                status = "error" if reward is None else "passed" if reward >= 1.0 else "failed"
                results.append(
                    RolloutResult(
                        f"mcqa.jsonl::{task}[r{repeat}-{policy}]", "mcqa.jsonl", task, repeat, AGENTS[policy], status,
                        reward,
                    )
                )  # fmt: skip
    return results


def conclusion_of(results: list[RolloutResult], tmp_path: Path, *, policies: bool = True) -> Conclusion:
    named = (Policy("base", replay=tmp_path / "b.jsonl"), Policy("cand", replay=tmp_path / "c.jsonl"))
    options = GymOptions(rootdir=tmp_path, policies=named if policies else (), max_regression=0.1)
    return conclude(results, options)


def section_of(page: str) -> str:
    match = re.search(r'<section class="policies" id="policies">.*?</section>', page, re.S)
    assert match, "no policies section"
    return match.group(0)


def test_the_section_shows_the_comparison_both_policies_rewards_and_the_flipping_tasks_transcripts(
    tmp_path: Path,
) -> None:
    results = rollouts()
    conclusion = conclusion_of(results, tmp_path)
    page = html.render_page(conclusion, results, {})
    section = section_of(page)
    assert '<li><a href="#policies">Policies compared</a></li>' in page
    assert page.index('id="policies"') < page.index('id="group-0"')  # first: the question the session answers
    card = re.search(r'<div class="card policy-comparison"[^>]*>', section)
    assert card and 'data-baseline="base"' in card.group(0) and 'data-candidate="cand"' in card.group(0)
    item = conclusion.policies[0]
    difference = item.comparison.difference
    assert item.result is not None
    assert f'data-verdict="{item.result.verdict.value}"' in card.group(0)
    low, high = difference.interval.low, difference.interval.high
    assert f"<strong>{difference.interval.estimate:.2f} [{low:.2f}, {high:.2f}]</strong>" in section
    assert f"base {difference.baseline_mean:.2f}, cand {difference.candidate_mean:.2f}" in section
    assert "1 only the baseline passes, 1 only the candidate passes" in section
    # Each task's row: both policies' rewards per repeat, each opening its rollout, and the mean of several.
    index = {result.nodeid: i for i, result in enumerate(results)}
    row = re.search(r'<tr class="policy-task" data-task="tc" data-flip="">(.*?)</tr>', section, re.S)
    assert row, "no row for tc"
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row.group(1), re.S)
    assert f'data-i="{index["mcqa.jsonl::tc[r1-base]"]}">1.00</button>' in cells[1] and "(1.00)" in cells[1]
    assert f'data-i="{index["mcqa.jsonl::tc[r1-cand]"]}">error</button>' in cells[2] and "(" not in cells[2]
    # The flipping tasks, ta (only the baseline) and tb (only the candidate): per repeat, both transcripts, open.
    flips = re.findall(
        r'<details class="policy-flip" data-task="(\w+)" data-flip="(\w+)" open>(.*?)</details>', section, re.S
    )
    assert [(task, kind) for task, kind, _ in flips] == [("ta", "only_baseline"), ("tb", "only_candidate")]
    for task, _, body in flips:
        columns = [int(i) for i in re.findall(r'<div class="policy-transcript" data-i="(\d+)">', body)]
        assert columns == [index[f"mcqa.jsonl::{task}[r{r}-{p}]"] for r in (0, 1) for p in ("base", "cand")]


def test_the_html_command_draws_the_same_section_from_the_json_report(tmp_path: Path) -> None:
    results = rollouts()
    conclusion = conclusion_of(results, tmp_path)
    session_page = html.render_page(conclusion, results, {})
    report = build_report(
        conclusion.summaries, results, {}, comparisons=conclusion.policies, verdicts=conclusion.verdicts
    )
    write_report(tmp_path / "report.json", report)
    assert cli(["html", str(tmp_path / "report.json"), "-o", str(tmp_path / "page.html")]) == 0
    assert section_of((tmp_path / "page.html").read_text(encoding="utf-8")) == section_of(session_page)


def test_a_single_policy_page_has_no_section(tmp_path: Path) -> None:
    results = [replace(result, agent=AGENTS["base"]) for result in rollouts()[:2]]
    page = html.render_page(conclusion_of(results, tmp_path, policies=False), results, {})
    assert '<section class="policies"' not in page and 'href="#policies"' not in page
    assert 'class="policy-transcript"' not in page
    assert policies_section(None, results) == policies_section([], results) == ""


def test_a_task_only_one_policy_ran_says_so(tmp_path: Path) -> None:
    results = [result for result in rollouts() if not result.nodeid.startswith("mcqa.jsonl::ta[r1-cand")]
    item = json.loads(json.dumps(build_report([], results, {}, comparisons=conclusion_of(results, tmp_path).policies)))
    section = policies_section(item["comparisons"], results)
    flip = re.search(r'<details class="policy-flip" data-task="ta".*?</details>', section, re.S)
    assert flip and flip.group(0).count('class="policy-transcript"') == 3 and "not run" in flip.group(0)


def test_past_the_first_flips_the_transcripts_are_folded_and_a_selection_does_not_decide(tmp_path: Path) -> None:
    tasks = [f"t{k:02d}" for k in range(OPEN_FLIPS_UP_TO + 2)]
    results = [
        RolloutResult(f"mcqa.jsonl::{task}[r0-{policy}]", "mcqa.jsonl", task, 0, AGENTS[policy], status, reward)
        for task in tasks
        for policy, status, reward in (("base", "passed", 1.0), ("cand", "failed", 0.0))
    ]
    conclusion = conclusion_of(results, tmp_path)
    section = policies_section([comparison_json(item) for item in conclusion.policies], results)
    opened = re.findall(r'<details class="policy-flip" data-task="(\w+)" data-flip="only_baseline"( open)?>', section)
    assert [(task, bool(flag)) for task, flag in opened] == [
        (task, k < OPEN_FLIPS_UP_TO) for k, task in enumerate(tasks)
    ]
    assert f"(past the first {OPEN_FLIPS_UP_TO}: folded)" in section and "not deciding" not in section
    undecided = [replace(item, decides=False) for item in conclusion.policies]
    assert "judged on a selection: shown, not deciding" in policies_section(
        [comparison_json(item) for item in undecided], results
    )


def test_a_card_badge_is_the_worst_of_its_gates_verdicts_and_the_header_counts_datasets(tmp_path: Path) -> None:
    """Issue 36: a candidate whose superiority gate failed the session showed a green PASS badge (that of the
    non-inferiority gate alone), and the header counted each policy's summary as a dataset."""
    results = [
        RolloutResult(f"mcqa.jsonl::t{i}[r0-{policy}]", "mcqa.jsonl", f"t{i}", 0, AGENTS[policy], status, reward)
        for i in range(10)
        for policy, reward in (("base", 1.0), ("cand", 0.0 if i < 6 else 1.0))
        for status in ["passed" if reward else "failed"]
    ]
    named = (Policy("base", replay=tmp_path / "b.jsonl"), Policy("cand", replay=tmp_path / "c.jsonl"))
    options = GymOptions(rootdir=tmp_path, policies=named, max_regression=1.0, min_improvement=0.0)
    conclusion = conclude(results, options)
    verdicts = {v.kind: v.verdict for v in conclusion.verdicts}
    assert verdicts == {"non-inferiority": "PASS", "superiority": "FAIL"} and conclusion.exit_status == 1
    page = html.render_page(conclusion, results, {})
    card = re.search(r'<div class="card policy-comparison"[^>]*data-verdict="(\w+)"', page)
    assert card and card.group(1) == "FAIL"
    assert page.count('class="policy-gate"') == 2 and "1 dataset, " in page
