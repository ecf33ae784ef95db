"""The ``adaptive_margin`` benchmark: how often ``--gym-adaptive``'s comparison of two policies (``--gym-policy``,
``--gym-max-regression``) gives a wrong verdict when the candidate is worse by exactly the margin, so that most runs
reach the repeat ceiling undecided. Two shapes of the same mean drop: a symmetric one (every task 0.1 worse) and
rare one-sided drops (the baseline passes every rollout, the candidate fails one in ten: every pair's difference
0 or -1), a skewed difference.

Each simulated run goes through the plugin's own code as a session does: the wave planner
(:class:`~pytest_gym_eval.gym.waves.WavePlanner`) reads each wave's rewards from Gym-shaped output files in a scratch
folder and writes the wave log, and the session's comparison
(:func:`~pytest_gym_eval.session.conclude.policy_comparisons`)
judges the rollouts reported against the log's records. Beside it, the rule sessions followed before issue 35:
a run that reached the ceiling judged on the fixed-sample interval (:func:`~pytest_gym_eval.stats.comparison.compare`).
The rates come with their Monte-Carlo 95% interval (Wilson, :func:`~pytest_gym_eval.stats.intervals.wilson_interval`);
the goal, each wrong verdict at most alpha/2 = 2.5%, is met when the interval's upper end is within it.

Run alone: ``.venv/bin/python benchmarks/run.py --only adaptive_margin`` (~4 min at 1,000 runs a case on 2
cores at a load of 10; ``--write-rows`` puts its rows into the tables already written)."""

from __future__ import annotations

import argparse
import os
import random
import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from common import Row

NAME = "adaptive_margin"
"""Its name in ``--only`` and the table."""
MARGIN = 0.1
"""The non-inferiority margin (``--gym-max-regression``); the candidate is worse by exactly this."""
ALPHA = 0.05
AGENTS = {"base": "mcqa_simple_agent", "cand": "mcqa_simple_agent__cand"}
"""The agent instance of each policy, as a session names them."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--adaptive-margin-tasks", type=int, default=100, help="adaptive_margin: tasks per simulated run (100)"
    )
    parser.add_argument(
        "--adaptive-margin-runs", type=int, default=1000, help="adaptive_margin: simulated runs per case (1000)"
    )


def run(work: Path, args: argparse.Namespace, quick: bool) -> list[Row]:
    """The table's rows of this benchmark, with ``args``' settings (``quick``: scaled down)."""
    return bench_adaptive_margin(args.adaptive_margin_tasks, 200 if quick else args.adaptive_margin_runs)


@dataclass(frozen=True)
class Case:
    """A candidate worse than the baseline by exactly the margin: each task's chance of reward 1 for either."""

    name: str
    baseline: tuple[float, ...]
    candidate: tuple[float, ...]


def cases(tasks: int) -> list[Case]:
    """The symmetric and the one-sided drop of :data:`MARGIN` over ``tasks`` tasks."""
    # The baseline's tasks: half easier, half harder (0.9 and 0.6).
    baseline = tuple(0.9 if t % 2 else 0.6 for t in range(tasks))
    return [
        Case("symmetric: every task 0.1 worse", baseline, tuple(p - MARGIN for p in baseline)),
        # Every pair's difference 0 or -1, the -1 rare: a skewed difference, which a t interval handles worst.
        Case(
            "rare one-sided drops: the baseline passes every rollout, the candidate fails one in ten",
            (1.0,) * tasks,
            (1.0 - MARGIN,) * tasks,
        ),
    ]


@dataclass(frozen=True)
class Outcome:
    """One simulated run: the verdict the session reports, the verdict the rule before issue 35 gave (the
    fixed-sample interval once the ceiling was reached), whether the ceiling was reached, the rollouts spent."""

    verdict: str
    before: str
    ceiling: bool
    rollouts: int


def simulate_session(case: Case, max_repeats: int, min_repeats: int, rng: random.Random, root: Path) -> Outcome:
    """One run of ``case`` through the wave planner and the session's comparison, in the scratch folder ``root``
    (made and removed here)."""
    from pytest_gym_eval.core.rundir import RunPaths
    from pytest_gym_eval.gym.waves import Comparing, GroupPolicy, WaveLog, WavePlanner
    from pytest_gym_eval.options.gym_options import GymOptions
    from pytest_gym_eval.reporting.summary import RolloutResult
    from pytest_gym_eval.session.conclude import policy_comparisons
    from pytest_gym_eval.stats.comparison import ComparisonGate, Hypothesis, compare
    from pytest_gym_eval.stats.sequential import RewardRange
    from pytest_gym_eval.tasks.models import Policy
    from pytest_gym_eval.tasks.plan import RunPlan

    gate = ComparisonGate(Hypothesis.NON_INFERIORITY, MARGIN)
    data = root / "d.jsonl"
    plan = RunPlan.build(
        (f"d.jsonl::t{t}[r{r}-{policy}]", data, t + 1, f"t{t}", r, agent)
        for t in range(len(case.baseline))
        for r in range(max_repeats)
        for policy, agent in AGENTS.items()
    )
    chance = {AGENTS["base"]: case.baseline, AGENTS["cand"]: case.candidate}
    reward = {
        r.stamp: 1.0 if rng.random() < chance[r.agent][int(r.task_id[1:])] else 0.0 for r in plan.rollouts
    }  # every rollout up to the ceiling drawn now: the waves read the ones they ask for
    root.mkdir(parents=True)
    try:
        planner = WavePlanner(
            plan, {"d.jsonl": GroupPolicy((), 1.0)}, min_repeats, root, comparing=Comparing(("base", "cand"), (gate,))
        )
        wave = planner.first()
        while wave is not None:  # what Gym writes for the wave, then the planner's judgement
            lines = [f'{{"_ng_task_index": {r.stamp}, "reward": {reward[r.stamp]}}}\n' for r in wave.plan.rollouts]
            wave.output.write_text("".join(lines))
            wave = planner.after(wave)
        log = WaveLog.read(RunPaths(root).waves)
        records = log.records(plan, lambda name: RewardRange())
    finally:
        shutil.rmtree(root, ignore_errors=True)
    reported = [r for r in plan.rollouts if r.stamp not in log.skipped]
    results = [
        RolloutResult(
            r.nodeid, "d.jsonl", r.task_id, r.repeat, r.agent, "passed" if reward[r.stamp] >= 1.0 else "failed",
            reward[r.stamp],
        )
        for r in reported
    ]  # fmt: skip
    policies = tuple(Policy(name, replay=data) for name in AGENTS)
    options = GymOptions(rootdir=root, policies=policies, max_regression=MARGIN)
    (comparison,) = policy_comparisons(results, options, adaptive=records)
    verdict = comparison.comparison.results[0].verdict.value
    ends = next(iter(records.values())).ends
    ceiling = ends[-1] == max_repeats
    before = verdict
    if ceiling:  # the rule before issue 35: the wave log's entry lost, judged on the fixed-sample interval
        sides: dict[str, dict[tuple[str, int], float]] = {AGENTS["base"]: {}, AGENTS["cand"]: {}}
        for r in reported:
            sides[r.agent][(r.task_id, r.repeat)] = reward[r.stamp]
        before = compare(sides[AGENTS["base"]], sides[AGENTS["cand"]], [gate]).results[0].verdict.value
    return Outcome(verdict, before, ceiling, len(reported))


