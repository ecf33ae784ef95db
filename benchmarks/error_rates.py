"""The error rates the docs state, measured by seeded simulation through the plugin's own functions:
``.venv/bin/python benchmarks/error_rates.py [--quick] [--only GROUP] [--write]``.

Unlike the timing benchmarks (``benchmarks/run.py``), these numbers do not depend on the machine: the same seed gives
the same table anywhere. ``--write`` puts the table into docs/benchmarks.md between its own markers;
``--quick`` runs a tenth of the histories (the fast tier's check that every row is computed); ``--only GROUP``
(repeatable: drift, labels, paired, single, passk, familywise, judge_noise, hints) prints only those rows, never
written.

Drift (:func:`pytest_gym_eval.history.drift.self_starting_cusum`, the alarm ``history ... drift`` and every session
with ``--gym-history`` runs along each dataset's whole series):

- false alarms: the share of stable histories (5 runs to learn the scale, then 100 watched runs, one rollout of each
  task a run, every task's pass probability fixed) in which the alarm fires at least once, for 3, 12 and 40 tasks
  and four shapes of pass probabilities: spread over [0, 1] (symmetric), mostly deterministic (most tasks always
  pass or always fail), rare failures (every task passes 97 % of the time: a run mean with a long lower tail) and
  skewed high (Beta(4, 0.4)); with the share of histories in which the alarm judged any run at all (the rest were
  told "too skewed");
- detection: every task's pass probability drops by 0.15 (floored at 0) after run 30; the share of histories whose
  alarm fires within 10 runs of the drop, and the median delay of those that fire within 30.

Task labels (:func:`pytest_gym_eval.history.stability.assess`, rule ``stability-2``) on planted series of 20 runs,
1 or 4 repeats a run (a sampling policy: independent repeats): stable (always passes), broken (never passes),
flaky (a steady pass probability drawn from [0.2, 0.8]), regressed (0.9, then 0.3 from a run drawn from 6 to 15)
and fixed (the reverse); the share labelled right, and for the steady kinds the share wrongly labelled regressed or
fixed (the change test's level, goal <= 5 %).

Gates at the margin (fixed sample, 95 % two-sided intervals, so each wrong verdict should happen at most alpha/2 =
2.5 % of the time): the paired comparison's non-inferiority gate at delta = 0.1
(:func:`pytest_gym_eval.stats.comparison.paired_mean_difference`: MOVER on the task-clustered Clopper-Pearson
intervals of the gains and the losses since issue 38 item 3) with the candidate exactly 0.1 worse, seven shapes of
that drop: symmetric (tasks at 0.9 and 0.6, every task 0.1 worse), heterogeneous (half the tasks 0.2 worse, half
unchanged), rare one-sided drops (the baseline passes every rollout, the candidate fails one in ten: every pair's
difference 0 or -1), one-sided drops on half the tasks (1 to 0.8) or a quarter (1 to 0.6), near-ceiling mixed (0.95
to 0.85: some gains among the losses) and heterogeneous with some tasks improved, at 12 to 40 tasks and 2 to 8
repeats; beside each the interval before (the t interval with Hall's skewness correction) on the same runs, and the
power (PASS rate) with the candidate as good as the baseline. The dataset's tasks are fixed (the same pass
probabilities in every simulated run), as when one dataset is run again and again. Single-policy gates
(:func:`pytest_gym_eval.stats.gates.metric_interval`: the mean reward's
task-clustered Clopper-Pearson interval, the pass rate's Clopper-Pearson over rollouts, since issue 38) with the true
mean exactly at the threshold, four shapes (symmetric, heterogeneous, rare failures: every task at 0.9, rare
successes: every task at 0.1) at the paired rows' sizes; beside each the interval before issue 38 (the t interval
clustered by task, Wilson) on the same runs, and the power: PASS with the threshold 0.1 below the true mean (FAIL with
it 0.1 above for rare successes).

The pass@k gate (``--gym-min-pass-at-k K:V``, :func:`pytest_gym_eval.stats.gates.metric_interval`: the
task-clustered Clopper-Pearson interval on the per-task unbiased pass@k estimates, its effective sample capped at the
disjoint blocks of k rollouts, since issue 38) with the true pass@k (the mean over tasks of 1 - (1 - p)^k) exactly at
the threshold, k = 2 and 4, four shapes of the tasks' pass probabilities: symmetric (0.1, 0.25, 0.4, 0.55: pass@k
spread), heterogeneous (1, 0, 0.3, 0.1: tasks that always or never pass beside flaky ones), rare failures (every task
at 0.7: pass@2 0.91, pass@4 0.992) and rare successes (every task at 0.02: pass@2 0.04, pass@4 0.078), at 12 to 40
tasks and 4 or 8 repeats; beside each the Student t interval over the per-task estimates clipped to [0, 1] (before),
and the power as the single-policy rows' (threshold 0.1 below the true pass@k, above it when that is under 0.5).

Family-wise gates (:func:`pytest_gym_eval.stats.familywise.holm`, ``--gym-familywise=holm``): sessions of 5
datasets, each of
20 tasks x 2 repeats (each task drawn from a population whose pass probabilities are uniform on [0, 1]: the true mean
reward is exactly 0.5), every dataset gated ``mean reward >= 0.5`` on the lower bound; the share of sessions in which
any of the 5 gates is decided (PASS or FAIL) although the truth sits on the threshold, each gate judged alone at 95 %
and the 5 judged as one family by Holm's procedure (goal <= 5 %; the mean reward's task-clustered Clopper-Pearson
interval on 20 tasks of 0/1 rewards errs less than 5 % alone, which Holm's family inherits).

INCONCLUSIVE hints (:meth:`pytest_gym_eval.stats.gates.Basis.hint`, reached through
:func:`pytest_gym_eval.stats.gates.evaluate`; the text "about N more tasks would likely decide it"): the mean reward
and pass rate gates, tasks drawn afresh from a population of four shapes (pass probabilities uniform on [0, 1], mean
0.5; heterogeneous 1, 0.95, 0.6 or 0.45, mean 0.75; rare failures, every task 0.9; rare successes, every task 0.1),
first runs of 12 x 2, 20 x 4 and 40 x 2 (tasks x repeats), the threshold 1.5 true standard errors of the first run's
mean from the true mean (below it; above for 0.1, where the right verdict is FAIL) so that the first run is mostly
INCONCLUSIVE. For each INCONCLUSIVE first run: its hint, then a fresh run of the hinted total size (the same repeats;
the pass rate's rollouts in tasks of the same repeats) from the *true* population, judged by the same gate; the share
decided in the right direction (the hint means about 80 %: measured, no goal, since the hint extrapolates the
observed effect, which is itself uncertain), the share decided the wrong way, and the same for the hint before issue
38 item 4 (the planner's normal formula with the clustered standard error, the pass rate's p (1 - p)) on the same
first runs. A tenth of the histories (each hint computes the gate's Clopper-Pearson interval at a dozen sizes).
The same for the paired comparison's non-inferiority gate (:func:`pytest_gym_eval.stats.comparison.compare`), the
candidate as good as the baseline on every task (uniform or every task 0.9), the margin 1.5 true standard errors of
the first run's difference, the right verdict PASS; its old hint is the normal formula with the interval's standard
error (a fifth of the histories: its interval is cheap).

Each share comes with its Wilson 95 % interval over the histories (the Monte-Carlo error); a goal is met when the
interval's upper end is within it.
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from pytest_gym_eval.history.drift import (  # noqa: E402
    DEFAULT_H,
    DEFAULT_MIN_SKEW,
    FALSE_ALARM_BOUND,
    FALSE_ALARM_RUNS,
    self_starting_cusum,
)
from pytest_gym_eval.history.stability import DEFAULT_ALPHA, RunOutcome, assess  # noqa: E402
from pytest_gym_eval.stats import familywise, gates, power  # noqa: E402
from pytest_gym_eval.stats.comparison import (  # noqa: E402
    ComparisonGate,
    Hypothesis,
    compare,
    judge_comparison,
    paired_mean_difference,
)
from pytest_gym_eval.stats.distributions import student_t_ppf  # noqa: E402
from pytest_gym_eval.stats.gates import GateMode, Verdict, judge  # noqa: E402
from pytest_gym_eval.stats.intervals import (  # noqa: E402
    Interval,
    clustered_standard_error,
    mean_interval,
    pass_at_k_interval,
    wilson_interval,
)
from pytest_gym_eval.stats.judge_noise import dominance, f_ppf, judge_noise  # noqa: E402

SEED = 2026
HISTORIES = 1000
"""Histories per row (``--quick``: a tenth)."""
TABLE_BEGIN = "<!-- error-rate table: written by benchmarks/error_rates.py --write, do not edit -->"
TABLE_END = "<!-- end of error-rate table -->"
DOCS = HERE.parent / "docs" / "benchmarks.md"

SHAPES: dict[str, Callable[[random.Random], float]] = {
    "spread over [0, 1]": lambda rng: rng.random(),
    "mostly deterministic": lambda rng: rng.choice([0.0, 1.0, 1.0, 0.5, 0.9, 0.2]),
    "rare failures (0.97)": lambda rng: 0.97,
    "skewed high (Beta(4, 0.4))": lambda rng: rng.betavariate(4, 0.4),
}
"""How each task's pass probability is drawn, per shape."""

