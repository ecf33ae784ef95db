"""Anytime-valid gates: a betting confidence sequence judged after every wave of rollouts.

A fixed-sample interval checked after every wave and acted on as soon as it clears the threshold passes far
more often than its nominal 5% when the truth sits at the threshold (each look is another chance). A
*confidence sequence* covers the mean at every look at once, P(mu in C_w for every wave w) >= 1 - alpha, so a
run may stop at the first wave whose sequence clears the threshold. :class:`BettingSequence` (its docstring has
the construction, the bets, the source and why waves are balanced over tasks), :func:`wave_ends`,
:func:`gate_values`, :class:`GateSequences`, :func:`judge_waves`. What users see: docs/adaptive-gates.md.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from pytest_gym_eval.stats import gate_kinds
from pytest_gym_eval.stats.gates import Gate, GateMode, GateResult, Verdict, bound_of
from pytest_gym_eval.stats.intervals import Interval

DEFAULT_ALPHA = 0.05
"""Miscoverage of the confidence sequence: 0.05 gives the 95% the summary's intervals use."""
TRUNCATION = 0.5
"""c of Theorem 3: a bet never stakes more than c / m (or c / (1 - m)), so every factor stays >= 1 - c."""
HEDGE = 0.5
"""theta of Theorem 3: the weight of the process betting that the mean lies above m."""
_BISECTIONS = 36


@dataclass(frozen=True)
class RewardRange:
    """The known range [low, high] of a dataset's rewards (reward units); the confidence sequence needs it.

    Raises ValueError unless both ends are finite and low < high.
    """

    low: float = 0.0
    high: float = 1.0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.low) and math.isfinite(self.high) and self.low < self.high):
            raise ValueError(f"a reward range needs finite LO < HI, got [{self.low}, {self.high}]")

    def contains(self, reward: float) -> bool:
        """Whether ``reward`` lies in [low, high]."""
        return self.low <= reward <= self.high

    def scale(self, value: float) -> float:
        """``value`` mapped to [0, 1] (low -> 0, high -> 1)."""
        return (value - self.low) / (self.high - self.low)

    def unscale(self, value: float) -> float:
        """The inverse of :meth:`scale`."""
        return self.low + value * (self.high - self.low)

    def __str__(self) -> str:
        return f"[{self.low:g}, {self.high:g}]"


def parse_reward_range(text: str) -> RewardRange:
    """``"LO:HI"`` (e.g. ``0:3``) as a :class:`RewardRange`; raises ValueError with the expected form."""
    low, sep, high = text.partition(":")
    try:
        if not sep:
            raise ValueError
        return RewardRange(float(low), float(high))
    except ValueError:
        raise ValueError(f"invalid reward range {text!r}: expected LO:HI with LO < HI, e.g. 0:3") from None


@dataclass(frozen=True)
class Bounds:
    """The confidence sequence after some waves, in the observations' own units.

    ``estimate`` is the mean of every observation (nan before any), ``low``/``high`` the running intersection
    of the sequence's intervals, ``observations`` how many values went in over ``waves`` waves.
    """

    estimate: float
    low: float
    high: float
    observations: int
    waves: int


