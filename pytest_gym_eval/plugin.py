"""pytest-gym-eval's pytest hooks. Each is a few lines handing over to the session object
(:class:`~pytest_gym_eval.session.gym_session.GymSession`) or to collection (:mod:`pytest_gym_eval.session.collect`).

Installing the plugin costs a pytest run without Gym datasets nothing but this module, the hookspecs and the
options: the session, collection and everything below them are imported (and the session made) only once a
dataset is collected, a test marked ``gym_rollouts`` is, a ``--gym-*`` option needs the session at start-up, or this
is a pytest-xdist controller.
"""

from __future__ import annotations

import sys
from collections.abc import Generator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pytest_gym_eval import hookspecs
from pytest_gym_eval.core.stash import SESSION_KEY, SOFT_FAILURES_KEY
from pytest_gym_eval.options.config_source import check_config_source
from pytest_gym_eval.options.register import add_options

if TYPE_CHECKING:
    from pytest_gym_eval.options.gym_options import GymOptions
    from pytest_gym_eval.outcomes.rollout import Rollout
    from pytest_gym_eval.session.collect import DatasetFile
    from pytest_gym_eval.session.gym_session import GymSession
    from pytest_gym_eval.session.rollout_tests import RunRow

GYM_MARK = "gym"
"""The mark on every dataset file (so on all its items); :data:`pytest_gym_eval.session.collect.GYM_MARK` is the
same."""
ROLLOUTS_MARK = "gym_rollouts"
"""The mark that gives a test function a dataset's rollouts (:mod:`pytest_gym_eval.session.rollout_tests`)."""
OPTIONS_KEY = pytest.StashKey["GymOptions"]()
"""The session's options, resolved (and checked) by :func:`options_of`."""


def options_of(config: pytest.Config) -> GymOptions:
    """The session's options, resolved (and checked: raises :class:`pytest.UsageError` for a bad value) on first
    use: in ``pytest_configure`` when a Gym option is given, else at the first ``.jsonl`` file collected, so a
    pytest run without Gym options or datasets never imports their resolution (only defaults could apply)."""
    options = config.stash.get(OPTIONS_KEY, None)
    if options is None:
        from pytest_gym_eval.options.gym_options import GymOptions

        options = config.stash[OPTIONS_KEY] = GymOptions.from_config(config)
    return options


def gym_of(config: pytest.Config) -> GymSession | None:
    """The session's :class:`GymSession`, or None while none is made (no Gym dataset so far)."""
    gym: GymSession | None = config.stash.get(SESSION_KEY, None)
    return gym


def make_gym(config: pytest.Config) -> GymSession:
    """The session's :class:`GymSession` (``config.stash[SESSION_KEY]``), made now when it is not yet, with the
    plugin objects that follow it: its results collector (every item's reports reach its
    ``pytest_runtest_logreport``: this process's own and, on the xdist controller, every worker's), the JUnit
    values, ``StopGymLast``, the parts for pytest-timeout, pytest-rerunfailures and pytest-html
    (:mod:`pytest_gym_eval.integrations`) and the terminal's index of teardown reports (a FAILURES section of many
    failed rollouts in linear time: :class:`~pytest_gym_eval.session.finish.TeardownReportIndex`). Raises
    :class:`pytest.UsageError` for a bad option."""
    gym = gym_of(config)
    if gym is None:
        from pytest_gym_eval import integrations
        from pytest_gym_eval.reporting.junit_plugin import RolloutValuesInJunit
        from pytest_gym_eval.session.closing import StopGymLast
        from pytest_gym_eval.session.finish import index_teardown_reports
        from pytest_gym_eval.session.gym_session import GymSession

        gym = config.stash[SESSION_KEY] = GymSession(config, options_of(config))
        config.pluginmanager.register(gym.results, "gym-eval-results")
        config.pluginmanager.register(RolloutValuesInJunit(config), "gym-eval-junit")
        config.pluginmanager.register(StopGymLast(gym), "gym-eval-stop")
        integrations.register(config, gym)
        index_teardown_reports(config.pluginmanager.get_plugin("terminalreporter"))
        if not hasattr(config, "workerinput"):  # said once, by the process that reports
            warn_unmatched_settings(config, gym.options)
    return gym


