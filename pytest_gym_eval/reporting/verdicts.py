"""The session's gate verdicts as one list (:class:`GateVerdict`, made once by :func:`gate_verdicts` when a session or
a ``merge`` concludes): every output (terminal, JUnit, JSON report, HTML page, Markdown summary, GitHub annotations)
renders its gates from this list instead of judging them again, so that they all tell the same story.

:class:`GateVerdict` itself is defined beside :class:`~pytest_gym_eval.reporting.conclusion.Conclusion`, which holds the
list.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from pytest_gym_eval.reporting import baseline as bl
from pytest_gym_eval.reporting import fmt
from pytest_gym_eval.reporting.conclusion import NOT_APPLICABLE, BaselineComparison, Flip, GateVerdict, PolicyComparison
from pytest_gym_eval.reporting.summary import DatasetSummary, selection_note
from pytest_gym_eval.stats.comparison import ComparisonGate, gym_verdict
from pytest_gym_eval.stats.gates import NOT_APPLICABLE as NOT_APPLICABLE_WORDS
from pytest_gym_eval.stats.gates import Gate, GateMode, GateResult, GateSource, Verdict, bound_of
from pytest_gym_eval.stats.intervals import Interval

NOT_DATASET_GATES = frozenset({"errors", "max_drop", "max_regressed_tasks", "flips", "replay"})
"""The verdict kinds that are no gate of a summary's own statistics (its errored rollouts, a baseline's gates, the
replay flips, an unreadable recording): the terminal's summary lists the others as its gate lines."""

SET_WHERE = {
    GateSource.COMMAND_LINE: "set on the command line",
    GateSource.INI: "set in the ini file",
    GateSource.DATASET: "set in gym_dataset_settings",
    GateSource.MARK: "set by a gym_rollouts mark",
}


def set_where(gate: Gate | ComparisonGate) -> str:
    """`` (set on the command line)``, `` (set in the ini file)`` or `` (set in gym_dataset_settings)``: where a
    gate line's gate was set, `` (set by the gym_rollouts mark of tests/test_x.py::test_terse)`` for a test's mark;
    "" when that is unknown (a report written before the plan recorded it)."""
    if gate.source is None:
        return ""
    declared_by = getattr(gate, "declared_by", None)
    return f" ({SET_WHERE[gate.source]}" + (f" of {declared_by})" if declared_by else ")")


def comparison_subject(item: PolicyComparison) -> str:
    """What a policy pair's verdicts judge, as the reports title it: ``mcqa.jsonl cand vs base``."""
    return f"{item.dataset} {item.candidate} vs {item.baseline}"


def gate_verdicts(
    summaries: Sequence[DatasetSummary],
    policies: Sequence[PolicyComparison] = (),
    comparisons: Sequence[BaselineComparison] = (),
    flips: Sequence[Flip] | None = None,
    *,
    inconclusive_passes: bool = False,
    max_drop: float | None = None,
    max_regressed_tasks: int | None = None,
    fail_on_flip: bool = False,
    replay_error: str = "",
) -> tuple[GateVerdict, ...]:
    """Every gate verdict of a conclusion, in the order the reports list them: per summary its gates (the reward
    statistics and custom metrics, then the session-wide metric gates not applicable to it), then each policy
    pair's comparison gates, the baseline
    gates (``max_drop``, ``max_regressed_tasks``), the replay flips (``fail_on_flip``) and a recording that could not
    be read (``replay_error``, the text saying why), then each summary's errored rollouts when the session is gated.
    A gate's ``fails`` follows :meth:`~pytest_gym_eval.stats.gates.GateResult.passed` (and the comparison's rule,
    which is the same: a gate judged on fewer rollouts than were selected never passes); a gated session fails
    exactly when one of these fails (its exit status, :func:`pytest_gym_eval.session.conclude.conclude`)."""
    found = [verdict for summary in summaries for verdict in _dataset_verdicts(summary, inconclusive_passes)]
    found += [verdict for item in policies for verdict in _comparison_verdicts(item, inconclusive_passes)]
    for comparison in comparisons:
        found += _baseline_verdicts(comparison, max_drop, max_regressed_tasks)
    if fail_on_flip and flips is not None:
        found.append(_flips_verdict(flips))
    if replay_error:
        found.append(_replay_verdict(replay_error))
    if any(verdict.decides for verdict in found):  # errored rollouts fail a gated session (any dataset's) ...
        found += [_errors(summary) for summary in summaries if summary.unjudged_errors]  # ... unless a gate judges them
    return tuple(found)