class BettingSequence:
    """The hedged betting confidence sequence, fed one balanced wave at a time.

    **The construction.** The hedged capital process of Waudby-Smith and Ramdas, "Estimating means of bounded
    random variables by betting", JRSS-B 86(1), 2024 (arXiv:2010.09686), Section 4, Theorem 3 (the hedged capital
    confidence sequence). For rewards rescaled to [0, 1] (``x = (reward - lo) / (hi - lo)``) and a candidate mean m:

        K+(m) = prod_i (1 + lam+_i(m) (x_i - m)),   lam+_i(m) = min(bet_i, c / m)
        K-(m) = prod_i (1 - lam-_i(m) (x_i - m)),   lam-_i(m) = min(bet_i, c / (1 - m))
        K(m)  = max(theta K+(m), (1 - theta) K-(m)),   C = {m : K(m) < 1 / alpha}

    with c = 1/2 (the paper's truncation) and theta = 1/2 (equal hedge weights). K+ is nonincreasing and K- is
    nondecreasing in m, so C is the interval [L, U] found by bisection on each side, and the sequence reported is
    the running intersection over waves (still a confidence sequence). A gate PASSES when L >= threshold and FAILS
    when U < threshold; a gate still straddling its threshold at the last wave is INCONCLUSIVE.

    **The bets.** Theorem 3 allows any predictable bets ``bet_i >= 0``. Here one bet serves a whole wave (why: see
    below): the paper's predictable plug-in bet (Section 3, the PrPl-EB bet), in its fixed-horizon form, tuned to
    the number of observations n_w at the end of the wave and the variance of the waves before it:

        bet_w = sqrt(2 log(2 / alpha) / (s2_{w-1} n_w)),   s2 = (1/4 + sum_i (x_i - xbar)^2) / (n + 1)

    (s2 = 1/4 before any data: the paper's prior). The anytime form divides by n log(1 + n) instead; with a handful
    of looks (waves) the fixed-horizon bet at each look is the more powerful one (benchmarks/README.md, "adaptive"),
    and validity does not depend on the bet.

    **Tasks.** Rollouts are clustered by task: a task's repeats share its difficulty, so they are not draws from
    one distribution. The quantity a gate judges is the dataset's mean over its tasks, mu = (1/T) sum_t mu_t, where
    mu_t is task t's expected reward (pass rate, pass@k); the T tasks are fixed, a rollout of task t is an
    independent draw with mean mu_t. Every wave is *balanced*: it rolls out every task of the dataset the same
    number r_w of times, and it bets one ``lam`` (fixed before the wave) on all of them. Then, given the earlier
    waves,

        E[prod_{t, r} (1 + lam (X_tr - m))] = prod_t (1 + lam (mu_t - m))^{r_w} <= exp(lam r_w T (mu - m)) <= 1

    whenever mu <= m (1 + y <= e^y), and likewise for K- when mu >= m, however the mu_t differ: K+(mu) and K-(mu)
    are nonnegative supermartingales over waves, Ville's inequality bounds the chance that K(mu) ever reaches
    1/alpha by alpha, and mu lies in every C_w with probability >= 1 - alpha. (Betting a different ``lam`` on
    different rollouts of one wave would break this: the bound needs the sum of mu_t - m over the wave.) So waves
    do not concentrate on the tasks that still move the decision: a wave that rolled out some tasks more than
    others would estimate a weighted mean, not mu.

    - mean reward: x is the rescaled reward; the range [lo, hi] must hold every reward (default [0, 1]).
    - pass rate: x is the pass flag (0 or 1); its mean over tasks is the expected pass rate.
    - pass@k: the repeats of a task are cut into consecutive blocks of k; x = 1 when any rollout of the block
      passed. A block's mean is 1 - (1 - p_t)^k = pass@k of task t, so the mean over tasks is the dataset's pass@k
      (the same quantity as Chen et al.'s unbiased estimator, estimated with fewer, disjoint blocks).

    ``alpha`` in (0, 1) is the miscoverage (0.05: a 95% sequence); values must lie in ``reward_range``.
    Raises ValueError for a bad alpha, and (:meth:`add_wave`) for a value outside the range or not finite.
    """

    def __init__(self, alpha: float = DEFAULT_ALPHA, reward_range: RewardRange = RewardRange()) -> None:
        if not 0.0 < alpha < 1.0:
            raise ValueError(f"alpha must lie in (0, 1), got {alpha!r}")
        self.alpha = alpha
        self.range = reward_range
        self._waves: list[tuple[float, Counter[float]]] = []  # (bet, scaled value -> count) per wave
        self._sum = 0.0
        self._sum_squares = 0.0
        self._count = 0
        self._low = 0.0
        self._high = 1.0

    def bet(self, size: int) -> float:
        """The bet a next wave of ``size`` observations gets: the fixed-horizon plug-in of the class docstring."""
        n = self._count + size
        if n == 0:
            return 0.0
        return math.sqrt(2.0 * math.log(2.0 / self.alpha) / (self._variance() * n))

    def _variance(self) -> float:
        n = self._count
        mean = self._sum / n if n else 0.0
        centred = max(0.0, self._sum_squares - n * mean * mean)
        return (0.25 + centred) / (n + 1)

    def add_wave(self, values: Sequence[float]) -> Bounds:
        """Add one wave's observations (reward units) and return the updated :class:`Bounds`."""
        scaled = []
        for value in values:
            if not (math.isfinite(value) and self.range.contains(value)):
                raise ValueError(f"value {value!r} lies outside the declared range {self.range}")
            scaled.append(min(1.0, max(0.0, self.range.scale(value))))
        if scaled:
            self._waves.append((self.bet(len(scaled)), Counter(scaled)))
            self._sum += math.fsum(scaled)
            self._sum_squares += math.fsum(x * x for x in scaled)
            self._count += len(scaled)
            self._low = max(self._low, self._lower())
            self._high = min(self._high, self._upper())
        return self.bounds

    @property
    def bounds(self) -> Bounds:
        """The sequence after the waves so far (bounds [low, high] of the range before any)."""
        estimate = self.range.unscale(self._sum / self._count) if self._count else math.nan
        return Bounds(
            estimate, self.range.unscale(self._low), self.range.unscale(self._high), self._count, len(self._waves)
        )

    def log_capital(self, m: float) -> tuple[float, float]:
        """``(log K+(m), log K-(m))`` for a candidate mean ``m`` in [0, 1] (scaled units); -inf when a factor is 0."""
        plus = minus = 0.0
        for bet, counts in self._waves:
            up = bet if m <= 0.0 else min(bet, TRUNCATION / m)
            down = bet if m >= 1.0 else min(bet, TRUNCATION / (1.0 - m))
            for x, count in counts.items():
                plus += count * _log1p(up * (x - m))
                minus += count * _log1p(-down * (x - m))
        return plus, minus

    def _lower(self) -> float:
        """inf {m : theta K+(m) < 1/alpha}: K+ is nonincreasing in m, so bisect."""
        limit = math.log(1.0 / (HEDGE * self.alpha))
        if self.log_capital(0.0)[0] < limit:
            return 0.0
        low, high = 0.0, 1.0  # K+ reaches the limit at low, not at high (K+(1) <= 1)
        for _ in range(_BISECTIONS):
            mid = 0.5 * (low + high)
            if self.log_capital(mid)[0] >= limit:
                low = mid
            else:
                high = mid
        return high

    def _upper(self) -> float:
        """sup {m : (1 - theta) K-(m) < 1/alpha}: K- is nondecreasing in m, so bisect."""
        limit = math.log(1.0 / ((1.0 - HEDGE) * self.alpha))
        if self.log_capital(1.0)[1] < limit:
            return 1.0
        low, high = 0.0, 1.0  # K- reaches the limit at high, not at low (K-(0) <= 1)
        for _ in range(_BISECTIONS):
            mid = 0.5 * (low + high)
            if self.log_capital(mid)[1] >= limit:
                high = mid
            else:
                low = mid
        return low


