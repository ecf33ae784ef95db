"""The ``adaptive_comparison`` benchmark: ``--gym-adaptive`` with two policies (``--gym-policy``) on simulated rewards:
the rollouts the non-inferiority gate (``--gym-max-regression``) spends on the paired confidence sequence against a
fixed run of the ceiling, for a clear regression, a clear equivalence and a difference at the margin, and how often
its verdict is wrong.

Run alone: ``.venv/bin/python benchmarks/run.py --only adaptive_comparison``."""

from __future__ import annotations

import argparse
import random
import time
from pathlib import Path

from adaptive import spend_row
from common import Row

NAME = "adaptive_comparison"
"""Its name in ``--only`` and the table."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--adaptive-comparison-tasks", type=int, default=100, help="adaptive_comparison: tasks per simulated run (100)"
    )
    parser.add_argument(
        "--adaptive-comparison-runs", type=int, default=500, help="adaptive_comparison: simulated runs per case (500)"
    )


def run(work: Path, args: argparse.Namespace, quick: bool) -> list[Row]:
    """The table's rows of this benchmark, with ``args``' settings (``quick``: scaled down)."""
    return bench_adaptive_comparison(
        args.adaptive_comparison_tasks, 100 if quick else args.adaptive_comparison_runs, 8, 2
    )


def bench_adaptive_comparison(tasks: int, runs: int, max_repeats: int, min_repeats: int) -> list[Row]:
    from pytest_gym_eval.stats.comparison import ComparisonGate, Hypothesis, simulate
    from pytest_gym_eval.stats.gates import Verdict
    from pytest_gym_eval.stats.sequential import wave_ends

    margin = 0.1
    gate = ComparisonGate(Hypothesis.NON_INFERIORITY, margin)
    rng = random.Random(25)
    # The baseline's tasks: half easier, half harder (0.9 and 0.6: a mean of 0.75); the candidate's are shifted.
    baseline = [0.9 if t % 2 else 0.6 for t in range(tasks)]
    fixed = 2 * tasks * max_repeats  # both policies' rollouts
    ends = wave_ends(min_repeats, max_repeats)
    rows = []
    for case, shift in (("clear regression", -0.3), ("clear equivalence", 0.0), ("at the margin", -margin)):
        candidate = [min(1.0, max(0.0, p + shift)) for p in baseline]
        start = time.perf_counter()
        spent, verdicts = [], {v: 0 for v in Verdict}
        for _ in range(runs):
            results, pairs = simulate(baseline, candidate, [gate], min_repeats, max_repeats, rng)
            spent.append(2 * pairs)
            verdicts[results[0].verdict] += 1
        # Wrong: a PASS of a candidate worse by the margin or more, a FAIL of one within it.
        wrong = verdicts[Verdict.PASS] if shift <= -margin else verdicts[Verdict.FAIL]
        label = (
            f"adaptive comparison: {tasks} tasks x 2 policies, up to {max_repeats} repeats (waves to {ends}), "
            f"non-inferiority at -{margin}, {case} (candidate {shift:+.2f}); {runs} simulated runs"
        )
        what = f"{case} (candidate {shift:+.2f})"
        summary = f"adaptive comparison, {case}"
        rows.append(spend_row(label, what, spent, verdicts, fixed, max_repeats, wrong, start, summary))
    return rows