def _bound(interval: Interval, verdict: Verdict) -> float | None:
    """The bound of ``interval`` that decided ``verdict``: the upper one for a FAIL, else the lower; None without
    data."""
    if math.isnan(interval.estimate):
        return None
    return interval.high if verdict is Verdict.FAIL else interval.low


def _dataset_verdicts(summary: DatasetSummary, inconclusive_passes: bool) -> list[GateVerdict]:
    """A summary's gates (:class:`~pytest_gym_eval.stats.gates.GateResult`), then its not applicable ones."""
    decides = summary.gates_decide
    lenient = inconclusive_passes and not summary.unreported
    note = selection_note(summary)
    found = [
        GateVerdict(
            dataset=summary.dataset,
            subject=summary.title,
            policy=summary.policy,
            kind=result.gate.metric,
            gate=result.gate.label,
            statistic=result.interval.estimate,
            bound=_bound(result.interval, result.verdict),
            threshold=result.gate.threshold,
            verdict=result.verdict.value,
            message=f"{summary.title}: {result.describe()}{note}",
            decides=decides,
            fails=decides and not result.passed(lenient),
            detail=result.describe(set_where(result.gate)),
            brief=f"{summary.title} {gate_brief(result)}",
        )
        for result in summary.gates
    ]
    found += [
        GateVerdict(
            dataset=summary.dataset,
            subject=summary.title,
            policy=summary.policy,
            kind=gate.metric,
            gate=gate.label,
            statistic=None,
            bound=None,
            threshold=gate.threshold,
            verdict=NOT_APPLICABLE,
            message=f"{summary.title}: {gate.name} not applicable: no rollout of the dataset recorded it",
            decides=decides,
            detail=f"{gate.label}: {NOT_APPLICABLE_WORDS}{set_where(gate)}",
        )
        for gate in summary.not_applicable
    ]
    return found


def _replay_verdict(error: str) -> GateVerdict:
    """``--gym-replay``'s recording could not be read: the flips asked for cannot be judged, which fails the
    session (``error`` names the file and line)."""
    return GateVerdict(
        dataset="",
        subject="replay",
        policy=None,
        kind="replay",
        gate="the recording can be read",
        statistic=None,
        bound=None,
        threshold=None,
        verdict="FAIL",
        message=f"replay: {error}",
        fails=True,
        brief=error,
    )


def _comparison_verdicts(item: PolicyComparison, inconclusive_passes: bool) -> list[GateVerdict]:
    """A policy pair's comparison gates (``--gym-max-regression``, ``--gym-min-improvement``): INCONCLUSIVE passes
    only with ``inconclusive_passes`` and never without paired data (as every gate)."""
    subject = comparison_subject(item)
    found = []
    for compared in item.comparison.results:
        interval, verdict = compared.interval, compared.verdict
        judged = not math.isnan(interval.estimate)
        passes = verdict is Verdict.PASS or (verdict is Verdict.INCONCLUSIVE and inconclusive_passes and judged)
        found.append(
            GateVerdict(
                dataset=item.dataset,
                subject=subject,
                policy=item.candidate,
                kind=compared.gate.hypothesis.value,
                gate=compared.gate.label,
                statistic=interval.estimate,
                bound=_bound(interval, verdict),
                threshold=compared.gate.threshold,
                verdict=verdict.value,
                message=f"{subject}: {compared.describe()}",
                decides=item.decides,
                fails=item.decides and not passes,
                detail=f"{compared.describe()} (Gym: {gym_verdict(compared)}){set_where(compared.gate)}",
            )
        )
    return found


