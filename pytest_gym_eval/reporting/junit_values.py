"""A JUnit testcase's values in the form the selected ``junit_family`` allows: under ``xunit1`` (or ``legacy``) an
item's values are its testcase's ``<properties>``; under ``xunit2`` (pytest's default), whose schema has no testcase
properties, one line ``gym-eval: {JSON object}`` in its ``<system-out>`` (:func:`system_out_line`,
:func:`parse_system_out`), moved there from the item's report (:func:`move_rollout_values`). Which values are the
plugin's: a dataset item's (:func:`is_dataset_item`) all, a test function's its rollout's (:data:`TEST_PROPERTIES`).
The names: :mod:`pytest_gym_eval.reporting.junit`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest

from pytest_gym_eval.gym.on_demand import ON_DEMAND_PROPERTY
from pytest_gym_eval.outcomes.custom_metrics import PROPERTY_PREFIX as METRIC_PREFIX
from pytest_gym_eval.outcomes.custom_metrics import REASON_PREFIX

SYSTEM_OUT_PREFIX = "gym-eval: "
"""How the line that carries a rollout's values in an xunit2 testcase's ``<system-out>`` starts."""


ROLLOUT_PROPERTIES = (
    "reward", "task_id", "repeat", "agent", "record", "failure_class",
    "input_tokens", "output_tokens", "total_tokens", "latency", "answer",
)  # fmt: skip
"""The per-rollout values a rollout item carries in its ``user_properties`` (tokens and latency when Gym recorded
them; ``answer``, the digest of the policy's answer, when its record had one)."""


TEST_PROPERTIES = frozenset(
    {"gym_rollout", "gym_rollout_status", "gym_rollout_agent", "gym_rollout_counted", ON_DEMAND_PROPERTY}
)
"""The ``user_properties`` names of a test function's rollout (the ``gym_rollout`` fixture's, beside
:data:`ROLLOUT_PROPERTIES` and its custom metrics, ``gym_metric.<name>``, with their reasons,
``gym_metric_reason.<name>``; :mod:`pytest_gym_eval.session.rollout_tests`) and
of its on-demand rollouts' rewards."""


GATE_PROPERTY = "gate"
"""The ``user_properties`` name of a gate item's judged gates (one per gate)."""


def system_out_line(values: Sequence[tuple[str, object]]) -> str:
    """The ``<system-out>`` line carrying an item's values under xunit2: :data:`SYSTEM_OUT_PREFIX` and a JSON
    object, e.g. ``gym-eval: {"task_id": "q1", "repeat": 0, "agent": "mcqa_simple_agent", "reward": 1.0}``;
    a gate item's ``gate`` values become one ``gates`` list, a test's on-demand rewards one
    ``gym_on_demand_reward`` list (one per call)."""
    lists = (GATE_PROPERTY, ON_DEMAND_PROPERTY)
    data: dict[str, object] = {name: value for name, value in values if name not in lists}
    gates = [value for name, value in values if name == GATE_PROPERTY]
    if gates:
        data["gates"] = gates
    rewards = [value for name, value in values if name == ON_DEMAND_PROPERTY]
    if rewards:
        data[ON_DEMAND_PROPERTY] = rewards
    return SYSTEM_OUT_PREFIX + json.dumps(data, ensure_ascii=False, default=str)


def parse_system_out(text: str) -> dict[str, Any] | None:
    """The rollout values in a testcase's ``<system-out>`` text (the inverse of :func:`system_out_line`), or
    None when it has no such line."""
    for line in text.splitlines():  # one prefixed line in XML text, not a JSON-lines file
        if line.startswith(SYSTEM_OUT_PREFIX):
            value = json.loads(line[len(SYSTEM_OUT_PREFIX) :])
            return value if isinstance(value, dict) else None
    return None


GATE_SUFFIX = "::gym-gate"
"""How a dataset's gate item's node id ends (``path/to/data.jsonl::gym-gate``)."""


ROLLOUT_KEYS = frozenset({"task_id", "repeat", "agent"})
"""The ``user_properties`` every rollout item carries from collection on, in every report: they tell its reports."""


def is_dataset_item(report: pytest.TestReport) -> bool:
    """Whether ``report`` is a dataset item's, a rollout item's (:data:`ROLLOUT_KEYS` in its ``user_properties``) or
    a gate item's (node id ending in :data:`GATE_SUFFIX`): every property of such an item is the plugin's."""
    return report.nodeid.endswith(GATE_SUFFIX) or {name for name, _ in report.user_properties} >= ROLLOUT_KEYS


def move_rollout_values(xml: Any, report: pytest.TestReport) -> None:
    """Under ``junit_family=xunit2``, put an item's values in its testcase's ``<system-out>`` and take them out of
    the teardown ``report``'s ``user_properties``, from which pytest would write ``<properties>`` that the xunit2
    schema does not allow: every property of a dataset item (:func:`is_dataset_item`: whatever the session added,
    whichever way it ended, skipped by a selection or not), and the plugin's own of a test function (a
    ``gym_rollout`` test's rollout values and custom metrics with their reasons, on-demand rewards). Call on the
    teardown report before pytest's JUnit writer sees it. Does nothing under xunit1 and legacy (properties are
    valid there), nor for a test function without the plugin's properties (its own ``record_property`` values stay
    the user's).
    """
    if report.when != "teardown" or getattr(xml, "family", "xunit1") in ("xunit1", "legacy"):
        return
    if not report.user_properties:
        return
    present = {name for name, _ in report.user_properties}
    whole = is_dataset_item(report)
    test = bool(TEST_PROPERTIES & present)
    if not (whole or test):
        return

    def ours(name: object) -> bool:
        return (
            whole
            or name in ROLLOUT_PROPERTIES
            or name in TEST_PROPERTIES
            or (isinstance(name, str) and name.startswith((METRIC_PREFIX, REASON_PREFIX)))
        )

    values = [(name, value) for name, value in report.user_properties if ours(name)]
    from xml.etree import ElementTree

    node = ElementTree.Element("system-out")
    node.text = system_out_line(values)
    xml.node_reporter(report).append(node)
    report.user_properties = [(n, v) for n, v in report.user_properties if not ours(n)]
