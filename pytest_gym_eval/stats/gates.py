"""CI gates: reward thresholds a dataset must meet, judged on a point estimate or a confidence bound."""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Protocol, TypeVar

from pytest_gym_eval.core import number_text
from pytest_gym_eval.stats import gate_kinds, power
from pytest_gym_eval.stats.intervals import (
    Interval,
    binomial_test_p,
    clustered_mean_interval,
    clustered_proportion_p,
    clustered_standard_error,
    pass_at_k,
    score_test_p,
    t_test_p,
)
from pytest_gym_eval.stats.power import Hint

METRICS = gate_kinds.METRICS
"""What a gate may judge: the kinds of :mod:`pytest_gym_eval.stats.gate_kinds` (a custom metric tests record is
``custom``, named by the gate's ``custom``: :mod:`pytest_gym_eval.outcomes.custom_metrics`)."""
_PASS_AT_K_RE = re.compile(r"\s*([0-9]+)\s*:\s*(\S+)\s*")


class Verdict(str, Enum):
    """Outcome of a gate; INCONCLUSIVE means the data cannot tell whether the threshold is met."""

    PASS = "PASS"
    FAIL = "FAIL"
    INCONCLUSIVE = "INCONCLUSIVE"


class GateMode(str, Enum):
    """POINT compares the estimate; LOWER_BOUND compares the confidence interval."""

    POINT = "point"
    LOWER_BOUND = "lower-bound"


class GateSource(str, Enum):
    """Where a gate was set: the command line (``--gym-min-*``, also ``merge``'s), the ini file (``gym_min_*``),
    the dataset's own ``gym_dataset_settings`` line, or a test function's ``gym_rollouts`` mark
    (``min_metric={"terse": 0.9}``, the gate's ``declared_by`` names the test). The reports' plan names it for
    every gate."""

    COMMAND_LINE = "command line"
    INI = "ini"
    DATASET = "dataset settings"
    MARK = "test mark"


SESSION_WIDE = frozenset({GateSource.COMMAND_LINE, GateSource.INI})
"""The sources whose gates apply to every dataset of the session (not to one dataset by name)."""


@dataclass(frozen=True)
class Gate:
    """``metric`` (a :mod:`~pytest_gym_eval.stats.gate_kinds` kind) must reach ``threshold`` (or, for a kind that
    sets a maximum, not exceed it); ``k`` is given exactly when the kind is set by ``K:V`` pairs (pass@k),
    ``custom`` (a custom metric's name) exactly when by ``NAME:BOUND`` pairs (its mean must reach ``threshold``).
    ``source`` says
    where it was set (None: not known, e.g. a report written before the plan recorded it); it is no part of the
    gate's equality; nor is ``declared_by``, the test function whose ``gym_rollouts`` mark declared it (its node
    id without the parametrization, e.g. ``tests/test_x.py::test_terse``; None for a gate of any other source).

    Raises ValueError for an unknown metric, a missing or unexpected ``k`` or ``custom``, ``k`` < 1, a non-finite
    threshold, or a threshold outside [0, 1] for a kind whose statistic is a probability.
    """

    metric: str
    threshold: float
    k: int | None = None
    custom: str | None = None
    source: GateSource | None = field(default=None, compare=False)
    declared_by: str | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        kind = gate_kinds.kind(self.metric)
        if (kind.form == gate_kinds.PASS_AT) != (self.k is not None):
            raise ValueError(f"k must be given for the {self.metric} metric and only for it")
        if (kind.form == gate_kinds.NAMED) != (self.custom is not None):
            raise ValueError(f"custom (the metric's name) must be given for the {self.metric} metric and only for it")
        if self.k is not None and self.k < 1:
            raise ValueError(f"k must be an integer >= 1, got {self.k}")
        if not math.isfinite(self.threshold):
            raise ValueError(f"gate threshold must be a finite number, got {self.threshold!r}")
        if kind.probability and not 0.0 <= self.threshold <= 1.0:
            raise ValueError(f"{self.metric} threshold must lie in [0, 1], got {self.threshold!r}")

    @property
    def kind(self) -> gate_kinds.GateKind:
        """The gate's kind (:func:`~pytest_gym_eval.stats.gate_kinds.kind`)."""
        return gate_kinds.kind(self.metric)

    @property
    def identity(self) -> tuple[Hashable, ...]:
        """What makes two gates the same gate (:func:`merge_gates`): the metric, with k for pass@k and the name
        for a custom metric; the threshold and the source are the gate's settings, not its identity."""
        if self.k is not None:
            return (self.metric, self.k)
        if self.custom is not None:
            return (self.metric, self.custom)
        return (self.metric,)

    @property
    def name(self) -> str:
        """Human name of the statistic: ``mean reward``, ``pass rate``, ``pass@4`` or ``metric boxed``."""
        return self.kind.name_of(self)

    @property
    def label(self) -> str:
        """E.g. ``mean reward >= 0.70`` or ``pass@4 >= 0.50``."""
        return f"{self.name} {self.kind.words.ok} {number_text.threshold(self.threshold)}"


