"""What a session concludes from its rollouts: the reward summary, the CI gates, the comparison with a
baseline, the rollouts whose reward differs from a replayed recording, and the exit status they imply.

Results come from the items' test reports (their ``user_properties``), so under pytest-xdist the controller
sees every worker's rollouts exactly as a single process sees its own. The numbers themselves are computed
by the pure functions of :mod:`pytest_gym_eval.reporting`.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import date, datetime, timezone
from pathlib import Path
from typing import Any, Literal

import pytest

from pytest_gym_eval.history.quarantine import (
    Quarantine,
    QuarantineError,
    read_quarantine,
    split_gated,
    unmatched,
    unmatched_warning,
)
from pytest_gym_eval.options.gym_options import GymOptions
from pytest_gym_eval.outcomes.causes import SESSION_STOPPED, redact
from pytest_gym_eval.outcomes.custom_metrics import metrics_of, reasons_of
from pytest_gym_eval.outcomes.records import RolloutRecord, records_at
from pytest_gym_eval.outcomes.usage import usage_from_properties
from pytest_gym_eval.reporting import baseline as bl
from pytest_gym_eval.reporting import summary as rpt
from pytest_gym_eval.reporting.conclusion import Conclusion, Flip, PolicyComparison
from pytest_gym_eval.reporting.policies import (
    compare_policies,
    comparison_failures,
    familywise_session,
    label_policies,
)
from pytest_gym_eval.reporting.verdicts import gate_verdicts
from pytest_gym_eval.stats.gates import Gate, GateSource, Verdict
from pytest_gym_eval.stats.sequential import AdaptiveRecord
from pytest_gym_eval.tasks.plan import PlannedRollout
from pytest_gym_eval.tasks.selection import Selection

GATE_SUFFIX = "::gym-gate"
"""How a dataset's gate item's node id ends."""

ROLLOUT_KEYS = ("task_id", "repeat", "agent")
"""``user_properties`` every rollout item carries from collection on; ``reward``, ``failure_class`` and
``record`` join them once its rollout is judged, and the tokens and latency Gym recorded
(:meth:`~pytest_gym_eval.outcomes.usage.Usage.properties`) and the digest of the policy's answer (``answer``)."""


def rollout_result(report: pytest.TestReport, previous: rpt.RolloutResult | None) -> rpt.RolloutResult | None:
    """The :class:`~pytest_gym_eval.reporting.summary.RolloutResult` a rollout item's report adds to ``previous`` (the
    same item's earlier phase), or None for a report that is not a rollout item's."""
    props = dict(report.user_properties)
    if not all(key in props for key in ROLLOUT_KEYS):
        return None
    status = previous.status if previous is not None else None
    # An xfail mark turns a failed phase into a skipped report with ``wasxfail``: the rollout still errored
    # (setup, with its failure class) or failed its judgement (call), and counts so in the summary. A strict
    # xfail's unexpected pass is a failed report, of a rollout that passed.
    xfailed = report.skipped and hasattr(report, "wasxfail")
    if report.when == "setup" and (report.failed or (xfailed and "failure_class" in props)):
        status = "error"
    elif report.when == "call":
        strict_xpass = report.failed and str(report.longrepr).startswith("[XPASS(strict)]")
        status = "passed" if report.passed or strict_xpass else "failed" if report.failed or xfailed else "skipped"
    elif report.when == "setup" and report.skipped:
        status = "skipped"
    if status is None:
        return None
    reward = props.get("reward")
    return rpt.RolloutResult(
        nodeid=report.nodeid,
        dataset=report.nodeid.split("::", 1)[0],
        task_id=str(props["task_id"]),
        repeat=int(str(props["repeat"])),
        agent=str(props["agent"]),
        status=status,
        reward=float(str(reward)) if reward is not None else None,
        failure_class=str(props["failure_class"]) if props.get("failure_class") else None,
        record=str(props["record"]) if props.get("record") else None,
        start=previous.start if previous is not None else report.start,
        stop=report.stop,
        usage=usage_from_properties(props),
        answer=str(props["answer"]) if props.get("answer") else None,
    )


