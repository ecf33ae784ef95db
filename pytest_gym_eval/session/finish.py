"""The end of a session (``pytest_sessionfinish``): :func:`finish_session`, the body of
:meth:`GymSession.finish <pytest_gym_eval.session.gym_session.GymSession.finish>` (conclude, the exit status, the
JUnit suite properties and gate testcases, the report files), and the index that keeps pytest's FAILURES section
linear (:class:`TeardownReportIndex`).

It reads the session through :class:`Finishing`, the members it needs, not the
:class:`~pytest_gym_eval.session.gym_session.GymSession` class: the session calls this module, so this module
cannot name it (an import cycle). What comes after it, the terminal's reward summary and Gym's stop, takes the whole
session: :mod:`pytest_gym_eval.session.closing`."""

from __future__ import annotations

import dataclasses
import os
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Protocol

import pytest

from pytest_gym_eval import provision
from pytest_gym_eval.gym.run import ModelEndpoint
from pytest_gym_eval.history.urls import redact_url
from pytest_gym_eval.options.gym_options import GymOptions
from pytest_gym_eval.outcomes import causes
from pytest_gym_eval.reporting import junit, outputs, run_history
from pytest_gym_eval.reporting.conclusion import Conclusion
from pytest_gym_eval.reporting.run_history import Remembered
from pytest_gym_eval.reporting.summary import RolloutResult
from pytest_gym_eval.session.launch import REPLAY_MODEL_NAME, Launch
from pytest_gym_eval.session.report_facts import report_meta, report_plan
from pytest_gym_eval.session.results import ResultsCollector
from pytest_gym_eval.session.status import final_status, gates_judged_passing, overruled_gate_lines
from pytest_gym_eval.tasks.model_servers import model_server_meta
from pytest_gym_eval.tasks.models import sampling_meta
from pytest_gym_eval.tasks.plan import PlannedRollout
from pytest_gym_eval.tasks.shard import CollectedPlan, shard_meta


class Finishing(Protocol):
    """What the end of a session reads and sets of it (:class:`~pytest_gym_eval.session.gym_session.GymSession`, or
    a stand-in in a test)."""

    config: pytest.Config
    options: GymOptions
    results: ResultsCollector
    launch: Launch
    baseline: dict[str, Any] | None
    run_dir: Path | None
    head_server: str | None
    conclusion: Conclusion | None
    """Set here: the conclusion the terminal shows, with the reason that decided the exit status."""
    final: tuple[int, str] | None
    """Set here: the session's exit status and its reason."""
    overruled_gates: list[str]
    """Set here: the terminal's lines for ``gym-gate`` items counted passed whose gates the end failed."""
    pages: list[str]
    """Set here: the terminal's lines saying which report files were written where."""

    @property
    def checkout(self) -> provision.GymCheckout | None: ...

    @property
    def model(self) -> ModelEndpoint | None: ...

    def ending(self, interrupted: bool = False) -> None: ...

    def conclude(self) -> Conclusion | None: ...

    def empty_share(self) -> bool: ...

    def rollouts(self) -> list[RolloutResult]: ...

    def judged_at_end(self) -> list[RolloutResult]: ...

    def startup_seconds(self) -> float | None: ...

    def collected_plan(self) -> CollectedPlan | None: ...

    def selected_rollouts(self) -> list[PlannedRollout]: ...