def rate_text(count: int, runs: int) -> tuple[str, float]:
    """``count`` of ``runs`` as ``1.2% (0.7-2.0%)`` with its Wilson 95% interval, and the interval's upper end."""
    from pytest_gym_eval.stats.intervals import wilson_interval

    interval = wilson_interval(count, runs)
    return f"{count / runs:.1%} ({interval.low:.1%}-{interval.high:.1%})", interval.high


def bench_adaptive_margin(
    tasks: int, runs: int, work: Path | None = None, max_repeats: int = 8, min_repeats: int = 2
) -> list[Row]:
    """One row per case of :func:`cases` (``tasks`` tasks, ``runs`` simulated runs each, waves from
    ``min_repeats`` doubling to ``max_repeats``), simulated in a scratch folder under ``work`` (None: in memory,
    /dev/shm, where there is one)."""
    from pytest_gym_eval.stats.sequential import wave_ends

    rng = random.Random(35)
    ends = wave_ends(min_repeats, max_repeats)
    # The planner fsyncs every line of the wave log: in memory (/dev/shm) that costs nothing, on a disk most of the
    # run's time, which is no part of what is measured here.
    shm = Path("/dev/shm")
    where = shm if work is None and shm.is_dir() and os.access(shm, os.W_OK) else work
    scratch = Path(tempfile.mkdtemp(prefix="adaptive-margin-", dir=where))
    rows = []
    try:
        for case in cases(tasks):
            start = time.perf_counter()
            outcomes = [
                simulate_session(case, max_repeats, min_repeats, rng, scratch / f"run-{i}") for i in range(runs)
            ]
            rows.append(case_row(case, outcomes, tasks, max_repeats, ends, time.perf_counter() - start))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return rows


def case_row(
    case: Case, outcomes: Sequence[Outcome], tasks: int, max_repeats: int, ends: Sequence[int], seconds: float
) -> Row:
    """The row of one case: each wrong verdict's rate with its Monte-Carlo interval, now and before issue 35."""
    runs = len(outcomes)
    now_pass, now_pass_high = rate_text(sum(o.verdict == "PASS" for o in outcomes), runs)
    now_fail, now_fail_high = rate_text(sum(o.verdict == "FAIL" for o in outcomes), runs)
    before_pass, _ = rate_text(sum(o.before == "PASS" for o in outcomes), runs)
    before_fail, _ = rate_text(sum(o.before == "FAIL" for o in outcomes), runs)
    ceiling = sum(o.ceiling for o in outcomes) / runs
    spent = sum(o.rollouts for o in outcomes) / runs / (2 * tasks * max_repeats)
    print(
        f"  {case.name}: wrong PASS {now_pass}, FAIL {now_fail} (before: {before_pass}, {before_fail}); "
        f"{ceiling:.0%} at the ceiling ({seconds:.1f} s)",
        flush=True,
    )
    bound = ALPHA / 2
    points = [sum(o.verdict == v for o in outcomes) / runs for v in ("PASS", "FAIL")]
    verdict = "met" if max(now_pass_high, now_fail_high) <= bound else "unclear" if max(points) <= bound else "not met"
    return Row(
        f"adaptive comparison at the margin, ceiling reached: {tasks} tasks x 2 policies, up to {max_repeats} repeats "
        f"(waves to {list(ends)}), non-inferiority at -{MARGIN}, candidate worse by exactly {MARGIN}, {case.name}; "
        f"{runs} simulated runs through the wave planner, its log and the session's comparison; rates with their "
        "Monte-Carlo 95% interval (Wilson)",
        f"wrong PASS {now_pass}, wrong FAIL {now_fail}; {ceiling:.0%} of runs reached the ceiling, "
        f"{spent:.0%} of the rollouts spent",
        f"the fixed-sample interval at the ceiling (before issue 35): wrong PASS {before_pass}, wrong FAIL "
        f"{before_fail}",
        "",
        goal=f"each wrong verdict <= {bound:.1%} (alpha/2)",
        verdict=verdict,
        summary=f"adaptive comparison at the margin, ceiling reached, {case.name.split(':')[0]}",
    )