Run = dict[str, list[float]]


@dataclass(frozen=True)
class Row:
    """One line of the table: what was measured, the result in words, the goal and the verdict."""

    what: str
    result: str
    goal: str
    verdict: str


def history(rng: random.Random, probabilities: list[float], runs: int, drop_after: int | None = None) -> list[Run]:
    """``runs`` runs of one rollout per task; after run ``drop_after`` every probability is 0.15 lower."""
    out = []
    for index in range(runs):
        drop = 0.15 if drop_after is not None and index >= drop_after else 0.0
        out.append({str(i): [1.0 if rng.random() < p - drop else 0.0] for i, p in enumerate(probabilities)})
    return out


def share(successes: int, n: int) -> tuple[str, float]:
    """``"1.2 % (0.7-2.1 %)"`` and the Wilson interval's upper end."""
    interval = wilson_interval(successes, n)
    return f"{100 * successes / n:.1f} % ({100 * interval.low:.1f}-{100 * interval.high:.1f} %)", interval.high


def false_alarm_rows(histories: int) -> list[Row]:
    rows = []
    for tasks in (3, 12, 40):
        for shape, draw in SHAPES.items():
            rng = random.Random(f"{SEED}-fa-{tasks}-{shape}")
            alarms = judged = 0
            for _ in range(histories):
                probabilities = [draw(rng) for _ in range(tasks)]
                cusum = self_starting_cusum(history(rng, probabilities, 5 + FALSE_ALARM_RUNS))
                alarms += bool(cusum.alarms)
                judged += any(statistic is not None for statistic in cusum.statistics)
            text, high = share(alarms, histories)
            goal = FALSE_ALARM_BOUND if tasks >= 12 else None
            verdict = (
                ""
                if goal is None
                else ("met" if high <= goal else "unclear" if alarms / histories <= goal else "not met")
            )
            rows.append(
                Row(
                    f"drift, false alarms within {FALSE_ALARM_RUNS} stable runs: {tasks} tasks, {shape}; "
                    f"{histories} histories",
                    f"{text}; judged in {100 * judged / histories:.0f} % of histories",
                    f"<= {100 * FALSE_ALARM_BOUND:.0f} %" if goal is not None else "(measured, no goal under 12 tasks)",
                    verdict,
                )
            )
    return rows


def detection_rows(histories: int) -> list[Row]:
    rows = []
    for tasks in (12, 40):
        for shape in ("spread over [0, 1]", "mostly deterministic"):
            rng = random.Random(f"{SEED}-detect-{tasks}-{shape}")
            within, delays = 0, []
            for _ in range(histories):
                probabilities = [SHAPES[shape](rng) for _ in range(tasks)]
                cusum = self_starting_cusum(history(rng, probabilities, 60, drop_after=30))
                after = [index for index in cusum.alarms if index >= 30]
                if after:
                    delay = after[0] - 30 + 1
                    delays.append(delay)
                    within += delay <= 10
            text, _ = share(within, histories)
            median = f"{statistics.median(delays):g} runs" if delays else "n/a"
            rows.append(
                Row(
                    f"drift, detection of a 0.15 drop in every task's pass probability: {tasks} tasks, {shape}; "
                    f"{histories} histories",
                    f"within 10 runs {text}; median delay {median} ({100 * len(delays) / histories:.0f} % within 30)",
                    "(measured)",
                    "",
                )
            )
    return rows


