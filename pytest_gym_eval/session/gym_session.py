"""The plugin's state for one pytest session: the plan, the Gym run, the rollout feed, the results.

There is one :class:`GymSession` per pytest process, made in ``pytest_configure`` and kept on the config's
stash. Its role depends on pytest-xdist:

- a single process both *owns* the run (starts Gym, runs ``gym eval run``, stops Gym) and *consumes* it
  (its items wait for their rollouts);
- under xdist the controller owns the run (Gym starts once for the whole run) and every worker consumes it
  through the run directory the controller hands out: the plan workers write, the state file the controller
  writes, and Gym's output files.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import pytest

from pytest_gym_eval import provision
from pytest_gym_eval.core import stash
from pytest_gym_eval.core.rundir import RunPaths
from pytest_gym_eval.gym.config import head_server_of
from pytest_gym_eval.gym.feed import RolloutFeed, RolloutRecord, RunState
from pytest_gym_eval.gym.resume import (
    ResumeError,
    Resumption,
    resumed_path,
)
from pytest_gym_eval.gym.run import (
    GymRun,
    GymStartError,
    ModelEndpoint,
)
from pytest_gym_eval.options.gym_options import GymOptions
from pytest_gym_eval.options.settings import DatasetSettings
from pytest_gym_eval.outcomes.outcome import judge
from pytest_gym_eval.reporting import json_report
from pytest_gym_eval.reporting import summary as report
from pytest_gym_eval.reporting.conclusion import Conclusion
from pytest_gym_eval.reporting.gym_metrics import read_gym_metrics, with_gym_figures
from pytest_gym_eval.session import resume, waves
from pytest_gym_eval.session.conclude import conclude
from pytest_gym_eval.session.diagnosis import Diagnosis
from pytest_gym_eval.session.finish import finish_session
from pytest_gym_eval.session.item_protocol import PROGRESS_TICK as PROGRESS_TICK
from pytest_gym_eval.session.item_protocol import GymItem as GymItem
from pytest_gym_eval.session.item_protocol import ItemProtocol, RolloutLike, wait_until_started
from pytest_gym_eval.session.launch import REPLAY_MODEL_NAME as REPLAY_MODEL_NAME
from pytest_gym_eval.session.launch import Launch, new_run_dir, shared_tasks_allowed, whole_tasks_allowed
from pytest_gym_eval.session.notes import Notes
from pytest_gym_eval.session.progress import progress_for
from pytest_gym_eval.session.results import (
    ResultsCollector,
    in_collection_order,
    read_session_quarantine,
    selected_counts,
    with_gym_records,
)
from pytest_gym_eval.session.stopping import Stopping
from pytest_gym_eval.stats.sequential import AdaptiveRecord
from pytest_gym_eval.tasks import selection
from pytest_gym_eval.tasks.dataset import DatasetError
from pytest_gym_eval.tasks.plan import PlannedRollout, RunPlan
from pytest_gym_eval.tasks.shard import CollectedPlan, empty_share

SESSION_KEY = cast("pytest.StashKey[GymSession]", stash.SESSION_KEY)
"""Where the session's :class:`GymSession` is kept (``config.stash``;
:data:`pytest_gym_eval.core.stash.SESSION_KEY`)."""
RUN_DIR_INPUT = "gym_run_dir"
"""Key of the run directory in a pytest-xdist worker's ``workerinput``."""

PlannedRow = tuple[str, Path, int, str, int, str]
"""A selected rollout as collection hands it to the session: ``(nodeid, dataset path, line, task id, repeat,
agent)`` (what :meth:`RunPlan.build <pytest_gym_eval.tasks.plan.RunPlan.build>` stamps)."""


