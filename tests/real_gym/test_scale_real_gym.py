"""Beyond one machine, against real Gym 0.7.0: the project's mcqa example run as three shard sessions and
merged (the same summary, verdict and exit status as one session), and Gym's servers on an existing two-node
Ray cluster that outlives the session and keeps nothing of it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from pytest_gym_eval import provision
from pytest_gym_eval.gym.processes import session_members
from pytest_gym_eval.reporting.json_report import SCHEMA_PATH
from tests.support import PROJECT_EXAMPLE
from tests.support.children import started_processes
from tests.support.junit import junit_aggregates
from tests.support.ray_cluster import RayCluster, listening_addresses
from tests.support.real_gym import GymExample, SharedGym

COLUMNS = "100"


def summary_section(output: str) -> list[str]:
    """The ``gym reward summary`` section through the verdict's reason, without wall times and Gym's own figures
    (a session reads them from Gym's aggregate metrics file, which a merge of shard reports does not have)."""
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if "gym reward summary" in line)
    end = next(i for i, line in enumerate(lines) if line.startswith("gym gates:"))
    kept: list[str] = []
    in_gyms_own = False
    for line in lines[start : end + 1]:
        in_gyms_own = line.startswith("  gym's own") or (in_gyms_own and line.startswith(" " * 14))
        if not in_gyms_own and "wall time" not in line:
            kept.append(line)
    return kept