TEST_ROLLOUT_KEYS = ("gym_rollout", "gym_rollout_status", "gym_rollout_agent")
"""``user_properties`` of a test function that got a rollout from the ``gym_rollout`` fixture: the node id the
dataset's own item for that pair has, the plugin's verdict on the rollout (``passed``, ``failed``, ``error``) and its
agent (:mod:`pytest_gym_eval.session.rollout_tests`); ``reward``, ``failure_class``, ``record`` and the usage follow."""


def rollout_from_test_report(report: pytest.TestReport) -> rpt.RolloutResult | None:
    """The dataset's rollout a test function's setup report says it got (``gym_rollout``), as its dataset item would
    report it: the rollout's own verdict, not the test's; None for any other report."""
    if report.when != "setup" or not report.user_properties:
        return None
    props = dict(report.user_properties)
    nodeid, status, agent = (props.get(key) for key in TEST_ROLLOUT_KEYS)
    if not isinstance(nodeid, str) or status not in ("passed", "failed", "error") or "::" not in nodeid:
        return None
    dataset, _, name = nodeid.partition("::")
    task_id, _, repeat = name.rpartition("[r")
    reward = props.get("reward")
    return rpt.RolloutResult(
        nodeid=nodeid,
        dataset=dataset,
        task_id=task_id,
        repeat=int(repeat.rstrip("]")),
        agent=str(agent),
        status=str(status),
        reward=float(str(reward)) if reward is not None else None,
        failure_class=str(props["failure_class"]) if props.get("failure_class") else None,
        record=str(props["record"]) if props.get("record") else None,
        start=report.start,
        stop=report.stop,
        usage=usage_from_properties(props),
        answer=str(props["answer"]) if props.get("answer") else None,
    )


MAX_MESSAGE = 2000
"""Characters of a test function's failure message the reports keep (its start)."""


def outcome_of_test(report: pytest.TestReport, previous: rpt.TestOutcome | None) -> rpt.TestOutcome | None:
    """How a test function over a rollout ended so far (:class:`~pytest_gym_eval.reporting.summary.TestOutcome`),
    from one phase's ``report`` and the same test's ``previous`` phases; None for a report that is no such test's
    (none names a ``gym_rollout``, or it is a dataset's own rollout item). The first phase that did not pass sets
    the outcome and its message; the metrics and reasons are the latest report's (each phase carries them all).
    Anything that looks like an API key is redacted from the message (:func:`~pytest_gym_eval.outcomes.causes.
    redact`)."""
    props = dict(report.user_properties) if report.user_properties else {}
    rollout = props.get(TEST_ROLLOUT_KEYS[0])
    if not isinstance(rollout, str) or "::" not in rollout or all(key in props for key in ROLLOUT_KEYS):
        return None
    dataset, _, name = rollout.partition("::")
    task_id, _, tail = name.rpartition("[r")
    digits = "".join(itertools.takewhile(str.isdigit, tail))
    outcome, message = (previous.outcome, previous.message) if previous is not None else ("passed", "")
    if outcome == "passed" and not report.passed:
        wasxfail = hasattr(report, "wasxfail")
        if report.skipped:
            outcome = "xfailed" if wasxfail else "skipped"
        else:
            outcome = "failed" if report.when == "call" else "error"
        message = _message(report)
    return rpt.TestOutcome(
        test=report.nodeid,
        rollout=rollout,
        dataset=dataset,
        task_id=task_id or name,
        repeat=int(digits) if digits else 0,
        outcome=outcome,
        message=message,
        metrics=tuple(sorted(metrics_of(report.user_properties).items())),
        reasons=tuple(sorted(reasons_of(report.user_properties).items())),
    )


