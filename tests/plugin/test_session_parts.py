"""The pieces of the session, each without a pytest session: the run directory and the policy model endpoint
(:mod:`pytest_gym_eval.session.launch`), the end of a session (:mod:`pytest_gym_eval.session.finish`), the texts of the
items' errors (:mod:`pytest_gym_eval.session.diagnosis`), the shard's tasks and the
selection record (pure), and when the plugin makes the session at all (:mod:`pytest_gym_eval.plugin`)."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from pytest_gym_eval.gym.feed import Missing
from pytest_gym_eval.gym.run import GymStartError
from pytest_gym_eval.options.gym_options import GymOptions
from pytest_gym_eval.outcomes import causes
from pytest_gym_eval.outcomes.causes import Cause
from pytest_gym_eval.outcomes.outcome import RolloutOutcome
from pytest_gym_eval.plugin import gym_configured
from pytest_gym_eval.session import collect, diagnosis, finish, launch
from pytest_gym_eval.session.diagnosis import Diagnosis
from pytest_gym_eval.tasks import selection
from pytest_gym_eval.tasks.plan import RunPlan
from pytest_gym_eval.tasks.shard import CollectedPlan, DatasetTasks, Shard, assign_shards, shard_tasks

# --- launch: the run directory ----------------------------------------------------------------------------


class NoFactory:
    """A ``TempPathFactory`` that must not be asked (``--gym-run-dir`` is given)."""

    def mktemp(self, name: str, numbered: bool = True) -> Path:
        raise AssertionError("basetemp asked although --gym-run-dir is given")


def test_a_run_directory_is_made_fresh_under_gym_run_dir(tmp_path: Path) -> None:
    options = GymOptions(rootdir=tmp_path, run_dir=tmp_path / "runs")
    first = launch.new_run_dir(options, NoFactory())  # type: ignore[arg-type]
    second = launch.new_run_dir(options, NoFactory())  # type: ignore[arg-type]
    assert first.parent == second.parent == tmp_path / "runs"
    assert first != second and first.is_dir() and second.is_dir()
    assert first.name.startswith("gym-run-")


def test_a_run_directory_that_cannot_be_made_is_a_usage_error_naming_the_option(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    options = GymOptions(rootdir=tmp_path, run_dir=blocker / "runs")
    with pytest.raises(pytest.UsageError, match=r"--gym-run-dir=.*a-file/runs: cannot make the run directory"):
        launch.new_run_dir(options, NoFactory())  # type: ignore[arg-type]


def test_without_gym_run_dir_the_run_directory_is_under_basetemp(tmp_path: Path) -> None:
    asked: list[str] = []

    class Factory:
        def mktemp(self, name: str, numbered: bool = True) -> Path:
            asked.append(name)
            made = tmp_path / f"{name}0"
            made.mkdir()
            return made

    assert launch.new_run_dir(GymOptions(rootdir=tmp_path), Factory()) == tmp_path / "gym-run0"  # type: ignore[arg-type]
    assert asked == ["gym-run"]


# --- launch: the policy model -----------------------------------------------------------------------------


def test_a_model_url_needs_a_model_name(tmp_path: Path) -> None:
    notes: list[str] = []
    chosen = launch.Launch(GymOptions(rootdir=tmp_path, model_url="http://127.0.0.1:9/v1"), notes.append)
    with pytest.raises(GymStartError, match="--gym-model-url needs --gym-model"):
        chosen.model_endpoint(tmp_path)


def test_no_policy_model_names_both_ways_to_give_one(tmp_path: Path) -> None:
    chosen = launch.Launch(GymOptions(rootdir=tmp_path, api_key_env="MY_KEY"), lambda _: None)
    with pytest.raises(
        GymStartError, match=r"no policy model: pass --gym-model-url and --gym-model \(API key from \$MY_KEY"
    ):
        chosen.model_endpoint(tmp_path)


def test_attached_servers_keep_their_model_and_replay_is_only_compared(tmp_path: Path) -> None:
    notes: list[str] = []
    options = GymOptions(rootdir=tmp_path, replay=(tmp_path / "r.jsonl",), head_server=("127.0.0.1", 9))
    assert launch.Launch(options, notes.append).model_endpoint(tmp_path) is None
    assert notes == ["attached: --gym-replay recordings are compared with the rewards, not served"]


def test_a_model_endpoint_carries_the_key_variable_name_not_its_value(tmp_path: Path) -> None:
    options = GymOptions(rootdir=tmp_path, model_url="http://127.0.0.1:9/v1", model="m", api_key_env="MY_KEY")
    endpoint = launch.Launch(options, lambda _: None).model_endpoint(tmp_path)
    assert endpoint is not None
    assert (endpoint.url, endpoint.model, endpoint.api_key_env) == ("http://127.0.0.1:9/v1", "m", "MY_KEY")


# --- finish: the exit status when nothing is concluded ---------------------------------------------------


class StubGym:
    """The parts of a GymSession :func:`finish.finish_session` uses before it concludes."""

    def __init__(self) -> None:
        self.endings: list[bool] = []
        self.concluded = 0

    def ending(self, interrupted: bool = False) -> None:
        self.endings.append(interrupted)

    def conclude(self) -> None:
        self.concluded += 1


@pytest.mark.parametrize(
    ("status", "interrupted", "concludes"),
    [
        (pytest.ExitCode.OK, False, 1),
        (pytest.ExitCode.INTERRUPTED, True, 1),
        (pytest.ExitCode.USAGE_ERROR, False, 0),  # nothing ran: no conclusion, no report
    ],
)
def test_a_session_without_rollouts_keeps_pytests_exit_status(
    status: pytest.ExitCode, interrupted: bool, concludes: int
) -> None:
    gym: Any = StubGym()
    assert finish.finish_session(gym, status) == status
    assert gym.endings == [interrupted]  # Gym is let finish (or abandoned) before anything else
    assert gym.concluded == concludes


# --- the shard's tasks and the selection record (pure) ---------------------------------------------------


def test_the_shards_tasks_split_each_dataset_as_the_assignment_rule_says() -> None:
    tasks = [f"t{i}" for i in range(10)]
    plan = CollectedPlan(
        None, [DatasetTasks("a.jsonl", "a.jsonl", 2, tasks), DatasetTasks("b.jsonl", "b.jsonl", 1, ["x"])]
    )
    mine = [shard_tasks(plan, Shard(index, 3)) for index in (1, 2, 3)]
    assert set().union(*(part["a.jsonl"] for part in mine)) == set(tasks)
    assert sum(len(part["a.jsonl"]) for part in mine) == 10  # no task in two shards
    assigned = assign_shards("a.jsonl", tasks, 3)
    assert mine[1]["a.jsonl"] == {task for task, index in assigned.items() if index == 2}
    assert sorted(len(part["b.jsonl"]) for part in mine) == [0, 0, 1]


def test_the_selection_record_survives_the_run_directory(tmp_path: Path) -> None:
    found = {"a.jsonl": selection.Selection(2, 8, 4, 16, how="-k", shard="1/2")}
    selection.save(found, tmp_path / "selection.json")
    assert selection.load(tmp_path / "selection.json") == found
    assert selection.load(tmp_path / "missing.json") == {}


# --- when the plugin makes the session --------------------------------------------------------------------


def config_with(
    options: dict[str, object], ini: dict[str, str] | None = None, overrides: list[str] | None = None
) -> Any:
    """A stand-in for ``pytest.Config`` with the parts :func:`gym_configured` reads."""
    option = argparse.Namespace(**options, override_ini=overrides)
    return SimpleNamespace(
        option=option, _inicfg=ini or {}, getoption=lambda name, default=None: getattr(option, name, default)
    )


def test_a_session_without_gym_options_is_not_configured_for_gym() -> None:
    assert not gym_configured(config_with({"gym_adaptive": False, "gym_model": None, "keyword": "x"}))


@pytest.mark.parametrize(
    "config",
    [
        config_with({"gym_model": "m"}),
        config_with({"gym_adaptive": True}),
        config_with({}, ini={"gym_datasets": "data/*.jsonl"}),
        config_with({}, overrides=["gym_repeats=3"]),
    ],
    ids=["option", "flag", "ini", "override"],
)
def test_any_gym_option_or_ini_setting_configures_gym(config: Any) -> None:
    assert gym_configured(config)


def test_a_plain_pytest_run_imports_neither_the_session_nor_collection(tmp_path: Path) -> None:
    """Installing the plugin costs a project without Gym datasets nothing but the plugin, hookspecs and options."""
    (tmp_path / "test_one.py").write_text("def test_one():\n    assert True\n")
    (tmp_path / "conftest.py").write_text(
        "import sys\n"
        "def pytest_unconfigure(config):\n"
        "    loaded = sorted(m for m in sys.modules if m.startswith('pytest_gym_eval'))\n"
        "    print('LOADED', ' '.join(loaded))\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", "-p", "no:randomly", "test_one.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    (line,) = [line for line in done.stdout.splitlines() if line.startswith("LOADED")]
    loaded = set(line.split()[1:])
    assert "pytest_gym_eval.plugin" in loaded  # the plugin is installed and loaded
    assert not loaded & {
        "pytest_gym_eval.session.gym_session",
        "pytest_gym_eval.session.collect",
        "pytest_gym_eval.gym.run",
    }, loaded


# --- diagnosis: the texts of the items' errors -----------------------------------------------------------


def test_gyms_start_failure_is_shown_whole_once_then_pointed_to(tmp_path: Path) -> None:
    texts = Diagnosis(GymOptions(rootdir=tmp_path))
    message = "Gym would not start: the port is taken\nlog: run/logs/gym-env-start.log"
    assert texts.start_failure("a.jsonl::t1[r0]", message) == message
    assert texts.start_failure("a.jsonl::t2[r0]", message) == (
        "Gym would not start: the port is taken (the whole message and the log: the error of a.jsonl::t1[r0] above)"
    )


def test_a_long_message_every_pending_item_shares_is_shown_whole_once(tmp_path: Path) -> None:
    texts = Diagnosis(GymOptions(rootdir=tmp_path))
    long = "Gym exited\nline 2\nline 3"
    assert texts.error_once("a::t1[r0]", long) == long
    assert texts.error_once("a::t1[r0]", long) == long  # the same item again (its own report): whole
    assert texts.error_once("a::t2[r0]", long) == "Gym exited (the whole message: the error of a::t1[r0] above)"
    assert texts.error_once("a::t3[r0]", "short\ntwo lines") == "short\ntwo lines"  # too short to point


def test_a_prompt_without_recording_points_to_the_replay_log(tmp_path: Path) -> None:
    options = GymOptions(rootdir=tmp_path, replay=(tmp_path / "r.jsonl",))
    texts = Diagnosis(options)
    no_recording = RolloutOutcome("error", None, cause=Cause("no recording", causes.REPLAY_NO_RECORDING))
    wrapper_only = RolloutOutcome("error", None, cause=Cause("HTTP 500", causes.GYM_EXITED, found=False))
    log = tmp_path / "logs" / "replay-model.jsonl"
    found = Missing("gone")
    assert texts.error_context(found, no_recording, tmp_path, None, RunPlan(())) == [
        f"the replay model's requests: {log}",
        "to record it: run the dataset once against a live model with --gym-run-dir; that run's "
        'gym-output/rollouts.jsonl is a --gym-replay file (docs/replay.md, "Recording your own")',
    ]
    assert texts.error_context(found, wrapper_only, tmp_path, None, RunPlan(())) == [
        f"the replay model's requests: {log} (a 404 there: no recording matches the prompt)"
    ]
    attached = Diagnosis(GymOptions(rootdir=tmp_path, replay=options.replay, head_server=("127.0.0.1", 9)))
    assert attached.error_context(found, no_recording, tmp_path, None, RunPlan(())) == []  # not our replay server


def test_a_replayed_judges_request_without_recording_is_named_in_the_judge_failed_error(tmp_path: Path) -> None:
    """A judge that is the policy model is served by --gym-replay's replay model; when it has no recording of a
    judge request, Gym records the rollout as ``judge_failed`` (saying only ``ClientResponseError: 500``): the
    error names the request the replay model missed, from its request log."""
    from pytest_gym_eval.core.rundir import RunPaths
    from pytest_gym_eval.replay import ReplayServer
    from tests.support.replay import post, rollout, said, write_rollouts

    options = GymOptions(rootdir=tmp_path, replay=(tmp_path / "r.jsonl",))
    texts = Diagnosis(options)
    judge_failed = RolloutOutcome(
        "error", None, cause=Cause("Gym recorded the rollout as failed (judge_failed)", "judge_failed", found=False)
    )
    log = RunPaths(tmp_path).replay_log
    log.parent.mkdir(parents=True, exist_ok=True)
    found = Missing("gone")
    recordings = write_rollouts(tmp_path / "r.jsonl", [rollout("Judge: is 4 equal to 4?", [said("[[A=B]]")])])
    with ReplayServer([recordings], log_path=log) as server:
        assert texts.error_context(found, judge_failed, tmp_path, None, RunPlan(())) == [
            f"the replay model's requests: {log} (a 404 there: no recording matches the prompt)"
        ]  # no miss logged yet: nothing to name
        assert post(f"{server.base_url}/responses", {"input": "Judge: is 4 equal to 4?"})[0] == 200
        status, answer = post(f"{server.base_url}/responses", {"input": "Judge: is 5 equal to 4?"})
        assert status == 404
    lines = texts.error_context(found, judge_failed, tmp_path, None, RunPlan(()))
    assert lines[0] == (
        "judge model server policy_model (replayed) has no recorded answer for 1 request; the first: "
        + answer["error"]["message"]
    )
    assert "is 5 equal" in lines[0]
    assert lines[1:] == [f"the replay model's requests: {log}", diagnosis.JUDGE_RECORD_HINT]


def test_a_bound_replayed_judges_miss_is_named_by_its_binding_in_the_judge_failed_error(tmp_path: Path) -> None:
    """A judge bound with ``--gym-model-server NAME=replay:FILE`` is served by a replay server of its own, logging
    to its own file: a ``judge_failed`` rollout's error names ``NAME`` and the request it had no recording for,
    and how to record the binding's answers; a binding that missed nothing adds no line."""
    from pytest_gym_eval.core.rundir import RunPaths
    from pytest_gym_eval.replay import ReplayServer
    from pytest_gym_eval.tasks.model_servers import ModelServerBinding
    from tests.support.replay import post, rollout, said, write_rollouts

    recordings = write_rollouts(tmp_path / "j.jsonl", [rollout("Judge: is 4 equal to 4?", [said("[[A=B]]")])])
    bindings = (ModelServerBinding("judge_model", replay=recordings), ModelServerBinding("other", replay=recordings))
    texts = Diagnosis(GymOptions(rootdir=tmp_path, model_servers=bindings))
    judge_failed = RolloutOutcome(
        "error", None, cause=Cause("Gym recorded the rollout as failed (judge_failed)", "judge_failed", found=False)
    )
    found = Missing("gone")
    log = RunPaths(tmp_path).model_server_replay_log("judge_model")
    log.parent.mkdir(parents=True, exist_ok=True)
    assert texts.error_context(found, judge_failed, tmp_path, None, RunPlan(())) == []  # nothing logged yet
    with ReplayServer([recordings], log_path=log) as server:
        assert post(f"{server.base_url}/responses", {"input": "Judge: is 4 equal to 4?"})[0] == 200
        status, answer = post(f"{server.base_url}/responses", {"input": "Judge: is 5 equal to 4?"})
        assert status == 404
    lines = texts.error_context(found, judge_failed, tmp_path, None, RunPlan(()))
    assert lines == [
        "judge model server judge_model (replayed) has no recorded answer for 1 request; the first: "
        + answer["error"]["message"],
        f"the replay model's requests: {log}",
        diagnosis.BOUND_JUDGE_RECORD_HINT,
    ]
    other = RolloutOutcome("error", None, cause=Cause("HTTP 500", causes.GYM_EXITED, found=False))
    assert texts.error_context(found, other, tmp_path, None, RunPlan(())) == []  # only judge_failed names it