def _baseline_verdicts(
    comparison: BaselineComparison, max_drop: float | None, max_regressed_tasks: int | None
) -> list[GateVerdict]:
    """The ``--gym-baseline`` gates on one dataset: ``--gym-max-drop``, ``--gym-max-regressed-tasks``."""
    subject = fmt.title(comparison.dataset, comparison.agent)
    found = []
    if max_drop is not None:
        failing = bl.max_drop_gate([comparison], max_drop)
        paired = comparison.comparison
        found.append(
            GateVerdict(
                dataset=comparison.dataset,
                subject=subject,
                policy=None,
                kind="max_drop",
                gate=f"mean reward drop vs baseline <= {max_drop:g}",
                statistic=paired.mean_difference,
                bound=paired.high,
                threshold=-max_drop,
                verdict="FAIL" if failing else "PASS",
                message=failing[0] if failing else f"{subject}: mean reward change {fmt.change(paired)} vs baseline",
                fails=bool(failing),
            )
        )
    if max_regressed_tasks is not None:
        failing = bl.max_regressed_gate([comparison], max_regressed_tasks)
        regressed = fmt.plural(len(comparison.regressed), "task")
        found.append(
            GateVerdict(
                dataset=comparison.dataset,
                subject=subject,
                policy=None,
                kind="max_regressed_tasks",
                gate=f"regressed tasks vs baseline <= {max_regressed_tasks}",
                statistic=float(len(comparison.regressed)),
                bound=None,
                threshold=float(max_regressed_tasks),
                verdict="FAIL" if failing else "PASS",
                message=failing[0] if failing else f"{subject}: {regressed} regressed vs the baseline",
                fails=bool(failing),
            )
        )
    return found


def _flips_verdict(flips: Sequence[Flip]) -> GateVerdict:
    """``--gym-fail-on-flip``: a replayed rollout whose reward differs from the recording fails the session."""
    count = len(flips)
    datasets = sorted({flip.nodeid.split("::", 1)[0] for flip in flips})
    message = (
        f"{count} rollout reward{'s' if count != 1 else ''} differ from the recording, e.g. {flips[0].nodeid}"
        if flips
        else "no rollout reward differs from the recording"
    )
    return GateVerdict(
        dataset=datasets[0] if len(datasets) == 1 else "",
        subject="replay",
        policy=None,
        kind="flips",
        gate="no verifier flip",
        statistic=float(count),
        bound=None,
        threshold=0.0,
        verdict="FAIL" if flips else "PASS",
        message=message,
        fails=bool(flips),
        brief=f"{count} rollout reward{'s' if count != 1 else ''} differ from the recording",
    )


def _errors(summary: DatasetSummary) -> GateVerdict:
    """The verdict on a summary's errored rollouts no gate judges (:attr:`DatasetSummary.unjudged_errors`; an error-rate
    gate judges them) in a gated session: they fail it."""
    return GateVerdict(
        dataset=summary.dataset,
        subject=summary.title,
        policy=summary.policy,
        kind="errors",
        gate="no errored rollout",
        statistic=float(summary.unjudged_errors),
        bound=None,
        threshold=0.0,
        verdict="FAIL",
        message=f"{summary.title}: {fmt.plural(summary.unjudged_errors, 'rollout')} errored",
        fails=True,
        brief=f"{fmt.plural(summary.unjudged_errors, 'rollout')} errored",
    )


MAX_REASONS = 3
"""Failing gates the one-line reason names before "and N more failing gates"."""


def session_status(verdicts: Sequence[GateVerdict], summaries: Sequence[DatasetSummary]) -> tuple[int, str]:
    """The session's exit status under its gates and the one-line reason beside it, both read off ``verdicts`` (the
    list :func:`gate_verdicts` made): nothing here judges a gate again.

    (-1, "") when no verdict decides (no gate set, or each judged on a selection: pytest's own status then holds);
    1 when a verdict fails (:attr:`GateVerdict.fails`), else 0. The reason names the failing gates in the list's
    order by their :attr:`~GateVerdict.brief` (the first :data:`MAX_REASONS` of them, then how many more), then the
    errored rollouts no gate judges, summed over the datasets, then, for gated ``summaries`` cut short, how many
    selected rollouts never reported; its head is INCONCLUSIVE when every failing gate is INCONCLUSIVE (errored rollouts
    aside), else FAIL. E.g.
    ``gym gates: FAIL - datasets/mcqa.jsonl mean reward 0.80 < 0.90; 1 rollout errored`` or ``gym gates: all 3
    gates pass (1 inconclusive, counted as passing)``. Under ``--gym-familywise`` the prefix names the family
    (``gym gates (family-wise, Holm over 5)``).
    """
    deciding = [v for v in verdicts if v.decides and v.verdict != NOT_APPLICABLE]
    if not deciding:
        return -1, ""
    family = next((r.familywise for s in summaries for r in s.gates if r.familywise is not None), None)
    prefix = "gym gates" if family is None else f"gym gates (family-wise, {family.method} over {family.family})"
    fails = failing(verdicts)
    if not fails:
        inconclusive = sum(1 for v in deciding if v.verdict == Verdict.INCONCLUSIVE.value)
        text = "the gate passes" if len(deciding) == 1 else f"all {len(deciding)} gates pass"
        return 0, f"{prefix}: {text}" + (f" ({inconclusive} inconclusive, counted as passing)" if inconclusive else "")
    gates = [v for v in fails if v.kind != "errors"]
    problems = [v.brief or v.message for v in gates[:MAX_REASONS]]
    if len(gates) > MAX_REASONS:
        problems.append(f"and {fmt.plural(len(gates) - MAX_REASONS, 'more failing gate')}")
    errored = sum(int(v.statistic or 0) for v in fails if v.kind == "errors")
    if errored:
        problems.append(f"{fmt.plural(errored, 'rollout')} errored")
    cut_short = [s for s in summaries if s.gates_decide and s.gates and s.unreported]
    if cut_short:
        unreported, selected = sum(s.unreported for s in cut_short), sum(s.selected or 0 for s in cut_short)
        problems.append(f"{unreported} of {selected} selected rollouts never reported (the session stopped early)")
    head = "INCONCLUSIVE" if gates and all(v.verdict != Verdict.FAIL.value for v in gates) else "FAIL"
    return 1, f"{prefix}: {head} - " + "; ".join(problems)


