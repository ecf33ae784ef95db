"""JUnit XML: the test suite's properties (every aggregate of the reward summary, and run facts), and a whole
JUnit file for rollouts that no pytest session reported (the merge of shard reports)."""

from __future__ import annotations

import functools
import math
import platform
import re
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from xml.sax.saxutils import escape, quoteattr

from pytest_gym_eval.gates import GateResult
from pytest_gym_eval.reporting.model import Conclusion, DatasetSummary, RolloutResult

# --- JUnit suite properties -------------------------------------------------------------------------------


def suite_properties(summaries: Sequence[DatasetSummary], meta: Mapping[str, object]) -> list[tuple[str, str]]:
    """(name, value) pairs for the JUnit XML ``<properties>`` of the test suite.

    First ``gym.<key>`` for each ``meta`` value that is a str, int or finite float; then per summary, with
    ``P = gym.<dataset>`` (``gym.<dataset>[<agent>]`` for one agent of several): ``P.tasks``, ``P.rollouts``,
    ``P.scored``, ``P.errors``, ``P.flaky_tasks`` (a count), ``P.wall_time`` (seconds), ``P.threshold``,
    ``P.mean_reward``, ``P.pass_rate`` and ``P.pass_at_<k>`` each with ``.low`` and ``.high``,
    ``P.gate.<label-slug>`` = verdict (e.g. ``P.gate.mean_reward_ge_0.70``) and ``P.verdict``. Numbers use
    6 significant digits; non-finite numbers (a nan estimate, infinite bounds) are left out.
    """
    properties: list[tuple[str, str]] = []
    for key, value in meta.items():
        text = _property_value(value)
        if text is not None:
            properties.append((f"gym.{key}", text))
    for summary in summaries:
        properties.extend(_summary_properties(summary))
    return properties


def _summary_properties(summary: DatasetSummary) -> list[tuple[str, str]]:
    prefix = f"gym.{summary.dataset}" if summary.agent is None else f"gym.{summary.dataset}[{summary.agent}]"
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
    for name, interval in intervals.items():
        pairs += [(name, interval.estimate), (f"{name}.low", interval.low), (f"{name}.high", interval.high)]
    pairs += [(f"gate.{_slug(result.gate.label)}", result.verdict.value) for result in summary.gates]
    if summary.verdict is not None:
        pairs.append(("verdict", summary.verdict.value))
    properties: list[tuple[str, str]] = []
    for name, value in pairs:
        text = _property_value(value)
        if text is not None:
            properties.append((f"{prefix}.{name}", text))
    return properties


def _property_value(value: object) -> str | None:
    """The property text of a str, int or finite float; None for anything else."""
    if isinstance(value, float):
        return format(value, ".6g") if math.isfinite(value) else None
    if isinstance(value, (str, int)):
        return str(value)
    return None


def _slug(label: str) -> str:
    """``mean reward >= 0.70`` → ``mean_reward_ge_0.70``; ``pass@4 >= 0.50`` → ``pass@4_ge_0.50``."""
    return re.sub(r"[^A-Za-z0-9.@]+", "_", label.replace(">=", "ge")).strip("_")


# --- A whole JUnit XML file (the merge of shard reports) -------------------------------------------------