def test_a_bound_replayed_judges_misses_are_warned_of_at_the_end_even_without_a_judge_failed_rollout() -> None:
    """A verifier may score a failed judge call (over_refusal_detection: 0.5) instead of failing the rollout: the
    session's end names each replayed binding that missed, and only those."""
    misses = {"judge_model": ["no recorded answer: A", "no recorded answer: B"], "x": []}
    lines = diagnosis.bound_replay_miss_lines(misses)
    assert lines == [
        "judge model server judge_model (replayed) has no recorded answer for 2 requests; the first: no recorded "
        "answer: A; a verifier that scores a failed judge call instead of failing the rollout gave those rollouts its "
        "fallback reward"
    ]
    assert diagnosis.bound_replay_miss_lines({}) == []


def test_failed_judge_calls_in_gyms_records_are_named_at_the_sessions_end(tmp_path: Path) -> None:
    """A bound judge whose every call failed (its URL held user:password@, which Gym's client refuses) left each
    over_refusal_detection rollout at reward 0.5, "unclear", with no error and no word: the records' failed judge
    calls are counted and the first error shown (its secrets redacted), with what they mean for the rewards."""
    failed = {
        "responses_create_params": {},
        "response": None,
        "error": 'Judge HTTP 500: "ValueError(...)" key sk-' + "a1" * 15,
    }
    answered = {"responses_create_params": {}, "response": {"output": []}, "error": None}
    records = [
        {"reward": 0.5, "judge_evaluation": failed},
        {"reward": 0.5, "judge_evaluations": [answered, failed]},
        {"reward": 1.0, "judge_evaluation": answered},
        {"reward": 1.0},
    ]
    output = tmp_path / "rollouts.jsonl"
    output.write_text("".join(json.dumps(record) + "\n" for record in records) + "not json\n")
    (line,) = diagnosis.failed_judge_call_lines(output)
    assert line.startswith(
        '2 of 4 judge calls in Gym\'s records failed (2 rollouts); the first: Judge HTTP 500: "ValueError(...)" key '
    )
    assert "a1" * 15 not in line
    assert line.endswith(
        "; a verifier that scores a failed judge call instead of failing the rollout gave those rollouts its "
        "fallback reward"
    )
    output.write_text(json.dumps(records[2]) + "\n")
    assert diagnosis.failed_judge_call_lines(output) == []
    assert diagnosis.failed_judge_call_lines(tmp_path / "missing.jsonl") == []


