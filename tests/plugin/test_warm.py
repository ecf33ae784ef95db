"""A warm Gym kept between sessions (``--gym-keep-alive``): the registry, the keeper, attaching, stale entries,
idle stops, ``status`` and ``stop``, against the stand-in ``gym`` (tests/support/fake_gym.py, whose ``gym env
start`` answers ``GET /readyz`` on its head server as Gym's does). The same with real Gym:
tests/real_gym/test_warm_real_gym.py. Every test has a registry of its own (fixture ``warm_registry``) and stops every
warm Gym in it at the end; every wait polls a state against a deadline.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_gym_eval import provision
from pytest_gym_eval.cli.stop import main as stop_main
from pytest_gym_eval.gym.fingerprint import GymConfiguration
from pytest_gym_eval.gym.orphans import find_leftovers, run_processes
from pytest_gym_eval.gym.processes import is_running, session_members
from pytest_gym_eval.replay import ReplayServer
from pytest_gym_eval.tasks.model_servers import ModelServerBinding
from pytest_gym_eval.warm.registry import Entry, Registry, boot_id, idle_since, stop_warm
from tests.support.children import child_pytest_argv, started_processes, stranger_and_dead_owner, wait_until
from tests.support.fakes import FakeGym

KEEP = "--gym-keep-alive=600"


def write_dataset(folder: Path, rows: int = 3) -> str:
    """``mcqa.jsonl`` (the stand-in runs the ``mcqa`` agent) with ``rows`` tasks."""
    lines = [
        json.dumps({"id": f"t{i}", "responses_create_params": {"input": [{"role": "user", "content": "ping"}]}})
        for i in range(rows)
    ]
    (folder / "mcqa.jsonl").write_text("\n".join(lines) + "\n")
    return "mcqa.jsonl"


def env_starts(fake_gym: FakeGym) -> list[dict[str, object]]:
    return [call for call in fake_gym.calls() if call["argv"][:2] == ["env", "start"]]  # type: ignore[index]


def entries(root: Path) -> list[Entry]:
    return Registry(root).entries()


def newest_run(pytester: pytest.Pytester) -> Path:
    return max((pytester.path / "runs").iterdir(), key=lambda p: p.stat().st_mtime)


def gone(entry: Entry) -> bool:
    """Whether nothing of a warm Gym runs any more: its keeper, and every process session it started."""
    sessions = [entry.servers, *(p["sid"] for p in started_processes(entry.home))]
    return not entry.keeper_owner.alive() and not any(session_members(sid) for sid in sessions)


@pytest.fixture
def endpoint(fake_gym: FakeGym) -> Iterator[ReplayServer]:
    """A model endpoint (the replay server, run by the test) for sessions that name a model URL and name."""
    with ReplayServer([fake_gym.recording]) as server:
        yield server


def endpoint_args(fake_gym: FakeGym, endpoint: ReplayServer, model: str = "replay") -> list[str]:
    return [
        f"--gym-checkout={fake_gym.checkout}", f"--gym-model-url={endpoint.base_url}", f"--gym-model={model}",
        "-p", "no:cacheprovider",
    ]  # fmt: skip


def test_two_sessions_start_gym_once_and_stop_all_leaves_nothing(
    pytester: pytest.Pytester, fake_gym: FakeGym, warm_registry: Path
) -> None:
    dataset = write_dataset(pytester.path)
    first = pytester.runpytest(*fake_gym.args, KEEP, "--gym-run-dir=runs", dataset)
    first.assert_outcomes(passed=3)
    first.stdout.fnmatch_lines(["gym: started warm Gym * it stays up 600 s after the last session using it ends*"])
    (entry,) = entries(warm_registry)
    assert entry.problem() is None and is_running(entry.servers)

    second = pytester.runpytest(*fake_gym.args, KEEP, "--gym-run-dir=runs", dataset)
    second.assert_outcomes(passed=3)
    second.stdout.fnmatch_lines([f"gym: attached to warm Gym {entry.short} *: no `gym env start`*"])
    assert len(env_starts(fake_gym)) == 1
    run_dir = newest_run(pytester)
    assert json.loads((run_dir / "warm.json").read_text())["attached"] is True
    assert [p["name"] for p in started_processes(run_dir)] == ["gym eval run"]
    assert (run_dir / "logs" / "gym-servers").resolve() == entry.home / "logs" / "gym-servers"
    assert entries(warm_registry) == [entry]

    assert stop_main(["--all"]) == 0
    assert entries(warm_registry) == []
    assert gone(entry)


def test_the_registry_is_owner_only_and_never_holds_the_api_key(
    pytester: pytest.Pytester,
    fake_gym: FakeGym,
    warm_registry: Path,
    endpoint: ReplayServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    secret = "sk-test-warm-" + "k3y" * 8
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    dataset = write_dataset(pytester.path)
    result = pytester.runpytest(*endpoint_args(fake_gym, endpoint), KEEP, "--gym-run-dir=runs", dataset)
    result.assert_outcomes(passed=3)
    assert secret not in result.stdout.str()
    (entry,) = entries(warm_registry)
    assert entry.model == {
        "url": endpoint.base_url, "model": "replay", "model_type": "openai_model", "api_key_env": "OPENAI_API_KEY",
    }  # fmt: skip
    checked = 0
    for folder, _subfolders, files in os.walk(warm_registry):
        assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700, folder
        for name in files:
            path = Path(folder) / name
            if path.is_symlink():
                continue
            assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
            assert secret.encode() not in path.read_bytes(), path
            checked += 1
    assert checked >= 6  # the entry, the spec, the lease-free home's config, logs, processes, keeper.json
    config = json.loads((entry.home / "gym-config.yaml").read_text())
    assert config["policy_api_key"] == "${oc.env:OPENAI_API_KEY}"


def test_a_changed_api_key_starts_another_gym(
    pytester: pytest.Pytester,
    fake_gym: FakeGym,
    warm_registry: Path,
    endpoint: ReplayServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    dataset = write_dataset(pytester.path)
    args = [*endpoint_args(fake_gym, endpoint), KEEP, "--gym-run-dir=runs", dataset]
    monkeypatch.setenv("OPENAI_API_KEY", "sk-first-key")
    pytester.runpytest(*args).assert_outcomes(passed=3)
    (first,) = entries(warm_registry)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-first-key")
    pytester.runpytest(*args).assert_outcomes(passed=3)
    assert entries(warm_registry) == [first]  # the same key: attached

    monkeypatch.setenv("OPENAI_API_KEY", "sk-rotated-key")
    result = pytester.runpytest(*args)
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(
        [f"gym: warm Gym {first.short}: it was started with another value of $OPENAI_API_KEY *; stopping it*"]
    )
    assert "sk-rotated-key" not in result.stdout.str() and "sk-first-key" not in result.stdout.str()
    (second,) = entries(warm_registry)
    assert second.key == first.key and second.keeper != first.keeper
    assert gone(first)
    assert len(env_starts(fake_gym)) == 2


def test_a_password_in_the_model_url_is_in_no_file_of_the_registry_and_a_changed_one_starts_another_gym(
    pytester: pytest.Pytester, fake_gym: FakeGym, warm_registry: Path, endpoint: ReplayServer
) -> None:
    """The keeper gets the model URL's password in its environment (spec.json, the entry and the warm Gym's config
    file hold it redacted or as ``${oc.env:...}``); a session whose URL holds another password stops that warm Gym
    and starts another, as for a changed API key. (A model server type of Gym's own client, openai_model or
    vllm_model, cannot call such a URL, which is a usage error: tests/plugin/test_credentials.py; another type may.)"""
    dataset = write_dataset(pytester.path)
    url = endpoint.base_url.replace("http://", "http://alice:CanaryPw7f3e9d@")
    args = [*endpoint_args(fake_gym, endpoint), "--gym-model-type=azure_openai_model", f"--gym-model-url={url}"]
    args += [KEEP, "--gym-run-dir=runs", dataset]
    pytester.runpytest(*args).assert_outcomes(passed=3)
    (first,) = entries(warm_registry)
    pytester.runpytest(*args).assert_outcomes(passed=3)
    assert entries(warm_registry) == [first]  # the same URL: attached
    for root in (warm_registry, pytester.path / "runs"):
        assert [path for path in root.rglob("*") if path.is_file() and b"CanaryPw" in path.read_bytes()] == []
    other = [*args[:-3], f"--gym-model-url={url.replace('CanaryPw7f3e9d', 'CanaryPw2')}", *args[-3:]]
    result = pytester.runpytest(*other)
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines([f"gym: warm Gym {first.short}: it was started with another password in its model*"])
    assert "CanaryPw" not in result.stdout.str()
    (second,) = entries(warm_registry)
    assert second.key == first.key and second.keeper != first.keeper
    assert len(env_starts(fake_gym)) == 2


def test_a_warm_gym_whose_model_client_stopped_calling_the_endpoint_is_replaced(
    pytester: pytest.Pytester, fake_gym: FakeGym, warm_registry: Path
) -> None:
    """Gym 0.7.0's model client stops calling an endpoint for good after a 401 saying the key is invalid (or a
    429 saying the quota is spent) and says so in its server's log; a warm Gym would keep failing every rollout
    of every later session without a request reaching the endpoint. The next session replaces it, and `status`
    shows it stale. (The log line is written here as Gym writes it; the stand-in has no model client.)"""
    dataset = write_dataset(pytester.path)
    pytester.runpytest(*fake_gym.args, KEEP, dataset).assert_outcomes(passed=3)
    (first,) = entries(warm_registry)
    logs = first.home / "logs" / "gym-servers"
    logs.mkdir(parents=True, exist_ok=True)
    (logs / "policy_model.log").write_text(
        "(policy_model) INFO: started\n(policy_model) [model_retry_stop url=https://api.example.com/v1/responses?"
        'key=sk-in-a-query-string-0123456789 status=401 error_msg={"error": {"code": "invalid_api_key"}}]\n'
    )
    stale = "its policy_model server stopped calling https://api.example.com/v1/responses?[redacted] after HTTP 401"
    shown = subprocess.run(
        [sys.executable, "-m", "pytest_gym_eval", "status"], capture_output=True, text=True, timeout=120
    ).stdout
    assert f"stale: {stale}" in shown and "sk-in-a-query" not in shown
    result = pytester.runpytest(*fake_gym.args, KEEP, dataset)
    result.assert_outcomes(passed=3)
    pattern = f"gym: warm Gym {first.short}: {stale} *; stopping it and starting another".replace("[r", "[[]r")
    result.stdout.fnmatch_lines([pattern])
    (second,) = entries(warm_registry)
    assert second.keeper != first.keeper and gone(first)
    assert len(env_starts(fake_gym)) == 2


def test_another_model_name_starts_a_second_gym(
    pytester: pytest.Pytester, fake_gym: FakeGym, warm_registry: Path, endpoint: ReplayServer
) -> None:
    dataset = write_dataset(pytester.path)
    for model in ("replay", "replay-b", "replay"):
        pytester.runpytest(*endpoint_args(fake_gym, endpoint, model), KEEP, dataset).assert_outcomes(passed=3)
    found = entries(warm_registry)
    assert len(found) == 2 and found[0].key != found[1].key
    assert {entry.model["model"] for entry in found} == {"replay", "replay-b"}
    assert len(env_starts(fake_gym)) == 2


@pytest.mark.parametrize("readyz_503", ["0", "2"])
def test_sessions_starting_at_once_start_one_gym(
    pytester: pytest.Pytester,
    fake_gym: FakeGym,
    warm_registry: Path,
    monkeypatch: pytest.MonkeyPatch,
    readyz_503: str,
) -> None:
    """Two sessions starting at once start one Gym; also when its head server answers 503 for a moment after Gym
    says its servers are ready, as Gym's does (the session waiting on the lock found it "stale" and stopped it)."""
    monkeypatch.setenv("FAKE_GYM_START_DELAY", "3")  # long enough for the second session to find it starting
    monkeypatch.setenv("FAKE_GYM_READYZ_503", readyz_503)
    dataset = write_dataset(pytester.path)
    sessions = [
        subprocess.Popen(
            child_pytest_argv(*fake_gym.args, KEEP, f"--gym-run-dir=runs-{n}", dataset, "-p", "no:randomly"),
            cwd=pytester.path,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for n in range(2)
    ]
    outputs = [session.communicate(timeout=120)[0] for session in sessions]
    assert [session.returncode for session in sessions] == [0, 0], outputs
    assert len(env_starts(fake_gym)) == 1
    assert sum("gym: started warm Gym" in output for output in outputs) == 1
    waited = next(output for output in outputs if "gym: attached to warm Gym" in output)
    assert "gym: waiting for another session that is starting or stopping the warm Gym" in waited
    (entry,) = entries(warm_registry)
    heads = {
        json.loads(next((pytester.path / f"runs-{n}").iterdir()).joinpath("warm.json").read_text())["head_server"][1]
        for n in range(2)
    }
    assert heads == {entry.head_server[1]}


def test_a_warm_gym_stopped_under_a_session_errors_its_pending_rollouts_at_once(
    pytester: pytest.Pytester, fake_gym: FakeGym, warm_registry: Path
) -> None:
    """`stop --all` (or a killed keeper) while a session runs against the warm Gym: the pending rollouts error
    saying the Gym went away, instead of waiting for the rollout timeout (Gym retries a refused connection without
    end)."""
    held = {"id": "t1", "responses_create_params": {"input": "ping"}, "fake": {"hold": True}}
    lines = [json.dumps({"id": "t0", "responses_create_params": {"input": "ping"}}), json.dumps(held)]
    (pytester.path / "mcqa.jsonl").write_text("\n".join(lines) + "\n")
    pytester.makeconftest(
        """
import subprocess, sys
def pytest_runtest_logreport(report):
    if report.when == "call" and report.nodeid.endswith("t0[r0]"):
        subprocess.run([sys.executable, "-m", "pytest_gym_eval", "stop", "--all"], check=True)
"""
    )
    result = pytester.runpytest(*fake_gym.args, KEEP, "mcqa.jsonl", "-p", "no:randomly", "--gym-rollout-timeout=600")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*Gym's servers went away during the run: the warm Gym * went away: its *"])
    assert entries(warm_registry) == []


def test_an_idle_warm_gym_stops_itself(pytester: pytest.Pytester, fake_gym: FakeGym, warm_registry: Path) -> None:
    dataset = write_dataset(pytester.path)
    pytester.runpytest(*fake_gym.args, "--gym-keep-alive=2", dataset).assert_outcomes(passed=3)
    (entry,) = entries(warm_registry)
    wait_until(lambda: gone(entry) and not entries(warm_registry), "the idle warm Gym stopped itself", timeout=30)
    log = (entry.home / "logs" / "keeper.log").read_text()
    assert "idle for 2 s: unregistered, stopping" in log


def test_a_dead_keepers_stale_entry_is_cleaned_by_the_next_session(
    pytester: pytest.Pytester, fake_gym: FakeGym, warm_registry: Path
) -> None:
    dataset = write_dataset(pytester.path)
    pytester.runpytest(*fake_gym.args, KEEP, dataset).assert_outcomes(passed=3)
    (stale,) = entries(warm_registry)
    os.kill(stale.keeper_owner.pid, signal.SIGKILL)
    wait_until(lambda: not stale.keeper_owner.alive(), "the keeper died")
    assert stale.problem() == f"its keeper (pid {stale.keeper_owner.pid}) is gone"
    (left,) = [found for found in find_leftovers() if found.owner == stale.keeper_owner]
    assert left.warm and "of a warm Gym whose keeper" in left.describe()

    result = pytester.runpytest(*fake_gym.args, KEEP, dataset)
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(
        [f"gym: warm Gym {stale.short}: its keeper (pid {stale.keeper_owner.pid}) is gone; stopping it and starting*"]
    )
    assert gone(stale)
    (fresh,) = entries(warm_registry)
    assert fresh.keeper != stale.keeper and fresh.problem() is None
    assert len(env_starts(fake_gym)) == 2


def test_a_live_warm_gym_is_no_dead_sessions_leftover(
    pytester: pytest.Pytester, fake_gym: FakeGym, warm_registry: Path
) -> None:
    dataset = write_dataset(pytester.path)
    pytester.runpytest(*fake_gym.args, KEEP, dataset).assert_outcomes(passed=3)
    (entry,) = entries(warm_registry)
    assert entry.keeper_owner in run_processes()  # its processes are there, owned by the live keeper
    assert not [found for found in find_leftovers() if found.owner == entry.keeper_owner]
    result = pytester.runpytest(*fake_gym.args, dataset)  # a session without --gym-keep-alive
    result.assert_outcomes(passed=3)
    assert "gym: warning" not in result.stdout.str()
    assert entry.problem() is None


def test_a_warm_gym_that_cannot_start_errors_every_item_and_leaves_nothing(
    pytester: pytest.Pytester, fake_gym: FakeGym, warm_registry: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_GYM_START", "fail")
    dataset = write_dataset(pytester.path)
    result = pytester.runpytest(*fake_gym.args, KEEP, dataset)
    result.assert_outcomes(errors=3)
    result.stdout.fnmatch_lines(["*`gym env start` exited with status 3 before its servers were ready*"])
    assert entries(warm_registry) == []
    (home,) = (warm_registry / "gyms").iterdir()
    wait_until(lambda: "stopped" in (home / "logs" / "keeper.log").read_text(), "the keeper stopped")
    assert not [owner for owner in run_processes() if str(owner.run_dir) == str(home)]


def test_a_starting_session_killed_mid_start_leaves_nothing(
    pytester: pytest.Pytester, fake_gym: FakeGym, warm_registry: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_GYM_START", "hang")  # never ready
    dataset = write_dataset(pytester.path)
    session = subprocess.Popen(
        child_pytest_argv(*fake_gym.args, KEEP, dataset), cwd=pytester.path, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    wait_until(lambda: env_starts(fake_gym), "the keeper started `gym env start`")
    (home,) = (warm_registry / "gyms").iterdir()
    session.kill()
    session.wait()
    wait_until(lambda: "stopped" in (home / "logs" / "keeper.log").read_text(), "the keeper stopped", timeout=60)
    assert "the starting session is gone before Gym was ready" in (home / "logs" / "keeper.log").read_text()
    # SIGKILLed processes can take a moment to leave /proc on a loaded machine: wait for that, bounded.
    sids = [int(call["sid"]) for call in env_starts(fake_gym)]  # type: ignore[call-overload]
    wait_until(lambda: not any(session_members(sid) for sid in sids), "every `gym env start` session ended")
    assert entries(warm_registry) == []


def test_status_lists_warm_gyms_and_stop_takes_a_key(
    pytester: pytest.Pytester, fake_gym: FakeGym, warm_registry: Path
) -> None:
    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "pytest_gym_eval", *args], capture_output=True, text=True, timeout=120
        )

    assert cli("status").stdout == f"no warm Gym (registry {warm_registry})\n"
    dataset = write_dataset(pytester.path)
    pytester.runpytest(*fake_gym.args, KEEP, dataset).assert_outcomes(passed=3)
    (entry,) = entries(warm_registry)
    wait_until(lambda: idle_since(entry.home) is not None, "the keeper saw the session end")
    shown = cli("status").stdout
    assert f"  {entry.short}  idle for " in shown and f"head server 127.0.0.1:{entry.head_server[1]}" in shown
    assert "model: openai_model, replay model at http://127.0.0.1:" in shown
    assert cli("stop", "ffffffff").returncode == 1
    stopped = cli("stop", entry.short)
    assert stopped.returncode == 0 and f"{entry.short}: stopped" in stopped.stdout
    assert gone(entry) and entries(warm_registry) == []


def test_stop_without_all_leaves_a_gym_in_use_running(
    fake_gym: FakeGym, warm_registry: Path, pytester: pytest.Pytester
) -> None:
    dataset = write_dataset(pytester.path)
    pytester.makeconftest(
        """
import subprocess, sys
from pytest_gym_eval.warm.registry import Registry
def pytest_runtest_call(item):
    if item.name.startswith("t0"):
        (entry,) = Registry().entries()
        for args in ([], [entry.short], [""]):  # every one idle; the one named; an unset shell variable
            done = subprocess.run([sys.executable, "-m", "pytest_gym_eval", "stop", *args], capture_output=True,
                                  text=True)
            print("STOP", args, done.returncode, done.stdout.strip(), done.stderr.strip().splitlines()[-1:])
"""
    )
    result = pytester.runpytest(*fake_gym.args, KEEP, dataset, "-s", "-p", "no:randomly")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(
        [
            "*STOP [[][]] 0 *: in use by 1 session(s), left running (--all stops it too) []",
            "STOP [[]'*'[]] 1 *: in use by 1 session(s), left running (--all stops it too) []",
            "STOP [[]''[]] 2  [[]*error: a KEY is empty (an unset shell variable?)*",
        ]
    )
    (entry,) = entries(warm_registry)
    assert entry.problem() is None


def test_stop_refuses_a_key_prefix_that_names_several_warm_gyms(
    warm_registry: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    registry = Registry()
    for key in ("ab12" + "0" * 60, "ab34" + "0" * 60):
        home = warm_registry / "gyms" / key[:12]
        home.mkdir(parents=True)
        registry.write(Entry(key, home, ("127.0.0.1", 9), "0:0:/nowhere", "boot", 0, {}, 60.0, 0.0))
    assert stop_main(["ab"]) == 1
    assert "'ab' starts 2 warm Gyms' keys (ab1200000000, ab3400000000): give more of the key" in capsys.readouterr().err
    assert len(registry.entries()) == 2  # neither was touched


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--gym-keep-alive", "--gym-head-server=127.0.0.1:9"], "--gym-keep-alive and --gym-head-server exclude"),
        (["--gym-keep-alive=soon"], "expected idle seconds, got 'soon'"),
        (["--gym-keep-alive", "data.jsonl"], "put --gym-keep-alive after the paths"),
        (["--gym-keep-alive=-3"], "expected idle seconds >= 0"),
    ],
)
def test_bad_keep_alive_options_are_usage_errors(pytester: pytest.Pytester, args: list[str], message: str) -> None:
    result = pytester.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert message in result.stderr.str()


def test_keep_alive_seconds_from_the_command_line_or_the_ini_file(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\ngym_keep_alive = 60\n")
    pytester.makeconftest(
        """
def pytest_sessionstart(session):
    from pytest_gym_eval.session.gym_session import SESSION_KEY
    print("KEEP", session.config.stash[SESSION_KEY].options.keep_alive)
"""
    )
    for args, shown in (
        ((), "60.0"),
        (("--gym-keep-alive",), "900.0"),
        (("--gym-keep-alive=5",), "5.0"),
        (("--gym-keep-alive=0",), "None"),
    ):
        pytester.runpytest("-s", "--collect-only", *args).stdout.fnmatch_lines([f"KEEP {shown}"])


# The key: what goes in.


def test_the_configuration_key_follows_what_changes_gym(tmp_path: Path, fake_gym: FakeGym) -> None:
    checkout = provision.load_checkout(fake_gym.checkout)
    config = fake_gym.checkout / "resources_servers" / "mcqa" / "configs" / "mcqa.yaml"
    config.write_text(  # as Gym writes them: the servers' folders are named in the config
        "mcqa:\n  resources_servers:\n    mcqa:\n      entrypoint: app.py\n"
        "mcqa_simple_agent:\n  responses_api_agents:\n    simple_agent:\n      entrypoint: app.py\n"
    )
    recording = fake_gym.recording

    def key(**changes: object) -> str:
        options: dict[str, object] = {"replay": [recording]}
        options.update(changes)
        return GymConfiguration.build(checkout, [config], "openai_model", **options).key  # type: ignore[arg-type]

    base = key()
    assert key() == base  # stable
    assert key(replay=[]) != base
    endpoint = {"replay": [], "model_url": "http://127.0.0.1:8000/v1", "model": "m", "api_key_env": "K"}
    assert key(**endpoint) != key(**{**endpoint, "model": "m2"})
    assert key(**endpoint) != key(**{**endpoint, "model_url": "http://127.0.0.1:8001/v1"})
    assert key(**endpoint) != key(**{**endpoint, "api_key_env": "OTHER"})
    recording.write_text(recording.read_text() + "\n")  # the recordings' content
    assert key() != base
    base = key()
    server = fake_gym.checkout / "resources_servers" / "mcqa" / "app.py"  # the verifier's source
    server.write_text("# verifier\n")
    assert key() != base
    base = key()
    (fake_gym.checkout / "resources_servers" / "mcqa" / "data").mkdir()
    (fake_gym.checkout / "resources_servers" / "mcqa" / "data" / "example.jsonl").write_text("{}\n")  # not source
    assert key() == base
    config.write_text(config.read_text() + "# a comment\n")  # the config file's content
    assert key() != base


def test_configuration_differences_name_what_differs(fake_gym: FakeGym) -> None:
    checkout = provision.load_checkout(fake_gym.checkout)
    config = fake_gym.checkout / "resources_servers" / "mcqa" / "configs" / "mcqa.yaml"
    common = {"model_url": "http://127.0.0.1:8000/v1", "api_key_env": "K"}
    then = GymConfiguration.build(checkout, [config], "openai_model", model="gpt-a", **common)
    now = GymConfiguration.build(checkout, [config], "openai_model", model="gpt-b", **common)
    assert now.differences(then.components) == ["the policy model: name 'gpt-a' then, 'gpt-b' now"]
    assert then.differences(then.components) == []


def test_a_warm_gym_records_latency_with_gym_latency_and_is_not_shared_with_sessions_without(
    pytester: pytest.Pytester, fake_gym: FakeGym, warm_registry: Path
) -> None:
    dataset = write_dataset(pytester.path, rows=1)
    pytester.runpytest(*fake_gym.args, KEEP, "--gym-latency", dataset).assert_outcomes(passed=1)
    (latency,) = entries(warm_registry)
    config = json.loads((latency.home / "gym-config.yaml").read_text())  # what the keeper's `gym env start` read
    assert config["observability_enabled"] is True
    assert Path(config["model_call_capture_dir"]).is_relative_to(latency.home)
    # A session without --gym-latency needs servers that record nothing: another warm Gym, and the other way round.
    pytester.runpytest(*fake_gym.args, KEEP, dataset).assert_outcomes(passed=1)
    (plain,) = [entry for entry in entries(warm_registry) if entry.key != latency.key]
    assert "observability_enabled" not in json.loads((plain.home / "gym-config.yaml").read_text())
    assert len(env_starts(fake_gym)) == 2


def test_status_lists_a_warm_gym_while_it_starts(
    pytester: pytest.Pytester,
    fake_gym: FakeGym,
    warm_registry: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from pytest_gym_eval.cli.status import main as status_main

    def status() -> str:
        assert status_main([]) == 0
        return capsys.readouterr().out

    monkeypatch.setenv("FAKE_GYM_START_DELAY", "4")  # long enough to look while it starts
    dataset = write_dataset(pytester.path, rows=1)
    session = subprocess.Popen(
        child_pytest_argv(*fake_gym.args, KEEP, dataset, "-p", "no:randomly"),
        cwd=pytester.path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        wait_until(lambda: "starting for" in status(), "status lists the starting warm Gym", timeout=60)
        shown = status()
        (home,) = (warm_registry / "gyms").iterdir()
        assert f"  {home.name[:12]}  starting for " in shown and f"home: {home}" in shown, shown
        assert "keeper pid " in shown and "keeper.log" in shown
    finally:
        output = session.communicate(timeout=120)[0]
    assert session.returncode == 0, output
    (entry,) = entries(warm_registry)
    shown = status()
    assert f"  {entry.short}  " in shown and "starting for" not in shown, shown


def test_stopping_a_warm_gym_leaves_a_recorded_session_that_is_now_someone_elses(warm_registry: Path) -> None:
    """What failed a CI run: a test's teardown stopped its warm Gym long after the Gym had ended, and the session
    ids its home recorded had since been given to another warm Gym's keeper, which was SIGKILLed."""
    home = warm_registry / "gyms" / "stale"
    home.mkdir(parents=True)
    stranger, owner = stranger_and_dead_owner(home)
    try:
        entry = Entry("0" * 64, home, ("127.0.0.1", 9), owner.marker, boot_id(), stranger.pid, {}, 60.0, 0.0)
        Registry().write(entry)
        assert stop_warm(entry, Registry(), grace=0) == []
        assert stranger.poll() is None
        assert entries(warm_registry) == []
    finally:
        stranger.kill()
        stranger.wait()


def test_the_configuration_key_follows_the_bound_model_servers(fake_gym: FakeGym) -> None:
    checkout = provision.load_checkout(fake_gym.checkout)
    config = fake_gym.checkout / "resources_servers" / "mcqa" / "configs" / "mcqa.yaml"
    common: dict[str, object] = {"model_url": "http://127.0.0.1:8000/v1", "model": "m", "api_key_env": "K"}
    judge = ModelServerBinding(
        "judge_model", url="http://u:hunter2@127.0.0.1:9/v1", model="j", api_key_env="J"
    ).described()
    plain = GymConfiguration.build(checkout, [config], "openai_model", **common)  # type: ignore[arg-type]
    bound = GymConfiguration.build(checkout, [config], "openai_model", model_servers={"judge_model": judge}, **common)  # type: ignore[arg-type]
    other = GymConfiguration.build(
        checkout,
        [config],
        "openai_model",
        model_servers={"judge_model": {**judge, "model": "j2"}},
        **common,  # type: ignore[arg-type]
    )
    assert GymConfiguration.build(checkout, [config], "openai_model", model_servers={}, **common).key == plain.key  # type: ignore[arg-type]
    assert len({plain.key, bound.key, other.key}) == 3
    assert "hunter2" not in json.dumps(bound.components)
    assert other.differences(bound.components) == [
        "the bound model servers: judge_model {'url': 'http://u:***@127.0.0.1:9/v1', 'model': 'j', "
        "'api_key_env': 'J', 'api': None} then, {'url': 'http://u:***@127.0.0.1:9/v1', 'model': 'j2', "
        "'api_key_env': 'J', 'api': None} now"
    ]
