"""The HTML page, the Markdown summary and the JSON report as pytest sessions against the stand-in ``gym`` write them
(the pages built from values: tests/unit/test_pages.py)."""

from __future__ import annotations

import json
import re
import sys

import pytest

from pytest_gym_eval.__main__ import main as cli
from tests.support.fakes import FakeGym
from tests.support.pages import transcripts_in


def task(task_id: str, **fake: object) -> dict[str, object]:
    return {
        "id": task_id,
        "responses_create_params": {"input": [{"role": "user", "content": f"Question {task_id}?"}]},
        "expected_answer": "B",
        "fake": fake,
    }


def write_dataset(pytester: pytest.Pytester) -> str:
    rows = [
        task("good", reward=1.0),
        task("bad", reward=0.0, text="\\boxed{C}"),
        task("down", failure="agent_run_error"),
    ]
    (pytester.path / "mcqa.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return "mcqa.jsonl"


def test_session_writes_the_page_the_markdown_and_the_step_summary(
    pytester: pytest.Pytester, fake_gym: FakeGym, monkeypatch: pytest.MonkeyPatch
) -> None:
    (pytester.path / "summary.md").write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(pytester.path / "summary.md"))
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_WORKSPACE", str(pytester.path))
    name = write_dataset(pytester)
    result = pytester.runpytest(
        *fake_gym.args, name, "--gym-html=out/page.html", "--gym-markdown=out/summary.md",
        "--gym-report=out/report.json", "--gym-min-mean-reward=0.4",
    )  # fmt: skip
    assert result.ret == 1
    result.stdout.fnmatch_lines(
        [
            f"gym html report: {pytester.path / 'out' / 'page.html'}",
            f"gym markdown summary: {pytester.path / 'out' / 'summary.md'}",
            "::error file=mcqa.jsonl,title=gym rollout error::mcqa.jsonl::down[[]r0]: agent_run_error: fake agent *",
        ]
    )
    # 0.5 >= 0.4, but judged on 2 of the 3 selected rollouts (one errored): INCONCLUSIVE, an error annotation.
    gate_annotations = [line for line in result.outlines if line.startswith("::") and "gym gate" in line]
    assert gate_annotations == [
        "::error file=mcqa.jsonl,title=gym gate INCONCLUSIVE::mcqa.jsonl: mean reward 0.50 [0.00, 1.00] >= 0.40: "
        "INCONCLUSIVE (judged on 2 of 3 selected rollouts)"
    ]
    own = (pytester.path / "out" / "summary.md").read_text()
    assert (pytester.path / "summary.md").read_text() == "earlier step\n\n" + own
    assert "| `down` | r0 ERR | n/a |" in own and "HTML report `" in own
    page = (pytester.path / "out" / "page.html").read_text()
    data = json.loads(re.search(r'id="gym-data">(.*?)</script>', page, re.S).group(1))  # type: ignore[union-attr]
    assert [row[2] for row in data["rollouts"]] == ["passed", "failed", "error"]
    every = transcripts_in(page)
    assert every[1]["items"][every[1]["final"]]["text"] == "\\boxed{C}" and every[1]["expected"] == "B"
    assert every[2]["failure"]["message"] == "fake agent failure"
    assert every[2]["items"][0]["text"] == "Question down?" and every[2]["expected"] == "B"  # from Gym's inputs
    # The same page, made afterwards from the JSON report and the run directory it points to.
    assert cli(["html", str(pytester.path / "out" / "report.json"), "-o", str(pytester.path / "again.html")]) == 0
    assert (pytester.path / "again.html").read_text() == page


