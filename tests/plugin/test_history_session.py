"""Sessions with ``--gym-history`` and ``--gym-quarantine`` (docs/history.md) against the stand-in ``gym``: each
session appends its run, the terminal and the JSON report carry each task's history, a quarantined task is left
out of the gates, a history that cannot be reached changes nothing else, a sharded run is written once, by
``merge``, an interrupted session writes nothing, and two sessions ending at once both land."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import jsonschema
import pytest

from pytest_gym_eval.cli.html import main as html_main
from pytest_gym_eval.cli.merge import main as merge_main
from pytest_gym_eval.history.backends import open_store
from pytest_gym_eval.reporting.json_report import SCHEMA_PATH
from tests.support.children import child_pytest_argv
from tests.support.fakes import FakeGym

REWARD_VAR = "HISTORY_TEST_REWARD_C"
"""Task c's reward in each session (the stand-in gym reads it: one dataset file, so one digest, one series)."""


@pytest.fixture
def alternating(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> str:
    """mcqa.jsonl with tasks a, b (always 1.0) and c (its reward from ``$HISTORY_TEST_REWARD_C``)."""
    lines = [
        {"id": "a", "responses_create_params": {"input": "Q a"}, "fake": {"reward": 1.0}},
        {"id": "b", "responses_create_params": {"input": "Q b"}, "fake": {"reward": 1.0}},
        {"id": "c", "responses_create_params": {"input": "Q c"}, "fake": {"reward_env": REWARD_VAR}},
    ]
    (pytester.path / "mcqa.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    monkeypatch.setenv(REWARD_VAR, "1.0")
    return "mcqa.jsonl"


def session(
    pytester: pytest.Pytester, fake_gym: FakeGym, monkeypatch: pytest.MonkeyPatch, reward_c: float, *args: str
) -> pytest.RunResult:
    monkeypatch.setenv(REWARD_VAR, str(reward_c))
    return pytester.runpytest(*fake_gym.args, "mcqa.jsonl", "-p", "no:cacheprovider", *args)


def report(pytester: pytest.Pytester, name: str = "report.json") -> dict[str, object]:
    data = json.loads((pytester.path / name).read_text())
    jsonschema.validate(data, json.loads(SCHEMA_PATH.read_text()))
    return data


def test_five_sessions_label_the_alternating_task_flaky_and_the_others_stable(
    pytester: pytest.Pytester, fake_gym: FakeGym, monkeypatch: pytest.MonkeyPatch, alternating: str
) -> None:
    history = pytester.path / "gym-history.db"
    for number, reward_c in enumerate([1.0, 0.0, 1.0, 0.0, 1.0], start=1):
        pages = ("--gym-report=report.json", "--gym-html=page.html", "--gym-markdown=summary.md")
        result = session(pytester, fake_gym, monkeypatch, reward_c, f"--gym-history={history}", *pages)
        result.stdout.fnmatch_lines([f"gym history: run {number} appended to {history}"])
    result.stdout.fnmatch_lines(
        [
            "history mcqa.jsonl: 5 runs, 1 flaky, 2 stable; no drift",
            "  mcqa.jsonl mean reward, last 5 runs: 1.00 0.67 1.00 0.67 1.00",
        ]
    )
    block = report(pytester)["history"]
    assert isinstance(block, dict)
    assert (block["target"], block["run_id"], block["error"]) == (str(history), 5, None)
    trend = "mcqa.jsonl mean reward, last 5 runs: 1.00 0.67 1.00 0.67 1.00"
    assert "history mcqa.jsonl: 5 runs, 1 flaky, 2 stable; no drift" in (pytester.path / "summary.md").read_text()
    assert trend in (pytester.path / "summary.md").read_text()
    page = (pytester.path / "page.html").read_text()
    assert trend in page
    # The page draws the history itself: each task's sparkline and the dataset's trend plot, inline SVG.
    assert '<a href="#history">History across runs</a>' in page
    card = page[page.index('<div class="card history-dataset" data-dataset="mcqa.jsonl" data-drift="false">') :]
    assert '<span class="badge pass drift-badge">no drift</span>' in card
    assert card.index('data-task="c" data-label="flaky"') < card.index("2 stable tasks")  # the flaky task first
    assert 'aria-label="run 1 pass, run 2 fail, run 3 pass, run 4 fail, run 5 pass" data-outcomes="PFPFP"' in card
    assert card.count('data-outcomes="PPPPP"') == 2
    means = [float(m) for m in re.findall(r'<circle class="mean [a-z]+" [^>]* data-mean="([^"]+)"', card)]
    assert means == pytest.approx([1, 2 / 3, 1, 2 / 3, 1])
    assert 'class="trend"' in card and 'data-alarm-run=""' in card
    section = page[page.index('<section class="history" id="history">') : page.index("</main>")]
    assert "://" not in section and "<script" not in section and "<img" not in section  # nothing to fetch
    # The page made afterwards from the JSON report (`python -m pytest_gym_eval html`) draws the same history.
    assert html_main([str(pytester.path / "report.json"), "-o", str(pytester.path / "again.html")]) == 0
    again = (pytester.path / "again.html").read_text()
    assert again[again.index('<section class="history"') : again.index("</main>")] == section
    tasks = block["datasets"]["mcqa.jsonl"]["tasks"]
    assert {task: tasks[task]["label"] for task in tasks} == {"a": "stable", "b": "stable", "c": "flaky"}
    assert tasks["c"]["sparkline"] == "PFPFP"
    assert tasks["c"]["evidence"] == "outcomes P F P F P over 5 runs, 4 changes, passed 3 of 5 rollouts"
    with open_store(history) as store:
        runs = store.runs()
    assert [run.rollouts for run in runs] == [3] * 5


def test_a_new_flake_is_named_by_the_session_that_made_it(
    pytester: pytest.Pytester, fake_gym: FakeGym, monkeypatch: pytest.MonkeyPatch, alternating: str
) -> None:
    history = f"--gym-history={pytester.path / 'h.db'}"
    for reward_c in (1.0, 0.0):
        session(pytester, fake_gym, monkeypatch, reward_c, history)
    result = session(pytester, fake_gym, monkeypatch, 1.0, history)
    result.stdout.fnmatch_lines(["  new flaky task c: outcomes P F P over 3 runs, 2 changes*"])


INTERRUPT_AFTER_FIRST = """
def pytest_runtest_logreport(report):
    if report.when == "call" and report.nodeid.endswith("::a[r0]"):
        raise KeyboardInterrupt  # Ctrl-C once the first rollout item has reported
"""


def test_an_interrupted_session_writes_nothing_so_it_never_counts_as_a_run(
    pytester: pytest.Pytester, fake_gym: FakeGym, monkeypatch: pytest.MonkeyPatch, alternating: str
) -> None:
    history = pytester.path / "gym-history.db"
    session(pytester, fake_gym, monkeypatch, 1.0, f"--gym-history={history}")
    pytester.makeconftest(INTERRUPT_AFTER_FIRST)
    monkeypatch.setenv(REWARD_VAR, "0.0")
    interrupted = pytester.runpytest_subprocess(
        *fake_gym.args, "mcqa.jsonl", f"--gym-history={history}", "--gym-report=report.json", "-p", "no:randomly"
    )
    assert interrupted.ret == pytest.ExitCode.INTERRUPTED, interrupted.stdout.str()[-3000:]
    said = [line for line in interrupted.outlines if line.startswith("gym history:")]
    assert said == [
        "gym history: not written: the session was interrupted, and part of a run would count as a whole one in "
        "stability and drift (a session resuming it with --gym-resume writes the whole run)"
    ]
    block = report(pytester)["history"]
    assert isinstance(block, dict)
    assert (block["run_id"], block["error"]) == (None, said[0])
    with open_store(history) as store:
        assert [run.rollouts for run in store.runs()] == [3]
    (pytester.path / "conftest.py").unlink()
    result = session(pytester, fake_gym, monkeypatch, 1.0, f"--gym-history={history}")
    result.stdout.fnmatch_lines(
        [f"gym history: run 2 appended to {history}", "history mcqa.jsonl: 2 runs, 3 stable; no drift"]
    )


MEET_BEFORE_WRITING = """
import os
import pytest

@pytest.hookimpl(wrapper=True)
def pytest_sessionfinish():
    # Each session opens its end of one FIFO, which blocks until the other session has opened the other end: both
    # reach the plugin's sessionfinish (which appends the run to the history) together, no sleep involved.
    fd = os.open("meet.fifo", os.O_WRONLY if os.environ["MEET_END"] == "w" else os.O_RDONLY)
    os.close(fd)
    return (yield)
"""


def test_two_sessions_ending_at_once_both_land_in_one_sqlite_history(
    pytester: pytest.Pytester, fake_gym: FakeGym, alternating: str
) -> None:
    history = pytester.path / "gym-history.db"
    pytester.makeconftest(MEET_BEFORE_WRITING)
    os.mkfifo(pytester.path / "meet.fifo")
    sessions = [
        subprocess.Popen(
            child_pytest_argv(*fake_gym.args, "mcqa.jsonl", f"--gym-run-dir=runs-{end}", f"--gym-history={history}"),
            cwd=pytester.path,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, "MEET_END": end},
        )
        for end in ("w", "r")
    ]
    try:
        outputs = [process.communicate(timeout=120)[0] for process in sessions]
    finally:
        for process in sessions:
            if process.poll() is None:
                process.kill()
                process.communicate()
    assert [process.returncode for process in sessions] == [0, 0], outputs
    appended = sorted(line for output in outputs for line in output.splitlines() if "gym history:" in line)
    assert appended == [f"gym history: run {number} appended to {history}" for number in (1, 2)], outputs
    with open_store(history) as store:
        assert [run.rollouts for run in store.runs()] == [3, 3]
        assert len(store.rollouts()) == 6


def write_quarantine(pytester: pytest.Pytester, expires: str) -> Path:
    path = pytester.path / "gym-quarantine.txt"
    path.write_text(f"# dataset  task  expires  reason\nmcqa.jsonl  c  {expires}  flips since the prompt change\n")
    return path


def test_quarantine_lets_a_gate_that_task_alone_failed_pass_saying_so(
    pytester: pytest.Pytester, fake_gym: FakeGym, monkeypatch: pytest.MonkeyPatch, alternating: str
) -> None:
    gate = ("--gym-min-mean-reward=1.0", "--gym-report=report.json")
    failed = session(pytester, fake_gym, monkeypatch, 0.0, *gate)
    assert failed.ret == 1
    failed.stdout.fnmatch_lines(["*gym gates: FAIL*mean reward 0.67 < 1.00*"])
    quarantine = write_quarantine(pytester, "2999-12-31")
    passed = session(pytester, fake_gym, monkeypatch, 0.0, *gate, f"--gym-quarantine={quarantine}")
    assert passed.ret == 0
    passed.stdout.fnmatch_lines(
        [
            "gym gates: the gate passes (1 quarantined task left out of the gates)",
            "gym quarantined: task c of mcqa.jsonl (0 of 1 rollouts passed) left out of the gates until 2999-12-31: "
            f"flips since the prompt change [[]{quarantine}:2]",
        ]
    )
    data = report(pytester)
    assert [r["task_id"] for r in data["rollouts"]] == ["a", "b", "c"]  # rolled out and reported


def test_an_expired_quarantine_gates_the_task_again(
    pytester: pytest.Pytester, fake_gym: FakeGym, monkeypatch: pytest.MonkeyPatch, alternating: str
) -> None:
    quarantine = write_quarantine(pytester, "2020-01-31")
    result = session(
        pytester, fake_gym, monkeypatch, 0.0, "--gym-min-mean-reward=1.0", f"--gym-quarantine={quarantine}"
    )
    assert result.ret == 1
    result.stdout.fnmatch_lines(
        [f"gym quarantine expired 2020-01-31: task c of mcqa.jsonl is gated again [[]{quarantine}:2]"]
    )


def test_a_malformed_quarantine_line_is_a_usage_error_naming_the_file_and_line(
    pytester: pytest.Pytester, fake_gym: FakeGym, monkeypatch: pytest.MonkeyPatch, alternating: str
) -> None:
    quarantine = pytester.path / "q.txt"
    quarantine.write_text("mcqa.jsonl c 2999-02-30 a day that is not\n")
    result = session(pytester, fake_gym, monkeypatch, 1.0, f"--gym-quarantine={quarantine}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*--gym-quarantine: {quarantine}:1: expiry '2999-02-30' is not a date*"])


