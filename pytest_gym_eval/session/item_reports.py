"""What one item's test report says: a rollout item's result, the rollout a test function over it got, and how
that test ended.

Read from the reports' ``user_properties`` (what the items and the ``gym_rollout`` fixture record), so under
pytest-xdist the controller reads every worker's reports as a single process reads its own
(:class:`~pytest_gym_eval.session.results.ResultsCollector` takes them).
"""

from __future__ import annotations

import itertools

import pytest

from pytest_gym_eval.outcomes.causes import redact
from pytest_gym_eval.outcomes.custom_metrics import metrics_of, reasons_of
from pytest_gym_eval.outcomes.usage import usage_from_properties
from pytest_gym_eval.reporting import summary as rpt

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
(:func:`~pytest_gym_eval.session.results.counts_in_dataset`); with ``gym_rollout`` it is on the test from
collection on, so that even a test skipped before it got its rollout names it."""
