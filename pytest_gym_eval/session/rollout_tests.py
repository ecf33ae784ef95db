"""Rollouts in test functions: the ``gym_rollouts`` mark parametrizes a test over a dataset's (task, repeat)
pairs (:func:`parametrize`, from ``pytest_generate_tests``), and the ``gym_rollout`` fixture waits for the pair's
rollout and gives the test a :class:`~pytest_gym_eval.outcomes.rollout.Rollout` (:func:`rollout_for`).

The pairs are planned into the session's one ``gym eval run`` beside the dataset items
(:func:`pytest_gym_eval.session.collect.plan_selected` reads each test's :class:`RolloutRequest`), under the node id the
dataset's own item has, so a pair both need is rolled out once whatever the order of collection.
"""

from __future__ import annotations

import fnmatch
import math
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest

from pytest_gym_eval.core.rundir import RunPaths
from pytest_gym_eval.core.stash import SOFT_FAILURES_KEY
from pytest_gym_eval.gym.on_demand import (
    DEFAULT_TIMEOUT,
    ON_DEMAND_PROPERTY,
    OnDemandError,
    Servers,
    head_server_of,
    post_row,
    rollout_from_answer,
    server_instances,
)
from pytest_gym_eval.options.settings import dataset_name
from pytest_gym_eval.outcomes.custom_metrics import (
    check_name,
    metrics_of,
    metrics_text,
    property_name,
    reason_property_name,
    reasons_of,
)
from pytest_gym_eval.outcomes.outcome import RolloutOutcome
from pytest_gym_eval.outcomes.rollout import Rollout, RolloutRequest
from pytest_gym_eval.session.collect import ON_DEMAND_FIXTURE, RolloutError, dataset_default_agent, disagreement
from pytest_gym_eval.session.gym_session import SESSION_KEY, GymSession
from pytest_gym_eval.session.item_protocol import read_row
from pytest_gym_eval.session.results import counts_in_dataset
from pytest_gym_eval.tasks.dataset import DatasetError, Task, read_tasks
from pytest_gym_eval.tasks.models import instance_sampling
from pytest_gym_eval.tasks.python_dataset import Dataset, materialise
from pytest_gym_eval.tasks.sampling import apply_sampling

ROLLOUTS_MARK = "gym_rollouts"
FIXTURE = "gym_rollout"
MARK_HELP = (
    f"{ROLLOUTS_MARK}(dataset, repeats=None, tasks=None, count=False, min_metric=None): parametrize the test's "
    f"{FIXTURE} fixture over the dataset's (task, repeat) pairs (dataset: a path relative to the test file's folder, "
    "or a pytest_gym_eval.Dataset of rows built in Python; tasks: a -k-like expression over task ids, globs allowed, "
    "or a list of ids; count=True: pairs beyond the dataset's own repeats count in its statistics too; min_metric: "
    "{name: minimum mean}, gates on the custom metrics the test records, for this dataset)"
)
TASKS_KEY = pytest.StashKey[dict[Path, tuple[list[Task], str]]]()
"""Per dataset path, its tasks and default agent, read once per session however many tests name it."""
PYTHON_TEXTS_KEY = pytest.StashKey[dict[str, str]]()
"""Per Python dataset's label, the text of its rows (two Datasets of one name must hold the same rows)."""
MARK_GATES_KEY = pytest.StashKey[dict[tuple[str, str], tuple[float, str]]]()
"""Per (dataset name, custom metric), the bound a ``gym_rollouts`` mark declared and the test that declared it."""

TEST_ROLLOUT = "gym_rollout"
"""The ``user_properties`` key naming the node id of the rollout a test function got (the results read it)."""
TEST_ROLLOUT_STATUS = "gym_rollout_status"
TEST_ROLLOUT_AGENT = "gym_rollout_agent"


@dataclass(frozen=True)
class MarkArguments:
    """A ``gym_rollouts`` mark's arguments, checked: ``dataset`` (a path as written, or a Python
    :class:`~pytest_gym_eval.tasks.python_dataset.Dataset`), ``repeats`` (None: the dataset's own setting), ``tasks``
    (None: every task; a string: an expression; a tuple: task ids), ``count`` (whether pairs beyond the dataset's
    own repeats count in its statistics: :func:`~pytest_gym_eval.session.results.counts_in_dataset`), ``min_metric`` the
    ``(custom metric, minimum mean)`` gates the mark declares for the dataset (:func:`min_metric_of`)."""

    dataset: str | Dataset
    repeats: int | None = None
    tasks: str | tuple[str, ...] | None = None
    count: bool = False
    min_metric: tuple[tuple[str, float], ...] = ()


