"""Paired A/B comparison of a candidate policy model with a baseline on one dataset (issue 25).

Input everywhere: for one dataset, ``baseline[(task_id, repeat)]`` and ``candidate[(task_id, repeat)]``, the reward
of that rollout of each model (any finite number; [0, 1] for a verifier's usual range, binary or not). A *pair* is
a (task id, repeat) both sides have; only pairs count, a rollout the other side lacks (it errored, never ran) is
left out of every statistic. Tasks are the independent units: the rollouts of one task share its difficulty, so
every interval and test here is clustered by, or taken over, tasks.

- :func:`paired_mean_difference`: candidate - baseline in mean reward, with an interval of the per-pair differences
  clustered by task (MOVER on gains and losses for rewards in [0, 1]).
- :func:`flip_decomposition`: per task, which side passes (mean reward above 0.5, Gym's ``gym eval compare`` rule),
  with McNemar's exact test over the tasks that flip.
- :class:`ComparisonGate` and :func:`judge_comparison`: non-inferiority (the candidate is not worse by more than
  delta) and superiority (the candidate is better), PASS / FAIL / INCONCLUSIVE with :class:`~.gates.Verdict`;
  :func:`gym_verdict` names a result in Gym's planned PASS / WARN / FAIL / INCONCLUSIVE (Gym epic #1493).
- :class:`PairedSequence`: the same gates judged after each wave of ``--gym-adaptive`` on an anytime-valid
  confidence sequence for the mean difference (:class:`~.sequential.BettingSequence` on differences rescaled from
  [-1, 1] to [0, 1]); :func:`decided` and :func:`reason` for stopping.

What users read: docs/gates-and-statistics.md, "Comparing two models".
"""

from __future__ import annotations

import math
import random
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum

from pytest_gym_eval.core import number_text
from pytest_gym_eval.stats.exact_tests import mcnemar_exact
from pytest_gym_eval.stats.gates import HINT_POWER, Familywise, GateMode, GateSource, Verdict, judge
from pytest_gym_eval.stats.intervals import Interval, mean_interval
from pytest_gym_eval.stats.paired_interval import gain_loss_interval
from pytest_gym_eval.stats.power import Hint, paired_hint
from pytest_gym_eval.stats.sequential import DEFAULT_ALPHA, BettingSequence, RewardRange, wave_ends

Key = tuple[str, int]
"""(task id, repeat): the key of one rollout of one model."""
UNIT_RANGE = RewardRange()
"""[0, 1]: a verifier's usual reward range, the default of :class:`PairedSequence`."""
PASS_ABOVE = 0.5
"""A task *passes* for :func:`flip_decomposition` when its mean reward over its paired repeats is above this (strictly),
the rule of Gym 0.7.0's ``gym eval compare``; 1 of 2 repeats (mean 0.5) does not pass."""


def paired_rewards(
    baseline: Mapping[Key, float], candidate: Mapping[Key, float]
) -> dict[str, list[tuple[float, float]]]:
    """``task id -> [(baseline reward, candidate reward), ...]`` over the pairs (keys both sides have), tasks and
    repeats in the order of ``baseline``; a task with no pair is absent."""
    pairs: dict[str, list[tuple[float, float]]] = {}
    for key, reward in baseline.items():
        if key in candidate:
            pairs.setdefault(key[0], []).append((reward, candidate[key]))
    return pairs


def _in_unit_range(pairs: Mapping[str, Sequence[tuple[float, float]]]) -> bool:
    return all(0.0 <= x <= 1.0 for task in pairs.values() for pair in task for x in pair)


@dataclass(frozen=True)
class PairedDifference:
    """Result of :func:`paired_mean_difference`.

    ``interval``: candidate - baseline in mean reward with its confidence interval (``n`` = tasks with a pair);
    ``pairs``: paired rollouts; ``baseline_mean`` / ``candidate_mean``: each side's mean over those pairs only (nan
    without pairs), so that ``interval.estimate == candidate_mean - baseline_mean`` up to rounding.
    """

    interval: Interval
    pairs: int
    baseline_mean: float
    candidate_mean: float
    confidence: float


