"""Options, ini values and per-dataset settings: precedence and clear usage errors."""

from __future__ import annotations

import json

import pytest

from pytest_gym_eval.options.settings import DatasetSettings, parse_dataset_settings
from pytest_gym_eval.stats.gates import Gate


def test_dataset_settings_lines_parse() -> None:
    (first, second) = parse_dataset_settings(
        ["data/mcqa.jsonl: agent=a repeats=4 pass_threshold=0.5 min_pass_at_k=2:0.8,4:0.9", "data/*.jsonl:"]
    )
    assert first == (
        "data/mcqa.jsonl",
        DatasetSettings(
            agent="a", repeats=4, pass_threshold=0.5, given=(Gate("pass_at_k", 0.8, 2), Gate("pass_at_k", 0.9, 4))
        ),
    )
    assert second == ("data/*.jsonl", DatasetSettings())


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("no separator here", "expected '<glob>: key=value ...'"),
        ("d.jsonl: colour=blue", "unknown setting 'colour=blue'"),
        ("d.jsonl: repeats=0", "repeats: must be at least 1"),
        ("d.jsonl: repeats=two", "repeats: expected a whole number"),
        ("d.jsonl: pass_threshold=nan", "expected a finite number"),
        ("d.jsonl: min_pass_at_k=4", "K:V"),
        ("d.jsonl: min_pass_rate=1.5", "min_pass_rate: a pass rate lies in [0, 1], got 1.5"),
    ],
)
def test_bad_dataset_settings_name_the_line(line: str, message: str) -> None:
    with pytest.raises(pytest.UsageError, match="gym_dataset_settings") as raised:
        parse_dataset_settings([line])
    assert message in str(raised.value)


def test_precedence_command_line_then_dataset_then_ini(pytester: pytest.Pytester) -> None:
    pytester.makeini(
        "[pytest]\ngym_repeats = 2\ngym_pass_threshold = 0.3\n"
        "gym_dataset_settings =\n    own.jsonl: repeats=3\n    own.jsonl: pass_threshold=0.6\n"
    )
    pytester.makeconftest(
        """
def pytest_collection_finish(session):
    from pathlib import Path
    from pytest_gym_eval.session.gym_session import SESSION_KEY
    options = session.config.stash[SESSION_KEY].options
    for name in ("own.jsonl", "plain.jsonl"):
        s = options.dataset_settings(Path(session.config.rootpath) / name)
        print("SETTINGS", name, s.repeats, s.threshold)
"""
    )
    row = json.dumps({"id": "q", "responses_create_params": {"input": "?"}}) + "\n"
    for name in ("own.jsonl", "plain.jsonl"):
        (pytester.path / name).write_text(row)
    result = pytester.runpytest("--collect-only", "-s", "own.jsonl", "plain.jsonl")
    result.stdout.fnmatch_lines(["SETTINGS own.jsonl 3 0.6", "SETTINGS plain.jsonl 2 0.3"])
    result = pytester.runpytest("--collect-only", "-s", "own.jsonl", "plain.jsonl", "--gym-repeats=5")
    result.stdout.fnmatch_lines(["SETTINGS own.jsonl 5 0.6", "SETTINGS plain.jsonl 5 0.3"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--gym-head-server=nowhere"], "--gym-head-server: expected HOST:PORT"),
        (["--gym-rollout-timeout=-1"], "--gym-rollout-timeout: a timeout cannot be negative"),
        (["--gym-repeats=0"], "--gym-repeats: must be at least 1"),
        (["--gym-gate-on=median"], "invalid choice"),
        (["--gym-min-pass-rate=-0.1"], "--gym-min-pass-rate: a pass rate lies in [0, 1], got -0.1"),
        (["--gym-min-pass-rate=1.5"], "--gym-min-pass-rate: a pass rate lies in [0, 1], got 1.5"),
        (["-o", "gym_min_pass_rate=1.5"], "gym_min_pass_rate: a pass rate lies in [0, 1], got 1.5"),
    ],
)
def test_bad_options_are_usage_errors(pytester: pytest.Pytester, args: list[str], message: str) -> None:
    result = pytester.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert message in result.stderr.str()