def _log1p(y: float) -> float:
    return math.log1p(y) if y > -1.0 else -math.inf


def wave_ends(min_repeats: int, max_repeats: int) -> list[int]:
    """Cumulative repeats per task at the end of each wave: ``min_repeats``, then doubling, up to
    ``max_repeats`` (e.g. 2, 4, 8 for 2 and 8; 1, 2, 4, 5 for 1 and 5). Raises ValueError unless
    1 <= min_repeats <= max_repeats."""
    if not 1 <= min_repeats <= max_repeats:
        raise ValueError(f"need 1 <= min repeats <= max repeats, got {min_repeats} and {max_repeats}")
    ends = [min_repeats]
    while ends[-1] < max_repeats:
        ends.append(min(max_repeats, 2 * ends[-1]))
    return ends


def gate_values(
    gate: Gate, rewards: Sequence[Sequence[float]], passed: Sequence[Sequence[bool]], start: int, end: int
) -> list[float] | None:
    """The observations one balanced wave (repeats ``start`` to ``end - 1`` of every task) gives ``gate``.

    ``rewards[t][r]`` / ``passed[t][r]``: reward and pass flag of repeat r of task t (at least ``end`` each).
    The kind's :attr:`~pytest_gym_eval.stats.gate_kinds.GateKind.wave_values` give them: mean_reward -> the
    rewards; pass_rate -> the flags as 0.0/1.0; pass@k -> one value per block of k repeats that ends inside the
    wave (1.0 when any rollout of the block passed), none when no block ends there. Returns None when some task has
    fewer than ``end`` repeats (the wave is not balanced). Raises ValueError for a kind judged on its fixed-sample
    interval only.
    """
    if any(len(task) < end for task in rewards) or any(len(task) < end for task in passed):
        return None
    values = gate.kind.wave_values
    if values is None:
        raise ValueError(f"the {gate.name} gate has no confidence sequence")
    return values(gate, rewards, passed, start, end)