def paired_mean_difference(
    baseline: Mapping[Key, float], candidate: Mapping[Key, float], confidence: float = 0.95
) -> PairedDifference:
    """The difference in mean reward, candidate - baseline, over the pairs, with an interval paired by task.

    With d_tr = candidate_tr - baseline_tr for each pair (task t, repeat r), the estimate is the mean of d over all
    N pairs (= the candidate's mean minus the baseline's, both over the pairs). **Rewards in [0, 1]**: the interval is
    :func:`~pytest_gym_eval.stats.paired_interval.gain_loss_interval` of the d_tr grouped by task, MOVER (Zou &
    Donner 2008) on the task-clustered Clopper-Pearson intervals (Korn & Graubard 1998) of the mean gain max(d, 0)
    and the mean loss max(-d, 0): a regression's rare one-sided drops (most d 0, a few -1) get the lower bound of
    the single-policy interval of a rare failure, where the t interval's, even with Hall's skewness correction,
    PASSED non-inferiority wrongly up to 3.4% of the time at the margin, now at most 1.9% (issue 38; benchmarks.md).
    **Other rewards**: :func:`~pytest_gym_eval.stats.intervals.mean_interval` of the d_tr, Student t on T-1 df (T =
    tasks with a pair) with the cluster-robust (CR1) standard error (Miller 2024, arXiv:2411.00640, §2 and §4), each
    bound the wider of the t bound and Hall's skewness-corrected one. Both take the tasks as the independent units
    (the interval generalises over tasks like these); pairing removes the tasks' difficulty, which both models share.

    Edges: no pair gives estimate nan and bounds ±inf (``n`` 0); one task the estimate with bounds ±inf (no spread
    between tasks to estimate); with every reward in [0, 1] finite bounds are clipped to [-1, 1]. MOVER's price: with
    no gain at all the gains' interval is that of 0 in the N pairs (0.39 for 10), a wide upper bound with few pairs.

    **No spread between tasks** (every task's mean difference the same, e.g. two models that score alike, or 3 tasks
    x 2 repeats whose pairs disagree +1 then -1): the t interval would have zero width, a "certain" verdict from a
    handful of tasks. It is replaced by a distribution-free one (:func:`no_spread_interval`): with T tasks all at
    the difference d̄, a share q = 1 - (alpha/2)^(1/T) of the tasks a dataset is drawn from may differ, by up to
    the whole range of a difference, and a sample of T still misses every one of them with probability alpha/2
    ((1 - q)^T = alpha/2, the "rule of three" of a proportion never observed), so the mean difference lies in
    [d̄ - q (d̄ + w), d̄ + q (w - d̄)] (w: the width of the reward range, [0, 1] here when every reward lies in it,
    else the span of the rewards seen; no span at all gives bounds ±inf). Its width does not collapse: 3 tasks
    give ±0.71 around 0, 100 tasks ±0.036. A sample that shows any spread keeps the interval above (a tolerance of
    1e-9 w absorbs rounding).

    Raises ValueError for a non-finite reward or a confidence outside (0, 1).
    """
    pairs = paired_rewards(baseline, candidate)
    flat = [pair for task in pairs.values() for pair in task]
    if any(not (math.isfinite(b) and math.isfinite(c)) for b, c in flat):
        raise ValueError("rewards must be finite numbers (found NaN or infinity)")
    differences = [[c - b for b, c in task] for task in pairs.values()]
    interval = mean_interval(differences, confidence, skew_corrected=True)
    unit = _in_unit_range(pairs)
    if interval.n >= 2 and math.isfinite(interval.low) and math.isfinite(interval.high):
        span = max(x for pair in flat for x in pair) - min(x for pair in flat for x in pair)
        width = 1.0 if unit else span
        if interval.high - interval.low <= 1e-9 * width or width == 0.0:
            interval = no_spread_interval(interval.estimate, interval.n, width, confidence)
        elif unit:
            interval = gain_loss_interval(differences, confidence)
    if unit and math.isfinite(interval.low) and math.isfinite(interval.high):
        interval = Interval(interval.estimate, max(interval.low, -1.0), min(interval.high, 1.0), interval.n)
    n = len(flat)
    base = math.fsum(b for b, _ in flat) / n if n else math.nan
    cand = math.fsum(c for _, c in flat) / n if n else math.nan
    return PairedDifference(interval, n, base, cand, confidence)