def _message(report: pytest.TestReport) -> str:
    """Why ``report``'s phase did not pass: a skip's or xfail's reason, a failure's crash line (``AssertionError:
    ...``), or a text failure's whole text (``pytest.fail``: the failed soft expectations), cut to
    :data:`MAX_MESSAGE` characters and redacted."""
    longrepr = report.longrepr
    if report.skipped and hasattr(report, "wasxfail"):
        text = str(getattr(report, "wasxfail", "")) or "expected to fail"
    elif isinstance(longrepr, tuple) and len(longrepr) == 3:  # a skip: (path, line, reason)
        text = str(longrepr[2]).removeprefix("Skipped: ")
    elif (crash := getattr(longrepr, "reprcrash", None)) is not None and isinstance(crash.message, str):
        text = crash.message.removeprefix("Failed: ")  # pytest.fail's text as given
    else:
        text = str(longrepr or "")
    return redact(text.strip())[:MAX_MESSAGE]


TEST_ROLLOUT_COUNTED = "gym_rollout_counted"
"""``user_properties`` key of a test function over a rollout: whether its pair counts in the dataset's statistics
(:func:`counts_in_dataset`); with ``gym_rollout`` it is on the test from collection on, so that even a test skipped
before it got its rollout names it."""


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
    reported: whether a ``gym_rollouts`` mark's gate applies (:func:`marks_of_tests_run`)."""
    test_outcomes: dict[str, rpt.TestOutcome] = field(default_factory=dict)
    """How each test function over a rollout ended, by its node id (:func:`outcome_of_test`), in report order."""
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


def dataset_policy(options: GymOptions, datasets: Sequence[str]) -> tuple[dict[str, float], dict[str, list[Gate]]]:
    """Pass thresholds and gates of each dataset (node-id path, relative to the rootdir)."""
    thresholds: dict[str, float] = {}
    gates: dict[str, list[Gate]] = {}
    for dataset in datasets:
        settings = options.dataset_settings(options.rootdir / dataset)
        thresholds[dataset] = settings.threshold
        gates[dataset] = settings.gates
    return thresholds, gates


def marks_of_tests_run(
    gates: Mapping[str, Sequence[Gate]], options: GymOptions, tests_run: Collection[str]
) -> dict[str, list[Gate]]:
    """Each dataset's ``gates`` without the ``gym_rollouts`` marks' gates none of whose declaring tests
    (:meth:`GymOptions.declaring_tests`) ran (``tests_run``: node ids without parametrization): a gate its test
    declares goes with the test, so that ``-k other_test`` is not failed by the gate of a test it did not select."""
    return {
        dataset: [
            gate
            for gate in dataset_gates
            if gate.source is not GateSource.MARK
            or gate.custom is None
            or any(test in tests_run for test in options.declaring_tests(dataset, gate.custom))
        ]
        for dataset, dataset_gates in gates.items()
    }


def find_flips(results: Sequence[rpt.RolloutResult], recordings: Sequence[Path]) -> list[Flip]:
    """Replayed rollouts whose reward differs from the recording the replay model served them.

    A rollout finds its recordings as the replay model does (:meth:`~pytest_gym_eval.replay.ReplayIndex.
    recordings_for` of its task's request, read from its record in Gym's output): a rollout tagged with its
    repeat (every rollout the plugin plans under ``--gym-replay``) is compared with the one recording served
    to that repeat; an untagged one flips only when its reward matches none of its task's recordings.
    Rollouts without a record or a reward, or with no recording carrying a reward (policy answers written without
    Gym's verifier, as a test's own recordings are), are left out. Raises
    :class:`~pytest_gym_eval.replay.RecordingError` for a recording that cannot be read.
    """
    from pytest_gym_eval.replay import ReplayIndex, load_recordings

    index = ReplayIndex(load_recordings(recordings))
    located: dict[Path, dict[int, list[tuple[int, str, float]]]] = {}  # file -> line -> (order, nodeid, reward)
    for order, result in enumerate(results):
        if result.reward is not None and result.record is not None:
            file, _, number = result.record.rpartition(":")
            located.setdefault(Path(file), {}).setdefault(int(number), []).append((order, result.nodeid, result.reward))
    flips: list[tuple[int, Flip]] = []
    for path, at in located.items():
        for line, record in records_at(path, at):  # one pass a file (one walk a record was N x N lines)
            params = record.get("responses_create_params")
            if not isinstance(params, dict):
                continue
            try:
                recorded = [recording.reward for recording in index.recordings_for(params)]
            except ValueError:
                continue
            numbers = [float(r) for r in recorded if isinstance(r, (int, float)) and not isinstance(r, bool)]
            for order, nodeid, reward in at[line]:
                if numbers and not any(math.isclose(reward, r, abs_tol=1e-9) for r in numbers):
                    flips.append((order, Flip(nodeid, reward, tuple(recorded))))
    return [flip for _, flip in sorted(flips, key=lambda pair: pair[0])]


