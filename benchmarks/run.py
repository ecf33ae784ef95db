"""pytest-gym-eval's benchmarks, side by side in one run: ``.venv/bin/python benchmarks/run.py``.

One module per benchmark (listed in :data:`BENCHMARKS`, in the table's order); this runner parses the
options, runs the chosen ones and renders the table.

1. overhead    a pytest session over N tasks x R repeats against the equivalent raw ``gym eval run --no-serve``,
               both against the same started Gym servers and the same replay model (median of alternated runs);
2. collection  ``pytest --collect-only`` of a 100,000-row dataset against 100,000 ``@pytest.mark.parametrize``
               tests: time (best of 3) and peak RSS, each in a fresh process;
3. read        following a ~1 GB Gym rollouts file with ``RolloutFeed`` until every record is in: MB/s and
               peak memory, and the peak for as many 1.3 KB records;
4. latency     from a rollout line being written (a stand-in ``gym``) to its item's report: median and p95;
5. html        the ``--gym-html`` page of 1,000 and 10,000 rollouts: its size, the time to write it, and in
               headless Chromium the time to first render and from a click to the next frame;
6. throughput  rollouts per second through one Gym against a model that answers in a fixed time, at several
               ``--gym-concurrency`` values: what one machine's Gym does with a slow endpoint;
   judge_throughput  the same for a judge environment (a policy and a judge call per rollout): a session attached
               to the servers against raw ``gym eval run --no-serve`` over them, at concurrency 1, 8 and 64;
7. merge       ``python -m pytest_gym_eval merge`` of synthetic shard reports (20,000 tasks x 8 repeats in 8
               shards): wall time and peak RSS in a fresh process, best of 3;
8. adaptive    ``--gym-adaptive`` on simulated rewards: the rollouts its gate spends against a fixed ceiling, for
               true means above, at and below the threshold, and how often its verdict is wrong;
   adaptive_comparison  the same with two policies (``--gym-policy``): the rollouts the non-inferiority gate
               spends on the paired confidence sequence for a clear regression, a clear equivalence and a
               difference at the margin, against a fixed run of the ceiling;
   adaptive_margin  the comparison's wrong-verdict rates with the candidate worse by exactly the margin (the
               ceiling reached), a symmetric drop and rare one-sided drops, each simulated run through the wave
               planner, its log and the session's comparison, with their Monte-Carlo intervals;
9. warm        the mcqa example's session against a warm Gym (``--gym-keep-alive``) vs raw ``gym eval run
               --no-serve`` over the same input, and the first session's cost of keeping Gym alive;
12. on_demand  the plugin's own time per on-demand rollout (``gym_run_row``) beyond the bare ``POST /run`` it makes.

``--quick`` scales everything down; ``--only`` picks benchmarks. The table is printed; a full run (neither
``--quick`` nor ``--only``) also writes it to ``benchmarks/results.md``, any run to ``--output``; ``--only NAME
--write-rows`` puts its rows into the tables already written, with a note naming the run. See
``benchmarks/README.md``.
"""

from __future__ import annotations

import argparse
import importlib
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

from common import HERE, Row, byte_compile_plugin, pytest_with_peak
from verdicts import METHOD, TABLE_BEGIN, TABLE_END, merge_rows, replace_between_markers, stamp

BENCHMARKS = (
    "scale", "collection", "read", "latency", "html_page", "throughput", "judge_throughput", "merge", "adaptive",
    "adaptive_comparison", "adaptive_margin", "warm", "cold", "teardown", "plugin_cost", "on_demand",
)  # fmt: skip
"""The benchmark modules, in the table's order: each has ``NAME`` (its name in ``--only``), ``add_arguments(parser)``
and ``run(work, args, quick) -> list[Row]``. A new benchmark is a module here and its name in this list."""

ON_REQUEST = ("overhead",)
"""Benchmarks a full run leaves out, run with ``--only``: ``overhead`` (one size against raw Gym) is what ``scale``
measures at several sizes."""


def machine() -> str:
    cpu = "unknown"
    with open("/proc/cpuinfo") as handle:
        for line in handle:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    with open("/proc/meminfo") as handle:
        total_kb = int(handle.readline().split()[1])
    return (
        f"{os.cpu_count()} CPUs (nproc {len(os.sched_getaffinity(0))}), {total_kb / 1024**2:.1f} GiB memory, "
        f"CPU {cpu}, Python {platform.python_version()}, {platform.system()} {platform.release()}"
    )


def cell(text: str) -> str:
    """``text`` safe inside a Markdown table cell."""
    return text.replace("|", "\\|").replace("\n", " ")


