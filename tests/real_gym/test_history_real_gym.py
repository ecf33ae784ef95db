"""Memory across runs against real Gym (issue 26): the project's mcqa example (examples/mcqa, graded by Gym's own
``mcqa`` verifier) evaluated in five sessions whose recorded answer to one task alternates between right and
wrong, each appended to ``--gym-history`` (a SQLite file, and a real PostgreSQL server on 127.0.0.1). That task
is labelled flaky with its evidence and the others stable; quarantining it lets the gate it alone failed pass.

The sessions share one warm Gym (``--gym-keep-alive``): the model endpoint is a replay server this test runs on
one port, restarted with the other recordings between sessions (same URL, so the same warm Gym). No reward is
written here: the example's recorded answers are graded by Gym in each session.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_gym_eval import provision
from pytest_gym_eval.history.urls import redact_url
from pytest_gym_eval.replay import ReplayServer
from tests.support import PROJECT_EXAMPLE
from tests.support.postgres import PASSWORD, find_binaries, postgres_server

TASK = "mcqa-001"
"""The task whose recorded answer alternates (right in the example's recordings: ``\\boxed{A}``)."""
DATASET = "datasets/mcqa.jsonl"


@pytest.fixture(scope="module")
def postgres_url() -> Iterator[str]:
    """A URL (with a password) of a real PostgreSQL server on 127.0.0.1 started for this module."""
    binaries = find_binaries()
    if binaries is None:
        pytest.skip("no PostgreSQL binaries (initdb, pg_ctl) on PATH or in /usr/lib/postgresql/*/bin")
    with postgres_server(binaries) as server:
        yield server.url


def recordings(folder: Path) -> tuple[Path, Path]:
    """The example's recordings (``right``) and a copy whose answer to :data:`TASK` is wrong (``wrong``)."""
    right = PROJECT_EXAMPLE / "recordings" / "mcqa_rollouts.jsonl"
    rows = [json.loads(line) for line in right.read_text().splitlines() if line.strip()]
    changed = 0
    for row in rows:
        if "least time to orbit the Sun" in row["responses_create_params"]["input"][-1]["content"]:
            part = row["response"]["output"][-1]["content"][-1]
            part["text"] = part["text"].replace("\\boxed{A}", "\\boxed{B}")
            row["reward"], changed = 0.0, changed + 1
    assert changed == 1
    wrong = folder / "wrong_rollouts.jsonl"
    wrong.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return right, wrong


def project_example(folder: Path) -> None:
    """The example's dataset and pytest.ini (2 repeats, mean reward gate 0.7) in ``folder``."""
    (folder / "datasets").mkdir()
    shutil.copy(PROJECT_EXAMPLE / "datasets" / "mcqa.jsonl", folder / "datasets" / "mcqa.jsonl")
    shutil.copy(PROJECT_EXAMPLE / "pytest.ini", folder / "pytest.ini")


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_five_sessions_label_the_alternating_task_flaky_and_quarantine_lets_its_gate_pass(
    pytester: pytest.Pytester,
    gym_checkout: provision.GymCheckout,
    warm_registry: Path,
    request: pytest.FixtureRequest,
    backend: str,
) -> None:
    began = time.monotonic()
    project_example(pytester.path)
    right, wrong = recordings(pytester.path)
    target = str(pytester.path / "gym-history.db") if backend == "sqlite" else request.getfixturevalue("postgres_url")
    if backend == "postgres":
        import psycopg

        with psycopg.connect(target, autocommit=True) as connection:
            connection.execute("DROP TABLE IF EXISTS rollouts, run_datasets, runs, schema_version")
    shown = redact_url(target)
    port = 0
    reports: list[dict[str, object]] = []
    quarantine = pytester.path / "gym-quarantine.txt"
    quarantine.write_text(f"{DATASET}  {TASK}  2999-12-31  its recorded answer alternates (this test)\n")

    def session(recording: Path, number: int, *extra: str) -> pytest.RunResult:
        nonlocal port
        with ReplayServer([recording], port=port) as endpoint:
            port = endpoint.port
            result = pytester.runpytest(
                f"--gym-checkout={gym_checkout.path}", f"--gym-model-url={endpoint.base_url}", "--gym-model=replay",
                "--gym-keep-alive=600", f"--gym-history={target}", f"--gym-report=report{number}.json",
                "-p", "no:cacheprovider", *extra,
            )  # fmt: skip
        reports.append(json.loads((pytester.path / f"report{number}.json").read_text()))
        return result

    for number, recording in enumerate([right, wrong, right, wrong, right], start=1):
        result = session(recording, number)
        text = result.stdout.str()
        assert f"gym history: run {number} appended to {shown}" in text, text[-3000:]
        assert result.ret == (0 if recording == right else 1), text[-3000:]  # 9 or 8 of 12 right: gate 0.7
        if recording == wrong:
            result.stdout.fnmatch_lines(["*gym gates: FAIL*mean reward 0.67 < 0.70*"])
        if number == 2:  # the terminal names a new failure, then a new flake, with the evidence
            result.stdout.fnmatch_lines([f"  newly regressed task {TASK}: outcomes P F over 2 runs, 1 change, *"])
        if number == 3:
            result.stdout.fnmatch_lines([f"  new flaky task {TASK}: outcomes P F P over 3 runs, 2 changes, *"])
    assert PASSWORD not in json.dumps(reports)
    block = reports[-1]["history"]
    assert isinstance(block, dict)
    assert (block["target"], block["run_id"], block["error"]) == (shown, 5, None)
    tasks = block["datasets"][DATASET]["tasks"]
    labels = {task: entry["label"] for task, entry in tasks.items()}
    broken = ("mcqa-004", "mcqa-009", "mcqa-011")  # wrong every time
    expected = {task: "flaky" if task == TASK else "broken" if task in broken else "stable" for task in labels}
    assert labels == expected and len(labels) == 12
    assert tasks[TASK]["sparkline"] == "PFPFP"
    # Replayed answers: a task's two repeats always agree, so each run is one trial (stability-2).
    assert tasks[TASK]["evidence"] == (
        "outcomes P F P F P over 5 runs, 4 changes, passed 3 of 5 runs (its repeats agree: copies, one trial a run)"
    )
    assert {tasks[t]["sparkline"] for t in broken} == {"FFFFF"}
    result.stdout.fnmatch_lines([f"history {DATASET}: 5 runs, 3 broken, 1 flaky, 8 stable; *"])

    quarantined = session(wrong, 6, f"--gym-quarantine={quarantine}")
    text = quarantined.stdout.str()
    assert quarantined.ret == 0, text[-3000:]
    quarantined.stdout.fnmatch_lines(
        [
            "gym gates: the gate passes (1 quarantined task left out of the gates)",
            f"gym quarantined: task {TASK} of {DATASET} (0 of 2 rollouts passed) left out of the gates until "
            "2999-12-31: *",
        ]
    )
    assert [len([r for r in report["rollouts"] if r["task_id"] == TASK]) for report in reports] == [2] * 6  # type: ignore[index,union-attr]
    assert "gym: attached to warm Gym" in text  # one Gym served every session
    print(f"\n{backend}: six real-Gym sessions with history in {time.monotonic() - began:.0f} s")
