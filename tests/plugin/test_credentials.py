"""No credential an option's value holds (a URL's ``user:password@``, a ``?password=``, in ``--gym-history``,
``--gym-model-url`` or a ``--gym-policy`` spec) in anything the plugin writes or starts: the run directory
(``manifest.json``, Gym's config files), every report, the terminal, the argv of the processes it starts, and the
command printed after Ctrl-C, which still resumes the run, reading the secrets from the environment
(pytest_gym_eval/core/credentials.py); against the stand-in ``gym`` (tests/support/fake_gym.py)."""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_gym_eval.core.credentials import redact_args, redact_value, secret_spans
from pytest_gym_eval.gym.resume import resume_command, secret_variables
from pytest_gym_eval.replay import ReplayServer
from tests.support.children import REPORT_ARGS, interrupt, run_until_reported
from tests.support.fakes import FakeGym

CANARY = "CanaryPw7f3e9d"
ROW = {"responses_create_params": {"input": [{"role": "user", "content": "ping"}]}}


@pytest.fixture
def endpoint(fake_gym: FakeGym) -> Iterator[ReplayServer]:
    """A model endpoint (the replay server, run by the test); its key, the canary, is in the key's variable (a URL
    holding a password is refused: Gym's model client cannot call it)."""
    with ReplayServer([fake_gym.recording]) as server:
        yield server


def options(kind: str, fake_gym: FakeGym, endpoint: ReplayServer) -> list[str]:
    """The options of a session whose credentials are the canary: the model's key (its variable, set by the test)
    and a history URL's ``?password=`` (``model-url``), or a policy's key and a history URL's password
    (``policy``)."""
    if kind == "model-url":
        return [
            f"--gym-model-url={endpoint.base_url}", "--gym-model", "replay",
            f"--gym-history=postgresql://bob@127.0.0.1:9/evals?sslmode=disable&password={CANARY}",
        ]  # fmt: skip
    return [
        f"--gym-policy=base=replay:{fake_gym.recording}",
        "--gym-policy", f"cand={endpoint.base_url},model=replay",
        f"--gym-history=postgresql://bob:{CANARY}@127.0.0.1:9/evals",
    ]  # fmt: skip


