"""The ``overhead`` benchmark: a pytest session over N tasks x R repeats against the equivalent raw ``gym eval run
--no-serve``, both against the same started Gym servers and the same replay model (median of alternated runs).

Run alone: ``.venv/bin/python benchmarks/run.py --only overhead``."""

from __future__ import annotations

import argparse
import json
import os
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from common import (
    PYTEST,
    Row,
    bare_pytest_session,
    check_ran,
    fmt_list,
    pytest_ini,
    raw_gym_run,
    run_child,
    started_gym,
    write_bare_tests,
    write_mcqa,
    write_raw_input,
)
from verdicts import bootstrap, median_of, median_ratio

NAME = "overhead"
"""Its name in ``--only`` and the table."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tasks", type=int, help="overhead: tasks (default 50; quick 10)")
    parser.add_argument("--repeats", type=int, help="overhead: repeats per task (default 4; quick 2)")
    parser.add_argument("--rounds", type=int, help="overhead: alternated runs per side (default 15; quick 2)")


def run(work: Path, args: argparse.Namespace, quick: bool) -> list[Row]:
    """The table's rows of this benchmark, with ``args``' settings (``quick``: scaled down)."""
    tasks, repeats = args.tasks or (10 if quick else 50), args.repeats or (2 if quick else 4)
    return bench_overhead(work, tasks, repeats, args.rounds or (2 if quick else 15))


def pytest_gym_run(
    checkout: Any, project: Path, runs: Path, head: tuple[str, int], repeats: int, expected: int
) -> tuple[float, float]:
    """One pytest session attached to ``head``; returns its wall time and the part of it spent outside its
    ``gym eval run`` (from the run directory: ``processes.jsonl`` is written when Gym's run starts,
    ``state.json`` when it has exited)."""
    argv = [
        *PYTEST, f"--gym-checkout={checkout.path}", f"--gym-head-server={head[0]}:{head[1]}",
        f"--gym-repeats={repeats}", f"--gym-run-dir={runs}", "mcqa.jsonl", "-p", "no:cacheprovider",
    ]  # fmt: skip
    seconds, output = run_child(argv, project, 3600)
    check_ran(output, expected, "pytest session")
    (run_dir,) = runs.iterdir()
    gym_seconds = (run_dir / "state.json").stat().st_mtime - (run_dir / "processes.jsonl").stat().st_mtime
    return seconds, seconds - gym_seconds


def added_share(raw: Sequence[float], own: Sequence[float]) -> float:
    """``(median(raw) + median(own)) / median(raw)``: a raw run's time with the plugin's own share added."""
    return (statistics.median(raw) + statistics.median(own)) / statistics.median(raw)


def bench_overhead(work: Path, tasks: int, repeats: int, rounds: int) -> list[Row]:
    """Two sides, in alternating order each round, against the same started servers and replay model: a pytest
    session, and raw ``gym eval run --no-serve --num-repeats R`` over the dataset as a user would type it."""
    root = work / "overhead"
    project = root / "project"
    pytest_ini(project)
    recordings = root / "mcqa_rollouts.jsonl"
    write_mcqa(project / "mcqa.jsonl", recordings, tasks)
    raw_input = root / "raw-input.jsonl"
    write_raw_input(project / "mcqa.jsonl", raw_input)
    expected = tasks * repeats
    write_bare_tests(project, tasks, repeats)
    sides = ("pytest", "dataset")
    times: dict[str, list[float]] = {side: [] for side in sides}
    own: list[float] = []  # of each pytest session, the seconds outside its `gym eval run`
    bare: list[float] = []  # a pytest session of as many trivial tests, without the plugin
    with started_gym(root, recordings) as (checkout, head):
        config = root / "raw-config.yaml"  # what the plugin writes when attached: the head server only
        config.write_text(json.dumps({"head_server": {"host": head[0], "port": head[1]}}))
        # Warm-up (page cache, Gym's caches).
        raw_gym_run(checkout, root / "warm-up", raw_input, config, repeats, expected)
        pytest_gym_run(checkout, project, root / "runs-warm-up", head, repeats, expected)
        for round_ in range(rounds):
            for side in sides if round_ % 2 == 0 else sides[::-1]:
                if side == "dataset":
                    seconds = raw_gym_run(checkout, root / f"raw-{round_}", raw_input, config, repeats, expected)
                else:
                    runs = root / f"runs-{round_}"
                    seconds, outside = pytest_gym_run(checkout, project, runs, head, repeats, expected)
                    own.append(outside)
                times[side].append(seconds)
                print(f"  round {round_ + 1}: {side} {seconds:.2f} s (load {os.getloadavg()[0]:.1f})", flush=True)
            bare.append(bare_pytest_session(project, expected))
            print(f"  round {round_ + 1}: outside Gym {own[-1]:.2f} s, bare pytest {bare[-1]:.2f} s", flush=True)
    listed = {side: ", ".join(f"{t:.1f}" for t in values) for side, values in times.items()}
    plugin, dataset = times["pytest"], times["dataset"]
    wall = median_ratio(plugin, dataset)
    share = bootstrap([dataset, own], added_share)
    own_median = median_of(own)
    added = bootstrap([own, bare], lambda o, b: statistics.median(o) - statistics.median(b))
    return [
        Row(
            f"Overhead: {tasks} tasks x {repeats} repeats, wall time, median of {rounds} rounds in alternating "
            f"order, against raw `gym eval run --no-serve --num-repeats {repeats}` over the dataset, as a user would "
            f"type it (pytest {listed['pytest']} s; raw {listed['dataset']} s)",
            f"pytest session {statistics.median(plugin):.2f} s",
            f"raw `gym eval run` {statistics.median(dataset):.2f} s",
            wall.text(),
            "<= 1.05",
            wall.verdict(1.05),
            summary=f"overhead: {tasks} tasks x {repeats} repeats vs raw `gym eval run --no-serve --num-repeats "
            f"{repeats}`, wall time",
        ),
        Row(
            "Overhead: of each pytest session, the time outside its own `gym eval run` (start-up, collection and"
            " writing Gym's input before it; the last reports and teardown after it), median; the ratio is"
            f" (raw + this) / raw, free of Gym's run-to-run noise (runs: {', '.join(f'{t:.2f}' for t in own)} s)",
            f"{own_median.text(2)} s",
            f"raw {statistics.median(dataset):.2f} s",
            share.text(),
            "<= 1.05",
            share.verdict(1.05),
            summary="overhead: the session's own time outside its `gym eval run`; ratio (raw + it) / raw",
        ),
        Row(
            f"Overhead: the plugin's own share of a session of {expected} rollouts: its time outside `gym eval run`"
            f" less a bare pytest session (the same pytest, no plugin loaded) running {expected} trivial"
            f" tests, a fifth failing as the rollouts do (bare: {fmt_list(bare)} s); median difference",
            f"{added.text(2)} s",
            f"bare pytest {statistics.median(bare):.2f} s",
            "",
            "<= 0.3 s",
            added.verdict(0.3),
            summary=f"overhead: the plugin's own share of a session of {expected} rollouts (outside Gym, less bare"
            " pytest)",
        ),
    ]
