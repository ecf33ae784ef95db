"""Outcomes and the run's error paths, against a stand-in ``gym`` (tests/support/fake_gym.py).

These are fast checks of what real Gym rarely does on demand (crash, hang, lose a rollout); the same behaviour
is proven against real Gym in tests/real_gym/test_real_gym.py.
"""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_gym_eval.gym.processes import session_members
from tests.support.children import assert_interrupted, interrupt_once_reported, run_until_reported, wait_until
from tests.support.fakes import FakeGym


def task(task_id: str, **fake: object) -> dict[str, object]:
    return {
        "id": task_id,
        "responses_create_params": {"input": [{"role": "user", "content": f"Question {task_id}?"}]},
        "expected_answer": "B",
        "fake": fake,
    }


def dataset(pytester: pytest.Pytester, *rows: dict[str, object], name: str = "mcqa.jsonl") -> str:
    (pytester.path / name).write_text("".join(json.dumps(r) + "\n" for r in rows))
    return name


def outcomes(result: pytest.RunResult) -> dict[str, str]:
    """node id -> passed/failed/error from the -rA short summary."""
    found = {}
    for line in result.outlines:
        for word in ("PASSED", "FAILED", "ERROR"):
            if line.startswith(word + " "):
                found[line.split()[1]] = word.lower()
    return found


def run(pytester: pytest.Pytester, fake_gym: FakeGym, *args: str) -> pytest.RunResult:
    return pytester.runpytest(*fake_gym.args, "-rA", *args)


def assert_nothing_left(fake_gym: FakeGym) -> None:
    sessions = {call["sid"] for call in fake_gym.calls()}
    assert sessions, "the fake gym was never called"
    assert [sid for sid in sessions if session_members(int(sid))] == []


def signal_servers_after_first(fake_gym: FakeGym, kill: str, sig: str) -> str:
    """A conftest that, once ``first[r0]`` reported, sends ``sig`` to the stand-in's ``gym env start`` with
    ``kill`` (``os.killpg``: the whole process group; ``os.kill``: the process)."""
    return f"""
import json, os, signal
def pytest_runtest_logreport(report):
    if report.when == "call" and report.nodeid.endswith("first[r0]"):
        calls = [json.loads(l) for l in open({str(fake_gym.calls_path)!r})]
        (start,) = [c for c in calls if c["argv"][:2] == ["env", "start"]]
        {kill}(start["pid"], signal.{sig})
"""


