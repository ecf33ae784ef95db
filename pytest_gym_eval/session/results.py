"""The session's results: every item's report taken as it comes (:class:`ResultsCollector`), the rule of which
rollouts count in their dataset's statistics (:func:`counts_in_dataset`, :func:`count_rollout`), and the list of
results the session concludes from: every rollout Gym wrote, in collection order (:func:`with_gym_records`,
:func:`in_collection_order`), with the selected counts and the quarantine the gates go by.

What one report says is read in :mod:`pytest_gym_eval.session.item_reports`; the conclusion drawn from the results
is :func:`pytest_gym_eval.session.conclude.conclude`, the exit status :mod:`pytest_gym_eval.session.status`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import date, datetime, timezone
from pathlib import Path
from typing import Literal

import pytest

from pytest_gym_eval.history.quarantine import Quarantine, QuarantineError, read_quarantine
from pytest_gym_eval.outcomes.causes import SESSION_STOPPED
from pytest_gym_eval.outcomes.custom_metrics import metrics_of, reasons_of
from pytest_gym_eval.outcomes.records import RolloutRecord
from pytest_gym_eval.reporting import summary as rpt
from pytest_gym_eval.session.item_reports import (
    GATE_SUFFIX,
    ROLLOUT_KEYS,
    TEST_ROLLOUT_COUNTED,
    TEST_ROLLOUT_KEYS,
    outcome_of_test,
    rollout_from_test_report,
    rollout_result,
)
from pytest_gym_eval.tasks.plan import PlannedRollout


def counts_in_dataset(repeat: int, dataset_repeats: int, count: bool = False) -> bool:
    """Whether a test function's (task, ``repeat``) pair counts in its dataset's statistics (reward summary, gates,
    reports): the one rule, with :func:`count_rollout` for skips.

    A pair counts when it is one of the dataset's own pairs, ``repeat < dataset_repeats`` (the repeats its items
    have: ``--gym-repeats``, ini ``gym_repeats``, ``repeats=`` in ``gym_dataset_settings``; 1 by default), so that
    a task weighs as much as its dataset items would make it weigh, whichever tests ask for it. A pair beyond them
    (a mark's ``repeats=3`` over a dataset of 1) is a diagnostic: rolled out, reported on the test, not counted.
    ``count=True`` (the mark's opt-in) counts every pair of the mark."""
    return count or repeat < dataset_repeats


@dataclass(frozen=True)
class TestUse:
    """One test function's use of a rollout, as its reports say: ``test`` its node id, ``counts`` the verdict of
    :func:`counts_in_dataset` on its pair, ``skipped`` whether it reported skipped (``pytest.skip``; an xfail is no
    skip), ``result`` the rollout's own verdict once the test got it (None before)."""

    __test__ = False  # not a pytest test class

    test: str
    counts: bool
    skipped: bool = False
    result: rpt.RolloutResult | None = None


CountReason = Literal["counted", "skipped", "beyond", "unreported"]


def count_rollout(
    item: rpt.RolloutResult | None, uses: Sequence[TestUse]
) -> tuple[CountReason, rpt.RolloutResult | None]:
    """Whether one rollout counts in its dataset's statistics, given its dataset item's result (None when no dataset
    item reported it) and the test functions that used it; returns ``(why, result)``, ``result`` the one counted.

    - ``counted``: the dataset item reported it, not skipped (its result: the pass hook decides it), or else a test
      function that counts it (:func:`counts_in_dataset`) got it and did not skip (the rollout's own verdict);
    - ``unreported``: a counting test function has not got it yet (it errored before, or never ran);
    - ``skipped``: every item that would count it skipped (``pytest.skip``, in the dataset item's fixtures or in the
      test function after it got the rollout): left out as a skipped dataset item is;
    - ``beyond``: only test functions whose pair lies beyond the dataset's repeats used it: a diagnostic."""
    if item is not None and item.status != "skipped":
        return "counted", item
    counting = [use for use in sorted(uses, key=lambda use: use.test) if use.counts and not use.skipped]
    if got := [use.result for use in counting if use.result is not None]:
        return "counted", got[0]
    if counting or (item is None and not uses):
        return "unreported", None
    if item is not None or any(use.counts for use in uses):
        return "skipped", None
    return "beyond", None


def not_counted_note(uses: Mapping[str, Sequence[TestUse]], reasons: Mapping[str, CountReason], repeats: int) -> str:
    """The summary's line of what a dataset's statistics left out of its test functions' rollouts (``uses`` and
    ``reasons`` by rollout node id, ``repeats`` the dataset's own), "" when nothing: "6 rollouts of test functions
    beyond the dataset's 1 repeat (test_x.py::test_a: repeats=3; count=True in the mark counts them); 1 skipped
    by its test (test_x.py::test_b[q1-r0])"."""
    beyond: dict[str, int] = {}  # test function -> the most repeats of its pairs
    count_beyond = 0
    skipped: list[str] = []
    for nodeid, why in reasons.items():
        if why == "beyond":
            count_beyond += 1
            for use in uses.get(nodeid, ()):
                function = use.test.split("[", 1)[0]
                repeat = int(nodeid.rpartition("[r")[2].rstrip("]") or 0)
                beyond[function] = max(beyond.get(function, 0), repeat + 1)
        elif why == "skipped":
            skipped += sorted(use.test for use in uses.get(nodeid, ()) if use.skipped)
    parts = []
    if count_beyond:
        marks = "; ".join(f"{name}: repeats={most}" for name, most in sorted(beyond.items()))
        parts.append(
            f"{count_beyond} rollout{'s' if count_beyond != 1 else ''} of test functions beyond the dataset's "
            f"{repeats} repeat{'s' if repeats != 1 else ''} ({marks}; count=True in the mark counts them)"
        )
    if skipped:
        parts.append(
            f"{len(skipped)} skipped by {'its test' if len(skipped) == 1 else 'their tests'} ({', '.join(skipped)})"
        )
    return "; ".join(parts)


@dataclass(eq=False)  # hashable by identity: pytest < 9.1 keeps registered plugins in a set
class ResultsCollector:
    """Every rollout item reported in this process, by node id (skipped items are left out).

    Registered as a pytest plugin, so it must stay hashable (``eq=False`` keeps ``object.__hash__``).
    """

    results: dict[str, rpt.RolloutResult] = field(default_factory=dict)
    starts: dict[str, float] = field(default_factory=dict)
    other_failures: set[str] = field(default_factory=set)
    """Node ids of items that are neither rollouts nor gate items and failed or errored (the gates never turn
    their failure into a green session)."""
    gates_expected: set[str] = field(default_factory=set)
    """Node ids of the ``gym-gate`` items the session selected (collection, or the xdist workers' collections)."""
    gates_reported: set[str] = field(default_factory=set)
    """Node ids of the ``gym-gate`` items that reported (any phase)."""
    gate_failures: set[str] = field(default_factory=set)
    """Node ids of the ``gym-gate`` items that failed or errored (their gates, or a crash: the session's exit
    status then cannot be 0, as their JUnit testcase is a failure)."""
    gates_passed: set[str] = field(default_factory=set)
    """Node ids of the ``gym-gate`` items whose call passed (pytest counts them passed)."""
    uses: dict[str, dict[str, TestUse]] = field(default_factory=dict)
    """Test functions' uses of rollouts: ``uses[rollout node id][test node id]`` (:meth:`take_use`)."""
    metrics: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)
    """Custom metrics test functions recorded (``rollout.record_metric``): ``metrics[rollout node id][test node id]``
    maps name -> value, as the test's latest report carries them."""
    metric_reasons: dict[str, dict[str, dict[str, str]]] = field(default_factory=dict)
    """The reasons given with them (``record_metric(..., reason=...)``), the same way: name -> text."""
    tests_reported: set[str] = field(default_factory=set)
    """Node ids, without their parametrization, of the test functions over a rollout (``gym_rollouts``) that
    reported: whether a ``gym_rollouts`` mark's gate applies
    (:func:`~pytest_gym_eval.session.conclude.marks_of_tests_run`)."""
    test_outcomes: dict[str, rpt.TestOutcome] = field(default_factory=dict)
    """How each test function over a rollout ended, by its node id
    (:func:`~pytest_gym_eval.session.item_reports.outcome_of_test`), in report order."""
    stopped_by_maxfail: bool = False
    """pytest-xdist ended the session for ``-x``/``--maxfail`` (with its own ``Interrupted``, a KeyboardInterrupt):
    pytest's status then says "interrupted", though nobody interrupted anything."""

    def pytest_keyboard_interrupt(self, excinfo: pytest.ExceptionInfo[BaseException]) -> None:
        """Tell pytest-xdist's stop for ``-x``/``--maxfail`` ("stopping after N failures") from Ctrl-C."""
        value = excinfo.value
        self.stopped_by_maxfail = type(value).__name__ == "Interrupted" and str(value).startswith("stopping after ")

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Take one phase's report (registered as a plugin, this is a pytest hook)."""
        self.starts.setdefault(report.nodeid, report.start)  # setup: waiting for the rollout counts too
        self.take_use(report)
        self.take_metrics(report)
        if (outcome := outcome_of_test(report, self.test_outcomes.get(report.nodeid))) is not None:
            self.test_outcomes[report.nodeid] = outcome
        result = rollout_result(report, self.results.get(report.nodeid))
        if result is not None:
            self.results[report.nodeid] = replace(result, start=self.starts[report.nodeid])
        elif report.nodeid.endswith(GATE_SUFFIX):
            self.gates_reported.add(report.nodeid)
            if report.failed:
                self.gate_failures.add(report.nodeid)
                self.gates_passed.discard(report.nodeid)  # (a teardown that failed after a call that passed)
            elif report.when == "call" and report.passed:
                self.gates_passed.add(report.nodeid)
        elif report.failed and report.nodeid not in self.results:
            self.other_failures.add(report.nodeid)

    def take_use(self, report: pytest.TestReport) -> None:
        """Note a test function's use of a rollout (its ``gym_rollout`` property): whether its pair counts, whether
        it skipped, and the rollout's verdict once its setup got it (:func:`count_rollout` decides at the end)."""
        if not report.user_properties:
            return
        props = dict(report.user_properties)
        rollout = props.get(TEST_ROLLOUT_KEYS[0])
        if not isinstance(rollout, str) or "::" not in rollout or all(key in props for key in ROLLOUT_KEYS):
            return
        uses = self.uses.setdefault(rollout, {})
        use = uses.get(report.nodeid) or TestUse(report.nodeid, bool(props.get(TEST_ROLLOUT_COUNTED, True)))
        skipped = report.skipped and not hasattr(report, "wasxfail")
        uses[report.nodeid] = replace(
            use, skipped=use.skipped or skipped, result=rollout_from_test_report(report) or use.result
        )

    def counting(self) -> dict[str, tuple[CountReason, rpt.RolloutResult | None]]:
        """Per rollout node id any item reported, in report order, whether it counts (:func:`count_rollout`)."""
        return {
            nodeid: count_rollout(self.results.get(nodeid), list(self.uses.get(nodeid, {}).values()))
            for nodeid in dict.fromkeys([*self.results, *self.uses])
        }

    def left_out(self, nodeid: str) -> bool:
        """Whether the rollout ``nodeid`` reported and is left out of its dataset's statistics: every item that
        would count it skipped, or only test functions beyond the dataset's repeats used it (:func:`count_rollout`)."""
        if nodeid not in self.results and nodeid not in self.uses:
            return False
        why, _ = count_rollout(self.results.get(nodeid), list(self.uses.get(nodeid, {}).values()))
        return why in ("skipped", "beyond")

    def not_counted(self, repeats: Callable[[str], int]) -> dict[str, str]:
        """Per dataset, the summary's line of its test functions' rollouts left out (:func:`not_counted_note`;
        ``repeats`` gives a dataset's own repeats by name); datasets with nothing left out have no key."""
        reasons: dict[str, dict[str, CountReason]] = {}
        for nodeid, (why, _) in self.counting().items():
            if why in ("skipped", "beyond") and nodeid in self.uses:
                reasons.setdefault(nodeid.split("::", 1)[0], {})[nodeid] = why
        notes = {
            dataset: not_counted_note({n: list(self.uses[n].values()) for n in found}, found, repeats(dataset))
            for dataset, found in reasons.items()
        }
        return {dataset: note for dataset, note in notes.items() if note}

    def take_metrics(self, report: pytest.TestReport) -> None:
        """Note the custom metrics a test function's report carries for its rollout (``gym_rollout``): every phase's
        report carries all the test recorded so far, so the latest one holds them all."""
        if not report.user_properties:
            return
        props = dict(report.user_properties)
        rollout = props.get(TEST_ROLLOUT_KEYS[0])
        if isinstance(rollout, str):
            self.tests_reported.add(report.nodeid.partition("[")[0])
        found = metrics_of(report.user_properties)
        if isinstance(rollout, str) and found:
            self.metrics.setdefault(rollout, {})[report.nodeid] = found
            reasons = {name: text for name, text in reasons_of(report.user_properties).items() if name in found}
            self.metric_reasons.setdefault(rollout, {})[report.nodeid] = reasons

    def rollout_metrics(self, nodeid: str) -> tuple[tuple[str, float], ...]:
        """The custom metrics of one rollout, sorted by name: a metric several test functions recorded for it is
        the mean of their values."""
        by_name: dict[str, list[float]] = {}
        for recorded in self.metrics.get(nodeid, {}).values():
            for name, value in recorded.items():
                by_name.setdefault(name, []).append(value)
        return tuple((name, math.fsum(values) / len(values)) for name, values in sorted(by_name.items()))

    def rollout_metric_reasons(self, nodeid: str) -> tuple[tuple[str, str], ...]:
        """The reasons given with one rollout's custom metrics, sorted by name: when several test functions gave
        one for the same metric, their distinct reasons joined by ``; `` (test order)."""
        by_name: dict[str, list[str]] = {}
        for recorded in self.metric_reasons.get(nodeid, {}).values():
            for name, text in recorded.items():
                if text not in by_name.setdefault(name, []):
                    by_name[name].append(text)
        return tuple((name, "; ".join(texts)) for name, texts in sorted(by_name.items()))

    def unjudged_gates(self) -> list[str]:
        """Node ids of selected ``gym-gate`` items that never reported (the session ended before they ran), sorted."""
        return sorted(self.gates_expected - self.gates_reported)

    def rollouts(self) -> list[rpt.RolloutResult]:
        """The reported rollouts that count in their datasets' statistics (:func:`count_rollout`: skipped ones and
        test functions' diagnostics left out), in report order, each with its custom metrics."""
        counted = [r for why, r in self.counting().values() if why == "counted" and r is not None]
        return [
            replace(
                r,
                metrics=self.rollout_metrics(r.nodeid),
                metric_reasons=self.rollout_metric_reasons(r.nodeid),
            )
            if r.nodeid in self.metrics
            else r
            for r in counted
            if r.status in ("passed", "failed", "error")
        ]


def with_gym_records(
    reported: Sequence[rpt.RolloutResult],
    selected: Sequence[PlannedRollout],
    records: Mapping[int, RolloutRecord],
    judged: Callable[[PlannedRollout, RolloutRecord], rpt.RolloutResult],
) -> list[rpt.RolloutResult]:
    """Every rollout Gym wrote, whether or not its item reported it: ``reported`` (the items' results), and for
    each of the ``selected`` rollouts that Gym wrote (``records``, by plan stamp: what the run directory's output
    files hold at report time) but whose item never reported it, or reported only that the session stopped before
    it arrived, the result ``judged`` makes of its record. So a session cut short (Ctrl-C while pytest waits in an
    early item, ``-x``, an xdist worker killed) reports every rollout Gym scored, and a selected rollout is
    *unreported* only when Gym never wrote it. Results in ``reported``'s order, the added ones after them in
    ``selected``'s order."""
    by_nodeid = {result.nodeid: result for result in reported}
    for rollout in selected:
        record = records.get(rollout.stamp)
        if record is None:
            continue
        known = by_nodeid.get(rollout.nodeid)
        if known is None or (known.status == "error" and known.failure_class == SESSION_STOPPED):
            by_nodeid[rollout.nodeid] = judged(rollout, record)
    return list(by_nodeid.values())


def in_collection_order(
    found: Sequence[rpt.RolloutResult],
    planned: Sequence[PlannedRollout],
    eval_started: float | None,
    landed: Mapping[str, float] | None = None,
) -> list[rpt.RolloutResult]:
    """``found`` (the reported rollouts) in the order of ``planned`` (the run plan's rollouts; unplanned ones last, by
    node id), since xdist reports arrive in any order and the summary must not depend on it. With ``eval_started``
    (``time.time()`` when the first ``gym eval run`` started) no rollout starts earlier: an item starts waiting before
    Gym has started, and the dataset whose item ran first would otherwise count Gym's start-up as its wall time.

    With ``landed`` (node id -> ``time.time()`` when Gym's record of it landed, as the owner's feed saw it) a
    rollout's time is Gym's, not its item's: from ``eval_started`` to its landing. So a dataset's wall time is what
    Gym took for its rollouts, whatever pytest ran before its items (a test file named first on the command line
    made it the few milliseconds its items took to read rollouts that had landed long before)."""
    order = {rollout.nodeid: rollout.stamp for rollout in planned}
    ordered = sorted(found, key=lambda r: (order.get(r.nodeid, len(order)), r.nodeid))
    if eval_started is None:
        return ordered
    times = landed or {}
    return [
        replace(r, start=eval_started, stop=times[r.nodeid])
        if r.nodeid in times
        else (r if r.start >= eval_started else replace(r, start=eval_started))
        for r in ordered
    ]


def selected_counts(selected: Sequence[PlannedRollout], quarantine: Quarantine | None) -> dict[str, dict[str, int]]:
    """Per dataset (node-id path) and agent, how many of the ``selected`` rollouts the gates expect: a task
    ``quarantine`` leaves out of the gates is not counted (it is not a rollout they miss)."""
    counts: dict[str, dict[str, int]] = {}
    for planned in selected:
        name = planned.nodeid.split("::", 1)[0]
        if quarantine is not None and quarantine.entry_for(name, planned.task_id):
            continue
        per_agent = counts.setdefault(name, {})
        per_agent[planned.agent] = per_agent.get(planned.agent, 0) + 1
    return counts


def read_session_quarantine(path: Path | None, today: date | None = None) -> Quarantine | None:
    """The ``--gym-quarantine`` list at ``path`` as of ``today`` (UTC by default), None without one. Raises
    :class:`pytest.UsageError` naming the file (and line) when it cannot be read or a line is malformed."""
    if path is None:
        return None
    try:
        return read_quarantine(path, today=today or datetime.now(timezone.utc).date())
    except QuarantineError as error:
        raise pytest.UsageError(f"--gym-quarantine: {error}") from None