@pytest.mark.parametrize("kind", ["postgres-closed-port", "sqlite-unwritable"])
def test_an_unreachable_history_leaves_the_status_and_reports_and_says_so_once(
    pytester: pytest.Pytester, fake_gym: FakeGym, monkeypatch: pytest.MonkeyPatch, alternating: str, kind: str
) -> None:
    if kind == "postgres-closed-port":
        pytest.importorskip("psycopg")
        target, shown = "postgresql://evals:s3cret-pw@127.0.0.1:1/evals", "postgresql://evals:***@127.0.0.1:1/evals"
    else:
        blocker = pytester.path / "not-a-folder"
        blocker.write_text("")
        target = shown = str(blocker / "history.db")
    args = ("--gym-min-mean-reward=0.5", "--gym-report=report.json", "--gym-markdown=summary.md", "--junitxml=j.xml")
    result = session(pytester, fake_gym, monkeypatch, 0.0, *args, f"--gym-history={target}")
    assert result.ret == 0  # the gate passes: the history does not change that
    said = [line for line in result.outlines if line.startswith("gym history: not written")]
    assert len(said) == 1 and shown in said[0], result.outlines
    assert "s3cret-pw" not in result.stdout.str() + result.stderr.str()
    data = report(pytester)
    block = data["history"]
    assert isinstance(block, dict)
    assert (block["target"], block["run_id"]) == (shown, None)
    assert block["error"] == said[0]
    assert "s3cret-pw" not in json.dumps(data)
    assert said[0] in (pytester.path / "summary.md").read_text()
    assert (pytester.path / "j.xml").is_file()


