"""The ``merge`` benchmark: ``python -m pytest_gym_eval merge`` of synthetic shard reports (20,000 tasks x 8 repeats in
8 shards): wall time and peak RSS in a fresh process, best of 3.

Run alone: ``.venv/bin/python benchmarks/run.py --only merge``."""

from __future__ import annotations

import argparse
import os
import random
import re
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from common import (
    TIME_V,
    Row,
    mb,
    run_child,
)

NAME = "merge"
"""Its name in ``--only`` and the table."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--merge-tasks", type=int, help="merge: tasks (default 20000; quick 2000)")
    parser.add_argument("--merge-repeats", type=int, default=8, help="merge: repeats per task (default 8)")
    parser.add_argument("--merge-shards", type=int, default=8, help="merge: shard reports (default 8)")


def run(work: Path, args: argparse.Namespace, quick: bool) -> list[Row]:
    """The table's rows of this benchmark, with ``args``' settings (``quick``: scaled down)."""
    merge_tasks, merge_repeats = args.merge_tasks or (2_000 if quick else 20_000), args.merge_repeats
    return bench_merge(work, merge_tasks, merge_repeats, args.merge_shards, 1 if quick else 3)


def write_shard_reports(folder: Path, tasks: int, repeats: int, shards: int, seed: int = 20261130) -> list[Path]:
    """Synthetic ``--gym-report`` files of ``shards`` sessions over one dataset of ``tasks`` tasks x ``repeats``
    repeats, as ``--gym-shard=I/N`` sessions write them (plan, meta, per-shard summaries, rollouts).

    Each task has a difficulty p ~ Beta(2, 1); each rollout's reward is 1.0 with probability p, else 0.0, and
    1 rollout in 200 is an error (``agent_run_error``), so every statistic has work to do.
    """
    from pytest_gym_eval.reporting.json_report import build_report, write_report
    from pytest_gym_eval.reporting.summary import RolloutResult, summarize
    from pytest_gym_eval.stats.gates import Gate, GateMode
    from pytest_gym_eval.tasks.shard import SHARD_RULE, assign_shards

    rng = random.Random(seed)
    dataset = "datasets/synthetic.jsonl"
    agent = "mcqa_simple_agent"
    ids = [f"task-{index:06d}" for index in range(tasks)]
    owners = assign_shards(dataset, ids, shards)
    gates = [Gate("mean_reward", 0.6), Gate("pass_at_k", 0.8, 4)]
    started = 1767225600.0
    paths = []
    for shard in range(1, shards + 1):
        mine = [task for task in ids if owners[task] == shard]
        results: list[RolloutResult] = []
        for task in mine:
            difficulty = rng.betavariate(2, 1)
            for repeat in range(repeats):
                nodeid = f"{dataset}::{task}[r{repeat}]"
                start = started + rng.random() * 3600
                if rng.random() < 0.005:
                    result = RolloutResult(nodeid, dataset, task, repeat, agent, "error", None, "agent_run_error")
                else:
                    reward = 1.0 if rng.random() < difficulty else 0.0
                    status = "passed" if reward >= 1.0 else "failed"
                    record = f"/runs/shard-{shard}/gym-output/rollouts.jsonl:{len(results) + 1}"
                    result = RolloutResult(nodeid, dataset, task, repeat, agent, status, reward, None, record)
                results.append(replace(result, start=start, stop=start + rng.uniform(1.0, 30.0)))
        summaries = summarize(results, thresholds={dataset: 1.0}, gates={dataset: gates}, mode=GateMode.POINT)
        plan = {
            "shard": {"index": shard, "count": shards},
            "rule": SHARD_RULE,
            "gate_mode": "point",
            "inconclusive": "fail",
            "datasets": [
                {
                    "dataset": dataset, "sha256": "0" * 64, "repeats": repeats, "agent": agent, "tasks": ids,
                    "agents": {}, "threshold": 1.0,
                    "gates": [{"metric": g.metric, "k": g.k, "threshold": g.threshold} for g in gates],
                    "selected": {task: list(range(repeats)) for task in mine},
                }
            ],
        }  # fmt: skip
        meta = {"gym_version": "0.7.0", "model": "synthetic", "model_type": "openai_model"}
        meta["shard"] = f"{shard}/{shards}"
        path = folder / f"shard-{shard}.json"
        write_report(path, build_report(summaries, results, meta, plan=plan))
        paths.append(path)
    return paths


def merge_with_peak(argv: Sequence[str], cwd: Path) -> tuple[float, int, float, str]:
    """Run a merge command line in a fresh process: (wall seconds, peak RSS in KiB, CPU seconds (user +
    system), its output); RSS and CPU are 0 without ``/usr/bin/time``. The CPU time is what a machine
    shared with other work cannot inflate."""
    env = {**os.environ, "COLUMNS": "100"}
    if not TIME_V.exists():
        seconds, output = run_child(argv, cwd, 600, env)
        return seconds, 0, 0.0, output
    with tempfile.TemporaryDirectory() as scratch:
        memory = Path(scratch) / "maxrss"
        seconds, output = run_child([str(TIME_V), "-v", "-o", str(memory), *argv], cwd, 600, env)
        text = memory.read_text()
        found = re.search(r"Maximum resident set size \(kbytes\): (\d+)", text)
        cpu = sum(float(m) for m in re.findall(r"(?:User|System) time \(seconds\): ([0-9.]+)", text))
        return seconds, int(found.group(1)) if found else 0, cpu, output


def bench_merge(work: Path, tasks: int, repeats: int, shards: int, rounds: int) -> list[Row]:
    """Time ``python -m pytest_gym_eval merge`` over synthetic shard reports, with and without writing the merged
    JSON report and JUnit XML: the CPU time (user + system: what other work on the machine inflates least), wall
    time and peak RSS of the ``rounds`` fresh processes' best."""
    folder = work / "merge"
    folder.mkdir(parents=True, exist_ok=True)
    paths = write_shard_reports(folder, tasks, repeats, shards)
    size = sum(path.stat().st_size for path in paths)
    rollouts = tasks * repeats
    base = [sys.executable, "-m", "pytest_gym_eval", "merge", *map(str, paths)]
    rows = []
    for label, extra in [
        ("summary and verdict only", []),
        ("also writing the merged JSON report and JUnit XML", ["--gym-report=merged.json", "--junitxml=merged.xml"]),
    ]:
        best: tuple[float, int, float] | None = None
        loads = []
        for _ in range(rounds):
            loads.append(os.getloadavg()[0])
            seconds, peak, cpu, output = merge_with_peak([*base, *extra], folder)
            if f"{rollouts} of {rollouts} selected rollouts" not in output:
                raise RuntimeError(f"the merge did not merge every rollout:\n{output[-3000:]}")
            best = (seconds, peak, cpu) if best is None or cpu < best[2] else best
        assert best is not None
        rows.append(
            Row(
                f"Merge: {shards} shard reports of {tasks:,} tasks x {repeats} repeats ({rollouts:,} rollouts, "
                f"{size / 1e6:.0f} MB of JSON) into one summary and gate verdict, {label}: CPU time (user + "
                f"system) and wall time, best of {rounds} fresh processes (load average "
                f"{min(loads):.1f}-{max(loads):.1f} from other work)",
                f"CPU {best[2]:.2f} s, wall {best[0]:.2f} s, peak RSS {mb(best[1])}",
                goal="seconds: CPU <= 10 s",
                verdict="met" if best[2] <= 10.0 else "not met",
            )
        )
    return rows