class Identified(Protocol):
    """A gate of any kind: :class:`Gate`, or a policy comparison's
    :class:`~pytest_gym_eval.stats.comparison.ComparisonGate` (identity: its hypothesis)."""

    @property
    def identity(self) -> tuple[Hashable, ...]: ...


G = TypeVar("G", bound=Identified)


def merge_gates(*layers: Iterable[G]) -> list[G]:
    """The gates of several settings layers, merged by identity (:attr:`Gate.identity`: the metric, k of pass@k, a
    custom metric's name; a comparison's hypothesis), never replaced by a whole layer.

    ``layers`` come in precedence order, first wins (the command line, then a dataset's own settings, then the
    ``gym_rollouts`` marks of the tests over the dataset, then the ini file): a gate's setting is taken from the
    first layer that has a gate of its identity, and a gate no earlier layer has stays, so adding
    ``--gym-min-metric=n_calls:3`` never drops a dataset's ``min_metric=terse:0.9``.
    Within one layer a later gate of the same identity wins (``--gym-min-pass-at-k=4:0.5 --gym-min-pass-at-k=4:0.6``
    is one pass@4 >= 0.6 gate). Returns the gates in first-seen order over the layers.
    """
    merged: dict[Hashable, G] = {}
    for layer in layers:
        mine: dict[Hashable, G] = {}
        for gate in layer:
            mine.pop(gate.identity, None)  # a later one of the layer wins (and takes its place in the order)
            mine[gate.identity] = gate
        for identity, gate in mine.items():
            merged.setdefault(identity, gate)
    return list(merged.values())


def parse_pass_at_k(text: str) -> Gate:
    """Parse the command-line form ``K:V`` (e.g. ``4:0.5``) into a pass@K >= V gate.

    K is an integer >= 1 and V a number in [0, 1]; raises ValueError with the expected form otherwise.
    """
    match = _PASS_AT_K_RE.fullmatch(text)
    if match is None:
        raise ValueError(f"invalid pass@k gate {text!r}: expected K:V, e.g. 4:0.5 (K integer >= 1, V in [0, 1])")
    k = int(match.group(1))
    if k < 1:
        raise ValueError(f"invalid pass@k gate {text!r}: K must be an integer >= 1, got {k}")
    try:
        threshold = float(match.group(2))
    except ValueError:
        raise ValueError(f"invalid pass@k gate {text!r}: V must be a number, got {match.group(2)!r}") from None
    if not 0.0 <= threshold <= 1.0:  # also rejects nan
        raise ValueError(f"invalid pass@k gate {text!r}: V must lie in [0, 1], got {match.group(2)!r}")
    return Gate("pass_at_k", threshold, k=k)


def judge(interval: Interval, threshold: float, mode: GateMode, at_most: bool = False) -> Verdict:
    """Verdict of ``interval`` against ``threshold`` (higher is better; lower when ``at_most``, a maximum).

    POINT: estimate >= threshold → PASS, else FAIL. LOWER_BOUND: low >= threshold → PASS, high <
    threshold → FAIL, otherwise (the interval straddles the threshold, e.g. infinite bounds) →
    INCONCLUSIVE. ``at_most`` mirrors it: estimate <= threshold; in bound mode high <= threshold → PASS,
    low > threshold → FAIL (the pessimistic end is the upper bound). A nan estimate (no data) is INCONCLUSIVE in
    both modes. ValueError for a nan threshold.
    """
    if math.isnan(threshold):
        raise ValueError("threshold must not be NaN")
    if math.isnan(interval.estimate):
        return Verdict.INCONCLUSIVE
    if at_most:  # the mirror image: -statistic >= -threshold
        mirrored = Interval(-interval.estimate, -interval.high, -interval.low, interval.n)
        return judge(mirrored, -threshold, mode)
    if mode is GateMode.POINT:
        return Verdict.PASS if interval.estimate >= threshold else Verdict.FAIL
    if interval.low >= threshold:
        return Verdict.PASS
    if interval.high < threshold:
        return Verdict.FAIL
    return Verdict.INCONCLUSIVE