def test_shards_do_not_write_and_the_merge_writes_the_run_once(
    pytester: pytest.Pytester,
    fake_gym: FakeGym,
    monkeypatch: pytest.MonkeyPatch,
    alternating: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    history = pytester.path / "gym-history.db"
    for index in (1, 2):
        result = session(
            pytester, fake_gym, monkeypatch, 0.0, f"--gym-shard={index}/2",
            f"--gym-history={history}", f"--gym-report=shard{index}.json",
        )  # fmt: skip
        result.stdout.fnmatch_lines([f"gym history: not written by shard {index}/2; *merge --gym-history*"])
    assert not history.exists()
    capsys.readouterr()
    status = merge_main(
        [str(pytester.path / "shard1.json"), str(pytester.path / "shard2.json"), f"--gym-history={history}",
         f"--gym-report={pytester.path / 'merged.json'}", f"--gym-html={pytester.path / 'merged.html'}"]
    )  # fmt: skip
    out = capsys.readouterr().out
    assert status == 1  # task c failed; no gate: the merge's status says so, the history does not change it
    assert f"gym history: run 1 appended to {history}" in out.splitlines()
    with open_store(history) as store:
        [run] = store.runs()
    assert run.rollouts == 3
    assert report(pytester, "merged.json")["history"]["run_id"] == 1  # type: ignore[index]
    page = (pytester.path / "merged.html").read_text()
    assert 'data-task="c" data-label="broken"' in page and 'data-outcomes="F"' in page  # the merged run's history

    quarantine = write_quarantine(pytester, "2999-12-31")
    shards = [str(pytester.path / "shard1.json"), str(pytester.path / "shard2.json"), "--gym-min-mean-reward=1.0"]
    assert merge_main(shards) == 1  # task c fails the gate
    assert merge_main([*shards, f"--gym-quarantine={quarantine}"]) == 0
    out = capsys.readouterr().out
    assert "gym gates: the gate passes (1 quarantined task left out of the gates)" in out
    said = "gym quarantined: task c of mcqa.jsonl (0 of 1 rollouts passed) left out of the gates until 2999-12-31"
    assert f"{said}: flips since the prompt change [{quarantine}:2]" in out
    with open_store(history) as store:
        assert len(store.runs()) == 1  # a merge without --gym-history writes nothing


def test_under_xdist_the_controller_writes_the_run_once_and_workers_honour_the_quarantine(
    pytester: pytest.Pytester, fake_gym: FakeGym, monkeypatch: pytest.MonkeyPatch, alternating: str
) -> None:
    history = pytester.path / "gym-history.db"
    quarantine = write_quarantine(pytester, "2999-12-31")
    monkeypatch.setenv(REWARD_VAR, "0.0")
    result = pytester.runpytest_subprocess(
        *fake_gym.args, "mcqa.jsonl", "-n", "2", "--gym-repeats=2", f"--gym-history={history}",
        f"--gym-quarantine={quarantine}", "--gym-min-mean-reward=1.0", "-p", "no:cacheprovider",
    )  # fmt: skip
    assert result.ret == 0, result.stdout.str()[-3000:]  # the gym-gate item (on a worker) left c out too
    assert result.stdout.str().count("gym history: run 1 appended") == 1
    with open_store(history) as store:
        [run] = store.runs()
    assert run.rollouts == 6


HEAD_SERVER_SEEN = """
import pathlib
from pytest_gym_eval.session.gym_session import SESSION_KEY

def pytest_runtest_teardown(item):
    worker = getattr(item.config, "workerinput", {}).get("workerid", "main")
    pathlib.Path(f"head-{worker}.txt").write_text(str(item.config.stash[SESSION_KEY].head_server))
"""


def test_an_xdist_session_adds_to_the_series_of_one_process_and_its_workers_know_the_head_server(
    pytester: pytest.Pytester, fake_gym: FakeGym, alternating: str, warm_registry: Path
) -> None:
    history = pytester.path / "gym-history.db"
    pytester.makeconftest(HEAD_SERVER_SEEN)
    common = (*fake_gym.args, "--gym-keep-alive=600", "mcqa.jsonl", f"--gym-history={history}")
    one = pytester.runpytest_subprocess(*common, "--gym-report=one.json")
    assert one.ret == 0, one.stdout.str()[-3000:]
    two = pytester.runpytest_subprocess(*common, "-n", "2", "--gym-report=two.json")
    assert two.ret == 0, two.stdout.str()[-3000:]
    two.stdout.fnmatch_lines([f"gym history: run 2 appended to {history}", "history mcqa.jsonl: 2 runs, 3 stable;*"])
    with open_store(history) as store:
        assert [run.model for run in store.runs()] == ["replay", "replay"]
        [(key, series)] = store.latest_series().items()
    assert (key.model, len(series)) == ("replay", 2)
    head = report(pytester, "two.json")["meta"]["head_server"]  # type: ignore[index]
    seen = {path.name: path.read_text() for path in pytester.path.glob("head-gw*.txt")}
    assert seen and set(seen.values()) == {head}, (seen, head)


def test_each_policy_is_a_series_of_its_own_so_their_disagreement_is_no_flake(
    pytester: pytest.Pytester, fake_gym: FakeGym
) -> None:
    rewards = {"mcqa_simple_agent": 1.0, "mcqa_simple_agent__cand": 0.0}  # base passes the task, cand fails it
    row = {"id": "t", "responses_create_params": {"input": "Q"}, "fake": {"reward_by_agent": rewards}}
    (pytester.path / "mcqa.jsonl").write_text(json.dumps(row) + "\n")
    history = pytester.path / "gym-history.db"
    policies = [f"--gym-policy=base=replay:{fake_gym.recording}", f"--gym-policy=cand=replay:{fake_gym.recording}"]
    for _ in range(2):
        result = pytester.runpytest_subprocess(
            f"--gym-checkout={fake_gym.checkout}", "-p", "no:cacheprovider", *policies, "mcqa.jsonl",
            f"--gym-history={history}", "--gym-report=report.json",
        )  # fmt: skip
    result.stdout.fnmatch_lines(
        [
            "history mcqa.jsonl [[]base: replay]: 2 runs, 1 stable; no drift",
            "history mcqa.jsonl [[]cand: replay]: 2 runs, 1 broken; no drift",  # always failing
        ]
    )
    assert "flaky" not in "\n".join(line for line in result.outlines if "history" in line)
    with open_store(history) as store:
        found = store.latest_series()
    assert [(key.policy, key.model) for key in found] == [("base", "replay"), ("cand", "replay")]
    outcomes = {key.policy: [r.status for entry in series for r in entry.rollouts] for key, series in found.items()}
    assert outcomes == {"base": ["passed", "passed"], "cand": ["failed", "failed"]}
    block = report(pytester)["history"]["datasets"]  # type: ignore[index]
    assert {name: data["tasks"]["t"]["label"] for name, data in block.items()} == {
        "mcqa.jsonl [base: replay]": "stable",
        "mcqa.jsonl [cand: replay]": "broken",
    }


def test_merging_the_same_reports_twice_stores_the_run_once(
    pytester: pytest.Pytester,
    fake_gym: FakeGym,
    monkeypatch: pytest.MonkeyPatch,
    alternating: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    history = pytester.path / "gym-history.db"
    for index in (1, 2):
        session(pytester, fake_gym, monkeypatch, 1.0, f"--gym-shard={index}/2", f"--gym-report=shard{index}.json")
    shards = [str(pytester.path / "shard1.json"), str(pytester.path / "shard2.json"), f"--gym-history={history}"]
    capsys.readouterr()
    assert merge_main(shards) == 0
    assert f"gym history: run 1 appended to {history}" in capsys.readouterr().out.splitlines()
    assert merge_main(list(reversed(shards[:2])) + shards[2:]) == 0  # a retried job, its reports in another order
    out = capsys.readouterr().out.splitlines()
    assert f"gym history: run 1 is in {history} already (the same reports): not written again" in out
    assert "history mcqa.jsonl: 1 runs, 3 stable; no drift" in out
    with open_store(history) as store:
        assert [(run.id, run.rollouts) for run in store.runs()] == [(1, 3)]


def test_a_session_whose_gym_never_started_stores_nothing_and_says_so(
    pytester: pytest.Pytester, fake_gym: FakeGym, monkeypatch: pytest.MonkeyPatch, alternating: str
) -> None:
    history = pytester.path / "gym-history.db"
    monkeypatch.setenv("FAKE_GYM_START", "fail")
    result = session(pytester, fake_gym, monkeypatch, 1.0, f"--gym-history={history}", "--gym-report=report.json")
    assert result.ret == 1
    said = [line for line in result.outlines if line.startswith("gym history:")]
    assert said == [
        "gym history: not written: Gym never started (no rollout was rolled out), and a run without outcomes would "
        "count in no task's stability yet start every series' window"
    ]
    assert report(pytester)["history"]["error"] == said[0]  # type: ignore[index]
    assert not history.exists()


def test_a_quarantine_line_matching_no_task_of_the_run_is_a_warning(
    pytester: pytest.Pytester, fake_gym: FakeGym, monkeypatch: pytest.MonkeyPatch, alternating: str
) -> None:
    quarantine = pytester.path / "gym-quarantine.txt"
    quarantine.write_text(
        "mcqa.jsonl c 2999-12-31 known\ndata/mcqa.jsonl a 2999-12-31 written otherwise\nmcqa.jsonl 17 2999-12-31 gone\n"
        "mcqa.jsonl b 2999-12-31 collected, though this session deselected it\n"
    )
    result = session(
        pytester, fake_gym, monkeypatch, 1.0, f"--gym-quarantine={quarantine}", "--deselect=mcqa.jsonl::b[r0]"
    )
    assert result.ret == 0
    warnings = [line for line in result.outlines if "matches nothing" in line]
    assert warnings == [
        f"gym quarantine warning: {quarantine}:2: quarantine of task 'a' of data/mcqa.jsonl matches nothing: no "
        "dataset is named 'data/mcqa.jsonl' (datasets: mcqa.jsonl)",
        f"gym quarantine warning: {quarantine}:3: quarantine of task '17' of mcqa.jsonl matches nothing: no task "
        "'17' in mcqa.jsonl",
    ]


def test_merging_the_report_of_a_session_that_wrote_its_run_writes_nothing_again(
    pytester: pytest.Pytester,
    fake_gym: FakeGym,
    monkeypatch: pytest.MonkeyPatch,
    alternating: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    history = pytester.path / "gym-history.db"
    session(pytester, fake_gym, monkeypatch, 1.0, f"--gym-history={history}", "--gym-report=report.json")
    capsys.readouterr()
    assert merge_main([str(pytester.path / "report.json"), f"--gym-history={history}"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert f"gym history: run 1 is in {history} already (the same reports): not written again" in out
    with open_store(history) as store:
        assert len(store.runs()) == 1