def test_three_shards_of_the_mcqa_example_merge_into_one_sessions_verdict(
    pytester: pytest.Pytester, shared_gym: SharedGym, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The project's example as a CI job would run it: its pytest.ini (2 repeats, a 0.7 mean-reward gate) and
    # dataset, against the tier's Gym (which also serves this example's recorded answers).
    shutil.copytree(PROJECT_EXAMPLE / "datasets", pytester.path / "datasets")
    shutil.copy(PROJECT_EXAMPLE / "pytest.ini", pytester.path / "pytest.ini")
    monkeypatch.setenv("COLUMNS", COLUMNS)
    common = [*shared_gym.args, "-p", "no:cacheprovider", "-p", "no:randomly"]
    alone = pytester.runpytest_subprocess(*common, "--gym-report=alone.json", "--junitxml=alone.xml")
    alone.assert_outcomes(passed=19, failed=6)  # the example's README: 24 rollouts and the gate item
    assert alone.ret == 0
    assert "  gym's own   pass@1[avg-of-2]/accuracy 75" in alone.stdout.str()  # Gym's figure beside ours
    shards = [
        pytester.runpytest_subprocess(*common, f"--gym-shard={i}/3", f"--gym-report=s{i}.json") for i in (1, 2, 3)
    ]
    reports = [json.loads((pytester.path / f"s{i}.json").read_text()) for i in (1, 2, 3)]
    schema = json.loads(SCHEMA_PATH.read_text())
    for index, (result, report) in enumerate(zip(shards, reports, strict=True), 1):
        jsonschema.validate(report, schema)
        assert report["meta"]["shard"] == f"{index}/3"
        # 12 tasks in 3 shards: 4 tasks (8 rollouts) each; pytest deselects the other 16 items.
        assert len(report["rollouts"]) == 8 and result.parseoutcomes()["deselected"] == 16
    ids = [r["nodeid"] for report in reports for r in report["rollouts"]]
    assert len(set(ids)) == 24

    merged = subprocess.run(
        [sys.executable, "-m", "pytest_gym_eval", "merge", "s1.json", "s2.json", "s3.json",
         "--gym-report=merged.json", "--junitxml=merged.xml"],
        cwd=pytester.path, capture_output=True, text=True, timeout=300, env={**os.environ, "COLUMNS": COLUMNS},
    )  # fmt: skip
    assert merged.returncode == alone.ret == 0, merged.stdout + merged.stderr
    assert "gym merge: 3 reports (shards 1/3, 2/3, 3/3), 24 of 24 selected rollouts" in merged.stdout
    assert summary_section(merged.stdout) == summary_section(alone.stdout.str())
    assert "  mean reward 0.75 " in "\n".join(summary_section(merged.stdout))
    assert "gym gates: the gate passes" in merged.stdout
    one, whole = (
        json.loads((pytester.path / "alone.json").read_text()),
        json.loads((pytester.path / "merged.json").read_text()),
    )
    jsonschema.validate(whole, schema)
    drop = ("wall_time", "gym")  # Gym's own figures are per shard (its aggregate of its share): a merge leaves them out
    assert [{k: v for k, v in d.items() if k not in drop} for d in whole["datasets"]] == [
        {k: v for k, v in d.items() if k not in drop} for d in one["datasets"]
    ]
    assert [(r["nodeid"], r["reward"]) for r in whole["rollouts"]] == [
        (r["nodeid"], r["reward"]) for r in one["rollouts"]
    ]
    assert junit_aggregates(pytester.path / "merged.xml", "gym::datasets/") == junit_aggregates(
        pytester.path / "alone.xml", "gym::datasets/"
    )
    assert junit_aggregates(pytester.path / "alone.xml", "gym::datasets/")  # not vacuous


# --- Gym on an existing Ray cluster -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ray_cluster(gym_checkout: provision.GymCheckout, request: pytest.FixtureRequest) -> Iterator[RayCluster]:
    """A two-node Ray cluster started with Gym's own ``ray`` (loopback addresses only), stopped at the end with
    every one of its processes. Its bytecode cache lives in pytest's cache folder, so later runs start faster."""
    root = Path(tempfile.mkdtemp(prefix="ray-", dir="/tmp"))  # short: Ray puts Unix sockets under it
    cache = getattr(request.config, "cache", None)
    pycache = cache.mkdir("ray-pycache") if cache is not None else root / "pycache"
    cluster = RayCluster(gym_checkout.path / ".venv" / "bin" / "ray", root, pycache)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
        left = cluster.processes()
        shutil.rmtree(root, ignore_errors=True)
        assert left == [], f"cluster processes still running: {left}"


def test_gym_runs_on_an_existing_ray_cluster_and_leaves_it_as_it_was(
    pytester: pytest.Pytester, gym_example: GymExample, ray_cluster: RayCluster
) -> None:
    cluster_before = set(ray_cluster.processes())
    nodes_before = {node["node_id"] for node in ray_cluster.alive_nodes()}
    assert len(nodes_before) == 2
    if shutil.which("ss"):
        assert listening_addresses(cluster_before) <= {"127.0.0.1", "[::ffff:127.0.0.1]"}
    jobs_before = {job["job_id"] for job in ray_cluster.state("jobs")}

    target = pytester.path / "datasets" / "mcqa.jsonl"
    target.parent.mkdir()
    shutil.copy(gym_example.dataset, target)
    result = pytester.runpytest_subprocess(
        f"--gym-checkout={gym_example.checkout}", f"--gym-replay={gym_example.recordings}",
        f"--gym-ray-address={ray_cluster.address}", "datasets/mcqa.jsonl", "--gym-run-dir=runs",
        "--gym-report=report.json", "-p", "no:cacheprovider",
    )  # fmt: skip
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed", 0) + outcomes.get("failed", 0) == 5, result.stdout.str()[-3000:]
    result.stdout.fnmatch_lines([f"*starting Gym's servers on the Ray cluster at {ray_cluster.address}*"])
    (run_dir,) = (pytester.path / "runs").iterdir()
    servers_log = (run_dir / "logs" / "gym-env-start.log").read_text()
    assert f"Connecting to Ray cluster at specified address: {ray_cluster.address}" in servers_log
    assert "starting a new Ray cluster" not in servers_log
    # Gym's own aggregate metrics agree with the report: the rollouts really ran.
    (entry,) = json.loads((run_dir / "gym-output" / "rollouts_aggregate_metrics.json").read_text())
    report = json.loads((pytester.path / "report.json").read_text())
    assert report["datasets"][0]["mean_reward"]["estimate"] == pytest.approx(entry["agent_metrics"]["mean/reward"])

    # The session's processes are gone; the cluster's are all still there, with both nodes.
    assert [sid for sid in (p["sid"] for p in started_processes(run_dir)) if session_members(sid)] == []
    assert cluster_before <= set(ray_cluster.processes())
    assert {node["node_id"] for node in ray_cluster.alive_nodes()} == nodes_before
    # Gym joined the cluster as a driver (a job of its own), and nothing of that job is left on it.
    session_jobs = [job for job in ray_cluster.state("jobs") if job["job_id"] not in jobs_before]
    assert session_jobs, "Gym never connected to the cluster"
    deadline = time.monotonic() + 120
    while True:
        jobs = {job["job_id"]: job for job in ray_cluster.state("jobs") if job["job_id"] not in jobs_before}
        actors = [a for a in ray_cluster.state("actors") if a.get("job_id") in jobs and a.get("state") != "DEAD"]
        workers = [w for w in ray_cluster.state("workers") if w.get("job_id") in jobs and w.get("is_alive")]
        running = [job for job in jobs.values() if job.get("status") not in ("SUCCEEDED", "FAILED", "STOPPED")]
        if not (actors or workers or running) or time.monotonic() > deadline:
            break
        time.sleep(2.0)  # the GCS marks a driver's job finished a moment after the driver has gone
    assert (actors, workers, running) == ([], [], []), _describe(jobs)


def _describe(jobs: dict[str, Any]) -> str:
    return json.dumps(list(jobs.values()), indent=1, default=str)[-3000:]