def mark_arguments(mark: pytest.Mark, where: str) -> MarkArguments:
    """Check a ``gym_rollouts`` mark's arguments; raises ValueError naming ``where`` (the test) and the mistake."""
    kwargs = dict(mark.kwargs)
    args = list(mark.args)
    if "dataset" in kwargs:
        args.insert(0, kwargs.pop("dataset"))
    unknown = sorted(set(kwargs) - {"repeats", "tasks", "count", "min_metric"})
    if len(args) != 1 or unknown:
        what = f"unknown argument {', '.join(unknown)}" if unknown else f"{len(args)} datasets"
        raise ValueError(
            f"{where}: {ROLLOUTS_MARK} takes one dataset path, repeats=, tasks=, count= and min_metric= ({what} given)"
        )
    dataset = args[0]
    if not isinstance(dataset, (str, os.PathLike, Dataset)) or not str(dataset):
        raise ValueError(f"{where}: {ROLLOUTS_MARK}: the dataset must be a path or a Dataset, got {dataset!r}")
    repeats = kwargs.get("repeats")
    if repeats is not None and (isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1):
        raise ValueError(f"{where}: {ROLLOUTS_MARK}: repeats must be a whole number >= 1, got {repeats!r}")
    tasks = kwargs.get("tasks")
    if tasks is not None and not isinstance(tasks, str):
        if not isinstance(tasks, Sequence) or not all(isinstance(task, str) for task in tasks) or not tasks:
            raise ValueError(
                f"{where}: {ROLLOUTS_MARK}: tasks must be an expression or a list of task ids, got {tasks!r}"
            )
        tasks = tuple(tasks)
    count = kwargs.get("count", False)
    if not isinstance(count, bool):
        raise ValueError(f"{where}: {ROLLOUTS_MARK}: count must be True or False, got {count!r}")
    path = dataset if isinstance(dataset, Dataset) else os.fspath(dataset)
    return MarkArguments(path, repeats, tasks, count, min_metric_of(kwargs.get("min_metric"), where))


def min_metric_of(given: object, where: str) -> tuple[tuple[str, float], ...]:
    """A mark's ``min_metric`` (a dict ``{custom metric: minimum mean}``, None: no gate) as ``(name, bound)`` pairs
    in its order; a name is checked as :meth:`Rollout.record_metric <pytest_gym_eval.outcomes.rollout.Rollout.
    record_metric>` checks it, a bound is a finite number (bool is not). Raises ValueError naming ``where``."""
    if given is None:
        return ()
    if not isinstance(given, Mapping) or not given:
        raise ValueError(
            f"{where}: {ROLLOUTS_MARK}: min_metric must be a dict of custom metric -> minimum mean, e.g. "
            f"{{'terse': 0.9}}, got {given!r}"
        )
    pairs = []
    for name, bound in given.items():
        try:
            check_name(name)
        except (TypeError, ValueError) as error:
            raise ValueError(f"{where}: {ROLLOUTS_MARK}: min_metric: {error}") from None
        if isinstance(bound, bool) or not isinstance(bound, (int, float)) or not math.isfinite(bound):
            raise ValueError(f"{where}: {ROLLOUTS_MARK}: min_metric[{name!r}] must be a finite number, got {bound!r}")
        pairs.append((name, float(bound)))
    return tuple(pairs)


def task_filter(tasks: str | tuple[str, ...] | None, where: str) -> Callable[[str], bool]:
    """Whether a task id is selected by a mark's ``tasks``: everything for None; for a tuple, its ids; for a string,
    an expression as ``-k`` takes (``and``, ``or``, ``not``, parentheses) whose names match a task id whole, or as a
    glob (``mcqa-00*``) (:func:`parse_task_expression`). Raises ValueError naming ``where`` for an expression that
    does not parse."""
    if tasks is None:
        return lambda task_id: True
    if isinstance(tasks, tuple):
        return frozenset(tasks).__contains__
    try:
        return parse_task_expression(tasks)
    except ValueError as error:
        raise ValueError(f"{where}: {ROLLOUTS_MARK}: tasks={tasks!r}: {error}") from None


