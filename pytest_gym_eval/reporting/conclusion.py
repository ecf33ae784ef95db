"""What the end of a session reports (:class:`Conclusion`): the reward summaries with the session's exit status and
its reason, the comparisons with a baseline report (:class:`BaselineComparison`) and between policy models
(:class:`PolicyComparison`), the verifier flips against a replayed recording (:class:`Flip`), the quarantine and
history lines. The summaries themselves: :mod:`pytest_gym_eval.reporting.summary`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from pytest_gym_eval.outcomes.usage import SideUsage
from pytest_gym_eval.reporting.summary import DatasetSummary, RolloutResult, TestOutcome
from pytest_gym_eval.stats.comparison import Comparison, ComparisonResult, Hypothesis
from pytest_gym_eval.stats.intervals import PairedComparison
from pytest_gym_eval.stats.sequential import DEFAULT_ALPHA


@dataclass(frozen=True)
class Flip:
    """A replayed rollout whose reward differs from the reward recorded with the answer it was served (for an
    untagged rollout, from every reward recorded for its task's request)."""

    nodeid: str
    reward: float
    recorded: tuple[object, ...]


def flips_count(flips: Sequence[Flip], results: Sequence[RolloutResult]) -> str:
    """How many verifier flips against the recording ``results`` show, as the reports print it: the number,
    ``none``, or ``not judged: no rollout scored`` when no result has a reward to compare."""
    if flips:
        return str(len(flips))
    return "none" if any(result.score is not None for result in results) else "not judged: no rollout scored"


@dataclass(frozen=True)
class BaselineComparison:
    """Per-task mean rewards of one dataset (one agent, when the dataset has several) now vs a baseline.

    ``shared_tasks`` counts the tasks both runs scored; ``comparison`` is the paired t-test of current minus
    baseline over those tasks (reward units); ``dropped`` lists ``(task_id, baseline mean, current mean)``
    for each shared task whose mean fell, largest fall first; ``confidence`` is the interval's level.
    ``regressed`` lists the shared tasks that passed on every scored baseline repeat and fail on every scored
    current one, ``improved`` the reverse; ``mcnemar_p`` is McNemar's exact two-sided p-value over those two
    counts (:func:`~pytest_gym_eval.stats.exact_tests.mcnemar_exact`: is there a direction to the tasks that flipped?).
    """

    dataset: str
    agent: str | None
    shared_tasks: int
    comparison: PairedComparison
    dropped: list[tuple[str, float, float]]
    confidence: float = 0.95
    regressed: tuple[str, ...] = ()
    improved: tuple[str, ...] = ()
    mcnemar_p: float = 1.0


@dataclass(frozen=True)
class PolicyComparison:
    """One candidate policy against the baseline policy on one dataset, in a session comparing policies
    (``--gym-policy``; :func:`~pytest_gym_eval.reporting.policies.compare_policies` makes them).

    ``comparison`` holds the paired difference, the flips and the results of the comparison gates set
    (``--gym-max-regression``, then ``--gym-min-improvement``);
    ``decides`` is False when the dataset was judged on a selection by name, marker or last outcome (its result is
    shown but, as with the other gates, does not set the exit status); ``baseline_usage`` and ``candidate_usage``
    each side's tokens and latency over the rollouts of the pairs
    (:func:`~pytest_gym_eval.reporting.policies.paired_usage`); ``waves`` (``--gym-adaptive``), when the gates were
    judged on the anytime-valid sequence of the waves (results marked ``sequential``), the cumulative repeats per
    task at the end of each wave (empty: judged on the fixed-sample interval), out of ``max_repeats`` selected.
    """

    dataset: str
    baseline: str
    candidate: str
    comparison: Comparison
    decides: bool = True
    baseline_usage: SideUsage = field(default_factory=SideUsage)
    candidate_usage: SideUsage = field(default_factory=SideUsage)
    waves: tuple[int, ...] = ()
    max_repeats: int = 0

    @property
    def sequential(self) -> bool:
        """Whether the gates were judged on ``--gym-adaptive``'s anytime-valid sequence."""
        return bool(self.waves) and any(result.sequential for result in self.comparison.results)

    @property
    def repeats(self) -> int:
        """The repeats per task the gates were judged on (the last wave's end; 0 when not sequential)."""
        return self.waves[-1] if self.sequential else 0

    def describe_waves(self) -> str:
        """E.g. ``judged on the anytime-valid 95% confidence sequence: 2 waves, 4 of 8 repeats per task``."""
        waves = len(self.waves)
        of = f" of {self.max_repeats}" if self.max_repeats else ""
        return (
            f"judged on the anytime-valid {1 - DEFAULT_ALPHA:.0%} confidence sequence: {waves} wave"
            f"{'s' if waves != 1 else ''}, "
            f"{self.repeats}{of} repeats per task"
        )

    @property
    def usage_recorded(self) -> bool:
        """Whether either side's paired rollouts recorded tokens or a latency."""
        return self.baseline_usage.recorded or self.candidate_usage.recorded

    @property
    def result(self) -> ComparisonResult | None:
        """The ``--gym-max-regression`` (non-inferiority) gate's result, None without the gate."""
        return self.gate_result(Hypothesis.NON_INFERIORITY)

    def gate_result(self, hypothesis: Hypothesis) -> ComparisonResult | None:
        """The result of the gate claiming ``hypothesis`` (``--gym-min-improvement``: SUPERIORITY), None without
        it."""
        return next((r for r in self.comparison.results if r.gate.hypothesis is hypothesis), None)


NOT_APPLICABLE = "NOT_APPLICABLE"
"""The verdict of a session-wide custom metric gate on a dataset none of whose rollouts recorded the metric."""


@dataclass(frozen=True)
class GateVerdict:
    """One gate's verdict on one dataset (or policy pair), as every output shows it.

    ``dataset`` the dataset's node-id path; ``subject`` what was judged, as the reports title it (``mcqa.jsonl``,
    ``mcqa.jsonl (policy cand)``, ``mcqa.jsonl cand vs base``); ``policy`` the policy model (a comparison: the
    candidate), else None; ``kind`` the gate's kind (``mean_reward``, ``pass_rate``, ``pass_at_k``, ``custom``,
    ``non-inferiority``, ``superiority``, ``errors``, ``max_drop``, ``max_regressed_tasks``, ``flips``, ``replay``);
    ``gate`` its words (``mean reward >= 0.70``); ``statistic`` the estimate judged and ``bound`` the bound that
    decided (reward units or a probability; None when none applies or there was no data); ``threshold`` the
    gate's; ``verdict`` PASS, FAIL, INCONCLUSIVE or NOT_APPLICABLE; ``message`` one line saying why; ``decides``
    False when the gate was judged on a selection by name, marker or last outcome (it sets no exit status);
    ``fails`` whether it fails the session (a deciding FAIL, or INCONCLUSIVE unless ``--gym-inconclusive=pass``);
    ``detail`` the gate's line as the terminal shows it, without the subject (its figures and verdict, where the gate
    was set, an INCONCLUSIVE one's hint; :attr:`text`); ``brief`` the few words the session's one-line reason gives
    a failing gate (:func:`~pytest_gym_eval.reporting.verdicts.session_status`; not in the JSON report, which holds
    the reason itself)."""

    dataset: str
    subject: str
    policy: str | None
    kind: str
    gate: str
    statistic: float | None
    bound: float | None
    threshold: float | None
    verdict: str
    message: str
    decides: bool = True
    fails: bool = False
    detail: str = ""
    brief: str = ""

    @property
    def text(self) -> str:
        """The gate's line without the subject: :attr:`detail`, else the message's words after the subject (a
        report written before the verdicts carried their detail)."""
        return self.detail or self.message.removeprefix(f"{self.subject}: ")

    @property
    def key(self) -> tuple[str, str]:
        """What tells this verdict from every other of the session: its subject and gate words."""
        return (self.subject, self.gate)

    def to_json(self) -> dict[str, Any]:
        """The JSON report's entry (``verdicts``; report.schema.json): every field, non-finite numbers as null."""

        def number(value: float | None) -> float | None:
            return value if value is not None and math.isfinite(value) else None

        return {
            "dataset": self.dataset,
            "subject": self.subject,
            "policy": self.policy,
            "kind": self.kind,
            "gate": self.gate,
            "statistic": number(self.statistic),
            "bound": number(self.bound),
            "threshold": number(self.threshold),
            "verdict": self.verdict,
            "message": self.message,
            "decides": self.decides,
            "fails": self.fails,
            "detail": self.text,
        }


@dataclass(frozen=True)
class Conclusion:
    """Everything the end of the session reports; ``exit_status`` is -1 when no gate of any kind is set
    (pytest's own status then holds), else 0 or 1 (1 exactly when one of :attr:`verdicts` fails), with ``reason``
    saying why in one line."""

    summaries: list[DatasetSummary]
    comparisons: list[BaselineComparison]
    flips: list[Flip] | None  # None when no recording was replayed
    exit_status: int
    reason: str
    quarantined: tuple[str, ...] = ()
    """One line per quarantine entry that applied (its task left out of the summaries and gates) or expired."""
    history: tuple[str, ...] = ()
    """The ``--gym-history`` lines (each dataset's stability and drift, new flakes and failures, or why the history
    was not written) that the pages show (:mod:`pytest_gym_eval.reporting.run_history`)."""
    policies: tuple[PolicyComparison, ...] = ()
    """With two or more ``--gym-policy``: each candidate against the baseline, per dataset (empty otherwise)."""
    tests: tuple[TestOutcome, ...] = ()
    """How each test function over a dataset's rollout (``gym_rollouts``) ended, in report order."""
    verdicts: tuple[GateVerdict, ...] = ()
    """Every gate's verdict (:func:`~pytest_gym_eval.reporting.verdicts.gate_verdicts`), made once where the session
    or ``merge`` concludes: what every output renders its gates from."""
    warnings: tuple[str, ...] = ()
    """What the verdicts cannot say of how their gates were judged, one line each, told by every output beside them:
    a custom metric's gate judged on fewer rollouts than its test functions got
    (:func:`metric_gate_gaps`; set with the tests, :meth:`with_tests`)."""

    def with_tests(self, tests: Sequence[TestOutcome]) -> Conclusion:
        """This conclusion with the test functions' outcomes (``tests``) and the :attr:`warnings` they imply."""
        return replace(self, tests=tuple(tests), warnings=tuple(metric_gate_gaps(self.summaries, tests)))


def metric_gate_gaps(summaries: Sequence[DatasetSummary], tests: Sequence[TestOutcome]) -> list[str]:
    """A warning for each custom metric's gate judged on fewer rollouts than its dataset's test functions got:
    ``metric NAME's gate on DATASET is judged on K of N rollouts its test functions got`` (the other rollouts'
    tests recorded no ``NAME``, e.g. an ``assert`` failed before ``record_metric``; ``rollout.expect`` records it
    whatever a check says). ``tests`` are the session's test outcomes (:class:`TestOutcome`); a skipped test's
    rollout is not counted as got. One line a (dataset, metric), in the summaries' order."""
    got: dict[str, set[str]] = {}
    recorded: dict[tuple[str, str], set[str]] = {}
    for test in tests:
        if test.outcome == "skipped":
            continue
        got.setdefault(test.dataset, set()).add(test.rollout)
        for recorded_name, _ in test.metrics:
            recorded.setdefault((test.dataset, recorded_name), set()).add(test.rollout)
    lines: list[str] = []
    for summary in summaries:
        for result in summary.gates:
            name = result.gate.custom
            if name is None:
                continue
            seen, judged = got.get(summary.dataset, set()), recorded.get((summary.dataset, name), set())
            line = (
                f"metric {name}'s gate on {summary.dataset} is judged on {len(judged)} of {len(seen)} rollouts its "
                f"test functions got: the others' tests recorded no {name} (a failed assert before record_metric? "
                "rollout.expect records it whatever a check says)"
            )
            if len(judged) < len(seen) and line not in lines:
                lines.append(line)
    return lines