def conclude(
    results: Sequence[rpt.RolloutResult],
    options: GymOptions,
    baseline: Mapping[str, Any] | None = None,
    selected: Mapping[str, Mapping[str, int]] | None = None,
    policy: tuple[Mapping[str, float], Mapping[str, Sequence[Gate]]] | None = None,
    *,
    adaptive: Mapping[tuple[str, str | None], AdaptiveRecord] | None = None,
    selections: Mapping[str, Selection] | None = None,
    quarantine: Quarantine | None = None,
    known_tasks: Iterable[tuple[str, str]] = (),
    not_counted: Mapping[str, str] | None = None,
    tests_run: Collection[str] | None = None,
) -> Conclusion:
    """Summaries, gate verdicts, the comparison with ``baseline`` (the ``--gym-baseline`` report, as
    :func:`~pytest_gym_eval.reporting.json_report.load_report` read it) and replay flips, and the exit status
    they imply.

    ``selected[dataset][agent]`` counts the rollouts the session selected (see
    :func:`~pytest_gym_eval.reporting.summary.summarize`), ``adaptive`` how ``--gym-adaptive`` ran each dataset
    (judged on its confidence sequence). A ``--gym-replay`` recording that cannot be read fails
    the session (exit status 1) with the file and line in ``reason``.

    ``selections[dataset]`` is the part of each dataset the session selected (:mod:`pytest_gym_eval.tasks.selection`):
    the gates of one judged on a selection by name, marker or last outcome are shown but do not decide (with
    no other gate, pytest's own status holds, and ``reason`` says why the gates were not judged).

    ``policy`` gives each dataset's pass threshold and gates (keyed by dataset name) when they do not come
    from ``options`` and the dataset files (``python -m pytest_gym_eval merge`` takes them from the reports).

    ``quarantine`` (``--gym-quarantine``): the rollouts of a task an active entry names are left out of the
    summaries and gates (``selected`` must already leave them out); ``Conclusion.quarantined`` says which, which
    entries expired, and which name no task of the run (its rollouts' and ``known_tasks``, ``(dataset, task id)``:
    every task collected, a selection may leave some out), and ``reason`` counts them.

    ``not_counted[dataset]``: the line saying which test functions' rollouts its statistics left out
    (:meth:`ResultsCollector.not_counted`), shown with its summary.
    ``tests_run`` (node ids without parametrization of the test functions that reported; None: keep every gate)
    drops each ``gym_rollouts`` mark's gate none of whose declaring tests ran (:func:`marks_of_tests_run`).
    """
    held: list[rpt.RolloutResult] = []
    tasks = {(r.dataset, str(r.task_id)) for r in results} | set(known_tasks)
    if quarantine is not None:
        results, held = split_gated(results, quarantine)
    datasets = list(dict.fromkeys([*(r.dataset for r in results), *(selected or {})]))
    thresholds, gates = dataset_policy(options, datasets) if policy is None else policy
    if tests_run is not None:
        gates = marks_of_tests_run(gates, options, tests_run)
    summaries = rpt.summarize(
        results,
        thresholds=thresholds,
        gates=gates,
        mode=options.gate_mode,
        selected=selected,
        price=options.price,
        adaptive=adaptive,
    )
    if selections:
        summaries = [replace(s, selection=selections.get(s.dataset)) for s in summaries]
    if not_counted:
        summaries = [replace(s, not_counted=not_counted.get(s.dataset, "")) for s in summaries]
    summaries = label_policies(summaries, [policy.name for policy in options.policies], results)
    comparisons = bl.compare_to_baseline(baseline, results) if baseline is not None else []
    policies = policy_comparisons(results, options, selections, adaptive)
    if options.familywise is not None:  # one family: every gate that can fail the session
        summaries, policies = familywise_session(summaries, policies, 0.95)
    flips, replay_error = None, ""
    if options.replay:
        from pytest_gym_eval.replay import RecordingError

        try:
            flips = find_flips(results, options.replay)
        except RecordingError as error:  # the comparison asked for cannot be made: that fails the session
            replay_error = f"--gym-replay: {error}"

    status, reason = rpt.session_verdict(summaries, inconclusive_passes=options.inconclusive_passes)
    baseline_gates = options.max_drop is not None or options.max_regressed_tasks is not None
    margins = (options.max_regression, options.min_improvement)
    gated = any(m is not None for m in margins) and any(item.decides for item in policies)
    other_gates = (baseline_gates and baseline is not None) or options.fail_on_flip or gated
    if status == -1 and not other_gates and not replay_error:
        return _quarantined(
            Conclusion(
                summaries,
                comparisons,
                flips,
                -1,
                _not_judged(summaries),
                policies=policies,
                verdicts=gate_verdicts(summaries, policies, inconclusive_passes=options.inconclusive_passes),
            ),
            quarantine,
            held,
            tasks,
        )
    failures = [replay_error] if replay_error else []
    if status == -1 and (errors := sum(1 for r in results if r.status == "error")):
        failures.append(f"{errors} rollout{'s' if errors != 1 else ''} errored")
    if options.max_drop is not None:
        failures += bl.max_drop_gate(comparisons, options.max_drop)
    if options.max_regressed_tasks is not None:
        failures += bl.max_regressed_gate(comparisons, options.max_regressed_tasks)
    failures += comparison_failures(policies, inconclusive_passes=options.inconclusive_passes)
    if options.fail_on_flip and flips:
        failures.append(f"{len(flips)} rollout reward{'s' if len(flips) != 1 else ''} differ from the recording")
    if status == 1:
        reason = "; ".join([reason, *failures])
    elif failures:
        status, reason = 1, "gym gates: FAIL - " + "; ".join(failures)
    else:
        status, reason = 0, reason or "gym gates: all gates pass"
    verdicts = gate_verdicts(
        summaries, policies, comparisons if baseline is not None else (), flips,
        inconclusive_passes=options.inconclusive_passes, max_drop=options.max_drop,
        max_regressed_tasks=options.max_regressed_tasks, fail_on_flip=options.fail_on_flip,
    )  # fmt: skip
    concluded = Conclusion(summaries, comparisons, flips, status, reason, policies=policies, verdicts=verdicts)
    return _quarantined(concluded, quarantine, held, tasks)


