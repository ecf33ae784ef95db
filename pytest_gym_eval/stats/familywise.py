"""Family-wise control across a session's gates (``--gym-familywise=holm``): Holm's step-down procedure over the
dataset gates judged on a fixed-sample interval (and, with
:func:`~pytest_gym_eval.reporting.policies.familywise_session`, the policy comparison gates), each member judged
again at its Holm level (:class:`Familywise` and :class:`Basis` are :mod:`pytest_gym_eval.stats.gates`')."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from pytest_gym_eval.stats.gates import Familywise, GateMode, GateResult, Verdict, judge_gate
from pytest_gym_eval.stats.intervals import holm_levels


def holm_family(p_values: Sequence[float], confidence: float) -> list[Familywise]:
    """The one family of a session (``--gym-familywise=holm``): each member's :class:`Familywise`, in the order
    of ``p_values`` (each gate's two-sided p-value against its threshold, whatever kind of gate: a dataset's
    :meth:`Basis.p_value`, a policy comparison's
    :meth:`~pytest_gym_eval.stats.comparison.PairedBasis.p_value`), with the level
    (:func:`~pytest_gym_eval.stats.intervals.holm_levels`) at which Holm's step-down procedure judges it at alpha
    1 - ``confidence``: its interval is computed again at confidence 1 - level and judged there. Empty for no
    p-values; ValueError for a confidence outside (0, 1)."""
    if not p_values:
        return []
    levels = holm_levels(p_values, 1.0 - confidence)
    return [Familywise("Holm", len(p_values), p, level) for p, level in zip(p_values, levels, strict=True)]


def holm_members(families: Sequence[Sequence[GateResult]]) -> list[tuple[int, int]]:
    """The (list, index) of each gate of ``families`` that belongs to a Holm family: judged on a fixed-sample
    interval (with a :class:`Basis`) in lower-bound mode and not cut short (no ``note``)."""
    return [
        (i, j)
        for i, results in enumerate(families)
        for j, r in enumerate(results)
        if r.basis is not None and not r.note and r.mode is GateMode.LOWER_BOUND
    ]


def member_p_value(result: GateResult) -> float:
    """A family member's two-sided p-value against its threshold (:meth:`Basis.p_value`).
    ``result`` must have a basis."""
    assert result.basis is not None
    return result.basis.p_value(result.gate.threshold)


def rejudged(result: GateResult, family: Familywise) -> GateResult:
    """``result`` judged as a member of ``family``: its interval at confidence 1 - ``family.level``, the verdict
    there, and the hint at that level when INCONCLUSIVE. ``result`` must have a :class:`Basis`."""
    assert result.basis is not None
    interval = result.basis.interval(1.0 - family.level)
    verdict = judge_gate(result.gate, interval, result.mode)
    hint = result.basis.hint(result.gate.threshold, 1.0 - family.level) if verdict is Verdict.INCONCLUSIVE else None
    return replace(result, interval=interval, verdict=verdict, familywise=family, hint=hint)


def holm(families: Sequence[Sequence[GateResult]], confidence: float) -> list[list[GateResult]]:
    """The gates of ``families`` (one list a dataset summary) judged as one family by Holm's step-down procedure
    at alpha = 1 - ``confidence`` (:func:`holm_family` over the :func:`holm_members`, each :func:`rejudged`), so
    the chance that any member's PASS or FAIL is wrong is at most alpha (each one at 95% alone: up to m x 5%).
    Other gates are returned as they are. Same shape as ``families``. A session with policy comparison gates
    judges those in the same family (:func:`~pytest_gym_eval.reporting.policies.familywise_session`)."""
    members = holm_members(families)
    family = holm_family([member_p_value(families[i][j]) for i, j in members], confidence)
    judged = [list(results) for results in families]
    for (i, j), member in zip(members, family, strict=True):
        judged[i][j] = rejudged(families[i][j], member)
    return judged