_TOKEN = re.compile(r"\s*(\(|\)|[^\s()]+)")


def parse_task_expression(text: str) -> Callable[[str], bool]:
    """The predicate of a task expression: ``expr := term ("or" term)*``, ``term := factor ("and" factor)*``,
    ``factor := "not" factor | "(" expr ")" | NAME``, where a NAME is a glob (:func:`fnmatch.fnmatchcase`: ``*``,
    ``?``, ``[...]``) a task id must match whole. Raises ValueError saying what is wrong and where (0-based column)."""
    tokens: list[tuple[int, str]] = []
    position = 0
    while position < len(text):
        found = _TOKEN.match(text, position)
        if found is None:  # only spaces are left
            break
        tokens.append((found.start(1), found.group(1)))
        position = found.end()
    at = 0

    def peek() -> str | None:
        return tokens[at][1] if at < len(tokens) else None

    def take(what: str) -> str:
        nonlocal at
        if at >= len(tokens):
            raise ValueError(f"expected {what} at the end")
        at += 1
        return tokens[at - 1][1]

    def expression() -> Callable[[str], bool]:
        parts = [term()]
        while peek() == "or":
            take("or")
            parts.append(term())
        return parts[0] if len(parts) == 1 else (lambda task: any(part(task) for part in parts))

    def term() -> Callable[[str], bool]:
        parts = [factor()]
        while peek() == "and":
            take("and")
            parts.append(factor())
        return parts[0] if len(parts) == 1 else (lambda task: all(part(task) for part in parts))

    def factor() -> Callable[[str], bool]:
        column = tokens[at][0] if at < len(tokens) else len(text)
        token = take("a task id")
        if token == "not":
            inner = factor()
            return lambda task: not inner(task)
        if token == "(":
            inner = expression()
            if take("')'") != ")":
                raise ValueError(f"expected ')' at column {tokens[at - 1][0]}")
            return inner
        if token in (")", "and", "or"):
            raise ValueError(f"expected a task id at column {column}, got {token!r}")
        return lambda task: fnmatch.fnmatchcase(task, token)

    predicate = expression()
    if at < len(tokens):
        raise ValueError(f"unexpected {tokens[at][1]!r} at column {tokens[at][0]}")
    return predicate


def dataset_path(dataset: str, test_file: Path) -> Path:
    """A mark's dataset as an absolute path: relative to the test file's folder unless absolute (``~`` expanded)."""
    path = Path(dataset).expanduser()
    return Path(os.path.abspath(path if path.is_absolute() else test_file.parent / path))


def requests_for(
    tasks: Sequence[Task],
    args: MarkArguments,
    name: str,
    path: Path,
    default_agent: str,
    repeats: int,
    where: str,
    dataset_repeats: int | None = None,
) -> list[RolloutRequest]:
    """The (task, repeat) pairs a mark selects of a dataset's ``tasks``, task by task in the file's order, each
    with ``repeats`` repeats, each marked counted or not in the dataset's statistics by
    :func:`~pytest_gym_eval.session.results.counts_in_dataset` against ``dataset_repeats`` (the dataset's own; None:
    ``repeats``). Raises ValueError naming ``where`` for a task id the dataset lacks, or a filter that selects
    nothing."""
    if isinstance(args.tasks, tuple):
        known = {task.task_id for task in tasks}
        missing = [task for task in args.tasks if task not in known]
        if missing:
            raise ValueError(f"{where}: {ROLLOUTS_MARK}: {path} has no task {', '.join(map(repr, missing))}")
    wanted = task_filter(args.tasks, where)
    every = tuple(task.task_id for task in tasks)
    own = repeats if dataset_repeats is None else dataset_repeats
    requests = [
        RolloutRequest(
            name, path, task, repeat, task.agent or default_agent, every, counts_in_dataset(repeat, own, args.count)
        )
        for task in tasks
        if wanted(task.task_id)
        for repeat in range(repeats)
    ]
    if not requests:
        raise ValueError(f"{where}: {ROLLOUTS_MARK}: tasks={args.tasks!r} selects no task of {path}")
    return requests