def policy_comparisons(
    results: Sequence[rpt.RolloutResult],
    options: GymOptions,
    selections: Mapping[str, Selection] | None = None,
    adaptive: Mapping[tuple[str, str | None], AdaptiveRecord] | None = None,
) -> tuple[PolicyComparison, ...]:
    """With two or more ``--gym-policy``, each candidate against the baseline per dataset
    (:func:`~pytest_gym_eval.reporting.policies.compare_policies`), ``--gym-max-regression`` judged as
    non-inferiority and ``--gym-min-improvement`` as superiority, each at its margin; a dataset judged on a
    selection by name, marker or last outcome does not decide (as its other gates). Empty in a session with one
    policy. ``adaptive`` (``--gym-adaptive``, keyed as :func:`conclude`'s): a dataset whose every policy's group ran
    the same sequential waves is judged on the paired confidence sequence of those waves."""
    gates = options.comparison_gates()
    by_dataset: dict[str, list[AdaptiveRecord]] = {}
    for (dataset, _), record in (adaptive or {}).items():
        by_dataset.setdefault(dataset, []).append(record)
    joint = {
        dataset: records[0]
        for dataset, records in by_dataset.items()
        if all(r.sequential and r.ends == records[0].ends for r in records)
    }
    found = compare_policies(results, [policy.name for policy in options.policies], gates, adaptive=joint)
    biased = {name for name, part in (selections or {}).items() if part.biased}
    return tuple(replace(item, decides=item.dataset not in biased) for item in found)


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


