"""The ``scale`` benchmark: pytest sessions of several sizes (default 200 and 2,000 rollouts) against raw ``gym eval
run --no-serve --num-repeats 4`` and a bare pytest session of as many items, all on the same started servers: the
plugin's marginal cost per rollout (the slope) and the session's peak memory as the run grows.

Run alone: ``.venv/bin/python benchmarks/run.py --only scale --scale-sizes 200,2000,20000``."""

from __future__ import annotations

import argparse
import json
import os
import statistics
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from common import (
    PYTEST,
    Row,
    bare_pytest_session,
    check_ran,
    fmt_list,
    mb,
    pytest_ini,
    raw_gym_run,
    run_child,
    started_gym,
    write_bare_tests,
    write_mcqa,
    write_raw_input,
)
from verdicts import bootstrap, median_ratio

NAME = "scale"
"""Its name in ``--only`` and the table."""

REPEATS = 4
SLOPE_GOAL_US = 20.0
"""Issue 27: the plugin's marginal cost per rollout at most 20 us."""
LARGEST_GOAL = 1.02
"""Issue 27: the session at the largest size within 1.02x of (raw + bare pytest)."""


MEASURE_FILE = "BENCH_MEASURE_FILE"
MEASURE_CONFTEST = f"""import os, resource


def pytest_unconfigure(config):
    # The pytest process's own peak RSS (VmHWM, KiB) and CPU seconds (user + system, its children not counted),
    # at its very end, when the benchmark asks for them.
    if os.environ.get("{MEASURE_FILE}"):
        with open("/proc/self/status") as status:
            peak = next(line for line in status if line.startswith("VmHWM:")).split()[1]
        usage = resource.getrusage(resource.RUSAGE_SELF)
        with open(os.environ["{MEASURE_FILE}"], "w") as out:
            out.write(f"{{peak}} {{usage.ru_utime + usage.ru_stime}}")
"""
"""The projects' conftest, loaded by the plugin's sessions and the bare ones alike."""


def measured(argv: list[str], project: Path, measure: Path) -> tuple[float, str, int, float]:
    """Run the pytest session ``argv`` in ``project``: (wall seconds, output, its own peak RSS in KiB, its own CPU
    seconds), the last two from :data:`MEASURE_CONFTEST` (``/usr/bin/time`` would report ``gym eval run``'s peak, a
    child the session waits for)."""
    seconds, output = run_child(argv, project, 3600, {**os.environ, MEASURE_FILE: str(measure)})
    peak, cpu = measure.read_text().split()
    return seconds, output, int(peak), float(cpu)


def bare_run(project: Path, tests: int, measure: Path) -> tuple[float, float, int]:
    """:func:`common.bare_pytest_session` of ``tests`` tests: (wall seconds, its own CPU seconds, its own peak RSS
    in KiB)."""
    seconds = bare_pytest_session(project, tests, {**os.environ, MEASURE_FILE: str(measure)})
    peak, cpu = measure.read_text().split()
    return seconds, float(cpu), int(peak)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--scale-sizes", help="scale: rollouts per session, comma-separated, multiples of 4 (default 200,2000)"
    )
    parser.add_argument("--scale-rounds", type=int, help="scale: alternated rounds per size (default 3; quick 1)")


def run(work: Path, args: argparse.Namespace, quick: bool) -> list[Row]:
    """The table's rows of this benchmark, with ``args``' settings (``quick``: scaled down)."""
    sizes = [int(size) for size in (args.scale_sizes or ("40,200" if quick else "200,2000")).split(",")]
    return bench_scale(work, sizes, args.scale_rounds or (1 if quick else 3))


def session_run(project: Path, runs: Path, head: tuple[str, int], checkout: Any, rollouts: int) -> dict[str, float]:
    """One pytest session attached to ``head`` over ``project``'s dataset: its wall seconds (``wall``), own peak RSS
    in KiB (``peak``), own CPU seconds (``cpu``), and the seconds it spent outside its ``gym eval run``
    (``outside``: ``processes.jsonl`` is written when Gym's run starts, ``state.json`` when it has exited)."""
    argv = [
        *PYTEST, f"--gym-checkout={checkout.path}", f"--gym-head-server={head[0]}:{head[1]}",
        f"--gym-repeats={REPEATS}", f"--gym-run-dir={runs}", "mcqa.jsonl", "-p", "no:cacheprovider", "-q",
    ]  # fmt: skip
    seconds, output, peak, cpu = measured(argv, project, runs.parent / f"{runs.name}.measured")
    check_ran(output, rollouts, f"scale: the session of {rollouts} rollouts")
    (run_dir,) = runs.iterdir()
    gym_seconds = (run_dir / "state.json").stat().st_mtime - (run_dir / "processes.jsonl").stat().st_mtime
    return {"wall": seconds, "peak": peak, "cpu": cpu, "outside": seconds - gym_seconds}


