"""The ``teardown`` benchmark: the mcqa example's session starting and stopping Gym itself: the seconds from its last
rollout to the session's end (median of the rounds), and how long stopping Gym took.

Run alone: ``.venv/bin/python benchmarks/run.py --only teardown``."""

from __future__ import annotations

import argparse
import os
import re
import shutil
import time
from pathlib import Path

from common import (
    MCQA_EXAMPLE,
    Row,
    warm_session,
)
from verdicts import median_of

NAME = "teardown"
"""Its name in ``--only`` and the table."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--teardown-rounds", type=int, help="teardown: sessions (default 3; quick 1)")


def run(work: Path, args: argparse.Namespace, quick: bool) -> list[Row]:
    """The table's rows of this benchmark, with ``args``' settings (``quick``: scaled down)."""
    return bench_teardown(work, args.teardown_rounds or (1 if quick else 3))


def bench_teardown(work: Path, rounds: int) -> list[Row]:
    """The mcqa example's session (12 tasks x 2 repeats, replayed answers) starting and stopping Gym itself: the
    seconds from its last rollout (the last write to Gym's rollouts file) to the session's end (the pytest
    process exited), median of ``rounds``; and, from its terminal, how long stopping Gym took."""
    root = work / "teardown"
    project = root / "project"
    shutil.copytree(MCQA_EXAMPLE, project, ignore=shutil.ignore_patterns(".pytest_cache", "__pycache__"))
    ends, stops = [], []
    for round_ in range(rounds):
        _, output, run_dir = warm_session(project, root / f"runs-{round_}", dict(os.environ))
        ended = time.time()
        last_rollout = (run_dir / "gym-output" / "rollouts.jsonl").stat().st_mtime
        ends.append(ended - last_rollout)
        stopped = re.search(r"gym: Gym stopped in ([0-9.]+) s", output)
        stops.append(float(stopped.group(1)) if stopped else float("nan"))
        print(f"  round {round_ + 1}: last rollout -> session end {ends[-1]:.2f} s (Gym stopped in {stops[-1]} s)")
    estimate = median_of(ends)
    listed = ", ".join(f"{t:.2f}" for t in ends)
    return [
        Row(
            f"Teardown: the mcqa example's session (12 tasks x 2 repeats) starting Gym itself, from its last rollout "
            f"to the session's end, median of {rounds} ({listed} s; stopping Gym took "
            f"{', '.join(f'{t:.1f}' for t in stops)} s of it)",
            f"{estimate.text()} s",
            goal="<= 2 s",
            verdict=estimate.verdict(2.0),
            summary="teardown: last rollout to session end",
        )
    ]
