"""pytest-gym-eval's pytest hooks. Each is a few lines handing over to the session object
(:class:`~pytest_gym_eval.session.GymSession`) or to the collector (:mod:`pytest_gym_eval.items`)."""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Generator
from pathlib import Path

import pytest

from pytest_gym_eval import hookspecs, integrations, results, shard, xdist
from pytest_gym_eval.causes import GYM_EXITED, unexpected_error
from pytest_gym_eval.items import (
    GYM_MARK,
    DatasetFile,
    GateItem,
    OutcomeText,
    RolloutError,
    RolloutFailed,
    RolloutItem,
)
from pytest_gym_eval.options import add_options, check_config_source, dataset_name
from pytest_gym_eval.reporting import json_report, junit, outputs, terminal
from pytest_gym_eval.reporting.gym_metrics import read_gym_metrics
from pytest_gym_eval.run import GymStartError
from pytest_gym_eval.session import SESSION_KEY, GymSession


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    """Register this plugin's hookspecs (:mod:`pytest_gym_eval.hookspecs`)."""
    pluginmanager.add_hookspecs(hookspecs)


def pytest_addoption(parser: pytest.Parser) -> None:
    """Add the ``--gym-*`` options and ``gym_*`` ini settings (:mod:`pytest_gym_eval.options`)."""
    add_options(parser)


@pytest.hookimpl(trylast=True)  # after pytest-xdist's, so a controller knows it is one
def pytest_configure(config: pytest.Config) -> None:
    """Make the session's :class:`GymSession` (reachable as ``config.stash[SESSION_KEY]``) and its results
    collector."""
    config.addinivalue_line("markers", f"{GYM_MARK}: a NeMo Gym rollout (on every dataset file, so on all its items)")
    check_config_source(config)
    gym = config.stash[SESSION_KEY] = GymSession(config)
    # Every item's reports reach the collector's pytest_runtest_logreport: this process's own and, on the
    # xdist controller, every worker's.
    config.pluginmanager.register(gym.results, "gym-eval-results")
    config.pluginmanager.register(junit.RolloutValuesInJunit(config), "gym-eval-junit")
    config.pluginmanager.register(StopGymLast(gym), "gym-eval-stop")
    integrations.register(config, gym)


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own, which starts the workers (pytest_configure_node)
def pytest_sessionstart(session: pytest.Session) -> None:
    """On a pytest-xdist controller, register the controller that owns the Gym run (:mod:`pytest_gym_eval.xdist`).
    Not in ``pytest_configure``: xdist registers its session there too, last, and which of the two runs first
    varies with how the plugins were found (an in-process pytest found no controller and its workers no run
    directory)."""
    xdist.register_if_controller(session.config, session.config.stash[SESSION_KEY])


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> DatasetFile | None:
    """A ``.jsonl`` file named on the command line or matched by ``gym_datasets`` is a dataset; any other
    ``.jsonl`` file (Gym's own output files among them) is left alone."""
    if file_path.suffix != ".jsonl":
        return None
    gym = parent.config.stash[SESSION_KEY]
    if parent.session.isinitpath(file_path) or gym.options.is_dataset(file_path):
        return DatasetFile.from_parent(parent, path=file_path, nodeid=dataset_name(file_path, gym.options.rootdir))
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Record every collected (task, repeat) pair for the report; with ``--gym-shard``, deselect the other
    shards' items (:mod:`pytest_gym_eval.shard`)."""
    # tryfirst: the record must see every collected item, before -k, -m, --deselect and --lf deselect some.
    shard.collect_and_select(config, items)


def pytest_deselected(items: list[pytest.Item]) -> None:
    """Note the rollout items ``-k``, ``-m``, ``--deselect``, ``--lf``, ``--sw`` or the shard left out: a gate is
    labelled with the part of its dataset it was judged on (:mod:`pytest_gym_eval.selection`)."""
    if items:
        items[0].config.stash[SESSION_KEY].deselected(items)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    """Plan the Gym run from the selected items (after ``-k``, ``-m``, ``--lf`` and ``--deselect``)."""
    # tryfirst: under xdist a worker must save the plan before it reports its collection to the controller.
    gym = session.config.stash[SESSION_KEY]
    gym.plan_items(session.items)
    gym.results.gates_expected.update(item.nodeid for item in session.items if isinstance(item, GateItem))


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session: pytest.Session) -> None:
    """Start Gym before the first item runs, so that no item's duration holds Gym's start-up (it is reported as
    itself: the ``gym.startup_seconds`` suite property). Items still call :meth:`GymSession.start`, which then
    returns at once, or raises the start's error on each of them."""
    gym = session.config.stash[SESSION_KEY]
    if gym.starts_before_items(session):
        with contextlib.suppress(GymStartError):
            gym.start()