def no_spread_interval(estimate: float, tasks: int, width: float, confidence: float = 0.95) -> Interval:
    """The interval of a mean difference over ``tasks`` tasks that all showed the difference ``estimate``, for
    rewards in a range of ``width`` (differences in [-width, width]): [d - q (d + w), d + q (w - d)] with q = 1 -
    ((1 - confidence)/2)^(1/tasks), the largest share of tasks that T draws all miss with probability (1 -
    confidence)/2 (:func:`paired_mean_difference` has the argument). E.g. 3 tasks at 0, width 1, 95%: q =
    1 - 0.025^(1/3) = 0.7076, [-0.7076, 0.7076]. Bounds ±inf when ``width`` is 0 (nothing bounds an unseen
    task's difference). Raises ValueError for fewer than one task or a confidence outside (0, 1)."""
    if tasks < 1 or not 0.0 < confidence < 1.0:
        raise ValueError(f"need tasks >= 1 and a confidence in (0, 1), got {tasks} and {confidence}")
    if width <= 0.0:
        return Interval(estimate, -math.inf, math.inf, tasks)
    share = 1.0 - ((1.0 - confidence) / 2.0) ** (1.0 / tasks)
    return Interval(estimate, estimate - share * (estimate + width), estimate + share * (width - estimate), tasks)


@dataclass(frozen=True)
class Flips:
    """Result of :func:`flip_decomposition`: task ids by which side passes, in the order of the baseline's rewards.

    ``only_baseline`` are the tasks the candidate lost (regressions), ``only_candidate`` those it gained; ``p_value``
    is McNemar's exact test over them; ``binary`` says whether every paired reward was 0 or 1 (then a task passes
    when more than half its repeats passed; with one repeat, when its one rollout passed).
    """

    both: tuple[str, ...]
    only_baseline: tuple[str, ...]
    only_candidate: tuple[str, ...]
    neither: tuple[str, ...]
    p_value: float
    binary: bool

    @property
    def tasks(self) -> int:
        """Tasks with at least one pair."""
        return len(self.both) + len(self.only_baseline) + len(self.only_candidate) + len(self.neither)


def task_passes(rewards: Sequence[float]) -> bool:
    """Whether a task passes: its mean reward is above :data:`PASS_ABOVE` (0.5), Gym's ``gym eval compare`` rule.
    Raises ValueError for no rewards."""
    if not rewards:
        raise ValueError("a task needs at least one reward to pass or fail")
    return math.fsum(rewards) / len(rewards) > PASS_ABOVE


def flip_decomposition(baseline: Mapping[Key, float], candidate: Mapping[Key, float]) -> Flips:
    """Every task with a pair, by which side passes it (:func:`task_passes`, each side over the task's pairs only),
    with McNemar's exact test on the discordant tasks.

    **The unit of a pair is the task**, not the rollout: McNemar's test (McNemar 1947, "Note on the sampling error
    of the difference between correlated proportions or percentages", Psychometrika 12(2)) needs independent pairs,
    and the repeats of one task are not independent (they share its difficulty; counting each as a pair would
    overstate the evidence by up to the repeat count, the clustering :func:`paired_mean_difference` corrects for).
    With one repeat a task is one rollout pair, the textbook case. The test is then the exact binomial test of the
    discordant tasks: under no difference each is equally likely to be gained or lost, so with b lost and c gained
    p = min(1, 2 P(X <= min(b, c))), X ~ Binomial(b + c, 1/2) (:func:`~pytest_gym_eval.stats.exact_tests.mcnemar_exact`;
    1.0 without discordant tasks). A task passes at mean reward above 0.5 so that the decomposition is the one Gym's
    ``gym eval compare`` reports on the same rollouts; for fractional rewards it is a test of that pass/fail
    reading, not of the mean (which :func:`paired_mean_difference` judges). This differs from ``--gym-baseline``'s
    regressed tasks, which must pass every repeat before and fail every repeat now.
    """
    groups: dict[tuple[bool, bool], list[str]] = {
        (True, True): [],
        (True, False): [],
        (False, True): [],
        (False, False): [],
    }
    pairs = paired_rewards(baseline, candidate)
    for task, rewards in pairs.items():
        groups[(task_passes([b for b, _ in rewards]), task_passes([c for _, c in rewards]))].append(task)
    lost, gained = groups[(True, False)], groups[(False, True)]
    binary = all(x in (0.0, 1.0) for task in pairs.values() for pair in task for x in pair)
    return Flips(
        tuple(groups[(True, True)]), tuple(lost), tuple(gained), tuple(groups[(False, False)]),
        mcnemar_exact(len(lost), len(gained)), binary,
    )  # fmt: skip


