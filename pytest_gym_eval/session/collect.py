"""Collection: the pytest collection tree of a dataset, a :class:`DatasetFile` with one :class:`RolloutItem` per
(task, repeat), node id ``path/to/data.jsonl::<task-id>[r<k>]``, and a :class:`GateItem` when the dataset
has CI gates; and what the session learns from the items (:func:`record_collected`, :func:`deselected`,
:func:`plan_selected`): plain rows, never the items' classes, so that :mod:`pytest_gym_eval.session.gym_session` needs
no import of this module.

Rollout items are :class:`pytest.Function` items, so fixtures (``gym_session`` among them, and a user's own
autouse fixtures) work on them as on any test; the dataset file is a :class:`pytest.Module` for the same reason
pytest's own doctest text files are: module-scoped fixtures then have a module to live on.
"""

from __future__ import annotations

import warnings as _warnings
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from _pytest._code.code import ReprFileLocation, TerminalRepr

from pytest_gym_eval.gym.feed import Missing, RolloutRecord
from pytest_gym_eval.gym.on_demand import OnDemandError
from pytest_gym_eval.gym.run import GymStartError
from pytest_gym_eval.options.gym_options import GymOptions
from pytest_gym_eval.outcomes.causes import GYM_EXITED, unexpected_error
from pytest_gym_eval.outcomes.outcome import RolloutOutcome
from pytest_gym_eval.outcomes.rollout import RolloutRequest
from pytest_gym_eval.session.gym_session import SESSION_KEY, GymSession
from pytest_gym_eval.session.item_protocol import RolloutLike
from pytest_gym_eval.session.item_reports import TEST_ROLLOUT_COUNTED
from pytest_gym_eval.tasks.dataset import DatasetError, Task, read_tasks
from pytest_gym_eval.tasks.models import agent_instance, item_id
from pytest_gym_eval.tasks.python_dataset import label_of
from pytest_gym_eval.tasks.shard import CollectedPlan, DatasetTasks, Shard, dataset_name, shard_tasks, tasks_of_shard

try:  # the class pytest builds parametrizations with (renamed in pytest 9)
    from _pytest.python import CallSpec
except ImportError:  # pragma: no cover - pytest 8
    from _pytest.python import CallSpec2 as CallSpec  # type: ignore[attr-defined,no-redef,unused-ignore]


GYM_MARK = "gym"
SIMPLE_AGENT_SUFFIX = "_simple_agent"

USER_SELECTIONS: tuple[tuple[str, str], ...] = (
    ("keyword", "-k"),
    ("markexpr", "-m"),
    ("deselect", "--deselect"),
    ("lf", "--lf"),
    ("stepwise", "--sw"),
)
"""pytest's options that select items (option dest, as written), in the order a label names them."""


def dataset_default_agent(options: GymOptions, dataset: Path) -> str:
    """The agent of a dataset's rows that name none: the dataset's own ``agent=`` setting, else
    ``--gym-agent`` (or ini ``gym_agent``), else the convention.

    By convention ``<stem>.jsonl`` uses ``<stem>_simple_agent``, and a dataset inside a Gym checkout's
    ``resources_servers/<name>/`` folder uses ``<name>_simple_agent``.
    """
    own = options.own_settings(dataset).agent
    if own:
        return own
    if options.agent:
        return options.agent
    parts = dataset.resolve().parts
    if "resources_servers" in parts[:-1]:
        index = len(parts) - 1 - parts[::-1].index("resources_servers")
        if index + 2 < len(parts):
            return parts[index + 1] + SIMPLE_AGENT_SUFFIX
    label = label_of(dataset)  # a Python dataset's file: by the name it was given
    return (label.rpartition(":")[2] if label is not None else dataset.stem) + SIMPLE_AGENT_SUFFIX


def timeout_marker(config: pytest.Config) -> pytest.MarkDecorator | None:
    """The mark that limits pytest-timeout to a Gym item's call phase, or None when pytest-timeout is not loaded
    (the ``timeout`` mark is unknown then)."""
    return pytest.mark.timeout(func_only=True) if config.pluginmanager.hasplugin("timeout") else None


def gym_rollout(gym_session: GymSession) -> None:
    """Placeholder callable of a rollout item: its signature makes pytest set up ``gym_session``."""