def finish_session(gym: Finishing, exitstatus: int) -> int:
    """The end of the session (:meth:`GymSession.finish <pytest_gym_eval.session.gym_session.GymSession.finish>`,
    in ``pytest_sessionfinish`` before pytest's JUnit file is written): let Gym finish (``gym.ending``; it is stopped
    later, after every report, by :class:`~pytest_gym_eval.session.closing.StopGymLast`), conclude, let the gates set
    the exit status, append the run to ``--gym-history`` (:func:`remember_session`; never changes the exit status),
    add the JUnit suite properties and gate testcases, and write the ``--gym-report`` file, the ``--gym-html`` page
    and the Markdown summaries (``gym.pages`` says where). Every gate judged failing here is one of
    ``conclusion.verdicts`` that fails (:func:`pytest_gym_eval.reporting.junit.gate_failures`), never judged again.
    Returns the session's exit status (``exitstatus`` unchanged when nothing was concluded). A report file that
    cannot be written is said on the terminal, never a crash that would also lose the summary and the JUnit XML."""
    gym.ending(interrupted=exitstatus == pytest.ExitCode.INTERRUPTED)
    if exitstatus == pytest.ExitCode.USAGE_ERROR:  # e.g. a run directory that cannot be made: nothing ran
        return exitstatus
    conclusion = gym.conclude()
    if conclusion is None:
        return exitstatus
    if exitstatus == pytest.ExitCode.INTERRUPTED and gym.results.stopped_by_maxfail:
        exitstatus = pytest.ExitCode.TESTS_FAILED  # -x under pytest-xdist: as without it, the gates decide
    status, reason = final_status(
        exitstatus, conclusion, len(gym.results.other_failures), len(gym.results.gate_failures)
    )
    empty = status == pytest.ExitCode.NO_TESTS_COLLECTED and gym.empty_share()
    if empty:
        status, reason = int(pytest.ExitCode.OK), empty_share_reason(gym)
    gym.final = (status, reason)
    if conclusion.exit_status != -1 or empty:  # the terminal's last line says what decided the exit status
        gym.conclusion = dataclasses.replace(conclusion, reason=reason)
    meta = {**run_meta(gym), **shard_meta(gym.options.shard)}
    remembered = remember_session(gym, meta, interrupted=exitstatus == pytest.ExitCode.INTERRUPTED)
    if remembered is not None:  # the terminal and the pages show what the history says of this run
        conclusion = dataclasses.replace(conclusion, history=tuple(remembered.lines()))
        if gym.conclusion is not None:
            gym.conclusion = dataclasses.replace(gym.conclusion, history=conclusion.history)
    failing = junit.gate_failures(conclusion.verdicts)  # per gym-gate testcase, the verdicts that fail it
    gym.overruled_gates = overruled_gate_lines(gym.results.gates_passed, failing)
    xml = junit.junit_xml(gym.config)
    if xml is not None:
        for name, value in junit.suite_properties(conclusion.summaries, meta, gym.final, conclusion.policies):
            xml.add_global_property(name, value)
        judged = gates_judged_passing(conclusion.summaries, failing)
        for nodeid in gym.results.unjudged_gates():  # a JUnit file without them would read green
            if nodeid.split("::", 1)[0] in judged and exitstatus != pytest.ExitCode.INTERRUPTED:
                junit.add_session_judged_gate(xml, nodeid)  # -x stopped it; the session judged every rollout
            else:
                junit.add_unjudged_gate(xml, nodeid, reason)
        fail_gates_the_session_failed(gym, xml, failing)
        ending = "interrupted" if exitstatus == pytest.ExitCode.INTERRUPTED else "the session stopped first"
        junit.add_judged_rollouts(gym.config, xml, gym.judged_at_end(), ending)  # each counted rollout has one
    final = dataclasses.replace(conclusion, exit_status=status, reason=reason)
    opts = gym.options
    written = outputs.write_outputs(
        final, gym.rollouts(), meta, (status, reason),
        paths=outputs.OutputPaths(opts.report, opts.html, opts.markdown), environ=os.environ,
        plan=report_plan_of(gym, meta) if opts.report is not None else None, baseline=gym.baseline,
        history=remembered.report_block() if remembered is not None else None,
    )  # fmt: skip
    gym.pages = written.lines
    return status


