"""``--gym-adaptive``: the waves a run rolls out, decided one after another, and the log every process reads.

The run's owner (the only process, or the pytest-xdist controller) plans wave 1 from the session's plan, runs it
with one ``gym eval run``, judges every gated dataset on the confidence sequence of
:mod:`pytest_gym_eval.stats.sequential`, and plans the next wave from the datasets still undecided, until none is left
or every dataset reached its ceiling (``--gym-repeats``). Each wave ``k`` rolls out repeats ``ends[k-1]`` to
``ends[k] - 1`` of every task of every undecided dataset (:func:`~pytest_gym_eval.stats.sequential.wave_ends`);
datasets that cannot be judged sequentially (no gates, a selection that is not every task's repeats 0..R-1, a
``pytest_gym_eval_rollout_passed`` hook with pass-rate or pass@k gates) roll out whole in wave 1.

Comparing policy models (``--gym-policy``, :class:`Comparing`), the groups of one dataset (one per policy) move
together, a *joint* dataset: every wave holds the same (task, repeat) pairs of every policy (interleaved in Gym's
input, since the plan's stamps alternate between policies), each candidate's comparison gates are judged on the
:class:`~pytest_gym_eval.stats.comparison.PairedSequence` of its differences from the baseline, every policy's own
reward gates on its :class:`~pytest_gym_eval.stats.sequential.GateSequences`, and the dataset stops only when every
gate that exists (each policy's own, each candidate's comparison gates) is decided, or at the ceiling.

The wave log (``waves.jsonl`` in the run directory) is how every process learns what happens, appended one JSON
line at a time by the owner:

- ``{"wave": k, "output": PATH, "failures": PATH, "rollouts": N}`` when wave k starts (wave 1 writes Gym's usual
  ``gym-output/rollouts.jsonl``; wave k >= 2 ``gym-output/wave-k/rollouts.jsonl``): the rollout feed of every
  process follows those files from then on;
- ``{"group": [DATASET, AGENT or null], "waves": N, "ends": [...], "sequential": bool, "reason": TEXT, "note":
  TEXT, "skip": [STAMPS]}`` when a dataset (or one agent of it) stops: the rollouts it will never need, and why
  (items of those stamps are reported as skipped with the reason; the conclusion judges the group on the waves
  in ``ends``).
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pytest_gym_eval.core.files import iter_json_lines
from pytest_gym_eval.core.rundir import RunPaths
from pytest_gym_eval.gym.feed import parse_record
from pytest_gym_eval.stats import comparison
from pytest_gym_eval.stats.comparison import ComparisonGate, ComparisonResult, Key, PairedSequence
from pytest_gym_eval.stats.gates import Gate, GateResult
from pytest_gym_eval.stats.sequential import AdaptiveRecord, GateSequences, RewardRange, decided, reason, wave_ends
from pytest_gym_eval.tasks.models import policy_of
from pytest_gym_eval.tasks.plan import PlannedRollout, RunPlan

NOT_NEEDED = "not needed: "
"""How every reason a rollout was skipped begins."""
GroupKey = tuple[str, "str | None"]
"""(dataset, agent), the agent None when the dataset's rollouts use one agent (as the summaries group them)."""


def dataset_of(rollout: PlannedRollout) -> str:
    """The dataset part of a planned rollout's node id (its name in every report)."""
    return rollout.nodeid.split("::", 1)[0]


@dataclass(frozen=True)
class GroupPolicy:
    """What the planner needs to know of one dataset: its gates, pass threshold and reward range."""

    gates: tuple[Gate, ...]
    threshold: float
    reward_range: RewardRange = field(default_factory=RewardRange)


@dataclass(frozen=True)
class Comparing:
    """A session comparing policy models: their names, the baseline first (two or more), and the comparison gates
    (:func:`~pytest_gym_eval.stats.comparison.comparison_gates`; may be empty)."""

    policies: tuple[str, ...]
    gates: tuple[ComparisonGate, ...] = ()


@dataclass
class _Group:
    key: GroupKey
    policy: GroupPolicy
    rollouts: list[PlannedRollout]
    ends: list[int] | None  # None: not sequential (rolls out whole in wave 1)
    done: int = 0  # waves of ``ends`` rolled out
    stopped: bool = False
    sequences: GateSequences | None = None
    whole: bool = False  # left the sequence (a reward outside the range): the rest rolls out in the next wave
    waves: int = 0  # waves it took part in
    note: str = ""  # why it is not judged sequentially
    joint: bool = False  # moves with the other policies' groups of its dataset (a _Joint)
    results: list[GateResult] = field(default_factory=list)  # its own gates after the last wave


