"""The item protocol (:class:`ItemProtocol`): what a rollout item and a gate item ask of the session. A rollout
item's setup waits for its rollout and judges it, its call phase lets a ``pytest_gym_eval_rollout_passed`` hook
decide and words a failure; a gate item's setup waits for every selected rollout of its dataset, its call phase
judges the dataset's gates. No pytest session here: it reads the run through a :class:`RunView` (the
:class:`~pytest_gym_eval.session.gym_session.GymSession`, or a stand-in in a test) and the pass hook through a
caller."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

import pytest

from pytest_gym_eval.gym.feed import Missing, RolloutFeed, RolloutRecord, RunState, Skipped
from pytest_gym_eval.gym.run import GymStartError
from pytest_gym_eval.history.quarantine import Quarantine
from pytest_gym_eval.options.gym_options import GymOptions
from pytest_gym_eval.outcomes import causes
from pytest_gym_eval.outcomes.outcome import PassHook, RolloutOutcome, failure_report, judge
from pytest_gym_eval.reporting import summary as report
from pytest_gym_eval.session import waves
from pytest_gym_eval.session.diagnosis import Diagnosis
from pytest_gym_eval.session.notes import Notes
from pytest_gym_eval.stats.sequential import AdaptiveRecord
from pytest_gym_eval.tasks import selection
from pytest_gym_eval.tasks.dataset import DatasetError, Task, read_row_at
from pytest_gym_eval.tasks.plan import PlannedRollout, RunPlan

PROGRESS_TICK = 0.5
"""Seconds between two progress updates while an item waits for its rollout (its report is not delayed: the
wait ends as soon as the rollout lands)."""


class GymItem(Protocol):
    """What the session reads of a gate item (:class:`pytest_gym_eval.session.collect.GateItem`, or a stand-in in a
    test)."""

    path: Path
    user_properties: list[tuple[str, object]]

    @property
    def nodeid(self) -> str: ...


class RolloutLike(GymItem, Protocol):
    """What the session reads and sets of a rollout item (:class:`pytest_gym_eval.session.collect.RolloutItem`): its
    ``task`` and the ``outcome`` the session judged."""

    task: Task
    outcome: RolloutOutcome | None


class RunView(Protocol):
    """What the item protocol reads of the session's run (:class:`~pytest_gym_eval.session.gym_session.GymSession`)."""

    options: GymOptions
    plan: RunPlan
    run_dir: Path | None
    diagnosis: Diagnosis
    notes: Notes
    quarantine: Quarantine | None
    """The ``--gym-quarantine`` list: its tasks are left out of the gates."""

    @property
    def feed(self) -> RolloutFeed | None: ...

    def selection_of(self, dataset: str) -> selection.Selection | None: ...

    def selected_rollouts(self) -> list[PlannedRollout]: ...

    def adaptive_records(self) -> dict[tuple[str, str | None], AdaptiveRecord]: ...


HookCaller = Callable[..., Any]
"""``config.hook.pytest_gym_eval_rollout_passed`` (called with keywords; ``get_hookimpls()`` says whether any
plugin implements it)."""