def write_junit_xml(
    path: Path,
    results: Sequence[RolloutResult],
    conclusion: Conclusion,
    meta: Mapping[str, object],
    thresholds: Mapping[str, float],
    *,
    inconclusive_passes: bool,
) -> None:
    """Write a JUnit XML file for ``results`` laid out as pytest's ``--junitxml`` lays out a session's.

    One ``testcase`` per rollout (``classname`` the dataset path dotted, ``name`` ``<task>[r<k>]``, ``time``
    its seconds when known) with the properties a rollout item carries (``task_id``, ``repeat``, ``agent``,
    ``reward``, ``record``, ``failure_class``), a ``failure`` when its reward is below the pass threshold
    (``thresholds`` by dataset) and an ``error`` when it has no reward; one ``gym-gate`` testcase per gated
    dataset, failing when a gate does not pass (INCONCLUSIVE passes when ``inconclusive_passes``); the suite
    carries :func:`suite_properties` of ``conclusion.summaries`` and ``meta``. The text is written as it is made
    (160,000 testcases took ~10x longer through ElementTree). Creates missing parent folders; raises OSError
    when the file cannot be written.
    """
    cases: list[str] = []
    failures = errors = 0
    attr = _attribute_cache()
    for result in results:
        timed = result.start > 0.0 and result.stop >= result.start
        props = [
            f'<property name="task_id" value={quoteattr(result.task_id)} />',
            f'<property name="repeat" value="{result.repeat}" />',
            f'<property name="agent" value={attr(result.agent)} />',
        ]
        if result.reward is not None:
            props.append(f'<property name="reward" value="{result.reward!r}" />')
        if result.record:
            props.append(f'<property name="record" value={quoteattr(result.record)} />')
        if result.failure_class:
            props.append(f'<property name="failure_class" value={attr(result.failure_class)} />')
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
        head = _case_head(result.nodeid, result.stop - result.start if timed else 0.0, attr)
        cases.append(f"{head}<properties>{''.join(props)}</properties>{outcome}</testcase>")
    gated: dict[str, list[GateResult]] = {}
    for summary in conclusion.summaries:
        if summary.gates:
            gated.setdefault(summary.dataset, []).extend(summary.gates)
    for dataset, gate_results in gated.items():
        failing = [gate for gate in gate_results if not gate.passed(inconclusive_passes)]
        outcome = ""
        if failing:
            failures += 1
            text = escape("\n".join(gate.describe() for gate in failing))
            outcome = f'<failure message="gates not met">{text}</failure>'
        gate_props = "".join(f'<property name="gate" value={quoteattr(gate.describe())} />' for gate in gate_results)
        head = _case_head(f"{dataset}::gym-gate", 0.0, attr)
        cases.append(f"{head}<properties>{gate_props}</properties>{outcome}</testcase>")
    timed_results = [r for r in results if r.start > 0.0 and r.stop >= r.start]
    span = (max(r.stop for r in timed_results) - min(r.start for r in timed_results)) if timed_results else 0.0
    attributes = {
        "name": "pytest", "errors": errors, "failures": failures, "skipped": 0, "tests": len(results) + len(gated),
        "time": f"{span:.3f}", "timestamp": datetime.now(timezone.utc).astimezone().isoformat(),
        "hostname": platform.node(),
    }  # fmt: skip
    suite_props = "".join(
        f"<property name={quoteattr(name)} value={quoteattr(value)} />"
        for name, value in suite_properties(conclusion.summaries, meta)
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as out:
        out.write('<?xml version="1.0" encoding="utf-8"?>\n<testsuites name="pytest tests">')
        out.write(f"<testsuite {_attributes(attributes)}><properties>{suite_props}</properties>")
        for case in cases:
            out.write(case)
        out.write("</testsuite></testsuites>\n")


def _attributes(values: Mapping[str, object]) -> str:
    return " ".join(f"{name}={quoteattr(str(value))}" for name, value in values.items())


def _attribute_cache() -> Callable[[str], str]:
    """``quoteattr`` remembering its answers: agents, classnames and messages repeat across 100,000 testcases."""
    return functools.lru_cache(maxsize=4096)(quoteattr)


def _case_head(nodeid: str, seconds: float, attr: Callable[[str], str]) -> str:
    """A ``testcase`` start tag named as pytest's junitxml names a node id (``mangle_test_address``)."""
    path, bracket, params = nodeid.partition("[")
    names = path.split("::")
    names[0] = names[0].replace("/", ".")
    names[-1] += bracket + params
    return f'<testcase classname={attr(".".join(names[:-1]))} name={quoteattr(names[-1])} time="{seconds:.3f}">'