def gym_gate(gym_session: GymSession) -> None:
    """Placeholder callable of a gate item: its signature makes pytest set up ``gym_session``."""


class OutcomeText(TerminalRepr):
    """An item's failure or error text, shown without a traceback; its first line is what pytest's short test
    summary and JUnit's failure ``message`` show (on every pytest version: pytest 8 shows a message only for
    a report that has a ``reprcrash``)."""

    def __init__(self, text: str, path: Path, line: int) -> None:
        self.text = text
        self.reprcrash = ReprFileLocation(str(path), line, text.splitlines()[0] if text else "")

    def toterminal(self, tw: Any) -> None:
        for line in self.text.splitlines():
            tw.line(line)


class RolloutError(Exception):
    """A rollout that has no verdict (Gym failed it, it never came, or its reward is unusable): an error."""


class RolloutFailed(Exception):
    """A scored rollout whose reward is below the pass threshold (or that a hook failed)."""


class DatasetFile(pytest.Module):
    """A ``.jsonl`` dataset collected as tests: one :class:`RolloutItem` per task and repeat."""

    obj = None  # never imported as Python (pytest's DoctestTextfile does the same)

    def collect(self) -> Iterator[pytest.Item]:
        gym = self.config.stash[SESSION_KEY]
        settings = gym.options.dataset_settings(self.path)
        hook = self.config.hook.pytest_gym_eval_task_id
        # Calling a hook nobody implements costs ~5 us a row; it would return None anyway.
        task_id_hook = (lambda row, path, line: hook(row=row, path=path, line=line)) if hook.get_hookimpls() else None
        for k in (gate.k for gate in settings.gates if gate.k is not None):  # a gate no run could ever judge
            if k > (settings.repeats or 1):
                raise self.CollectError(
                    f"{self.path}: the pass@{k} gate needs at least {k} repeats of each task, and this dataset runs "
                    f"{settings.repeats or 1} (--gym-repeats, or repeats= in gym_dataset_settings)"
                )
        try:
            tasks, warnings = read_tasks(self.path, gym.options.id_fields, task_id_hook)
        except DatasetError as error:
            raise self.CollectError(str(error)) from None
        for line, warning in warnings:  # at the row's line (Node.warn would say the file's line 0)
            _warnings.warn_explicit(pytest.PytestCollectionWarning(warning), None, str(self.path), line)
        repeats = settings.repeats or 1
        default_agent = dataset_default_agent(gym.options, self.path)
        # The mark goes on the file once: pytest's -m and -k look through an item's parents, and marking
        # 100,000 items one by one cost ~5% of collecting them.
        self.add_marker(GYM_MARK)
        if (mark := timeout_marker(self.config)) is not None:  # pytest-timeout times the call phase only
            self.add_marker(mark)
        # A real parametrization, as pytest.mark.parametrize would make it: node id, -k, --lf and
        # item.callspec.id ("r0") all behave as pytest users know. As in pytest's own parametrization, the
        # items share one fixture info (computed for the first; no fixture depends on the task, and computing
        # it per item was most of the collection time of a large dataset), and the items of one repeat share
        # their (frozen, empty) callspec: ~480 bytes less per item.
        # With several policies (--gym-policy) each repeat is one item per policy, policies interleaved so
        # that Gym's input alternates between them (endpoint drift during the run hits every policy alike).
        policies = gym.options.policies
        runs = [(repeat, policy) for repeat in range(repeats) for policy in gym.options.policy_names()]
        callspecs = [CallSpec(_idlist=(item_id(repeat, policy),)) for repeat, policy in runs]
        fixtureinfo = None
        for task in tasks:
            agent = task.agent or default_agent
            for (repeat, policy), callspec in zip(runs, callspecs, strict=True):
                item = RolloutItem.from_parent(
                    self,
                    name=f"{task.task_id}[{callspec.id}]",
                    callobj=gym_rollout,
                    callspec=callspec,
                    keywords={callspec.id: True},
                    originalname=task.task_id,
                    fixtureinfo=fixtureinfo,
                    task=task,
                    repeat=repeat,
                    agent=agent_instance(agent, policies, policy),
                    policy=policy,
                )
                fixtureinfo = item._fixtureinfo
                yield item
        if gym.gates_for(settings):
            yield GateItem.from_parent(self, name="gym-gate", callobj=gym_gate)


