"""JUnit XML: the test suite's properties (every aggregate of the reward summary, and run facts), and each
rollout's values on its testcase in the form the selected ``junit_family`` allows.

Suite property names (the test suite's ``<properties>``, valid in every family):

- run facts: ``gym.<key>`` (``gym.gym_version``, ``gym.model``, ``gym.model_url``, ``gym.run_dir``, ...), and
  the session's final ``gym.exit_status`` and ``gym.reason``;
- per dataset: ``gym::<dataset>::<name>``, where ``<dataset>`` is the dataset as in the node ids (a path, which
  cannot hold ``::``: pytest's node ids reserve it), and ``gym::<dataset>::<agent>::<name>`` for one agent of a
  dataset with several (``gym::<dataset>::<policy>::<name>`` for one policy's rollouts in a session comparing
  policies). Split a name on ``::``. ``<name>`` is one of ``tasks``, ``rollouts``, ``scored``,
  ``errors``, ``selected``, ``unreported``, ``adaptive.waves``/``.rollouts``/``.max_rollouts``/``.skipped`` (with
  ``--gym-adaptive``), ``flaky_tasks`` (a count), ``wall_time`` (seconds), ``threshold``,
  ``sha256`` (of the dataset file), ``mean_reward``, ``pass_rate`` and ``pass_at_<k>`` (each also with
  ``.low`` and ``.high``), ``gate.<metric>`` (the verdict of the gate on ``mean_reward``, ``pass_rate`` or
  ``pass_at_<k>``) with ``gate.<metric>.threshold`` (its threshold, a value: the name stays the same when the
  threshold changes), and ``verdict``; and the tokens, latency and cost (:func:`usage_properties`):
  ``input_tokens``, ``output_tokens``, ``total_tokens``, ``token_rollouts``, ``latency_median``,
  ``latency_p95``, ``cost``; in a session comparing policies (``--gym-policy``), each candidate against the
  baseline: ``compare.<candidate>.<name>`` (:func:`comparison_properties`: ``delta``, ``delta.low``,
  ``delta.high``, ``p_value``, ``verdict``, ..., and each side's usage over the pairs: ``baseline.total_tokens``,
  ``candidate.latency_median``, ``ratio.tokens_per_rollout``, ...).

Per rollout: ``reward`` (absent for an error: an error has no reward), ``task_id``, ``repeat``, ``agent``,
``record``, ``input_tokens``/``output_tokens``/``total_tokens`` and ``latency`` (seconds) when Gym recorded them
and, on error, ``failure_class``; ``judged_at_end`` on the testcase of a rollout the session's end judged from Gym's
record because its item never ran or was cut short (:func:`add_judged_rollouts`). Under ``junit_family=xunit1`` (or
``legacy``) they are the testcase's ``<properties>``; under ``xunit2`` (pytest's default), whose schema has no
testcase properties, they go in the testcase's ``<system-out>`` as one line ``gym-eval: {JSON object}``
(:data:`~pytest_gym_eval.reporting.junit_values.SYSTEM_OUT_PREFIX`). A dataset's ``gym-gate`` testcase carries its
judged gates the same way: ``gate`` properties, or a ``gates`` list in that JSON object (with ``selection`` when they
were judged on part of the dataset and ``quarantined``, a count, with ``--gym-quarantine``); under xunit2 every value of
a dataset's item goes there however the item ended (a gate skipped by a ``--deselect`` or ``-k`` selection too), and a
test the session left unfinished is an ``<error>`` (:func:`~pytest_gym_eval.reporting.junit_plugin.close_unfinished`),
never a testcase without the name every schema requires.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import pytest

from pytest_gym_eval.outcomes.usage import ratio
from pytest_gym_eval.reporting.conclusion import PolicyComparison
from pytest_gym_eval.reporting.junit_values import move_rollout_values
from pytest_gym_eval.reporting.summary import DatasetSummary, RolloutResult
from pytest_gym_eval.reporting.verdicts import GateVerdict
from pytest_gym_eval.stats import gate_kinds
from pytest_gym_eval.stats.comparison import Hypothesis, gym_verdict

SEPARATOR = "::"

_SHA_PREFIX = "dataset_sha256."


def suite_properties(
    summaries: Sequence[DatasetSummary],
    meta: Mapping[str, object],
    final: tuple[int, str] | None = None,
    comparisons: Sequence[PolicyComparison] = (),
) -> list[tuple[str, str]]:
    """(name, value) pairs for the JUnit XML ``<properties>`` of the test suite (names: module docstring).

    ``meta`` holds run facts (a ``dataset_sha256.<dataset>`` key becomes ``gym::<dataset>::sha256``);
    ``final`` is the session's ``(exit status, reason)``; ``comparisons`` those of a session comparing policies
    (:func:`comparison_properties`). Numbers use 6 significant digits; non-finite numbers (a nan estimate,
    infinite bounds) and values that are not str, int or float are left out.
    """
    properties: list[tuple[str, str]] = []
    hashes: dict[str, str] = {}
    for key, value in meta.items():
        text = _property_value(value)
        if text is None:
            continue
        if key.startswith(_SHA_PREFIX):
            hashes[key[len(_SHA_PREFIX) :]] = text
        else:
            properties.append((f"gym.{key}", text))
    if final is not None:
        properties += [("gym.exit_status", str(final[0])), ("gym.reason", final[1])]
    for summary in summaries:
        properties.extend(_summary_properties(summary, hashes.get(summary.dataset)))
        properties.extend(usage_properties(summary))
    for item in comparisons:
        properties.extend(comparison_properties(item))
    return properties


def comparison_properties(item: PolicyComparison) -> list[tuple[str, str]]:
    """A candidate policy against the baseline on one dataset, named ``gym::<dataset>::compare.<candidate>.<name>``:
    ``baseline`` (the baseline's name), ``delta`` with ``delta.low`` and ``delta.high`` (candidate - baseline in
    mean reward, paired by task), ``baseline_mean``, ``candidate_mean``, ``pairs``, ``lost`` and ``gained`` (tasks
    only the baseline or only the candidate passes), ``p_value`` (McNemar's exact, only when every reward is 0 or
    1), with ``--gym-max-regression``, ``verdict`` and ``gym_verdict`` (Gym #1493's word) and, with
    ``--gym-min-improvement``, ``superiority.verdict`` and ``superiority.margin``; with ``--gym-adaptive``'s
    confidence sequence, ``sequential`` (``true``), ``repeats`` (per task, used) and ``max_repeats``; and each
    side's tokens and latency over the pairs (:func:`comparison_usage_pairs`)."""
    difference, flips, result = item.comparison.difference, item.comparison.flips, item.result
    delta = difference.interval
    pairs: list[tuple[str, object]] = [
        ("baseline", item.baseline),
        ("delta", delta.estimate),
        ("delta.low", delta.low),
        ("delta.high", delta.high),
        ("baseline_mean", difference.baseline_mean),
        ("candidate_mean", difference.candidate_mean),
        ("pairs", difference.pairs),
        ("lost", len(flips.only_baseline)),
        ("gained", len(flips.only_candidate)),
    ]
    if flips.binary:
        pairs.append(("p_value", flips.p_value))
    if result is not None:
        pairs += [("verdict", result.verdict.value), ("gym_verdict", gym_verdict(result))]
    if (better := item.gate_result(Hypothesis.SUPERIORITY)) is not None:
        pairs += [("superiority.verdict", better.verdict.value), ("superiority.margin", better.gate.margin)]
    if item.sequential:  # --gym-adaptive: judged on the confidence sequence of the waves
        pairs += [("sequential", "true"), ("repeats", item.repeats), ("max_repeats", item.max_repeats)]
    pairs += comparison_usage_pairs(item)
    return _texts(f"{property_prefix(item.dataset)}compare.{item.candidate}.", pairs)


def comparison_usage_pairs(item: PolicyComparison) -> list[tuple[str, object]]:
    """Each side's usage over the pairs, named ``<side>.<name>`` (side ``baseline`` or ``candidate``) as a dataset's
    (:func:`usage_properties`): ``input_tokens``, ``output_tokens``, ``total_tokens``, ``token_rollouts`` and
    ``tokens_per_rollout`` when the side recorded tokens, ``latency_median`` and ``latency_p95`` (seconds) when it
    recorded a latency; then ``ratio.tokens_per_rollout`` and ``ratio.latency_median`` (candidate / baseline) when
    both sides have the value and the baseline's is above 0."""
    pairs: list[tuple[str, object]] = []
    for name, usage in (("baseline", item.baseline_usage), ("candidate", item.candidate_usage)):
        tokens, latency = usage.tokens, usage.latency
        if tokens.rollouts:
            pairs += [
                (f"{name}.input_tokens", tokens.input_tokens),
                (f"{name}.output_tokens", tokens.output_tokens),
                (f"{name}.total_tokens", tokens.total_tokens),
                (f"{name}.token_rollouts", tokens.rollouts),
                (f"{name}.tokens_per_rollout", usage.tokens_per_rollout),
            ]
        if latency.n:
            pairs += [(f"{name}.latency_median", latency.median), (f"{name}.latency_p95", latency.p95)]
    base, cand = item.baseline_usage, item.candidate_usage
    for name, value in (
        ("tokens_per_rollout", ratio(cand.tokens_per_rollout, base.tokens_per_rollout)),
        ("latency_median", ratio(cand.latency.median, base.latency.median)),
    ):
        if value is not None:
            pairs.append((f"ratio.{name}", value))
    return pairs


def usage_properties(summary: DatasetSummary) -> list[tuple[str, str]]:
    """A summary's tokens, latency and cost, named as its other aggregates (``gym::<dataset>::<name>``):
    ``input_tokens``, ``output_tokens``, ``total_tokens`` and ``token_rollouts`` (the rollouts with a token count)
    when any rollout recorded tokens; ``latency_median`` and ``latency_p95`` (seconds) when any recorded a
    latency; ``cost`` with ``--gym-price-per-mtok``."""
    tokens, latency = summary.tokens, summary.latency
    pairs: list[tuple[str, object]] = []
    if tokens.rollouts:
        pairs += [
            ("input_tokens", tokens.input_tokens),
            ("output_tokens", tokens.output_tokens),
            ("total_tokens", tokens.total_tokens),
            ("token_rollouts", tokens.rollouts),
        ]
    if latency.n:
        pairs += [("latency_median", latency.median), ("latency_p95", latency.p95)]
    if summary.cost is not None:
        pairs.append(("cost", summary.cost))
    return _texts(property_prefix(summary.dataset, summary.label), pairs)


def property_prefix(dataset: str, agent: str | None = None) -> str:
    """``gym::<dataset>::`` or ``gym::<dataset>::<agent>::``: how a dataset's suite property names start."""
    parts = ["gym", dataset] if agent is None else ["gym", dataset, agent]
    return SEPARATOR.join(parts) + SEPARATOR


def _summary_properties(summary: DatasetSummary, sha256: str | None) -> list[tuple[str, str]]:
    prefix = property_prefix(summary.dataset, summary.label)
    pairs = _aggregates(summary)
    pairs.append(("selected", summary.selected))
    pairs.append(("unreported", summary.unreported))
    if summary.adaptive is not None:  # --gym-adaptive
        pairs += [
            ("adaptive.waves", summary.adaptive.waves),
            ("adaptive.rollouts", summary.adaptive.rollouts),
            ("adaptive.max_rollouts", summary.adaptive.ceiling),
            ("adaptive.skipped", summary.adaptive.skipped),
        ]
    if sha256 is not None and summary.agent is None:
        pairs.append(("sha256", sha256))
    for result in summary.gates:
        gate = result.gate
        metric = f"pass_at_{gate.k}" if gate.k is not None else f"metric.{gate.custom}" if gate.custom else gate.metric
        pairs += [(f"gate.{metric}", result.verdict.value), (f"gate.{metric}.threshold", result.gate.threshold)]
    if summary.verdict is not None:
        pairs.append(("verdict", summary.verdict.value))
    if summary.selection is not None and summary.selection.partial:  # judged on part of the dataset: which
        pairs += [
            ("selection", summary.selection.describe()),
            ("gates_decide", "true" if summary.gates_decide else "false"),
        ]
    return _texts(prefix, pairs)


def _aggregates(summary: DatasetSummary) -> list[tuple[str, object]]:
    pairs: list[tuple[str, object]] = [
        ("tasks", summary.tasks),
        ("rollouts", summary.rollouts),
        ("scored", summary.scored),
        ("errors", summary.errors),
        ("flaky_tasks", len(summary.flaky_tasks)),
        ("wall_time", summary.wall_time),
        ("threshold", summary.threshold),
    ]
    intervals = {"mean_reward": summary.mean_reward, "pass_rate": summary.pass_rate}
    intervals.update({f"pass_at_{k}": interval for k, interval in summary.pass_at_k.items()})
    intervals.update({f"metric.{name}": interval for name, interval in summary.metrics.items()})
    for name, interval in intervals.items():
        pairs += [(name, interval.estimate), (f"{name}.low", interval.low), (f"{name}.high", interval.high)]
    return pairs


def _texts(prefix: str, pairs: Sequence[tuple[str, object]]) -> list[tuple[str, str]]:
    properties: list[tuple[str, str]] = []
    for name, value in pairs:
        text = _property_value(value)
        if text is not None:
            properties.append((prefix + name, text))
    return properties


def _property_value(value: object) -> str | None:
    """The property text of a str, int or finite float; None for anything else."""
    if isinstance(value, float):
        return format(value, ".6g") if math.isfinite(value) else None
    if isinstance(value, (str, int)):
        return str(value)
    return None


# --- pytest's JUnit writer: the testcases the session's end adds or changes ---------------------------------


def junit_xml(config: pytest.Config) -> Any:
    """pytest's JUnit XML writer when ``--junitxml`` is on, else None (its stash key is not public API)."""
    try:
        from _pytest.junitxml import xml_key
    except ImportError:  # pragma: no cover
        return None
    return config.stash.get(xml_key, None)


def add_unjudged_gate(xml: Any, nodeid: str, reason: str) -> None:
    """Add to pytest's JUnit writer ``xml`` an errored testcase for the ``gym-gate`` item ``nodeid``, selected but
    never run (the session was interrupted or stopped by ``-x`` first), so that the file does not read green
    (``errors="1"``); ``reason`` (the session's) goes in the error's text."""
    path = nodeid.split("::", 1)[0]
    text = f"the session ended before this dataset's gates were judged ({reason})"
    location = (path, 0, "gym-gate")
    for report in (
        pytest.TestReport(nodeid, location, {}, "failed", text, "setup", duration=0.0),
        pytest.TestReport(nodeid, location, {}, "passed", None, "teardown", duration=0.0),
    ):
        xml.pytest_runtest_logreport(report)


def add_session_judged_gate(xml: Any, nodeid: str) -> None:
    """Add to pytest's JUnit writer ``xml`` a passed testcase for the ``gym-gate`` item ``nodeid``, selected but never
    run (``-x`` stopped the session first), whose gates the session's end judged on every selected rollout and found
    passing: the file then agrees with the exit status the gates set (0), as :func:`add_unjudged_gate`'s error does
    when they did not pass."""
    path = nodeid.split("::", 1)[0]
    location = (path, 0, "gym-gate")
    for when in ("setup", "call", "teardown"):
        xml.pytest_runtest_logreport(pytest.TestReport(nodeid, location, {}, "passed", None, when, duration=0.0))


DATASET_GATE_KINDS = frozenset({*gate_kinds.METRICS, "errors"})
"""The verdict kinds a dataset's own ``gym-gate`` testcase carries: every kind of the gate registry
(:data:`~pytest_gym_eval.stats.gate_kinds.KINDS`) and the errored rollouts; each other kind (a policy comparison's
hypothesis, a baseline gate, the replay flips) has a testcase of its own (:func:`gate_testcase_id`)."""


def gate_testcase_id(verdict: GateVerdict) -> str:
    """The node id of the ``gym-gate`` testcase that carries ``verdict``: ``<dataset>::gym-gate`` for a gate of the
    dataset's own statistics (its item's), else ``<dataset>::gym-gate[<subject> <kind>]``, e.g.
    ``mcqa.jsonl::gym-gate[mcqa.jsonl cand vs base superiority]``."""
    if verdict.kind in DATASET_GATE_KINDS:
        return f"{verdict.dataset}::gym-gate"
    return f"{verdict.dataset or 'replay'}::gym-gate[{verdict.subject} {verdict.kind}]"


def gate_failures(verdicts: Sequence[GateVerdict]) -> dict[str, str]:
    """Per ``gym-gate`` testcase (:func:`gate_testcase_id`) of a verdict that fails the session
    (:attr:`~pytest_gym_eval.reporting.verdicts.GateVerdict.fails`), its failure message: the verdicts' messages,
    one a line. A testcase no verdict fails is absent."""
    found: dict[str, list[str]] = {}
    for verdict in verdicts:
        if verdict.fails:
            found.setdefault(gate_testcase_id(verdict), []).append(verdict.message)
    return {nodeid: "\n".join(messages) for nodeid, messages in found.items()}


def add_failed_gate(xml: Any, nodeid: str, message: str) -> None:
    """Add to pytest's JUnit writer ``xml`` a failed ``gym-gate`` testcase ``nodeid`` with ``message``: a gate the
    session's end judged (a custom metric's, a comparison's, a baseline's) that no ``gym-gate`` item carries."""
    path = nodeid.split("::", 1)[0]
    location = (path, 0, nodeid.split("::", 1)[-1])
    for report in (
        pytest.TestReport(nodeid, location, {}, "passed", None, "setup", duration=0.0),
        pytest.TestReport(nodeid, location, {}, "failed", message, "call", duration=0.0),
        pytest.TestReport(nodeid, location, {}, "passed", None, "teardown", duration=0.0),
    ):
        xml.pytest_runtest_logreport(report)


JUDGED_AT_END = "judged_at_end"
"""The value (property, or key of the ``<system-out>`` JSON) of a rollout's testcase the session's end added or
finished from Gym's record (:func:`add_judged_rollout`): why its item did not judge it."""


def judged_rollout_values(result: RolloutResult, why: str) -> list[tuple[str, object]]:
    """The values a rollout's testcase carries (:data:`~pytest_gym_eval.reporting.junit_values.ROLLOUT_PROPERTIES`, as
    its item would have set them) for ``result``, judged at the session's end, with :data:`JUDGED_AT_END` = ``why``."""
    values: list[tuple[str, object]] = [("task_id", result.task_id), ("repeat", result.repeat)]
    values.append(("agent", result.agent))
    if result.reward is not None:
        values.append(("reward", result.reward))
    if result.failure_class:
        values.append(("failure_class", result.failure_class))
    if result.record is not None:
        values.append(("record", result.record))
    answer = [] if result.answer is None else [("answer", result.answer)]
    return [*values, *result.usage.properties(), *answer, (JUDGED_AT_END, why)]


def add_judged_rollouts(config: pytest.Config, xml: Any, results: Sequence[RolloutResult], ending: str) -> int:
    """Give each of ``results``, rollouts the session's end judged from Gym's records because their items never
    reported them (the item never ran, or was cut short before its call reported; ``ending`` says how the session
    ended: ``interrupted``), its testcase in pytest's JUnit writer ``xml``, so that every rollout the suite's
    properties count has one, with the same outcome: passed, a ``<failure>`` (failed), an ``<error>`` (errored),
    carrying the rollout's values and why the session judged it (:func:`judged_rollout_values`). A testcase pytest
    opened at the item's setup and never finished is finished so (instead of
    :func:`~pytest_gym_eval.reporting.junit_plugin.close_unfinished`'s error); one its item gave an outcome of its own
    (e.g. a crashed xdist worker's error) is left as it is. Returns how many it added or finished."""
    plugin = config.pluginmanager.get_plugin("gym-eval-junit")
    named: set[str] = getattr(plugin, "named", set())
    done = 0
    for result in results:
        if result.nodeid not in named:
            _add_judged_rollout(xml, result, ending)
            done += 1
    return done


def _add_judged_rollout(xml: Any, result: RolloutResult, ending: str) -> None:
    """One rollout's testcase for :func:`add_judged_rollouts`."""
    opened = [key for key in xml.node_reporters if str(key[0]) == result.nodeid]  # (a NodeId in pytest 9)
    why = f"{'its test was cut short' if opened else 'its item never ran'} ({ending})"
    node = opened[0][1] if opened else None
    path, _, name = result.nodeid.partition("::")
    location = (path, None, name)
    judged: Literal["passed", "failed"] = "passed" if result.status == "passed" else "failed"
    if result.status == "passed":
        text = None
    elif result.status == "failed":
        text = f"reward {result.reward:g} did not pass (judged at the session's end from Gym's record: {why})"
    else:
        text = f"{result.failure_class or 'error'} (judged at the session's end from Gym's record: {why})"
    phases: list[tuple[Literal["setup", "call", "teardown"], Literal["passed", "failed"], str | None, Any]] = [
        ("call", judged, text, []),
        ("teardown", "passed", None, judged_rollout_values(result, why)),
    ]
    if not opened:
        phases.insert(0, ("setup", "passed", None, []))
    for when, outcome, longrepr, properties in phases:
        report = pytest.TestReport(
            result.nodeid, location, {}, outcome, longrepr, when, user_properties=properties, node=node
        )
        move_rollout_values(xml, report)
        xml.pytest_runtest_logreport(report)
        if when == "call" and result.status == "error":
            _failure_as_error(xml, report)


def _failure_as_error(xml: Any, report: pytest.TestReport) -> None:
    """Turn the ``<failure>`` pytest's JUnit writer ``xml`` just wrote for ``report``'s testcase into an
    ``<error>``, and the suite's counts with it."""
    for node in reversed(xml.node_reporter(report).nodes):
        if node.tag == "failure":
            node.tag = "error"
            xml.stats["failure"] -= 1
            xml.stats["error"] += 1
            return


def on_demand_error_as_error(xml: Any, report: pytest.TestReport) -> None:
    """Turn the ``<failure>`` pytest's JUnit writer ``xml`` just wrote for ``report`` into an ``<error>`` (and count
    it among the suite's ``errors``) when ``report`` is the call of a test whose on-demand rollout had no verdict
    (``gym_on_demand_error``, set by :func:`pytest_gym_eval.session.collect.shape_report`): pytest writes every failed
    call
    as a failure, but this is the error a dataset item's infrastructure failure is (raised in its setup). Call after
    the writer saw the report; does nothing for any other report."""
    if report.when != "call" or not report.failed or not getattr(report, "gym_on_demand_error", False):
        return
    _failure_as_error(xml, report)


def fail_passed_gate(xml: Any, case: Any, message: str) -> bool:
    """Turn the testcase of a ``gym-gate`` item that passed into a failure with ``message`` (the session's verdict on
    its dataset's gates, which was not PASS): ``case`` is the item's node reporter in pytest's JUnit writer ``xml``
    (``gate_cases`` of :class:`~pytest_gym_eval.reporting.junit_plugin.RolloutValuesInJunit`), the suite's counts
    follow. Returns whether it changed anything (not for a testcase that failed, errored or was skipped already)."""
    from xml.etree import ElementTree

    element = case.to_xml()  # (a finished testcase's element is kept, and written as it is at the session's end)
    if any(element.find(tag) is not None for tag in ("failure", "error", "skipped")):
        return False
    failure = ElementTree.Element("failure", message=message)
    failure.text = message
    element.insert(1 if len(element) and element[0].tag == "properties" else 0, failure)
    xml.stats["passed"] -= 1
    xml.stats["failure"] += 1
    return True
