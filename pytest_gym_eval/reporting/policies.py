"""A session comparing policy models (``--gym-policy``, issue 25): per dataset, each candidate against the baseline
on the rollouts both rolled out, and the failures of its comparison gates (``--gym-max-regression``,
``--gym-min-improvement``).

The statistics are :mod:`pytest_gym_eval.stats.comparison`'s (:func:`~pytest_gym_eval.stats.comparison.compare`: the
paired difference in mean reward, clustered by task; the flips with McNemar's exact test; the gates). This module only
turns the session's rollout results into its input: ``{(task id, repeat): reward}`` of each policy, a rollout
attributed to its policy by the agent instance that ran it (:func:`~pytest_gym_eval.tasks.models.policy_of`), and each
side's tokens and latency over the same pairs (:func:`paired_usage`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from pytest_gym_eval.outcomes.usage import SideUsage
from pytest_gym_eval.reporting.conclusion import PolicyComparison
from pytest_gym_eval.reporting.summary import DatasetSummary, RolloutResult, usage_summary
from pytest_gym_eval.stats import comparison as cmp
from pytest_gym_eval.stats import familywise as fw
from pytest_gym_eval.stats.comparison import ComparisonGate, Key, compare, judge_paired_waves
from pytest_gym_eval.stats.sequential import AdaptiveRecord
from pytest_gym_eval.tasks.models import policy_of


def compare_policies(
    results: Sequence[RolloutResult],
    policies: Sequence[str],
    gates: Sequence[ComparisonGate] = (),
    confidence: float = 0.95,
    adaptive: Mapping[str, AdaptiveRecord] | None = None,
) -> list[PolicyComparison]:
    """Per dataset (first-seen order), each candidate (``policies[1:]``, in order) against the baseline
    (``policies[0]``): :func:`~pytest_gym_eval.stats.comparison.compare` of their scored rewards keyed by (task id,
    repeat), with every gate in ``gates`` judged, and each side's tokens and latency over the pairs
    (:func:`paired_usage`).

    Only scored rollouts count (an errored one has no reward); a (task, repeat) only one side scored is left out of
    every statistic. A dataset any policy has a result for gets a comparison per candidate even without a pair (then
    its interval is nan/±inf and a gate INCONCLUSIVE: nothing was compared, which must not read as a pass). Empty
    for fewer than two policies.

    ``adaptive[dataset]`` (``--gym-adaptive``): how the waves ran the dataset's policies; when they ran it
    sequentially, the gates are judged on the paired confidence sequence of those waves
    (:func:`~pytest_gym_eval.stats.comparison.judge_paired_waves`, the verdicts the run stopped on), and on the
    fixed-sample interval when that cannot be (a pair missing: an errored rollout). Raises ValueError as
    :func:`~pytest_gym_eval.stats.comparison.compare` does (a bad ``confidence``; scored rewards are finite).
    """
    if len(policies) < 2:
        return []
    scored: dict[str, dict[str, dict[Key, RolloutResult]]] = {}  # dataset -> policy -> (task, repeat) -> result
    for result in results:
        per_policy = scored.setdefault(result.dataset, {})
        side = per_policy.setdefault(policy_of(result.agent, policies), {})
        if result.score is not None:
            side[(result.task_id, result.repeat)] = result
    baseline = policies[0]
    found = []
    for dataset, sides in scored.items():
        base = sides.get(baseline, {})
        for candidate in policies[1:]:
            cand = sides.get(candidate, {})
            comparison = compare(_rewards(base), _rewards(cand), gates, confidence)
            base_usage, cand_usage = paired_usage(base, cand)
            record = (adaptive or {}).get(dataset)
            waves: tuple[int, ...] = ()
            if record is not None and record.sequential:
                judged = judge_paired_waves(_rewards(base), _rewards(cand), gates, record.ends, record.reward_range)
                if judged is not None:
                    comparison, waves = replace(comparison, results=tuple(judged)), record.ends
            found.append(
                PolicyComparison(
                    dataset, baseline, candidate, comparison, True, base_usage, cand_usage, waves,
                    record.max_repeats if record is not None else 0,
                )
            )  # fmt: skip
    return found


def _rewards(side: Mapping[Key, RolloutResult]) -> dict[Key, float]:
    return {key: result.score for key, result in side.items() if result.score is not None}


def paired_usage(
    baseline: Mapping[Key, RolloutResult], candidate: Mapping[Key, RolloutResult]
) -> tuple[SideUsage, SideUsage]:
    """Each side's tokens and latency (:func:`~pytest_gym_eval.reporting.summary.usage_summary`: token sums, median
    and p95 seconds of the recorded latencies) over its rollouts of the pairs: the (task, repeat) keys both sides
    hold a result for (compare_policies passes scored results only, so the same rollouts as the paired difference).
    ``(baseline's, candidate's)``; empty :class:`~pytest_gym_eval.outcomes.usage.SideUsage` when no key is shared."""
    keys = [key for key in baseline if key in candidate]
    sides = []
    for side in (baseline, candidate):
        tokens, latency, _ = usage_summary([side[key] for key in keys], None)
        sides.append(SideUsage(tokens, latency))
    return sides[0], sides[1]


def label_policies(
    summaries: Sequence[DatasetSummary], policies: Sequence[str], results: Sequence[RolloutResult] = ()
) -> list[DatasetSummary]:
    """``summaries`` with each one agent instance's summary labelled by the policy it ran (``mcqa.jsonl (policy
    cand)``, not ``(agent mcqa_simple_agent__cand)``): the name the user gave. A summary of a dataset whose rollouts
    all ran on one agent instance (``agent`` None: ``-k cand`` selected one policy's items) is labelled by that
    agent's policy, found among ``results``. Unchanged for fewer than two ``policies`` (names, baseline first), and
    for every summary of a dataset where two would get the same policy (rows naming different agents): its agent
    instances tell them apart."""
    if len(policies) < 2:
        return list(summaries)
    only: dict[str, set[str]] = {}  # dataset -> the agents its results ran on
    for result in results:
        only.setdefault(result.dataset, set()).add(result.agent)
    named = [
        policy_of(agent, policies) if (agent := s.agent or _sole(only.get(s.dataset, set()))) is not None else None
        for s in summaries
    ]
    seen: set[tuple[str, str | None]] = set()
    clashing: set[str] = set()
    for summary, name in zip(summaries, named, strict=True):
        if (summary.dataset, name) in seen:
            clashing.add(summary.dataset)
        seen.add((summary.dataset, name))
    return [
        summary if name is None or summary.dataset in clashing else replace(summary, policy=name)
        for summary, name in zip(summaries, named, strict=True)
    ]


def _sole(agents: set[str]) -> str | None:
    return next(iter(agents)) if len(agents) == 1 else None


def familywise_session(
    summaries: Sequence[DatasetSummary], comparisons: Sequence[PolicyComparison], confidence: float
) -> tuple[list[DatasetSummary], tuple[PolicyComparison, ...]]:
    """Every gate that can fail the session judged as ONE family by Holm's procedure at alpha 1 - ``confidence``
    (``--gym-familywise=holm``, :func:`~pytest_gym_eval.stats.familywise.holm_family`): the dataset gates of the
    summaries whose gates decide (:func:`~pytest_gym_eval.stats.familywise.holm_members`) and the comparison gates
    (``--gym-max-regression``, ``--gym-min-improvement``) of the comparisons that decide and were judged on the
    fixed-sample interval (not ``--gym-adaptive``'s sequence). Each member is judged again at its level
    (:func:`~pytest_gym_eval.stats.familywise.rejudged`, :func:`~pytest_gym_eval.stats.comparison.rejudged`) and says
    so
    (``familywise``); every other gate is returned as it is."""
    deciding = [i for i, summary in enumerate(summaries) if summary.gates_decide and summary.gates]
    families = [summaries[i].gates for i in deciding]
    gate_members = fw.holm_members(families)
    compared = [
        (k, j)
        for k, item in enumerate(comparisons)
        if item.decides
        for j, result in enumerate(item.comparison.results)
        if result.basis is not None and not result.sequential
    ]
    p_values = [fw.member_p_value(families[i][j]) for i, j in gate_members]
    for k, j in compared:
        result = comparisons[k].comparison.results[j]
        assert result.basis is not None
        p_values.append(result.basis.p_value(result.gate))
    family = fw.holm_family(p_values, confidence)
    judged = [list(gates) for gates in families]
    for (i, j), member in zip(gate_members, family, strict=False):
        judged[i][j] = fw.rejudged(families[i][j], member)
    out = list(summaries)
    for i, gates in zip(deciding, judged, strict=True):
        out[i] = replace(out[i], gates=gates)
    results = [list(item.comparison.results) for item in comparisons]
    for (k, j), member in zip(compared, family[len(gate_members) :], strict=True):
        results[k][j] = cmp.rejudged(results[k][j], member)
    items = tuple(
        replace(item, comparison=replace(item.comparison, results=tuple(rs)))
        for item, rs in zip(comparisons, results, strict=True)
    )
    return out, items