class ItemProtocol:
    """The items' side of one session: ``run`` the session's run, ``hook`` the pass hook's caller. :meth:`expect`
    takes the plan's rollout items once collection is done."""

    def __init__(self, run: RunView, hook: HookCaller) -> None:
        self.run = run
        self.hook = hook
        self.stamps: dict[str, int] = {}
        """The planned stamp of each rollout item's node id."""
        self.items: dict[str, RolloutLike] = {}
        """The rollout item of each node id (for the pass hook)."""

    def expect(self, plan: RunPlan, items: Mapping[str, RolloutLike]) -> None:
        """Take ``plan``'s rollouts and their ``items`` (node id -> rollout item) as the ones items ask for."""
        self.items = dict(items)
        self.stamps = {rollout.nodeid: rollout.stamp for rollout in plan.rollouts}

    def explain(self, record: RolloutRecord) -> causes.Cause:
        """The root cause of a rollout Gym recorded as failed (:meth:`Diagnosis.explain`)."""
        return self.run.diagnosis.explain(record, self.run.run_dir)

    def outcome_of(self, item: RolloutLike) -> RolloutOutcome:
        """Wait for ``item``'s rollout and judge it (the item's setup).

        The wait is bounded for the whole run (see :class:`~pytest_gym_eval.gym.feed.RolloutFeed`); an error's
        message starts with its cause (:meth:`explain`), and a rollout given up on says what Gym was doing. A
        rollout ``--gym-adaptive`` never asked for skips the item (:class:`pytest.skip.Exception`)."""
        run = self.run
        assert run.feed is not None, "gym_session was not started"
        run.notes.flush()
        stamp = self.stamps.get(item.nodeid)
        if stamp is None:
            found: RolloutRecord | Missing = Missing(
                "this item was not in the session's plan", failure_class=causes.NOT_PLANNED
            )
        else:
            found = self.wait_for(run.feed, stamp)
        if isinstance(found, Skipped):  # --gym-adaptive decided without it
            raise pytest.skip.Exception(found.reason, _use_item_location=True)
        threshold = run.options.dataset_settings(item.path).threshold
        outcome = judge(found, threshold, None, self.explain)  # the pass hook decides in the call phase: decide()
        extra = run.diagnosis.error_context(found, outcome, run.run_dir, run.feed, run.plan)
        if outcome.status == "error":  # Gym's own texts (log tails among them) pass here too: no key gets out
            message = causes.redact("\n".join([outcome.message, *extra]), run.diagnosis.secrets())
            outcome = dataclasses.replace(outcome, message=message)
        item.user_properties.extend(properties(outcome))
        return outcome

    def wait_for(self, feed: RolloutFeed, stamp: int) -> RolloutRecord | Missing:
        """The feed's answer for ``stamp`` (bounded by ``--gym-rollout-timeout`` as the feed bounds it), showing the
        run's progress every :data:`PROGRESS_TICK` s while waiting."""
        notes, timeout, planned = self.run.notes, self.run.options.rollout_timeout, len(self.run.plan.rollouts)
        if not notes.showing:
            return feed.wait(stamp, timeout)
        try:
            return feed.wait(stamp, timeout, lambda: notes.show_rollouts(feed, planned), PROGRESS_TICK)
        finally:
            notes.end_progress()

    def decide(self, item: RolloutLike) -> RolloutOutcome:
        """Let a ``pytest_gym_eval_rollout_passed`` hook decide whether ``item``'s scored rollout passed (the
        item's call phase, which pytest-timeout times); returns the item's final outcome."""
        outcome = item.outcome
        assert outcome is not None
        hook = self.pass_hook(item)
        if hook is None or outcome.status == "error" or outcome.record is None:
            return outcome
        threshold = self.run.options.dataset_settings(item.path).threshold
        item.outcome = dataclasses.replace(outcome, status=judge(outcome.record, threshold, hook).status)
        return item.outcome

    def pass_hook(self, item: RolloutLike) -> PassHook | None:
        """The pass hook asked about ``item`` (None when no plugin implements it)."""
        hook = self.hook
        if not hook.get_hookimpls():  # type: ignore[attr-defined]
            return None

        def decide(record: RolloutRecord, reward: float, threshold: float) -> bool | None:
            result: bool | None = hook(item=item, record=record.read_full(), reward=reward, threshold=threshold)
            return result

        return decide

    def failure_report(self, item: RolloutLike) -> str:
        """The text a failed rollout item shows (with its dataset row when the dataset still has it)."""
        assert item.outcome is not None
        row = read_row(item.path, item.task.line)
        return failure_report(item.outcome, self.run.options.dataset_settings(item.path).threshold, row)

    def wait_for_gate(self, item: GymItem) -> dict[int, RolloutRecord | Missing]:
        """Wait until every selected rollout of the gate's dataset is in (the gate item's setup, so that
        pytest-timeout, which times the call, does not count the wait). Works from Gym's output files, so under
        xdist it sees rollouts other workers report."""
        run, feed = self.run, self.run.feed
        assert feed is not None, "gym_session was not started"
        run.notes.flush()
        dataset = item.nodeid.split("::", 1)[0]
        planned = [
            r for r in run.plan.rollouts if r.nodeid.split("::", 1)[0] == dataset and r.nodeid not in run.plan.uncounted
        ]
        found = feed.wait_all([r.stamp for r in planned], run.options.rollout_timeout)
        if run.options.adaptive and run.run_dir is not None:
            timeout = run.options.rollout_timeout
            waves.wait_for_wave_log(run.plan, dataset, run.run_dir, lambda: feed.state, timeout, run.notes.flush)
        return found

    def judge_gates(self, item: GymItem, found: dict[int, RolloutRecord | Missing]) -> str | None:
        """Judge the dataset's reward gates on ``found`` (from :meth:`wait_for_gate`): None when they pass, else the
        failure text (custom metric gates are the session's to judge, at its end). A selection that is no sample
        of the dataset skips the item (:func:`pytest.skip`)."""
        run = self.run
        dataset = item.nodeid.split("::", 1)[0]
        planned = [r for r in run.selected_rollouts() if r.nodeid.split("::", 1)[0] == dataset]
        if run.quarantine is not None:  # rolled out and reported, left out of the gates
            held = {r.task_id for r in planned if run.quarantine.entry_for(dataset, r.task_id)}
            planned = [r for r in planned if r.task_id not in held]
            if held:
                item.user_properties.append(("quarantined", len(held)))
        settings = run.options.dataset_settings(item.path)
        results = []
        for rollout in planned:
            rollout_item = self.items.get(rollout.nodeid)
            hook = self.pass_hook(rollout_item) if rollout_item is not None else None
            outcome = judge(found[rollout.stamp], settings.threshold, hook, self.explain)
            results.append(
                report.RolloutResult(
                    rollout.nodeid, dataset, rollout.task_id, rollout.repeat, rollout.agent, outcome.status,
                    outcome.reward, outcome.failure_class,
                )
            )  # fmt: skip
        # A custom metric's gate is judged at the session's end only: the test functions that record the metric may
        # run after this item, or on another worker.
        gates = [gate for gate in settings.gates if gate.custom is None]
        summaries = report.summarize(
            results, thresholds={dataset: settings.threshold}, gates={dataset: gates},
            mode=run.options.gate_mode, adaptive=run.adaptive_records(),
        )  # fmt: skip
        judged = [gate for summary in summaries for gate in summary.gates]
        item.user_properties.extend(("gate", gate.describe()) for gate in judged)
        part = run.selection_of(dataset)
        if part is not None and part.partial:
            item.user_properties.append(("selection", part.describe()))
        if part is not None and part.biased:  # no sample of the dataset: its verdict is no verdict on it
            verdicts = "; ".join(gate.describe() for gate in judged) or "no rollout selected"
            pytest.skip(f"{part.describe()}, not the whole dataset (the gates decide only on it): {verdicts}")
        if not summaries:
            return f"no rollout of {dataset} was selected: its gates cannot be judged"
        failing = [gate for gate in judged if not gate.passed(run.options.inconclusive_passes)]
        if not failing:
            return None
        errored = sum(1 for result in results if result.status == "error")
        cause = [f"{errored} of {len(results)} selected rollouts errored: no gate passes on part of the selection"]
        return "\n".join([*(gate.describe() for gate in failing), *(cause if errored else [])])