PLANTED: dict[str, Callable[[random.Random], Callable[[int], float]]] = {
    "stable": lambda rng: lambda run: 1.0,
    "broken": lambda rng: lambda run: 0.0,
    "flaky": lambda rng: (lambda p: lambda run: p)(rng.uniform(0.2, 0.8)),
    "regressed": lambda rng: (lambda at: lambda run: 0.9 if run < at else 0.3)(rng.randint(6, 15)),
    "fixed": lambda rng: (lambda at: lambda run: 0.3 if run < at else 0.9)(rng.randint(6, 15)),
}
"""Per planted label, a draw of the task's pass probability as a function of the run (1-20)."""


def label_rows(histories: int) -> list[Row]:
    rows = []
    for repeats in (1, 4):
        for planted, draw in PLANTED.items():
            rng = random.Random(f"{SEED}-labels-{repeats}-{planted}")
            right = changed = 0
            for _ in range(histories):
                probability = draw(rng)
                outcomes = [
                    RunOutcome(run, sum(rng.random() < probability(run) for _ in range(repeats)), repeats)
                    for run in range(1, 21)
                ]
                label = assess("d.jsonl", "t", outcomes).label
                right += label == planted
                changed += label in ("regressed", "fixed")
            text, _ = share(right, histories)
            result = f"labelled {planted} in {text}"
            goal, verdict = "(measured)", ""
            if planted == "flaky":
                wrong, high = share(changed, histories)
                result += f"; regressed or fixed in {wrong}"
                goal = f"regressed or fixed <= {100 * DEFAULT_ALPHA:.0f} %"
                verdict = (
                    "met" if high <= DEFAULT_ALPHA else "unclear" if changed / histories <= DEFAULT_ALPHA else "not met"
                )
            rows.append(
                Row(
                    f"labels, planted {planted}: 20 runs, {repeats} repeat{'s' if repeats > 1 else ''} a run; "
                    f"{histories} histories",
                    result,
                    goal,
                    verdict,
                )
            )
    return rows


MARGIN = 0.1
"""The non-inferiority margin of the paired rows; the candidate is worse by exactly this."""
PAIRED_SIZES = ((12, 2), (12, 4), (12, 8), (20, 8), (40, 4))
"""(tasks, repeats) of the paired rows: the sizes users run."""
DROPS: dict[str, Callable[[int], tuple[float, float]]] = {
    "symmetric": lambda t: (0.9, 0.8) if t % 2 else (0.6, 0.5),
    "heterogeneous": lambda t: ((0.6, 0.4), (0.9, 0.7), (0.9, 0.9), (0.6, 0.6))[t % 4],
    "rare one-sided": lambda t: (1.0, 0.9),
    "one-sided on half the tasks": lambda t: (1.0, 0.8) if t % 2 else (1.0, 1.0),
    "one-sided on a quarter of the tasks": lambda t: (1.0, 0.6) if t % 4 == 0 else (1.0, 1.0),
    "near-ceiling mixed": lambda t: (0.95, 0.85),
    "heterogeneous with some tasks improved": lambda t: ((0.5, 0.2), (0.9, 0.7), (0.6, 0.7), (0.8, 0.8))[t % 4],
}
"""Per shape of a drop of exactly :data:`MARGIN` on average, task t's pass probability under (baseline, candidate).
The last four were added with the gains-and-losses interval (issue 38, item 3) as shapes it was not chosen on:
the drop concentrated on half or a quarter of the tasks (every pair still 0 or -1), a drop near the ceiling with
some gains among the losses (0.95 to 0.85), and tasks of which some improve (0.6 to 0.7)."""
LIMIT = 0.025
"""alpha/2: the most each wrong verdict of a 95 % two-sided interval may happen."""


def gate_verdict(counts: list[int], n: int, goal: float = LIMIT) -> str:
    """The verdict of a gate row whose wrong verdicts happened ``counts`` times in ``n`` runs: ``met`` when every
    Monte-Carlo interval's upper end is within ``goal``, ``not met`` when some interval's lower end is above it (the
    rate exceeds the goal beyond the simulation's error), ``unclear`` otherwise (within the error of the goal: a
    method exactly at alpha/2 lands here, 1,000 runs cannot tell 2.5 % from 3.5 %)."""
    intervals = [wilson_interval(count, n) for count in counts]
    if all(interval.high <= goal for interval in intervals):
        return "met"
    return "not met" if any(interval.low > goal for interval in intervals) else "unclear"


Rewards = dict[tuple[str, int], float]
"""One model's rewards keyed (task id, repeat), the comparison's input."""


def paired_run(
    rng: random.Random, shape: str, tasks: int, repeats: int, equal: bool = False
) -> tuple[Rewards, Rewards]:
    """One simulated pair of runs, Bernoulli rewards keyed (task id, repeat); ``equal``: the candidate as the
    baseline."""
    baseline: Rewards = {}
    candidate: Rewards = {}
    for t in range(tasks):
        p, q = DROPS[shape](t)
        for r in range(repeats):
            baseline[(f"t{t}", r)] = 1.0 if rng.random() < p else 0.0
            candidate[(f"t{t}", r)] = 1.0 if rng.random() < (p if equal else q) else 0.0
    return baseline, candidate


def t_and_hall(baseline: Rewards, candidate: Rewards) -> Interval:
    """The interval before issue 38 item 3: the task-clustered t interval of the differences, each bound the wider of
    it and Hall's skewness-corrected one, clipped to [-1, 1] (the no-spread interval when it has zero width)."""
    tasks: dict[str, list[float]] = {}
    for key, reward in baseline.items():
        tasks.setdefault(key[0], []).append(candidate[key] - reward)
    interval = mean_interval(list(tasks.values()), skew_corrected=True)
    if interval.low == interval.high:
        return paired_mean_difference(baseline, candidate).interval
    return Interval(interval.estimate, max(interval.low, -1.0), min(interval.high, 1.0), interval.n)