def descendants_argv(root: int) -> list[str]:
    """The command lines of every running process below ``root`` (not ``root``'s own)."""
    parents: dict[int, int] = {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except (OSError, ValueError):
            continue
        parents[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
    below, found = {root}, True
    while found:
        found = False
        for pid, parent in parents.items():
            if parent in below and pid not in below:
                below.add(pid)
                found = True
    argv = []
    for pid in below - {root}:
        try:
            argv.append(Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"))
        except OSError:
            continue
    return argv


def files_holding(root: Path, text: str) -> list[Path]:
    return [path for path in root.rglob("*") if path.is_file() and text.encode() in path.read_bytes()]


@pytest.mark.parametrize("kind", ["model-url", "policy"])
def test_no_credential_of_an_option_in_files_reports_terminal_argv_or_the_resume_command(
    pytester: pytest.Pytester, fake_gym: FakeGym, endpoint: ReplayServer, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    rows = [{"id": f"t{i}", **ROW, **({"fake": {"hold": "FAKE_HOLD"}} if i == 2 else {})} for i in range(3)]
    (pytester.path / "mcqa.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    monkeypatch.setenv("FAKE_HOLD", "1")  # t2 waits while it is set: the session is interrupted there
    monkeypatch.setenv("OPENAI_API_KEY", CANARY)  # the model's key (--gym-api-key-env's default)
    args = [f"--gym-checkout={fake_gym.checkout}", *options(kind, fake_gym, endpoint), "mcqa.jsonl"]
    args += ["--gym-run-dir=runs", "--gym-startup-timeout=30", "-v", "-p", "no:randomly", "-p", "no:cacheprovider"]
    args += REPORT_ARGS
    process, seen = run_until_reported(pytester.path, args, lambda line: "t1[r0" in line and "PASSED" in line)
    started = descendants_argv(process.pid)  # while Gym runs: the processes the session started
    output = interrupt(process, seen, timeout=120, sig=signal.SIGINT)
    assert process.returncode == pytest.ExitCode.INTERRUPTED, output[-3000:]
    assert any("gym" in argv for argv in started), started
    assert [argv for argv in started if CANARY in argv] == []
    assert [call for call in fake_gym.calls() if CANARY in json.dumps(call)] == []
    assert CANARY not in output
    assert files_holding(pytester.path / "runs", CANARY) == []
    for report in ("junit.xml", "report.json", "summary.md", "page.html"):
        assert CANARY not in (pytester.path / report).read_text(), report
    (old,) = (pytester.path / "runs").iterdir()
    manifest = json.loads((old / "manifest.json").read_text())
    assert any("bob:***@" in arg or "password=***" in arg for arg in manifest["command"]["args"])

    command = next(line for line in output.splitlines() if line.startswith("gym: resume this run with: "))
    command = command.split(": ", 2)[2]
    variables = next(line for line in output.splitlines() if line.startswith("gym: the command reads the cred"))
    known = ("GYM_HISTORY_PASSWORD", "GYM_MODEL_URL_PASSWORD", "GYM_POLICY_PASSWORD")
    names = [name for name in known if name in command]
    assert names == ["GYM_HISTORY_PASSWORD"] and all(name in variables for name in names), (command, variables)
    if kind == "policy":
        return  # a session comparing policies cannot be resumed (--gym-policy with --gym-resume: a usage error)
    monkeypatch.delenv("FAKE_HOLD")
    environment = {**os.environ, **dict.fromkeys(names, CANARY)}
    resumed = subprocess.run(
        ["bash", "-c", command], cwd=pytester.path, capture_output=True, text=True, timeout=120, env=environment
    )
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    assert f"gym: resuming {old}: 2 of 3 rollouts reused, 1 to roll out" in resumed.stdout
    assert "3 passed" in resumed.stdout.splitlines()[-1]
    assert CANARY not in resumed.stdout + resumed.stderr
    assert files_holding(pytester.path / "runs", CANARY) == []


def test_secrets_of_urls_anywhere_in_a_value() -> None:
    value = "cand=http://me:pw@h:1/v1?x=1&api-key=k2,model=m"
    assert [value[start:end] for start, end, _ in secret_spans(value)] == ["pw", "k2"]
    assert redact_value(value) == "cand=http://me:***@h:1/v1?x=1&api-key=***,model=m"
    assert redact_value("postgresql://me@db/e?sslmode=require&password=p") == (
        "postgresql://me@db/e?sslmode=require&password=***"
    )
    assert redact_value("postgresql://me@db/e") == "postgresql://me@db/e"  # a user without a password
    assert redact_value("runs/a:b@c") == "runs/a:b@c"  # no URL
    assert redact_args(["--gym-history", "sqlite:///h.db"]) == ["--gym-history", "sqlite:///h.db"]
    # A password may hold a comma (libpq reads "ab,Canary2"): only a spec's ",key=" ends it.
    assert redact_value("postgresql://bob@h:9/evals?password=ab,Canary2") == "postgresql://bob@h:9/evals?password=***"


@pytest.mark.parametrize(
    ("value", "redacted"),
    [
        # libpq and SQLAlchemy read a password up to the "@" a host follows, whatever it holds.
        ("postgresql://u:pa?ss#Canary@h/db", "postgresql://u:***@h/db"),
        ("postgresql://u:pa/ss#Canary@h:5432/db?sslmode=require", "postgresql://u:***@h:5432/db?sslmode=require"),
        ("postgresql://u:Canary@h1:5432,h2:5433/db", "postgresql://u:***@h1:5432,h2:5433/db"),
        ("postgresql://u:Canary@[::1", "postgresql://u:***@[::1"),
        ("http://me@corp.example:Canary@h/v1", "http://me@corp.example:***@h/v1"),
        # libpq reads "#" as part of a query value.
        ("postgresql://u@h/db?password=pa#Canary&sslmode=require", "postgresql://u@h/db?password=***&sslmode=require"),
        # A path made of a URL keeps one "/" of its "//".
        ("no such file: /tmp/run/http:/u:Canary@h/x.json", "no such file: /tmp/run/http:/u:***@h/x.json"),
        (str(Path("mysql://u:Canary@h/db")), "mysql:/u:***@h/db"),
        # An "@" in a query or a spec's later value is no userinfo.
        ("http://h:8080/v1?to=a@b.example&x=1", "http://h:8080/v1?to=a@b.example&x=1"),
        ("a=http://u:Canary@h/v1,model=org@rev", "a=http://u:***@h/v1,model=org@rev"),
    ],
)
def test_a_password_is_redacted_whole_whatever_it_holds(value: str, redacted: str) -> None:
    assert redact_value(value) == redacted


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--gym-history=mysql://u:CanaryM@h/db"], "--gym-history: expected a SQLite file path or a postgresql://"),
        (["--gym-history=sqlite:///h.db"], "--gym-history: expected a SQLite file path or a postgresql://"),
        (["--gym-history=postgresql://[::1"], "--gym-history: not a valid PostgreSQL URL 'postgresql://[::1'"),
        (["--gym-history=postgresql://u:CanaryP@[::1"], "--gym-history: not a valid PostgreSQL URL"),
        (["--gym-baseline=http://u:CanaryB@h/x.json"], "--gym-baseline: expected a file path, got a URL"),
        (["--gym-replay=http://u:CanaryR@h/x.jsonl"], "--gym-replay: expected a file path, got a URL"),
        (["--gym-checkout=http://u:CanaryC@h/gym"], "--gym-checkout: expected a file path, got a URL"),
        (["--gym-quarantine=https://u:CanaryQ@h/q"], "--gym-quarantine: expected a file path, got a URL"),
        (["--gym-report=s3://u:CanaryS@bucket/r.json"], "--gym-report: expected a file path, got a URL"),
        (["--gym-resume=http://u:CanaryD@h/runs/a"], "--gym-resume: expected a run directory, got a URL"),
        (
            ["--gym-policy=a=replay:http://u:CanaryY@h/x.jsonl", "--gym-policy=b=http://h:1/v1,model=m"],
            "expected a recordings file path after replay:, got a URL",
        ),
        # Gym's model client cannot call an endpoint URL holding credentials or a query: refused, never echoed.
        (["--gym-model-url=http://u:CanaryU@h:1/v1", "--gym-model=m"], "--gym-model-url 'http://u:***@h:1/v1': cred"),
        (["--gym-model-url=http://h:1/v1?api-key=CanaryQ", "--gym-model=m"], "in the URL cannot reach the endpoint"),
        (
            ["--gym-policy=a=http://h:1/v1,model=m", "--gym-policy=b=http://u:CanaryV@h:1/v1,model=m"],
            "credentials in the URL (user:password@) cannot reach the endpoint",
        ),
        (["--gym-model-server=judge_model=http://u:CanaryJ@h/v1,model=m"], "credentials in the URL (user:password@)"),
    ],
)
def test_an_option_value_that_cannot_be_used_is_a_usage_error_that_does_not_echo_its_secret(
    pytester: pytest.Pytester, args: list[str], said: str
) -> None:
    # A URL where a path is expected, a history URL of another scheme, a malformed PostgreSQL URL: one usage error
    # naming the option (never an INTERNALERROR, never a path made of the URL with its password in it).
    result = pytester.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert said in result.stderr.str()
    assert "Canary" not in result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()


@pytest.mark.parametrize(
    "args",
    [
        ["history", "mysql://u:CanaryM@h/db", "runs"],
        ["history", "postgresql://u:CanaryP@[::1", "runs"],
        ["merge", "http://u:CanaryR@h/r.json"],
        ["merge", "--gym-baseline=http://u:CanaryB@h/r.json", "r.json"],
    ],
)
def test_a_command_never_echoes_a_secret_of_its_arguments(tmp_path: Path, args: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pytest_gym_eval", *args], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2, done.stderr
    assert "error:" in done.stderr and "***" in done.stderr
    assert "Canary" not in done.stdout + done.stderr
    assert list(tmp_path.iterdir()) == []  # no folder made of the URL


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("--gym-head-server", "http://u:CanaryA@127.0.0.1:1"),
        ("--gym-head-server", "u:CanaryA@127.0.0.1:1"),
        ("--gym-ray-address", "ray://u:CanaryC@127.0.0.1:6379"),
    ],
)
def test_an_address_with_credentials_is_a_usage_error_that_does_not_echo_them(
    pytester: pytest.Pytester, option: str, value: str
) -> None:
    # Gym's head server and Ray take no credentials: a value holding some is a mistake, said without the secret.
    result = pytester.runpytest(f"{option}={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert f"{option}" in result.stderr.str() and "no " in result.stderr.str()
    assert "Canary" not in result.stdout.str() + result.stderr.str()


def test_the_resume_command_names_a_variable_for_each_secret() -> None:
    args = ["--gym-history", "postgresql://me:p1@db/e", "--gym-policy=a=http://u:p2@h/v1,model=m"]
    args += ["--gym-policy=b=http://u:p3@h/v1,model=m", "--gym-resume=/runs/a"]
    command = resume_command(args, Path("/runs/b"), ["pytest"])
    assert command == (
        'pytest --gym-history postgresql://me:"${GYM_HISTORY_PASSWORD}"@db/e '
        '--gym-policy=a=http://u:"${GYM_POLICY_PASSWORD}"@h/v1,model=m '
        '--gym-policy=b=http://u:"${GYM_POLICY_PASSWORD_2}"@h/v1,model=m --gym-resume=/runs/b'
    )
    assert secret_variables(args) == {
        "GYM_HISTORY_PASSWORD": "the password in --gym-history",
        "GYM_POLICY_PASSWORD": "the password in --gym-policy",
        "GYM_POLICY_PASSWORD_2": "the password in --gym-policy",
    }
    echoed = subprocess.run(
        ["bash", "-c", command.replace("pytest", "printf '%s\\n'", 1)], capture_output=True, text=True, check=True,
        env={"GYM_HISTORY_PASSWORD": "p 1", "GYM_POLICY_PASSWORD": "p2", "GYM_POLICY_PASSWORD_2": "p$3"},
    )  # fmt: skip
    assert echoed.stdout.splitlines() == [
        "--gym-history", "postgresql://me:p 1@db/e", "--gym-policy=a=http://u:p2@h/v1,model=m",
        "--gym-policy=b=http://u:p$3@h/v1,model=m", "--gym-resume=/runs/b",
    ]  # fmt: skip


def test_the_model_probe_sends_a_urls_userinfo_as_basic_credentials() -> None:
    from pytest_gym_eval.gym.model_probe import without_userinfo

    assert without_userinfo("http://a:b%40c@h:1/v1") == ("http://h:1/v1", base64.b64encode(b"a:b@c").decode())
    assert without_userinfo("http://h:1/v1") == ("http://h:1/v1", "")