def empty_share_reason(gym: Finishing) -> str:
    """The reason an empty shard's session passes (see :func:`pytest_gym_eval.tasks.shard.empty_share`)."""
    return (
        f"shard {gym.options.shard} has no task of this run (more shards than tasks): nothing to run; "
        "its report tells the merge so"
    )


def fail_gates_the_session_failed(gym: Finishing, xml: Any, failing: dict[str, str]) -> None:
    """Give every gate testcase a verdict fails (``failing``: :func:`junit.gate_failures` of the verdicts) a failed
    ``gym-gate`` testcase: the testcase of the dataset's ``gym-gate`` item when it ran and passed (the item judged
    what it could when it ran, not a custom metric's gate, which only the session's end can judge), else one added
    (a session of test functions only has no such item; a comparison's or a baseline's gate has none). An item the
    session never ran is the error :func:`junit.add_unjudged_gate` added."""
    cases = getattr(gym.config.pluginmanager.get_plugin("gym-eval-junit"), "gate_cases", {})
    for nodeid, message in failing.items():
        if nodeid in cases:
            junit.fail_passed_gate(xml, cases[nodeid], message)
        elif nodeid not in gym.results.gates_expected:
            junit.add_failed_gate(xml, nodeid, message)


def remember_session(gym: Finishing, meta: dict[str, object], *, interrupted: bool = False) -> Remembered | None:
    """Append the session's run to ``--gym-history`` and judge it (:func:`run_history.remember`); None without
    a history. A ``--gym-shard`` session does not write (``merge --gym-history`` writes the merged run once, so
    that a sharded run counts once in every task's series): its result only says so. Nor does an ``interrupted``
    session (Ctrl-C, SIGTERM): its part of the run would count as a whole run in every task's stability and in the
    drift alarm, and ``--gym-resume`` finishes it in a session that writes the whole run once. Nor does a session
    whose Gym never started (:func:`run_history.never_started`): it rolled nothing out."""
    target = gym.options.history
    if target is None:
        return None
    if interrupted:
        return Remembered(
            redact_url(target),
            message="gym history: not written: the session was interrupted, and part of a run would count as a "
            "whole one in stability and drift (a session resuming it with --gym-resume writes the whole run)",
        )
    if gym.options.shard is not None:
        return Remembered(
            redact_url(target),
            message=f"gym history: not written by shard {gym.options.shard}; `python -m pytest_gym_eval merge "
            "--gym-history` writes the merged run once",
        )
    results = gym.rollouts()
    if run_history.never_started(results):
        return Remembered(redact_url(target), message=run_history.NEVER_STARTED)
    policies = [policy.name for policy in gym.options.policies]
    run, rollouts = run_history.run_records(results, meta, repository=gym.options.rootdir, policies=policies)
    return run_history.remember(target, run, rollouts)


def report_plan_of(gym: Finishing, meta: dict[str, object]) -> dict[str, Any] | None:
    """The JSON report's ``plan`` (:func:`pytest_gym_eval.session.report_facts.report_plan`; None when the session
    collected
    no rollout item); ``meta`` is the report's, whose dataset digests are reused."""
    collected = gym.collected_plan()
    if collected is None:
        return None
    # A pair whose item reported skipped (``pytest.skip`` at run time) or that --gym-adaptive's waves never asked
    # for was not selected: a merge must not count it as a rollout the shard lost.
    return report_plan(collected, gym.selected_rollouts(), gym.options, meta)


def cut_to_last_visible_entry(excinfo: pytest.ExceptionInfo[BaseException]) -> None:
    """Cut ``excinfo``'s traceback to its last entry that pytest shows, the one its crash line names.

    That is the last entry not hidden by ``__tracebackhide__`` (pluggy's and pytest's own frames hide
    themselves), not simply the last: a Ctrl-C that lands in a hidden frame would otherwise leave pytest a traceback
    with nothing to show, and pytest's terminal reporter fails on it (``assert excrepr.reprcrash is not None``,
    exit status 1 instead of 2). A traceback with no visible entry, or one entry, is left as it is."""
    visible = excinfo.traceback.filter(excinfo)
    if len(excinfo.traceback) > 1 and visible:
        excinfo.traceback = visible[-1:]