def paired_rows(histories: int) -> list[Row]:
    gate = ComparisonGate(Hypothesis.NON_INFERIORITY, MARGIN)
    rows = []
    for shape in DROPS:
        for tasks, repeats in PAIRED_SIZES:
            rng = random.Random(f"{SEED}-paired-{shape}-{tasks}-{repeats}")
            counts = {"pass": 0, "fail": 0, "t pass": 0, "t fail": 0, "power": 0, "t power": 0}
            for _ in range(histories):
                baseline, candidate = paired_run(rng, shape, tasks, repeats)
                for prefix, interval in (("", paired_mean_difference(baseline, candidate).interval),
                                         ("t ", t_and_hall(baseline, candidate))):  # fmt: skip
                    verdict = judge_comparison(interval, gate)
                    counts[prefix + "pass"] += verdict is Verdict.PASS
                    counts[prefix + "fail"] += verdict is Verdict.FAIL
                baseline, candidate = paired_run(rng, shape, tasks, repeats, equal=True)
                counts["power"] += (
                    judge_comparison(paired_mean_difference(baseline, candidate).interval, gate) is Verdict.PASS
                )
                counts["t power"] += judge_comparison(t_and_hall(baseline, candidate), gate) is Verdict.PASS
            wrong_pass, _ = share(counts["pass"], histories)
            wrong_fail, _ = share(counts["fail"], histories)
            rows.append(
                Row(
                    f"paired non-inferiority at the margin (candidate exactly {MARGIN:g} worse), {shape} drops: "
                    f"{tasks} tasks x {repeats} repeats; {histories} histories",
                    f"wrong PASS {wrong_pass}, wrong FAIL {wrong_fail}; t with Hall's correction (before): wrong PASS "
                    f"{share(counts['t pass'], histories)[0]}, wrong FAIL {share(counts['t fail'], histories)[0]}; "
                    f"power (PASS with the candidate as good): {100 * counts['power'] / histories:.1f} % "
                    f"(t with Hall's {100 * counts['t power'] / histories:.1f} %)",
                    f"each wrong verdict <= {100 * LIMIT:.1f} %",
                    gate_verdict([counts["pass"], counts["fail"]], histories),
                )
            )
    return rows


SINGLE_SHAPES: dict[str, Callable[[int], float]] = {
    "symmetric": lambda t: 0.9 if t % 2 else 0.6,
    "heterogeneous": lambda t: (1.0, 0.95, 0.6, 0.45)[t % 4],
    "rare failures": lambda t: 0.9,
    "rare successes": lambda t: 0.1,
}
"""Per shape, task t's pass probability; every shape's mean over tasks is 0.75, 0.9 or 0.1
(:func:`single_threshold`)."""
POWER_GAP = 0.1
"""How far from the true mean the threshold of a single-policy row's power is set: PASS with the threshold this far
below it (FAIL with it this far above for a mean under 0.5, where below would be nearly 0)."""


def single_threshold(shape: str, tasks: int) -> float:
    """The true mean over the tasks, where the gate's threshold is set."""
    return math.fsum(SINGLE_SHAPES[shape](t) for t in range(tasks)) / tasks


def single_intervals(metric: str, rewards: list[list[float]]) -> tuple[Interval, Interval]:
    """The interval sessions judge ``metric`` on (:func:`pytest_gym_eval.stats.gates.metric_interval`) and the one
    before issue 38 (the mean reward's t interval clustered by task, the pass rate's Wilson interval)."""
    counts = [(len(task), sum(1 for x in task if x >= 1.0)) for task in rewards]
    now = gates.metric_interval(metric, rewards, counts)
    if metric == "mean_reward":
        return now, mean_interval(rewards, clip=True)
    return now, wilson_interval(sum(c for _, c in counts), sum(n for n, _ in counts))


def single_rows(histories: int) -> list[Row]:
    rows = []
    for metric in ("mean_reward", "pass_rate"):
        before_name = "t (before)" if metric == "mean_reward" else "Wilson (before)"
        for shape in SINGLE_SHAPES:
            for tasks, repeats in PAIRED_SIZES:
                rng = random.Random(f"{SEED}-single-{metric}-{shape}-{tasks}-{repeats}")
                threshold = single_threshold(shape, tasks)
                high = threshold < 0.5  # power: FAIL with the threshold above (else PASS with it below)
                counts = dict.fromkeys(("pass", "fail", "power", "t pass", "t fail", "t power"), 0)
                for _ in range(histories):
                    rewards = [
                        [1.0 if rng.random() < SINGLE_SHAPES[shape](t) else 0.0 for _ in range(repeats)]
                        for t in range(tasks)
                    ]
                    tally(counts, single_intervals(metric, rewards), threshold, high)
                label = f"{metric} gate at the threshold (the true mean, {threshold:.3g}), {shape}: {tasks} tasks x "
                rows.append(threshold_row(label + f"{repeats} repeats", counts, histories, before_name, high))
    return rows


def tally(counts: dict[str, int], intervals: Sequence[Interval], threshold: float, high: bool) -> None:
    """Count, into ``counts``, the verdicts of a threshold row's two intervals (the gate's now, then the one before,
    keys prefixed "t "): a wrong PASS, a wrong FAIL (the truth at ``threshold``) and power, the right verdict with
    the threshold :data:`POWER_GAP` away (above it when ``high``, FAIL; else below it, PASS)."""
    power_threshold = threshold + POWER_GAP if high else threshold - POWER_GAP
    power_verdict = Verdict.FAIL if high else Verdict.PASS
    for prefix, interval in zip(("", "t "), intervals, strict=True):
        verdict = judge(interval, threshold, GateMode.LOWER_BOUND)
        counts[prefix + "pass"] += verdict is Verdict.PASS
        counts[prefix + "fail"] += verdict is Verdict.FAIL
        counts[prefix + "power"] += judge(interval, power_threshold, GateMode.LOWER_BOUND) is power_verdict