def test_rewards_map_to_pass_and_fail(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    name = dataset(pytester, task("good", reward=1.0), task("bad", reward=0.0, text="I think \\boxed{C}"))
    result = run(pytester, fake_gym, name)
    assert outcomes(result) == {"mcqa.jsonl::good[r0]": "passed", "mcqa.jsonl::bad[r0]": "failed"}
    result.stdout.fnmatch_lines(
        [
            "*reward 0 is below the pass threshold 1",
            "*prompt:   Question bad?",
            "*expected: B",
            "*output:   I think \\boxed{C}",
            "*record:   *rollouts.jsonl:*",
        ]
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert_nothing_left(fake_gym)


def test_pass_threshold_and_continuous_rewards(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    name = dataset(pytester, task("half", reward=0.5), task("low", reward=0.49))
    result = run(pytester, fake_gym, name, "--gym-pass-threshold", "0.5")
    assert outcomes(result) == {"mcqa.jsonl::half[r0]": "passed", "mcqa.jsonl::low[r0]": "failed"}


@pytest.mark.parametrize(
    ("fake", "message"),
    [
        ({"failure": "agent_run_error"}, "*Gym recorded the rollout as failed (agent_run_error): fake agent failure"),
        ({"no_reward": True}, "*the rollout has no reward"),
        ({"reward": "NaN"}, "*reward that is not a finite number: 'NaN'"),
        ({"reward": None}, "*the rollout has no reward"),
        ({"skip": True}, "*gym eval run wrote no rollout for this item: it exited with status 0*"),
    ],
)
def test_infrastructure_failures_are_errors_not_zero_rewards(
    pytester: pytest.Pytester, fake_gym: FakeGym, fake: dict[str, object], message: str
) -> None:
    name = dataset(pytester, task("ok"), task("broken", **fake))
    result = run(pytester, fake_gym, name)
    assert outcomes(result) == {"mcqa.jsonl::ok[r0]": "passed", "mcqa.jsonl::broken[r0]": "error"}
    result.stdout.fnmatch_lines([message])


def test_a_failed_rollout_under_replay_points_to_the_replay_log(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    name = dataset(pytester, task("broken", failure="agent_run_error"), task("no_reward", no_reward=True))
    result = run(pytester, fake_gym, name)
    assert set(outcomes(result).values()) == {"error"}
    # Count in the error sections only: the short summary repeats messages whole or cut to the terminal width
    # (pytest prints them whole when $CI is set).
    output = result.stdout.str().split("short test summary info")[0]
    assert output.count("the replay model's requests: ") == 1  # Gym's failure only, not a missing reward
    result.stdout.fnmatch_lines(["*the replay model's requests: *logs/replay-model.jsonl (a 404 there: *"])


def test_nan_reward_in_json_is_an_error(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    # json.dumps writes float("nan") as the bare token NaN, which Python's json reads back.
    name = dataset(pytester, task("nan", nan_reward=True))
    result = run(pytester, fake_gym, name)
    assert outcomes(result) == {"mcqa.jsonl::nan[r0]": "error"}
    result.stdout.fnmatch_lines(["*not a finite number: nan*"])


def test_crashed_eval_run_is_resumed_once(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    name = dataset(pytester, task("first"), task("crashes", crash=True), task("third"))
    result = run(pytester, fake_gym, name)
    assert set(outcomes(result).values()) == {"passed"}
    eval_calls = [c["argv"] for c in fake_gym.calls() if c["argv"][:2] == ["eval", "run"]]
    assert len(eval_calls) == 2 and "--resume" in eval_calls[1] and "--resume" not in eval_calls[0]


def test_rollout_timeout_turns_a_missing_rollout_into_an_error(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    name = dataset(pytester, task("done"), task("held", hold=True))
    result = run(pytester, fake_gym, name, "--gym-rollout-timeout", "1")
    assert outcomes(result) == {"mcqa.jsonl::done[r0]": "passed", "mcqa.jsonl::held[r0]": "error"}
    result.stdout.fnmatch_lines(["*no rollout landed for 1 s (--gym-rollout-timeout*"])
    assert_nothing_left(fake_gym)


def test_gym_that_will_not_start_errors_every_item(
    pytester: pytest.Pytester, fake_gym: FakeGym, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_GYM_START", "fail")
    name = dataset(pytester, task("a"), task("b"), task("c"))
    result = run(pytester, fake_gym, name)
    assert set(outcomes(result).values()) == {"error"} and len(outcomes(result)) == 3
    result.stdout.fnmatch_lines(
        [
            "*Gym would not start: `gym env start` exited with status 3 before its servers were ready: Error: fake "
            "start failure (*gym-env-start.log:2)",
            "log: *gym-env-start.log",
        ]
    )
    assert [c for c in fake_gym.calls() if c["argv"][:2] == ["eval", "run"]] == []
    # The first item shows the whole message, the others its first line (which says why) pointing to it.
    output = result.stdout.str()
    assert sum(line.startswith("log: ") for line in result.outlines) == 1
    assert output.count("(the whole message and the log: the error of mcqa.jsonl::a[r0] above)") == 2


def test_startup_timeout(pytester: pytest.Pytester, fake_gym: FakeGym, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_GYM_START", "hang")
    name = dataset(pytester, task("a"))
    result = run(pytester, fake_gym, name, "--gym-startup-timeout", "1")
    assert outcomes(result) == {"mcqa.jsonl::a[r0]": "error"}
    result.stdout.fnmatch_lines(["*were not ready within 1 s (--gym-startup-timeout)*"])
    assert_nothing_left(fake_gym)


def test_only_selected_pairs_are_rolled_out(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    name = dataset(pytester, task("alpha"), task("beta"))
    result = run(pytester, fake_gym, name, "--gym-repeats", "3", "-k", "beta and not r0", "--gym-run-dir", "runs")
    assert outcomes(result) == {"mcqa.jsonl::beta[r1]": "passed", "mcqa.jsonl::beta[r2]": "passed"}
    (run_dir,) = (pytester.path / "runs").iterdir()
    rows = [json.loads(line) for line in (run_dir / "gym-input.jsonl").read_text().splitlines()]
    assert [(r["id"], r["_ng_task_index"]) for r in rows] == [("beta", 0), ("beta", 1)]
    assert all(r["agent_ref"] == {"type": "responses_api_agents", "name": "mcqa_simple_agent"} for r in rows)


MARKS_CONFTEST = """
import pytest

def pytest_collection_modifyitems(items):
    for item in items:
        if item.name.startswith("skipped["):
            item.add_marker(pytest.mark.skip(reason="known broken"))
        if item.name.startswith("conditional["):
            item.add_marker(pytest.mark.skipif(True, reason="not here"))
        if item.name.startswith("notrun["):
            item.add_marker(pytest.mark.xfail(run=False, reason="not run"))
        if item.name.startswith("bad["):
            item.add_marker(pytest.mark.xfail(reason="known bad"))

@pytest.fixture(autouse=True)
def skip_late(request):
    if request.node.name.startswith("late["):
        pytest.skip("decided at run time")
"""


def test_skip_and_xfail_marks_on_rollout_items(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    """A user's skip marks (and xfail with run=False) keep a pair out of Gym's run, as a deselection does; an
    xfailed rollout keeps its reward in the summary; a pair skipped at run time is not a rollout that "never
    reported" (the session did not stop early): the gates are judged on what ran, and they pass."""
    pytester.makeconftest(MARKS_CONFTEST)
    rows = [task("good"), task("bad", reward=0.0), task("skipped"), task("conditional"), task("notrun")]
    name = dataset(pytester, *rows, task("late"))
    args = [name, "--gym-run-dir", "runs", "--gym-min-mean-reward=0.4", "--gym-report=report.json"]
    result = run(pytester, fake_gym, *args)
    (run_dir,) = (pytester.path / "runs").iterdir()
    rolled_out = [json.loads(line)["id"] for line in (run_dir / "gym-input.jsonl").read_text().splitlines()]
    assert rolled_out == ["good", "bad", "late"]
    assert "never reported" not in result.stdout.str()
    result.stdout.fnmatch_lines(
        ["*mean reward 0.50 * >= 0.40: PASS (set on the command line)", "gym gates: the gate passes"]
    )
    assert result.ret == pytest.ExitCode.OK
    report = json.loads((pytester.path / "report.json").read_text())
    assert {r["task_id"]: (r["status"], r["reward"]) for r in report["rollouts"]} == {
        "good": ("passed", 1.0),
        "bad": ("failed", 0.0),
    }
    (summary,) = report["datasets"]
    assert (summary["rollouts"], summary["mean_reward"]["estimate"]) == (2, 0.5)
    (planned,) = report["plan"]["datasets"]
    assert planned["selected"] == {"good": [0], "bad": [0]}  # what a merge of shard reports expects


def test_xfailed_errors_and_strict_xpasses_keep_their_rollouts_status(
    pytester: pytest.Pytester, fake_gym: FakeGym
) -> None:
    pytester.makeconftest(
        "import pytest\n"
        "def pytest_collection_modifyitems(items):\n"
        "    for item in items:\n"
        "        item.add_marker(pytest.mark.xfail(strict=item.name.startswith('good['), reason='marked'))\n"
    )
    name = dataset(pytester, task("good"), task("down", failure="agent_run_error"))
    result = run(pytester, fake_gym, name, "--gym-report=report.json")
    report = json.loads((pytester.path / "report.json").read_text())
    statuses = {r["task_id"]: (r["status"], r["failure_class"]) for r in report["rollouts"]}
    assert statuses == {"good": ("passed", None), "down": ("error", "agent_run_error")}
    assert "never reported" not in result.stdout.str()
    result.stdout.fnmatch_lines(["*errors      agent_run_error 1"])


@pytest.mark.parametrize("repeats", ["1", "2"])
def test_keep_duplicates_rolls_each_pair_out_once(pytester: pytest.Pytester, fake_gym: FakeGym, repeats: str) -> None:
    """A dataset named twice with ``--keep-duplicates`` collects each item twice; its pairs are rolled out once
    (both copies report that rollout), not twice with half of them counted as never reported."""
    name = dataset(pytester, task("good"), task("bad", reward=0.0))
    args = ["--keep-duplicates", name, name, "--gym-repeats", repeats, "--gym-run-dir", "runs"]
    result = run(pytester, fake_gym, *args, "--gym-min-mean-reward=0.4", "--gym-report=report.json")
    (run_dir,) = (pytester.path / "runs").iterdir()
    rows = [json.loads(line) for line in (run_dir / "gym-input.jsonl").read_text().splitlines()]
    assert [row["id"] for row in rows] == ["good", "bad"]  # whole tasks: one row each, also with 2 repeats
    assert "never reported" not in result.stdout.str()
    assert result.ret == pytest.ExitCode.OK
    report = json.loads((pytester.path / "report.json").read_text())
    assert len(report["rollouts"]) == 2 * int(repeats)


def test_each_session_gets_a_fresh_run_dir_named_on_the_terminal(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    name = dataset(pytester, task("a"))
    first = run(pytester, fake_gym, name, "--gym-run-dir", "runs")
    second = run(pytester, fake_gym, name, "--gym-run-dir", "runs")
    dirs = set((pytester.path / "runs").iterdir())
    named = {
        Path(line.split("gym run directory: ")[1])
        for r in (first, second)
        for line in r.outlines
        if line.startswith("gym run directory: ")  # (not another session's leftovers, which name theirs too)
    }
    assert len(dirs) == 2 and named == dirs


def test_exit_first_stops_gym_without_waiting_for_the_rest(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    # The second rollout never comes unless Gym is stopped: -x must report the first failure and end the run.
    name = dataset(pytester, task("bad", reward=0.0), task("held", hold=True))
    result = run(pytester, fake_gym, name, "-x")
    assert outcomes(result) == {"mcqa.jsonl::bad[r0]": "failed"}
    assert_nothing_left(fake_gym)


def test_row_agent_ref_and_gym_agent_choose_the_agent(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    row = task("own") | {"agent_ref": {"name": "nonexistent_agent"}}
    name = dataset(pytester, row, task("default"))
    result = run(pytester, fake_gym, name)
    assert result.ret == pytest.ExitCode.USAGE_ERROR and outcomes(result) == {}
    result.stderr.fnmatch_lines(["ERROR: no Gym config in * defines the agent 'nonexistent_agent'*"])


def test_api_key_never_reaches_argv_logs_or_reports(
    pytester: pytest.Pytester, fake_gym: FakeGym, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pytest_gym_eval.replay import ReplayServer

    secret = "sk-test-SECRET-1234567890"
    monkeypatch.setenv("MY_KEY", secret)
    name = dataset(pytester, task("a"), task("b", reward=0.0))
    with ReplayServer([fake_gym.recording]) as server:
        result = pytester.runpytest(
            f"--gym-checkout={fake_gym.checkout}", "--gym-model-url", server.base_url, "--gym-model", "m",
            "--gym-api-key-env", "MY_KEY", "--gym-run-dir", "runs", "--junitxml", "junit.xml", "-rA", name,
        )  # fmt: skip
    assert outcomes(result) == {"mcqa.jsonl::a[r0]": "passed", "mcqa.jsonl::b[r0]": "failed"}
    assert secret not in result.stdout.str() + result.stderr.str()
    assert all(secret not in " ".join(call["argv"]) for call in fake_gym.calls())
    for path in [pytester.path / "junit.xml", *(pytester.path / "runs").rglob("*")]:
        if path.is_file():
            assert secret not in path.read_text(errors="replace"), path
    (config,) = (pytester.path / "runs").rglob("gym-config.yaml")
    assert json.loads(config.read_text())["policy_api_key"] == "${oc.env:MY_KEY}"


def test_credentials_in_the_model_url_never_reach_the_terminal_or_reports(
    pytester: pytest.Pytester, fake_gym: FakeGym
) -> None:
    """A model URL's password and query string (where some gateways take a key) are redacted wherever the URL is
    shown: the start-up error of every item, JUnit's message and ``gym.model_url``, the JSON report and the page.
    (A model type whose client takes such URLs: Gym's openai_model refuses them, a usage error of their own.)"""
    url = "http://alice:pw-SECRET-1@127.0.0.1:9/v1?api-key=q-SECRET-2"
    name = dataset(pytester, task("a"))
    args = [f"--gym-checkout={fake_gym.checkout}", f"--gym-model-url={url}", "--gym-model=m", "-rA", name]
    args.append("--gym-model-type=azure_openai_model")
    args += ["--gym-startup-timeout=1", "--junitxml=junit.xml", "--gym-report=report.json", "--gym-html=page.html"]
    result = pytester.runpytest(*args)
    assert outcomes(result) == {"mcqa.jsonl::a[r0]": "error"}
    result.stdout.fnmatch_lines(["*the model endpoint http://alice:[[]redacted[]]@127.0.0.1:9/v1?[[]redacted[]] *"])
    assert "SECRET" not in result.stdout.str() + result.stderr.str()
    for written in ("junit.xml", "report.json", "page.html"):
        assert "SECRET" not in (pytester.path / written).read_text(), written
    assert json.loads((pytester.path / "report.json").read_text())["meta"]["model_url"] == (
        "http://alice:[redacted]@127.0.0.1:9/v1?[redacted]"
    )


def test_killing_gym_mid_run_errors_the_rest_and_leaves_nothing(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    pytester.makeconftest(signal_servers_after_first(fake_gym, "os.killpg", "SIGKILL"))
    name = dataset(pytester, task("first"), task("held", hold=True), task("after"))
    result = run(pytester, fake_gym, name)
    assert outcomes(result) == {
        "mcqa.jsonl::first[r0]": "passed",
        "mcqa.jsonl::held[r0]": "error",
        "mcqa.jsonl::after[r0]": "error",
    }
    result.stdout.fnmatch_lines(["*Gym's servers exited during the run (`gym env start` exited with status -9)*"])
    assert_nothing_left(fake_gym)


def test_a_server_dying_mid_run_is_named_first_and_shown_once(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    """Gym says which server died (`Process `mcqa` finished unexpectedly!`): the error's first line names it and
    quotes why from that server's own log (its exception line, not Gym's tail); every other pending rollout's error
    is that first line and a pointer."""
    pytester.makeconftest(signal_servers_after_first(fake_gym, "os.kill", "SIGUSR1"))
    name = dataset(pytester, task("first"), task("held", hold=True), task("after"))
    result = run(pytester, fake_gym, name, "-p", "no:randomly")
    assert outcomes(result) == {
        "mcqa.jsonl::first[r0]": "passed", "mcqa.jsonl::held[r0]": "error", "mcqa.jsonl::after[r0]": "error",
    }  # fmt: skip
    head = (
        "Gym's servers exited during the run: server `mcqa` exited (`gym env start` exited with status 1): "
        "MemoryError: fake: the verifier ran out of memory (*/logs/gym-servers/mcqa.log:4)"
    )
    text = result.stdout.str()
    assert text.count("MemoryError") == 2  # each error's one line says why
    assert "Segmentation fault" not in text and "finished unexpectedly" not in text  # Gym's own tail is not quoted
    result.stdout.fnmatch_lines(
        [
            "*ERROR at setup of held[[]r0[]]*",
            head,
            "log: */logs/gym-env-start.log",
            "*ERROR at setup of after[[]r0[]]*",
            head,
        ]
    )
    assert_nothing_left(fake_gym)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_sigint_or_sigterm_to_pytest_leaves_nothing_running(
    pytester: pytest.Pytester, fake_gym: FakeGym, sig: signal.Signals
) -> None:
    # SIGTERM (timeout, a CI runner's cancel, docker stop) ends the session as Ctrl-C does while Gym runs.
    name = dataset(pytester, task("first"), task("held", hold=True))
    args = [*fake_gym.args, "-v", "-s", name]
    returncode, output = interrupt_once_reported(
        pytester.path, args, lambda line: "first[r0] PASSED" in line, sig, timeout=120
    )
    assert_interrupted(returncode, output)
    assert_nothing_left(fake_gym)


HOLD_SESSION_END = """
import json, os, time
from pathlib import Path
import pytest
from pytest_gym_eval.gym.processes import is_running

@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session):
    # The reports are written; Gym is stopped later. Say so, and wait (bounded) until a second signal killed it.
    (run_dir,) = Path("runs").iterdir()
    servers = json.loads((run_dir / "processes.jsonl").read_text().splitlines()[0])["pid"]
    Path("session-ending").write_text("")
    deadline = time.monotonic() + 60
    while is_running(servers) and time.monotonic() < deadline:
        time.sleep(0.05)
"""


@pytest.mark.parametrize(
    ("second", "said"),
    [(signal.SIGINT, "gym: Ctrl-C while stopping Gym"), (signal.SIGTERM, "gym: SIGTERM while stopping Gym")],
    ids=["SIGINT", "SIGTERM"],
)
def test_a_second_signal_as_the_session_ends_kills_gym_and_the_session_still_reports(
    pytester: pytest.Pytester, fake_gym: FakeGym, monkeypatch: pytest.MonkeyPatch, second: signal.Signals, said: str
) -> None:
    """A second Ctrl-C or SIGTERM (GitHub Actions' cancel sends SIGTERM 7.5 s after SIGINT) once the session is
    ending kills Gym's processes at once, never the reports; the session still ends as after one Ctrl-C (exit
    status 2, the reward summary, the resume command), with no traceback from inside pytest's sessionfinish."""
    monkeypatch.setenv("FAKE_GYM_STOP", "slow")  # Gym's servers ignore the plugin's SIGINT: only SIGKILL ends them
    pytester.makeconftest(HOLD_SESSION_END)
    name = dataset(pytester, task("first"), task("held", hold=True))
    args = [*fake_gym.args, "-v", name, "--gym-run-dir=runs", "-p", "no:randomly"]
    process, seen = run_until_reported(pytester.path, args, lambda line: "first[r0] PASSED" in line)
    try:
        process.send_signal(signal.SIGINT)
        wait_until(lambda: (pytester.path / "session-ending").exists(), "the session is ending", timeout=60)
        process.send_signal(second)
        output = "".join(seen) + process.communicate(timeout=60)[0]
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == pytest.ExitCode.INTERRUPTED, output[-3000:]
    assert f"{said}: killing its processes now" in output, output[-3000:]
    assert "gym reward summary" in output and "gym: resume this run with: " in output
    assert "Traceback" not in output, output[-3000:]
    assert_nothing_left(fake_gym)


COUNT_TRACEBACK_RENDERING = """
import pytest
from _pytest._code.code import ExceptionInfo

rendered = []
_getrepr = ExceptionInfo.getrepr


def counting(self, *args, **kwargs):
    rendered.append(type(self.value).__name__)
    return _getrepr(self, *args, **kwargs)


ExceptionInfo.getrepr = counting


def pytest_terminal_summary(terminalreporter):
    terminalreporter.write_line(f"TRACEBACKS RENDERED {sorted(rendered)}")
"""


def test_failed_and_errored_rollouts_render_no_traceback(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    """pytest renders a failure's traceback (parsing each entry's source, ~10 ms a failure) unless the item says
    its failure itself: a failed or errored rollout and a failed gate show their own text, as before, and cost
    no rendering, which took 4 s of CPU from Gym's run at 400 failures in 2,000 rollouts."""
    pytester.makeconftest(COUNT_TRACEBACK_RENDERING)
    name = dataset(pytester, task("ok"), task("low", reward=0.0), task("broken", failure="agent_http_500"))
    result = run(pytester, fake_gym, name, "--gym-min-mean-reward=0.9", "-p", "no:randomly")
    assert outcomes(result) == {
        "mcqa.jsonl::ok[r0]": "passed",
        "mcqa.jsonl::low[r0]": "failed",
        "mcqa.jsonl::broken[r0]": "error",
        "mcqa.jsonl::gym-gate": "failed",
    }
    result.stdout.fnmatch_lines(["*_ low[[]r0[]] _*", "reward 0 is below the pass threshold 1", "prompt:*"])
    assert "TRACEBACKS RENDERED []" in result.stdout.str()


def test_rollout_passed_hook_decides_with_the_whole_record(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    pytester.makeconftest(
        """
def pytest_gym_eval_rollout_passed(item, record, reward, threshold):
    if item.task_id == "lenient":
        return "fake answer" in record["response"]["output"][0]["content"][0]["text"] and reward >= 0.5
    return None
"""
    )
    name = dataset(pytester, task("lenient", reward=0.5), task("strict", reward=0.5))
    result = run(pytester, fake_gym, name)
    assert outcomes(result) == {"mcqa.jsonl::lenient[r0]": "passed", "mcqa.jsonl::strict[r0]": "failed"}


def test_no_gym_item_selected_starts_nothing(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    name = dataset(pytester, task("a"))
    pytester.makepyfile(test_plain="def test_plain():\n    pass\n")
    result = run(pytester, fake_gym, name, "test_plain.py", "-m", "not gym")
    assert result.ret == 0 and outcomes(result) == {"test_plain.py::test_plain": "passed"}
    assert fake_gym.calls() == []


def test_resources_server_setting_picks_the_agents_config(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    pytester.makeini("[pytest]\ngym_dataset_settings =\n    mcqa.jsonl: resources_server=elsewhere\n")
    name = dataset(pytester, task("a"))
    (fake_gym.checkout / "resources_servers" / "elsewhere" / "configs").mkdir(parents=True)
    result = run(pytester, fake_gym, name)
    assert result.ret == pytest.ExitCode.USAGE_ERROR and outcomes(result) == {}
    result.stderr.fnmatch_lines(["*under resources_servers/elsewhere/configs defines the agent 'mcqa_simple_agent'*"])
    pytester.makeini("[pytest]\ngym_dataset_settings =\n    mcqa.jsonl: resources_server=mcqa\n")
    assert outcomes(run(pytester, fake_gym, name)) == {"mcqa.jsonl::a[r0]": "passed"}


def test_unknown_model_type_names_the_ones_gym_has(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    for model in ("openai_model", "vllm_model", "vllm_model.egg-info"):  # a build's leftover is no model server
        (fake_gym.checkout / "responses_api_models" / model).mkdir(parents=True)
    name = dataset(pytester, task("a"))
    result = run(pytester, fake_gym, name, "--gym-model-type=anthropic")
    assert result.ret == pytest.ExitCode.USAGE_ERROR and outcomes(result) == {}
    expected = "ERROR: --gym-model-type: this Gym has no model server 'anthropic' (openai_model, vllm_model)"
    result.stderr.fnmatch_lines([expected])
    assert fake_gym.calls() == []
    assert outcomes(run(pytester, fake_gym, name, "--gym-model-type=vllm_model")) == {"mcqa.jsonl::a[r0]": "passed"}


ERROR_TIMES_CONFTEST = """
import json, os
def pytest_runtest_logreport(report):
    if report.when == "setup" and report.failed:
        with open(os.path.join(os.path.dirname(__file__), "error-times.jsonl"), "a") as f:
            f.write(json.dumps({"nodeid": report.nodeid, "stop": report.stop}) + "\\n")
"""
"""A child session's conftest recording when each item's error was reported (epoch seconds)."""


def error_times(pytester: pytest.Pytester) -> dict[str, float]:
    lines = (pytester.path / "error-times.jsonl").read_text().splitlines()
    return {row["nodeid"]: row["stop"] for row in map(json.loads, lines)}


def junit_classes(path: Path) -> dict[str, str | None]:
    from tests.support.junit import junit_rollouts

    return {name: values.get("failure_class") for name, values in junit_rollouts(path).items()}


def test_hung_rollouts_error_together_not_one_timeout_after_another(
    pytester: pytest.Pytester, fake_gym: FakeGym
) -> None:
    pytester.makeconftest(ERROR_TIMES_CONFTEST)
    name = dataset(pytester, task("done"), task("held", hold=True), task("behind"))
    result = run(pytester, fake_gym, name, "--gym-rollout-timeout", "2", "--junitxml=junit.xml")
    assert outcomes(result) == {
        "mcqa.jsonl::done[r0]": "passed",
        "mcqa.jsonl::held[r0]": "error",
        "mcqa.jsonl::behind[r0]": "error",
    }
    times = error_times(pytester)
    # One timeout after another would put them 2 s apart; a stall gives up every pending rollout at once.
    assert abs(times["mcqa.jsonl::behind[r0]"] - times["mcqa.jsonl::held[r0]"]) < 1.0
    result.stdout.fnmatch_lines(
        [
            "*no rollout landed for 2 s (--gym-rollout-timeout, counted from the last rollout Gym wrote; 1 had "
            "landed), so every rollout still pending errors now",
            "still pending (2 of 3): mcqa.jsonl::held[[]r0], mcqa.jsonl::behind[[]r0]",
        ]
    )
    assert junit_classes(pytester.path / "junit.xml") == {"done[r0]": None, "held[r0]": "rollout_timeout",
                                                          "behind[r0]": "rollout_timeout"}  # fmt: skip
    result.stdout.fnmatch_lines(["  errors      rollout_timeout 2"])
    assert_nothing_left(fake_gym)


def test_a_gym_start_failure_has_one_class_everywhere(
    pytester: pytest.Pytester, fake_gym: FakeGym, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_GYM_START", "fail")
    name = dataset(pytester, task("a"), task("b"))
    result = run(pytester, fake_gym, name, "--junitxml=junit.xml", "--gym-report=report.json")
    result.stdout.fnmatch_lines(["  errors      gym_start 2"])
    assert set(junit_classes(pytester.path / "junit.xml").values()) == {"gym_start"}
    report = json.loads((pytester.path / "report.json").read_text())
    assert [r["failure_class"] for r in report["rollouts"]] == ["gym_start", "gym_start"]


@pytest.mark.parametrize("xdist", [False, True], ids=["one-process", "xdist"])
def test_a_run_directory_that_cannot_be_made_is_one_usage_error(
    pytester: pytest.Pytester, fake_gym: FakeGym, xdist: bool
) -> None:
    (pytester.path / "not-a-folder").write_text("a file where the run directories should go\n")
    name = dataset(pytester, task("a"), task("b"))
    extra = ["-n", "2"] if xdist else []
    result = pytester.runpytest_subprocess(*fake_gym.args, name, "--gym-run-dir=not-a-folder/runs", *extra)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    output = result.stdout.str() + result.stderr.str()
    assert output.count("--gym-run-dir=") == 1, output
    result.stderr.fnmatch_lines(["ERROR: --gym-run-dir=*not-a-folder/runs: cannot make the run directory there: *"])
    assert "Traceback" not in output and fake_gym.calls() == []
    # Nothing ran: no reward summary claiming rollouts "never reported" before the real cause.
    assert "gym reward summary" not in output and "never reported" not in output


def test_a_failure_body_is_traced_to_the_endpoints_error(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    endpoint = {"error": {"message": "Rate limit reached for m.", "type": "requests", "code": "rate_limit_exceeded"}}

    def wrapped(key: str, inner: bytes) -> bytes:  # a Gym server's 500 around the error of the server it called
        return json.dumps(f"Hit an exception in {key} calling an inner server: {inner!r}").encode()

    body = wrapped("SimpleAgent___a", wrapped("SimpleModelServer___policy_model", json.dumps(endpoint).encode()))
    name = dataset(pytester, task("limited", failure="agent_run_error", body=body.decode()))
    result = run(pytester, fake_gym, name, "--junitxml=junit.xml")
    # The stand-in writes no server logs: the cause comes from the body alone, without the status.
    result.stdout.fnmatch_lines(
        [
            "*_ ERROR at setup of limited[[]r0] _*",
            "policy model: HTTP error rate_limit_exceeded: Rate limit reached for m.",
            "Gym recorded the rollout as failed (agent_run_error: fake agent failure)",
            "record: *rollouts_failures.jsonl:1",
        ]
    )
    assert junit_classes(pytester.path / "junit.xml") == {"limited[r0]": "model_http_error"}


def test_an_interrupted_start_up_counts_the_selected_rollouts(
    pytester: pytest.Pytester, fake_gym: FakeGym, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C while Gym starts: the summary counts the 5 rollouts selected (none reported), not '0 tasks, 0
    rollouts'."""
    monkeypatch.setenv("FAKE_GYM_START", "hang")
    name = dataset(pytester, *(task(t) for t in "abcde"))
    returncode, output = interrupt_once_reported(
        pytester.path, [*fake_gym.args, name], lambda line: "starting Gym's servers" in line, signal.SIGINT, 120
    )
    assert_interrupted(returncode, output)
    assert "0 tasks, 0 rollouts" not in output
    assert "  5 rollouts selected, none reported\n" in output, output[-3000:]
    assert "5 of 5 selected rollouts never reported" in output


def test_a_run_directory_on_a_full_disk_is_one_usage_error(
    pytester: pytest.Pytester, fake_gym: FakeGym, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil

    real = shutil.disk_usage
    runs = pytester.path / "runs"

    def nearly_full(path: object) -> object:
        usage = real(path)  # type: ignore[arg-type]
        return (
            type(usage)(usage.total, usage.total - 12 * 1024, 12 * 1024) if str(path).startswith(str(runs)) else usage
        )

    monkeypatch.setattr(shutil, "disk_usage", nearly_full)
    name = dataset(pytester, task("a"), task("b"))
    result = run(pytester, fake_gym, name, f"--gym-run-dir={runs}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [f"ERROR: --gym-run-dir={runs}: no space left on the device of {runs}/gym-run-* (12 KiB free); a run needs*"]
    )
    output = result.stdout.str() + result.stderr.str()
    assert "Traceback" not in output and fake_gym.calls() == [] and list(runs.iterdir()) == []


@pytest.fixture
def full_disk(tmp_path: Path) -> Iterator[Path]:
    """A 64 KiB tmpfs: a disk that fills up during the run (needs root and mount; skipped elsewhere)."""
    import subprocess

    folder = tmp_path / "small-disk"
    folder.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(folder)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {mounted.stderr.decode(errors='replace').strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def test_a_disk_that_fills_up_during_the_run_is_one_clear_error_per_item(
    pytester: pytest.Pytester, fake_gym: FakeGym, full_disk: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pytest_gym_eval.outcomes import causes

    monkeypatch.setattr(causes, "MIN_FREE", 0)  # past the start-up check: the disk fills while Gym writes
    rows = [{**task(t), "padding": "x" * 20_000} for t in "abcde"]
    name = dataset(pytester, *rows)
    result = run(pytester, fake_gym, name, f"--gym-run-dir={full_disk}", "--gym-rollout-timeout=60")
    output = result.stdout.str() + result.stderr.str()
    assert set(outcomes(result).values()) == {"error"}, output[-5000:]
    assert "Traceback" not in output, output[-5000:]
    result.stdout.fnmatch_lines(["*no space left on *device*", "  errors      run_dir_full 5"])
    assert "unknown" not in output