def warn_unmatched_settings(config: pytest.Config, options: GymOptions) -> None:
    """Warn (``PytestConfigWarning``, so ``-W error`` makes it fatal) about each ``gym_dataset_settings`` glob that
    matches no file: its settings, a CI gate among them, would silently apply to nothing."""
    from pytest_gym_eval.options.settings import matches_no_file

    for pattern, settings in options.datasets:
        if matches_no_file(pattern, options.rootdir):
            gates = " (its gates are not applied)" if settings.gates else ""
            config.issue_config_time_warning(
                pytest.PytestConfigWarning(
                    f"gym_dataset_settings: {pattern!r} matches no file under {options.rootdir}{gates}: a typo?"
                ),
                stacklevel=2,
            )


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    """Register this plugin's hookspecs (:mod:`pytest_gym_eval.hookspecs`)."""
    pluginmanager.add_hookspecs(hookspecs)


def pytest_addoption(parser: pytest.Parser) -> None:
    """Add the ``--gym-*`` options and ``gym_*`` ini settings (:mod:`pytest_gym_eval.options.register`)."""
    add_options(parser)


@pytest.hookimpl(trylast=True)  # after pytest-xdist's, so a controller knows it is one
def pytest_configure(config: pytest.Config) -> None:
    """Check the options (a bad value is a usage error before anything runs); make the session now when a Gym
    option is given (:func:`gym_configured`), else at the first dataset collected."""
    config.addinivalue_line("markers", f"{GYM_MARK}: a NeMo Gym rollout (on every dataset file, so on all its items)")
    config.addinivalue_line(
        "markers",
        f"{ROLLOUTS_MARK}(dataset, repeats=None, tasks=None): run the test once per (task, repeat) rollout of the "
        "dataset, each given to its gym_rollout argument",
    )
    check_config_source(config)
    if gym_configured(config):
        make_gym(config)


def gym_configured(config: pytest.Config) -> bool:
    """Whether this session is given any ``--gym-*`` option or ``gym_*`` ini setting: it then has its
    :class:`GymSession` from the start (a conftest may read ``gym_session.options`` in ``pytest_sessionstart``;
    ``--gym-baseline`` and ``--gym-resume`` are read now), as a session that collects a dataset does from then on."""
    if any(dest.startswith("gym_") and _given(value) for dest, value in vars(config.option).items()):
        return True
    ini = getattr(config, "_inicfg", None)  # what the ini file sets (pytest 9; pytest 8 calls it inicfg)
    if ini is None:
        ini = getattr(config, "inicfg", {})
    overrides = [text.split("=", 1)[0].strip() for text in config.getoption("override_ini", None) or ()]
    return any(str(name).startswith("gym_") for name in [*ini, *overrides])


def _given(value: object) -> bool:
    """Whether an option's value was given on the command line (its defaults are None, False or empty; a 0 that
    compares equal to False, as ``--gym-repeats=0``, is given)."""
    return not (value is None or value is False or (isinstance(value, (list, tuple)) and not value))


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own, which starts the workers (pytest_configure_node)
def pytest_sessionstart(session: pytest.Session) -> None:
    """On a pytest-xdist controller, make the session and register the controller that owns the Gym run
    (:mod:`pytest_gym_eval.xdist`); it collects nothing itself, so it cannot wait for a dataset. Not in
    ``pytest_configure``: xdist registers its session there too, last, and which of the two runs first varies."""
    config = session.config
    if not hasattr(config, "workerinput") and config.pluginmanager.has_plugin("dsession"):
        from pytest_gym_eval import xdist

        xdist.register_if_controller(config, make_gym(config))


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> DatasetFile | None:
    """A ``.jsonl`` file named on the command line or matched by ``gym_datasets`` is a dataset; any other
    ``.jsonl`` file (Gym's own output files among them) is left alone."""
    if file_path.suffix != ".jsonl":
        return None
    options = options_of(parent.config)
    if parent.session.isinitpath(file_path) or options.is_dataset(file_path):
        make_gym(parent.config)
        from pytest_gym_eval.options.settings import dataset_name
        from pytest_gym_eval.session.collect import DatasetFile

        return DatasetFile.from_parent(parent, path=file_path, nodeid=dataset_name(file_path, options.rootdir))
    return None


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize a test marked ``gym_rollouts`` over the dataset's (task, repeat) pairs
    (:func:`pytest_gym_eval.session.rollout_tests.parametrize`)."""
    mark = metafunc.definition.get_closest_marker(ROLLOUTS_MARK)
    if mark is not None:
        make_gym(metafunc.config)
        from pytest_gym_eval.session.rollout_tests import parametrize

        parametrize(metafunc, mark)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Record every collected (task, repeat) pair for the report; with ``--gym-shard``, deselect the other
    shards' items (:func:`pytest_gym_eval.session.collect.record_collected`); run the ``gym-gate`` items last
    (:func:`~pytest_gym_eval.session.collect.gates_last`)."""
    # tryfirst: the record must see every collected item, before -k, -m, --deselect and --lf deselect some.
    if gym_of(config) is not None:
        from pytest_gym_eval.session.collect import gates_last, record_collected

        record_collected(config, items)
        gates_last(items)