class Hypothesis(str, Enum):
    """What a comparison gate claims about Δ = candidate's mean - baseline's mean."""

    NON_INFERIORITY = "non-inferiority"
    """Δ >= -margin: the candidate is not worse than the baseline by more than the margin δ."""
    SUPERIORITY = "superiority"
    """Δ > margin: the candidate is better than the baseline (by more than the margin, 0 by default)."""


@dataclass(frozen=True)
class ComparisonGate:
    """A claim about the candidate's difference from the baseline; ``margin`` (reward units) is δ >= 0; ``source``
    where it was set (command line or ini file; None: not known), no part of its equality.

    Raises ValueError for a negative or non-finite margin.
    """

    hypothesis: Hypothesis
    margin: float = 0.0
    source: GateSource | None = field(default=None, compare=False)

    @property
    def identity(self) -> tuple[Hashable, ...]:
        """What makes two comparison gates the same gate (:func:`~pytest_gym_eval.stats.gates.merge_gates`): the
        hypothesis; the margin is its setting."""
        return ("comparison", self.hypothesis.value)

    def __post_init__(self) -> None:
        if not (math.isfinite(self.margin) and self.margin >= 0.0):
            raise ValueError(f"a comparison margin must be a finite number >= 0, got {self.margin!r}")

    @property
    def threshold(self) -> float:
        """The difference the claim is judged against: -δ (non-inferiority) or +δ (superiority)."""
        return -self.margin if self.hypothesis is Hypothesis.NON_INFERIORITY else self.margin

    @property
    def label(self) -> str:
        """E.g. ``non-inferiority: candidate - baseline >= -0.05`` or ``superiority: candidate - baseline > 0.00``."""
        op = ">=" if self.hypothesis is Hypothesis.NON_INFERIORITY else ">"
        return f"{self.hypothesis.value}: candidate - baseline {op} {number_text.threshold(self.threshold)}"


def judge_comparison(interval: Interval, gate: ComparisonGate) -> Verdict:
    """The verdict of ``gate`` on the interval (or confidence sequence) of the difference, candidate - baseline.

    Non-inferiority, Δ >= -δ: PASS when the lower bound is >= -δ (the data rule out a drop beyond δ), FAIL when the
    upper bound is < -δ (they establish one), INCONCLUSIVE otherwise. This is :func:`~.gates.judge` in LOWER_BOUND
    mode with threshold -δ, the rule of every gate, so a lower bound exactly at -δ passes (the claim allows
    Δ = -δ; with a continuous interval the boundary has probability 0). Superiority, Δ > δ: PASS when the lower
    bound is > δ, FAIL when the upper bound is <= δ (the candidate is not better: an interval [-0.04, -0.02] FAILS
    superiority and PASSES non-inferiority at δ = 0.1), INCONCLUSIVE otherwise. With a two-sided interval
    at confidence 1 - alpha each wrong verdict has probability about alpha/2 (the t interval is approximate; the
    sequence of :class:`PairedSequence` bounds it by alpha/2). Always judged on the interval, not the point
    estimate (a point difference alone cannot tell a regression from noise). No data (nan estimate), infinite
    bounds (one task) or an empty sequence (low > high) is INCONCLUSIVE.
    """
    if math.isnan(interval.estimate) or interval.low > interval.high:
        return Verdict.INCONCLUSIVE
    if gate.hypothesis is Hypothesis.NON_INFERIORITY:
        return judge(interval, gate.threshold, GateMode.LOWER_BOUND)
    if interval.low > gate.threshold:
        return Verdict.PASS
    if interval.high <= gate.threshold:
        return Verdict.FAIL
    return Verdict.INCONCLUSIVE


