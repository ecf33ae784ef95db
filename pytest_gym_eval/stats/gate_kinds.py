"""The gate kinds, defined once (:data:`KINDS`): for each its name, command-line option and ini names, per-dataset
settings key, the statistic it judges, its fixed-sample and sequential judgement, the JSON report's name and the
words of its verdicts. The option table, the options' resolution, the ``gym_dataset_settings`` parser, the JSON
schema's enum, ``merge``'s options and the reports read the kinds from here; adding a kind is one :class:`GateKind`
in :data:`KINDS` plus its statistic.

Imported on every pytest run (the option table declares the gate options from it), so it imports only the standard
library at import time; the statistics are imported when a gate is judged.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:  # what the kinds read of a gate and of its data (only types: no cost at import)
    from typing import Protocol

    from pytest_gym_eval.stats.intervals import Interval

    class Gate(Protocol):
        """What a kind reads of a gate (:class:`pytest_gym_eval.stats.gates.Gate`): its ``k`` and custom metric."""

        @property
        def k(self) -> int | None: ...

        @property
        def custom(self) -> str | None: ...

    class Basis(Protocol):
        """What a kind's statistic is computed from (:class:`pytest_gym_eval.stats.gates.Basis`): the scored rollouts'
        rewards by task, ``(scored, passes)`` per task, pass@k's k, the rollouts with a result and the errored ones."""

        @property
        def metric(self) -> str: ...

        @property
        def rewards_by_task(self) -> Sequence[Sequence[float]]: ...

        @property
        def counts(self) -> Sequence[tuple[int, int]]: ...

        @property
        def k(self) -> int | None: ...

        @property
        def rollouts(self) -> int: ...

        @property
        def errors(self) -> int: ...


NUMBER = "number"
"""A kind set by one number (``--gym-min-pass-rate=0.8``): one gate of the kind at most."""
PASS_AT = "k"
"""A kind set by ``K:V`` pairs (``--gym-min-pass-at-k=4:0.5``, repeatable): one gate per k."""
NAMED = "name"
"""A kind set by ``NAME:BOUND`` pairs (``--gym-min-metric=boxed:0.9``, repeatable): one gate per custom metric."""


class Words(NamedTuple):
    """The words of a gate's verdicts: ``ok`` / ``not_ok`` compare the estimate with the threshold (``>=`` / ``<``
    for a minimum), ``pass_bound`` is the end of the interval that must clear the threshold for a PASS in bound mode
    (``lower bound`` for a minimum), ``fail_bound`` the end whose miss is a FAIL."""

    ok: str
    not_ok: str
    pass_bound: str
    fail_bound: str


AT_LEAST = Words(">=", "<", "lower bound", "upper bound")
"""A minimum: the statistic must reach the threshold (higher is better)."""
AT_MOST = Words("<=", ">", "upper bound", "lower bound")
"""A maximum: the statistic must not exceed the threshold (lower is better)."""


class GateKind(NamedTuple):
    """One kind of CI gate.

    ``metric``: the kind's name, :attr:`Gate.metric <pytest_gym_eval.stats.gates.Gate.metric>` and the JSON report's
    ``metric`` (the schema's enum); ``setting``: its ``gym_dataset_settings`` key, from which the option
    (``--gym-<setting with dashes>``) and its ini twin (``gym_<setting>``) are named; ``form``: how a value is
    written (:data:`NUMBER`, :data:`PASS_AT`, :data:`NAMED`); ``title``: the statistic's human name, a format
    string of ``k`` and ``custom`` (``pass@{k}``); ``help`` and ``metavar``: the option's help and value name;
    ``probability``: the threshold is a share in [0, 1]; ``words``: :data:`AT_LEAST` or :data:`AT_MOST`.

    ``statistic(basis, confidence)``: the interval the gate judges (and the summary shows), from the dataset's
    :class:`~pytest_gym_eval.stats.gates.Basis`; None for a custom metric's kind (judged on what tests recorded).
    ``proportion(basis)``: ``(events, trials)`` when the statistic is a share of rollouts (hints in rollouts; the
    Wilson interval and the score test's p-value, or with ``exact`` the Clopper-Pearson interval and the exact
    binomial test's), None for a mean over tasks (hints in tasks). ``clustered(basis)``: the values by task in [0, 1]
    when the statistic is their mean with the task-clustered Clopper-Pearson interval
    (:func:`~pytest_gym_eval.stats.intervals.clustered_proportion_interval`, and its p-value), None when it is not
    (Student t); ``trials(basis)``: that interval's cap on the effective sample (pass@k's disjoint blocks of k
    rollouts), None for none.
    ``wave_values(gate, rewards, passed, start, end)``: the observations (in [0, 1], or in reward units when
    ``reward_units``) one balanced wave of ``--gym-adaptive`` gives the kind's confidence sequence
    (:mod:`pytest_gym_eval.stats.sequential`), None for a kind judged on the fixed-sample interval only.
    ``uses_passes``: the statistic reads the rollouts' pass flags (a pass hook then stops early stopping);
    ``judges_errors``: the gate judges the rollouts that errored, which then do not fail the session by themselves
    (the other gates are judged on the scored rollouts); ``repeats_hint``: an INCONCLUSIVE verdict's hint also says
    how many repeats a task would decide it.
    """

    metric: str
    setting: str
    form: str
    title: str
    help: str
    metavar: str
    probability: bool
    words: Words
    statistic: Callable[[Basis, float], Interval] | None
    proportion: Callable[[Basis], tuple[int, int]] | None = None
    wave_values: Callable[[Gate, Sequence[Sequence[float]], Sequence[Sequence[bool]], int, int], list[float]] | None = (
        None
    )
    reward_units: bool = False
    uses_passes: bool = False
    judges_errors: bool = False
    repeats_hint: bool = False
    clustered: Callable[[Basis], list[list[float]] | None] | None = None
    exact: bool = False
    trials: Callable[[Basis], float | None] | None = None

    @property
    def flag(self) -> str:
        """The command-line option, e.g. ``--gym-min-pass-rate``."""
        return "--gym-" + self.setting.replace("_", "-")

    @property
    def dest(self) -> str:
        """The option's attribute on ``config.option``, e.g. ``gym_min_pass_rate``."""
        return "gym_" + self.setting

    @property
    def ini(self) -> str:
        """The ini option, e.g. ``gym_min_pass_rate`` (as :attr:`dest`)."""
        return self.dest

    @property
    def repeatable(self) -> bool:
        """Whether the option may be given several times (one gate per k or per custom metric)."""
        return self.form != NUMBER

    def name_of(self, gate: Gate) -> str:
        """The human name of ``gate``'s statistic, e.g. ``mean reward``, ``pass@4``, ``metric boxed``."""
        return self.title.format(k=gate.k, custom=gate.custom)