class TeardownReportIndex:
    """pytest's ``TerminalReporter._get_teardown_reports(node_id)``, answered from a map instead of a scan.

    For each failure in its FAILURES section, pytest (8.0 to 9.2 at least) lists every report of the session's
    ``""`` category (the passed setups and teardowns, two per test) to find that test's teardown reports: failures
    x tests in all. An evaluation fails a share of its rollouts by design, so at 20,000 rollouts with a fifth of
    them failing that summary alone took ~150 s of CPU here (a bare pytest session of as many tests and failures
    spent the same), longer than Gym took to run them. This answers the same question, the teardown reports of
    ``node_id`` that pdb did not show (pytest's ``getreports`` filter), from a map of the teardown reports by node
    id, built on the first call and again only when reports were added since: tests + failures in all."""

    def __init__(self, stats: dict[str, list[Any]]) -> None:
        self._stats = stats  # the reporter's own dict, which pytest appends reports to
        self._indexed = -1
        self._by_node: dict[str, list[Any]] = {}

    def __call__(self, node_id: object) -> list[Any]:
        """The teardown reports of ``node_id`` (a node id string, or pytest 9's structured ``NodeId``), in the
        order pytest received them."""
        reports = self._stats.get("", [])
        if len(reports) != self._indexed:
            self._by_node = {}
            for report in reports:
                if getattr(report, "when", None) == "teardown":
                    self._by_node.setdefault(str(report.nodeid), []).append(report)
            self._indexed = len(reports)
        return [report for report in self._by_node.get(str(node_id), ()) if not hasattr(report, "_pdbshown")]


def index_teardown_reports(reporter: pytest.TerminalReporter | None) -> None:
    """Give ``reporter`` a :class:`TeardownReportIndex` for its ``_get_teardown_reports`` (a private method, so
    only when it has one; none with ``-p no:terminal``)."""
    if reporter is not None and callable(getattr(type(reporter), "_get_teardown_reports", None)):
        setattr(reporter, "_get_teardown_reports", TeardownReportIndex(reporter.stats))  # noqa: B010 (mypy refuses assigning to a method)


def run_meta(gym: Finishing) -> dict[str, object]:
    """Facts about ``gym``'s run for the JSON report and the JUnit suite (never a secret)."""
    checkout, model = gym.checkout, gym.model
    run: dict[str, object] = {
        "gym_version": checkout.version if checkout else None,
        "gym_checkout": str(checkout.path) if checkout else None,
        "model": model.model if model else None,
        "model_url": causes.redact(model.url) if model else None,
        "model_type": model.model_type if model else None,
        "api_key_env": model.api_key_env if model else None,  # the variable's name, never its value
        "head_server": gym.head_server,
        "run_dir": str(gym.run_dir) if gym.run_dir else None,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "session_id": uuid.uuid4().hex,  # the run's key in the history (run_history.run_key)
        **gym.options.sampling.meta(),
        **sampling_meta(gym.options.policies, gym.options.sampling),
        **model_server_meta(
            gym.launch.bindings.served if gym.launch.bindings is not None else gym.options.model_servers,
            gym.options.model_type,
        ),
        **run_history.policy_meta([(p.name, p.model or REPLAY_MODEL_NAME) for p in gym.options.policies]),
        **(gym.options.price.meta() if gym.options.price is not None else {}),
        "warm_gym": warm.entry.key if (warm := gym.launch.warm) is not None and warm.entry is not None else None,
        "resumed_from": str(gym.options.resume) if gym.options.resume is not None else None,
        "startup_seconds": gym.startup_seconds(),
    }
    return report_meta(gym.options, gym.rollouts(), run)