def pytest_deselected(items: list[pytest.Item]) -> None:
    """Note the rollout items ``-k``, ``-m``, ``--deselect``, ``--lf``, ``--sw`` or the shard left out: a gate is
    labelled with the part of its dataset it was judged on (:mod:`pytest_gym_eval.tasks.selection`)."""
    if items and gym_of(items[0].config) is not None:
        from pytest_gym_eval.session.collect import deselected

        deselected(items)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    """Plan the Gym run from the selected items (after ``-k``, ``-m``, ``--lf`` and ``--deselect``)."""
    # tryfirst: under xdist a worker must save the plan before it reports its collection to the controller.
    if gym_of(session.config) is not None:
        from pytest_gym_eval.session.collect import plan_selected

        plan_selected(session)


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session: pytest.Session) -> None:
    """Start Gym before the first item runs, so that no item's duration holds Gym's start-up (it is reported as
    itself: the ``gym.startup_seconds`` suite property). Items still call :meth:`GymSession.start`, which then
    returns at once, or raises the start's error on each of them."""
    gym = gym_of(session.config)
    if gym is not None:
        gym.start_before_items(session)


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

    Returns the :class:`~pytest_gym_eval.session.gym_session.GymSession`: ``run_dir``, ``head_server``, ``plan``,
    ``options``. Raises :class:`~pytest_gym_eval.gym.run.GymStartError` when Gym cannot start.
    """
    gym = make_gym(request.config)
    gym.start()
    return gym


@pytest.fixture
def gym_rollout(request: pytest.FixtureRequest) -> Rollout:
    """The rollout of one (task, repeat) pair of a dataset, for a test marked
    ``@pytest.mark.gym_rollouts("data.jsonl", repeats=None, tasks=None)``: the mark runs the test once per pair
    (``test_x[<task>-r<k>]``), and the pairs are rolled out in the session's one ``gym eval run``.

    Returns a :class:`~pytest_gym_eval.outcomes.rollout.Rollout` (task id, repeat, row, reward, status, output items,
    output text, tool calls, usage, latency, the verifier's fields, where the record is). A rollout that has no
    verdict (Gym failed it, it never came, its reward is unusable) errors the test with its cause.
    """
    from pytest_gym_eval.session.rollout_tests import rollout_for

    return rollout_for(request)


@pytest.fixture
def gym_run_row(request: pytest.FixtureRequest) -> RunRow:
    """Roll out a row the test builds itself, now, against the session's Gym and policy model (no ``gym eval
    run``): ``rollout = gym_run_row({"responses_create_params": {...}, ...}, agent=None, timeout=None)``.

    Returns a :class:`~pytest_gym_eval.outcomes.rollout.Rollout` with the verifier's reward. ``agent`` defaults to
    the only agent Gym runs (``--gym-agent``, or the selected datasets'). Gym starts for the session (once) when a
    selected test uses this fixture and ``--gym-agent`` names an agent. A rollout with no verdict (Gym refused or
    failed the row, a timeout, Gym unreachable) errors the test with its cause
    (:class:`~pytest_gym_eval.gym.on_demand.OnDemandError`); a reward of 0 is a rollout like any other.
    """
    from pytest_gym_eval.session.rollout_tests import RunRow

    return RunRow(request)


def pytest_report_teststatus(report: pytest.TestReport) -> tuple[str, str, str] | None:
    """An on-demand rollout without a verdict is the test's error, not its failure."""
    if report.when == "call" and report.failed and getattr(report, "gym_on_demand_error", False):
        return "error", "E", "ERROR"
    return None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    """Fail a test whose soft expectations (``rollout.expect``) failed, once its function has returned, or once it
    skipped (``pytest.skip()``, ``unittest.SkipTest``): a skip after a failed expectation does not undo it."""
    import unittest

    try:
        result = yield
    except (pytest.skip.Exception, unittest.SkipTest) as skip:
        if SOFT_FAILURES_KEY in item.stash:
            from pytest_gym_eval.session.rollout_tests import soft_failure

            if (text := soft_failure(item)) is not None:
                why = f" ({skip})" if str(skip) else ""
                pytest.fail(f"{text}\nthen the test skipped{why}: a skip does not undo a failed expectation", False)
        raise
    if SOFT_FAILURES_KEY in item.stash:
        from pytest_gym_eval.session.rollout_tests import soft_failure

        if (text := soft_failure(item)) is not None:
            pytest.fail(text, pytrace=False)
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Report a rollout's failure or error by its message alone, without a traceback into the plugin; a rollout
    that errored because Gym could not start gets the failure class ``gym_start``. A test that failed of its own
    also shows its failed soft expectations, and a failed test the custom metrics it recorded with their reasons."""
    report: pytest.TestReport = yield
    gym = gym_of(item.config)
    if gym is not None and call.excinfo is not None:
        from pytest_gym_eval.session.collect import shape_report

        shape_report(gym, item, call, report)
    if call.when == "call" and call.excinfo is not None and SOFT_FAILURES_KEY in item.stash:
        from pytest_gym_eval.session.rollout_tests import soft_failure

        text = soft_failure(item)
        if text is not None and text not in str(call.excinfo.value):
            report.sections.append(("soft expectations", text))
    if call.when == "call" and call.excinfo is not None and item.user_properties:
        from pytest_gym_eval.session.rollout_tests import add_metrics_to_failure

        add_metrics_to_failure(item, report, str(call.excinfo.value))
    return report


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Summarise the rewards, let the gates set the exit status, and write the reports
    (:meth:`pytest_gym_eval.session.gym_session.GymSession.finish`). Gym is stopped only after these and pytest's JUnit
    file (``StopGymLast``)."""
    # tryfirst: the suite properties must be in place before junitxml writes its file in its own sessionfinish.
    gym = gym_of(session.config)
    if gym is not None:
        session.exitstatus = gym.finish(exitstatus)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, exitstatus: int, config: pytest.Config) -> None:
    """The ``gym reward summary`` section (:func:`pytest_gym_eval.session.closing.write_summary`)."""
    gym = gym_of(config)
    if gym is not None:
        from pytest_gym_eval.session.closing import write_summary

        write_summary(gym, terminalreporter, exitstatus)


def pytest_assertrepr_compare(config: pytest.Config, op: str, left: object, right: object) -> list[str] | None:
    """Explain a failed ``rollout.tool_calls == expect_tool_calls(...)`` (either side) call by call
    (:func:`pytest_gym_eval.outcomes.tool_matchers.explain`); None (pytest's own diff) for any other comparison."""
    matchers = sys.modules.get("pytest_gym_eval.outcomes.tool_matchers")  # not imported: no expectation was ever made
    if matchers is None or op != "==":
        return None
    for expectation, actual in ((right, left), (left, right)):
        if isinstance(expectation, matchers.ToolCallsExpectation) and isinstance(actual, (list, tuple)):
            lines: list[str] = matchers.explain(expectation, actual)
            return lines
    return None