@dataclass
class _Joint:
    """One dataset of a session comparing policies: its groups, baseline first, and a sequence per candidate."""

    dataset: str
    members: list[tuple[str, _Group]]  # (policy, its group), the baseline first
    sequences: dict[str, PairedSequence]  # candidate -> its paired sequence against the baseline
    results: dict[str, list[ComparisonResult]] = field(default_factory=dict)


@dataclass(frozen=True)
class Wave:
    """One wave: its number (from 1), the rollouts it asks Gym for, and its input and output files."""

    number: int
    plan: RunPlan
    input: Path
    output: Path
    failures: Path


def group_rollouts(plan: RunPlan) -> dict[GroupKey, list[PlannedRollout]]:
    """The plan's rollouts by (dataset, agent or None), datasets and agents in first-seen order."""
    agents: dict[str, dict[str, None]] = {}
    for rollout in plan.rollouts:
        agents.setdefault(dataset_of(rollout), {})[rollout.agent] = None
    groups: dict[GroupKey, list[PlannedRollout]] = {}
    for rollout in plan.rollouts:
        dataset = dataset_of(rollout)
        key = (dataset, rollout.agent if len(agents[dataset]) > 1 else None)
        groups.setdefault(key, []).append(rollout)
    return groups


def rectangular(rollouts: Sequence[PlannedRollout]) -> int | None:
    """R when every task of ``rollouts`` has exactly the repeats 0..R-1, else None."""
    repeats: dict[str, set[int]] = {}
    for rollout in rollouts:
        repeats.setdefault(rollout.task_id, set()).add(rollout.repeat)
    sizes = {len(found) for found in repeats.values()}
    if len(sizes) != 1:
        return None
    size = sizes.pop()
    return size if all(found == set(range(size)) for found in repeats.values()) else None