# --- The statistics ---------------------------------------------------------------------------------------


def _rewards_in_unit_range(basis: Basis) -> list[list[float]] | None:
    """The rewards by task when every one lies in [0, 1] (a verifier's usual range), else None."""
    rewards = [list(task) for task in basis.rewards_by_task]
    return rewards if all(0.0 <= x <= 1.0 for task in rewards for x in task) else None


def _mean_reward(basis: Basis, confidence: float) -> Interval:
    """Rewards in [0, 1]: the task-clustered Clopper-Pearson interval (Korn & Graubard 1998), which keeps its level
    near 0 and 1; other rewards: Student t over tasks, standard error clustered by task."""
    from pytest_gym_eval.stats.intervals import clustered_proportion_interval, mean_interval

    rewards = _rewards_in_unit_range(basis)
    if rewards is None:
        return mean_interval(basis.rewards_by_task, confidence, clip=True)
    return clustered_proportion_interval(rewards, confidence)


def _pass_rate(basis: Basis, confidence: float) -> Interval:
    """The share of scored rollouts that passed, with the Clopper-Pearson interval over the rollouts."""
    from pytest_gym_eval.stats.intervals import clopper_pearson_interval

    passes, trials = _passes(basis)
    return clopper_pearson_interval(passes, trials, confidence)


def _proportion_interval(basis: Basis, confidence: float) -> Interval:
    """The Wilson interval of the kind's share of rollouts (:attr:`GateKind.proportion`)."""
    from pytest_gym_eval.stats.intervals import wilson_interval

    events, trials = kind(basis.metric).proportion(basis)  # type: ignore[misc]
    return wilson_interval(events, trials, confidence)


def _passes(basis: Basis) -> tuple[int, int]:
    return sum(c for _, c in basis.counts), sum(n for n, _ in basis.counts)


def _errors(basis: Basis) -> tuple[int, int]:
    """The rollouts that errored (infrastructure errors: no reward) of those with a result, errored ones too."""
    return basis.errors, basis.rollouts


def _pass_at_k(basis: Basis, confidence: float) -> Interval:
    """Chen et al.'s unbiased pass@k averaged over tasks, with the task-clustered Clopper-Pearson interval on the
    per-task estimates, its effective sample capped at the disjoint blocks of k rollouts."""
    from pytest_gym_eval.stats.pass_at_k_bounds import clustered_pass_at_k_interval

    assert basis.k is not None
    return clustered_pass_at_k_interval(basis.counts, basis.k, confidence)


def _pass_at_k_by_task(basis: Basis) -> list[list[float]]:
    """One pass@k estimate per task with at least k rollouts (:attr:`GateKind.clustered`)."""
    from pytest_gym_eval.stats.pass_at_k_bounds import pass_at_k_by_task

    assert basis.k is not None
    return pass_at_k_by_task(basis.counts, basis.k)


def _pass_at_k_blocks(basis: Basis) -> float | None:
    """The disjoint blocks of k rollouts, the most trials the estimates are worth (:attr:`GateKind.trials`); None
    when no task has k rollouts."""
    from pytest_gym_eval.stats.pass_at_k_bounds import pass_at_k_blocks

    assert basis.k is not None
    return pass_at_k_blocks(basis.counts, basis.k) or None


