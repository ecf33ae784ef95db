"""The ``read`` benchmark: following a ~1 GB Gym rollouts file with ``RolloutFeed`` until every record is in: MB/s and
peak memory, and the peak for as many 1.3 KB records.

Run alone: ``.venv/bin/python benchmarks/run.py --only read``."""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from common import (
    RUNNER,
    Row,
    fmt_list,
    mb,
    peak_rss_kib,
    run_child,
    write_rollouts,
)
from verdicts import median_ratio

NAME = "read"
"""Its name in ``--only`` and the table."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--read-mb", type=int, help="read: size of the rollouts file in MB (default 1000; quick 100)")
    parser.add_argument("--record-kb", type=int, default=20, help="read: size of a large record in KB (default 20)")


def run(work: Path, args: argparse.Namespace, quick: bool) -> list[Row]:
    """The table's rows of this benchmark, with ``args``' settings (``quick``: scaled down)."""
    return bench_read(work, args.read_mb or (100 if quick else 1000), args.record_kb, 2 if quick else 3)


def follow_child(output: Path, count: int) -> None:
    """In a fresh process: follow ``output`` with :class:`RolloutFeed` until all ``count`` records are in;
    prints JSON with the seconds, the peak RSS before and after, and the time of ``read_full()`` on the last."""
    from pytest_gym_eval.gym.feed import RolloutFeed, RolloutRecord, RunState

    state = output.with_name("state.json")
    RunState("running").write(state)
    before = peak_rss_kib()
    start = time.perf_counter()
    feed = RolloutFeed(output, output.with_name("rollouts_failures.jsonl"), state).start()
    try:
        found = feed.wait_all(list(range(count)), timeout=3600)
    finally:
        feed.stop()
    seconds = time.perf_counter() - start
    after = peak_rss_kib()
    last = found[count - 1]
    assert all(isinstance(r, RolloutRecord) and r.reward == 1.0 for r in found.values()), "a record is missing"
    assert isinstance(last, RolloutRecord)
    begin = time.perf_counter()
    full = last.read_full()
    read_full = time.perf_counter() - begin
    assert full["_ng_task_index"] == count - 1
    print(json.dumps({"seconds": seconds, "before": before, "after": after, "read_full": read_full}))


def bench_read(work: Path, megabytes: int, record_kb: int, rounds: int) -> list[Row]:
    """Write a rollouts file of large records and one of as many small ones; follow each ``rounds`` times, each
    in a fresh process."""
    root = work / "read"
    root.mkdir()
    count = megabytes * 1000 // record_kb
    rows = []
    growth: dict[int, list[float]] = {}
    average: dict[int, float] = {}
    for size_kb in (record_kb, 1):
        output = root / f"{size_kb}kb" / "rollouts.jsonl"
        output.parent.mkdir()
        started = time.perf_counter()
        size = write_rollouts(output, count, size_kb * 1000)
        print(f"  wrote {size / 1e6:.0f} MB ({count:,} records) in {time.perf_counter() - started:.0f} s", flush=True)
        follow = [sys.executable, str(RUNNER), "_follow", str(output), str(count)]
        results = []
        for _ in range(rounds):
            _, text = run_child(follow, root, 3600)
            results.append(json.loads(text.strip().splitlines()[-1]))
            seconds, after = results[-1]["seconds"], results[-1]["after"]
            grown = (after - results[-1]["before"]) / 1024
            print(f"  followed in {seconds:.2f} s ({size / 1e6 / seconds:.0f} MB/s), peak {mb(after)}, +{grown:.1f} MB")
        output.unlink()
        growth[size_kb] = [float(r["after"] - r["before"]) for r in results]
        average[size_kb] = size / count / 1000
        seconds = statistics.median(r["seconds"] for r in results)
        rate = size / 1e6 / seconds
        peak = (
            f"peak RSS {mb(statistics.median(r['after'] for r in results))}, "
            f"+{statistics.median(growth[size_kb]) / 1024:.1f} MB while following"
        )
        read_full = statistics.median(r["read_full"] for r in results)
        rows.append(
            Row(
                f"Read: `RolloutFeed` following a {size / 1e6:,.0f} MB rollouts file ({count:,} records of"
                f" {average[size_kb]:.1f} KB) until every record is in, median of {rounds}",
                f"{seconds:.2f} s = {rate:.0f} MB/s; {peak}; `read_full()` of the last record"
                f" {read_full * 1000:.1f} ms",
            )
        )
    ratio = median_ratio(growth[record_kb], growth[1])
    rows.append(
        Row(
            f"Read: memory growth while following {count:,} records of {average[record_kb]:.1f} KB vs as many of"
            f" {average[1]:.1f} KB (rounds: {fmt_list([g / 1024 for g in growth[record_kb]], 1)} MB vs"
            f" {fmt_list([g / 1024 for g in growth[1]], 1)} MB)",
            f"+{statistics.median(growth[record_kb]) / 1024:.1f} MB",
            f"+{statistics.median(growth[1]) / 1024:.1f} MB",
            ratio.text(2),
            "no growth with record size (<= 1.2)",
            ratio.verdict(1.2),
            summary=f"reading a {megabytes:,} MB rollouts file: memory growth, {record_kb} KB vs 1.3 KB records",
        )
    )
    return rows