def render(rows: list[Row], settings: str, seconds: float, loads: tuple[float, float], full: bool = True) -> str:
    """The table of ``rows`` with the machine, the command, its duration, the date and the load averages (at the
    start and the end: the machine's other work); ``full`` gives every round's values (results.md), else the
    short labels (the READMEs)."""
    lines = [
        f"Machine: {machine()}; load average {loads[0]:.1f} at the start, {loads[1]:.1f} at the end.  ",
        f"Command: `{settings}`; took {seconds / 60:.1f} min; {stamp()}; every pytest session loads this plugin "
        "alone (`PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 -p gym_eval`).  ",
        f"Ratios: the median over the rounds with its interval in brackets, a {METHOD}; a goal is met when the "
        "interval's upper end is within it, unclear when only the median is.",
        "",
        "| benchmark | pytest-gym-eval | baseline | ratio (interval) | goal | verdict |",
        "|---|---|---|---|---|---|",
    ]
    lines += [row_line(r, full) for r in rows]
    return "\n".join(lines) + "\n"


def row_line(r: Row, full: bool = True) -> str:
    """``r`` as a line of the table (``full``: the long label, else the short one)."""
    cells = (r.benchmark if full else r.summary or r.benchmark, r.plugin, r.baseline, r.ratio, r.goal, r.verdict)
    return "| " + " | ".join(cell(c) for c in cells) + " |"


RESULT_FILES = (HERE / "results.md",)
"""Files that get the full table between the markers (on a full run)."""


README_FILES = (HERE.parent / "docs" / "benchmarks.md", HERE / "README.md")
"""Files that get the short table between the markers (on a full run)."""


def main(argv: list[str]) -> int:
    if argv[:1] == ["_follow"]:
        importlib.import_module("read").follow_child(Path(argv[1]), int(argv[2]))
        return 0
    if argv[:1] == ["_input"]:
        importlib.import_module("collection").input_child(Path(argv[1]), int(argv[2]))
        return 0
    if argv[:1] == ["_pytest"]:
        return pytest_with_peak(Path(argv[1]), argv[2:])
    modules = {module.NAME: module for module in map(importlib.import_module, BENCHMARKS + ON_REQUEST)}
    full = [name for name in modules if name not in ON_REQUEST]
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="scale everything down (a few minutes)")
    parser.add_argument("--only", default=",".join(full), help=f"comma-separated subset of {tuple(modules)}")
    for module in modules.values():
        module.add_arguments(parser)
    parser.add_argument("--output", type=Path, help="also write the full table to this file (any run)")
    parser.add_argument(
        "--write-rows",
        action="store_true",
        help="with --only (not --quick): put this run's rows into the tables of benchmarks/results.md and the "
        "READMEs, replacing rows of the same label, with a note saying which run wrote them",
    )
    parser.add_argument(
        "--no-write",
        action="store_true",
        help="a full run only prints its table (by default it writes it into benchmarks/results.md and the READMEs)",
    )
    args = parser.parse_args(argv)
    quick = args.quick
    only = [name.strip() for name in args.only.split(",") if name.strip()]
    unknown = set(only) - set(modules)
    if unknown:
        parser.error(f"unknown benchmarks: {', '.join(sorted(unknown))}")
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"  # every child pytest: this plugin alone (see PYTEST)
    started = time.perf_counter()
    load_at_start = os.getloadavg()[0]
    rows: list[Row] = []
    work = Path(tempfile.mkdtemp(prefix="gym-bench-"))
    failed = True
    byte_compile_plugin()
    try:
        for name in only:
            print(f"{name} ...", flush=True)
            rows += modules[name].run(work, args, quick)
        failed = False
    finally:
        shutil.rmtree(work / "read", ignore_errors=True)  # the large rollouts files
        if failed:
            print(f"benchmark failed; its files (logs, runs) are kept in {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)
    loads = (load_at_start, os.getloadavg()[0])
    settings = " ".join(["benchmarks/run.py", *argv])
    elapsed = time.perf_counter() - started
    table = render(rows, settings, elapsed, loads)
    print("\n" + table)
    if args.output is not None:
        args.output.write_text(f"# pytest-gym-eval benchmark results\n\n{table}")
        print(f"written to {args.output}")
    if args.write_rows and not quick and only != full:
        note = (
            f"Rows of `--only {','.join(only)}`: written by `{settings}` (took {elapsed / 60:.1f} min; {stamp()}; "
            f"{machine()}; load average {loads[0]:.1f} at the start, {loads[1]:.1f} at the end), not by the run above."
        )
        for path in RESULT_FILES + README_FILES:
            if merge_rows(path, [row_line(r, path in RESULT_FILES) for r in rows], note):
                print(f"rows written to {path}")
    if not quick and only == full and not args.no_write:
        short = render(rows, settings, elapsed, loads, full=False)
        for path, block in [*((p, table) for p in RESULT_FILES), *((p, short) for p in README_FILES)]:
            if replace_between_markers(path, block):
                print(f"table written to {path}")
            else:
                print(f"{path} has no markers ({TABLE_BEGIN} ... {TABLE_END}): left alone", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