def threshold_row(label: str, counts: dict[str, int], histories: int, before_name: str, high: bool) -> Row:
    """The row of a gate at its threshold from :func:`tally`'s ``counts`` over ``histories``; ``label`` names the
    gate, shape and size, ``before_name`` the interval before (e.g. "t (before)")."""
    power_verdict = Verdict.FAIL if high else Verdict.PASS
    power_words = f"{power_verdict.value} with the threshold {POWER_GAP:g} {'above' if high else 'below'}"
    return Row(
        f"{label}; {histories} histories",
        f"wrong PASS {share(counts['pass'], histories)[0]}, wrong FAIL "
        f"{share(counts['fail'], histories)[0]}; {before_name}: wrong PASS "
        f"{share(counts['t pass'], histories)[0]}, wrong FAIL {share(counts['t fail'], histories)[0]}; "
        f"power ({power_words}): {100 * counts['power'] / histories:.1f} % "
        f"({before_name.split()[0]} {100 * counts['t power'] / histories:.1f} %)",
        f"each wrong verdict <= {100 * LIMIT:.1f} %",
        gate_verdict([counts["pass"], counts["fail"]], histories),
    )


PASSK_SHAPES: dict[str, Callable[[int], float]] = {
    "symmetric": lambda t: (0.1, 0.25, 0.4, 0.55)[t % 4],
    "heterogeneous": lambda t: (1.0, 0.0, 0.3, 0.1)[t % 4],
    "rare failures": lambda t: 0.7,
    "rare successes": lambda t: 0.02,
}
"""Per shape of the pass@k rows, task t's pass probability."""
PASSK_SIZES = ((12, 4), (12, 8), (20, 4), (20, 8), (40, 4), (40, 8))
"""(tasks, repeats) of the pass@k rows (k <= repeats)."""


def passk_rows(histories: int) -> list[Row]:
    rows = []
    for k in (2, 4):
        for shape, probability in PASSK_SHAPES.items():
            for tasks, repeats in PASSK_SIZES:
                rng = random.Random(f"{SEED}-passk-{k}-{shape}-{tasks}-{repeats}")
                threshold = math.fsum(1.0 - (1.0 - probability(t)) ** k for t in range(tasks)) / tasks
                high = threshold < 0.5  # power: FAIL with the threshold above (else PASS with it below)
                counts = dict.fromkeys(("pass", "fail", "power", "t pass", "t fail", "t power"), 0)
                for _ in range(histories):
                    tallies = [
                        (repeats, sum(1 for _ in range(repeats) if rng.random() < probability(t))) for t in range(tasks)
                    ]
                    now = gates.metric_interval("pass_at_k", [], tallies, k=k)
                    tally(counts, (now, pass_at_k_interval(tallies, k, clip=True)), threshold, high)
                label = f"pass@{k} gate at the threshold (the true pass@{k}, {threshold:.3g}), {shape}: {tasks} tasks "
                rows.append(threshold_row(label + f"x {repeats} repeats", counts, histories, "t (before)", high))
    return rows


def familywise_rows(histories: int, datasets: int = 5) -> list[Row]:
    rng = random.Random(f"{SEED}-familywise-{datasets}")
    gate = gates.Gate("mean_reward", 0.5)
    alone = family = single = 0
    for _ in range(histories):
        judged = []
        for _ in range(datasets):
            probabilities = [rng.random() for _ in range(20)]
            rewards = [[1.0 if rng.random() < p else 0.0 for _ in range(2)] for p in probabilities]
            passed = [[r >= 1.0 for r in task] for task in rewards]
            judged.append(gates.evaluate([gate], rewards, passed, gates.GateMode.LOWER_BOUND))
        decided = [r.verdict is not gates.Verdict.INCONCLUSIVE for results in judged for r in results]
        alone += any(decided)
        single += sum(decided)
        family += any(r.verdict is not gates.Verdict.INCONCLUSIVE for rs in familywise.holm(judged, 0.95) for r in rs)
    alone_text, _ = share(alone, histories)
    family_text, _ = share(family, histories)
    what = (
        f"family-wise error, {datasets} datasets all exactly at the margin (20 tasks x 2 repeats, gates mean reward "
        f">= 0.5 on the lower bound); {histories} histories"
    )
    return [
        Row(
            f"{what}: each gate alone at 95 %",
            f"some gate decided in {alone_text}; each gate in {share(single, histories * datasets)[0]}",
            f"(measured; 1 - 0.95^{datasets} = {100 * (1 - 0.95**datasets):.1f} % if each gate erred 5 %)",
            "",
        ),
        Row(
            f"{what}: --gym-familywise=holm",
            f"some gate decided in {family_text}",
            "family-wise error <= 5 % (Holm's bound, tight when every gate sits on its threshold)",
            gate_verdict([family], histories, goal=0.05),
        ),
    ]


HINT_SHAPES: dict[str, tuple[Callable[[random.Random], float], float, float]] = {
    "symmetric (uniform on [0, 1])": (lambda rng: rng.random(), 0.5, 1 / 12),
    "heterogeneous (1, 0.95, 0.6 or 0.45)": (lambda rng: rng.choice((1.0, 0.95, 0.6, 0.45)), 0.75, 0.053125),
    "rare failures (every task 0.9)": (lambda rng: 0.9, 0.9, 0.0),
    "rare successes (every task 0.1)": (lambda rng: 0.1, 0.1, 0.0),
}
"""Per shape of the hint rows: a draw of one task's pass probability from the population, its mean and its
variance (between tasks)."""
HINT_SIZES = ((12, 2), (20, 4), (40, 2))
"""(tasks, repeats) of the hint rows' first run."""
HINT_GAP = 1.5
"""How many true standard errors of the first run's mean the hint rows' threshold lies from the true mean (below it,
above for a mean under 0.5): close enough that the first run is mostly INCONCLUSIVE."""


def population_run(rng: random.Random, shape: str, rollouts: int, repeats: int) -> list[list[float]]:
    """``rollouts`` 0/1 rewards of tasks drawn afresh from ``shape``'s population, ``repeats`` a task (the last task
    fewer when they do not divide)."""
    draw = HINT_SHAPES[shape][0]
    out = []
    for start in range(0, rollouts, repeats):
        p = draw(rng)
        out.append([1.0 if rng.random() < p else 0.0 for _ in range(min(repeats, rollouts - start))])
    return out


