"""The ``collection`` benchmark: ``pytest --collect-only`` of a 100,000-row dataset against 100,000
``@pytest.mark.parametrize`` tests: time (best of 3) and peak RSS, each in a fresh process.

Run alone: ``.venv/bin/python benchmarks/run.py --only collection``."""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from common import (
    AGENT,
    PYTEST,
    RUNNER,
    Row,
    fmt_list,
    mb,
    peak_rss_kib,
    peak_rss_run,
    pytest_ini,
    run_child,
    write_mcqa,
)
from verdicts import median_ratio

NAME = "collection"
"""Its name in ``--only`` and the table."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rows", type=int, help="collection: dataset rows (default 100000; quick 10000)")


def run(work: Path, args: argparse.Namespace, quick: bool) -> list[Row]:
    """The table's rows of this benchmark, with ``args``' settings (``quick``: scaled down)."""
    return bench_collection(work, args.rows or (10_000 if quick else 100_000), 2 if quick else 7)


def bench_collection(work: Path, rows: int, rounds: int) -> list[Row]:
    project = work / "collection"
    pytest_ini(project)
    write_mcqa(project / "dataset.jsonl", None, rows, pad_to=1000)
    write_mcqa(project / "no_ids.jsonl", None, rows, pad_to=1000, with_id=False)
    (project / "test_parametrized.py").write_text(
        f'import pytest\n\n\n@pytest.mark.parametrize("i", range({rows}))\ndef test_trivial(i):\n    pass\n'
    )
    targets = ["test_parametrized.py", "dataset.jsonl", "no_ids.jsonl"]
    results: dict[str, list[tuple[float, int]]] = {target: [] for target in targets}
    for round_ in range(rounds):
        for target in targets[round_ % 3 :] + targets[: round_ % 3]:
            argv = [*PYTEST, "--collect-only", "-q", "-p", "no:cacheprovider", target]
            seconds, rss, output = peak_rss_run(argv, project)
            if f"{rows} tests collected" not in output.splitlines()[-1]:
                raise RuntimeError(f"collecting {target}: {output.splitlines()[-1]}")
            results[target].append((seconds, rss))
            print(f"  round {round_ + 1}: {target} {seconds:.2f} s, peak {mb(rss)}", flush=True)
    _, text = run_child([sys.executable, str(RUNNER), "_input", "dataset.jsonl", str(rows)], project, 600)
    written = json.loads(text.strip().splitlines()[-1])
    param_times, param_rss = (list(side) for side in zip(*results["test_parametrized.py"], strict=True))
    table = []
    for target, what in (("dataset.jsonl", "each with an `id`"), ("no_ids.jsonl", "without ids (task id = hash)")):
        size = (project / target).stat().st_size
        data_times, data_rss = (list(side) for side in zip(*results[target], strict=True))
        speed, memory = median_ratio(data_times, param_times), median_ratio(data_rss, param_rss)
        short = "with ids" if target == "dataset.jsonl" else "without ids (task id = hash)"
        table += [
            Row(
                f"Collection: `--collect-only` of {rows:,} rows of {size / rows / 1000:.1f} KB {what} vs {rows:,} "
                f"parametrized tests: time, median of {rounds} rounds (rows {fmt_list(data_times)} s; "
                f"parametrized {fmt_list(param_times)} s)",
                f"{statistics.median(data_times):.2f} s",
                f"{statistics.median(param_times):.2f} s",
                speed.text(),
                "<= 1.0",
                speed.verdict(1.0),
                summary=f"`--collect-only` {rows:,} rows {short} vs {rows:,} parametrized tests: time",
            ),
            Row(
                f"Collection ({what}): peak RSS of the same runs, median",
                mb(statistics.median(data_rss)),
                mb(statistics.median(param_rss)),
                memory.text(),
                "<= 1.0",
                memory.verdict(1.0),
                summary="the same: peak memory",
            ),
        ]
    table.append(
        Row(
            f"Run start: Gym's input for all {rows:,} rows (`write_gym_input`, in a fresh process)",
            f"{written['seconds']:.2f} s, peak RSS {mb(written['peak'])}",
        )
    )
    return table


def input_child(dataset: Path, rows: int) -> None:
    """In a fresh process: write Gym's input for every row of ``dataset`` (one repeat) as a session does when
    its run starts; prints JSON with the seconds and the peak RSS."""
    from pytest_gym_eval.tasks.plan import RunPlan, write_gym_input

    selected = ((f"{dataset.name}::bench-{i:06d}[r0]", dataset, i + 1, f"bench-{i:06d}", 0, AGENT) for i in range(rows))
    plan = RunPlan.build(selected)
    start = time.perf_counter()
    write_gym_input(plan, dataset.with_name("gym-input.jsonl"))
    print(json.dumps({"seconds": time.perf_counter() - start, "peak": peak_rss_kib()}))
