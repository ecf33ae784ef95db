"""The terminal's ``gym reward summary``: per dataset the counts, intervals, pass@k, flaky tasks and gates, the
comparison of policy models, the comparison with a baseline, and the replay flips."""

from __future__ import annotations

import math
import textwrap
from collections.abc import Mapping, Sequence

from pytest_gym_eval.outcomes.usage import ratio
from pytest_gym_eval.reporting import fmt
from pytest_gym_eval.reporting.conclusion import (
    BaselineComparison,
    Conclusion,
    GateVerdict,
    PolicyComparison,
    flips_count,
)
from pytest_gym_eval.reporting.gym_metrics import AgentMetrics, fractional_note, gym_lines, with_gym_figures
from pytest_gym_eval.reporting.summary import (
    MAX_LISTED,
    NO_DATASET_ROLLOUT,
    DatasetSummary,
    RolloutResult,
    by_task,
    selection_note,
    shown_pass_at_k,
)
from pytest_gym_eval.reporting.verdicts import SET_WHERE as SET_WHERE
from pytest_gym_eval.reporting.verdicts import gate_verdicts, of_comparison, of_summary
from pytest_gym_eval.reporting.verdicts import set_where as set_where
from pytest_gym_eval.stats.gates import GateMode, Verdict

_MAX_ID_CHARS = 40


# --- Terminal summary -------------------------------------------------------------------------------------


def render_summary(
    summaries: Sequence[DatasetSummary],
    *,
    verbose: bool,
    results: Sequence[RolloutResult] = (),
    width: int = 80,
    gym_metrics: Mapping[str, AgentMetrics] | None = None,
    verdicts: Sequence[GateVerdict] | None = None,
) -> list[str]:
    """Body lines of the "gym reward summary" terminal section (the caller writes the section header).

    Per summary: the dataset (long paths shortened from the left with "…"), counts and wall time (when the
    results carry times), errors by failure class, mean reward, pass rate and pass@1..k each with its interval
    (infinite bounds print as "n/a"), flaky tasks, and each gate with the verdict; a blank line between
    summaries. ``verbose`` adds one row per task with the reward of each repeat in order ("ERR" for an error,
    "-" for a repeat not run), taken from ``results``. No line is longer than ``width`` (at least 40 is used).
    Fractional rewards get a line saying what the pass rate and the mean each count; each summary's Gym figures
    (``summary.gym``) their lines, and ``gym_metrics`` (Gym's aggregate metrics per agent,
    :func:`~pytest_gym_eval.reporting.gym_metrics.read_gym_metrics`) gives summaries without them theirs
    (:func:`~pytest_gym_eval.reporting.gym_metrics.with_gym_figures`). The gate lines are ``verdicts``' (the
    conclusion's list, :func:`~pytest_gym_eval.reporting.verdicts.gate_verdicts`; None: made from the summaries).
    """
    width = max(width, fmt.MIN_WIDTH)
    lines: list[str] = []
    if verdicts is None:
        verdicts = gate_verdicts(summaries)
    if gym_metrics:
        summaries = [s if s.gym is not None else with_gym_figures([s], results, gym_metrics)[0] for s in summaries]
    for index, summary in enumerate(summaries):
        if index:
            lines.append("")
        lines.append(_heading(summary, width))
        lines.extend(_summary_lines(summary, width, results, of_summary(verdicts, summary)))
        if verbose:
            lines.extend(_task_rows(summary, results, width))
    return lines