def test_a_replay_binding_is_served_on_loopback_once_and_stopped_with_the_session(tmp_path: Path) -> None:
    """``served_model_servers`` starts one replay server per ``NAME=replay:FILE`` binding (once, however often a
    run's settings are made), binds ``NAME`` to its URL with the replay model's name, keeps other bindings as
    they are, and the session's stop stops it."""
    import urllib.error
    import urllib.request

    from pytest_gym_eval.session.stopping import Stopping
    from pytest_gym_eval.tasks.model_servers import ModelServerBinding
    from tests.support.replay import rollout, said, write_rollouts

    recordings = write_rollouts(tmp_path / "j.jsonl", [rollout("Judge?", [said("[[A=B]]")])])
    policy = ModelServerBinding("safety_judge", policy=True)
    options = GymOptions(rootdir=tmp_path, model_servers=(ModelServerBinding("judge_model", replay=recordings), policy))
    session_launch = launch.Launch(options, lambda line: None)
    judge, kept = session_launch.served_model_servers(tmp_path)
    assert kept == policy
    assert judge.name == "judge_model" and judge.model == launch.REPLAY_MODEL_NAME and judge.replay is None
    assert judge.url is not None and judge.url.startswith("http://127.0.0.1:")
    assert session_launch.served_model_servers(tmp_path)[0] == judge  # the same server, not a second one
    with urllib.request.urlopen(f"{judge.url}/models", timeout=5) as answer:
        assert answer.status == 200
    Stopping().stop(None, session_launch, None)
    assert session_launch.model_server_replays == {}
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(f"{judge.url}/models", timeout=5)


