"""The ``latency`` benchmark: from a rollout line being written (a stand-in ``gym``) to its item's report: median and
p95.

Run alone: ``.venv/bin/python benchmarks/run.py --only latency``."""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from common import (
    AGENT,
    HERE,
    PYTEST,
    Row,
    pytest_ini,
    run_child,
    write_mcqa,
)

NAME = "latency"
"""Its name in ``--only`` and the table."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--latency-lines", type=int, help="latency: rollouts (default 200; quick 40)")
    parser.add_argument("--pause", type=float, default=0.05, help="latency: mean seconds between two lines (0.05)")


def run(work: Path, args: argparse.Namespace, quick: bool) -> list[Row]:
    """The table's rows of this benchmark, with ``args``' settings (``quick``: scaled down)."""
    return bench_latency(work, args.latency_lines or (40 if quick else 200), args.pause)


LATENCY_CONFTEST = """
import json, os, resource, time


def pytest_runtest_logreport(report):
    if report.when == "call":
        with open(os.environ["BENCH_REPORTS"], "a") as handle:
            handle.write(json.dumps({"nodeid": report.nodeid, "reported": time.time()}) + "\\n")


def pytest_sessionstart(session):
    session.config._bench_start = (time.time(), resource.getrusage(resource.RUSAGE_SELF))


def pytest_sessionfinish(session):
    wall0, usage0 = session.config._bench_start
    usage = resource.getrusage(resource.RUSAGE_SELF)
    cpu = usage.ru_utime + usage.ru_stime - usage0.ru_utime - usage0.ru_stime
    with open(os.environ["BENCH_REPORTS"], "a") as handle:
        handle.write(json.dumps({"cpu": cpu, "wall": time.time() - wall0}) + "\\n")
"""


def fake_checkout(root: Path) -> Path:
    """A directory that looks like a Gym checkout whose ``gym`` is ``benchmarks/fake_gym.py``."""
    checkout = root / "fake-gym-checkout"
    (checkout / "nemo_gym").mkdir(parents=True)
    (checkout / "nemo_gym" / "__init__.py").write_text("")
    (checkout / "pyproject.toml").write_text('[project]\nname = "nemo-gym"\nversion = "0.7.0"\n')
    gym = checkout / ".venv" / "bin" / "gym"
    gym.parent.mkdir(parents=True)
    gym.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{HERE / "fake_gym.py"}" "$@"\n')
    gym.chmod(0o755)
    configs = checkout / "resources_servers" / "mcqa" / "configs"
    configs.mkdir(parents=True)
    (configs / "mcqa.yaml").write_text(f"mcqa:\n  resources_servers: {{}}\n{AGENT}:\n  x: 1\n")
    return checkout


def percentile(values: Sequence[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def idle_feed_cpu(work: Path, seconds: float) -> float:
    """Percent of one core a :class:`RolloutFeed` uses following files that do not change (this process is
    otherwise asleep)."""
    from pytest_gym_eval.gym.feed import POLL_INTERVAL, RolloutFeed, RunState

    folder = work / "idle-feed"
    folder.mkdir()
    (folder / "rollouts.jsonl").write_text("")
    RunState("running").write(folder / "state.json")
    feed = RolloutFeed(folder / "rollouts.jsonl", folder / "rollouts_failures.jsonl", folder / "state.json")
    before, start = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    feed.start()
    try:
        time.sleep(seconds)
    finally:
        feed.stop()
    after, wall = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter() - start
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    print(f"  idle feed ({POLL_INTERVAL * 1000:g} ms polling): {100 * cpu / wall:.1f} % of one core", flush=True)
    return 100 * cpu / wall


def bench_latency(work: Path, lines: int, pause: float) -> list[Row]:
    root = work / "latency"
    project = root / "project"
    pytest_ini(project)
    (project / "conftest.py").write_text(LATENCY_CONFTEST)
    recordings = root / "recording_rollouts.jsonl"
    write_mcqa(project / "mcqa.jsonl", recordings, lines)
    writes, reports = root / "writes.jsonl", root / "reports.jsonl"
    env = {**os.environ, "BENCH_WRITES": str(writes), "BENCH_REPORTS": str(reports), "BENCH_PAUSE": str(pause)}
    argv = [
        *PYTEST, f"--gym-checkout={fake_checkout(root)}", f"--gym-replay={recordings}",
        f"--gym-run-dir={root / 'runs'}", "mcqa.jsonl", "-p", "no:cacheprovider", "-q",
    ]  # fmt: skip
    run_child(argv, project, 600, env)
    written = {r["id"]: r["written"] for r in map(json.loads, writes.read_text().splitlines())}
    records = [json.loads(line) for line in reports.read_text().splitlines()]
    reported = {r["nodeid"].split("::")[1].split("[")[0]: r["reported"] for r in records if "nodeid" in r}
    session = next(r for r in records if "cpu" in r)
    latencies = [(reported[task] - written[task]) * 1000 for task in written]
    if len(latencies) != lines:
        raise RuntimeError(f"latency: {len(latencies)} of {lines} rollouts reported")
    median, p95 = statistics.median(latencies), percentile(latencies, 0.95)
    print(f"  median {median:.1f} ms, p95 {p95:.1f} ms, max {max(latencies):.1f} ms", flush=True)
    cpu = 100 * session["cpu"] / session["wall"]
    idle = idle_feed_cpu(root, 5.0)
    return [
        Row(
            f"Latency: rollout line written -> its item reported ({lines} rollouts, "
            f"{pause * 500:.0f}-{pause * 1500:.0f} ms apart)",
            f"median {median:.1f} ms, p95 {p95:.1f} ms (max {max(latencies):.1f} ms)",
        ),
        Row(
            "Latency run: CPU of the pytest process (the feed polling included)",
            f"{cpu:.1f} % of one core over {session['wall']:.1f} s",
        ),
        Row(
            "Latency: CPU of an idle `RolloutFeed` (files not changing, 5 s)",
            f"{idle:.1f} % of one core",
        ),
    ]