def _heading(summary: DatasetSummary, width: int) -> str:
    suffix = summary.title.removeprefix(summary.dataset)
    path = fmt.shorten_left(summary.dataset, max(width - len(suffix), width // 2))
    return fmt.trim_end(path + suffix, width)


def _summary_lines(
    summary: DatasetSummary, width: int, results: Sequence[RolloutResult], verdicts: Sequence[GateVerdict]
) -> list[str]:
    counts = (
        f"{fmt.plural(summary.tasks, 'task')}, {fmt.plural(summary.rollouts, 'rollout')} ({summary.scored} scored, "
        f"{fmt.plural(summary.errors, 'error')})"
    )
    if summary.unreported and not summary.rollouts:  # the session stopped before any rollout (Ctrl-C at start-up)
        counts = f"{fmt.plural(summary.unreported, 'rollout')} selected, none reported"
    elif summary.unreported:
        counts = (
            f"{fmt.plural(summary.tasks, 'task')}, {summary.rollouts} of {summary.selected} selected rollouts reported"
            f" ({summary.scored} scored, {fmt.plural(summary.errors, 'error')})"
        )
    if summary.wall_time > 0.0:
        counts += f", wall time {fmt.duration(summary.wall_time)}"
    lines = fmt.wrap(counts, width, "  ", "    ")
    if summary.unreported:
        lines += fmt.labelled(
            "unreported",
            f"{summary.unreported} of {summary.selected} selected rollouts never reported (the session stopped "
            "before Gym scored them: -x, --maxfail, an interrupt or a crash)",
            width,
        )
    if summary.not_counted:  # test functions' rollouts beyond the dataset's repeats, or skipped by their tests
        lines += fmt.labelled("not counted", summary.not_counted, width)
    if summary.adaptive is not None:  # --gym-adaptive: the waves, the rollouts spent against the ceiling
        lines += fmt.labelled("adaptive", summary.adaptive.describe(), width)
    if summary.errors:
        lines += fmt.labelled("errors", _errors_text(summary), width)
    lines += fmt.labelled(
        "mean reward",
        f"{fmt.interval(summary.mean_reward)}  {fmt.percent(summary.confidence)} CI "
        f"over {fmt.plural(summary.mean_reward.n, 'task')}",
        width,
    )
    lines += fmt.labelled(
        "pass rate",
        f"{fmt.interval(summary.pass_rate)}  Clopper-Pearson, {fmt.plural(summary.pass_rate.n, 'rollout')}, "
        f"threshold {fmt.threshold(summary.threshold)}",
        width,
    )
    if summary.rewards_beyond_unit:
        assert summary.reward_range is not None
        low, high = summary.reward_range
        lines += fmt.labelled(
            "rewards",
            f"from {fmt.number(low)} to {fmt.number(high)}, beyond [0, 1]: a rollout passes at reward >= "
            f"{fmt.threshold(summary.threshold)} (the pass threshold; per dataset: pass_threshold= in "
            "gym_dataset_settings)",
            width,
        )
    for k, interval in shown_pass_at_k(summary):
        note = "" if interval.n == summary.mean_reward.n else f"  {fmt.plural(interval.n, 'task')} with {k}+ scored"
        lines += fmt.labelled(f"pass@{k}", fmt.interval(interval) + note, width)
    lines += metric_lines(summary, width)
    lines += fractional_note(summary, results, width)
    lines += gym_lines(summary, width)
    lines += fmt.labelled("flaky tasks", _flaky_text(summary), width)
    lines += usage_lines(summary, width)
    lines += judge_noise_lines(summary, width)
    if summary.gates or summary.not_applicable:
        lines += fmt.labelled("gates", _gates_text(summary) if summary.gates else "none judged", width)
    for gate in verdicts:  # the verdict list's, in its order: the gates' results, then those not applicable
        lines += fmt.wrap(gate.text, width, "    ", "      ")
    if summary.gates:
        why = f" ({fmt.plural(summary.errors, 'rollout')} errored)" if summary.errors else ""
        lines += fmt.labelled(
            "verdict",
            worst(verdicts, summary.unjudged_errors) + why + selection_note(summary) + familywise_note(summary),
            width,
        )
    return lines


def worst(verdicts: Sequence[GateVerdict], errored: int = 0) -> str:
    """A summary's verdict from its gates' (``verdicts``): FAIL when any fails or ``errored`` rollouts no gate judges
    fail it, else INCONCLUSIVE when any is, else PASS (a gate not applicable counts as none)."""
    found = {verdict.verdict for verdict in verdicts}
    if Verdict.FAIL.value in found or errored:
        return Verdict.FAIL.value
    return Verdict.INCONCLUSIVE.value if Verdict.INCONCLUSIVE.value in found else Verdict.PASS.value


def familywise_note(summary: DatasetSummary) -> str:
    """`` (family-wise: Holm over 6 gates of the session)`` after a verdict some of whose gates were judged as one
    family (``--gym-familywise``), "" otherwise."""
    family = next((r.familywise for r in summary.gates if r.familywise is not None), None)
    return "" if family is None else f" (family-wise: {family.method} over {family.family} gates of the session)"


def metric_lines(summary: DatasetSummary, width: int) -> list[str]:
    """One line per custom metric test functions recorded (``metric boxed  0.83 [0.60, 1.00]  95% CI over 4
    tasks``): its mean with the mean reward's interval, clustered by task."""
    lines: list[str] = []
    for name, interval in summary.metrics.items():
        lines += fmt.labelled(
            f"metric {name}",
            f"{fmt.interval(interval)}  {fmt.percent(summary.confidence)} CI over {fmt.plural(interval.n, 'task')}",
            width,
        )
    return lines


def usage_lines(summary: DatasetSummary, width: int) -> list[str]:
    """The ``tokens``, ``cost`` and ``latency`` lines of a summary, each only when there is something to show:
    token totals (input, output, total, and over how many rollouts), the cost estimate at the user's prices,
    and the median and p95 of the latencies Gym recorded."""
    lines: list[str] = []
    tokens, latency = summary.tokens, summary.latency
    if tokens.rollouts:
        lines += fmt.labelled(
            "tokens",
            f"{tokens.total_tokens:,} total: {tokens.input_tokens:,} in, {tokens.output_tokens:,} out, "
            f"over {fmt.plural(tokens.rollouts, 'rollout')}",
            width,
        )
    if summary.cost is not None:
        lines += fmt.labelled("cost", f"{summary.cost:.4g} at the given prices per million tokens", width)
    if latency.n:
        lines += fmt.labelled(
            "latency",
            f"median {fmt.duration(latency.median)}, p95 {fmt.duration(latency.p95)} "
            f"over {fmt.plural(latency.n, 'rollout')}",
            width,
        )
    return lines


DOMINANCE_WORDS = {
    "judge": "dominated by the judge (a steadier judge, or more judgments of each answer, would narrow it)",
    "policy": "dominated by the policy (more tasks would narrow it, a steadier judge hardly)",
    "neither": "dominated by neither, as far as these rollouts tell",
}
"""What the ``judge noise`` line says of the mean reward's interval, by :data:`~pytest_gym_eval.stats.judge_noise.
Dominance`."""


def judge_noise_lines(summary: DatasetSummary, width: int) -> list[str]:
    """The ``judge noise`` line of a summary whose policy answers were judged more than once
    (:attr:`~pytest_gym_eval.reporting.summary.DatasetSummary.judge_noise`), when the judge varied or a judge's
    tokens were recorded: the judge's share of the reward's variance with its interval, how many answers were judged
    again and how often their judgments agree, and the judge's share of the mean reward interval's variance with
    whose that interval is. E.g. ``68% [20%, 100%] of the reward's variance is the judge's: 2 of 3 answers judged
    again (5 of 6 rollouts), 50% of their pairs of judgments agree; the mean reward's interval is 59% [12%, 100%]
    the judge's: dominated by neither, as far as these rollouts tell``."""
    noise = summary.judge_noise
    if noise is None or not (noise.judge_variance > 0.0 or summary.judge_tokens.rollouts):
        return []

    def share(estimate: float | None, low: float | None, high: float | None) -> str:
        if estimate is None or low is None or high is None or math.isnan(estimate):
            return "n/a"
        return f"{estimate:.0%} [{low:.0%}, {high:.0%}]"

    if math.isnan(noise.judge_share):  # no reward varied at all: no variance to split
        opening = f"none: every rollout got the same reward ({summary.mean_reward.estimate:.2f}), no variance to split"
    else:
        opening = (
            f"{share(noise.judge_share, noise.share_low, noise.share_high)} of the reward's variance is the judge's"
        )
    text = (
        f"{opening}: "
        f"{noise.repeated} of {fmt.plural(noise.answers, 'answer')} judged again ({noise.rejudged} of "
        f"{noise.judgments} rollouts), {noise.agreement:.0%} of their pairs of judgments agree"
    )
    if noise.dominated_by is not None:
        text += (
            f"; the mean reward's interval is "
            f"{share(noise.interval_share, noise.interval_low, noise.interval_high)} the judge's: "
            f"{DOMINANCE_WORDS[noise.dominated_by]}"
        )
    return fmt.labelled("judge noise", text, width)


def _errors_text(summary: DatasetSummary) -> str:
    """``model_http_429 2, bad_reward 1``: errors by failure class, most frequent first."""
    ranked = sorted(summary.error_classes.items(), key=lambda item: -item[1])
    return ", ".join(f"{name} {count}" for name, count in ranked)


def _flaky_text(summary: DatasetSummary) -> str:
    flaky = summary.flaky_tasks
    if not flaky:
        return "0"
    listed = ", ".join(fmt.trim_middle(task, _MAX_ID_CHARS) for task in flaky[:MAX_LISTED])
    more = f", … and {len(flaky) - MAX_LISTED} more" if len(flaky) > MAX_LISTED else ""
    return f"{len(flaky)} of {summary.tasks}: {listed}{more}"


def _gates_text(summary: DatasetSummary) -> str:
    mode = summary.gates[0].mode
    if summary.adaptive is not None and summary.adaptive.sequential and not summary.errors:
        confidence = fmt.percent(summary.confidence)
        return f"{len(summary.gates)} judged on the anytime-valid {confidence} confidence sequence (--gym-adaptive)"
    judged = "on the estimate" if mode is GateMode.POINT else f"on the {fmt.percent(summary.confidence)} interval"
    if any(result.familywise is not None for result in summary.gates):
        judged = "on intervals Holm adjusted for the session's family of gates"
    return f"{len(summary.gates)} judged {judged} ({mode.value} mode)"


def _task_rows(summary: DatasetSummary, results: Sequence[RolloutResult], width: int) -> list[str]:
    mine = [r for r in results if r.dataset == summary.dataset and (summary.agent is None or r.agent == summary.agent)]
    if not mine:
        return []
    cells = {task: _reward_cells(rollouts) for task, rollouts in by_task(mine).items()}
    cell_width = max(len(cell) for row in cells.values() for cell in row)
    id_width = min(max(fmt.columns(task) for task in cells), max(12, (width - 6) // 3))
    per_line = max(1, (width - id_width - 6 + 1) // (cell_width + 1))
    lines = fmt.wrap("rewards by task (r0, r1, ...; ERR = error, - = not run)", width, "  ", "    ")
    for task, row in cells.items():
        padded = [cell.rjust(cell_width) for cell in row]
        head = f"    {fmt.pad(fmt.trim_middle(task, id_width), id_width)}  "
        for start in range(0, len(padded), per_line):
            prefix = head if start == 0 else " " * fmt.columns(head)
            lines.append(prefix + " ".join(padded[start : start + per_line]))
    return lines


def _reward_cells(rollouts: Sequence[RolloutResult]) -> list[str]:
    """One cell per repeat 0..max: the reward, "ERR" for an error, "?" without a reward, "-" if not run."""
    by_repeat = {r.repeat: r for r in rollouts}
    cells: list[str] = []
    for repeat in range(max(by_repeat) + 1):
        rollout = by_repeat.get(repeat)
        if rollout is None:
            cells.append("-")
        elif rollout.status == "error":
            cells.append("ERR")
        elif rollout.reward is None:
            cells.append("?")
        else:
            cells.append(fmt.number(rollout.reward))
    return cells


def render_baseline(comparisons: Sequence[BaselineComparison], width: int = 80) -> list[str]:
    """Terminal lines comparing with the baseline: per comparison the change of mean reward (current -
    baseline) with its interval and two-sided p-value, then the tasks whose mean fell (at most
    :data:`MAX_LISTED`, then "… and N more"). No line is longer than ``width`` (at least 40 is used)."""
    width = max(width, fmt.MIN_WIDTH)
    lines: list[str] = []
    for index, item in enumerate(comparisons):
        if index:
            lines.append("")
        lines.append(
            fmt.trim_end(fmt.shorten_left(fmt.title(item.dataset, item.agent), width - 12) + " vs baseline", width)
        )
        lines.extend(_comparison_lines(item, width))
    return lines


def _comparison_lines(item: BaselineComparison, width: int) -> list[str]:
    paired = item.comparison
    if item.shared_tasks == 0:
        return fmt.wrap("no task was scored in both runs", width, "  ", "    ")
    lines = fmt.labelled(
        "change",
        f"{fmt.change(paired)}  {fmt.p_value(paired.p_value)}, paired t over {fmt.plural(item.shared_tasks, 'task')}, "
        f"{fmt.percent(item.confidence)} CI",
        width,
    )
    lines += fmt.labelled("fell", f"{len(item.dropped)} of {fmt.plural(item.shared_tasks, 'task')}", width)
    lines += fmt.labelled(
        "regressed",
        f"{len(item.regressed)} (passed on every baseline repeat, fail on every repeat now), improved "
        f"{len(item.improved)}; {fmt.p_value(item.mcnemar_p)}, McNemar exact over the tasks that flipped",
        width,
    )
    if item.regressed:
        listed = ", ".join(item.regressed[:MAX_LISTED])
        more = f", … and {len(item.regressed) - MAX_LISTED} more" if len(item.regressed) > MAX_LISTED else ""
        lines += fmt.wrap(listed + more, width, "    ", "    ")
    if not item.dropped:
        return lines
    shown = item.dropped[:MAX_LISTED]
    id_width = min(max(len(task) for task, _, _ in shown), max(12, width // 3))
    for task, before, after in shown:
        text = f"    {fmt.trim_middle(task, id_width):<{id_width}}  {fmt.number(before)} -> {fmt.number(after)}"
        lines.append(fmt.trim_end(text, width))
    if len(item.dropped) > MAX_LISTED:
        lines.append(f"    … and {len(item.dropped) - MAX_LISTED} more")
    return lines


def render_policies(
    comparisons: Sequence[PolicyComparison], width: int = 80, verdicts: Sequence[GateVerdict] | None = None
) -> list[str]:
    """Terminal lines of a session comparing policies: per dataset and candidate, ``DATASET: CAND vs BASE``, then
    the paired difference in mean reward (candidate - baseline) with its interval and both means over the pairs, the
    flips (McNemar's exact p when every reward is 0 or 1) with the tasks each side alone passes (at most
    :data:`MAX_LISTED`, then "… and N more"), and each comparison gate's verdict (``--gym-max-regression``,
    ``--gym-min-improvement``), one ``gate`` line each, with Gym's word for it
    (:func:`~pytest_gym_eval.stats.comparison.gym_verdict`), then with ``--gym-adaptive`` an ``adaptive`` line saying
    the gates were judged on the confidence sequence after how many waves and repeats; when the paired rollouts
    recorded them, a ``tokens`` line (each side's total and mean per rollout, with candidate / baseline of the
    means) and a ``latency`` line (each side's median, with candidate / baseline, and p95). No line is longer than
    ``width`` (at least 40 is used). The gate lines are ``verdicts``' (the conclusion's list; None: made from
    ``comparisons``)."""
    width = max(width, fmt.MIN_WIDTH)
    lines: list[str] = []
    if verdicts is None:
        verdicts = gate_verdicts((), comparisons)
    for index, item in enumerate(comparisons):
        if index:
            lines.append("")
        head = f": {item.candidate} vs {item.baseline}"
        lines.append(fmt.trim_end(fmt.shorten_left(item.dataset, max(width - len(head), width // 2)) + head, width))
        lines.extend(_policy_lines(item, width, of_comparison(verdicts, item)))
    return lines


def _policy_lines(item: PolicyComparison, width: int, verdicts: Sequence[GateVerdict]) -> list[str]:
    difference, flips = item.comparison.difference, item.comparison.flips
    if not difference.pairs:
        lines = fmt.wrap("no (task, repeat) was scored for both policies", width, "  ", "    ")
    else:
        delta = difference.interval
        sign = "+" if delta.estimate >= 0 else ""
        lines = fmt.labelled(
            "delta",
            f"{sign}{fmt.number(delta.estimate)} [{fmt.number(delta.low)}, {fmt.number(delta.high)}]  "
            f"{fmt.percent(difference.confidence)} CI over {fmt.plural(delta.n, 'task')}, paired",
            width,
        )
        means = f"{fmt.number(difference.baseline_mean)} {item.baseline}, {fmt.number(difference.candidate_mean)}"
        pairs = fmt.plural(difference.pairs, "rollout pair")
        lines += fmt.labelled("mean", f"{means} {item.candidate} ({pairs})", width)
        test = f"; McNemar exact {fmt.p_value(flips.p_value)}" if flips.binary else ""
        lines += fmt.labelled(
            "flips",
            f"{len(flips.only_baseline)} lost, {len(flips.only_candidate)} gained, {len(flips.both)} both pass, "
            f"{len(flips.neither)} neither{test}",
            width,
        )
        for label, tasks in (("lost", flips.only_baseline), ("gained", flips.only_candidate)):
            if tasks:
                more = f", … and {len(tasks) - MAX_LISTED} more" if len(tasks) > MAX_LISTED else ""
                lines += fmt.wrap(f"{label}: {', '.join(tasks[:MAX_LISTED])}{more}", width, "    ", "      ")
        lines += _policy_usage_lines(item, width)
    for verdict in verdicts:
        note = "" if verdict.decides else " (judged on a selection: does not decide)"
        lines += fmt.labelled("gate", verdict.text + note, width)
    if item.sequential:  # --gym-adaptive: the gates' interval is the sequence's, not the delta line's
        lines += fmt.labelled("adaptive", item.describe_waves(), width)
    return lines


def _policy_usage_lines(item: PolicyComparison, width: int) -> list[str]:
    """``tokens`` (``420 base, 600 cand; 140, 200 per rollout (x1.43)``) and ``latency`` (``median 2.0 s base, 3.0 s
    cand (x1.50); p95 3.8 s, 4.8 s``) over the pairs, each only when either side recorded it; ``xR`` is candidate /
    baseline (:func:`~pytest_gym_eval.outcomes.usage.ratio`), left out when it makes no sense; "-" for a side without
    it."""
    base, cand = item.baseline_usage, item.candidate_usage
    lines: list[str] = []
    if base.tokens.rollouts or cand.tokens.rollouts:
        totals = [f"{side.tokens.total_tokens:,}" if side.tokens.rollouts else "-" for side in (base, cand)]
        means = ["-" if side.tokens_per_rollout is None else f"{side.tokens_per_rollout:,.0f}" for side in (base, cand)]
        text = (
            f"{totals[0]} {item.baseline}, {totals[1]} {item.candidate}; {means[0]}, {means[1]} per rollout"
            f"{_times(ratio(cand.tokens_per_rollout, base.tokens_per_rollout))}"
        )
        lines += fmt.labelled("tokens", text, width)
    if base.latency.n or cand.latency.n:
        text = (
            f"median {_seconds(base.latency.median)} {item.baseline}, {_seconds(cand.latency.median)} {item.candidate}"
            f"{_times(ratio(cand.latency.median, base.latency.median))}; "
            f"p95 {_seconds(base.latency.p95)}, {_seconds(cand.latency.p95)}"
        )
        lines += fmt.labelled("latency", text, width)
    return lines


def _seconds(value: float) -> str:
    return "-" if math.isnan(value) else fmt.duration(value)


def _times(value: float | None) -> str:
    """`` (x1.25)`` ('' without a ratio)."""
    return "" if value is None else f" (x{value:.2f})"


def render_conclusion(
    conclusion: Conclusion,
    *,
    verbose: bool,
    results: Sequence[RolloutResult],
    width: int,
    gym_metrics: Mapping[str, AgentMetrics] | None = None,
) -> list[str]:
    """The body of the terminal's ``gym reward summary`` section (``gym_metrics``: see :func:`render_summary`)."""
    lines = render_summary(
        conclusion.summaries, verbose=verbose, results=results, width=width, gym_metrics=gym_metrics,
        verdicts=conclusion.verdicts or None,  # (None: a conclusion built without its list, in a test)
    )  # fmt: skip
    if not conclusion.summaries:  # Gym served on-demand rollouts only
        lines = textwrap.wrap(NO_DATASET_ROLLOUT, max(width, fmt.MIN_WIDTH), subsequent_indent="  ")
    if conclusion.policies:
        lines += ["", *render_policies(conclusion.policies, width=width, verdicts=conclusion.verdicts or None)]
    if conclusion.comparisons:
        lines += ["", *render_baseline(conclusion.comparisons, width=width)]
    if conclusion.flips is not None and conclusion.summaries:
        lines += ["", f"verifier flips against the recording: {flips_count(conclusion.flips, results)}"]
        for flip in conclusion.flips:  # node ids stay whole, to be copied into a command line
            recorded = ", ".join(str(r) for r in flip.recorded)
            lines += [f"  {flip.nodeid}", f"      reward {flip.reward:g}, recorded {recorded}"]
    if conclusion.reason:
        lines += ["", *textwrap.wrap(conclusion.reason, width, subsequent_indent="  ")]
    return lines