class WavePlanner:
    """Plans the waves of one run (owner side). ``policies`` gives each dataset's gates and range (datasets
    missing there have none); ``min_repeats`` is the first wave's repeats per task; ``pass_hook`` says whether a
    ``pytest_gym_eval_rollout_passed`` hook decides passes (then pass-rate and pass@k gates cannot be judged
    here, and their datasets roll out whole); ``root`` is the run directory. ``on_event`` gets one-line notes.
    ``comparing`` (``--gym-policy``) makes each dataset's groups one joint dataset (module docstring); its
    ``policies`` name the plan's agent instances (:func:`~pytest_gym_eval.tasks.models.policy_of`).
    """

    def __init__(
        self,
        plan: RunPlan,
        policies: Mapping[str, GroupPolicy],
        min_repeats: int,
        root: Path,
        *,
        pass_hook: bool = False,
        on_event: Callable[[str], None] = lambda message: None,
        comparing: Comparing | None = None,
    ) -> None:
        self.root = root
        self.log = RunPaths(root).waves
        self.on_event = on_event
        self.groups: list[_Group] = []
        self.joints: list[_Joint] = []
        self.wave = 0
        self._lock = threading.Lock()
        self._judging = threading.RLock()  # judging a wave and planning the next: one thread at a time
        self._judged = 0  # the last wave judged
        compared = bool(comparing and comparing.gates)
        for key, rollouts in group_rollouts(plan).items():
            policy = policies.get(key[0], GroupPolicy((), 1.0))
            size = rectangular(rollouts)
            hooked = pass_hook and any(gate.kind.uses_passes for gate in policy.gates)
            fixed = any(gate.kind.wave_values is None for gate in policy.gates)  # no confidence sequence
            gated = bool(policy.gates) or compared
            ends = wave_ends(min(min_repeats, size), size) if gated and size and not (hooked or fixed) else None
            group = _Group(key, policy, sorted(rollouts, key=lambda r: (r.repeat, r.stamp)), ends)
            if not gated:
                group.note = "no gates"
            elif not size:
                group.note = "the selection is not repeats 0..R-1 of every task"
            elif hooked:
                group.note = "a pytest_gym_eval_rollout_passed hook decides passes"
            elif fixed:
                group.note = "a gate is judged on its fixed-sample interval only"
            if ends is not None:
                group.sequences = GateSequences(policy.gates, policy.reward_range)
            self.groups.append(group)
        if comparing is not None:
            self._join(comparing, policies)

    def _join(self, comparing: Comparing, policies: Mapping[str, GroupPolicy]) -> None:
        """Make each dataset's groups, one per policy, a :class:`_Joint`; when they cannot move together (a policy
        with no group or several, different tasks or repeats, a group that cannot be judged sequentially) every
        group of the dataset rolls out whole in wave 1."""
        by_dataset: dict[str, list[_Group]] = {}
        for group in self.groups:
            by_dataset.setdefault(group.key[0], []).append(group)
        for dataset, groups in by_dataset.items():
            named = [(policy_of(g.key[1] or "", comparing.policies), g) for g in groups]
            members = [next((g for name, g in named if name == p), None) for p in comparing.policies]
            pairs = [{(r.task_id, r.repeat) for r in g.rollouts} for g in groups]
            if not any(g.ends is not None for g in groups):
                continue  # no gates anywhere (or none can be judged): whole, as without policies
            why = ""
            if len(groups) != len(comparing.policies) or any(m is None for m in members):
                why = "a policy has no rollouts of the dataset, or several agents'"
            elif any(p != pairs[0] for p in pairs):
                why = "the policies were selected different (task, repeat) pairs"
            elif any(g.ends is None for g in groups):
                why = next(g.note for g in groups if g.ends is None)
            if why:
                for group in groups:
                    group.ends, group.sequences, group.note = None, None, why
                continue
            reward_range = policies.get(dataset, GroupPolicy((), 1.0)).reward_range
            ordered = [(p, m) for p, m in zip(comparing.policies, members, strict=True) if m is not None]
            sequences = {p: PairedSequence(comparing.gates, reward_range=reward_range) for p, _ in ordered[1:]}
            for _, group in ordered:
                group.joint = True
            self.joints.append(_Joint(dataset, ordered, sequences if comparing.gates else {}))

    def _paths(self, number: int) -> tuple[Path, Path, Path]:
        """Gym's input, output and failures files of wave ``number`` (wave 1: the run's usual ones)."""
        paths = RunPaths(self.root)
        if number == 1:
            return paths.input, paths.output, paths.failures
        folder = paths.wave_output(number)
        return paths.wave_input(number), folder / paths.output.name, folder / paths.failures.name

    def _append(self, entry: Mapping[str, object]) -> None:
        with self._lock, self.log.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(entry) + "\n")
            handle.flush()
            os.fsync(handle.fileno())

    def first(self) -> Wave | None:
        """Wave 1: every group's first segment, and every rollout of the groups judged without waves."""
        return self._next()

    def _next(self) -> Wave | None:
        chosen: list[PlannedRollout] = []
        for group in self.groups:
            if group.stopped:
                continue
            if group.ends is None:
                if self.wave == 0 or group.whole:
                    chosen += group.rollouts
                    group.waves += 1
                continue
            start = group.ends[group.done - 1] if group.done else 0
            end = group.ends[group.done]
            chosen += [r for r in group.rollouts if start <= r.repeat < end]
            group.waves += 1
        if not chosen:
            return None
        self.wave += 1
        wave_input, output, failures = self._paths(self.wave)
        output.parent.mkdir(parents=True, exist_ok=True)
        plan = RunPlan(tuple(sorted(chosen, key=lambda r: r.stamp)))
        self._append({"wave": self.wave, "output": str(output), "failures": str(failures), "rollouts": len(chosen)})
        return Wave(self.wave, plan, wave_input, output, failures)

    def after(self, wave: Wave) -> Wave | None:
        """Judge every group that took part in ``wave`` (:meth:`judge`) and return the next wave (None when every
        group is done)."""
        with self._judging:
            self.judge(wave)
            return self._next()

    def judge(self, wave: Wave) -> None:
        """Judge every group that took part in ``wave`` from the files Gym wrote and log the groups that stop (and
        the rollouts they skip): on the confidence sequences, the last wave (the ceiling) like every other, so
        every group that ends there gets its entry too. Once per wave (a second call does nothing), and safe
        from two threads: the session's end judges the last wave itself once every rollout of it is in
        (:meth:`~pytest_gym_eval.gym.run.GymRun.judge_last_wave`), since ``gym eval run`` may still be exiting when
        the reports are written."""
        with self._judging:
            if wave.number <= self._judged:
                return
            self._judged = wave.number
            self._judge_wave()

    def _judge_wave(self) -> None:
        found = self._records()
        judged: set[int] = set()  # the groups of the joint datasets judged here (they left the loop below)
        for joint in self.joints:
            if not joint.members[0][1].stopped and joint.members[0][1].ends is not None:
                judged.update(id(group) for _, group in joint.members)
                self._judge_joint(joint, found)
        for group in self.groups:
            if group.stopped or id(group) in judged:
                continue
            if group.ends is None:
                self._stop(group, [], sequential=False, why="")
                continue
            group.done += 1
            self._judge(group, found)

    def _records(self) -> dict[int, float | None]:
        """Every stamp Gym wrote so far, in any wave: its numeric reward, or None (a failure, no usable reward)."""
        found: dict[int, float | None] = {}
        for number in range(1, self.wave + 1):
            _, output, failures = self._paths(number)
            for path, is_failure in ((output, False), (failures, True)):
                try:
                    lines = path.read_bytes().splitlines()
                except FileNotFoundError:
                    continue
                for index, raw in enumerate(lines, 1):
                    record = parse_record(raw, path, index, is_failure)
                    if record is not None and (record.stamp not in found or found[record.stamp] is None):
                        found[record.stamp] = record.numeric_reward()
        return found

    def _judge(self, group: _Group, found: Mapping[int, float | None]) -> None:
        assert group.ends is not None and group.sequences is not None
        end = group.ends[group.done - 1]
        asked = [r for r in group.rollouts if r.repeat < end]
        errored = [r for r in asked if found.get(r.stamp) is None]
        if errored:
            why = (
                f"not needed: {len(errored)} rollout{'s' if len(errored) != 1 else ''} errored, which fails the "
                "dataset's gates"
            )
            self._stop(group, [r for r in group.rollouts if r.repeat >= end], sequential=True, why=why)
            return
        rewards: dict[str, list[float]] = {}
        for rollout in asked:
            value = found[rollout.stamp]
            assert value is not None
            rewards.setdefault(rollout.task_id, []).append(value)
        if any(not group.policy.reward_range.contains(v) for task in rewards.values() for v in task):
            # The sequence needs the declared range: the rest rolls out whole, judged as without --gym-adaptive.
            self.on_event(
                f"{_title(group.key)}: a reward lies outside {group.policy.reward_range}; the rest rolls out whole "
                "(declare the range with reward_range=LO:HI or --gym-reward-range)"
            )
            group.ends, group.sequences, group.whole = None, None, True
            group.note = f"a reward lies outside the declared range {group.policy.reward_range}"
            group.rollouts = [r for r in group.rollouts if r.repeat >= end]
            if not group.rollouts:
                self._stop(group, [], sequential=False, why="")
            return
        tasks = list(rewards.values())
        passed = [[value >= group.policy.threshold for value in task] for task in tasks]
        results = group.sequences.add_wave(tasks, passed, end)
        if decided(results):
            why = reason(results, end) if end < group.ends[-1] else ""
            self.on_event(f"{_title(group.key)}: {reason(results, end)[len('not needed: ') :]}")
            self._stop(group, [r for r in group.rollouts if r.repeat >= end], sequential=True, why=why)
        elif group.done == len(group.ends):
            self._stop(group, [], sequential=True, why="")

    def _judge_joint(self, joint: _Joint, found: Mapping[int, float | None]) -> None:
        """Judge one wave of a joint dataset: every policy's own gates and every candidate's comparison gates; stop
        every group when all are decided (or at the ceiling). An errored rollout or a reward outside the range
        leaves the sequences: the rest of every policy rolls out whole in the next wave, judged at the end on the
        fixed-sample intervals."""
        groups = [group for _, group in joint.members]
        for group in groups:
            group.done += 1
        first = groups[0]
        assert first.ends is not None
        end = first.ends[first.done - 1]
        rewards: dict[str, dict[Key, float]] = {}
        problem = ""
        for policy, group in joint.members:
            side = rewards.setdefault(policy, {})
            for rollout in group.rollouts:
                if rollout.repeat >= end:
                    continue
                value = found.get(rollout.stamp)
                if value is None:
                    problem = problem or "a rollout errored"
                elif not group.policy.reward_range.contains(value):
                    problem = problem or f"a reward lies outside the declared range {group.policy.reward_range}"
                else:
                    side[(rollout.task_id, rollout.repeat)] = value
        if problem:
            self.on_event(f"{joint.dataset}: {problem}; the rest of every policy rolls out whole")
            for group in groups:
                group.ends, group.sequences, group.whole, group.note = None, None, True, problem
                group.rollouts = [r for r in group.rollouts if r.repeat >= end]
                if not group.rollouts:
                    self._stop(group, [], sequential=False, why="")
            return
        parts = []
        for policy, group in joint.members:
            if group.sequences is None or not group.sequences.gates:
                continue
            tasks: dict[str, list[float]] = {}
            for (task, _), value in sorted(rewards[policy].items(), key=lambda item: item[0][1]):
                tasks.setdefault(task, []).append(value)
            values = list(tasks.values())
            passed = [[value >= group.policy.threshold for value in task] for task in values]
            group.results = group.sequences.add_wave(values, passed, end)
            parts.append(f"{policy}: {reason(group.results, end).removeprefix(NOT_NEEDED)}")
        baseline = joint.members[0][0]
        for candidate, sequence in joint.sequences.items():
            joint.results[candidate] = sequence.add_wave(rewards[baseline], rewards[candidate], end)
            text = comparison.reason(joint.results[candidate], end).removeprefix(NOT_NEEDED)
            parts.append(f"{candidate} vs {baseline}: {text}")
        own = [group.results for group in groups if group.sequences is not None and group.sequences.gates]
        if all(decided(results) for results in own) and all(map(comparison.decided, joint.results.values())):
            why = NOT_NEEDED + "; ".join(parts) if end < first.ends[-1] else ""
            self.on_event(f"{joint.dataset}: {'; '.join(parts)}")
            for group in groups:
                self._stop(group, [r for r in group.rollouts if r.repeat >= end], sequential=True, why=why)
        elif first.done == len(first.ends):
            for group in groups:
                self._stop(group, [], sequential=True, why="")

    def _stop(self, group: _Group, skipped: Sequence[PlannedRollout], *, sequential: bool, why: str) -> None:
        group.stopped = True
        ends = group.ends[: group.done] if group.ends is not None else []
        entry = {
            "group": list(group.key), "waves": group.waves, "ends": ends, "sequential": sequential, "reason": why,
            "note": group.note,
        }  # fmt: skip
        self._append({**entry, "skip": [r.stamp for r in skipped]})