def old_hint(metric: str, rewards: list[list[float]], threshold: float, confidence: float = 0.95) -> int:
    """The hint before issue 38 item 4 (more tasks for the mean reward, more rollouts for the pass rate): the
    planner's normal formula :func:`pytest_gym_eval.stats.power.tasks_needed` with one unit's variance (the
    clustered standard error squared times the tasks; p (1 - p) of a rollout) at the observed effect."""
    if metric == "pass_rate":
        flat = [x for task in rewards for x in task]
        estimate, units = math.fsum(flat) / len(flat), len(flat)
        spread = estimate * (1.0 - estimate) or threshold * (1.0 - threshold)
    else:
        estimate, error, units = clustered_standard_error(rewards)
        spread = error * error * units
    needed = power.tasks_needed(spread, abs(estimate - threshold), gates.HINT_POWER, 1.0 - confidence)
    return max(1, needed - units)


def hint_rows(histories: int) -> list[Row]:
    """Whether an INCONCLUSIVE gate's hint (:meth:`pytest_gym_eval.stats.gates.Basis.hint`, through
    :func:`~pytest_gym_eval.stats.gates.evaluate`) likely decides it: a first run from the population, its hint,
    then a fresh run of the hinted total size from the same population, judged by the same gate."""
    rows = []
    for metric in ("mean_reward", "pass_rate"):
        unit = "rollouts" if metric == "pass_rate" else "tasks"
        for shape, (_, mean, between) in HINT_SHAPES.items():
            for tasks, repeats in HINT_SIZES:
                rng = random.Random(f"{SEED}-hints-{metric}-{shape}-{tasks}-{repeats}")
                error = math.sqrt((between + (mean * (1.0 - mean) - between) / repeats) / tasks)
                high = mean < 0.5  # the threshold above the truth: the right verdict is FAIL (else PASS)
                threshold = mean + HINT_GAP * error if high else mean - HINT_GAP * error
                gate, right = gates.Gate(metric, threshold), Verdict.FAIL if high else Verdict.PASS
                counts = dict.fromkeys(
                    ("inconclusive", "hinted", "right", "wrong", "old hinted", "old right", "old wrong"), 0
                )
                sizes: list[int] = []
                for _ in range(histories):
                    rewards = population_run(rng, shape, tasks * repeats, repeats)
                    passed = [[x >= 1.0 for x in task] for task in rewards]
                    (result,) = gates.evaluate([gate], rewards, passed, GateMode.LOWER_BOUND)
                    if result.verdict is not Verdict.INCONCLUSIVE:
                        continue
                    counts["inconclusive"] += 1
                    have = tasks if unit == "tasks" else tasks * repeats
                    for prefix, more in (("", result.hint.more if result.hint else None),
                                         ("old ", old_hint(metric, rewards, threshold))):  # fmt: skip
                        if more is None or more > max(power.MAX_PROJECTED, 4 * have):
                            continue  # "more than ... would be needed" (the old one: past today's limit)
                        counts[prefix + "hinted"] += 1
                        if not prefix:
                            sizes.append(have + more)
                        total = (have + more) * (repeats if unit == "tasks" else 1)
                        fresh = population_run(rng, shape, total, repeats)
                        counts_fresh = [(len(task), sum(1 for x in task if x >= 1.0)) for task in fresh]
                        interval = gates.metric_interval(metric, fresh, counts_fresh)
                        verdict = judge(interval, threshold, GateMode.LOWER_BOUND)
                        counts[prefix + "right"] += verdict is right
                        counts[prefix + "wrong"] += verdict not in (right, Verdict.INCONCLUSIVE)
                hinted, inconclusive, old = counts["hinted"], counts["inconclusive"], max(1, counts["old hinted"])
                result_text = "no INCONCLUSIVE first run"
                if hinted:
                    result_text = (
                        f"decided right at the hinted size {share(counts['right'], hinted)[0]}, wrong "
                        f"{100 * counts['wrong'] / hinted:.1f} %; old t hint (before): right "
                        f"{share(counts['old right'], old)[0]}, wrong {100 * counts['old wrong'] / old:.1f} %; "
                        f"first run INCONCLUSIVE in "
                        f'{100 * inconclusive / histories:.0f} %, {inconclusive - hinted} of them hinted "more '
                        f'than"; median hinted total {statistics.median(sizes):,.0f} {unit}'
                    )
                rows.append(
                    Row(
                        f"INCONCLUSIVE hint, {metric} gate {threshold:.3g} ({HINT_GAP:g} standard errors from the "
                        f"true mean {mean:g}), {shape}: first run {tasks} tasks x {repeats} repeats; "
                        f"{histories} histories",
                        result_text,
                        "(measured; intended about 80 %)",
                        "",
                    )
                )
    return rows


PAIRED_HINT_SHAPES = ("symmetric (uniform on [0, 1])", "rare failures (every task 0.9)")
"""The hint rows' shapes for the paired comparison (the candidate as good as the baseline on every task)."""


def old_paired_hint(interval: Interval, threshold: float, confidence: float = 0.95) -> int:
    """A comparison's hint before issue 38 item 4: the normal formula with one task's variance from the interval's
    wider half-width over t_{(1+c)/2, n-1} (the standard error), at the observed effect."""
    n = interval.n
    error = max(interval.estimate - interval.low, interval.high - interval.estimate) / student_t_ppf(
        (1.0 + confidence) / 2.0, n - 1
    )
    effect = abs(interval.estimate - threshold)
    return max(1, power.tasks_needed(error * error * n, effect, gates.HINT_POWER, 1.0 - confidence) - n)


def paired_population(rng: random.Random, shape: str, tasks: int, repeats: int) -> tuple[Rewards, Rewards]:
    """A baseline and a candidate run on ``tasks`` tasks drawn afresh from ``shape``'s population, the candidate's
    pass probability the baseline's on every task."""
    baseline: Rewards = {}
    candidate: Rewards = {}
    for t in range(tasks):
        p = HINT_SHAPES[shape][0](rng)
        for r in range(repeats):
            baseline[(f"t{t}", r)] = 1.0 if rng.random() < p else 0.0
            candidate[(f"t{t}", r)] = 1.0 if rng.random() < p else 0.0
    return baseline, candidate