def session_verdict(summaries: Sequence[DatasetSummary], *, inconclusive_passes: bool) -> tuple[int, str]:
    """:func:`session_status` of the verdicts of ``summaries``' own gates alone (no comparison, baseline or replay):
    what a report that lists only its datasets concludes (INCONCLUSIVE failing unless ``inconclusive_passes``)."""
    return session_status(gate_verdicts(summaries, inconclusive_passes=inconclusive_passes), summaries)


def gate_brief(result: GateResult) -> str:
    """A short reason a gate did not pass, e.g. ``mean reward 0.80 < 0.90``, ``pass rate 0.25, upper bound 0.40 <
    0.50`` or ``mean reward [0.55, 0.95] straddles 0.70``: the words the one-line reason gives it."""
    gate, interval, words = result.gate, result.interval, result.gate.kind.words
    threshold = fmt.threshold(gate.threshold)
    if math.isnan(interval.estimate):
        return f"{gate.name} has no data (needs {words.ok} {threshold})"
    if result.note and result.verdict is not Verdict.FAIL:  # it fails whatever the missing rollouts hold
        return f"{gate.name} {fmt.number(interval.estimate)} {result.note}"
    if result.mode is GateMode.POINT:
        return f"{gate.name} {fmt.number(interval.estimate)} {words.not_ok} {threshold}"
    if result.verdict is Verdict.FAIL:
        bound = fmt.number(bound_of(interval, words.fail_bound))
        return f"{gate.name} {fmt.number(interval.estimate)}, {words.fail_bound} {bound} {words.not_ok} {threshold}"
    return f"{gate.name} {fmt.interval(interval)} straddles {threshold}"


def failing(verdicts: Sequence[GateVerdict]) -> list[GateVerdict]:
    """The verdicts that fail the session (:attr:`GateVerdict.fails`), in order."""
    return [verdict for verdict in verdicts if verdict.fails]


def shown(verdicts: Sequence[GateVerdict]) -> list[GateVerdict]:
    """The verdicts an annotation or a JUnit failure shows: every one that is neither PASS nor NOT_APPLICABLE."""
    return [verdict for verdict in verdicts if verdict.verdict not in (Verdict.PASS.value, NOT_APPLICABLE)]


def of_summary(verdicts: Sequence[GateVerdict], summary: DatasetSummary) -> list[GateVerdict]:
    """The verdicts on ``summary``'s own gates (its statistics' and custom metrics', then those not applicable to
    it), in order: what its gate lines show."""
    return [v for v in verdicts if v.subject == summary.title and v.kind not in NOT_DATASET_GATES]


def of_comparison(verdicts: Sequence[GateVerdict], item: PolicyComparison) -> list[GateVerdict]:
    """The verdicts on a policy pair's comparison gates, in order."""
    subject = comparison_subject(item)
    return [v for v in verdicts if v.subject == subject and v.kind not in NOT_DATASET_GATES]


__all__ = [
    "NOT_APPLICABLE",
    "GateVerdict",
    "failing",
    "gate_verdicts",
    "of_comparison",
    "of_summary",
    "session_status",
    "session_verdict",
    "shown",
]