def _reward_values(
    gate: Gate, rewards: Sequence[Sequence[float]], passed: Sequence[Sequence[bool]], start: int, end: int
) -> list[float]:
    return [reward for task in rewards for reward in task[start:end]]


def _pass_values(
    gate: Gate, rewards: Sequence[Sequence[float]], passed: Sequence[Sequence[bool]], start: int, end: int
) -> list[float]:
    return [1.0 if ok else 0.0 for task in passed for ok in task[start:end]]


def _pass_at_k_values(
    gate: Gate, rewards: Sequence[Sequence[float]], passed: Sequence[Sequence[bool]], start: int, end: int
) -> list[float]:
    """One value per block of k repeats that ends inside the wave (1.0 when any rollout of the block passed)."""
    k = gate.k
    assert k is not None
    blocks = [b for b in range(end // k) if (b + 1) * k > start]
    return [1.0 if any(task[b * k : (b + 1) * k]) else 0.0 for task in passed for b in blocks]


def _error_values(
    gate: Gate, rewards: Sequence[Sequence[float]], passed: Sequence[Sequence[bool]], start: int, end: int
) -> list[float]:
    """A balanced wave holds a reward for every rollout, so none of them errored: 0.0 each (a wave with errors
    is not balanced, and the gate is then judged on its fixed-sample interval)."""
    return [0.0 for task in rewards for _ in task[start:end]]


# --- The registry -----------------------------------------------------------------------------------------

KINDS: tuple[GateKind, ...] = (
    GateKind(
        metric="mean_reward",
        setting="min_mean_reward",
        form=NUMBER,
        title="mean reward",
        help="CI gate: each dataset's mean reward must reach this",
        metavar="REWARD",
        probability=False,
        words=AT_LEAST,
        statistic=_mean_reward,
        wave_values=_reward_values,
        reward_units=True,
        repeats_hint=True,
        clustered=_rewards_in_unit_range,
    ),
    GateKind(
        metric="pass_rate",
        setting="min_pass_rate",
        form=NUMBER,
        title="pass rate",
        help="CI gate: each dataset's pass rate over rollouts must reach this",
        metavar="RATE",
        probability=True,
        words=AT_LEAST,
        statistic=_pass_rate,
        proportion=_passes,
        wave_values=_pass_values,
        uses_passes=True,
        exact=True,
    ),
    GateKind(
        metric="pass_at_k",
        setting="min_pass_at_k",
        form=PASS_AT,
        title="pass@{k}",
        help="CI gate: each dataset's pass@K must reach V, e.g. 4:0.5 (repeatable, in the ini file one per line)",
        metavar="K:V",
        probability=True,
        words=AT_LEAST,
        statistic=_pass_at_k,
        wave_values=_pass_at_k_values,
        uses_passes=True,
        clustered=_pass_at_k_by_task,
        trials=_pass_at_k_blocks,
    ),
    GateKind(
        metric="custom",
        setting="min_metric",
        form=NAMED,
        title="metric {custom}",
        help="CI gate: each dataset's mean of a custom metric (rollout.record_metric) must reach BOUND, e.g. "
        "boxed:0.9 (repeatable, in the ini file one per line; a metric no rollout recorded is INCONCLUSIVE)",
        metavar="NAME:BOUND",
        probability=False,
        words=AT_LEAST,
        statistic=None,
    ),
    GateKind(
        metric="error_rate",
        setting="max_error_rate",
        form=NUMBER,
        title="error rate",
        help="CI gate: each dataset's share of rollouts that errored (infrastructure errors, not failed rewards) "
        "must be at most this; its errored rollouts then fail the session only through this gate",
        metavar="RATE",
        probability=True,
        words=AT_MOST,
        statistic=_proportion_interval,
        proportion=_errors,
        wave_values=_error_values,
        judges_errors=True,
    ),
)
"""Every gate kind, in the order the reports list a dataset's gates."""

_BY_METRIC = {k.metric: k for k in KINDS}
_BY_SETTING = {k.setting: k for k in KINDS}
METRICS = tuple(_BY_METRIC)
"""Every kind's :attr:`GateKind.metric`: what the JSON report's ``metric`` of a gate may be."""
SETTINGS = tuple(_BY_SETTING)
"""Every kind's :attr:`GateKind.setting`: the gate keys of a ``gym_dataset_settings`` line."""


def kind(metric: str) -> GateKind:
    """The kind named ``metric``; raises ValueError naming the known ones for another."""
    found = _BY_METRIC.get(metric)
    if found is None:
        raise ValueError(f"unknown gate metric {metric!r}; expected one of {', '.join(METRICS)}")
    return found


def kind_of_setting(setting: str) -> GateKind | None:
    """The kind a ``gym_dataset_settings`` key (``min_pass_rate``) sets, None for a key that sets no gate."""
    return _BY_SETTING.get(setting)