def test_a_replay_binding_whose_recordings_are_bad_stops_the_start_naming_it(tmp_path: Path) -> None:
    from pytest_gym_eval.tasks.model_servers import ModelServerBinding

    bad = tmp_path / "j.jsonl"
    bad.write_text("{not json\n")
    options = GymOptions(rootdir=tmp_path, model_servers=(ModelServerBinding("judge_model", replay=bad),))
    with pytest.raises(GymStartError, match=r"--gym-model-server judge_model=replay:.*j\.jsonl: .*:1"):
        launch.Launch(options, lambda line: None).served_model_servers(tmp_path)


# --- collection and launch: the agent of a row, whole tasks -----------------------------------------------


def test_a_rows_default_agent_follows_the_dataset_then_the_option_then_the_convention(tmp_path: Path) -> None:
    inside = tmp_path / "resources_servers" / "mcqa" / "data" / "example.jsonl"
    plain = tmp_path / "questions.jsonl"
    options = GymOptions(rootdir=tmp_path)
    assert collect.dataset_default_agent(options, inside) == "mcqa_simple_agent"
    assert collect.dataset_default_agent(options, plain) == "questions_simple_agent"
    assert collect.dataset_default_agent(GymOptions(rootdir=tmp_path, agent="mine"), plain) == "mine"


def test_whole_tasks_are_not_handed_to_gym_when_repeats_must_differ(tmp_path: Path) -> None:
    assert launch.whole_tasks_allowed(GymOptions(rootdir=tmp_path))
    assert not launch.whole_tasks_allowed(GymOptions(rootdir=tmp_path, adaptive=True))
    assert not launch.whole_tasks_allowed(GymOptions(rootdir=tmp_path, resume=tmp_path / "old-run"))
    assert not launch.whole_tasks_allowed(GymOptions(rootdir=tmp_path, replay=(tmp_path / "missing.jsonl",)))
