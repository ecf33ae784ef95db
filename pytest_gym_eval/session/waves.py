"""What the session asks of ``--gym-adaptive``'s waves (:mod:`pytest_gym_eval.gym.waves`), kept apart from the rest
of the run: the wave planner the owner hands to the run, how each group stopped (the wave log), the rollouts the
waves never asked for, and a gate's wait for the wave log. No pytest session here: it takes the options, the plan
and the run directory as arguments."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from pytest_gym_eval.core.rundir import RunPaths
from pytest_gym_eval.gym.feed import RunState
from pytest_gym_eval.gym.waves import Comparing, GroupPolicy, WaveLog, WavePlanner, dataset_of, group_rollouts
from pytest_gym_eval.options.gym_options import GymOptions
from pytest_gym_eval.stats.sequential import AdaptiveRecord, RewardRange
from pytest_gym_eval.tasks.plan import RunPlan

WAVE_LOG_WAIT = 60.0
"""Seconds a gate waits for the wave log when ``--gym-rollout-timeout`` is unset."""


def wave_planner(
    options: GymOptions, plan: RunPlan, run_dir: Path, *, pass_hook: bool, on_event: Callable[[str], None]
) -> WavePlanner | None:
    """The planner of ``plan``'s waves in ``run_dir`` (None without ``--gym-adaptive``): each dataset's reward gates
    (a custom metric's gate is judged at the session's end, on the fixed-sample interval),
    threshold and reward range as the options give them, and with ``--gym-policy`` the policies and their
    comparison gates (``--gym-max-regression``, ``--gym-min-improvement``); ``pass_hook`` whether a
    ``pytest_gym_eval_rollout_passed`` hook decides passes; ``on_event`` takes the planner's notes."""
    if not options.adaptive:
        return None
    policies = {}
    for rollout in plan.rollouts:
        name = dataset_of(rollout)
        if name not in policies:
            settings = options.dataset_settings(rollout.dataset)
            reward_gates = tuple(gate for gate in settings.gates if gate.custom is None)  # metrics: tests' own
            policies[name] = GroupPolicy(reward_gates, settings.threshold, settings.reward_range or RewardRange())
    comparing = None
    if options.policies:  # --gym-policy: each dataset's policies move together, judged on their comparison too
        names = tuple(policy.name for policy in options.policies)
        comparing = Comparing(names, tuple(options.comparison_gates()))
    return WavePlanner(
        plan, policies, options.min_repeats, run_dir, pass_hook=pass_hook, on_event=on_event, comparing=comparing
    )


def adaptive_records(
    options: GymOptions, plan: RunPlan, run_dir: Path | None
) -> dict[tuple[str, str | None], AdaptiveRecord]:
    """How ``--gym-adaptive`` ran each group of ``plan``, from the wave log in ``run_dir`` (empty without it, or
    before there is a run directory)."""
    if not options.adaptive or run_dir is None:
        return {}
    log = WaveLog.read(RunPaths(run_dir).waves)
    datasets = {dataset_of(r): r.dataset for r in plan.rollouts}
    return log.records(plan, lambda name: options.dataset_settings(datasets[name]).reward_range or RewardRange())


def skipped_stamps(options: GymOptions, run_dir: Path | None) -> set[int]:
    """The stamps of the rollouts ``--gym-adaptive``'s waves never asked for (empty without it)."""
    if not options.adaptive or run_dir is None:
        return set()
    return set(WaveLog.read(RunPaths(run_dir).waves).skipped)


def wait_for_wave_log(
    plan: RunPlan,
    dataset: str,
    run_dir: Path,
    state: Callable[[], RunState | None],
    timeout: float | None,
    on_tick: Callable[[], None],
) -> bool:
    """Wait until the wave log in ``run_dir`` says how every group of ``dataset`` (its name) stopped (the owner
    writes it just after the wave's ``gym eval run`` ends), or ``state()`` says the run is done, or ``timeout``
    seconds (:data:`WAVE_LOG_WAIT` when None) pass; ``on_tick`` runs every 0.1 s meanwhile. Returns whether the
    log says it."""
    keys = {key for key in group_rollouts(plan) if key[0] == dataset}
    deadline = time.monotonic() + (timeout or WAVE_LOG_WAIT)
    while time.monotonic() < deadline:
        if keys <= set(WaveLog.read(RunPaths(run_dir).waves).groups):
            return True
        current = state()
        if current is not None and current.done:
            return False
        on_tick()
        time.sleep(0.1)
    return False