@dataclass(frozen=True)
class ComparisonResult:
    """A comparison gate, the interval it was judged on and the verdict; ``sequential`` when the interval is the
    anytime-valid confidence sequence of ``--gym-adaptive`` (:class:`PairedSequence`)."""

    gate: ComparisonGate
    interval: Interval
    verdict: Verdict
    sequential: bool = False
    hint: Hint | None = None
    """For an INCONCLUSIVE verdict on the fixed-sample interval: how many more tasks would likely decide it."""
    basis: PairedBasis | None = field(default=None, compare=False, repr=False)
    """The rewards the fixed-sample interval came from (None: a sequence's, a report's), so that the gate can be
    judged again at another level (:func:`rejudged`)."""
    familywise: Familywise | None = None
    """How it was judged as one of the session's family of gates (``--gym-familywise=holm``; None: alone)."""

    def describe(self) -> str:
        """One line, e.g. ``non-inferiority: candidate - baseline -0.02 [-0.06, 0.03], lower bound -0.06 >= -0.10:
        PASS`` (``... n/a (no paired rollouts)`` without data); an INCONCLUSIVE one adds its :attr:`hint`."""
        iv = self.interval
        head = f"{self.gate.hypothesis.value}: candidate - baseline"
        if math.isnan(iv.estimate):
            return f"{head} n/a (no paired rollouts): {self.verdict.value}"
        interval = f"{number_text.interval(iv.estimate, iv.low, iv.high)}"
        text = f"{head} {interval}, {self.because}: {self.verdict.value}"
        if self.familywise is not None:
            text = f"{text} ({self.familywise.describe()})"
        return f"{text}; {self.hint.text}" if self.hint is not None else text

    @property
    def because(self) -> str:
        """The bound that decided, e.g. ``lower bound -0.06 >= -0.10`` (``interval straddles -0.10`` undecided)."""
        iv, threshold = self.interval, number_text.threshold(self.gate.threshold)
        non_inferiority = self.gate.hypothesis is Hypothesis.NON_INFERIORITY
        if self.verdict is Verdict.PASS:
            return f"lower bound {number_text.number(iv.low)} {'>=' if non_inferiority else '>'} {threshold}"
        if self.verdict is Verdict.FAIL:
            return f"upper bound {number_text.number(iv.high)} {'<' if non_inferiority else '<='} {threshold}"
        return f"interval straddles {threshold}"


def gym_verdict(result: ComparisonResult) -> str:
    """``result`` in the words of Gym's planned release gate (NVIDIA-NeMo/Gym epic #1493): PASS, WARN, FAIL or
    INCONCLUSIVE.

    Gym plans a numeric threshold on the drop (PASS, or FAIL when the drop exceeds the tolerance) beside
    informational statistical tests (PASS: no significant regression; WARN: the regression is statistically real but
    within the tolerance; INCONCLUSIVE: too little data). Ours are one interval judged against δ, so: FAIL -> FAIL
    (a drop beyond δ is established, not merely observed); INCONCLUSIVE -> INCONCLUSIVE; a non-inferiority PASS
    whose interval lies wholly below 0 (upper bound < 0: a real drop, but within δ) -> WARN; any other PASS -> PASS.
    A superiority result maps PASS/FAIL/INCONCLUSIVE unchanged (Gym plans no superiority gate).
    """
    if (
        result.verdict is Verdict.PASS
        and result.gate.hypothesis is Hypothesis.NON_INFERIORITY
        and result.interval.high < 0.0
    ):
        return "WARN"
    return result.verdict.value


@dataclass(frozen=True)
class Comparison:
    """One candidate against the baseline on one dataset: :func:`compare`'s result."""

    difference: PairedDifference
    flips: Flips
    results: tuple[ComparisonResult, ...]


def compare(
    baseline: Mapping[Key, float],
    candidate: Mapping[Key, float],
    gates: Sequence[ComparisonGate] = (),
    confidence: float = 0.95,
) -> Comparison:
    """The fixed-sample comparison: :func:`paired_mean_difference`, :func:`flip_decomposition` and every gate judged
    on the difference's interval (:func:`judge_comparison`). Raises ValueError as those do."""
    difference = paired_mean_difference(baseline, candidate, confidence)
    basis = PairedBasis(dict(baseline), dict(candidate))
    results = tuple(_judged(difference.interval, g, confidence, basis) for g in gates)
    return Comparison(difference, flip_decomposition(baseline, candidate), results)


