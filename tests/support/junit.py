"""Reading JUnit XML files the plugin wrote (either family) and validating them against the schemas here."""

from __future__ import annotations

from pathlib import Path

from tests.support import SUPPORT


def junit_rollouts(path: Path) -> dict[str, dict[str, str]]:
    """testcase name -> a rollout's values as strings (``reward``, ``task_id``, ``repeat``, ...) from a JUnit XML
    file of either family: the testcase's ``<properties>`` (xunit1) or its ``<system-out>`` line (xunit2)."""
    import xml.etree.ElementTree as ET

    from pytest_gym_eval.reporting.junit_values import parse_system_out

    found = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        values = {p.get("name", ""): p.get("value", "") for p in case.iter("property")}
        for out in case.iter("system-out"):
            values.update({k: str(v) for k, v in (parse_system_out(out.text or "") or {}).items()})
        found[case.get("name", "")] = values
    return found


def junit_suite_properties(path: Path) -> dict[str, str]:
    """The test suite's properties (name -> value) of a JUnit XML file."""
    import xml.etree.ElementTree as ET

    suite = ET.parse(path).getroot().find("testsuite")
    assert suite is not None
    properties = suite.find("properties")
    return {} if properties is None else {p.get("name", ""): p.get("value", "") for p in properties}


def junit_aggregates(path: Path, prefix: str | tuple[str, ...] = "gym::") -> dict[str, str]:
    """The test suite's properties whose names start with ``prefix`` (a dataset's aggregates, e.g.
    ``gym::datasets/``), without wall times (they differ between sessions over the same rollouts)."""
    import xml.etree.ElementTree as ET

    suite = ET.parse(path).getroot().find("testsuite")
    assert suite is not None
    properties = suite.find("properties")
    assert properties is not None
    return {
        name: p.get("value", "")
        for p in properties
        if (name := p.get("name", "")).startswith(prefix) and not name.endswith("wall_time")
    }


def validate_junit(path: Path, family: str = "xunit2") -> None:
    """Validate a JUnit XML file against the structure of pytest's ``junit_family`` (``tests/support/junit-
    <family>.xsd``, written from the published JUnit schema); raises xmlschema's error naming what is wrong."""
    import xmlschema

    xmlschema.XMLSchema(SUPPORT / f"junit-{'xunit1' if family == 'legacy' else family}.xsd").validate(path)