def judge_gate(gate: Gate, interval: Interval, mode: GateMode) -> Verdict:
    """:func:`judge` in ``gate``'s direction (its kind's :attr:`~pytest_gym_eval.stats.gate_kinds.GateKind.words`)."""
    return judge(interval, gate.threshold, mode, at_most=gate.kind.words is gate_kinds.AT_MOST)


@dataclass(frozen=True)
class GateResult:
    """A gate, the interval of its statistic, the verdict and the mode it was judged in.

    ``note`` says why a verdict is weaker than the interval alone would give (e.g. the gate was judged on fewer
    rollouts than the session selected: see :func:`incomplete`), "" otherwise.
    """

    gate: Gate
    interval: Interval
    verdict: Verdict
    mode: GateMode
    note: str = ""
    basis: Basis | None = field(default=None, compare=False, repr=False)
    """The data the interval came from (None: a custom metric's, a confidence sequence's, a report's)."""
    familywise: Familywise | None = None
    """How :func:`holm` judged it as one of a family (None: on its own, at the session's confidence)."""
    hint: Hint | None = None
    """For an INCONCLUSIVE verdict on a fixed-sample interval: how much more data would likely decide it."""

    def passed(self, inconclusive_passes: bool) -> bool:
        """True for PASS, and for INCONCLUSIVE when ``inconclusive_passes``, unless the gate was judged on fewer
        rollouts than were selected (``note``, see :func:`incomplete`: a cut-short evaluation never passes) or on
        no data at all."""
        if self.verdict is Verdict.PASS:
            return True
        judged = not self.note and not math.isnan(self.interval.estimate)  # "n/a (no data)" is not a straddle
        return inconclusive_passes and self.verdict is Verdict.INCONCLUSIVE and judged

    def describe(self, suffix: str = "") -> str:
        """One line, e.g. ``mean reward 0.80 [0.54, 1.00] >= 0.70: PASS`` (point mode) or
        ``mean reward 0.80 [0.74, 0.90]: lower bound 0.74 >= 0.70: PASS`` (lower-bound mode); a family-wise
        verdict adds its level (``(Holm over 5 gates: 99.5% interval, p 0.0031)``), then ``suffix`` (e.g. where
        the gate was set), then an INCONCLUSIVE one's :attr:`hint` (``; about 12 more tasks would ...``)."""
        text = self._describe()
        if self.note:
            text = f"{text} ({self.note})"
        if self.familywise is not None:
            text = f"{text} ({self.familywise.describe()})"
        text += suffix
        return f"{text}; {self.hint.text}" if self.hint is not None else text

    def _describe(self) -> str:
        iv, threshold = self.interval, number_text.threshold(self.gate.threshold)
        words = self.gate.kind.words
        if math.isnan(iv.estimate):
            return f"{self.gate.name} n/a (no data), needs {words.ok} {threshold}: {self.verdict.value}"
        head = f"{self.gate.name} {number_text.interval(iv.estimate, iv.low, iv.high)}"
        if self.note:  # the verdict is not the interval's alone
            point = judge_gate(self.gate, iv, GateMode.POINT) is Verdict.PASS
            return f"{head} {words.ok if point else words.not_ok} {threshold}: {self.verdict.value}"
        if self.mode is GateMode.POINT:
            op = words.ok if self.verdict is Verdict.PASS else words.not_ok
            return f"{head} {op} {threshold}: {self.verdict.value}"
        if self.verdict is Verdict.PASS:
            bound = number_text.number(bound_of(iv, words.pass_bound))
            return f"{head}: {words.pass_bound} {bound} {words.ok} {threshold}: PASS"
        if self.verdict is Verdict.FAIL:
            bound = number_text.number(bound_of(iv, words.fail_bound))
            return f"{head}: {words.fail_bound} {bound} {words.not_ok} {threshold}: FAIL"
        return f"{head}: interval straddles {threshold}: INCONCLUSIVE"