def _judged(interval: Interval, gate: ComparisonGate, confidence: float, basis: PairedBasis) -> ComparisonResult:
    """``gate`` judged on ``interval``; INCONCLUSIVE, with the hint of its own interval (power.paired_hint)."""
    verdict = judge_comparison(interval, gate)
    if verdict is not Verdict.INCONCLUSIVE or math.isnan(interval.estimate):
        return ComparisonResult(gate, interval, verdict, basis=basis)
    decides = lambda iv: judge_comparison(iv, gate) is not Verdict.INCONCLUSIVE  # noqa: E731
    own = lambda b, c, level: PairedBasis(b, c).interval(level)  # noqa: E731  (the interval the gate judges)
    hint = paired_hint(basis.baseline, basis.candidate, gate.threshold, confidence, decides, own, HINT_POWER)
    return ComparisonResult(gate, interval, verdict, hint=hint, basis=basis)


@dataclass(frozen=True)
class PairedBasis:
    """The rewards of a fixed-sample comparison (as :func:`paired_mean_difference` takes them), so that its gates
    can be judged at another confidence (:func:`rejudged`, ``--gym-familywise=holm``)."""

    baseline: Mapping[Key, float]
    candidate: Mapping[Key, float]

    def interval(self, confidence: float) -> Interval:
        """The paired difference's interval at ``confidence`` (:func:`paired_mean_difference`)."""
        return paired_mean_difference(self.baseline, self.candidate, confidence).interval

    def p_value(self, gate: ComparisonGate) -> float:
        """The two-sided p-value of ``gate``'s claim: the smallest alpha at which the interval at confidence
        1 - alpha decides it (:func:`judge_comparison` PASS or FAIL), found by bisection to 1e-12 (the interval
        widens with the confidence). 1.0 when it decides at no level (no pairs, one task), so the gate is judged
        at a level where it does not decide either."""

        def decides(alpha: float) -> bool:
            return judge_comparison(self.interval(1.0 - alpha), gate) is not Verdict.INCONCLUSIVE

        low, high = 1e-12, 1.0 - 1e-12
        if decides(low):
            return low
        if not decides(high):
            return 1.0
        while high - low > 1e-12:
            middle = (low + high) / 2.0
            low, high = (low, middle) if decides(middle) else (middle, high)
        return high


def rejudged(result: ComparisonResult, family: Familywise) -> ComparisonResult:
    """``result`` judged as a member of the session's Holm family (:func:`~pytest_gym_eval.stats.familywise.
    holm_family`): the paired interval at confidence 1 - ``family.level``, its verdict and, INCONCLUSIVE, its hint
    at that level. ``result`` must have a :class:`PairedBasis` (a fixed-sample comparison)."""
    assert result.basis is not None
    judged = _judged(result.basis.interval(1.0 - family.level), result.gate, 1.0 - family.level, result.basis)
    return replace(judged, familywise=family)


# --- Anytime-valid: judged after every wave ------------------------------------------------------------------


def wave_differences(
    baseline: Mapping[Key, float], candidate: Mapping[Key, float], tasks: Sequence[str], start: int, end: int
) -> list[float] | None:
    """The differences candidate - baseline of repeats ``start`` to ``end - 1`` of every task in ``tasks`` (a balanced
    wave), task by task; None when a pair of the wave is missing on either side (an errored rollout, say)."""
    differences = []
    for task in tasks:
        for repeat in range(start, end):
            key = (task, repeat)
            if key not in baseline or key not in candidate:
                return None
            differences.append(candidate[key] - baseline[key])
    return differences