def paired_hint_rows(histories: int) -> list[Row]:
    """:func:`hint_rows` for the paired comparison's non-inferiority gate (:func:`~pytest_gym_eval.stats.comparison.
    compare`, the candidate as good as the baseline, the margin 1.5 true standard errors of the difference)."""
    rows = []
    for shape in PAIRED_HINT_SHAPES:
        _, mean, between = HINT_SHAPES[shape]
        for tasks, repeats in HINT_SIZES:
            rng = random.Random(f"{SEED}-paired-hints-{shape}-{tasks}-{repeats}")
            margin = HINT_GAP * math.sqrt(2.0 * (mean * (1.0 - mean) - between) / repeats / tasks)
            gate = ComparisonGate(Hypothesis.NON_INFERIORITY, margin)
            counts = dict.fromkeys(
                ("inconclusive", "hinted", "right", "wrong", "old hinted", "old right", "old wrong"), 0
            )
            sizes: list[int] = []
            for _ in range(histories):
                (result,) = compare(*paired_population(rng, shape, tasks, repeats), [gate]).results
                if result.verdict is not Verdict.INCONCLUSIVE:
                    continue
                counts["inconclusive"] += 1
                for prefix, more in (("", result.hint.more if result.hint else None),
                                     ("old ", old_paired_hint(result.interval, gate.threshold))):  # fmt: skip
                    if more is None or more > max(power.MAX_PROJECTED, 4 * tasks):
                        continue
                    counts[prefix + "hinted"] += 1
                    if not prefix:
                        sizes.append(tasks + more)
                    fresh = paired_population(rng, shape, tasks + more, repeats)
                    verdict = judge_comparison(paired_mean_difference(*fresh).interval, gate)
                    counts[prefix + "right"] += verdict is Verdict.PASS
                    counts[prefix + "wrong"] += verdict is Verdict.FAIL
            hinted, inconclusive, old = counts["hinted"], counts["inconclusive"], max(1, counts["old hinted"])
            result_text = "no INCONCLUSIVE first run"
            if hinted:
                result_text = (
                    f"decided right (PASS) at the hinted size {share(counts['right'], hinted)[0]}, wrong "
                    f"{100 * counts['wrong'] / hinted:.1f} %; old t hint (before): right "
                    f"{share(counts['old right'], old)[0]}, wrong {100 * counts['old wrong'] / old:.1f} %; "
                    f"first run INCONCLUSIVE in {100 * inconclusive / histories:.0f} %, {inconclusive - hinted} of "
                    f'them hinted "more than"; median hinted total {statistics.median(sizes):,.0f} tasks'
                )
            rows.append(
                Row(
                    f"INCONCLUSIVE hint, paired non-inferiority at margin {margin:.3g} ({HINT_GAP:g} standard errors "
                    f"of the difference; the candidate as good), {shape}: first run {tasks} tasks x {repeats} "
                    f"repeats; {histories} histories",
                    result_text,
                    "(measured; intended about 80 %)",
                    "",
                )
            )
    return rows


JUDGE_SIZES = ((12, 2), (40, 2), (12, 4), (40, 4))
"""(tasks, repeats) of the judge-noise rows at the margin."""

GRADED_SPREAD = 2.0
"""c of the graded judge: a reward ~ Beta(c p, c (1 - p)) around its answer's p, variance p (1 - p) / (c + 1)."""


def judge_spread(repeats: int) -> float:
    """d such that answers judged right with probability 1/2 ± d (half each way) make the judge exactly half of the
    mean reward interval's variance with ``repeats`` judgments an answer: the answers' variance d² equals the
    judge's 1/4 - d² over ``repeats``, so d² = 1 / (4 (repeats + 1))."""
    return math.sqrt(0.25 / (repeats + 1))


def judged_run(rng: random.Random, tasks: int, repeats: int, spread: float) -> list[list[list[float]]]:
    """One replayed run: each task's one recorded answer judged ``repeats`` times; the judge scores it 1 with the
    answer's probability, 1/2 + ``spread`` or 1/2 - ``spread`` (drawn per task, half each way)."""
    probabilities = [0.5 + (spread if rng.random() < 0.5 else -spread) for _ in range(tasks)]
    return [[[1.0 if rng.random() < p else 0.0 for _ in range(repeats)]] for p in probabilities]


def beta_judged_run(rng: random.Random, tasks: int, repeats: int, mean: float, graded: bool) -> list[list[list[float]]]:
    """One replayed run at the margin with answers right with probability p ~ Beta(mean nu, (1 - mean) nu): a 0/1
    judge (nu = repeats: Var(p) = mean (1 - mean) / (repeats + 1), the judge's E[p (1 - p)] = repeats Var(p)) or a
    graded one (rewards ~ Beta(c p, c (1 - p)), nu = repeats (c + 1): the judge's E[p (1 - p)] / (c + 1) = repeats
    Var(p)); either way the judge is exactly half of the mean reward interval's variance."""
    nu = repeats * (GRADED_SPREAD + 1.0) if graded else float(repeats)
    run = []
    for _ in range(tasks):
        p = min(1.0 - 1e-9, max(1e-9, rng.betavariate(mean * nu, (1.0 - mean) * nu)))
        if graded:
            run.append([[rng.betavariate(GRADED_SPREAD * p, GRADED_SPREAD * (1.0 - p)) for _ in range(repeats)]])
        else:
            run.append([[1.0 if rng.random() < p else 0.0 for _ in range(repeats)]])
    return run


JUDGE_SHAPES: dict[str, Callable[[random.Random, int, int], list[list[list[float]]]]] = {
    "0/1 judge, answers right 1/2 ± d": lambda rng, tasks, repeats: judged_run(
        rng, tasks, repeats, judge_spread(repeats)
    ),
    "0/1 judge, skewed high (mean 0.9)": lambda rng, tasks, repeats: beta_judged_run(rng, tasks, repeats, 0.9, False),
    "0/1 judge, skewed low (mean 0.1)": lambda rng, tasks, repeats: beta_judged_run(rng, tasks, repeats, 0.1, False),
    "graded judge (mean 0.5)": lambda rng, tasks, repeats: beta_judged_run(rng, tasks, repeats, 0.5, True),
    "graded judge (mean 0.9)": lambda rng, tasks, repeats: beta_judged_run(rng, tasks, repeats, 0.9, True),
}
"""The judge-noise rows' shapes at the margin (rewards of a run, from rng, tasks and repeats)."""