def slope(sizes: Sequence[int], per_round: Callable[..., Sequence[float]]) -> Callable[..., float]:
    """The statistic for :func:`verdicts.bootstrap` over one side per (size, measure): the least-squares slope, in us
    per rollout, of each size's median of ``per_round(*that size's sides)`` (one value a round) over the size."""

    def statistic(*sides: Sequence[float]) -> float:
        width = len(sides) // len(sizes)
        values = [
            statistics.median(per_round(*sides[width * index : width * index + width])) for index in range(len(sizes))
        ]
        mean_n, mean_v = statistics.fmean(sizes), statistics.fmean(values)
        numerator = sum((n - mean_n) * (v - mean_v) for n, v in zip(sizes, values, strict=True))
        return numerator / sum((n - mean_n) ** 2 for n in sizes) * 1e6

    return statistic


def slope_us(sizes: Sequence[int]) -> Callable[..., float]:
    """:func:`slope` of (session - raw - bare) wall seconds, given per size the rounds' session, raw and bare times
    (in that order, sizes ascending): the plugin's marginal wall time per rollout, in us."""
    return slope(sizes, lambda session, raw, bare: [s - r - b for s, r, b in zip(session, raw, bare, strict=True)])


def bench_scale(work: Path, sizes: list[int], rounds: int) -> list[Row]:
    """Per size and round, in alternating order: a pytest session, raw ``gym eval run --no-serve --num-repeats 4``
    over the same rows, and a bare pytest session of as many trivial tests; against one started Gym."""
    sizes = sorted(sizes)
    if len(sizes) < 2 or any(size % REPEATS for size in sizes):
        raise SystemExit(f"--scale-sizes: at least two sizes, each a multiple of {REPEATS}, not {sizes}")
    root = work / "scale"
    recordings = root / "mcqa_rollouts.jsonl"
    root.mkdir(parents=True)
    write_mcqa(root / "all.jsonl", recordings, sizes[-1] // REPEATS)
    rows = (root / "all.jsonl").read_text().splitlines(keepends=True)
    projects = {}
    for size in sizes:  # each dataset the first size / 4 tasks of the largest one (recorded once)
        project = projects[size] = root / f"project-{size}"
        pytest_ini(project)
        (project / "conftest.py").write_text(MEASURE_CONFTEST)
        (project / "mcqa.jsonl").write_text("".join(rows[: size // REPEATS]))
        write_raw_input(project / "mcqa.jsonl", project / "raw-input.jsonl")
        write_bare_tests(project, size // REPEATS, REPEATS)
    times: dict[tuple[int, str], list[float]] = {
        (size, side): [] for size in sizes for side in ("session", "raw", "bare")
    }
    peaks: dict[int, list[int]] = {size: [] for size in sizes}
    bare_peaks: dict[int, list[int]] = {size: [] for size in sizes}
    outside: dict[int, list[float]] = {size: [] for size in sizes}  # each session's seconds outside `gym eval run`
    cpu: dict[tuple[int, str], list[float]] = {(size, side): [] for size in sizes for side in ("session", "bare")}
    with started_gym(root, recordings) as (checkout, head):
        config = root / "raw-config.yaml"
        config.write_text(json.dumps({"head_server": {"host": head[0], "port": head[1]}}))
        # Warm-up (page cache, Gym's caches), at the smallest size.
        small = projects[sizes[0]]
        raw_gym_run(checkout, root / "warm-up", small / "raw-input.jsonl", config, REPEATS, sizes[0])
        session_run(small, root / "runs-warm-up", head, checkout, sizes[0])
        for round_ in range(rounds):
            for size in sizes:
                project = projects[size]
                order = ("session", "raw") if round_ % 2 == 0 else ("raw", "session")
                for side in order:
                    if side == "session":
                        got = session_run(project, root / f"runs-{size}-{round_}", head, checkout, size)
                        seconds = got["wall"]
                        peaks[size].append(int(got["peak"]))
                        outside[size].append(got["outside"])
                        cpu[size, "session"].append(got["cpu"])
                    else:
                        raw_dir = root / f"raw-{size}-{round_}"
                        seconds = raw_gym_run(checkout, raw_dir, project / "raw-input.jsonl", config, REPEATS, size)
                    times[size, side].append(seconds)
                bare_seconds, bare_cpu, bare_peak = bare_run(project, size, root / f"bare-{size}-{round_}.measured")
                times[size, "bare"].append(bare_seconds)
                cpu[size, "bare"].append(bare_cpu)
                bare_peaks[size].append(bare_peak)
                print(
                    f"  round {round_ + 1}, {size} rollouts: session {times[size, 'session'][-1]:.2f} s "
                    f"(peak {mb(peaks[size][-1])}), raw {times[size, 'raw'][-1]:.2f} s, bare pytest "
                    f"{times[size, 'bare'][-1]:.2f} s; CPU session {cpu[size, 'session'][-1]:.2f} s, bare "
                    f"{cpu[size, 'bare'][-1]:.2f} s",
                    flush=True,
                )
    result = []
    for size in sizes:
        session, raw, bare = (times[size, side] for side in ("session", "raw", "bare"))
        floor = [r + b for r, b in zip(raw, bare, strict=True)]
        ratio = median_ratio(session, floor)
        largest = size == sizes[-1]
        result.append(
            Row(
                f"Scale: a session of {size} rollouts ({size // REPEATS} tasks x {REPEATS}) attached to started "
                f"servers vs raw `gym eval run --no-serve --num-repeats {REPEATS}` plus a bare pytest session of "
                f"{size} trivial tests, a fifth failing as the rollouts do (the floor for any pytest plugin); median "
                f"of {rounds} (session "
                f"{fmt_list(session)} s; raw {fmt_list(raw)} s; bare {fmt_list(bare)} s); the session's peak RSS "
                f"{', '.join(mb(p) for p in peaks[size])}",
                f"pytest session {statistics.median(session):.2f} s, peak RSS {mb(statistics.median(peaks[size]))}",
                f"raw {statistics.median(raw):.2f} s + bare pytest {statistics.median(bare):.2f} s",
                ratio.text(),
                f"<= {LARGEST_GOAL}" if largest else "",
                ratio.verdict(LARGEST_GOAL) if largest else "",
                summary=f"scale: a session of {size:,} rollouts vs raw `gym eval run` + bare pytest of as many items",
            )
        )
    smallest = sizes[0]
    added = bootstrap(
        [outside[smallest], times[smallest, "bare"]], lambda o, b: statistics.median(o) - statistics.median(b)
    )
    result.append(
        Row(
            f"Scale: the plugin's own share of a session of {smallest} rollouts: its time outside `gym eval run` "
            f"(start-up, collection, writing Gym's input; the last reports, teardown: {fmt_list(outside[smallest])} "
            f"s) less the bare pytest session of as many tests; median difference",
            f"{added.text(2)} s",
            f"bare pytest {statistics.median(times[smallest, 'bare']):.2f} s",
            "",
            "<= 0.3 s",
            added.verdict(0.3),
            summary=f"scale: the plugin's own share of a session of {smallest} rollouts (outside Gym, less bare)",
        )
    )
    cpu_slope = bootstrap(
        [cpu[size, side] for size in sizes for side in ("session", "bare")],
        slope(sizes, lambda session, bare: [s - b for s, b in zip(session, bare, strict=True)]),
    )
    listed = "; ".join(f"{size}: {fmt_list(cpu[size, 'session'])} vs {fmt_list(cpu[size, 'bare'])} s" for size in sizes)
    result.append(
        Row(
            "Scale: the plugin's marginal CPU per rollout: the least-squares slope over "
            f"{', '.join(map(str, sizes))} rollouts of the median (the session's own CPU - a bare pytest session's), "
            f"the pytest process alone, Gym's processes not counted ({listed}); free of Gym's run-to-run noise",
            f"{cpu_slope.text(1)} us CPU per rollout",
            "",
            "",
            f"<= {SLOPE_GOAL_US:g} us",
            cpu_slope.verdict(SLOPE_GOAL_US),
            summary="scale: the plugin's marginal CPU per rollout (slope, session less bare pytest)",
        )
    )
    slope_wall = bootstrap(
        [times[size, side] for size in sizes for side in ("session", "raw", "bare")], slope_us(sizes)
    )

    def growth(low: Sequence[float], high: Sequence[float]) -> float:  # bytes per rollout, smallest to largest
        return (statistics.median(high) - statistics.median(low)) * 1024 / (sizes[-1] - sizes[0])

    memory = bootstrap([[float(p) for p in peaks[sizes[0]]], [float(p) for p in peaks[sizes[-1]]]], growth)
    bare_memory = growth(bare_peaks[sizes[0]], bare_peaks[sizes[-1]])
    result.append(
        Row(
            f"Scale: the plugin's marginal cost per rollout, the least-squares slope over {', '.join(map(str, sizes))}"
            " rollouts of the median (session - raw - bare pytest), with its interval over the rounds",
            f"{slope_wall.text(1)} us per rollout",
            "",
            "",
            f"<= {SLOPE_GOAL_US:g} us",
            slope_wall.verdict(SLOPE_GOAL_US),
            summary="scale: the plugin's marginal wall time per rollout (slope, session less raw and bare pytest)",
        )
    )
    result.append(
        Row(
            f"Scale: the session's peak memory growth per rollout from {sizes[0]} to {sizes[-1]} rollouts (the "
            "pytest process's own peak RSS, VmHWM at its end; peak "
            f"{mb(statistics.median(peaks[sizes[0]]))} at {sizes[0]}, {mb(statistics.median(peaks[sizes[-1]]))} at "
            f"{sizes[-1]}), against a bare pytest session's per test (peak "
            f"{mb(statistics.median(bare_peaks[sizes[0]]))} at {sizes[0]}, "
            f"{mb(statistics.median(bare_peaks[sizes[-1]]))} at {sizes[-1]}: pytest keeps every test's reports)",
            f"{memory.text(0)} bytes per rollout",
            f"bare pytest {bare_memory:.0f} bytes per test",
            summary="scale: the session's peak memory growth per rollout (bare pytest: per test)",
        )
    )
    return result