def _title(key: GroupKey) -> str:
    return key[0] if key[1] is None else f"{key[0]} (agent {key[1]})"


@dataclass
class WaveLog:
    """What a wave log says: ``waves`` started, each stopped group's entry, and the reason per skipped stamp."""

    waves: int = 0
    groups: dict[GroupKey, dict[str, object]] = field(default_factory=dict)
    skipped: dict[int, str] = field(default_factory=dict)

    @classmethod
    def read(cls, path: Path) -> WaveLog:
        """Read a wave log (an empty log when the file does not exist; unreadable lines are passed over)."""
        log = cls()
        try:
            entries = [entry for _, entry in iter_json_lines(path, skip_invalid=True)]
        except FileNotFoundError:
            return log
        for entry in entries:
            if not isinstance(entry, dict):
                continue
            if isinstance(entry.get("wave"), int):
                log.waves = max(log.waves, entry["wave"])
            group = entry.get("group")
            if isinstance(group, list) and len(group) == 2:
                log.groups[(str(group[0]), None if group[1] is None else str(group[1]))] = entry
                why = str(entry.get("reason") or "not needed")
                log.skipped.update((s, why) for s in entry.get("skip") or () if isinstance(s, int))
        return log

    def records(self, plan: RunPlan, ranges: Callable[[str], RewardRange]) -> dict[GroupKey, AdaptiveRecord]:
        """Each group's :class:`~pytest_gym_eval.stats.sequential.AdaptiveRecord`: its waves, the rollouts they asked
        for against every selected pair; ``ranges(dataset)`` gives a dataset's declared reward range."""
        records = {}
        for key, rollouts in group_rollouts(plan).items():
            entry = self.groups.get(key)
            if entry is None:
                continue
            ends = tuple(int(e) for e in entry.get("ends") or () if isinstance(e, int))  # type: ignore[attr-defined]
            asked = sum(1 for r in rollouts if r.stamp not in self.skipped)
            waves = entry.get("waves")
            records[key] = AdaptiveRecord(
                waves=waves if isinstance(waves, int) else len(ends),
                ends=ends,
                sequential=bool(entry.get("sequential")) and bool(ends),
                reward_range=ranges(key[0]),
                reason=str(entry.get("reason") or ""),
                rollouts=asked,
                ceiling=len(rollouts),
                note=str(entry.get("note") or ""),
                max_repeats=rectangular(rollouts) or 0,
            )
        return records