def before_dominance(run: list[list[list[float]]]) -> str | None:
    """What the summary said before issue 38's follow-up: the judge's share of the interval's variance with the F
    interval share · [F_{a/2}, F_{1-a/2}](T - 1, N - g), normal theory."""
    noise = judge_noise(run)
    if noise is None or noise.dominated_by is None:
        return None
    _, standard_error, tasks = clustered_standard_error([[y for answer in task for y in answer] for task in run])
    share = noise.judge_variance / noise.judgments / standard_error**2
    within = noise.judgments - noise.answers
    low = min(1.0, max(0.0, share * f_ppf(0.025, tasks - 1, within)))
    high = min(1.0, max(0.0, share * f_ppf(0.975, tasks - 1, within)))
    return dominance(low, high)


def judge_noise_rows(histories: int) -> list[Row]:
    """The judge-noise summary's "dominated by" (:func:`pytest_gym_eval.stats.judge_noise.judge_noise`) on 0/1 and
    graded judges: at the margin (the judge exactly half of the mean reward interval's variance) each wrong
    statement, "judge" or "policy", should happen at most alpha/2 of the time; beside it the F interval's (before),
    and how often a clear case is named (the power)."""
    rows = []
    for shape, make in JUDGE_SHAPES.items():
        for tasks, repeats in JUDGE_SIZES:
            rng = random.Random(f"{SEED}-judge-{shape}-{tasks}-{repeats}")
            said = {"judge": 0, "policy": 0}
            before = {"judge": 0, "policy": 0}
            for _ in range(histories):
                run = make(rng, tasks, repeats)
                noise = judge_noise(run)
                if noise is not None and noise.dominated_by in said:
                    said[noise.dominated_by] += 1
                old = before_dominance(run)
                if old in before:
                    before[old] += 1
            rows.append(
                Row(
                    f"judge noise at the margin (the judge half of the mean reward interval's variance), {shape}: "
                    f"{tasks} tasks x {repeats} judgments of one answer; {histories} histories",
                    f"wrong 'dominated by the judge' {share(said['judge'], histories)[0]}, wrong 'by the policy' "
                    f"{share(said['policy'], histories)[0]}; before (F interval): "
                    f"{100 * before['judge'] / histories:.1f} % and {100 * before['policy'] / histories:.1f} %",
                    f"each wrong statement <= {100 * LIMIT:.1f} %",
                    gate_verdict([said["judge"], said["policy"]], histories),
                )
            )
    for case, spread, right in (("a noisy judge (answers right 0.5 ± 0.1)", 0.1, "judge"),
                                ("a steady judge (5 % flips: 0.5 ± 0.45)", 0.45, "policy")):  # fmt: skip
        for tasks, repeats in JUDGE_SIZES:
            rng = random.Random(f"{SEED}-judge-clear-{right}-{tasks}-{repeats}")
            named = wrong = named_before = 0
            for _ in range(histories):
                run = judged_run(rng, tasks, repeats, spread)
                noise = judge_noise(run)
                dominated = None if noise is None else noise.dominated_by
                named += dominated == right
                wrong += dominated not in (right, "neither", None)
                named_before += before_dominance(run) == right
            rows.append(
                Row(
                    f"judge noise, {case}: {tasks} tasks x {repeats} judgments of one answer; {histories} histories",
                    f"'dominated by the {right}' {share(named, histories)[0]}, the other {share(wrong, histories)[0]}"
                    f"; before (F interval): {100 * named_before / histories:.1f} %",
                    "(measured: the power)",
                    "",
                )
            )
    return rows


def render(rows: list[Row], histories: int) -> str:
    lines = [
        f"Seed {SEED}, {histories} histories a row, drift defaults h = {DEFAULT_H:g}, k = 0.5, 5 reference runs, "
        f"skewness at least {DEFAULT_MIN_SKEW:g}; shares with their Wilson 95 % interval over the histories.",
        "",
        "| measured | result | goal | verdict |",
        "|---|---|---|---|",
    ]
    lines += [f"| {r.what} | {r.result} | {r.goal} | {r.verdict} |" for r in rows]
    return "\n".join(lines) + "\n"


def write(block: str, path: Path = DOCS) -> None:
    """Put ``block`` between the markers in ``path``. Raises ValueError when the file has no markers."""
    text = path.read_text(encoding="utf-8")
    begin, end = text.find(TABLE_BEGIN), text.find(TABLE_END)
    if begin < 0 or end < begin:
        raise ValueError(f"{path} has no {TABLE_BEGIN!r} ... {TABLE_END!r} markers")
    path.write_text(f"{text[: begin + len(TABLE_BEGIN)]}\n{block.strip()}\n{text[end:]}", encoding="utf-8")


GROUPS: dict[str, Callable[[int], list[Row]]] = {
    "drift": lambda n: false_alarm_rows(n) + detection_rows(n),
    "labels": label_rows,
    "paired": paired_rows,
    "single": single_rows,
    "passk": passk_rows,
    "familywise": familywise_rows,
    "judge_noise": judge_noise_rows,
    "hints": lambda n: hint_rows(n // 10) + paired_hint_rows(n // 5),
}
"""The table's groups of rows, in order (``--only`` picks some)."""


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a tenth of the histories")
    parser.add_argument("--write", action="store_true", help="write the table into docs/benchmarks.md")
    parser.add_argument(
        "--only", action="append", choices=sorted(GROUPS), help="only these groups (repeatable; not with --write)"
    )
    args = parser.parse_args(argv)
    if args.only and args.write:
        parser.error("--write writes the whole table: leave out --only")
    histories = HISTORIES // 10 if args.quick else HISTORIES
    rows = [row for name, group in GROUPS.items() if not args.only or name in args.only for row in group(histories)]
    block = render(rows, histories)
    print(block)
    if args.write:
        write(block)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
