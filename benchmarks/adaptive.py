"""The ``adaptive`` benchmark: ``--gym-adaptive`` on simulated rewards: the rollouts its gate spends against a fixed
ceiling, for true means above, at and below the threshold, and how often its verdict is wrong.

Run alone: ``.venv/bin/python benchmarks/run.py --only adaptive``."""

from __future__ import annotations

import argparse
import random
import statistics
import time
from pathlib import Path
from typing import Any

from common import Row

NAME = "adaptive"
"""Its name in ``--only`` and the table."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--adaptive-tasks", type=int, default=100, help="adaptive: tasks per simulated run (100)")
    parser.add_argument("--adaptive-runs", type=int, default=1000, help="adaptive: simulated runs per mean (1000)")


def run(work: Path, args: argparse.Namespace, quick: bool) -> list[Row]:
    """The table's rows of this benchmark, with ``args``' settings (``quick``: scaled down)."""
    return bench_adaptive(args.adaptive_tasks, 200 if quick else args.adaptive_runs, 8, 2)


def bench_adaptive(tasks: int, runs: int, max_repeats: int, min_repeats: int) -> list[Row]:
    from pytest_gym_eval.stats.gates import Gate, Verdict
    from pytest_gym_eval.stats.sequential import simulate, wave_ends

    threshold = 0.7
    gate = Gate("mean_reward", threshold)
    rng = random.Random(16)
    rows = []
    fixed = tasks * max_repeats
    ends = wave_ends(min_repeats, max_repeats)
    for mean in (0.9, 0.8, 0.75, 0.7, 0.65, 0.6, 0.5):
        # Half the tasks easier, half harder by 0.2: the mean over tasks is exactly `mean`.
        task_means = [min(1.0, max(0.0, mean + (0.2 if t % 2 else -0.2))) for t in range(tasks)]
        start = time.perf_counter()
        spent, verdicts = [], {v: 0 for v in Verdict}
        for _ in range(runs):
            results, rollouts = simulate(task_means, [gate], min_repeats, max_repeats, rng)
            spent.append(rollouts)
            verdicts[results[0].verdict] += 1
        wrong = verdicts[Verdict.FAIL] if mean > threshold else verdicts[Verdict.PASS]
        where = "at" if mean == threshold else ("above" if mean > threshold else "below")
        label = (
            f"adaptive: {tasks} tasks, up to {max_repeats} repeats (waves to {ends}), mean-reward gate >= "
            f"{threshold}, true mean {mean:.2f} ({where}); {runs} simulated runs"
        )
        rows.append(spend_row(label, f"true mean {mean:.2f}", spent, verdicts, fixed, max_repeats, wrong, start))
    return rows


def spend_row(
    label: str,
    case: str,
    spent: list[int],
    verdicts: dict[Any, int],
    fixed: int,
    max_repeats: int,
    wrong: int,
    start: float,
    summary: str = "",
) -> Row:
    """Print one simulated case's line (``case``: what it is; ``start``: its ``time.perf_counter()`` start) and
    return its row: the rollouts the gate spent (mean of ``spent``, one count a run) against ``fixed`` (a run of
    ``max_repeats`` each), the verdicts' shares, and "met" when at most 5% of the runs got a ``wrong`` verdict.
    ``verdicts`` counts each :class:`~pytest_gym_eval.stats.gates.Verdict` over the runs."""
    from pytest_gym_eval.stats.gates import Verdict

    runs = len(spent)
    share = statistics.fmean(spent) / fixed
    print(
        f"  {case}: {share:.0%} of the rollouts; PASS {verdicts[Verdict.PASS]}, FAIL {verdicts[Verdict.FAIL]}, "
        f"INCONCLUSIVE {verdicts[Verdict.INCONCLUSIVE]} of {runs} ({time.perf_counter() - start:.1f} s)",
        flush=True,
    )
    return Row(
        label,
        f"{statistics.fmean(spent):.0f} rollouts ({share:.0%}); PASS {verdicts[Verdict.PASS] / runs:.1%}, "
        f"FAIL {verdicts[Verdict.FAIL] / runs:.1%}",
        f"{fixed} rollouts (fixed {max_repeats})",
        f"{share:.2f}",
        goal="wrong verdicts <= 5%",
        verdict="met" if wrong / runs <= 0.05 else "not met",
        summary=summary,
    )