@pytest.fixture(scope="session")
def gym_session(request: pytest.FixtureRequest) -> GymSession:
    """The session's Gym run, started before the first item runs (or on first use) and stopped at the end of the
    session, after the reports are written.

    Before the first item (or the first time a test requesting this fixture runs) this starts ``gym env start``
    once with every environment the selected datasets need (or attaches with ``--gym-head-server``), waits
    until Gym's servers and the model endpoint are ready, and starts one ``gym eval run`` over exactly the
    selected (task, repeat) pairs. At the end of the session (also after Ctrl-C, SIGTERM or a crash), once the
    reports are written, it stops everything it started. Under pytest-xdist the controller owns Gym and the
    workers follow it.

    Returns the :class:`~pytest_gym_eval.session.GymSession`: ``run_dir``, ``head_server``, ``plan``,
    ``options``. Raises :class:`~pytest_gym_eval.run.GymStartError` when Gym cannot start.
    """
    gym = request.config.stash[SESSION_KEY]
    gym.start()
    return gym


OWN_FAILURES = (RolloutError, RolloutFailed, GymStartError)
PAGES_KEY = pytest.StashKey[list[str]]()
"""The terminal lines saying which report files were written where (the ``--gym-report`` file, then
:func:`~pytest_gym_eval.reporting.outputs.write_pages`), or why one could not be."""


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Report a rollout's failure or error by its message alone, without a traceback into the plugin; a rollout
    that errored because Gym could not start gets the failure class ``gym_start``."""
    report: pytest.TestReport = yield
    if isinstance(item, (RolloutItem, GateItem)) and call.excinfo and isinstance(call.excinfo.value, OWN_FAILURES):
        error = call.excinfo.value
        gym = item.config.stash[SESSION_KEY]
        outcome = item.outcome if isinstance(item, RolloutItem) else None
        if isinstance(error, GymStartError):
            text = gym.start_failure(item.nodeid, str(error))
        elif isinstance(error, RolloutError) and outcome is not None and outcome.failure_class == GYM_EXITED:
            text = gym.error_once(item.nodeid, str(error))  # Gym died: every pending rollout says the same
        else:
            text = str(error)
        path, line, _ = item.reportinfo()
        report.longrepr = OutcomeText(text, Path(path), (line or 0) + 1)
        if isinstance(error, GymStartError) and isinstance(item, RolloutItem):
            # On the item too: its teardown report, which JUnit takes the properties from, is made later.
            for properties in (item.user_properties, report.user_properties):
                properties.append(("failure_class", error.failure_class))
    elif isinstance(item, RolloutItem) and call.excinfo and report.failed and call.when in ("setup", "call"):
        failure_class, text = unexpected_error(call.excinfo.value)
        if text:  # an OS error: its one line names the path, no traceback into the plugin
            path, line, _ = item.reportinfo()
            report.longrepr = OutcomeText(text, Path(path), (line or 0) + 1)
        for properties in (item.user_properties, report.user_properties):
            properties.append(("failure_class", failure_class))
    return report


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Summarise the rewards, let the gates set the exit status, and write the JUnit suite properties, the
    ``--gym-report`` file, the ``--gym-html`` page and the Markdown summaries. Gym is stopped only after these
    and pytest's JUnit file (:class:`StopGymLast`): from here a Ctrl-C or SIGTERM kills it at once instead of
    interrupting the reports."""
    # tryfirst: the suite properties must be in place before junitxml writes its file in its own sessionfinish.
    gym = session.config.stash[SESSION_KEY]
    gym.ending(interrupted=exitstatus == pytest.ExitCode.INTERRUPTED)
    if exitstatus == pytest.ExitCode.USAGE_ERROR:  # e.g. a run directory that cannot be made: nothing ran
        return
    conclusion = gym.conclude()
    if conclusion is None:
        return
    if exitstatus == pytest.ExitCode.INTERRUPTED and gym.results.stopped_by_maxfail:
        exitstatus = pytest.ExitCode.TESTS_FAILED  # -x under pytest-xdist: as without it, the gates decide
    status, reason = results.final_status(
        exitstatus, conclusion, len(gym.results.other_failures), len(gym.results.gate_failures)
    )
    session.exitstatus = status
    gym.final = (status, reason)
    if conclusion.exit_status != -1:  # the terminal's last line says what decided the exit status
        gym.conclusion = dataclasses.replace(conclusion, reason=reason)
    meta = {**gym.meta(), **shard.shard_meta(gym.options.shard)}
    xml = junit.junit_xml(session.config)
    if xml is not None:
        for name, value in junit.suite_properties(conclusion.summaries, meta, gym.final):
            xml.add_global_property(name, value)
        for nodeid in gym.results.unjudged_gates():  # a JUnit file without them would read green
            junit.add_unjudged_gate(xml, nodeid, reason)
    written: list[str] = []
    if gym.options.report is not None:
        plan = shard.report_plan_of(session.config, gym, meta)
        report = json_report.build_report(
            conclusion.summaries, gym.rollouts(), meta, gym.final, flips=conclusion.flips, plan=plan
        )
        try:  # as the HTML page: a file that cannot be written is said on the terminal, never a crash that
            # would also lose the summary and the JUnit XML (written after this hook)
            json_report.write_report(gym.options.report, report)
        except OSError as error:
            written.append(f"gym report: could not write {gym.options.report}: {error}")
        else:
            written.append(f"gym report: {gym.options.report}")
    final = dataclasses.replace(conclusion, exit_status=status, reason=reason)
    opts = gym.options
    written += outputs.write_pages(
        final,
        gym.rollouts(),
        meta,
        html_path=opts.html,
        markdown_path=opts.markdown,
        json_path=opts.report,
        baseline=gym.baseline,
        environ=os.environ,
    )
    session.config.stash[PAGES_KEY] = written