def test_without_github_actions_there_are_no_annotations(
    pytester: pytest.Pytester, fake_gym: FakeGym, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    result = pytester.runpytest(*fake_gym.args, write_dataset(pytester))
    assert not [line for line in result.outlines if line.startswith("::")]
    assert "gym html report" not in result.stdout.str()


def test_xdist_controller_writes_one_page_with_every_rollout(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    name = write_dataset(pytester)
    result = pytester.runpytest_subprocess(*fake_gym.args, name, "-n", "2", "--gym-repeats=2", "--gym-html=page.html")
    result.stdout.fnmatch_lines([f"gym html report: {pytester.path / 'page.html'}"])
    page = (pytester.path / "page.html").read_text()
    data = json.loads(re.search(r'id="gym-data">(.*?)</script>', page, re.S).group(1))  # type: ignore[union-attr]
    assert sorted(row[0] for row in data["rollouts"]) == sorted(
        f"mcqa.jsonl::{t}[r{r}]" for t in ("good", "bad", "down") for r in (0, 1)
    )
    every = transcripts_in(page)
    assert all(entry is not None for entry in every)


def test_html_and_markdown_paths_from_the_ini_file_are_relative_to_it(
    pytester: pytest.Pytester, fake_gym: FakeGym
) -> None:
    (pytester.path / "sub").mkdir()
    pytester.makeini("[pytest]\ngym_html = reports/page.html\ngym_markdown = reports/summary.md\n")
    name = write_dataset(pytester)
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(pytester.path / "sub")
        result = pytester.runpytest(*fake_gym.args, str(pytester.path / name), "-c", str(pytester.path / "tox.ini"))
    result.stdout.fnmatch_lines([f"gym html report: {pytester.path / 'reports' / 'page.html'}"])
    assert (pytester.path / "reports" / "summary.md").is_file()


def test_unwritable_page_is_reported_not_raised(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    (pytester.path / "blocked").write_text("a file, not a folder")
    result = pytester.runpytest(*fake_gym.args, write_dataset(pytester), "--gym-html=blocked/page.html")
    result.stdout.fnmatch_lines([f"gym html report: could not write {pytester.path / 'blocked' / 'page.html'}: *"])
    assert result.ret == 1 and "INTERNALERROR" not in result.stdout.str()


@pytest.mark.parametrize("where", ["a-folder", "blocked/report.json"])
def test_unwritable_json_report_is_reported_not_raised(
    pytester: pytest.Pytester, fake_gym: FakeGym, where: str
) -> None:
    """A ``--gym-report`` path that cannot be written (a folder, or below a file) says so on the terminal, as the
    HTML page does; the session's summary, the other reports and its exit status stand."""
    (pytester.path / "a-folder").mkdir()
    (pytester.path / "blocked").write_text("a file, not a folder")
    args = [write_dataset(pytester), f"--gym-report={where}", "--gym-html=page.html", "--junitxml=junit.xml"]
    result = pytester.runpytest(*fake_gym.args, *args)
    result.stdout.fnmatch_lines(
        ["*gym reward summary*", f"gym report: could not write {pytester.path / where}: *", "gym html report: *"]
    )
    assert result.ret == 1 and "Traceback" not in result.stdout.str() + result.stderr.str()
    assert (pytester.path / "page.html").is_file() and (pytester.path / "junit.xml").is_file()


def test_page_says_why_gyms_run_failed(
    pytester: pytest.Pytester, fake_gym: FakeGym, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_GYM_START", "fail")
    result = pytester.runpytest(*fake_gym.args, write_dataset(pytester), "--gym-html=page.html")
    assert result.ret == 1
    page = (pytester.path / "page.html").read_text()
    note = re.search(r'<p class="note run-failed">(.*?)</p>', page, re.S)
    assert note is not None and note.group(1).startswith("Gym&#x27;s run failed: `gym env start` exited with status 3")


def test_an_api_key_an_endpoint_echoed_stays_off_the_page(
    pytester: pytest.Pytester, fake_gym: FakeGym, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An endpoint that answers 401 with the request's Authorization header in its body puts the key in Gym's
    failure record, which the page shows as the rollout's transcript: it is redacted there, in the session's page
    and in one made afterwards from the JSON report, as in every other report."""
    key = "plain-value-without-a-pattern-42"  # only the exact value can catch it
    monkeypatch.setenv("PAGE_TEST_KEY", key)
    body = f'{{"error": "Incorrect API key provided: Bearer {key}", "headers": {{"authorization": "Bearer {key}"}}}}'
    rows = [task("good", reward=1.0), task("denied", failure="model_http_401", body=body)]
    (pytester.path / "mcqa.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    outputs = ["--gym-html=page.html", "--gym-report=report.json", "--junitxml=junit.xml"]
    result = pytester.runpytest(*fake_gym.args, "mcqa.jsonl", "--gym-api-key-env=PAGE_TEST_KEY", *outputs)
    assert result.ret == 1 and key not in result.stdout.str()
    page = (pytester.path / "page.html").read_text()
    (denied,) = [entry for entry in transcripts_in(page) if entry and entry.get("failure")]
    assert "[redacted]" in json.dumps(denied) and key not in json.dumps(denied)
    assert json.loads((pytester.path / "report.json").read_text())["meta"]["api_key_env"] == "PAGE_TEST_KEY"
    assert cli(["html", str(pytester.path / "report.json"), "-o", str(pytester.path / "again.html")]) == 0
    for name in ("page.html", "again.html", "report.json", "junit.xml"):
        assert key not in (pytester.path / name).read_text(), name


def test_a_shard_session_leaves_the_annotations_to_the_merge(
    pytester: pytest.Pytester, fake_gym: FakeGym, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A shard's gates judge its share only: its ::error lines would stay red on a run the merge passed.
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_WORKSPACE", str(pytester.path))
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    name = write_dataset(pytester)
    args = [*fake_gym.args, name, "--gym-min-mean-reward=0.9"]
    whole = pytester.runpytest(*args)
    assert any(line.startswith("::error") for line in whole.outlines)
    reports = []
    for index in (1, 2):
        shard = pytester.runpytest(*args, f"--gym-shard={index}/2", f"--gym-report=r{index}.json")
        assert not [line for line in shard.outlines if line.startswith("::")], shard.stdout.str()
        shard.stdout.fnmatch_lines(["*annotations: left to the merge of the shards*"])
        reports.append(str(pytester.path / f"r{index}.json"))
    merged = pytester.run(sys.executable, "-m", "pytest_gym_eval", "merge", *reports)
    assert any(line.startswith("::error") and "gym gate" in line for line in merged.outlines), merged.stdout.str()