def never_runs(item: pytest.Item) -> bool:
    """Whether pytest will skip ``item`` before its setup whatever happens: a ``skip`` mark, a ``skipif`` mark whose
    condition holds, or an ``xfail`` mark with ``run=False`` (unless ``--runxfail``). Such a rollout item is left out
    of Gym's run as a deselected one is. A condition that cannot be evaluated counts as running: pytest then
    reports its error on the item; so does every item on a pytest without these (private) helpers, whose skipped
    rollouts then run in Gym and are counted as skipped."""
    try:
        from _pytest.skipping import evaluate_skip_marks, evaluate_xfail_marks
    except ImportError:  # pragma: no cover - every pytest from 8.0 to 9.2 has them (the compat matrix runs both ends)
        return False
    try:
        if evaluate_skip_marks(item) is not None:
            return True
        xfailed = None if item.config.option.runxfail else evaluate_xfail_marks(item)
    except Exception:  # pytest fails the item with its own message at setup
        return False
    return xfailed is not None and not xfailed.run


class OwnFailureText:
    """How :class:`RolloutItem` and :class:`GateItem` render the plugin's own failures and errors: the text
    alone, with no traceback. pytest would otherwise format the traceback into the plugin, parsing the source of
    every entry (~10 ms a failure: 4 s of CPU taken from Gym's run at 400 failures in 2,000 rollouts), and
    :func:`shape_report` replaces it with the same text anyway. pytest asks ``repr_failure`` for a failed call
    and ``_repr_failure_py`` for an error in setup or teardown (pytest 8.0 to 9.x); other exceptions are
    rendered as pytest does."""

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str | TerminalRepr:
        own = self._own_text(excinfo)  # (pytest.Function's own repr_failure takes no style)
        return own if own is not None else super().repr_failure(excinfo)  # type: ignore[misc]

    def _repr_failure_py(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> TerminalRepr:
        own = self._own_text(excinfo)
        return own if own is not None else super()._repr_failure_py(excinfo, style)  # type: ignore[misc]

    def _own_text(self, excinfo: pytest.ExceptionInfo[BaseException]) -> OutcomeText | None:
        if not isinstance(excinfo.value, (*OWN_FAILURES, OnDemandError)):
            return None
        path, line, _ = self.reportinfo()  # type: ignore[attr-defined]
        return OutcomeText(str(excinfo.value), Path(path), (line or 0) + 1)


class RolloutItem(OwnFailureText, pytest.Function):
    """One rollout of one task: passes when its reward reaches the pass threshold.

    ``task``, ``repeat`` (0-based) and ``agent`` say what it rolls out; ``policy`` names the policy model it
    rolls out against when the session compares several (``--gym-policy``; ``agent`` is then that policy's agent
    instance in Gym), else None. Setup waits for the rollout (an
    infrastructure failure raises there, so pytest reports an *error*); the call judges the reward.
    """

    def __init__(self, *, task: Task, repeat: int, agent: str, policy: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.task = task
        self.repeat = repeat
        self.agent = agent
        self.policy = policy
        self.outcome: RolloutOutcome | None = None
        # In every report of this item (JUnit properties; the xdist controller's summary reads them).
        self.user_properties += [("task_id", task.task_id), ("repeat", repeat), ("agent", agent)]
        if policy is not None:
            self.user_properties.append(("policy", policy))

    @property
    def task_id(self) -> str:
        return self.task.task_id

    def setup(self) -> None:
        super().setup()
        session: GymSession = self.funcargs["gym_session"]  # type: ignore[assignment]
        self.outcome = session.item_protocol.outcome_of(self)
        if self.outcome.status == "error":
            raise RolloutError(self.outcome.message + (f"\nlog: {self.outcome.log}" if self.outcome.log else ""))

    def runtest(self) -> None:
        session: GymSession = self.funcargs["gym_session"]  # type: ignore[assignment]
        if session.item_protocol.decide(self).status == "failed":
            raise RolloutFailed(session.item_protocol.failure_report(self))

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, self.task.line - 1, f"{self.task_id}[{item_id(self.repeat, self.policy)}]"


class GateItem(OwnFailureText, pytest.Function):
    """The dataset's CI gates, judged after its rollouts (``path/to/data.jsonl::gym-gate``).

    Setup waits for the dataset's selected rollouts; the call judges the gates.
    """

    found: dict[int, RolloutRecord | Missing] | None = None

    def setup(self) -> None:
        super().setup()
        session: GymSession = self.funcargs["gym_session"]  # type: ignore[assignment]
        self.found = session.item_protocol.wait_for_gate(self)

    def runtest(self) -> None:
        assert self.found is not None
        session: GymSession = self.funcargs["gym_session"]  # type: ignore[assignment]
        verdict = session.item_protocol.judge_gates(self, self.found)
        if verdict is not None:
            raise RolloutFailed(verdict)

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, 0, "gym-gate"


def is_gym_item(item: pytest.Item) -> bool:
    """Whether ``item`` is a rollout or gate item of a dataset."""
    return isinstance(item, (RolloutItem, GateItem))


ON_DEMAND_FIXTURE = "gym_run_row"
"""The fixture that rolls out a row a test builds (:mod:`pytest_gym_eval.gym.on_demand`): a session whose selected
tests use it starts Gym with ``--gym-agent``'s agent too, even when no dataset row is planned."""

TEST_ROLLOUT_PARAM = "gym_rollout"
"""The fixture a ``gym_rollouts`` mark parametrizes (:mod:`pytest_gym_eval.session.rollout_tests`)."""


def rollout_request(item: pytest.Item) -> RolloutRequest | None:
    """The (task, repeat) pair a test function's ``gym_rollouts`` mark gave it, or None for any other item."""
    callspec = getattr(item, "callspec", None)
    request = callspec.params.get(TEST_ROLLOUT_PARAM) if callspec is not None else None
    return request if isinstance(request, RolloutRequest) else None


# --- What the session learns from the items (called from the plugin's hooks) -----------------------------


def collected_plan(items: Iterable[pytest.Item], shard: Shard | None) -> CollectedPlan:
    """The :class:`~pytest_gym_eval.tasks.shard.CollectedPlan` of ``items``: every rollout item's (task, repeat) pair
    per dataset, tasks in the file's order, datasets by name; and the datasets only test functions name (``tested``:
    every task of the file, the repeats and agents of the tests' pairs). Other items are ignored."""
    datasets: dict[str, DatasetTasks] = {}
    tested: dict[str, DatasetTasks] = {}
    lines: dict[str, dict[str, int]] = {}  # per dataset, each task's line
    parent: object = None
    entry = DatasetTasks("", "")
    at: dict[str, int] = {}
    for item in items:  # ~1 us an item: it runs on every collection, 100,000 items and more
        if not isinstance(item, RolloutItem):
            if (request := rollout_request(item)) is not None:
                test = tested.get(request.dataset)
                if test is None:
                    every = list(request.dataset_tasks)
                    test = tested[request.dataset] = DatasetTasks(request.dataset, str(request.path), 0, every)
                test.agents.setdefault(request.task_id, request.agent)
                if request.counted:  # a pair beyond the dataset's repeats is no repeat of its statistics
                    test.repeats = max(test.repeats, request.repeat + 1)
            continue
        if item.parent is not parent:
            parent = item.parent
            name = dataset_name(item.nodeid)
            entry = datasets.get(name) or datasets.setdefault(name, DatasetTasks(name, str(item.path)))
            at = lines.setdefault(name, {})
        task = item.task.task_id
        if task not in entry.agents:
            entry.tasks.append(task)
            entry.agents[task] = item.agent
            at[task] = item.task.line
        if item.repeat >= entry.repeats:
            entry.repeats = item.repeat + 1
    # The file's order, not the items': pytest-randomly shuffles the items, differently in each shard's job.
    for name, entry in datasets.items():
        entry.tasks.sort(key=lines[name].__getitem__)
    only_tested = [tested[name] for name in sorted(tested) if name not in datasets]
    return CollectedPlan(shard, [datasets[name] for name in sorted(datasets)], only_tested, mark_gates(items))


def disagreement(dataset: str, metric: str, first: tuple[float, str], second: tuple[float, str]) -> str:
    """The error of two ``gym_rollouts`` marks declaring different bounds (``(bound, test)`` each) for ``metric``
    of ``dataset``."""
    return (
        f"gym_rollouts marks disagree on the gate of metric {metric!r} on {dataset}: {first[1]} declares "
        f"min_metric={{{metric!r}: {first[0]:g}}} and {second[1]} min_metric={{{metric!r}: {second[0]:g}}} "
        "(declare it once, or set it in gym_dataset_settings for the dataset)"
    )


def mark_gates(items: Iterable[pytest.Item]) -> dict[str, dict[str, tuple[float, tuple[str, ...]]]]:
    """The gates the ``gym_rollouts`` marks of ``items`` declare (``min_metric={"terse": 0.9}``): per dataset name,
    per custom metric, ``(minimum mean, node ids of the declaring tests without their parametrization)``, tests in
    the order of ``items``. Several tests may declare the same gate for a dataset; raises ValueError naming both
    tests when two declare different bounds for the same metric of the same dataset."""
    marks: dict[str, dict[str, tuple[float, tuple[str, ...]]]] = {}
    for item in items:
        request = rollout_request(item)
        if request is None or not request.min_metric:
            continue
        test = item.nodeid.partition("[")[0]
        declared = marks.setdefault(request.dataset, {})
        for metric, bound in request.min_metric:
            known, tests = declared.get(metric, (bound, ()))
            if known != bound:  # collection reports it first (rollout_tests.check_declared)
                raise ValueError(disagreement(request.dataset, metric, (known, tests[0]), (bound, test)))
            declared[metric] = (bound, tests if test in tests else (*tests, test))
    return marks


def select_shard(items: list[pytest.Item], shard: Shard, plan: CollectedPlan) -> tuple[list[Any], list[Any]]:
    """Split ``items`` into this shard's and the others': a rollout item is kept when its task is assigned to
    ``shard``, and so is a test function over a dataset's rollout (``gym_rollouts``); a dataset's gate item is kept
    when the shard keeps any of the dataset's rollouts; other items (plain tests) are kept. Returns ``(kept,
    deselected)``, each in the order of ``items``."""
    mine = shard_tasks(plan, shard)
    kept: list[Any] = []
    deselected: list[Any] = []
    for item in items:
        if isinstance(item, RolloutItem):
            keep = item.task_id in mine.get(dataset_name(item.nodeid), ())
        elif isinstance(item, GateItem):
            keep = bool(mine.get(dataset_name(item.nodeid)))
        elif (request := rollout_request(item)) is not None:
            if request.dataset not in mine:  # a dataset only test functions name: the same rule on its tasks
                mine[request.dataset] = tasks_of_shard(request.dataset, request.dataset_tasks, shard)
            keep = request.task_id in mine[request.dataset]
        else:
            keep = True
        (kept if keep else deselected).append(item)
    return kept, deselected


def gates_last(items: list[pytest.Item]) -> None:
    """Put every ``gym-gate`` item after every other item (in place; each group keeps its order, pytest-randomly's
    shuffle included), so that a gate item judges its dataset when every rollout and test function of the session
    has run (their custom metrics too), and a session ``-x`` stops before it leaves its gates to the session's end
    instead of counting a gate passed that the end then fails."""
    items[:] = [item for item in items if not isinstance(item, GateItem)] + [
        item for item in items if isinstance(item, GateItem)
    ]


def record_collected(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``pytest_collection_modifyitems``: hand the session every collected (task, repeat) pair, then, with
    ``--gym-shard``, keep only this shard's items and report the others as deselected (as ``-k`` does)."""
    gym = config.stash[SESSION_KEY]
    shard = gym.options.shard
    try:
        plan = collected_plan(items, shard)
    except ValueError as error:
        raise pytest.UsageError(str(error)) from None
    gym.record_collected(plan)
    if shard is None:
        return
    kept, deselected = select_shard(items, shard, plan)
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = kept


def deselected_pairs(items: Iterable[pytest.Item]) -> list[tuple[str, str, int, str]]:
    """``(dataset, task id, repeat, policy)`` of the rollout items among ``items`` (other items are ignored; policy
    "" unless the session compares policies: each policy has an item per (task, repeat))."""
    return [(dataset_name(i.nodeid), i.task_id, i.repeat, i.policy or "") for i in items if isinstance(i, RolloutItem)]


def deselected(items: Sequence[pytest.Item]) -> None:
    """``pytest_deselected``: tell the session which rollout items a selection left out."""
    if items:
        items[0].config.stash[SESSION_KEY].deselected(deselected_pairs(items))


def selecting_options(config: pytest.Config) -> str:
    """The pytest options of this session that select items, as a label (``-k``, ``--lf and -k``), or
    "a selection" when none is given (a conftest's ``pytest_collection_modifyitems`` deselected items)."""
    given = [flag for dest, flag in USER_SELECTIONS if config.getoption(dest, default=None)]
    return " and ".join(given) if given else "a selection"


def plan_selected(session: pytest.Session) -> None:
    """``pytest_collection_finish``: hand the session the selected rollouts as plain rows (once per node id: with
    ``--keep-duplicates`` a dataset named twice collects every item twice, and both copies report the one
    rollout), leaving out the items pytest will skip whatever happens (:func:`never_runs`); note the selected
    gate items.

    The pairs of selected test functions (``gym_rollouts``) follow the dataset items' rows, under the node id the
    dataset's own item has: a pair both need is one row, whichever was collected first."""
    gym = session.config.stash[SESSION_KEY]
    if not session.config.option.collectonly:  # nothing will run (and a plan of 100,000 rollouts took ~5% of
        # collecting them)
        by_nodeid: dict[str, RolloutItem] = {}
        tests: list[tuple[pytest.Item, RolloutRequest]] = []
        for item in session.items:
            if isinstance(item, RolloutItem):
                by_nodeid.setdefault(item.nodeid, item)
            elif (request := rollout_request(item)) is not None:
                tests.append((item, request))
        selected = [item for item in by_nodeid.values() if not never_runs(item)]
        rows = [(item.nodeid, item.path, item.task.line, item.task_id, item.repeat, item.agent) for item in selected]
        planned = {row[0] for row in rows}
        counting = set(planned)
        for item, request in tests:
            # Named from collection on, so that the results know the test's rollout even when it skips before it
            # got it (:meth:`pytest_gym_eval.session.results.ResultsCollector.take_use`).
            item.user_properties += [(TEST_ROLLOUT_PARAM, request.nodeid), (TEST_ROLLOUT_COUNTED, request.counted)]
            if never_runs(item):
                continue
            if request.nodeid not in planned:
                planned.add(request.nodeid)
                rows.append(request.planned_row())
            if request.counted:
                counting.add(request.nodeid)
        on_demand = any(ON_DEMAND_FIXTURE in getattr(item, "fixturenames", ()) for item in session.items)
        serve = (gym.options.agent,) if on_demand and gym.options.agent else ()
        items: dict[str, RolloutLike] = {item.nodeid: item for item in selected}
        gym.plan_rollouts(rows, items, selecting_options(session.config), serve, frozenset(planned - counting))
    gym.results.gates_expected.update(item.nodeid for item in session.items if isinstance(item, GateItem))


OWN_FAILURES = (RolloutError, RolloutFailed, GymStartError)


def shape_report(gym: GymSession, item: pytest.Item, call: pytest.CallInfo[None], report: pytest.TestReport) -> None:
    """Report a rollout's failure or error by its message alone, without a traceback into the plugin
    (``pytest_runtest_makereport``); a rollout that errored because Gym could not start gets the failure class
    ``gym_start``, and the message of a start failure or of Gym's exit is shown whole only once."""
    if call.excinfo is None:
        return
    ours = isinstance(item, (RolloutItem, GateItem)) or rollout_request(item) is not None
    if isinstance(call.excinfo.value, OnDemandError):  # the test errors (it did not fail): the rollout has no verdict
        path, line, _ = item.reportinfo()
        report.longrepr = OutcomeText(f"on-demand rollout: {call.excinfo.value}", Path(path), (line or 0) + 1)
        report.gym_on_demand_error = True  # type: ignore[attr-defined]  # (pytest_report_teststatus)
        return
    if ours and isinstance(call.excinfo.value, OWN_FAILURES):
        error = call.excinfo.value
        outcome = item.outcome if isinstance(item, RolloutItem) else getattr(error, "outcome", None)
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
    elif isinstance(item, RolloutItem) and report.failed and call.when in ("setup", "call"):
        failure_class, text = unexpected_error(call.excinfo.value)
        if text:  # an OS error: its one line names the path, no traceback into the plugin
            path, line, _ = item.reportinfo()
            report.longrepr = OutcomeText(text, Path(path), (line or 0) + 1)
        for properties in (item.user_properties, report.user_properties):
            properties.append(("failure_class", failure_class))