class StopGymLast:
    """Stops Gym at the end of the session, after every report (registered as ``gym-eval-stop``), and keeps an
    interrupted session's way to its reports short."""

    def __init__(self, gym: GymSession) -> None:
        self.gym = gym

    @pytest.hookimpl(tryfirst=True)
    def pytest_keyboard_interrupt(self, excinfo: pytest.ExceptionInfo[BaseException]) -> None:
        """While Gym runs, pytest formats the traceback of a Ctrl-C or SIGTERM from its last entry only (unless
        ``--full-trace``): it shows only the last line anyway, and formatting every entry parsed each file's source
        (1-2 s on a loaded machine) before the reports could be written."""
        if self.gym.has_processes and not self.gym.config.option.fulltrace and len(excinfo.traceback) > 1:
            excinfo.traceback = excinfo.traceback[-1:]

    @pytest.hookimpl(trylast=True)
    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        """Stop Gym once every report is written (this runs after every ``pytest_sessionfinish``, pytest's JUnit
        file among them) and the reward summary is shown; pytest's short test summary and last line follow."""
        self.stop(terminalreporter)

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        """Stop Gym if nothing did yet (pytest showed no terminal summary: an internal error, say)."""
        self.stop(config.pluginmanager.get_plugin("terminalreporter"))

    def stop(self, reporter: pytest.TerminalReporter | None) -> None:
        """Stop what the session started of Gym (idempotent), saying so on the terminal before and after."""
        shown = reporter is not None and self.gym.starts_servers  # (an attached run's stop is near instant)
        if reporter is not None and shown:
            reporter.write_line("gym: stopping Gym ...")
        self.gym.stop()
        if reporter is not None and shown and self.gym.stop_seconds is not None:
            reporter.write_line(f"gym: Gym stopped in {self.gym.stop_seconds:.1f} s")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, exitstatus: int, config: pytest.Config) -> None:
    """The ``gym reward summary`` section: per dataset (and agent), the rewards, pass@k and gate verdicts; the
    reports written; on GitHub Actions, annotations for gates that did not pass and errored rollouts. Last, after
    Ctrl-C or SIGTERM, the command that resumes the run (``--gym-resume``)."""
    gym = config.stash[SESSION_KEY]
    resume_hint = gym.resume_hint(gym.final[0] if gym.final is not None else exitstatus)
    if gym.conclusion is None:
        for line in resume_hint:
            terminalreporter.write_line(line)
        return
    terminalreporter.write_sep("=", "gym reward summary")
    width = min(terminalreporter._tw.fullwidth, 100)
    lines = terminal.render_conclusion(
        gym.conclusion,
        verbose=config.get_verbosity() > 0,
        results=gym.rollouts(),
        width=width,
        gym_metrics=read_gym_metrics(gym.run_dir),
    )
    for line in lines:
        terminalreporter.write_line(line)
    if gym.run_dir is not None:
        terminalreporter.write_line(f"gym run directory: {gym.run_dir}")
    for line in config.stash.get(PAGES_KEY, []):
        terminalreporter.write_line(line)
    opts = gym.options
    for line in outputs.annotation_lines(
        gym.conclusion,
        gym.rollouts(),
        os.environ,
        inconclusive_passes=opts.inconclusive_passes,
        max_drop=opts.max_drop,
        fail_on_flip=opts.fail_on_flip,
        rootdir=opts.rootdir,
    ):
        terminalreporter.write_line(line)
    for line in resume_hint:
        terminalreporter.write_line(line)