def _quarantined(
    conclusion: Conclusion,
    quarantine: Quarantine | None,
    held: Sequence[rpt.RolloutResult],
    tasks: set[tuple[str, str]],
) -> Conclusion:
    """``conclusion`` with the quarantine's lines (each applied entry: the task, its rollouts and passes, the
    expiry and reason; each expired entry: gated again; each entry naming no task of the run's ``tasks``, ``(dataset,
    task id)``: a warning naming the datasets there are) and, when a task was held out, ``reason`` counting them."""
    if quarantine is None:
        return conclusion
    lines = []
    for entry in quarantine.active:
        rollouts = [r for r in held if entry.matches(r.dataset, str(r.task_id))]
        if not rollouts:
            continue
        passed = sum(1 for r in rollouts if r.status == "passed")
        names = ", ".join(dict.fromkeys(r.dataset for r in rollouts))
        lines.append(
            f"quarantined: task {entry.task_id} of {names} ({passed} of {len(rollouts)} rollouts passed) left out "
            f"of the gates until {entry.expires.isoformat()}: {entry.reason} [{entry.source}]"
        )
    lines += [
        f"quarantine expired {entry.expires.isoformat()}: task {entry.task_id} of {entry.dataset} is gated again "
        f"[{entry.source}]"
        for entry in quarantine.expired
    ]
    datasets = sorted({dataset for dataset, _ in tasks})
    lines += [f"quarantine warning: {unmatched_warning(entry, datasets)}" for entry in unmatched(quarantine, tasks)]
    reason = conclusion.reason
    count = len({(r.dataset, str(r.task_id)) for r in held})
    if count and reason:
        reason = f"{reason} ({count} quarantined task{'s' if count != 1 else ''} left out of the gates)"
    return replace(conclusion, reason=reason, quarantined=tuple(lines))


def gates_judged_passing(summaries: Sequence[rpt.DatasetSummary], failing: Mapping[str, str]) -> set[str]:
    """The datasets (node-id paths) whose gates decide and pass in the session's verdict, judged on every selected
    rollout (none unreported): the complement, among gated datasets, of ``failing`` (:func:`gates_not_passing`)."""
    return {
        summary.dataset
        for summary in summaries
        if summary.gates and summary.gates_decide and not summary.unreported and summary.dataset not in failing
    }


def overruled_gate_lines(gates_passed: Collection[str], failing: Mapping[str, str]) -> list[str]:
    """The terminal's lines for each ``gym-gate`` item pytest counted passed (``gates_passed``, node ids) whose
    dataset's gates the session's end judged not passing (``failing``: :func:`gates_not_passing`): which gate, and
    why pytest's count says passed (the item judged what it could when it ran; the session's end judged every
    rollout and every test function's metrics, or the family of gates with ``--gym-familywise``)."""
    return [
        f"gym gates: {nodeid} is counted PASSED above, but the session's end failed its gates (the item judged "
        f"what it could when it ran; the end judges every rollout and metric): {failing[dataset]}"
        for nodeid in sorted(gates_passed)
        if (dataset := nodeid.split("::", 1)[0]) in failing
    ]