class PairedSequence:
    """An anytime-valid confidence sequence for Δ = candidate's mean - baseline's mean, fed one balanced wave at a
    time, and the comparison gates judged on it after each wave.

    **The construction.** Each pair (t, r) gives one observation d_tr = candidate_tr - baseline_tr. With rewards in
    [lo, hi] (``reward_range``, default [0, 1]) d lies in [-(hi - lo), hi - lo], and the hedged betting sequence of
    :class:`~pytest_gym_eval.stats.sequential.BettingSequence` (Waudby-Smith and Ramdas, JRSS-B 2024, Theorem 3) runs on
    d rescaled to [0, 1], x = (d + w) / 2w with w = hi - lo. Its argument carries over unchanged: the quantity is the
    dataset's mean over its T tasks, Δ = (1/T) Σ_t Δ_t with Δ_t = E[candidate_t] - E[baseline_t] = E[d_tr]; every
    wave holds every task the same number of times and bets one stake on all of them, so the capital at the true
    Δ is a nonnegative supermartingale over waves however the Δ_t differ, and Δ lies in every interval of the
    sequence at once with probability >= 1 - alpha (Ville's inequality). The two rewards of a pair need not be
    independent of each other (one task, one moment of an endpoint's drift): only E[d_tr] matters, and rolling the
    two models out interleaved keeps a drifting endpoint from moving it.

    **Error rates.** The hedge splits alpha evenly between the two sides, so with the truth at the margin Δ = -δ a
    non-inferiority gate wrongly PASSES (or FAILS) at most alpha/2 of the time and is decided either way at most alpha,
    however often it is looked at; for any Δ < -δ a PASS is rarer still, and for Δ > -δ a FAIL.

    The first wave fixes the dataset's tasks (every task either side has a reward for); later waves must hold the
    same tasks. Raises ValueError (:meth:`add_wave`) for an unbalanced wave, a reward outside
    ``reward_range`` or a bad ``alpha``.
    """

    def __init__(
        self, gates: Sequence[ComparisonGate], alpha: float = DEFAULT_ALPHA, reward_range: RewardRange = UNIT_RANGE
    ) -> None:
        self.gates = list(gates)
        self.range = reward_range
        width = reward_range.high - reward_range.low
        self.sequence = BettingSequence(alpha, RewardRange(-width, width))
        self.tasks: tuple[str, ...] = ()
        self.end = 0

    def add_wave(
        self, baseline: Mapping[Key, float], candidate: Mapping[Key, float], end: int
    ) -> list[ComparisonResult]:
        """Add the wave of repeats ``self.end`` to ``end - 1`` of every task (``baseline``/``candidate`` keyed by (task
        id, repeat), holding at least those: earlier repeats may be there too) and return the results so far.

        Raises ValueError when a pair of the wave is missing, the tasks differ from the first wave's, ``end`` is not
        past the last wave, or a reward of the wave lies outside the reward range.
        """
        if end <= self.end:
            raise ValueError(f"a wave must end after repeat {self.end}, got end {end}")
        tasks = tuple(dict.fromkeys([task for task, _ in baseline] + [task for task, _ in candidate]))
        if self.tasks and set(tasks) != set(self.tasks):
            raise ValueError("every wave must hold the tasks of the first wave")
        tasks = self.tasks or tasks
        differences = wave_differences(baseline, candidate, tasks, self.end, end)
        if differences is None:
            raise ValueError(f"every task needs both models' repeats {self.end} to {end - 1} for this wave")
        for task in tasks:
            for repeat in range(self.end, end):
                for reward in (baseline[(task, repeat)], candidate[(task, repeat)]):
                    if not (math.isfinite(reward) and self.range.contains(reward)):
                        raise ValueError(f"reward {reward!r} lies outside the declared range {self.range}")
        self.sequence.add_wave(differences)
        self.tasks, self.end = tasks, end
        return self.results()

    def interval(self) -> Interval:
        """The sequence so far as an :class:`Interval` (``n`` = tasks; nan and the whole range before any wave)."""
        bounds = self.sequence.bounds
        return Interval(bounds.estimate, bounds.low, bounds.high, len(self.tasks))

    def results(self) -> list[ComparisonResult]:
        """Every gate judged on the sequence so far (:func:`judge_comparison`)."""
        interval = self.interval()
        return [ComparisonResult(g, interval, judge_comparison(interval, g), sequential=True) for g in self.gates]


def decided(results: Sequence[ComparisonResult]) -> bool:
    """Whether the comparison is decided: there is a gate and every gate is PASS or FAIL. After a wave of
    :class:`PairedSequence` this is final (the sequence is valid at every look), so the remaining repeats of both
    models need not roll out."""
    return bool(results) and all(r.verdict is not Verdict.INCONCLUSIVE for r in results)


def reason(results: Sequence[ComparisonResult], repeats: int) -> str:
    """Why the remaining repeats are not needed, e.g. ``not needed: non-inferiority comparison decided PASS after 4
    repeats, lower bound -0.06 >= -0.10`` (several gates joined by ``;``)."""
    parts = [
        f"{r.gate.hypothesis.value} comparison decided {r.verdict.value} after {repeats} repeats, {r.because}"
        for r in results
    ]
    return "not needed: " + "; ".join(parts)


