"""The summary model every reporting output reads: per-rollout results (:class:`RolloutResult`), per-dataset
statistics (:class:`DatasetSummary`, :func:`summarize`) and the session's verdict under CI gates. What the end of a
session reports with them (comparisons, flips, the exit status): :mod:`pytest_gym_eval.reporting.conclusion`.

Everything here is a pure function of the per-rollout results the plugin collects from its items' reports.
Rewards are whatever the verifier returns (usually in [0, 1], not always); times are seconds. The statistics
come from :mod:`pytest_gym_eval.stats.intervals`, where the formulas are written out with their sources:

- mean reward: Clopper-Pearson on the task-clustered effective sample (rewards in [0, 1]), else Student t clustered
  by task (:func:`~pytest_gym_eval.stats.gates.metric_interval`; Miller 2024, arXiv:2411.00640, §2);
- pass rate: :func:`~pytest_gym_eval.stats.intervals.clopper_pearson_interval` over the rollouts;
- pass@k: Chen et al. 2021's unbiased estimator averaged over tasks, the mean reward's interval capped at the
  disjoint blocks of k (:func:`~pytest_gym_eval.stats.pass_at_k_bounds.clustered_pass_at_k_interval`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from pytest_gym_eval.outcomes.usage import (
    NO_USAGE,
    LatencySummary,
    Price,
    TokenTotals,
    Usage,
    latency_summary,
    token_totals,
)
from pytest_gym_eval.reporting import fmt
from pytest_gym_eval.stats.gates import (
    Gate,
    GateMode,
    GateResult,
    Verdict,
    applies_to,
    custom_interval,
    evaluate,
    incomplete,
    metric_interval,
)
from pytest_gym_eval.stats.intervals import Interval
from pytest_gym_eval.stats.judge_noise import JudgeNoise, judge_noise
from pytest_gym_eval.stats.sequential import AdaptiveRecord, judge_record

if TYPE_CHECKING:
    from pytest_gym_eval.tasks.selection import Selection

DEFAULT_THRESHOLD = 1.0
"""Pass threshold of a dataset :func:`summarize` is given none for."""

MAX_LISTED = 10
"""Task ids listed (flaky tasks, dropped tasks) before "… and N more"."""

NO_DATASET_ROLLOUT = (
    "no dataset rollout was selected: the reward summary, gates and reports count dataset rollouts only, not the "
    "rollouts tests make on demand (gym_run_row)"
)
"""What the summaries say of a session with Gym but no dataset rollout (its tests rolled rows out on demand)."""

SCORED_STATUSES = ("passed", "failed")


# --- Input ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RolloutResult:
    """One reported rollout item.

    ``status`` is "passed", "failed" or "error"; ``reward`` is the verifier's reward (None for an error);
    ``failure_class`` names an error's cause (:data:`pytest_gym_eval.outcomes.causes.CLASSES`); ``record`` is
    ``path:LINE`` of the full rollout record; ``start``/``stop`` are epoch seconds of the item's run (0.0 when
    unknown); ``usage`` the policy model's tokens and the rollout's latency as Gym recorded them
    (:mod:`pytest_gym_eval.outcomes.usage`); ``metrics`` the custom metrics test functions recorded for it, as
    ``(name, value)`` pairs sorted by name (:mod:`pytest_gym_eval.outcomes.custom_metrics`), and ``metric_reasons`` the
    reasons given with them, ``(name, text)`` pairs sorted by name (only the metrics given one). A rollout is
    *scored* when it passed or failed with a finite reward; only scored rollouts enter the statistics.
    """

    nodeid: str
    dataset: str
    task_id: str
    repeat: int
    agent: str
    status: str
    reward: float | None
    failure_class: str | None = None
    record: str | None = None
    start: float = 0.0
    stop: float = 0.0
    usage: Usage = NO_USAGE
    metrics: tuple[tuple[str, float], ...] = ()
    metric_reasons: tuple[tuple[str, str], ...] = ()
    answer: str | None = None
    """The digest of the policy's answer (:func:`~pytest_gym_eval.outcomes.answers.answer_digest`): two rollouts of
    one task with the same digest were the same answer judged twice; None when unknown."""

    @property
    def score(self) -> float | None:
        """The reward when the rollout is scored (passed or failed, finite reward), else None."""
        if self.status not in SCORED_STATUSES or self.reward is None or not math.isfinite(self.reward):
            return None
        return self.reward


@dataclass(frozen=True)
class TestOutcome:
    """How one test function over a dataset's rollout (``gym_rollouts``, the ``gym_rollout`` fixture) ended: ``test``
    its node id, ``rollout`` the node id of the rollout it got (the dataset item's, ``mcqa.jsonl::q1[r0]``), with
    its ``dataset``, ``task_id`` and ``repeat``; ``outcome`` ``passed``, ``failed`` (its call failed: an assertion, a
    failed soft expectation), ``error`` (its setup or teardown failed: the rollout errored, a fixture), ``skipped``
    or ``xfailed``; ``message`` why it did not pass (the failure's one line, or the whole text of a ``pytest.fail``
    such as the list of failed soft expectations; "" when it passed); ``metrics`` and ``reasons`` the custom metrics
    it recorded for the rollout (``record_metric``, ``expect(..., metric=)``) and the reasons given with them,
    ``(name, value)`` and ``(name, text)`` pairs sorted by name."""

    __test__ = False  # not a pytest test class

    test: str
    rollout: str
    dataset: str
    task_id: str
    repeat: int
    outcome: str
    message: str = ""
    metrics: tuple[tuple[str, float], ...] = ()
    reasons: tuple[tuple[str, str], ...] = ()


# --- Summaries --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GymFigures:
    """Gym's own figures of a summary's rollouts, from the aggregate metrics ``gym eval run`` writes per agent
    (:func:`~pytest_gym_eval.reporting.gym_metrics.with_gym_figures`): ``agent`` the agent instance, ``key`` Gym's
    headline figures in Gym's units (``pass@1/accuracy`` 97.0 on a 0-100 scale, ``majority@4/accuracy``; token means
    left out), ``secondary`` the means of the other numeric fields the verifier recorded per rollout
    (``answer_f1`` 0.83), ``file`` the name of the file they came from, ``datasets`` every dataset whose rollouts the
    agent ran in the session, in first-seen order (Gym aggregates per agent: with several, the figures cover them
    all)."""

    agent: str
    key: dict[str, float]
    secondary: dict[str, float]
    file: str
    datasets: tuple[str, ...] = ()


@dataclass(frozen=True)
class DatasetSummary:
    """Statistics of one dataset's rollouts (or of one agent's, when a dataset has several agents).

    ``agent`` is None when all the dataset's rollouts used one agent. Counts: ``tasks`` distinct task ids,
    ``rollouts`` results, ``errors`` results with status "error", ``scored`` rollouts with a reward.
    ``mean_reward`` (reward units) and ``pass_rate`` are intervals over the scored rollouts; ``pass_at_k[k]``
    for k = 1..the most rollouts any task has; ``flaky_tasks`` the ids of tasks whose scored rollouts both
    passed and failed, in first-seen order; ``wall_time`` seconds from the first start to the last stop;
    ``threshold`` the pass threshold; ``confidence`` the level of every interval (0.95 → 95%);
    ``error_classes`` the number of errors by failure class ("unknown" when the result names none);
    ``reward_range`` the lowest and highest scored reward (None without one);
    ``selected`` the rollouts the session selected for this dataset (None when unknown, e.g. a report read back
    from JSON without it): when more were selected than reported (``pytest -x``, ``--maxfail``, a crash), the
    gates were judged on part of the evaluation and are at best INCONCLUSIVE; ``adaptive`` how ``--gym-adaptive``
    ran it (None without): its waves, the rollouts they asked for against the ceiling (``selected`` then counts
    only those), and why it stopped.
    ``tokens`` sums the tokens of every rollout (errored ones too: their calls were made), ``latency`` ranks
    the latencies Gym recorded, and ``cost`` is the estimate at the user's prices (None without prices or
    tokens); see :func:`usage_summary`. ``policy`` names the policy model whose rollouts these are, in a session
    comparing policies (``--gym-policy``; :func:`~pytest_gym_eval.reporting.policies.label_policies`), else None.
    """

    dataset: str
    agent: str | None
    tasks: int
    rollouts: int
    errors: int
    scored: int
    mean_reward: Interval
    pass_rate: Interval
    pass_at_k: dict[int, Interval]
    flaky_tasks: tuple[str, ...]
    wall_time: float
    gates: list[GateResult]
    threshold: float
    confidence: float = 0.95
    error_classes: dict[str, int] = field(default_factory=dict)
    selected: int | None = None
    reward_range: tuple[float, float] | None = None
    tokens: TokenTotals = field(default_factory=TokenTotals)
    latency: LatencySummary = field(default_factory=lambda: latency_summary(()))
    cost: float | None = None
    adaptive: AdaptiveRecord | None = None
    selection: Selection | None = None
    """The part of the dataset the session selected (:mod:`pytest_gym_eval.tasks.selection`; None when unknown)."""
    metrics: dict[str, Interval] = field(default_factory=dict)
    policy: str | None = None
    """Each custom metric test functions recorded for the dataset's rollouts (by name, sorted): its mean over the
    rollouts that recorded it, with the mean reward's interval (:func:`~pytest_gym_eval.stats.gates.custom_interval`;
    ``n`` counts tasks)."""
    not_applicable: tuple[Gate, ...] = ()
    """The session-wide custom metric gates not judged on this dataset: none of its rollouts recorded the metric
    (:func:`~pytest_gym_eval.stats.gates.applies_to`); they take no part in its verdict."""
    not_counted: str = ""
    """What the statistics left out of test functions' rollouts of the dataset (pairs beyond its repeats, rollouts
    their tests skipped: :func:`~pytest_gym_eval.session.results.count_rollout`), "" when nothing."""
    gym: GymFigures | None = None
    """Gym's own figures of the summary's agent (majority@k, the verifier's secondary scores), None when Gym wrote
    none for it or its rollouts ran on several agents."""
    judge_tokens: TokenTotals = field(default_factory=TokenTotals)
    """The judge model's tokens over the same rollouts (:func:`~pytest_gym_eval.outcomes.usage.judge_usage`: the judge
    calls Gym's verifiers record in ``judge_evaluations`` or a ``judge_evaluation``), apart from ``tokens`` and not
    in ``cost``."""
    judge_noise: JudgeNoise | None = None
    """How much of the reward's variance is the judge's, from the policy answers judged more than once
    (:func:`~pytest_gym_eval.stats.judge_noise.judge_noise` over :func:`answer_rewards`); None when no answer was."""

    @property
    def gates_decide(self) -> bool:
        """Whether this summary's gates set the session's exit status: not when they were judged on a selection
        by name, marker or last outcome (``-k``, ``--lf``, ...), which is no sample of the dataset."""
        return self.selection is None or not self.selection.biased

    @property
    def rewards_beyond_unit(self) -> bool:
        """Whether some scored reward lies outside [0, 1] (multi-component rewards sum past 1; some verifiers
        give negative rewards): the pass threshold then needs a look."""
        return self.reward_range is not None and (self.reward_range[0] < 0.0 or self.reward_range[1] > 1.0)

    @property
    def unreported(self) -> int:
        """Selected rollouts that never reported (0 when ``selected`` is unknown)."""
        return 0 if self.selected is None else max(0, self.selected - self.rollouts)

    @property
    def verdict(self) -> Verdict | None:
        """FAIL when any gate fails or any rollout errored that no gate judges (:attr:`unjudged_errors`: errors fail
        a gated session), else INCONCLUSIVE
        when any gate is inconclusive (also when selected rollouts never reported), else PASS; None without
        gates.

        :class:`~pytest_gym_eval.stats.gates.Verdict` is a ``str`` enum, so this compares equal to "PASS" etc.
        """
        if not self.gates:
            return None
        verdicts = {result.verdict for result in self.gates}
        if Verdict.FAIL in verdicts or self.unjudged_errors:
            return Verdict.FAIL
        if Verdict.INCONCLUSIVE in verdicts:
            return Verdict.INCONCLUSIVE
        return Verdict.PASS

    @property
    def unjudged_errors(self) -> int:
        """The errored rollouts no gate of this summary judges: all of them, unless a gate's kind judges errors
        (:attr:`~pytest_gym_eval.stats.gate_kinds.GateKind.judges_errors`, ``--gym-max-error-rate``) and the
        gates decide (:attr:`gates_decide`)."""
        judged = self.gates_decide and errors_judged([result.gate for result in self.gates])
        return 0 if judged else self.errors

    @property
    def title(self) -> str:
        """``dataset``, ``dataset (policy NAME)`` for one policy's rollouts, or ``dataset (agent NAME)`` for one
        agent of a dataset with several."""
        return fmt.title(self.dataset, self.agent, self.policy)

    @property
    def label(self) -> str | None:
        """What tells this summary from the others of its dataset: its policy, else its agent, else None."""
        return self.policy or self.agent


def errors_judged(gates: Sequence[Gate]) -> bool:
    """Whether one of ``gates`` judges the errored rollouts (its kind's
    :attr:`~pytest_gym_eval.stats.gate_kinds.GateKind.judges_errors`): they then count as reported, and fail
    nothing by themselves."""
    return any(gate.kind.judges_errors for gate in gates)


def shown_pass_at_k(summary: DatasetSummary) -> list[tuple[int, Interval]]:
    """The pass@k a summary's text shows (terminal, Markdown, HTML): k = 1, 2, 4, 8, ... (powers of two), the
    largest k (the repeats) and every k a gate judges, in order. With 60 repeats that is 8 rows, not 60; the JSON
    report and JUnit carry every k."""
    largest = max(summary.pass_at_k, default=0)
    gated = {result.gate.k for result in summary.gates if result.gate.k is not None}
    return [
        (k, interval) for k, interval in summary.pass_at_k.items() if k & (k - 1) == 0 or k == largest or k in gated
    ]


def selection_note(summary: DatasetSummary) -> str:
    """`` (judged on a -k selection: 2 of 8 tasks, not on the dataset: ...)`` after a verdict judged on part
    of its dataset (:mod:`pytest_gym_eval.tasks.selection`), "" after one judged on all of it."""
    part = summary.selection
    if part is None or not part.partial:
        return ""
    if summary.gates_decide:
        return f" ({part.describe()})"
    return f" ({part.describe()}, not on the dataset: the items' own outcomes set the exit status)"


def summarize(
    results: Sequence[RolloutResult],
    *,
    thresholds: Mapping[str, float],
    gates: Mapping[str, Sequence[Gate]],
    mode: GateMode,
    confidence: float = 0.95,
    selected: Mapping[str, Mapping[str, int]] | None = None,
    price: Price | None = None,
    adaptive: Mapping[tuple[str, str | None], AdaptiveRecord] | None = None,
) -> list[DatasetSummary]:
    """One :class:`DatasetSummary` per dataset, or per (dataset, agent) when a dataset has several agents.

    ``thresholds`` and ``gates`` are keyed by dataset (as in the node ids); a dataset missing from them has
    threshold :data:`DEFAULT_THRESHOLD` and no gates. Gates are judged in ``mode`` by
    :func:`~pytest_gym_eval.stats.gates.evaluate`. ``price`` (the user's ``--gym-price-per-mtok``) gives each
    summary a cost estimate. ``selected[dataset][agent]`` counts the rollouts the session
    selected: a dataset or agent with selected rollouts but no result still gets a summary (its gates have no
    data), and gates judged on fewer rollouts than selected are at best INCONCLUSIVE
    (:func:`~pytest_gym_eval.stats.gates.incomplete`). ``adaptive[(dataset, agent or None)]`` says how
    ``--gym-adaptive`` ran a group: its gates are then judged on the confidence sequence of its waves
    (:func:`~pytest_gym_eval.stats.sequential.judge_record`), unless that cannot be (errors, rollouts missing).
    A command-line or ini custom metric gate on a dataset none of whose rollouts recorded the metric, while another
    dataset's did, is not judged there (:func:`~pytest_gym_eval.stats.gates.applies_to`; the summary lists it in
    ``not_applicable``), unless selected rollouts of the group never reported (they might have recorded it).
    Datasets come in first-seen order (results first, then
    selected ones that never reported), and agents within a dataset. Raises ValueError for a bad
    ``confidence``.
    """
    summaries = []
    recorded: dict[str, set[str]] = {}
    for result in results:
        recorded.setdefault(result.dataset, set()).update(name for name, _ in result.metrics)
    anywhere = set().union(*recorded.values())
    for (dataset, agent), group in groups(results, selected).items():
        chosen = (selected or {}).get(dataset)
        count = None if chosen is None else (sum(chosen.values()) if agent is None else chosen.get(agent, 0))
        own = recorded.get(dataset, set())
        cut_short = count is not None and len(group) < count  # the missing rollouts might record it
        applying = [g for g in gates.get(dataset, ()) if cut_short or applies_to(g, own, anywhere)]
        summary = _summarize_group(
            dataset,
            agent,
            group,
            threshold=thresholds.get(dataset, DEFAULT_THRESHOLD),
            gates=applying,
            mode=mode,
            confidence=confidence,
            selected=count,
            adaptive=(adaptive or {}).get((dataset, agent)),
        )
        skipped = tuple(g for g in gates.get(dataset, ()) if g not in applying)
        summaries.append(replace(summary, not_applicable=skipped) if skipped else summary)
    return [with_usage(summary, results, price) for summary in summaries]


def usage_summary(
    results: Sequence[RolloutResult], price: Price | None
) -> tuple[TokenTotals, LatencySummary, float | None]:
    """Token totals (:func:`~pytest_gym_eval.outcomes.usage.token_totals`) over every result, the median and p95 of the
    latencies that are known (:func:`~pytest_gym_eval.outcomes.usage.latency_summary`), and the cost at ``price``."""
    tokens = token_totals(result.usage for result in results)
    latencies = [result.usage.latency for result in results if result.usage.latency is not None]
    return tokens, latency_summary(latencies), tokens.cost(price)


def with_usage(summary: DatasetSummary, results: Sequence[RolloutResult], price: Price | None) -> DatasetSummary:
    """``summary`` with its tokens, latency and cost (:func:`usage_summary`) over its own results among
    ``results`` (same dataset, and same agent when the summary is one agent's)."""
    mine = [r for r in results if r.dataset == summary.dataset and (summary.agent is None or r.agent == summary.agent)]
    tokens, latency, cost = usage_summary(mine, price)
    judge_tokens = token_totals(result.usage.judge for result in mine)
    return replace(summary, tokens=tokens, latency=latency, cost=cost, judge_tokens=judge_tokens)


def metric_values(results: Sequence[RolloutResult]) -> dict[str, list[list[float]]]:
    """Each custom metric's values by task (``values[name][t][r]``, tasks in first-seen order, a task's values by
    repeat), over ``results`` of any status; names sorted. A task none of whose rollouts recorded a metric is left
    out of that metric's list."""
    values: dict[str, dict[str, list[float]]] = {}
    for task_id, rollouts in by_task(results).items():
        for rollout in rollouts:
            for name, value in rollout.metrics:
                values.setdefault(name, {}).setdefault(task_id, []).append(value)
    return {name: list(values[name].values()) for name in sorted(values)}


def groups(
    results: Sequence[RolloutResult], selected: Mapping[str, Mapping[str, int]] | None = None
) -> dict[tuple[str, str | None], list[RolloutResult]]:
    """Results keyed by (dataset, agent or None when the dataset has one agent), datasets first-seen; the
    datasets and agents of ``selected`` (see :func:`summarize`) get a key even without results."""
    agents: dict[str, dict[str, None]] = {}
    for result in results:
        agents.setdefault(result.dataset, {})[result.agent] = None
    for dataset, counts in (selected or {}).items():
        for agent, count in counts.items():
            if count > 0:
                agents.setdefault(dataset, {})[agent] = None
    groups: dict[tuple[str, str | None], list[RolloutResult]] = {}
    for dataset, names in agents.items():
        for agent in names:
            groups[(dataset, agent if len(names) > 1 else None)] = []
    for result in results:
        split = len(agents[result.dataset]) > 1
        groups[(result.dataset, result.agent if split else None)].append(result)
    return groups


def by_task(results: Sequence[RolloutResult]) -> dict[str, list[RolloutResult]]:
    """Results keyed by task id (first-seen order), each task's sorted by repeat."""
    tasks: dict[str, list[RolloutResult]] = {}
    for result in results:
        tasks.setdefault(result.task_id, []).append(result)
    return {task: sorted(rollouts, key=lambda r: r.repeat) for task, rollouts in tasks.items()}


def scores(rollouts: Sequence[RolloutResult]) -> tuple[list[float], list[bool]]:
    """Rewards and pass flags of the scored rollouts among ``rollouts``."""
    rewards: list[float] = []
    passed: list[bool] = []
    for rollout in rollouts:
        score = rollout.score
        if score is not None:
            rewards.append(score)
            passed.append(rollout.status == "passed")
    return rewards, passed


def answer_rewards(tasks: Mapping[str, Sequence[RolloutResult]]) -> list[list[list[float]]]:
    """The scored rewards of each task's rollouts grouped by policy answer (``rewards[t][a][j]``, as
    :func:`~pytest_gym_eval.stats.judge_noise.judge_noise` takes them): rollouts of one task with the same
    :attr:`RolloutResult.answer` are one answer judged again; a rollout without a digest is an answer of its own."""
    grouped: list[list[list[float]]] = []
    for rollouts in tasks.values():
        answers: dict[object, list[float]] = {}
        for rollout in rollouts:
            if rollout.score is not None:
                answers.setdefault(rollout.answer or rollout.nodeid, []).append(rollout.score)
        grouped.append(list(answers.values()))
    return grouped


def _wall_time(results: Sequence[RolloutResult]) -> float:
    """Seconds from the first start to the last stop, over results with a known time (start > 0)."""
    timed = [r for r in results if r.start > 0.0 and r.stop >= r.start]
    if not timed:
        return 0.0
    return max(r.stop for r in timed) - min(r.start for r in timed)


def _count_error_classes(results: Sequence[RolloutResult]) -> dict[str, int]:
    """Errors by failure class ("unknown" when a result names none), in first-seen order."""
    counts: dict[str, int] = {}
    for result in results:
        if result.status == "error":
            name = result.failure_class or "unknown"
            counts[name] = counts.get(name, 0) + 1
    return counts


def _summarize_group(
    dataset: str,
    agent: str | None,
    results: Sequence[RolloutResult],
    *,
    threshold: float,
    gates: Sequence[Gate],
    mode: GateMode,
    confidence: float,
    selected: int | None = None,
    adaptive: AdaptiveRecord | None = None,
) -> DatasetSummary:
    tasks = by_task(results)
    rewards_by_task: list[list[float]] = []
    passed_by_task: list[list[bool]] = []
    flaky: list[str] = []
    for task_id, rollouts in tasks.items():
        rewards, passed = scores(rollouts)
        rewards_by_task.append(rewards)
        passed_by_task.append(passed)
        if any(passed) and not all(passed):
            flaky.append(task_id)
    counts = [(len(passed), sum(passed)) for passed in passed_by_task]
    error_classes = _count_error_classes(results)
    scored = sum(n for n, _ in counts)
    every_reward = [reward for rewards in rewards_by_task for reward in rewards]
    max_repeats = max((len(rollouts) for rollouts in tasks.values()), default=0)
    metrics = {name: custom_interval(values, confidence) for name, values in metric_values(results).items()}
    reward_gates = [gate for gate in gates if gate.custom is None]
    sequential = None if adaptive is None else judge_record(reward_gates, rewards_by_task, passed_by_task, adaptive)
    errors = sum(error_classes.values())
    judged = (
        sequential
        if sequential is not None
        else evaluate(
            reward_gates, rewards_by_task, passed_by_task, mode, confidence, rollouts=len(results), errors=errors
        )
    )
    # A custom metric is judged on its fixed-sample interval (no confidence sequence covers it).
    judged = [*judged, *evaluate([g for g in gates if g.custom is not None], [], [], mode, confidence, metrics)]
    # Errored and never-reported rollouts alike leave the gates judged on less than was selected, unless a gate
    # judges the errors (--gym-max-error-rate): then an errored rollout counts as reported.
    reported = scored + errors if errors_judged(gates) else scored
    judged = incomplete(judged, reported, selected if selected is not None else len(results))
    return DatasetSummary(
        dataset=dataset,
        agent=agent,
        tasks=len(tasks),
        rollouts=len(results),
        errors=errors,
        scored=scored,
        mean_reward=metric_interval("mean_reward", rewards_by_task, counts, confidence),
        pass_rate=metric_interval("pass_rate", rewards_by_task, counts, confidence),
        pass_at_k={
            k: metric_interval("pass_at_k", rewards_by_task, counts, confidence, k) for k in range(1, max_repeats + 1)
        },
        flaky_tasks=tuple(flaky),
        wall_time=_wall_time(results),
        gates=judged,
        threshold=threshold,
        confidence=confidence,
        error_classes=error_classes,
        selected=selected,
        reward_range=(min(every_reward), max(every_reward)) if every_reward else None,
        adaptive=adaptive,
        metrics=metrics,
        judge_noise=judge_noise(answer_rewards(tasks), confidence),
    )