def properties(outcome: RolloutOutcome) -> list[tuple[str, object]]:
    """The JUnit properties of a judged rollout: its reward (never for an errored rollout, which has none), its
    failure class, the record's ``path:line``, its token usage and the digest of the policy's answer (``answer``,
    :func:`~pytest_gym_eval.outcomes.answers.answer_digest`)."""
    found: list[tuple[str, object]] = []
    if outcome.reward is not None:
        found.append(("reward", outcome.reward))
    if outcome.failure_class:
        found.append(("failure_class", outcome.failure_class))
    if outcome.record is not None:
        found.append(("record", f"{outcome.record.path}:{outcome.record.line}"))
        found.extend(outcome.record.usage.properties())
        if outcome.record.answer is not None:
            found.append(("answer", outcome.record.answer))
    return found


def read_row(path: Path, line: int) -> dict[str, Any] | None:
    """The dataset row at 1-based ``line`` of ``path`` (:func:`~pytest_gym_eval.tasks.dataset.read_row_at`); None when
    it
    cannot be read (the dataset changed since collection: the record alone still tells most)."""
    try:
        return read_row_at(path, line)
    except (OSError, DatasetError):
        return None


class StateLike(Protocol):
    """What :func:`wait_until_started` reads of the feed (:class:`~pytest_gym_eval.gym.feed.RolloutFeed`)."""

    @property
    def state(self) -> RunState | None: ...


def wait_until_started(feed: StateLike, startup_timeout: float, notes: Notes) -> None:
    """Wait until the run's state (``feed.state``: the state file as the feed reads it, or the owner's failure it
    could not write) leaves its start-up, showing notes and the start-up progress meanwhile; at most
    ``startup_timeout`` + 120 seconds. Raises :class:`GymStartError` when Gym did not start in time or failed to
    (its failure class from the state)."""
    deadline = time.monotonic() + startup_timeout + 120
    while True:
        state = feed.state
        if state is not None and state.phase != "starting":
            break
        if time.monotonic() > deadline:
            notes.end_progress()
            raise GymStartError(f"Gym did not start within {startup_timeout:g} s")
        notes.flush()
        if notes.progress is not None:
            notes.progress.tick()
        time.sleep(0.1)
    notes.end_progress()
    notes.flush()
    if notes.progress is not None and state.phase == "running":
        notes.progress.running()
    if state.phase == "failed":
        error = GymStartError(f"Gym would not start: {state.message}" + (f"\nlog: {state.log}" if state.log else ""))
        error.failure_class = state.failure_class or error.failure_class
        raise error
