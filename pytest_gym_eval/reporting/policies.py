"""A session comparing policy models (``--gym-policy``, issue 25): per dataset, each candidate against the baseline
on the rollouts both rolled out, and the failures of its comparison gates (``--gym-max-regression``,
``--gym-min-improvement``).

The statistics are :mod:`pytest_gym_eval.comparison`'s (:func:`~pytest_gym_eval.comparison.compare`: the paired
difference in mean reward, clustered by task; the flips with McNemar's exact test; the gates). This module only
turns the session's rollout results into its input: ``{(task id, repeat): reward}`` of each policy, a rollout
attributed to its policy by the agent instance that ran it (:func:`~pytest_gym_eval.models.policy_of`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

from pytest_gym_eval.comparison import ComparisonGate, Key, compare
from pytest_gym_eval.gates import Verdict
from pytest_gym_eval.models import policy_of
from pytest_gym_eval.reporting.summary import DatasetSummary, PolicyComparison, RolloutResult


def compare_policies(
    results: Sequence[RolloutResult],
    policies: Sequence[str],
    gates: Sequence[ComparisonGate] = (),
    confidence: float = 0.95,
) -> list[PolicyComparison]:
    """Per dataset (first-seen order), each candidate (``policies[1:]``, in order) against the baseline
    (``policies[0]``): :func:`~pytest_gym_eval.comparison.compare` of their scored rewards keyed by (task id,
    repeat), with every gate in ``gates`` judged.

    Only scored rollouts count (an errored one has no reward); a (task, repeat) only one side scored is left out of
    every statistic. A dataset any policy has a result for gets a comparison per candidate even without a pair (then
    its interval is nan/±inf and a gate INCONCLUSIVE: nothing was compared, which must not read as a pass). Empty
    for fewer than two policies. Raises ValueError as :func:`~pytest_gym_eval.comparison.compare` does (a bad
    ``confidence``; scored rewards are finite).
    """
    if len(policies) < 2:
        return []
    rewards: dict[str, dict[str, dict[Key, float]]] = {}  # dataset -> policy -> (task, repeat) -> reward
    for result in results:
        per_policy = rewards.setdefault(result.dataset, {})
        side = per_policy.setdefault(policy_of(result.agent, policies), {})
        if result.score is not None:
            side[(result.task_id, result.repeat)] = result.score
    baseline = policies[0]
    return [
        PolicyComparison(
            dataset, baseline, candidate, compare(sides.get(baseline, {}), sides.get(candidate, {}), gates, confidence)
        )
        for dataset, sides in rewards.items()
        for candidate in policies[1:]
    ]


def label_policies(summaries: Sequence[DatasetSummary], policies: Sequence[str]) -> list[DatasetSummary]:
    """``summaries`` with each one agent instance's summary labelled by the policy it ran (``mcqa.jsonl (policy
    cand)``, not ``(agent mcqa_simple_agent__cand)``): the name the user gave. Unchanged for fewer than two
    ``policies`` (names, baseline first), and for every summary of a dataset where two would get the same policy
    (rows naming different agents): its agent instances tell them apart."""
    if len(policies) < 2:
        return list(summaries)
    named = [None if s.agent is None else policy_of(s.agent, policies) for s in summaries]
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


def comparison_failures(comparisons: Sequence[PolicyComparison], *, inconclusive_passes: bool) -> list[str]:
    """One line per gate of a deciding comparison that did not pass (``--gym-max-regression``'s non-inferiority,
    ``--gym-min-improvement``'s superiority, in that order), e.g. ``mcqa.jsonl cand vs base: non-inferiority:
    candidate - baseline -0.50 [-0.81, -0.19], upper bound -0.19 < -0.10: FAIL``.

    As every gate (:meth:`~pytest_gym_eval.gates.GateResult.passed`): FAIL never passes; INCONCLUSIVE passes only
    with ``inconclusive_passes`` (``--gym-inconclusive=pass``), and never when nothing was paired. Empty: every gate
    passes (or none is set)."""
    lines = []
    for item in comparisons:
        for result in item.comparison.results if item.decides else ():
            if result.verdict is Verdict.PASS:
                continue
            judged = not math.isnan(result.interval.estimate)
            if result.verdict is Verdict.INCONCLUSIVE and inconclusive_passes and judged:
                continue
            lines.append(f"{item.dataset} {item.candidate} vs {item.baseline}: {result.describe()}")
    return lines