def bound_of(interval: Interval, which: str) -> float:
    """``interval``'s ``lower bound`` (low) or ``upper bound`` (high), as
    :class:`~pytest_gym_eval.stats.gate_kinds.Words` name them."""
    return interval.low if which == "lower bound" else interval.high


def metric_interval(
    metric: str,
    rewards_by_task: Sequence[Sequence[float]],
    counts: Sequence[tuple[int, int]],
    confidence: float = 0.95,
    k: int | None = None,
    *,
    rollouts: int | None = None,
    errors: int = 0,
) -> Interval:
    """The interval of one dataset's ``metric``: what the reward summary shows and what a gate on it judges,
    computed in this one place (the kind's :attr:`~pytest_gym_eval.stats.gate_kinds.GateKind.statistic`) so that
    the two always agree.

    ``rewards_by_task[t][r]``: reward of scored rollout r of task t; ``counts[t] = (scored rollouts, passes)`` of
    task t; ``rollouts`` every rollout with a result (errored ones too; default: the scored ones plus ``errors``),
    ``errors`` those that errored. mean_reward → :func:`clustered_proportion_interval` (task-clustered
    Clopper-Pearson) when every reward lies in [0, 1], else Student t clustered by task;
    pass_rate → :func:`clopper_pearson_interval` over all scored rollouts; error_rate → :func:`wilson_interval` over
    the rollouts with a result; pass_at_k (with ``k``) → :func:`clustered_pass_at_k_interval` on the
    per-task counts (Clopper-Pearson, effective sample capped at the blocks of k); a t interval of the mean reward
    is clipped to [0, 1] when every reward lies there. Raises ValueError for a kind with no statistic of the
    rewards (a custom metric's), or as the statistics do.
    """
    basis = Basis(metric, tuple(map(tuple, rewards_by_task)), tuple(counts), k, rollouts, errors)
    return basis.interval(confidence)


def evaluate(
    gates: Sequence[Gate],
    rewards_by_task: Sequence[Sequence[float]],
    passed_by_task: Sequence[Sequence[bool]],
    mode: GateMode,
    confidence: float = 0.95,
    custom: Mapping[str, Interval] | None = None,
    *,
    rollouts: int | None = None,
    errors: int = 0,
) -> list[GateResult]:
    """Judge every gate, in order, on the rollouts of one dataset.

    ``rewards_by_task[t][r]`` / ``passed_by_task[t][r]``: reward and pass flag of scored rollout r of task t
    (same shape); ``rollouts`` / ``errors``: the dataset's rollouts with a result and those that errored (as
    :func:`metric_interval` takes them). Each gate judges its metric's :func:`metric_interval` in its kind's
    direction (:func:`judge_gate`); a custom metric's gate judges ``custom[name]`` (that metric's interval,
    :func:`custom_interval`), or no data (INCONCLUSIVE, with a note) when no rollout recorded it. Raises
    ValueError when the two shapes differ (or as the statistics do).
    """
    if len(rewards_by_task) != len(passed_by_task) or any(
        len(r) != len(p) for r, p in zip(rewards_by_task, passed_by_task, strict=False)
    ):
        raise ValueError("rewards_by_task and passed_by_task must have the same tasks and rollouts")
    counts = [(len(task), sum(1 for ok in task if ok)) for task in passed_by_task]
    results: list[GateResult] = []
    for gate in gates:
        if gate.custom is not None:
            results.append(custom_gate(gate, (custom or {}).get(gate.custom), mode, confidence))
            continue
        rewards = tuple(tuple(task) for task in rewards_by_task)
        basis = Basis(gate.metric, rewards, tuple(counts), gate.k, rollouts, errors)
        interval = basis.interval(confidence)
        verdict = judge_gate(gate, interval, mode)
        straddles = verdict is Verdict.INCONCLUSIVE and not math.isnan(interval.estimate)
        hint = basis.hint(gate.threshold, confidence) if straddles else None
        results.append(GateResult(gate, interval, verdict, mode, basis=basis, hint=hint))
    return results