def simulate(
    baseline_means: Sequence[float],
    candidate_means: Sequence[float],
    gates: Sequence[ComparisonGate],
    min_repeats: int,
    max_repeats: int,
    rng: random.Random,
    alpha: float = DEFAULT_ALPHA,
) -> tuple[list[ComparisonResult], int]:
    """One simulated adaptive comparison (for the tests and benchmarks/): repeat r of task t gives each model a
    Bernoulli reward (1.0 with probability ``baseline_means[t]`` / ``candidate_means[t]``, drawn independently),
    rolled out in the waves of :func:`~.sequential.wave_ends` until :func:`decided`. Returns the last results and
    the pairs spent (each pair is one rollout of each model)."""
    tasks = [f"t{t}" for t in range(len(baseline_means))]
    baseline: dict[Key, float] = {}
    candidate: dict[Key, float] = {}
    for task, p, q in zip(tasks, baseline_means, candidate_means, strict=True):
        for repeat in range(max_repeats):
            baseline[(task, repeat)] = 1.0 if rng.random() < p else 0.0
            candidate[(task, repeat)] = 1.0 if rng.random() < q else 0.0
    sequence = PairedSequence(gates, alpha)
    results: list[ComparisonResult] = []
    for end in wave_ends(min_repeats, max_repeats):
        results = sequence.add_wave(baseline, candidate, end)
        if decided(results):
            break
    return results, sequence.end * len(tasks)


def comparison_gates(
    max_regression: float | None,
    min_improvement: float | None,
    sources: Mapping[Hypothesis, GateSource] | None = None,
) -> list[ComparisonGate]:
    """The comparison gates a session sets: ``--gym-max-regression``'s non-inferiority at its margin, then
    ``--gym-min-improvement``'s superiority at its margin (each left out when None), each with its source from
    ``sources`` (None where it has none). Raises ValueError for a negative margin (:class:`ComparisonGate`)."""
    given = ((Hypothesis.NON_INFERIORITY, max_regression), (Hypothesis.SUPERIORITY, min_improvement))
    return [
        ComparisonGate(hypothesis, margin, (sources or {}).get(hypothesis))
        for hypothesis, margin in given
        if margin is not None
    ]


def margin_problem(gate: ComparisonGate, reward_range: RewardRange) -> str | None:
    """Why ``gate``'s margin makes no sense for rewards in ``reward_range`` (None when it does): a difference of two
    mean rewards lies in [-w, w], w = the range's width, so at a margin δ >= w non-inferiority (Δ >= -δ) holds for
    every candidate and superiority (Δ > δ) for none, whatever they score: the gate would judge nothing. E.g.
    ``a margin of 1.5 is not below the width 1 of the reward range [0, 1]: every candidate would pass
    non-inferiority whatever it scores``."""
    width = reward_range.high - reward_range.low
    if gate.margin < width:
        return None
    what = (
        "every candidate would pass non-inferiority"
        if gate.hypothesis is Hypothesis.NON_INFERIORITY
        else "no candidate could pass superiority"
    )
    return (
        f"a margin of {gate.margin:g} is not below the width {width:g} of the reward range {reward_range}: {what} "
        "whatever it scores"
    )


def judge_paired_waves(
    baseline: Mapping[Key, float],
    candidate: Mapping[Key, float],
    gates: Sequence[ComparisonGate],
    ends: Sequence[int],
    reward_range: RewardRange = UNIT_RANGE,
    alpha: float = DEFAULT_ALPHA,
) -> list[ComparisonResult] | None:
    """``gates`` judged on the :class:`PairedSequence` of the waves that ended at cumulative repeats ``ends`` (what
    ``--gym-adaptive`` rolled out), every result marked ``sequential``: the verdicts the run stopped on, judged again
    at the end of the session from the rollouts reported. ``baseline``/``candidate`` keyed by (task id, repeat) as in
    :meth:`PairedSequence.add_wave`; only repeats below ``ends[-1]`` are read.

    None, so that the caller judges on the fixed-sample interval (:func:`compare`), when there is no gate or no
    wave, a pair of some wave is missing (an errored rollout), or a reward lies outside ``reward_range``.
    """
    if not gates or not ends:
        return None
    last = ends[-1]
    base = {key: value for key, value in baseline.items() if key[1] < last}
    cand = {key: value for key, value in candidate.items() if key[1] < last}
    sequence = PairedSequence(gates, alpha, reward_range)
    try:
        for end in ends:
            results = sequence.add_wave(base, cand, end)
    except ValueError:
        return None
    return results