class GymSession:
    """What the plugin knows and runs for one pytest session; the ``gym_session`` fixture returns it.

    Public attributes for tests and conftests: ``options`` (:class:`~pytest_gym_eval.options.gym_options.GymOptions`),
    ``run_dir`` (this session's run directory, once Gym started), ``plan`` (the selected rollouts),
    ``head_server`` (``"host:port"`` of Gym's head server once started; on a pytest-xdist worker, the one the
    controller's run uses, read from the run directory's Gym config once the run started).
    """

    def __init__(self, config: pytest.Config, options: GymOptions | None = None) -> None:
        self.config = config
        self.options = options if options is not None else GymOptions.from_config(config)
        self.baseline: dict[str, Any] | None = None  # read now: a bad baseline is a usage error, not a late surprise
        if self.options.baseline is not None:
            try:
                self.baseline = json_report.load_report(self.options.baseline)
            except (OSError, ValueError) as error:
                raise pytest.UsageError(f"--gym-baseline: {error}") from None
        self.quarantine = read_session_quarantine(self.options.quarantine)
        self.plan = RunPlan(())
        self.run_dir: Path | None = None
        self.head_server: str | None = None
        self.results = ResultsCollector()
        self.conclusion: Conclusion | None = None
        self.final: tuple[int, str] | None = None  # the session's exit status and reason, once concluded
        self.pages: list[str] = []
        """The terminal lines saying which report files :meth:`finish` wrote where, or why one could not be."""
        self.overruled_gates: list[str] = []
        """The terminal's lines for ``gym-gate`` items counted passed whose gates the session's end failed."""
        self.notes = Notes(config.pluginmanager.get_plugin)
        """The terminal's notes and the progress tail (:mod:`pytest_gym_eval.session.notes`)."""
        self._run: GymRun | None = None
        self._feed: RolloutFeed | None = None
        self._run_started: float | None = None  # time.time() when this process began starting the run
        self.stopping = Stopping()
        """The signals while Gym runs and stops, and the stop itself (:mod:`pytest_gym_eval.session.stopping`)."""
        self.diagnosis = Diagnosis(self.options)
        """The texts of the items' errors and their causes (:mod:`pytest_gym_eval.session.diagnosis`)."""
        self.item_protocol = ItemProtocol(self, config.hook.pytest_gym_eval_rollout_passed)
        """What the rollout and gate items ask of the session (:mod:`pytest_gym_eval.session.item_protocol`)."""
        self._started = False
        self._failed_start: RunState | None = None  # the owner's run failed before its thread began
        self._lock = threading.Lock()
        self.launch = Launch(self.options, self.note)
        """Which Gym this session starts: checkout, model endpoint, replay server, warm Gym (:mod:`~.launch`)."""
        self._deselected: list[tuple[str, str, int, str]] = []
        self.collected: CollectedPlan | None = None
        """Every collected (task, repeat) pair before any selection (:meth:`record_collected`)."""
        self.selections: dict[str, selection.Selection] = {}
        """Per dataset name, the part of it this session selected (:mod:`pytest_gym_eval.tasks.selection`)."""
        self._digests: dict[tuple[str, str], str] | None = None
        self._gym_rollouts: list[report.RolloutResult] | None = None
        """Every rollout Gym wrote as the reports count them, in collection order (set by :meth:`ending`)."""
        self._landed: dict[str, float] = {}
        """When each rollout Gym wrote landed, by node id (``time.time()``; set by :meth:`ending`)."""
        self.resumption: Resumption | None = None
        if self.options.resume is not None:
            try:
                self.resumption = Resumption.open(self.options.resume)
            except ResumeError as error:
                raise pytest.UsageError(f"--gym-resume: {error}") from None
        workerinput: dict[str, Any] | None = getattr(config, "workerinput", None)
        self.is_worker = workerinput is not None
        if workerinput is not None and workerinput.get(RUN_DIR_INPUT):
            self.run_dir = Path(workerinput[RUN_DIR_INPUT])

    # Roles.

    @property
    def is_controller(self) -> bool:
        """Whether this is the pytest-xdist controller (which runs no items)."""
        return not self.is_worker and self.config.pluginmanager.has_plugin("dsession")

    @property
    def owns_run(self) -> bool:
        """Whether this process starts and stops Gym (a single process, or the xdist controller)."""
        return not self.is_worker

    # Collection.

    def record_collected(self, collected: CollectedPlan) -> None:
        """Keep every collected (task, repeat) pair (``pytest_collection_modifyitems``, before any selection); a
        pytest-xdist worker also saves it in the run directory for the controller, which collects nothing. The gates
        its tests' ``gym_rollouts`` marks declare join the options' settings (:meth:`GymOptions.declare_marks`)."""
        self.collected = collected
        self.options.declare_marks(collected.marks)
        if self.is_worker and self.run_dir is not None:
            collected.save(RunPaths(self.run_dir).collected)

    def empty_share(self) -> bool:
        """Whether this is a ``--gym-shard`` session whose shard the split gave no task
        (:func:`pytest_gym_eval.tasks.shard.empty_share`): it passes, and its report tells the merge so."""
        return empty_share(self.collected_plan())

    def collected_plan(self) -> CollectedPlan | None:
        """This session's collected plan: its own, or on the pytest-xdist controller the one a worker saved; None
        when there is none (nothing collected, or no worker got that far). The controller takes the gates of the
        loaded plan's marks into its options (:meth:`GymOptions.declare_marks`)."""
        if self.collected is None and self.run_dir is not None:
            try:
                loaded = CollectedPlan.load(RunPaths(self.run_dir).collected)
            except (OSError, ValueError, KeyError, TypeError):
                return None
            self.options.declare_marks(loaded.marks)
            return loaded
        return self.collected

    def deselected(self, pairs: Sequence[tuple[str, str, int, str]]) -> None:
        """Note the ``(dataset, task id, repeat, policy)`` of rollout items a selection left out
        (``pytest_deselected``; policy "" unless the session compares policies)."""
        self._deselected += pairs

    def gates_for(self, settings: DatasetSettings) -> bool:
        """Whether a dataset with these settings has CI gates (it then gets a ``gym-gate`` item)."""
        return bool(settings.gates)

    def plan_rollouts(
        self,
        rows: Sequence[PlannedRow],
        items: dict[str, RolloutLike],
        how: str,
        serve_agents: Sequence[str] = (),
        uncounted: frozenset[str] = frozenset(),
    ) -> None:
        """Stamp the selected rollouts (``pytest_collection_finish``): ``rows`` in collection order, ``items`` the
        rollout item of each node id (for the pass hook), ``how`` the pytest options that selected (a label, see
        :mod:`pytest_gym_eval.tasks.selection`), ``serve_agents`` the agents on-demand rollouts need (Gym then starts
        even with no row planned), ``uncounted`` the node ids of rows only test functions beyond the dataset's repeats
        asked for (rolled out, not counted: :func:`pytest_gym_eval.session.results.counts_in_dataset`). A worker also
        saves the plan for the controller; the owner checks the run's configuration and makes its run directory (one
        usage error, not N errors)."""
        self.plan = RunPlan.build(
            rows,
            whole_tasks=bool(rows) and whole_tasks_allowed(self.options),
            shared_tasks=shared_tasks_allowed(self.options),
        )
        if serve_agents or uncounted:
            self.plan = dataclasses.replace(self.plan, serve_agents=tuple(serve_agents), uncounted=uncounted)
        self.item_protocol.expect(self.plan, items)
        if self.collected is not None:
            self.selections = selection.selections(
                self.collected, self._deselected, how, self.options.shard, max(1, len(self.options.policies))
            )
        if self.is_worker and self.run_dir is not None:
            selection.save(self.selections, RunPaths(self.run_dir).selection)  # before the plan: the
            self.plan.save(RunPaths(self.run_dir).plan)  # controller starts reading once the plan is there
        if self.owns_run and self.plan.needs_gym and not self.config.option.collectonly:
            self.check_before_start(self.plan)  # a missing agent or model server: one usage error, not N errors
            self.make_run_dir()  # now, so that a run directory that cannot be made is a usage error, not N errors
        if self.resumption is not None and self.owns_run and self.plan.rollouts and not self.config.option.collectonly:
            self._check_resume(self.plan)  # (under xdist the controller checks the plan the workers saved)

    def selection_of(self, dataset: str) -> selection.Selection | None:
        """The part of ``dataset`` (its name) this session selected; on the pytest-xdist controller, as a worker
        recorded it. None when unknown."""
        if not self.selections and self.run_dir is not None and not self.is_worker:
            self.selections = selection.load(RunPaths(self.run_dir).selection)
        return self.selections.get(dataset)

    # The run.

    @property
    def checkout(self) -> provision.GymCheckout | None:
        """The Gym checkout the run uses, once loaded."""
        return self.launch.checkout

    @property
    def model(self) -> ModelEndpoint | None:
        """The policy model endpoint, once known (a warm Gym's once the run attached to it, in whichever process
        owns the run: the pytest-xdist controller runs no item, so it never waits in :meth:`start`)."""
        if self.launch.model is None and self.launch.warm is not None:
            return self.launch.warm.model
        return self.launch.model

    def make_run_dir(self) -> Path:
        """This session's run directory, made now under ``--gym-run-dir`` or pytest's basetemp when there is none
        yet (:func:`pytest_gym_eval.session.launch.new_run_dir`; raises :class:`pytest.UsageError` naming the
        option)."""
        if self.run_dir is None:
            factory: pytest.TempPathFactory = self.config._tmp_path_factory  # type: ignore[attr-defined]
            self.run_dir = new_run_dir(self.options, factory)
        return self.run_dir

    def start_before_items(self, session: pytest.Session) -> None:
        """Start Gym before the first item runs (``pytest_runtestloop``) when :meth:`starts_before_items`, so that
        no item's duration holds Gym's start-up; a start that fails is raised again by each item's :meth:`start`."""
        if self.starts_before_items(session):
            with contextlib.suppress(GymStartError):
                self.start()

    def starts_before_items(self, session: pytest.Session) -> bool:
        """Whether to start Gym in ``pytest_runtestloop``, before the first item: in a process that runs items (not
        the pytest-xdist controller, whose workers start following the run the same way), when some rollout is
        selected and pytest will run items (not ``--collect-only`` or ``--setup-plan``, nor after collection
        errors, which end the session first)."""
        option = self.config.option
        if option.collectonly or getattr(option, "setupplan", False) or self.is_controller or not self.plan.needs_gym:
            return False
        return not (session.testsfailed and not option.continue_on_collection_errors)

    def start(self) -> None:
        """Make sure the run is going and this process follows it (the ``gym_session`` fixture's setup).

        Blocks until Gym's servers are ready (or attached). Raises :class:`GymStartError` when Gym could not
        start; pytest then reports every rollout item as an error with that message.
        """
        with self._lock:
            if not self._started:
                self._started = True
                if self.owns_run:
                    self.start_run(self.plan)
                if self.run_dir is None:
                    raise GymStartError("no run directory: the pytest-xdist controller did not hand one out")
                if self._feed is None:
                    self._feed = self._new_feed(self.run_dir).start()
        try:
            assert self._feed is not None
            wait_until_started(self._feed, self.options.startup_timeout, self.notes)
        finally:
            self._note_attached()

    def _new_feed(self, run_dir: Path) -> RolloutFeed:
        """The feed that follows this session's run in ``run_dir`` (not started)."""
        paths = RunPaths(run_dir)
        return RolloutFeed(
            paths.output,
            paths.failures,
            paths.state,
            materialized=paths.materialized,
            startup_timeout=self.options.startup_timeout,
            waves=paths.waves,
            stride=self.plan.stride,
            reused=resumed_path(run_dir) if self.options.resume is not None else None,
            owner_state=self._owner_failure if self.owns_run else None,
        )

    def start_run(self, plan: RunPlan) -> None:
        """Start the Gym run of ``plan`` in the background (owner only); failures land in the state file.

        From here until :meth:`stop`, SIGTERM ends the session as Ctrl-C does (:meth:`Stopping.run_started`).
        """
        if self.resumption is not None and self.is_controller:
            try:
                self._check_resume(plan)
            except pytest.UsageError as error:  # in an xdist hook a UsageError would be an internal error
                pytest.exit(str(error), returncode=pytest.ExitCode.USAGE_ERROR)
        self.stopping.run_started()
        self._run_started = time.time()
        self.notes.progress = progress_for(self.config)
        run_dir = self.make_run_dir()
        paths = RunPaths(run_dir)
        self.note(f"run directory: {run_dir}")
        try:
            plan = self._prepare_run(plan, run_dir)
            if not plan.needs_gym:  # --gym-resume reused every one: no Gym needed
                paths.logs.mkdir(parents=True, exist_ok=True)
                RunState("finished", f"every selected rollout was reused from {self.options.resume}").write(paths.state)
                return
            settings = self.launch.run_settings(plan, run_dir)
        except (GymStartError, ResumeError, DatasetError, OSError) as error:
            known = (GymStartError, ResumeError, DatasetError)
            message = str(error) if isinstance(error, known) else f"{type(error).__name__}: {error}"
            self._failed_start = RunState("failed", message)  # the owner's items read it here should the disk be full
            with contextlib.suppress(OSError):
                paths.logs.mkdir(parents=True, exist_ok=True)
                RunState("failed", message).write(paths.state)
            return
        hooked = bool(self.config.hook.pytest_gym_eval_rollout_passed.get_hookimpls())
        planner = waves.wave_planner(self.options, plan, run_dir, pass_hook=hooked, on_event=self.note)
        self._run = GymRun(plan, paths, settings, on_event=self.notes.on_run_event, waves=planner).start()
        self.head_server = "{}:{}".format(*self._run.head_server)
        if self.is_controller and self._feed is None:  # it runs no item: its feed sees when each rollout lands
            self._feed = self._new_feed(run_dir).start()

    # --gym-adaptive: waves (pytest_gym_eval.session.waves).

    def adaptive_records(self) -> dict[tuple[str, str | None], AdaptiveRecord]:
        """How ``--gym-adaptive`` ran each dataset, from the run's wave log (empty without it)."""
        return waves.adaptive_records(self.options, self.plan, self.run_dir)

    def reported_skipped(self, nodeid: str) -> bool:
        """Whether the rollout ``nodeid`` reported and is left out of its dataset's statistics: every item that would
        count it reported skipped (``pytest.skip`` in a fixture, or in a test function after it got the rollout),
        or only test functions beyond the dataset's repeats used it
        (:func:`pytest_gym_eval.session.results.count_rollout`):
        it is no selected one that never reported, and no gate counts it."""
        return self.results.left_out(nodeid)

    def selected_rollouts(self) -> list[PlannedRollout]:
        """The plan's rollouts that count as selected: all but those left out (see :meth:`reported_skipped`),
        those only test functions beyond the dataset's repeats asked for (``plan.uncounted``) and, with
        ``--gym-adaptive``, those the waves never asked for. What the gates judge, the summary's ``selected``
        counts and a shard report's plan hold."""
        never_asked = waves.skipped_stamps(self.options, self.run_dir)
        return [
            rollout
            for rollout in self.plan.rollouts
            if rollout.stamp not in never_asked
            and rollout.nodeid not in self.plan.uncounted
            and not self.reported_skipped(rollout.nodeid)
        ]

    def _owner_failure(self) -> RunState | None:
        """How this process's run failed when it could not say so in ``state.json`` (a full disk), else None."""
        return self._run.failure if self._run is not None else self._failed_start

    def check_before_start(self, plan: RunPlan) -> None:
        """Check ``plan``'s run before Gym starts (:meth:`pytest_gym_eval.session.launch.Launch.check_before_start`);
        raises :class:`pytest.UsageError` with one message per problem. A comparison margin at or beyond the width of a
        dataset's reward range is one too (:meth:`GymOptions.margin_problems`)."""
        problems = self.options.margin_problems(rollout.dataset for rollout in plan.rollouts)
        if problems:
            raise pytest.UsageError("\n".join(problems))
        self.launch.check_before_start(plan)

    def ending(self, interrupted: bool = False) -> None:
        """The session's results are in (the start of ``pytest_sessionfinish``): nothing more is wanted from Gym
        but its stop, which comes after the reports; until it ends a Ctrl-C or SIGTERM kills Gym's processes at once
        (:meth:`Stopping.ending`). With ``--gym-adaptive`` the last wave is judged here when every rollout of it is
        in (:meth:`GymRun.judge_last_wave`), so that the reports judge its groups on the confidence sequence. The head
        server and model attached to are noted now in every process (the pytest-xdist controller never waits in
        :meth:`start`). Idempotent."""
        self._note_attached()
        known = self._feed.records().keys() if self._feed is not None else ()
        self.stopping.ending(self._run, self.has_processes, interrupted, known)
        if not interrupted and self._run is not None:  # --gym-adaptive: the last wave judged before the reports
            self._run.judge_last_wave(known)
        if self._gym_rollouts is None and self.owns_run:
            judged = functools.partial(self._judged, ask_hook=not interrupted)  # after Ctrl-C: no user hook runs
            found = with_gym_records(self.results.rollouts(), self.selected_rollouts(), self.gym_wrote(), judged)
            self._gym_rollouts = self._in_order(found)  # final: computed once (20,000 rollouts are sorted once)

    def gym_wrote(self) -> dict[int, RolloutRecord]:
        """Every rollout Gym has written to the run directory's output files (and, with ``--gym-resume``, reused), by
        plan stamp: the last look of the feed that followed the run (stopped now: nothing waits for a rollout any
        more), which also says when each landed (kept for :meth:`rollouts`); without one (the run never got as far
        as being followed) one look now. Empty without a run."""
        if self.run_dir is None or not self.plan.rollouts:
            return {}
        if self._feed is None:
            feed = self._new_feed(self.run_dir)
            feed.look()
            return feed.records()
        self._feed.stop()  # its last look collects every line written until now
        landed = self._feed.landed()
        self._landed = {r.nodeid: landed[r.stamp] for r in self.plan.rollouts if r.stamp in landed}
        return self._feed.records()

    def _judged(self, rollout: PlannedRollout, record: RolloutRecord, *, ask_hook: bool = True) -> report.RolloutResult:
        """The result of a rollout Gym wrote whose item never reported it, judged as its item would have judged it
        (its dataset's pass threshold, the pass hook when this process has the item and ``ask_hook``, the cause of a
        failure)."""
        item = self.item_protocol.items.get(rollout.nodeid)
        hook = self.item_protocol.pass_hook(item) if item is not None and ask_hook else None
        threshold = self.options.dataset_settings(rollout.dataset).threshold
        outcome = judge(record, threshold, hook, self.item_protocol.explain)
        return report.RolloutResult(
            rollout.nodeid, rollout.nodeid.split("::", 1)[0], rollout.task_id, rollout.repeat, rollout.agent,
            outcome.status, outcome.reward, outcome.failure_class, f"{record.path}:{record.line}", usage=record.usage,
            answer=record.answer,
        )  # fmt: skip

    @property
    def stop_seconds(self) -> float | None:
        """How long stopping Gym took (after the reports), None until :meth:`stop` ended."""
        return self.stopping.seconds

    @property
    def has_processes(self) -> bool:
        """Whether :meth:`stop` has processes to stop: Gym's commands this process started (not yet stopped) or
        a replay model server (the policy's or a ``--gym-model-server NAME=replay:FILE`` binding's)."""
        if self.stop_seconds is not None:
            return False
        launch = self.launch
        return (
            (self._run is not None and not self._run.stopped)
            or launch.replay is not None
            or bool(launch.more_replays or launch.model_server_replays)
        )

    @property
    def starts_servers(self) -> bool:
        """Whether this process started Gym's servers (not attached, not a warm Gym's) and has not stopped them."""
        return self.has_processes and self._run is not None and self._run.servers is not None

    def stop(self) -> None:
        """Stop Gym (when this process started it), the replay server and the feed; give a warm Gym's lease back
        (it stays up); idempotent. A Ctrl-C or SIGTERM meanwhile kills Gym's processes at once (see
        :meth:`ending`). ``stop_seconds`` then holds how long it took (:meth:`Stopping.stop`)."""
        self.ending()
        self.stopping.stop(self._run, self.launch, self._feed)

    # The fast inner loop: the Gym configuration, a warm Gym (--gym-keep-alive), resuming (--gym-resume).

    def _note_attached(self) -> None:
        """After the run started: the head server and model it attached to (a warm Gym's are known only now)."""
        if self._run is not None:
            self.head_server = "{}:{}".format(*self._run.head_server)
        elif self.run_dir is not None:  # a pytest-xdist worker: the controller's run wrote its Gym config
            self.head_server = head_server_of(RunPaths(self.run_dir).config) or self.head_server
        if self.launch.warm is not None and self.launch.warm.model is not None:
            self.launch.model = self.launch.warm.model

    def _check_resume(self, plan: RunPlan) -> None:
        """Compare the selection ``plan`` with the run ``--gym-resume`` names (:func:`resume.check_resume`);
        raises :class:`pytest.UsageError` naming what differs (before anything runs)."""
        assert self.resumption is not None
        self._digests = resume.check_resume(self.resumption, self.launch.configuration, plan, self.options.resume)

    def _prepare_run(self, plan: RunPlan, run_dir: Path) -> RunPlan:
        """Write the run's manifest; with ``--gym-resume`` reuse the earlier run's scored rollouts
        (:func:`resume.prepare_run`). Returns the plan Gym must roll out."""
        params = self.config.invocation_params
        return resume.prepare_run(
            plan, run_dir, self.launch.configuration(plan), self._digests, (params.args, params.dir),
            self.resumption, self.note,
        )  # fmt: skip

    def resume_hint(self, exitstatus: int) -> list[str]:
        """After Ctrl-C or SIGTERM: the command that resumes this run (:func:`resume.resume_hint`)."""
        if self.is_worker:
            return []
        args = self.config.invocation_params.args
        return resume.resume_hint(exitstatus, self.run_dir, args, self.options.run_dir is not None)

    # Items (pytest_gym_eval.session.item_protocol).

    @property
    def feed(self) -> RolloutFeed | None:
        """The feed that follows the run's rollouts, once this process follows it (:meth:`start`)."""
        return self._feed

    def show_progress(self) -> None:
        """Show the run's progress once, from the main thread of the process that owns the run yet runs no item
        (the pytest-xdist controller; its items wait in the workers): :meth:`Notes.show_run`."""
        if not self.notes.showing or self.run_dir is None:
            return
        if self._feed is None:
            self._feed = self._new_feed(self.run_dir).start()
        self.notes.show_run(self._feed, len(self.plan.rollouts))

    def hide_progress(self) -> None:
        """Erase the progress now (before pytest writes to the terminal; a no-op when none is shown)."""
        self.notes.end_progress()

    def start_failure(self, nodeid: str, message: str) -> str:
        """The text of an item that errored because Gym could not start (:meth:`Diagnosis.start_failure`)."""
        return self.diagnosis.start_failure(nodeid, message)

    def error_once(self, nodeid: str, message: str) -> str:
        """The text of an item's error when Gym ended without its rollout (:meth:`Diagnosis.error_once`)."""
        return self.diagnosis.error_once(nodeid, message)

    # End of the session (the only process, or the xdist controller).

    def rollouts(self) -> list[report.RolloutResult]:
        """The rollouts the reports count, in collection order (xdist reports arrive in any order; the summary must
        not depend on it): once the session's results are in (:meth:`ending`), every rollout Gym wrote
        (:func:`~pytest_gym_eval.session.results.with_gym_records`), before that the items' reports."""
        if self._gym_rollouts is not None:
            return list(self._gym_rollouts)
        return self._in_order(self.results.rollouts())

    def judged_at_end(self) -> list[report.RolloutResult]:
        """The rollouts the session's end judged from Gym's records (:meth:`ending`) that no item reported (Ctrl-C,
        ``-x`` or a crash came first), in collection order; empty before :meth:`ending`."""
        if self._gym_rollouts is None:
            return []
        reported = {result.nodeid for result in self.results.rollouts()}
        return [result for result in self._gym_rollouts if result.nodeid not in reported]

    def _in_order(self, found: Sequence[report.RolloutResult]) -> list[report.RolloutResult]:
        """``found`` in collection order, each with Gym's time for it when known
        (:func:`~pytest_gym_eval.session.results.in_collection_order`)."""
        started = self._run.eval_started if self._run is not None else None
        return in_collection_order(found, self.plan.rollouts, started, self._landed)

    def startup_seconds(self) -> float | None:
        """Seconds from the start of the run (this process, the owner, began starting Gym or attaching) to the
        start of its first ``gym eval run``, to the millisecond; None when no ``gym eval run`` started."""
        started = self._run.eval_started if self._run is not None else None
        if started is None or self._run_started is None:
            return None
        return round(started - self._run_started, 3)

    def conclude(self) -> Conclusion | None:
        """Compute the session's conclusion from the reported rollouts (None when the session planned no Gym: no
        rollout reported or planned, and no on-demand rollout's agent to serve; unless the session is a shard whose
        share is empty: :meth:`empty_share`)."""
        rollouts = self.rollouts()
        if (
            self.is_worker
            or not (rollouts or self.plan.needs_gym or self.empty_share())
            or self.config.option.collectonly
        ):
            return None
        selected = selected_counts(self.selected_rollouts(), self.quarantine)
        parts = {name: part for name in selected if (part := self.selection_of(name)) is not None}
        self.conclusion = conclude(
            rollouts, self.options, self.baseline, selected, adaptive=self.adaptive_records(), selections=parts,
            quarantine=self.quarantine, known_tasks=self._collected_tasks(), not_counted=self.not_counted(),
            tests_run=self.results.tests_reported,  # (known_tasks also declares the marks' gates)
        )  # fmt: skip
        figures = with_gym_figures(self.conclusion.summaries, rollouts, read_gym_metrics(self.run_dir))
        # Gym's own figures, and the test functions' outcomes (with the warnings they imply), for every report
        self.conclusion = dataclasses.replace(self.conclusion, summaries=figures).with_tests(
            tuple(self.results.test_outcomes.values())
        )
        return self.conclusion

    def finish(self, exitstatus: int) -> int:
        """End the session (``pytest_sessionfinish``): conclude, let the gates set the exit status, write the JUnit
        suite properties and gate testcases and the reports (:func:`~pytest_gym_eval.session.finish.finish_session`);
        returns the session's exit status (``exitstatus`` when nothing was concluded)."""
        return finish_session(self, exitstatus)

    def not_counted(self) -> dict[str, str]:
        """Per dataset name, the summary's line of the test functions' rollouts its statistics left out
        (:meth:`ResultsCollector.not_counted`)."""
        rootdir = self.options.rootdir
        return self.results.not_counted(lambda name: self.options.dataset_settings(rootdir / name).repeats or 1)

    def _collected_tasks(self) -> list[tuple[str, str]]:
        """Every ``(dataset, task id)`` this session collected, before any selection (none when unknown)."""
        collected = self.collected_plan()
        if collected is None:
            return []
        return [(entry.dataset, task) for entry in [*collected.datasets, *collected.tested] for task in entry.tasks]

    # Terminal (pytest_gym_eval.session.notes).

    def note(self, message: str) -> None:
        """Queue a progress line for the terminal (:meth:`Notes.note`; any thread)."""
        self.notes.note(message)

    def flush_notes(self) -> None:
        """Write queued progress lines to the terminal (:meth:`Notes.flush`; main thread)."""
        self.notes.flush()