def parametrize(metafunc: pytest.Metafunc, mark: pytest.Mark) -> None:
    """``pytest_generate_tests`` of a test with a ``gym_rollouts`` mark: parametrize its ``gym_rollout`` fixture over
    the pairs (ids ``<task>-r<k>``). A bad mark or dataset is the test file's collection error, naming both."""
    where = f"{metafunc.definition.path}::{metafunc.definition.name}"
    try:
        if FIXTURE not in metafunc.fixturenames:
            raise ValueError(f"{where}: the {ROLLOUTS_MARK} mark needs a {FIXTURE} argument to give each rollout to")
        args = mark_arguments(mark, where)
        gym = metafunc.config.stash[SESSION_KEY]
        if isinstance(args.dataset, Dataset):
            path, name = python_dataset_file(metafunc.config, gym, args.dataset, where)
        else:
            path = dataset_path(args.dataset, metafunc.definition.path)
            name = dataset_name(path, gym.options.rootdir)
        tasks, default_agent = dataset_tasks(metafunc.config, gym, path, where)
        if isinstance(args.dataset, Dataset) and args.dataset.agent and not gym.options.own_settings(path).agent:
            default_agent = args.dataset.agent
        own = gym.options.dataset_settings(path).repeats or 1
        requests = [
            replace(request, min_metric=args.min_metric)
            for request in requests_for(tasks, args, name, path, default_agent, args.repeats or own, where, own)
        ]
        declared = metafunc.config.stash.setdefault(MARK_GATES_KEY, {})
        check_declared(declared, name, args.min_metric, metafunc.definition.nodeid)
    except (ValueError, DatasetError) as error:
        raise pytest.Collector.CollectError(str(error)) from None
    metafunc.parametrize(FIXTURE, requests, ids=[request.test_id for request in requests], indirect=True)


def python_dataset_file(config: pytest.Config, gym: GymSession, dataset: Dataset, where: str) -> tuple[Path, str]:
    """The file a Python dataset is rolled out from (written into the session's run directory, made now if need be)
    and its name in node ids and reports (:meth:`Dataset.label`). Raises ValueError naming ``where`` (the test)
    when the file cannot be written, or when another Dataset of different rows has the same name."""
    label = dataset.label(gym.options.rootdir)
    texts = config.stash.setdefault(PYTHON_TEXTS_KEY, {})
    if texts.setdefault(label, dataset.text()) != dataset.text():
        raise ValueError(f"{where}: two Datasets are named {label} but hold different rows: give each its own name")
    try:
        path = materialise(dataset, gym.make_run_dir(), gym.options.rootdir)
    except OSError as error:
        raise ValueError(f"{where}: Dataset {label}: cannot write its rows to the run directory: {error}") from None
    return path, label


def check_declared(
    declared: dict[tuple[str, str], tuple[float, str]], dataset: str, min_metric: Sequence[tuple[str, float]], test: str
) -> None:
    """Note the gates ``test``'s mark declares for ``dataset`` in ``declared`` (per (dataset, metric): bound and
    test); raises ValueError naming both tests when an earlier test declared another bound for the same metric of
    the same dataset (the same bound twice is one gate). Checked as each test is collected, so that the mistake is
    a collection error in every process (a pytest-xdist worker's included)."""
    for metric, bound in min_metric:
        known = declared.setdefault((dataset, metric), (bound, test))
        if known[0] != bound:
            raise ValueError(disagreement(dataset, metric, known, (bound, test)))


def dataset_tasks(config: pytest.Config, gym: GymSession, path: Path, where: str) -> tuple[list[Task], str]:
    """The tasks of the dataset at ``path`` (as its items would be collected, the ``pytest_gym_eval_task_id``
    hook included) and its default agent, read once per session. Raises ValueError for a missing file and
    :class:`DatasetError` for a bad one."""
    cache = config.stash.setdefault(TASKS_KEY, {})
    if path not in cache:
        if not path.is_file():
            raise ValueError(f"{where}: {ROLLOUTS_MARK}: no dataset file {path}")
        hook = config.hook.pytest_gym_eval_task_id
        task_id_hook = (lambda row, p, line: hook(row=row, path=p, line=line)) if hook.get_hookimpls() else None
        tasks, _ = read_tasks(path, gym.options.id_fields, task_id_hook)  # the dataset's own items warn
        cache[path] = (tasks, dataset_default_agent(gym.options, path))
    return cache[path]