class GateSequences:
    """One :class:`BettingSequence` per gate of a dataset, fed wave by wave (what :func:`judge_waves` does at
    once, for a caller that learns the waves one at a time).

    ``reward_range`` bounds the rewards of mean-reward gates (pass rates and pass@k lie in [0, 1]).
    """

    def __init__(
        self, gates: Sequence[Gate], reward_range: RewardRange = RewardRange(), alpha: float = DEFAULT_ALPHA
    ) -> None:
        self.gates = list(gates)
        self.sequences = [
            BettingSequence(alpha, reward_range if gate.kind.reward_units else RewardRange()) for gate in gates
        ]
        self.end = 0
        self.tasks = 0

    def add_wave(
        self, rewards: Sequence[Sequence[float]], passed: Sequence[Sequence[bool]], end: int
    ) -> list[GateResult]:
        """Add the wave of repeats ``self.end`` to ``end - 1`` of every task (``rewards``/``passed`` as in
        :func:`gate_values`, holding at least ``end`` repeats a task) and return the results so far.

        Raises ValueError when a task has fewer than ``end`` repeats or a reward lies outside the range.
        """
        for gate, sequence in zip(self.gates, self.sequences, strict=True):
            values = gate_values(gate, rewards, passed, self.end, end)
            if values is None:
                raise ValueError(f"every task needs {end} repeats for this wave")
            sequence.add_wave(values)
        self.end, self.tasks = end, len(rewards)
        return self.results()

    def results(self) -> list[GateResult]:
        """Every gate judged on its sequence so far: interval [low, high] (``n`` = tasks), mode LOWER_BOUND."""
        results = []
        for gate, sequence in zip(self.gates, self.sequences, strict=True):
            bounds = sequence.bounds
            interval = Interval(bounds.estimate, bounds.low, bounds.high, self.tasks)
            at_most = gate.kind.words is gate_kinds.AT_MOST
            results.append(GateResult(gate, interval, verdict(bounds, gate.threshold, at_most), GateMode.LOWER_BOUND))
        return results


def judge_waves(
    gates: Sequence[Gate],
    rewards: Sequence[Sequence[float]],
    passed: Sequence[Sequence[bool]],
    ends: Sequence[int],
    *,
    reward_range: RewardRange = RewardRange(),
    alpha: float = DEFAULT_ALPHA,
) -> list[GateResult]:
    """Judge every gate with its confidence sequence after the waves that ended at cumulative repeats ``ends``.

    ``rewards[t][r]`` / ``passed[t][r]``: reward and pass flag of repeat r of task t, for repeats 0 ..
    ends[-1] - 1 of every task. Each result's interval is the sequence's [low, high] (``n`` = tasks), its mode
    LOWER_BOUND: PASS when low >= threshold, FAIL when high < threshold, else INCONCLUSIVE (also when the
    sequence came out empty, an event of probability <= alpha). Raises ValueError when a task has fewer
    repeats than ``ends[-1]``, or a reward lies outside ``reward_range``.
    """
    sequences = GateSequences(gates, reward_range, alpha)
    for end in ends:
        sequences.add_wave(rewards, passed, end)
    return sequences.results()


def verdict(bounds: Bounds, threshold: float, at_most: bool = False) -> Verdict:
    """PASS when ``bounds.low >= threshold``, FAIL when ``bounds.high < threshold``, INCONCLUSIVE otherwise (no
    data, the interval straddles the threshold, or it came out empty). ``at_most`` (a maximum): PASS when
    ``bounds.high <= threshold``, FAIL when ``bounds.low > threshold``."""
    if bounds.observations == 0 or bounds.low > bounds.high:
        return Verdict.INCONCLUSIVE
    if at_most:  # the mirror image
        mirrored = Bounds(-bounds.estimate, -bounds.high, -bounds.low, bounds.observations, bounds.waves)
        return verdict(mirrored, -threshold)
    if bounds.low >= threshold:
        return Verdict.PASS
    if bounds.high < threshold:
        return Verdict.FAIL
    return Verdict.INCONCLUSIVE


def decided(results: Sequence[GateResult]) -> bool:
    """Whether every gate is PASS or FAIL (no more waves can change the verdicts)."""
    return bool(results) and all(r.verdict is not Verdict.INCONCLUSIVE for r in results)


