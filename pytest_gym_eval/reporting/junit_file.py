"""A whole JUnit XML file written without pytest (:func:`write_junit_xml`): ``python -m pytest_gym_eval merge``'s, of
the merged shard reports, laid out as pytest's ``--junitxml`` lays out a session's.
"""

from __future__ import annotations

import functools
import platform
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path

from pytest_gym_eval.reporting.conclusion import Conclusion
from pytest_gym_eval.reporting.junit import gate_failures, suite_properties
from pytest_gym_eval.reporting.junit_values import GATE_PROPERTY, system_out_line
from pytest_gym_eval.reporting.summary import RolloutResult
from pytest_gym_eval.stats.gates import GateResult


def write_junit_xml(
    path: Path,
    results: Sequence[RolloutResult],
    conclusion: Conclusion,
    meta: Mapping[str, object],
    thresholds: Mapping[str, float],
    *,
    final: tuple[int, str] | None = None,
) -> None:
    """Write a JUnit XML file for ``results`` laid out as pytest's ``--junitxml`` lays out a session's.

    The family is xunit2, pytest's default. One ``testcase`` per rollout (``classname`` the dataset path
    dotted, ``name`` ``<task>[r<k>]``, ``time`` its seconds when known) with the values a rollout item carries
    (``task_id``, ``repeat``, ``agent``, ``reward``, ``record``, ``failure_class``) in its ``<system-out>`` line
    (:func:`~pytest_gym_eval.reporting.junit_values.system_out_line`), a ``failure`` when its reward is below the pass
    threshold (``thresholds`` by dataset) and an ``error`` when it has no reward; one ``gym-gate`` testcase per gated
    dataset and one per other gate that fails (:func:`~pytest_gym_eval.reporting.junit.gate_failures`: a comparison's, a
    baseline's), failing with the message of each verdict that fails the session (``conclusion.verdicts``); the suite
    carries :func:`~pytest_gym_eval.reporting.junit.suite_properties` of ``conclusion.summaries``, ``meta`` and
    ``final`` (the exit status and its reason, ``gym.exit_status`` and ``gym.reason``). The text is written as it is
    made (160,000 testcases took ~10x longer through ElementTree). Creates missing parent folders; raises OSError when
    the file cannot be written.
    """
    # Imported here: xml.sax.saxutils imports urllib.request (and ssl, http.client), ~10 ms of every pytest
    # session's start-up, and only `python -m pytest_gym_eval merge` writes a JUnit file of its own.
    from xml.sax.saxutils import escape, quoteattr

    cases: list[str] = []
    failures = errors = 0
    attr = functools.lru_cache(maxsize=4096)(quoteattr)  # classnames, agents and messages repeat
    for result in results:
        timed = result.start > 0.0 and result.stop >= result.start
        values: list[tuple[str, object]] = [
            ("task_id", result.task_id), ("repeat", result.repeat), ("agent", result.agent),
        ]  # fmt: skip
        if result.reward is not None:
            values.append(("reward", result.reward))
        if result.record:
            values.append(("record", result.record))
        if result.failure_class:
            values.append(("failure_class", result.failure_class))
        if result.answer is not None:
            values.append(("answer", result.answer))
        outcome = ""
        if result.status == "failed":
            failures += 1
            threshold = thresholds.get(result.dataset, 1.0)
            reward = "n/a" if result.reward is None else format(result.reward, "g")
            outcome = f"<failure message={attr(f'reward {reward} is below the pass threshold {threshold:g}')} />"
        elif result.status == "error":
            errors += 1
            message = f"the rollout has no reward ({result.failure_class or 'unknown'})"
            outcome = f"<error message={attr(message)} />"
        head = _case_head(result.nodeid, result.stop - result.start if timed else 0.0, attr, quoteattr)
        cases.append(f"{head}{outcome}<system-out>{escape(system_out_line(values))}</system-out></testcase>")
    gated: dict[str, list[GateResult]] = {}
    for summary in conclusion.summaries:
        if summary.gates:
            gated.setdefault(summary.dataset, []).extend(summary.gates)
    failing = gate_failures(conclusion.verdicts)
    testcases = [f"{dataset}::gym-gate" for dataset in gated]
    testcases += [nodeid for nodeid in failing if nodeid not in testcases]
    for nodeid in testcases:  # a dataset's gym-gate testcase, then one per other gate that fails the session
        outcome = ""
        if nodeid in failing:
            failures += 1
            outcome = f"<failure message={attr(failing[nodeid])}>{escape(failing[nodeid])}</failure>"
        dataset = nodeid.split("::", 1)[0]
        own = gated.get(dataset, []) if nodeid.endswith("::gym-gate") else []
        gate_values = [(GATE_PROPERTY, gate.describe()) for gate in own]
        head = _case_head(nodeid, 0.0, attr, quoteattr)
        cases.append(f"{head}{outcome}<system-out>{escape(system_out_line(gate_values))}</system-out></testcase>")
    timed_results = [r for r in results if r.start > 0.0 and r.stop >= r.start]
    span = (max(r.stop for r in timed_results) - min(r.start for r in timed_results)) if timed_results else 0.0
    attributes = {
        "name": "pytest", "errors": errors, "failures": failures, "skipped": 0, "tests": len(results) + len(testcases),
        "time": f"{span:.3f}", "timestamp": datetime.now(timezone.utc).astimezone().isoformat(),
        "hostname": platform.node(),
    }  # fmt: skip
    suite_props = "".join(
        f"<property name={quoteattr(name)} value={quoteattr(value)} />"
        for name, value in suite_properties(conclusion.summaries, meta, final, conclusion.policies)
    )
    suite_attributes = " ".join(f"{name}={quoteattr(str(value))}" for name, value in attributes.items())
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as out:
        out.write('<?xml version="1.0" encoding="utf-8"?>\n<testsuites name="pytest tests">')
        out.write(f"<testsuite {suite_attributes}><properties>{suite_props}</properties>")
        for case in cases:
            out.write(case)
        out.write("</testsuite></testsuites>\n")


def _case_head(nodeid: str, seconds: float, attr: Callable[[str], str], quote: Callable[[str], str]) -> str:
    """A ``testcase`` start tag named as pytest's junitxml names a node id (``mangle_test_address``); ``attr``
    quotes the classname (cached: it repeats), ``quote`` the name (unique)."""
    path, bracket, params = nodeid.partition("[")
    names = path.split("::")
    names[0] = names[0].replace("/", ".")
    names[-1] += bracket + params
    return f'<testcase classname={attr(".".join(names[:-1]))} name={quote(names[-1])} time="{seconds:.3f}">'
