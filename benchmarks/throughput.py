"""The ``throughput`` benchmark: rollouts per second through one Gym against a model that answers in a fixed time, at
several ``--gym-concurrency`` values: what one machine's Gym does with a slow endpoint.

Run alone: ``.venv/bin/python benchmarks/run.py --only throughput``."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

from common import (
    PYTEST,
    Row,
    pytest_ini,
    run_child,
    started_gym,
    write_mcqa,
)

NAME = "throughput"
"""Its name in ``--only`` and the table."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--latency", type=float, default=0.5, help="throughput: seconds the model takes per answer (0.5)"
    )


def run(work: Path, args: argparse.Namespace, quick: bool) -> list[Row]:
    """The table's rows of this benchmark, with ``args``' settings (``quick``: scaled down)."""
    concurrencies = (1, 8, 64) if not quick else (4, 32)
    return bench_throughput(work, 32 if quick else 128, args.latency, concurrencies)


def bench_throughput(work: Path, rollouts: int, latency: float, concurrencies: Sequence[int]) -> list[Row]:
    """Sessions of ``rollouts`` mcqa tasks (1 repeat) attached to one Gym whose replay model answers each
    request after ``latency`` seconds, one per ``--gym-concurrency`` value: the model-call rate (requests the
    model received, first to last, plus one latency) and the session's whole wall time."""
    root = work / "throughput"
    project = root / "project"
    pytest_ini(project)
    recordings = root / "mcqa_rollouts.jsonl"
    write_mcqa(project / "mcqa.jsonl", recordings, rollouts)
    log = root / "servers" / "replay-model.jsonl"
    rows = []
    with started_gym(root, recordings, delay=latency) as (checkout, head):
        for concurrency in concurrencies:
            before = sum(1 for _ in log.open()) if log.exists() else 0
            argv = [
                *PYTEST, f"--gym-checkout={checkout.path}", f"--gym-head-server={head[0]}:{head[1]}",
                f"--gym-concurrency={concurrency}", f"--gym-run-dir={root / f'runs-{concurrency}'}", "mcqa.jsonl",
                "-p", "no:cacheprovider", "-q",
            ]  # fmt: skip
            seconds, output = run_child(argv, project, 3600)
            calls = [json.loads(line) for line in list(log.open())[before:]]
            times = sorted(c["time"] for c in calls if c["path"].endswith("/responses") and c.get("status") == 200)
            if len(times) != rollouts:
                raise RuntimeError(f"{len(times)} model calls for {rollouts} rollouts:\n{output[-3000:]}")
            span = times[-1] - times[0] + latency
            print(f"  --gym-concurrency={concurrency}: {rollouts / span:.1f} rollouts/s, session {seconds:.1f} s")
            rows.append(
                Row(
                    f"Throughput: {rollouts} rollouts through one Gym, model answering in {latency:g} s, "
                    f"`--gym-concurrency={concurrency}`: model calls per second (first to last call) and the "
                    "pytest session's wall time",
                    f"{rollouts / span:.1f} rollouts/s; session {seconds:.1f} s",
                    f"ideal {min(concurrency, rollouts) / latency:.1f} rollouts/s (concurrency / latency)",
                    f"{(rollouts / span) / (min(concurrency, rollouts) / latency):.2f}",
                )
            )
    return rows
