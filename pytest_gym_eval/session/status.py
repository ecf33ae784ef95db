"""The session's exit status: the conclusion's against pytest's own (:func:`final_status`), and the ``gym-gate``
items whose pass pytest counted though the session's end judged their gates not passing.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

import pytest

from pytest_gym_eval.reporting import summary as rpt
from pytest_gym_eval.reporting.conclusion import Conclusion
from pytest_gym_eval.session.item_reports import GATE_SUFFIX


def gates_judged_passing(summaries: Sequence[rpt.DatasetSummary], failing: Mapping[str, str]) -> set[str]:
    """The datasets (node-id paths) whose gates decide, were judged on every selected rollout (none unreported), and
    whose ``gym-gate`` testcase no verdict fails (``failing``, by node id: :func:`~pytest_gym_eval.reporting.junit.
    gate_failures` of the conclusion's verdicts)."""
    return {
        summary.dataset
        for summary in summaries
        if summary.gates
        and summary.gates_decide
        and not summary.unreported
        and summary.dataset + GATE_SUFFIX not in failing
    }


def overruled_gate_lines(gates_passed: Collection[str], failing: Mapping[str, str]) -> list[str]:
    """The terminal's lines for each ``gym-gate`` item pytest counted passed (``gates_passed``, node ids) that a
    verdict of the session's end fails (``failing``: the failure message per ``gym-gate`` node id,
    :func:`~pytest_gym_eval.reporting.junit.gate_failures`): which gate, and why pytest's count says passed (the item
    judged what it could when it ran; the session's end judged every rollout and every test function's metrics, or
    the family of gates with ``--gym-familywise``)."""
    return [
        f"gym gates: {nodeid} is counted PASSED above, but the session's end failed its gates (the item judged "
        f"what it could when it ran; the end judges every rollout and metric): "
        + "; ".join(failing[nodeid].splitlines())
        for nodeid in sorted(gates_passed)
        if nodeid in failing
    ]


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
