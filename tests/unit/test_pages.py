"""The reports people read: transcripts from rollout records, the HTML page's data and markup, the Markdown
summary, GitHub annotations and the step summary, the ``html`` subcommand, and the options that ask for them.

Fast tests on hand-made results and records (sessions against the stand-in ``gym``:
tests/plugin/test_pages_session.py); the page is opened in a real browser in tests/browser/test_browser.py, from a
real-Gym run.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from html import escape
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from pytest_gym_eval.__main__ import main as cli
from pytest_gym_eval.core.rundir import RunPaths
from pytest_gym_eval.gym.feed import RunState
from pytest_gym_eval.reporting import github, html, markdown, transcripts
from pytest_gym_eval.reporting.baseline import compare_to_baseline
from pytest_gym_eval.reporting.conclusion import Conclusion, Flip
from pytest_gym_eval.reporting.json_reading import conclusion_from_report
from pytest_gym_eval.reporting.json_report import SCHEMA_PATH, build_report, write_report
from pytest_gym_eval.reporting.summary import RolloutResult, summarize
from pytest_gym_eval.reporting.verdicts import gate_verdicts, session_verdict
from pytest_gym_eval.stats.gates import Gate, GateMode
from tests.support.pages import DATA, result, transcripts_in


def conclude(
    results: Sequence[RolloutResult],
    gates: Sequence[Gate] = (),
    baseline: dict[str, Any] | None = None,
    flips: list[Flip] | None = None,
) -> Conclusion:
    summaries = summarize(results, thresholds={DATA: 1.0}, gates={DATA: list(gates)}, mode=GateMode.POINT)
    status, reason = session_verdict(summaries, inconclusive_passes=False)
    comparisons = compare_to_baseline(baseline, results) if baseline is not None else []
    verdicts = gate_verdicts(summaries, (), comparisons, flips)
    return Conclusion(summaries, comparisons, flips, status, reason, verdicts=verdicts)


def message(role: str, text: str) -> dict[str, Any]:
    return {"type": "message", "role": role, "content": [{"type": "output_text", "text": text}]}


TOOL_RECORD: dict[str, Any] = {
    "responses_create_params": {
        "instructions": "Be brief.",
        "input": [{"role": "developer", "content": "You help."}, {"role": "user", "content": "Weather in Paris?"}],
        "tools": [{"type": "function", "name": "get_weather", "parameters": {}}],
    },
    "response": {
        "output": [
            {"type": "reasoning", "summary": [{"type": "summary_text", "text": "I should call the tool."}]},
            {"type": "function_call", "name": "get_weather", "arguments": '{"city":"Paris"}', "call_id": "c1"},
            {"type": "function_call_output", "call_id": "c1", "output": '{"weather": "cold"}'},
            message("assistant", "It is cold in Paris."),
            {"type": "web_search_call", "id": "ws1", "status": "completed"},
        ],
        "usage": {
            "input_tokens": 70,
            "output_tokens": 40,
            "total_tokens": 110,
            "output_tokens_details": {"reasoning_tokens": 12},
        },
    },
    "reward": 0.0,
    "expected_answer": "mild",
    "extracted_answer": "cold",
    "judge": {"score": 0, "why": "wrong"},
    "failure_reason": None,
    "_ng_task_index": 3,
    "agent_ref": {"name": "x"},
}


# --- Transcripts ------------------------------------------------------------------------------------------


def test_transcript_keeps_every_turn_and_what_the_verifier_recorded() -> None:
    found = transcripts.transcript(TOOL_RECORD)
    kinds = [(item["kind"], item.get("role") or item.get("name") or item.get("type")) for item in found["items"]]
    assert kinds == [
        ("message", "instructions"),
        ("message", "developer"),
        ("message", "user"),
        ("reasoning", None),
        ("tool_call", "get_weather"),
        ("tool_result", None),
        ("message", "assistant"),
        ("other", "web_search_call"),
    ]
    assert found["output_from"] == 3
    assert found["items"][found["final"]]["text"] == "It is cold in Paris."
    assert found["items"][4]["arguments"] == '{"city":"Paris"}' and found["items"][5]["text"] == '{"weather": "cold"}'
    assert found["items"][3]["text"] == "I should call the tool."
    assert found["expected"] == "mild"
    # Beside the reward: the verifier's own keys (the expected answer shown once; Gym's _ng_ keys left out; a null
    # kept: ``extracted_answer: null`` is the one fact that explains a reward of 0).
    assert found["verifier"] == {
        "extracted_answer": "cold",
        "judge": '{"score":0,"why":"wrong"}',
        "failure_reason": None,
    }
    assert found["usage"] == {"input_tokens": 70, "output_tokens": 40, "total_tokens": 110, "reasoning_tokens": 12}
    assert found["tools"] == ["get_weather"]
    assert found["failure"] is None


def test_transcript_of_a_failures_row_carries_gyms_cause_and_the_input_row(tmp_path: Path) -> None:
    # Gym's failures file keeps the failure and the stamps; the request is in the materialized inputs beside it.
    failure = {
        "_ng_failure_class": "agent_run_error",
        "_ng_failure_type": "HTTPStatusError",
        "_ng_failure_message": "Server error \\'500\\' for url \\'http://x/run\\'",
        "_ng_failure_http_status": 500,
        "_ng_failure_response_body": None,
        "_ng_task_index": 7,
        "_ng_rollout_index": 0,
    }
    row = {"responses_create_params": {"input": "plain prompt"}, "expected_answer": "B", "_ng_task_index": 7}
    (tmp_path / "rollouts_failures.jsonl").write_text(json.dumps(failure) + "\n")
    (tmp_path / "rollouts_materialized_inputs.jsonl").write_text(
        json.dumps({**row, "_ng_task_index": 6, "expected_answer": "A"})
        + "\n"
        + json.dumps({**row, "_ng_rollout_index": 0})
        + "\n"
    )
    locations = [f"{tmp_path}/rollouts_failures.jsonl:1", f"{tmp_path}/rollouts.jsonl:1"]
    records = [failure, {"responses_create_params": {"input": "has its own"}}]
    rows = transcripts.input_rows(locations, records)
    assert rows == [{**row, "_ng_rollout_index": 0}, None]
    found = transcripts.transcript(failure, rows[0])
    assert found["items"] == [{"kind": "message", "role": "user", "text": "plain prompt"}]
    assert found["final"] is None and found["expected"] == "B" and found["verifier"] == {}
    assert found["failure"] == {
        "type": "HTTPStatusError",
        "message": "Server error '500' for url 'http://x/run'",
        "http_status": 500,
    }
    assert transcripts.input_rows([f"{tmp_path}/gone_failures.jsonl:1"], [failure]) == [None]


def test_long_texts_are_cut_in_the_middle() -> None:
    text = "a" * 30_000 + "THE END"
    cut = transcripts.cut(text)
    assert len(cut) < 20_100 and cut.startswith("a" * 100) and cut.endswith("THE END")
    assert "[… 10,007 characters left out here: see the record …]" in cut  # 30,007 - 15,000 - 5,000
    assert transcripts.cut("short") == "short"


def test_read_records_reads_each_file_once_and_names_what_is_missing(tmp_path: Path) -> None:
    rollouts = tmp_path / "rollouts.jsonl"
    rollouts.write_text('{"n": 1}\nnot json\n{"n": 3}\n')
    gone = f"{tmp_path}/gone.jsonl:1"
    found, problems = transcripts.read_records(
        [f"{rollouts}:3", f"{rollouts}:1", None, f"{rollouts}:2", f"{rollouts}:9", gone, f"{rollouts}:3"]
    )
    assert found == [{"n": 3}, {"n": 1}, None, None, None, None, {"n": 3}]
    assert problems == [
        f"{rollouts}: 2 of the 4 lines asked for are missing or not JSON objects",
        f"{tmp_path}/gone.jsonl: no such file (1 record)",
    ]


# --- The page ---------------------------------------------------------------------------------------------


def test_histogram_bins_one_bar_per_value_or_equal_bins() -> None:
    assert html.histogram_bins([1.0, 0.0, 1.0], 0.0, 1.0) == [(0.0, 0.0, 1), (1.0, 1.0, 2)]
    rewards = [i / 40 for i in range(41)]  # 41 distinct values in [0, 1]: 20 bins, 1.0 in the last
    bins = html.histogram_bins(rewards, 0.0, 1.0)
    assert len(bins) == 20 and sum(count for _, _, count in bins) == 41
    assert bins[0] == (0.0, 0.05, 2) and bins[-1][2] == 3
    assert html.histogram_bins([], 0.0, 1.0) == []


def test_histogram_svg_marks_the_threshold() -> None:
    svg = html.histogram_svg([0.0, 1.0, 1.0], 1.0, 0.0, 1.0)
    assert svg.count('class="bar') == 2 and 'data-count="2"' in svg and 'class="threshold"' in svg
    assert "threshold" not in html.histogram_svg([1.0, 1.0], 1.0, 0.0, 1.0).split("</rect>")[-1].split("reward")[0]
    continuous = html.histogram_svg([i / 40 for i in range(41)], 0.5, 0.0, 1.0)
    assert continuous.count('class="bar') == 20 and 'class="threshold" x1="' in continuous


def test_colour_scale_runs_from_red_to_green() -> None:
    assert html.colour(0.0) == "#d73027" and html.colour(1.0) == "#1a9850" and html.colour(0.5) == "#fee08b"
    assert html.palette_index(0.0, 0.0, 1.0) == 0 and html.palette_index(1.0, 0.0, 1.0) == html.PALETTE_STEPS
    assert html.palette_index(5.0, 0.0, 10.0) == html.PALETTE_STEPS // 2
    assert html.reward_range([0.2, 0.9]) == (0.0, 1.0) and html.reward_range([-1.0, 3.0]) == (-1.0, 3.0)


def grid_results() -> list[RolloutResult]:
    return [
        result("steady", 0, 1.0), result("steady", 1, 1.0),
        result("flaky", 0, 1.0), result("flaky", 1, 0.0),
        result("broken", 0, None), result("broken", 1, 0.5),
        result("once", 0, 0.0),
    ]  # fmt: skip


def test_page_data_marks_each_task_for_the_filters() -> None:
    results = grid_results()
    baseline = {
        "rollouts": [{"dataset": DATA, "task_id": t, "status": "passed", "reward": 1.0} for t in ("steady", "flaky")]
    }
    flips = [Flip(f"{DATA}::flaky[r1]", 0.0, (1.0,))]
    data = html.page_data(conclude(results, baseline=baseline, flips=flips), results, baseline=baseline)
    (group,) = data["groups"]
    assert group["repeats"] == 2 and group["baseline"] and group["replay"] and group["threshold"] == 1.0
    tasks = {task["id"]: task for task in group["tasks"]}
    assert list(tasks) == ["steady", "flaky", "broken", "once"]
    assert tasks["steady"] == {"id": "steady", "c": [0, 1], "m": 1.0, "b": 1.0, "f": 0}
    assert tasks["flaky"]["f"] == html.FAILED | html.FLAKY | html.FLIPPED | html.DROPPED
    assert tasks["flaky"]["m"] == 0.5 and tasks["flaky"]["b"] == 1.0
    assert tasks["broken"]["f"] == html.ERRORED | html.FAILED and tasks["broken"]["m"] == 0.5
    assert tasks["once"]["c"] == [6, -1] and tasks["once"]["b"] is None
    assert data["rollouts"][4] == [
        f"{DATA}::broken[r0]",
        0,
        "error",
        None,
        "agent_run_error",
        None,
        -1,
        None,
        None,
        None,
    ]
    assert (
        data["rollouts"][3][2:4] == ["failed", 0.0] and data["rollouts"][3][6] == 0 and data["rollouts"][3][8] == [1.0]
    )
    assert data["rollouts"][0][6] == html.PALETTE_STEPS


def test_values_json_cannot_hold_become_text(tmp_path: Path) -> None:
    # Python's json reads NaN and Infinity; a verifier or a recording may have written them.
    rollouts = tmp_path / "rollouts.jsonl"
    rollouts.write_text('{"reward": 0.0, "score": NaN, "detail": {"x": Infinity}}\n')
    results = [result("t", 0, 0.0, f"{rollouts}:1")]
    flips = [Flip(results[0].nodeid, 0.0, (float("nan"), {"odd": 1}))]
    conclusion = conclude(results, flips=flips)
    text = html.render_page(conclusion, results, {}, transcripts=html.transcripts_of(results)[0])
    every = transcripts_in(text)
    assert every[0]["verifier"] == {"score": "nan", "detail": '{"x":Infinity}'}
    assert html.page_data(conclusion, results)["rollouts"][0][8] == ["nan", "{'odd': 1}"]


def test_page_data_shows_fields_other_engineers_add_to_results() -> None:
    # RolloutResult may grow fields (token counts, latency, a cause line): the page shows whatever holds a value.
    import dataclasses

    Wider = dataclasses.make_dataclass(
        "Wider", [("input_tokens", "int | None", None), ("latency", "float | None", None)], bases=(RolloutResult,),
        frozen=True,
    )  # fmt: skip
    plain = result("t", 0, 1.0)
    wide = Wider(**{f.name: getattr(plain, f.name) for f in dataclasses.fields(plain)}, input_tokens=70, latency=1.5)
    data = html.page_data(conclude([wide]), [wide])
    assert data["rollouts"][0][7] == {"input_tokens": 70, "latency": 1.5}


def test_page_is_self_contained_and_escapes_what_it_embeds(tmp_path: Path) -> None:
    evil = "</script><script>alert(1)</script><!--"
    rollouts = tmp_path / "rollouts.jsonl"
    rollouts.write_text(json.dumps({**TOOL_RECORD, "expected_answer": evil}) + "\n")
    results = [result("<b>task</b>", 0, 0.0, f"{rollouts}:1")]
    text = html.render_page(conclude(results), results, {"model": "<m>"}, transcripts=html.transcripts_of(results)[0])
    assert "<b>task</b>" not in text and "\\u003cb>task\\u003c/b>" in text and "&lt;m&gt;" in text
    assert evil not in text and text.count("</script>") == 3  # the data, the script, the transcripts
    # Nothing is fetched: no external URL in an attribute or a stylesheet.
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", text)
    assert "@import" not in text and "url(" not in text
    assert "default-src 'none'" in text
    # The embedded JSON reads back whole.
    assert transcripts_in(text)[0]["expected"] == evil


def test_transcripts_are_one_json_value_per_line_so_the_page_parses_only_the_opened_one() -> None:
    # Texts with newlines, line and paragraph separators and "</script>" stay on their rollout's line.
    texts = ["two\nlines\r\n", "sep\u2028arators\u2029", "</script><!--"]
    every: list[dict[str, Any] | None] = [{"expected": text, "items": [{"text": text}]} for text in texts]
    every.insert(1, None)
    lines = html.transcript_lines(every).split("\n")
    assert len(lines) == 4 and lines[1] == "null"
    assert [json.loads(line) for line in lines] == every
    assert "</script" not in html.transcript_lines(every)


def test_page_from_the_json_report_is_the_page_of_the_session(tmp_path: Path) -> None:
    # `python -m pytest_gym_eval html` reads the JSON report back into the summary model: the same page.
    results = grid_results()
    baseline_results = [result("steady", 0, 1.0), result("flaky", 0, 1.0), result("once", 0, 1.0)]
    baseline = build_report(conclude(baseline_results).summaries, baseline_results, {})
    flips = [Flip(f"{DATA}::flaky[r1]", 0.0, (1.0,))]
    conclusion = conclude(results, [Gate("mean_reward", 0.9)], baseline, flips)
    meta = {"model": "m", "created": "2026-11-30T00:00:00+00:00"}
    report = build_report(conclusion.summaries, results, meta, flips=flips)
    jsonschema.validate(report, json.loads(SCHEMA_PATH.read_text()))
    again, read_results = conclusion_from_report(json.loads(json.dumps(report)), baseline)
    assert read_results == results
    # repr, not ==: an empty latency summary holds nan, and from Python 3.13 a dataclass compares its fields with
    # == (nan != nan) where older ones compared tuples (which take a float as equal to itself).
    assert repr(again.summaries) == repr(conclusion.summaries)
    assert (again.exit_status, again.reason) == (conclusion.exit_status, conclusion.reason) == (
        1, "gym gates: FAIL - datasets/mcqa.jsonl mean reward 0.58 < 0.90; 1 rollout errored",
    )  # fmt: skip
    assert html.render_page(again, read_results, meta, baseline=baseline) == html.render_page(
        conclusion, results, meta, baseline=baseline
    )


def test_report_without_a_replay_has_no_flips_key() -> None:
    results = [result("t", 0, 1.0)]
    assert "flips" not in build_report(conclude(results).summaries, results, {})
    assert build_report(conclude(results).summaries, results, {}, flips=[])["flips"] == []


# --- Markdown ---------------------------------------------------------------------------------------------


def test_markdown_summary_has_the_numbers_the_gates_and_the_worst_tasks() -> None:
    results = [*grid_results(), result("a|b", 0, 0.0)]
    baseline = {"rollouts": [{"dataset": DATA, "task_id": "steady", "status": "passed", "reward": 1.0},
                             {"dataset": DATA, "task_id": "flaky", "status": "passed", "reward": 1.0}]}  # fmt: skip
    conclusion = conclude(results, [Gate("mean_reward", 0.9)], baseline, [Flip(f"{DATA}::flaky[r1]", 0.0, (1.0,))])
    text = markdown.render_markdown(
        conclusion, results, html_path=Path("/ci/out/report.html"), json_path=Path("/ci/out/report.json")
    )
    lines = text.splitlines()
    assert lines[0] == "### Gym eval: ❌ FAIL"
    assert lines[2].startswith("gym gates: FAIL - datasets/mcqa.jsonl mean reward")
    assert "#### `datasets/mcqa.jsonl` — ❌ FAIL" in lines
    summary = conclusion.summaries[0]
    assert f"| mean reward | {markdown.fmt.interval(summary.mean_reward)} (95% CI over 5 tasks) |" in lines
    assert "| tasks | 5 (8 rollouts: 7 scored, 1 error) |" in lines
    assert f"| mean reward >= 0.90 | {markdown.fmt.interval(summary.gates[0].interval)} | ❌ FAIL |" in lines
    worst = lines.index("| task | rewards by repeat | mean |")
    assert lines[worst - 2] == "Worst tasks (4 of 4 with a failed or errored rollout):"
    assert lines[worst + 2 : worst + 6] == [
        "| `once` | r0 0.00 | 0.00 |",
        "| `a\\|b` | r0 0.00 | 0.00 |",
        "| `flaky` | r0 1.00, r1 0.00 | 0.50 |",  # ties in dataset order
        "| `broken` | r0 ERR, r1 0.50 | 0.50 |",
    ]
    assert any(
        line.startswith("Against the baseline: mean reward change -0.25 [") and "`flaky` 1.00 → 0.50" in line
        for line in lines
    )
    assert "Verifier flips against the recording: 1: `datasets/mcqa.jsonl::flaky[r1]` reward 0, recorded 1.0" in lines
    assert lines[-1] == (
        "Reports on the machine that ran the session: HTML report `/ci/out/report.html`; JSON report "
        "`/ci/out/report.json`."
    )
    assert "http" not in text and "](" not in text  # no links


def test_markdown_code_spans_survive_backticks_and_pipes() -> None:
    assert markdown.code("a`b") == "``a`b``" and markdown.code("`x") == "`` `x ``"
    assert markdown.cell("a|b\nc") == "a\\|b c"


def test_markdown_when_everything_passed() -> None:
    results = [result("t", 0, 1.0)]
    text = markdown.render_markdown(conclude(results), results)
    assert text.startswith("### Gym eval: no gates\n") and "Every rollout passed." in text and "Reports" not in text


@pytest.mark.parametrize(
    ("rewards", "selected", "said"),
    [
        ([1.0] * 4, 24, "4 reported rollouts passed; 20 of 24 selected rollouts never reported"),
        ([1.0], 2, "1 reported rollout passed; 1 of 2 selected rollouts never reported"),
        ([], 3, "No rollout reported; 3 of 3 selected rollouts never reported"),
        ([1.0, None], 2, None),  # an error: the worst tasks list it
        ([1.0, 1.0], 2, "Every rollout passed."),
    ],
    ids=["20 of 24 unreported", "1 of 2 unreported", "none reported", "an error", "all reported and passed"],
)
def test_markdown_says_every_rollout_passed_only_when_every_selected_one_reported_and_passed(
    rewards: list[float | None], selected: int, said: str | None
) -> None:
    """A session stopped early (-x, Ctrl-C, a crash) passed every rollout it reported, not every one it selected."""
    results = [result(f"t{index}", 0, reward) for index, reward in enumerate(rewards)]
    summaries = summarize(
        results, thresholds={DATA: 1.0}, gates={DATA: []}, mode=GateMode.POINT,
        selected={DATA: {"mcqa_simple_agent": selected}},
    )  # fmt: skip
    text = markdown.render_markdown(Conclusion(summaries, [], None, -1, ""), results)
    assert ("Every rollout passed." in text) == (said == "Every rollout passed."), text
    if said is not None:
        assert said in text, text
    unreported = selected - len(rewards)
    table = [line for line in text.splitlines() if line.startswith("| unreported |")]
    why = "(the session stopped before they did: -x, --maxfail, an interrupt or a crash)"
    row = f"| unreported | {unreported} of {selected} selected rollouts never reported {why} |"
    assert table == ([row] if unreported else [])
    if unreported:
        assert f"({len(rewards)} of {selected} selected rollouts reported:" in text, text


# --- GitHub -----------------------------------------------------------------------------------------------


def test_annotations_for_gates_and_errored_rollouts_are_capped(tmp_path: Path) -> None:
    failures = tmp_path / "rollouts_failures.jsonl"
    failures.write_text(
        json.dumps({"_ng_failure_class": "agent_run_error", "_ng_failure_message": "HTTP 500, boom"}) + "\n"
    )
    results = [result(f"e{i:02d}", 0, None, f"{failures}:1" if i == 0 else None) for i in range(15)]
    results += [result("ok", 0, 1.0), result("wrong", 0, 0.0)]
    conclusion = conclude(results, [Gate("mean_reward", 0.9), Gate("pass_rate", 0.9)])
    found = github.session_annotations(conclusion, results, rootdir=tmp_path / "repo", workspace=tmp_path)
    assert [a.level for a in found] == ["error"] * 10
    assert found[0].title == "gym gate FAIL" and found[0].message.startswith("datasets/mcqa.jsonl: mean reward")
    assert found[0].file == "repo/datasets/mcqa.jsonl"
    assert found[2].message == "datasets/mcqa.jsonl::e00[r0]: agent_run_error: HTTP 500, boom"
    assert found[-1].message == "… and 8 more errored rollouts"  # 2 gates + 7 rollouts + this line
    assert found[2].command() == (
        "::error file=repo/datasets/mcqa.jsonl,title=gym rollout error::"
        "datasets/mcqa.jsonl::e00[r0]: agent_run_error: HTTP 500, boom"
    )


def test_inconclusive_gate_is_a_warning_only_when_it_passes() -> None:
    results = [result("a", 0, 1.0), result("b", 0, 0.0), result("c", 0, 1.0)]
    summaries = summarize(results, thresholds={}, gates={DATA: [Gate("mean_reward", 0.6)]}, mode=GateMode.LOWER_BOUND)
    strict = github.session_annotations(
        Conclusion(summaries, [], None, 1, "", verdicts=gate_verdicts(summaries, inconclusive_passes=False)), results
    )
    lenient = github.session_annotations(
        Conclusion(summaries, [], None, 0, "", verdicts=gate_verdicts(summaries, inconclusive_passes=True)), results
    )
    assert [(a.level, a.title) for a in strict] == [("error", "gym gate INCONCLUSIVE")]
    assert [(a.level, a.title) for a in lenient] == [("warning", "gym gate INCONCLUSIVE")]


def test_annotation_escaping() -> None:
    line = github.Annotation("error", "a: b, c", "50% done\nnext", "d,e:f").command()
    assert line == "::error file=d%2Ce%3Af,title=a%3A b%2C c::50%25 done%0Anext"


def test_step_summary_is_appended(tmp_path: Path) -> None:
    target = tmp_path / "summary.md"
    github.append_step_summary(target, "# one\n")
    github.append_step_summary(target, "# two\n")
    assert target.read_text() == "# one\n\n# two\n"


# --- The html subcommand ----------------------------------------------------------------------------------


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_command_line_help_is_usage_on_stdout_and_success(capsys: pytest.CaptureFixture[str], flag: str) -> None:
    assert cli([flag]) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith("usage: python -m pytest_gym_eval {provision,") and captured.err == ""
    assert "  html         build the HTML report from a JSON report" in captured.out


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        ([], "python -m pytest_gym_eval: error: no command given"),
        (["bogus"], "python -m pytest_gym_eval: error: unknown command 'bogus'"),
    ],
)
def test_command_line_without_a_known_command_says_what_is_wrong(
    capsys: pytest.CaptureFixture[str], args: list[str], problem: str
) -> None:
    assert cli(args) == 2
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert lines[0] == problem and lines[1].startswith("usage: python -m pytest_gym_eval {")
    assert captured.out == ""


def test_html_subcommand_writes_the_page_and_says_which_records_are_gone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = [result("t", 0, 1.0, f"{tmp_path}/run/gym-output/rollouts.jsonl:1")]
    write_report(tmp_path / "report.json", build_report(conclude(results).summaries, results, {"model": "m"}))
    assert cli(["html", str(tmp_path / "report.json"), "-o", str(tmp_path / "page.html")]) == 0
    out, err = capsys.readouterr()
    assert out == f"wrote {tmp_path / 'page.html'} (1 rollouts)\n"
    assert f"transcripts missing: {tmp_path}/run/gym-output/rollouts.jsonl: no such file (1 record)" in err
    assert "--gym-run-dir keeps them" in err
    page = (tmp_path / "page.html").read_text()
    assert "Transcripts missing:" in page and "datasets/mcqa.jsonl" in page


def test_html_subcommand_says_first_why_gyms_run_failed(tmp_path: Path) -> None:
    # The reason comes from the failed state the run's owner left in the report's run directory.
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    RunState("failed", "gym env start exited with status 1", "logs/gym-env-start.log").write(RunPaths(run_dir).state)
    results = [result("t", 0, 1.0)]
    meta = {"model": "m", "run_dir": str(run_dir)}
    write_report(tmp_path / "report.json", build_report(conclude(results).summaries, results, meta))
    assert cli(["html", str(tmp_path / "report.json"), "-o", str(tmp_path / "page.html")]) == 0
    page = (tmp_path / "page.html").read_text()
    note = f"{html.RUN_FAILED} gym env start exited with status 1 (log: logs/gym-env-start.log)"
    assert f'<p class="note run-failed">{escape(note)}</p>' in page
    # Without a failed state (or a run directory) there is no such note.
    RunState("finished").write(RunPaths(run_dir).state)
    assert cli(["html", str(tmp_path / "report.json"), "-o", str(tmp_path / "page.html")]) == 0
    assert "run-failed" not in (tmp_path / "page.html").read_text().split("<nav>")[1].split("</header>")[0]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "error: report: [Errno 2] No such file or directory"),
        ("{", "error: report: {path}: not a valid JSON report"),
        ('{"schema_version": 99, "datasets": [], "rollouts": []}', "schema_version 99 is not supported"),
    ],
)
def test_html_subcommand_rejects_a_bad_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str | None, message: str
) -> None:
    path = tmp_path / "report.json"
    if content is not None:
        path.write_text(content)
    assert cli(["html", str(path)]) == 2
    assert message.format(path=path) in capsys.readouterr().err
    assert not (tmp_path / "report.html").exists()


def test_html_subcommand_rejects_a_bad_baseline(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    results = [result("t", 0, 1.0)]
    write_report(tmp_path / "report.json", build_report(conclude(results).summaries, results, {}))
    assert cli(["html", str(tmp_path / "report.json"), "--baseline", str(tmp_path / "old.json")]) == 2
    assert "error: --baseline: [Errno 2]" in capsys.readouterr().err


# --- In a session (stand-in gym) --------------------------------------------------------------------------


def task(task_id: str, **fake: object) -> dict[str, object]:
    return {
        "id": task_id,
        "responses_create_params": {"input": [{"role": "user", "content": f"Question {task_id}?"}]},
        "expected_answer": "B",
        "fake": fake,
    }