def gates_not_passing(summaries: Sequence[rpt.DatasetSummary], *, inconclusive_passes: bool) -> dict[str, str]:
    """Per dataset (node-id path) whose gates decide and do not pass in the session's verdict
    (:func:`~pytest_gym_eval.reporting.summary.session_verdict`: a FAIL, an INCONCLUSIVE unless
    ``inconclusive_passes``, and always one judged on fewer rollouts than were selected), a one-line text naming
    the gates that did not pass: the ``gym-gate`` item of such a dataset never passes."""
    found: dict[str, list[str]] = {}
    for summary in summaries:
        if not summary.gates or not summary.gates_decide:
            continue
        lenient = inconclusive_passes and not summary.unreported
        failing = [result for result in summary.gates if not result.passed(lenient)]
        verdict = summary.verdict
        if failing or verdict is Verdict.FAIL:  # (errored rollouts fail the gates they leave passing)
            why = "; ".join(result.describe() for result in failing) or f"{summary.errors} rollouts errored"
            label = verdict.value if verdict is not None else ""
            found.setdefault(summary.dataset, []).append(f"{summary.title} {label}: {why}")
    return {dataset: "the session's verdict on these gates: " + "; ".join(texts) for dataset, texts in found.items()}


def _not_judged(summaries: Sequence[rpt.DatasetSummary]) -> str:
    """Why gated datasets' gates did not decide (each was judged on a selection by name, marker or last outcome),
    "" when none."""
    parts = [f"{s.title} {s.selection.describe()}" for s in summaries if s.gates and not s.gates_decide and s.selection]
    return "gym gates: not judged on the whole dataset, the items decide: " + "; ".join(parts) if parts else ""


def final_status(
    pytest_status: int, conclusion: Conclusion, other_failures: int = 0, gate_failures: int = 0
) -> tuple[int, str]:
    """The session's final exit status and a one-line reason, given pytest's own status, the conclusion, the
    number of failed items that are neither rollouts nor gate items, and the number of failed ``gym-gate``
    items.

    The gates decide when they are set and pytest ended normally (exit status 0 or 1), except that they never
    turn the failure of another test into 0, nor that of a ``gym-gate`` item whose gates pass (its worker
    crashed, a fixture of the user's failed): its JUnit testcase is a failure, and the exit status says so too.
    Otherwise pytest's own status stands, with a reason saying what
    it means (``pytest: interrupted``, ``pytest: 3 items failed or errored``, ...).
    """
    if conclusion.exit_status != -1 and pytest_status in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
        if conclusion.exit_status == 0 and other_failures:
            others = f"{other_failures} other test{'s' if other_failures != 1 else ''} failed or errored"
            return int(pytest.ExitCode.TESTS_FAILED), f"{others}; {conclusion.reason}"
        if conclusion.exit_status == 0 and gate_failures:
            items = f"{gate_failures} gym-gate item{'s' if gate_failures != 1 else ''}"
            return int(pytest.ExitCode.TESTS_FAILED), f"{items} failed or errored; {conclusion.reason}"
        return conclusion.exit_status, conclusion.reason
    reasons = {
        pytest.ExitCode.OK: "pytest: every selected test passed",
        pytest.ExitCode.TESTS_FAILED: "pytest: some tests failed or errored",
        pytest.ExitCode.INTERRUPTED: "pytest: interrupted (Ctrl-C, SIGTERM, or errors during collection)",
        pytest.ExitCode.INTERNAL_ERROR: "pytest: internal error",
        pytest.ExitCode.USAGE_ERROR: "pytest: usage error",
        pytest.ExitCode.NO_TESTS_COLLECTED: "pytest: no tests collected",
    }
    reason = reasons.get(pytest_status, f"pytest: exit status {int(pytest_status)}")  # type: ignore[call-overload]
    if conclusion.reason and (pytest_status != pytest.ExitCode.OK or conclusion.exit_status == -1):
        reason = f"{reason}; {conclusion.reason}"
    return int(pytest_status), reason