def reason(results: Sequence[GateResult], repeats: int) -> str:
    """Why the remaining repeats are not needed, e.g. ``not needed: mean-reward gate decided PASS after 3
    repeats, lower bound 0.74 >= 0.70`` (several gates joined by ``;``). Numbers get two decimals, more when two
    would hide the difference (``upper bound 0.9954 < 0.999``)."""
    parts = []
    for result in results:
        name = result.gate.name.replace(" ", "-")
        threshold, words = result.gate.threshold, result.gate.kind.words
        if result.verdict is Verdict.PASS:
            bound, text = _two_numbers(bound_of(result.interval, words.pass_bound), threshold)
            because = f"{words.pass_bound} {bound} {words.ok} {text}"
        else:
            bound, text = _two_numbers(bound_of(result.interval, words.fail_bound), threshold)
            because = f"{words.fail_bound} {bound} {words.not_ok} {text}"
        parts.append(f"{name} gate decided {result.verdict.value} after {repeats} repeats, {because}")
    return "not needed: " + "; ".join(parts)


def _two_numbers(bound: float, threshold: float) -> tuple[str, str]:
    """``bound`` and ``threshold`` with the fewest decimals (two or more) that keep them apart when they differ."""
    for decimals in range(2, 10):
        a, b = f"{bound:.{decimals}f}", f"{threshold:.{decimals}f}"
        if a != b or bound == threshold:
            return a, f"{threshold:.{max(decimals, 2)}f}".rstrip("0").rstrip(".") if decimals > 2 else b
    return repr(bound), repr(threshold)


def simulate(
    task_means: Sequence[float],
    gates: Sequence[Gate],
    min_repeats: int,
    max_repeats: int,
    rng: random.Random,
    threshold: float = 1.0,
) -> tuple[list[GateResult], int]:
    """One simulated adaptive evaluation (for the tests and benchmarks/): task t's rollouts are Bernoulli
    rewards (1.0 with probability ``task_means[t]``, passing when >= ``threshold``), rolled out in the waves of
    :func:`wave_ends` until every gate is decided. Returns the last results and the rollouts spent."""
    rewards = [[1.0 if rng.random() < p else 0.0 for _ in range(max_repeats)] for p in task_means]
    passed = [[reward >= threshold for reward in task] for task in rewards]
    sequences = GateSequences(gates)
    results: list[GateResult] = []
    for end in wave_ends(min_repeats, max_repeats):
        results = sequences.add_wave(rewards, passed, end)
        if decided(results):
            break
    return results, sequences.end * len(task_means)


@dataclass(frozen=True)
class AdaptiveRecord:
    """How ``--gym-adaptive`` ran one dataset (or one agent of it), as its summary reports it.

    ``waves``: the waves it took part in; ``ends``: cumulative repeats per task at the end of each of them when
    its gates are judged with the confidence sequence (``sequential``; empty otherwise, when it ran without early
    stopping, ``note`` saying why: no gates, an uneven selection, a pass hook, a reward outside ``reward_range``;
    its gates are then judged as without ``--gym-adaptive``); ``reason``: why it stopped before the ceiling ("" when
    it reached it); ``rollouts``/``ceiling``: rollouts the waves asked for, and those of every selected pair;
    ``max_repeats``: the repeats per task of every selected pair (0 when tasks were selected different repeats).
    """

    waves: int
    ends: tuple[int, ...]
    sequential: bool
    reward_range: RewardRange
    reason: str
    rollouts: int
    ceiling: int
    note: str = ""
    max_repeats: int = 0

    @property
    def skipped(self) -> int:
        """Selected rollouts never asked for."""
        return max(0, self.ceiling - self.rollouts)

    @property
    def saving(self) -> float:
        """The share of the ceiling's rollouts saved (0.0 to 1.0)."""
        return self.skipped / self.ceiling if self.ceiling else 0.0

    def describe(self) -> str:
        """E.g. ``1 wave, 10 of 40 rollouts (75% saved): not needed: mean-reward gate decided PASS ...``."""
        text = f"{self.waves} wave{'s' if self.waves != 1 else ''}, {self.rollouts} of {self.ceiling} rollouts"
        text += f" ({self.saving:.0%} saved)"
        if self.reason:
            text += f": {self.reason}"
        elif not self.sequential:
            text += f": judged without the confidence sequence ({self.note or 'no gates'})"
        return text


def judge_record(
    gates: Sequence[Gate], rewards: Sequence[Sequence[float]], passed: Sequence[Sequence[bool]], record: AdaptiveRecord
) -> list[GateResult] | None:
    """The gates of a dataset ``record`` ran sequentially, judged on its waves (:func:`judge_waves`); None when the
    rewards do not fill those waves (errors, or rollouts that never reported) or leave the declared range, so
    the caller judges as without ``--gym-adaptive``."""
    if not (record.sequential and record.ends and gates):
        return None
    try:
        return judge_waves(gates, rewards, passed, record.ends, reward_range=record.reward_range)
    except ValueError:
        return None
