"""What a session concludes from its rollouts (:func:`conclude`): the reward summaries, the CI gates' verdicts, the
comparison with a baseline and between policies, the rollouts whose reward differs from a replayed recording, the
quarantine's lines, and the exit status they imply.

A session concludes from its items' results (:mod:`pytest_gym_eval.session.results`) and ``python -m
pytest_gym_eval merge`` from the shards' reports, through the same function; the numbers themselves are computed
by the pure functions of :mod:`pytest_gym_eval.reporting`.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from pytest_gym_eval.history.quarantine import Quarantine, split_gated, unmatched, unmatched_warning
from pytest_gym_eval.options.gym_options import GymOptions
from pytest_gym_eval.outcomes.records import records_at
from pytest_gym_eval.reporting import baseline as bl
from pytest_gym_eval.reporting import summary as rpt
from pytest_gym_eval.reporting.conclusion import Conclusion, Flip, PolicyComparison
from pytest_gym_eval.reporting.policies import (
    compare_policies,
    familywise_session,
    label_policies,
)
from pytest_gym_eval.reporting.verdicts import gate_verdicts, session_status
from pytest_gym_eval.stats.gates import Gate, GateSource
from pytest_gym_eval.stats.sequential import AdaptiveRecord
from pytest_gym_eval.tasks.selection import Selection


def dataset_policy(options: GymOptions, datasets: Sequence[str]) -> tuple[dict[str, float], dict[str, list[Gate]]]:
    """Pass thresholds and gates of each dataset (node-id path, relative to the rootdir)."""
    thresholds: dict[str, float] = {}
    gates: dict[str, list[Gate]] = {}
    for dataset in datasets:
        settings = options.dataset_settings(options.rootdir / dataset)
        thresholds[dataset] = settings.threshold
        gates[dataset] = settings.gates
    return thresholds, gates


def marks_of_tests_run(
    gates: Mapping[str, Sequence[Gate]], options: GymOptions, tests_run: Collection[str]
) -> dict[str, list[Gate]]:
    """Each dataset's ``gates`` without the ``gym_rollouts`` marks' gates none of whose declaring tests
    (:meth:`GymOptions.declaring_tests`) ran (``tests_run``: node ids without parametrization): a gate its test
    declares goes with the test, so that ``-k other_test`` is not failed by the gate of a test it did not select."""
    return {
        dataset: [
            gate
            for gate in dataset_gates
            if gate.source is not GateSource.MARK
            or gate.custom is None
            or any(test in tests_run for test in options.declaring_tests(dataset, gate.custom))
        ]
        for dataset, dataset_gates in gates.items()
    }


def find_flips(results: Sequence[rpt.RolloutResult], recordings: Sequence[Path]) -> list[Flip]:
    """Replayed rollouts whose reward differs from the recording the replay model served them.

    A rollout finds its recordings as the replay model does (:meth:`~pytest_gym_eval.replay.ReplayIndex.
    recordings_for` of its task's request, read from its record in Gym's output): a rollout tagged with its
    repeat (every rollout the plugin plans under ``--gym-replay``) is compared with the one recording served
    to that repeat; an untagged one flips only when its reward matches none of its task's recordings.
    Rollouts without a record or a reward, or with no recording carrying a reward (policy answers written without
    Gym's verifier, as a test's own recordings are), are left out. Raises
    :class:`~pytest_gym_eval.replay.RecordingError` for a recording that cannot be read.
    """
    from pytest_gym_eval.replay import ReplayIndex, load_recordings

    index = ReplayIndex(load_recordings(recordings))
    located: dict[Path, dict[int, list[tuple[int, str, float]]]] = {}  # file -> line -> (order, nodeid, reward)
    for order, result in enumerate(results):
        if result.reward is not None and result.record is not None:
            file, _, number = result.record.rpartition(":")
            located.setdefault(Path(file), {}).setdefault(int(number), []).append((order, result.nodeid, result.reward))
    flips: list[tuple[int, Flip]] = []
    for path, at in located.items():
        for line, record in records_at(path, at):  # one pass a file (one walk a record was N x N lines)
            params = record.get("responses_create_params")
            if not isinstance(params, dict):
                continue
            try:
                recorded = [recording.reward for recording in index.recordings_for(params)]
            except ValueError:
                continue
            numbers = [float(r) for r in recorded if isinstance(r, (int, float)) and not isinstance(r, bool)]
            for order, nodeid, reward in at[line]:
                if numbers and not any(math.isclose(reward, r, abs_tol=1e-9) for r in numbers):
                    flips.append((order, Flip(nodeid, reward, tuple(recorded))))
    return [flip for _, flip in sorted(flips, key=lambda pair: pair[0])]


def conclude(
    results: Sequence[rpt.RolloutResult],
    options: GymOptions,
    baseline: Mapping[str, Any] | None = None,
    selected: Mapping[str, Mapping[str, int]] | None = None,
    policy: tuple[Mapping[str, float], Mapping[str, Sequence[Gate]]] | None = None,
    *,
    adaptive: Mapping[tuple[str, str | None], AdaptiveRecord] | None = None,
    selections: Mapping[str, Selection] | None = None,
    quarantine: Quarantine | None = None,
    known_tasks: Iterable[tuple[str, str]] = (),
    not_counted: Mapping[str, str] | None = None,
    tests_run: Collection[str] | None = None,
) -> Conclusion:
    """Summaries, gate verdicts, the comparison with ``baseline`` (the ``--gym-baseline`` report, as
    :func:`~pytest_gym_eval.reporting.json_report.load_report` read it) and replay flips, and the exit status
    they imply: when any gate is set, 1 exactly when a verdict of the list fails (``Conclusion.verdicts``, made
    once here), else 0.

    ``selected[dataset][agent]`` counts the rollouts the session selected (see
    :func:`~pytest_gym_eval.reporting.summary.summarize`), ``adaptive`` how ``--gym-adaptive`` ran each dataset
    (judged on its confidence sequence). A ``--gym-replay`` recording that cannot be read fails
    the session (exit status 1) with the file and line in ``reason``.

    ``selections[dataset]`` is the part of each dataset the session selected (:mod:`pytest_gym_eval.tasks.selection`):
    the gates of one judged on a selection by name, marker or last outcome are shown but do not decide (with
    no other gate, pytest's own status holds, and ``reason`` says why the gates were not judged).

    ``policy`` gives each dataset's pass threshold and gates (keyed by dataset name) when they do not come
    from ``options`` and the dataset files (``python -m pytest_gym_eval merge`` takes them from the reports).

    ``quarantine`` (``--gym-quarantine``): the rollouts of a task an active entry names are left out of the
    summaries and gates (``selected`` must already leave them out); ``Conclusion.quarantined`` says which, which
    entries expired, and which name no task of the run (its rollouts' and ``known_tasks``, ``(dataset, task id)``:
    every task collected, a selection may leave some out), and ``reason`` counts them.

    ``not_counted[dataset]``: the line saying which test functions' rollouts its statistics left out
    (:meth:`~pytest_gym_eval.session.results.ResultsCollector.not_counted`), shown with its summary.
    ``tests_run`` (node ids without parametrization of the test functions that reported; None: keep every gate)
    drops each ``gym_rollouts`` mark's gate none of whose declaring tests ran (:func:`marks_of_tests_run`).
    """
    held: list[rpt.RolloutResult] = []
    tasks = {(r.dataset, str(r.task_id)) for r in results} | set(known_tasks)
    if quarantine is not None:
        results, held = split_gated(results, quarantine)
    datasets = list(dict.fromkeys([*(r.dataset for r in results), *(selected or {})]))
    thresholds, gates = dataset_policy(options, datasets) if policy is None else policy
    if tests_run is not None:
        gates = marks_of_tests_run(gates, options, tests_run)
    summaries = rpt.summarize(
        results,
        thresholds=thresholds,
        gates=gates,
        mode=options.gate_mode,
        selected=selected,
        price=options.price,
        adaptive=adaptive,
    )
    if selections:
        summaries = [replace(s, selection=selections.get(s.dataset)) for s in summaries]
    if not_counted:
        summaries = [replace(s, not_counted=not_counted.get(s.dataset, "")) for s in summaries]
    summaries = label_policies(summaries, [policy.name for policy in options.policies], results)
    comparisons = bl.compare_to_baseline(baseline, results) if baseline is not None else []
    policies = policy_comparisons(results, options, selections, adaptive)
    if options.familywise is not None:  # one family: every gate that can fail the session
        summaries, policies = familywise_session(summaries, policies, 0.95)
    flips, replay_error = None, ""
    if options.replay:
        from pytest_gym_eval.replay import RecordingError

        try:
            flips = find_flips(results, options.replay)
        except RecordingError as error:  # the comparison asked for cannot be made: that fails the session
            replay_error = f"--gym-replay: {error}"

    verdicts = gate_verdicts(
        summaries, policies, comparisons if baseline is not None else (), flips,
        inconclusive_passes=options.inconclusive_passes, max_drop=options.max_drop,
        max_regressed_tasks=options.max_regressed_tasks, fail_on_flip=options.fail_on_flip, replay_error=replay_error,
    )  # fmt: skip
    status, reason = session_status(verdicts, summaries)  # the verdict list decides; the reason words it
    if status == -1:  # no gate decides: pytest's own status holds
        reason = _not_judged(summaries)
    concluded = Conclusion(summaries, comparisons, flips, status, reason, policies=policies, verdicts=verdicts)
    return _quarantined(concluded, quarantine, held, tasks)


def policy_comparisons(
    results: Sequence[rpt.RolloutResult],
    options: GymOptions,
    selections: Mapping[str, Selection] | None = None,
    adaptive: Mapping[tuple[str, str | None], AdaptiveRecord] | None = None,
) -> tuple[PolicyComparison, ...]:
    """With two or more ``--gym-policy``, each candidate against the baseline per dataset
    (:func:`~pytest_gym_eval.reporting.policies.compare_policies`), ``--gym-max-regression`` judged as
    non-inferiority and ``--gym-min-improvement`` as superiority, each at its margin; a dataset judged on a
    selection by name, marker or last outcome does not decide (as its other gates). Empty in a session with one
    policy. ``adaptive`` (``--gym-adaptive``, keyed as :func:`conclude`'s): a dataset whose every policy's group ran
    the same sequential waves is judged on the paired confidence sequence of those waves."""
    gates = options.comparison_gates()
    by_dataset: dict[str, list[AdaptiveRecord]] = {}
    for (dataset, _), record in (adaptive or {}).items():
        by_dataset.setdefault(dataset, []).append(record)
    joint = {
        dataset: records[0]
        for dataset, records in by_dataset.items()
        if all(r.sequential and r.ends == records[0].ends for r in records)
    }
    found = compare_policies(results, [policy.name for policy in options.policies], gates, adaptive=joint)
    biased = {name for name, part in (selections or {}).items() if part.biased}
    return tuple(replace(item, decides=item.dataset not in biased) for item in found)


def _quarantined(
    conclusion: Conclusion,
    quarantine: Quarantine | None,
    held: Sequence[rpt.RolloutResult],
    tasks: set[tuple[str, str]],
) -> Conclusion:
    """``conclusion`` with the quarantine's lines (each applied entry: the task, its rollouts and passes, the
    expiry and reason; each expired entry: gated again; each entry naming no task of the run's ``tasks``, ``(dataset,
    task id)``: a warning naming the datasets there are) and, when a task was held out, ``reason`` counting them."""
    if quarantine is None:
        return conclusion
    lines = []
    for entry in quarantine.active:
        rollouts = [r for r in held if entry.matches(r.dataset, str(r.task_id))]
        if not rollouts:
            continue
        passed = sum(1 for r in rollouts if r.status == "passed")
        names = ", ".join(dict.fromkeys(r.dataset for r in rollouts))
        lines.append(
            f"quarantined: task {entry.task_id} of {names} ({passed} of {len(rollouts)} rollouts passed) left out "
            f"of the gates until {entry.expires.isoformat()}: {entry.reason} [{entry.source}]"
        )
    lines += [
        f"quarantine expired {entry.expires.isoformat()}: task {entry.task_id} of {entry.dataset} is gated again "
        f"[{entry.source}]"
        for entry in quarantine.expired
    ]
    datasets = sorted({dataset for dataset, _ in tasks})
    lines += [f"quarantine warning: {unmatched_warning(entry, datasets)}" for entry in unmatched(quarantine, tasks)]
    reason = conclusion.reason
    count = len({(r.dataset, str(r.task_id)) for r in held})
    if count and reason:
        reason = f"{reason} ({count} quarantined task{'s' if count != 1 else ''} left out of the gates)"
    return replace(conclusion, reason=reason, quarantined=tuple(lines))


def _not_judged(summaries: Sequence[rpt.DatasetSummary]) -> str:
    """Why gated datasets' gates did not decide (each was judged on a selection by name, marker or last outcome),
    "" when none."""
    parts = [f"{s.title} {s.selection.describe()}" for s in summaries if s.gates and not s.gates_decide and s.selection]
    return "gym gates: not judged on the whole dataset, the items decide: " + "; ".join(parts) if parts else ""