def test_agent_precedence_row_then_dataset_then_option_then_convention(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\ngym_dataset_settings =\n    own.jsonl: agent=own_agent\n")
    pytester.makeconftest(
        """
def pytest_collection_finish(session):
    for item in session.items:
        print("AGENT", item.nodeid, item.agent)
"""
    )
    rows = [{"id": "named", "agent_ref": {"name": "row_agent"}, "responses_create_params": {"input": "?"}},
            {"id": "plain", "responses_create_params": {"input": "?"}}]  # fmt: skip
    for name in ("own.jsonl", "mcqa.jsonl"):
        (pytester.path / name).write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = pytester.runpytest("--collect-only", "-s", "own.jsonl", "mcqa.jsonl")
    result.stdout.fnmatch_lines(
        ["AGENT own.jsonl::named[[]r0[]] row_agent", "AGENT own.jsonl::plain[[]r0[]] own_agent",
         "AGENT mcqa.jsonl::named[[]r0[]] row_agent", "AGENT mcqa.jsonl::plain[[]r0[]] mcqa_simple_agent"]
    )  # fmt: skip
    result = pytester.runpytest("--collect-only", "-s", "own.jsonl", "mcqa.jsonl", "--gym-agent=cli_agent")
    result.stdout.fnmatch_lines(
        ["AGENT own.jsonl::plain[[]r0[]] own_agent", "AGENT mcqa.jsonl::plain[[]r0[]] cli_agent"]
    )


def test_every_option_a_team_would_pin_has_an_ini_equivalent(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Paths in the ini file are relative to its folder, wherever pytest is started from.
    (pytester.path / "base.json").write_text(json.dumps({"schema_version": 1, "datasets": [], "rollouts": []}))
    (pytester.path / "rec.jsonl").write_text("{}\n")
    pytester.makeini(
        "[pytest]\ngym_startup_timeout = 12.5\ngym_rollout_timeout = 0\ngym_concurrency = 3\ngym_run_dir = runs\n"
        "gym_report = out/report.json\ngym_baseline = base.json\ngym_max_drop = 0.1\ngym_replay = rec.jsonl\n"
    )
    pytester.makeconftest(
        """
def pytest_collection_finish(session):
    from pytest_gym_eval.session.gym_session import SESSION_KEY
    o = session.config.stash[SESSION_KEY].options
    print("OPTIONS", o.startup_timeout, o.rollout_timeout, o.concurrency, o.max_drop)
    print("PATHS", o.run_dir, o.report, o.baseline, *o.replay)
"""
    )
    elsewhere = pytester.mkdir("elsewhere")
    monkeypatch.chdir(elsewhere)
    root = pytester.path.resolve()
    result = pytester.runpytest("--collect-only", "-s", "-c", str(root / "tox.ini"), "--rootdir", str(root))
    result.stdout.fnmatch_lines(
        ["OPTIONS 12.5 None 3 0.1", f"PATHS {root}/runs {root}/out/report.json {root}/base.json {root}/rec.jsonl"]
    )
    # The command line beats the ini file, and its paths are relative to where pytest runs.
    args = ["--gym-concurrency=5", "--gym-rollout-timeout=7", "--gym-run-dir=here"]
    result = pytester.runpytest("--collect-only", "-s", "-c", str(root / "tox.ini"), "--rootdir", str(root), *args)
    result.stdout.fnmatch_lines(["OPTIONS 12.5 7.0 5 0.1", f"PATHS {elsewhere.resolve()}/here *"])


@pytest.mark.parametrize(
    ("line", "name"),
    [
        ("gym_startup_timeout = soon", "gym_startup_timeout"),
        ("gym_concurrency = many", "gym_concurrency"),
        ("gym_rollout_timeout = -5", "gym_rollout_timeout"),
        ("gym_baseline = missing.json", "gym_baseline: no such file"),
        ("gym_replay = missing.jsonl", "gym_replay: no such file"),
    ],
)
def test_bad_ini_values_are_usage_errors_naming_the_option(pytester: pytest.Pytester, line: str, name: str) -> None:
    pytester.makeini(f"[pytest]\n{line}\n")
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert name in result.stderr.str()


def test_a_dataset_settings_glob_that_matches_no_file_is_warned_about(pytester: pytest.Pytester) -> None:
    """A typo in a settings line would silently drop its gate: the session warns, naming the glob."""
    (pytester.path / "datasets").mkdir()
    (pytester.path / "datasets" / "quiz.jsonl").write_text(
        json.dumps({"id": "q", "responses_create_params": {"input": "?"}}) + "\n"
    )
    pytester.makeini(
        "[pytest]\ngym_dataset_settings =\n    datasets/quizz.jsonl: min_mean_reward=0.9\n"
        "    datasets/**/*.jsonl: repeats=2\n    ../elsewhere/*.jsonl: pass_threshold=0.5\n"
    )
    result = pytester.runpytest("--collect-only", "-q", "datasets/quiz.jsonl")
    output = result.stdout.str()
    assert "'datasets/quizz.jsonl' matches no file under" in output
    assert "(its gates are not applied): a typo?" in output
    assert "'../elsewhere/*.jsonl' matches no file" in output and "datasets/**/*.jsonl' matches" not in output
    assert "quiz.jsonl::q[r1]" in output  # the matching line still applies (repeats=2)
    result = pytester.runpytest("--collect-only", "datasets/quiz.jsonl", "-W", "error::pytest.PytestConfigWarning")
    assert result.ret != pytest.ExitCode.OK and "matches no file" in result.stdout.str() + result.stderr.str()


def test_gates_of_the_command_line_the_dataset_lines_and_the_ini_merge_gate_by_gate(
    pytester: pytest.Pytester,
) -> None:
    """Issue 35: a command-line gate list replaced a dataset's (and the ini's) whole; now each gate is kept unless
    a setting of the same gate (metric, k, custom metric name) comes first, and each says where it was set."""
    from pytest_gym_eval.options.gym_options import GymOptions

    pytester.makeini(
        "[pytest]\ngym_min_pass_at_k =\n    1:0.5\n    4:0.1\ngym_min_metric = chars:5\n"
        "gym_dataset_settings =\n    *.jsonl: min_metric=terse:0.9 min_pass_at_k=4:0.6\n"
        "    own.jsonl: min_metric=n_calls:2\n"
    )
    config = pytester.parseconfig("--gym-min-pass-at-k=4:0.9", "--gym-min-metric=n_calls:3")
    options = GymOptions.from_config(config)
    gates = options.dataset_settings(pytester.path / "own.jsonl").gates
    assert [(g.name, g.threshold, g.source and g.source.value) for g in gates] == [
        ("pass@4", 0.9, "command line"),
        ("pass@1", 0.5, "ini"),
        ("metric n_calls", 3.0, "command line"),
        ("metric terse", 0.9, "dataset settings"),  # the first line's: the second line sets another metric
        ("metric chars", 5.0, "ini"),
    ]