@dataclass
class Waiter:
    """What the item protocol reads of a rollout item (:class:`~pytest_gym_eval.session.item_protocol.RolloutLike`),
    for a
    test function's pair: its node id is the dataset item's."""

    request: RolloutRequest
    path: Path
    task: Task
    user_properties: list[tuple[str, object]] = field(default_factory=list)
    outcome: RolloutOutcome | None = None

    @property
    def nodeid(self) -> str:
        return self.request.nodeid


def rollout_for(request: pytest.FixtureRequest) -> Rollout:
    """The ``gym_rollout`` fixture: wait for the test's pair's rollout and return it. Its reward, record and usage
    join the test's ``user_properties`` (with ``gym_rollout``, the pair's node id, so the reward summary counts the
    rollout as its dataset's). A rollout with no verdict raises :class:`RolloutError` with its cause: the test
    errors. A test without the mark errors saying so."""
    wanted = getattr(request, "param", None)
    if not isinstance(wanted, RolloutRequest):
        pytest.fail(f"the {FIXTURE} fixture needs @pytest.mark.{ROLLOUTS_MARK}(dataset) on the test", pytrace=False)
    gym: GymSession = request.getfixturevalue("gym_session")
    waiter = Waiter(wanted, wanted.path, wanted.task)
    outcome = gym.item_protocol.outcome_of(waiter)
    properties = request.node.user_properties
    if (TEST_ROLLOUT, wanted.nodeid) not in properties:  # collection put it there (collect.plan_selected)
        properties.append((TEST_ROLLOUT, wanted.nodeid))
    properties.extend([(TEST_ROLLOUT_STATUS, outcome.status), (TEST_ROLLOUT_AGENT, wanted.agent)])
    request.node.user_properties.extend(waiter.user_properties)
    if outcome.status == "error" or outcome.record is None:
        error = RolloutError(outcome.message + (f"\nlog: {outcome.log}" if outcome.log else ""))
        error.outcome = outcome  # type: ignore[attr-defined]
        raise error
    rollout = rollout_of(outcome, wanted, outcome.record.read_full(), read_row(wanted.path, wanted.task.line))
    failed = request.node.stash.setdefault(SOFT_FAILURES_KEY, [])

    def record(name: str, value: float, reason: str | None) -> None:
        properties.append((property_name(name), value))
        if reason is not None:
            properties.append((reason_property_name(name), reason))

    return replace(rollout, recorder=record, failed_expectations=failed)


def recorded_metrics(item: pytest.Item) -> str | None:
    """The failure text's lines of the metrics ``item`` recorded (``rollout.record_metric``) with their reasons
    (:func:`~pytest_gym_eval.outcomes.custom_metrics.metrics_text`), or None when it recorded none."""
    properties = item.user_properties
    return metrics_text(metrics_of(properties), reasons_of(properties))


def add_metrics_to_failure(item: pytest.Item, report: pytest.TestReport, raised: str) -> None:
    """Add to a failed test's ``report`` the metrics it recorded with their reasons (:func:`recorded_metrics`),
    unless the failure's text ``raised`` already lists them (a soft expectation's): as a ``metrics`` section of
    the traceback, which the terminal and the JUnit failure text show, or as more lines of a text failure."""
    text = recorded_metrics(item)
    if not report.failed or text is None or text in raised:
        return
    longrepr = report.longrepr
    if isinstance(longrepr, str):
        report.longrepr = f"{longrepr}\n{text}"
    elif callable(add := getattr(longrepr, "addsection", None)):  # a traceback's (ExceptionRepr)
        add("metrics", text)


def soft_failure(item: pytest.Item) -> str | None:
    """The failure text of ``item``'s failed soft expectations (``rollout.expect``), or None when none failed: one
    line naming the rollout, then each message, then the metrics the test recorded (:func:`recorded_metrics`)."""
    failed = item.stash.get(SOFT_FAILURES_KEY, None)
    if not failed:
        return None
    count = len(failed)
    head = f"{count} soft expectation{'s' if count != 1 else ''} failed"
    metrics = recorded_metrics(item)
    return "\n".join([f"{head}:", *(f"  - {message}" for message in failed), *([metrics] if metrics else [])])