HINT_POWER = 0.8
"""The chance at which an INCONCLUSIVE gate's hint says more data would "likely" decide it (the planner's)."""


@dataclass(frozen=True)
class Familywise:
    """A gate judged as one of ``family`` gates by Holm's step-down procedure (:func:`holm`): its p-value against
    its threshold, and the level (alpha) its interval was computed at, 1 - ``level`` its confidence."""

    method: str
    family: int
    p_value: float
    level: float

    def describe(self) -> str:
        """E.g. ``Holm over 5 gates: 99.5% interval, p 0.0031``."""
        confidence = f"{100 * (1 - self.level):.4g}%"
        return f"{self.method} over {self.family} gates: {confidence} interval, p {self.p_value:.2g}"


@dataclass(frozen=True)
class Basis:
    """What a gate's interval was computed from (as :func:`evaluate` takes it), so that the gate can be judged again
    at another level (:func:`holm`) and say how much more data would decide it (:meth:`hint`). ``rollouts``: the
    rollouts with a result, errored ones too (None: the scored ones plus ``errors``); ``errors``: those that
    errored."""

    metric: str
    rewards_by_task: tuple[tuple[float, ...], ...]
    counts: tuple[tuple[int, int], ...]
    k: int | None = None
    rollouts_given: int | None = None
    errors: int = 0

    @property
    def rollouts(self) -> int:
        """The rollouts with a result: scored and errored."""
        given = self.rollouts_given
        return given if given is not None else sum(n for n, _ in self.counts) + self.errors

    def interval(self, confidence: float) -> Interval:
        """The interval of the kind's statistic at ``confidence``; ValueError for a kind with none."""
        statistic = gate_kinds.kind(self.metric).statistic
        if statistic is None:
            raise ValueError(f"the {self.metric} gate has no statistic of the rewards")
        return statistic(self, confidence)

    def _values(self) -> list[list[float]]:
        """The per-task values a t interval is taken over (the rewards; one pass@k per task with >= k rollouts)."""
        if self.k is not None:
            assert self.k is not None
            return [[pass_at_k(n, c, self.k)] for n, c in self.counts if n >= self.k]
        return [list(task) for task in self.rewards_by_task]

    def p_value(self, threshold: float) -> float:
        """Two-sided p-value of the statistic against ``threshold``: twice the one-sided p in the direction of the
        estimate (:func:`~pytest_gym_eval.stats.intervals.clustered_proportion_p` for a mean reward in [0, 1] and
        pass@k, with pass@k's cap, :func:`~pytest_gym_eval.stats.intervals.t_test_p` for other rewards, the exact
        binomial test :func:`~pytest_gym_eval.stats.intervals.binomial_test_p` for the pass rate, the score test
        :func:`~pytest_gym_eval.stats.intervals.score_test_p` for the error rate), so the interval at confidence c
        excludes the threshold exactly when p <= 1 - c."""
        kind = gate_kinds.kind(self.metric)
        proportion = kind.proportion
        clustered = kind.clustered(self) if kind.clustered is not None else None
        if clustered is not None:
            one_sided = clustered_proportion_p(clustered, threshold, trials=kind.trials(self) if kind.trials else None)
        elif proportion is not None:
            one_sided = (binomial_test_p if kind.exact else score_test_p)(*proportion(self), threshold)
        else:
            mean, error, tasks = clustered_standard_error(self._values())
            one_sided = 1.0 if math.isnan(error) else t_test_p(mean, threshold, error, tasks - 1)
        return min(1.0, 2.0 * one_sided)

    def hint(self, threshold: float, confidence: float) -> Hint:
        """How much more data would likely (power :data:`HINT_POWER`) make the interval at ``confidence`` decide
        the gate on ``threshold``: :func:`~pytest_gym_eval.stats.power.basis_hint`, the gate's own interval on the
        data projected to more tasks (rollouts for a share of rollouts; for the mean reward also more repeats)."""
        at_most = gate_kinds.kind(self.metric).words is gate_kinds.AT_MOST

        def decides(interval: Interval) -> bool:
            return judge(interval, threshold, GateMode.LOWER_BOUND, at_most) is not Verdict.INCONCLUSIVE

        return power.basis_hint(self, threshold, confidence, decides, HINT_POWER)


