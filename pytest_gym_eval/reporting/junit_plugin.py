"""The plugin object around pytest's JUnit writer (:class:`RolloutValuesInJunit`): it moves each item's values where
the ``junit_family`` allows them before the writer sees a report, and names and errors the testcases a session left
unfinished (:func:`close_unfinished`) before the writer writes its file.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest

from pytest_gym_eval.reporting.junit import junit_xml, on_demand_error_as_error
from pytest_gym_eval.reporting.junit_values import move_rollout_values


def close_unfinished(xml: Any, reason: str) -> None:
    """Name and error each testcase pytest's JUnit writer ``xml`` opened without a name and never finished: pytest
    opens a testcase with only its ``time`` for a setup that passed, and names it at the report that gives it an
    outcome (the call's). A session that ends between the two (Ctrl-C or SIGTERM during a test's call, pytest-xdist's
    ``-x`` stopping the other workers' items) would write a ``<testcase>`` without the ``name`` every JUnit schema
    requires, that reads as passed. Each gets its ``classname`` and ``name`` as pytest gives them and an ``<error>``
    (counted among the suite's ``errors``) saying the session ended before it finished, and why (``reason``). Call
    before the writer writes its file (its ``pytest_sessionfinish``)."""
    for reporter in list(xml.node_reporters.values()):
        if "name" in reporter.attrs:  # named at a report that gave it an outcome
            continue
        nodeid = str(reporter.id)
        location = (nodeid.split("::", 1)[0], None, nodeid)
        reporter.record_testreport(pytest.TestReport(nodeid, location, {}, "failed", None, "call"))
        message = f"the session ended before this test finished ({reason})"
        reporter._add_simple("error", message, message)


def end_reason(session: pytest.Session, exitstatus: int) -> str:
    """Why ``session`` ended before every test finished, in a few words: ``interrupted`` (Ctrl-C, SIGTERM), pytest's
    own reason to stop (``stopping after 1 failures``), or else ``exit status N``."""
    stop = session.shouldstop or session.shouldfail
    said = stop if isinstance(stop, str) and stop else None
    if exitstatus == pytest.ExitCode.INTERRUPTED:
        return f"interrupted: {said}" if said else "interrupted"
    return said or f"exit status {int(exitstatus)}"


class RolloutValuesInJunit:
    """A plugin object (registered by the plugin once it makes the session, after pytest's JUnit writer
    registered itself in its ``pytest_configure``) that applies
    :func:`~pytest_gym_eval.reporting.junit_values.move_rollout_values` to every report before pytest's JUnit writer
    sees it and :func:`~pytest_gym_eval.reporting.junit.on_demand_error_as_error` after, and :func:`close_unfinished` at
    the session's end; it keeps each ``gym-gate`` item's testcase (``gate_cases``) for
    :func:`~pytest_gym_eval.reporting.junit.fail_passed_gate`."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.gate_cases: dict[str, Any] = {}
        """The node reporter of each ``gym-gate`` item that reported, by node id."""
        self.named: set[str] = set()
        """Node ids whose testcase a report gave an outcome (a call's, or a setup or teardown that did not pass),
        for :func:`~pytest_gym_eval.reporting.junit.add_judged_rollouts`."""

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> Generator[None, None, None]:
        """Around pytest's JUnit writer: move a rollout's values out of its teardown report under xunit2, and
        write an on-demand rollout's error as an error (pytest hook)."""
        xml = junit_xml(self.config)
        if xml is not None:
            if report.when == "call" or not report.passed:
                self.named.add(report.nodeid)
            move_rollout_values(xml, report)
            if report.when == "teardown" and report.nodeid.endswith("::gym-gate"):
                self.gate_cases[report.nodeid] = xml.node_reporter(report)
        yield
        if xml is not None:
            on_demand_error_as_error(xml, report)

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        """Name and error the testcases the session left open (:func:`close_unfinished`; pytest hook). Not
        ``tryfirst``: after the plugin's own ``pytest_sessionfinish`` (which adds the gates that never ran), and
        before pytest's JUnit writer's, which was registered before this object, so is called after it."""
        xml = junit_xml(self.config)
        if xml is not None:
            close_unfinished(xml, end_reason(session, exitstatus))