def rollout_of(
    outcome: RolloutOutcome, wanted: RolloutRequest, record: dict[str, Any], row: dict[str, Any] | None
) -> Rollout:
    """The :class:`Rollout` of a judged pair (``record``: its whole Gym record; ``row``: its dataset row)."""
    where = outcome.record
    return Rollout.from_record(
        record,
        task_id=wanted.task_id,
        repeat=wanted.repeat,
        status=outcome.status,
        reward=outcome.reward,
        row=row,
        agent=wanted.agent,
        dataset=wanted.dataset,
        record_path=where.path if where is not None else None,
        record_line=where.line if where is not None else None,
    )


ON_DEMAND_SERVERS = pytest.StashKey[dict[str, Servers]]()
"""Per head server (``host:port``), what its ``GET /server_instances`` listed: asked once per process."""


class RunRow:
    """The ``gym_run_row`` fixture's value: call it with a row to roll it out now (:meth:`__call__`)."""

    def __init__(self, request: pytest.FixtureRequest) -> None:
        self._request = request

    def __call__(
        self,
        row: Mapping[str, Any],
        agent: str | None = None,
        *,
        timeout: float | None = None,
        task_id: str | None = None,
    ) -> Rollout:
        """Roll ``row`` (a dict as a dataset line holds it: ``responses_create_params`` and the environment's own
        fields) out with ``agent`` (None: the only agent Gym runs) against the session's Gym and policy model, by
        ``POST``ing it to the agent's environment server (Gym 0.6.x: the agent server; no ``gym eval run``); wait
        at most ``timeout`` seconds (None: 600). The session's sampling options (``--gym-temperature``,
        ``--gym-max-output-tokens``, ``--gym-seed``, ...) go into the request as into a dataset row's (repeat 0),
        with ``--gym-policy`` the sampling of the policy the agent instance runs. Returns the :class:`Rollout`
        (``task_id`` as given, else ``on-demand``; repeat 0; ``passed`` when the verifier's reward reaches the pass
        threshold, else ``failed``). Raises :class:`OnDemandError`
        (the test errors, it does not fail) when Gym cannot be reached, refuses the row, fails it or does not
        answer in time; ``TypeError`` for a row that is not a mapping with ``responses_create_params``."""
        if not isinstance(row, Mapping) or not isinstance(row.get("responses_create_params"), Mapping):
            raise TypeError(f"{ON_DEMAND_FIXTURE}: a row is a dict with 'responses_create_params', got {row!r:.200}")
        gym = on_demand_gym(self._request)
        head = head_server_of(RunPaths(gym.run_dir).config) if gym.run_dir is not None else None
        head = head or gym.head_server
        if head is None:
            raise OnDemandError("Gym's head server is unknown: the session's Gym did not start")
        cache = self._request.config.stash.setdefault(ON_DEMAND_SERVERS, {})
        if head not in cache:
            cache[head] = server_instances(head)
        servers = cache[head]
        chosen = servers.agent_for(agent)
        url = servers.environment_for(chosen)
        sampling = instance_sampling(chosen, gym.options.policies, gym.options.sampling)
        sent = apply_sampling(row, sampling, 0) if not sampling.is_empty else row
        answer = post_row(url, sent, DEFAULT_TIMEOUT if timeout is None else timeout)
        threshold = gym.options.cli.over(gym.options.ini).threshold  # no dataset: the command line's, the ini's
        rollout = rollout_from_answer(
            answer, row, agent=chosen, task_id=task_id or "on-demand", threshold=threshold, where=f"{url}/run"
        )
        self._request.node.user_properties.append((ON_DEMAND_PROPERTY, rollout.reward))
        return rollout


def on_demand_gym(request: pytest.FixtureRequest) -> GymSession:
    """The session's Gym, started (once) for on-demand rollouts. Raises :class:`OnDemandError` when the session has
    no Gym to start (no dataset rollout planned and no ``--gym-agent``), :class:`GymStartError` when it failed."""
    gym = request.config.stash.get(SESSION_KEY, None)
    if gym is None or not gym.plan.needs_gym:
        raise OnDemandError(
            f"{ON_DEMAND_FIXTURE}: the session runs no Gym agent: name the agent with --gym-agent=NAME (ini "
            "gym_agent), or select a dataset, so that Gym starts with it"
        )
    started: GymSession = request.getfixturevalue("gym_session")
    return started