def interval_hint(interval: Interval, threshold: float, confidence: float) -> Hint:
    """:func:`~pytest_gym_eval.stats.power.interval_hint` at :data:`HINT_POWER`: the hint of a gate whose data is not
    at hand (a custom metric's Student t interval)."""
    return power.interval_hint(interval, threshold, confidence, HINT_POWER)


HOLM = "holm"
"""The one family-wise method (``--gym-familywise=holm``)."""


NOT_RECORDED = "no rollout recorded this metric"
"""The note of a custom metric's gate on a dataset none of whose rollouts recorded the metric."""


NOT_APPLICABLE = "not applicable: no rollout of this dataset recorded the metric"
"""Why a session-wide custom metric's gate is not judged on a dataset (:func:`applies_to`)."""


def applies_to(gate: Gate, recorded: Collection[str], recorded_anywhere: Collection[str]) -> bool:
    """Whether ``gate`` is judged on a dataset whose rollouts recorded the custom metrics ``recorded``, in a
    session whose rollouts recorded ``recorded_anywhere``.

    A gate on the rewards, or a dataset's own gate (``gym_dataset_settings``, or of unknown source), always
    applies: a dataset named for a metric gate that never records the metric is INCONCLUSIVE
    (:data:`NOT_RECORDED`). A custom metric's gate set for the whole session (command line or ini file) applies
    to the datasets some of whose rollouts recorded the metric (``--gym-min-metric=n_calls:3`` means "every
    dataset that measures n_calls"), not to one whose tests never record it; but when no rollout of the session
    recorded it (a misspelt name, tests that stopped recording it) it applies everywhere, so that it is
    INCONCLUSIVE rather than silently passing.
    """
    if gate.custom is None or gate.source not in SESSION_WIDE:
        return True
    return gate.custom in recorded or gate.custom not in recorded_anywhere


def custom_interval(values_by_task: Sequence[Sequence[float]], confidence: float = 0.95) -> Interval:
    """A custom metric's mean over the rollouts that recorded it, with the mean reward's interval
    (:func:`clustered_mean_interval`: task-clustered Clopper-Pearson when every value lies in [0, 1], else Student t
    clustered by task). ``values_by_task[t][r]``: the value of the r-th rollout of task t that recorded it."""
    return clustered_mean_interval(values_by_task, confidence)


def custom_gate(gate: Gate, interval: Interval | None, mode: GateMode, confidence: float = 0.95) -> GateResult:
    """The verdict of a custom metric's ``gate`` on the metric's ``interval`` (:func:`custom_interval`), by the
    rules of every gate (:func:`judge`); None (no rollout recorded the metric) is INCONCLUSIVE with the note
    :data:`NOT_RECORDED`, which never passes."""
    if interval is None:
        return GateResult(gate, Interval(math.nan, -math.inf, math.inf, 0), Verdict.INCONCLUSIVE, mode, NOT_RECORDED)
    verdict = judge_gate(gate, interval, mode)
    straddles = verdict is Verdict.INCONCLUSIVE and not math.isnan(interval.estimate)
    hint = interval_hint(interval, gate.threshold, confidence) if straddles else None
    return GateResult(gate, interval, verdict, mode, hint=hint)


def incomplete(results: Sequence[GateResult], reported: int, selected: int) -> list[GateResult]:
    """``results`` judged on ``reported`` of ``selected`` rollouts: when some selected rollouts have no reward
    (they errored, or never reported: ``pytest -x``, ``--maxfail``, a crash), a PASS becomes INCONCLUSIVE, since
    the missing rewards could change it; FAIL and INCONCLUSIVE stay. Every result then carries a note saying so
    (and never passes, see :meth:`GateResult.passed`). Unchanged when ``reported >= selected``."""
    if reported >= selected:
        return list(results)
    note = f"judged on {reported} of {selected} selected rollouts"
    return [
        GateResult(
            r.gate,
            r.interval,
            Verdict.INCONCLUSIVE if r.verdict is Verdict.PASS else r.verdict,
            r.mode,
            f"{r.note}; {note}" if r.note else note,
        )
        for r in results
    ]
