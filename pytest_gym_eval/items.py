"""The pytest collection tree of a dataset: a :class:`DatasetFile` with one :class:`RolloutItem` per
(task, repeat), node id ``path/to/data.jsonl::<task-id>[r<k>]``, and a :class:`GateItem` when the dataset
has CI gates.

Rollout items are :class:`pytest.Function` items, so fixtures (``gym_session`` among them, and a user's own
autouse fixtures) work on them as on any test; the dataset file is a :class:`pytest.Module` for the same reason
pytest's own doctest text files are: module-scoped fixtures then have a module to live on.
"""

from __future__ import annotations

import warnings as _warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _pytest._code.code import ReprFileLocation, TerminalRepr

from pytest_gym_eval.dataset import DatasetError, Task, read_tasks
from pytest_gym_eval.integrations import timeout_marker
from pytest_gym_eval.outcome import RolloutOutcome
from pytest_gym_eval.rollouts import Missing, RolloutRecord
from pytest_gym_eval.session import SESSION_KEY, GymSession

try:  # the class pytest builds parametrizations with (renamed in pytest 9)
    from _pytest.python import CallSpec
except ImportError:  # pragma: no cover - pytest 8
    from _pytest.python import CallSpec2 as CallSpec  # type: ignore[attr-defined,no-redef,unused-ignore]


GYM_MARK = "gym"


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
        for k, _ in settings.min_pass_at_k:  # a gate no run of this dataset could ever judge
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
        default_agent = gym.default_agent(self.path)
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
        callspecs = [CallSpec(_idlist=(f"r{repeat}",)) for repeat in range(repeats)]
        fixtureinfo = None
        for task in tasks:
            agent = task.agent or default_agent
            for repeat, callspec in enumerate(callspecs):
                item = RolloutItem.from_parent(
                    self,
                    name=f"{task.task_id}[r{repeat}]",
                    callobj=gym_rollout,
                    callspec=callspec,
                    keywords={callspec.id: True},
                    originalname=task.task_id,
                    fixtureinfo=fixtureinfo,
                    task=task,
                    repeat=repeat,
                    agent=agent,
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


class RolloutItem(pytest.Function):
    """One rollout of one task: passes when its reward reaches the pass threshold.

    ``task``, ``repeat`` (0-based) and ``agent`` say what it rolls out. Setup waits for the rollout (an
    infrastructure failure raises there, so pytest reports an *error*); the call judges the reward.
    """

    def __init__(self, *, task: Task, repeat: int, agent: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.task = task
        self.repeat = repeat
        self.agent = agent
        self.outcome: RolloutOutcome | None = None
        # In every report of this item (JUnit properties; the xdist controller's summary reads them).
        self.user_properties += [("task_id", task.task_id), ("repeat", repeat), ("agent", agent)]

    @property
    def task_id(self) -> str:
        return self.task.task_id

    def setup(self) -> None:
        super().setup()
        session: GymSession = self.funcargs["gym_session"]  # type: ignore[assignment]
        self.outcome = session.outcome_of(self)
        if self.outcome.status == "error":
            raise RolloutError(self.outcome.message + (f"\nlog: {self.outcome.log}" if self.outcome.log else ""))

    def runtest(self) -> None:
        session: GymSession = self.funcargs["gym_session"]  # type: ignore[assignment]
        if session.decide(self).status == "failed":
            raise RolloutFailed(session.failure_report(self))

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, self.task.line - 1, f"{self.task_id}[r{self.repeat}]"


class GateItem(pytest.Function):
    """The dataset's CI gates, judged after its rollouts (``path/to/data.jsonl::gym-gate``).

    Setup waits for the dataset's selected rollouts; the call judges the gates.
    """

    found: dict[int, RolloutRecord | Missing] | None = None

    def setup(self) -> None:
        super().setup()
        session: GymSession = self.funcargs["gym_session"]  # type: ignore[assignment]
        self.found = session.wait_for_gate(self)

    def runtest(self) -> None:
        assert self.found is not None
        session: GymSession = self.funcargs["gym_session"]  # type: ignore[assignment]
        verdict = session.judge_gates(self, self.found)
        if verdict is not None:
            raise RolloutFailed(verdict)

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, 0, "gym-gate"
