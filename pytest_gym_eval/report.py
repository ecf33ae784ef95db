"""Summaries of a Gym evaluation: statistics per dataset, terminal text, a JSON report, a comparison with an
earlier report, and JUnit suite properties.

Everything here is a pure function of the per-rollout results (:class:`RolloutResult`) the plugin collects
from its items' reports; the plugin calls these at the end of the session. Rewards are whatever the verifier
returns (usually in [0, 1], not always); times are seconds. The statistics come from
:mod:`pytest_gym_eval.stats`, where the formulas are written out with their sources:

- mean reward: :func:`~pytest_gym_eval.stats.mean_interval`, Student t with a standard error clustered by
  task (CR1; Miller 2024, "Adding Error Bars to Evals", arXiv:2411.00640, §2);
- pass rate: :func:`~pytest_gym_eval.stats.wilson_interval`, the Wilson score interval (Wilson 1927);
- pass@k: :func:`~pytest_gym_eval.stats.pass_at_k_interval`, the unbiased estimator of Chen et al. 2021
  (arXiv:2107.03374, eq. 1) averaged over tasks, with a Student t interval over tasks;
- change against a baseline: :func:`~pytest_gym_eval.stats.paired_difference`, a paired t-test on per-task
  mean rewards (Student 1908; Miller 2024 §4).
"""

from __future__ import annotations

import json
import math
import os
import re
import textwrap
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_gym_eval.gates import Gate, GateMode, GateResult, Verdict, evaluate, metric_interval
from pytest_gym_eval.stats import (
    Interval,
    PairedComparison,
    paired_difference,
)

REPORT_SCHEMA_VERSION = 1
"""Version of the JSON report's layout (``schema_version``); :func:`load_report` reads only this one."""

SCHEMA_PATH = Path(__file__).with_name("report.schema.json")
"""The JSON Schema (draft 2020-12) of the report :func:`build_report` makes."""

DEFAULT_THRESHOLD = 1.0
"""Pass threshold of a dataset :func:`summarize` is given none for."""

MAX_LISTED = 10
"""Task ids listed (flaky tasks, dropped tasks) before "… and N more"."""

_MIN_WIDTH = 40
_LABEL_WIDTH = 11  # "mean reward", "flaky tasks"
_MAX_ID_CHARS = 40
_MAX_REASONS = 3
_SCORED_STATUSES = ("passed", "failed")


# --- Input ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RolloutResult:
    """One reported rollout item.

    ``status`` is "passed", "failed" or "error"; ``reward`` is the verifier's reward (None for an error);
    ``failure_class`` is Gym's ``_ng_failure_class`` or "missing"/"bad_reward" for an error; ``record`` is
    ``path:LINE`` of the full rollout record; ``start``/``stop`` are epoch seconds of the item's run (0.0 when
    unknown). A rollout is *scored* when it passed or failed with a finite reward; only scored rollouts enter
    the statistics.
    """

    nodeid: str
    dataset: str
    task_id: str
    repeat: int
    agent: str
    status: str
    reward: float | None
    failure_class: str | None = None
    record: str | None = None
    start: float = 0.0
    stop: float = 0.0

    @property
    def score(self) -> float | None:
        """The reward when the rollout is scored (passed or failed, finite reward), else None."""
        if self.status not in _SCORED_STATUSES or self.reward is None or not math.isfinite(self.reward):
            return None
        return self.reward


# --- Summaries --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DatasetSummary:
    """Statistics of one dataset's rollouts (or of one agent's, when a dataset has several agents).

    ``agent`` is None when all the dataset's rollouts used one agent. Counts: ``tasks`` distinct task ids,
    ``rollouts`` results, ``errors`` results with status "error", ``scored`` rollouts with a reward.
    ``mean_reward`` (reward units) and ``pass_rate`` are intervals over the scored rollouts; ``pass_at_k[k]``
    for k = 1..the most rollouts any task has; ``flaky_tasks`` the ids of tasks whose scored rollouts both
    passed and failed, in first-seen order; ``wall_time`` seconds from the first start to the last stop;
    ``threshold`` the pass threshold; ``confidence`` the level of every interval (0.95 → 95%);
    ``error_classes`` the number of errors by failure class ("unknown" when the result names none).
    """

    dataset: str
    agent: str | None
    tasks: int
    rollouts: int
    errors: int
    scored: int
    mean_reward: Interval
    pass_rate: Interval
    pass_at_k: dict[int, Interval]
    flaky_tasks: tuple[str, ...]
    wall_time: float
    gates: list[GateResult]
    threshold: float
    confidence: float = 0.95
    error_classes: dict[str, int] = field(default_factory=dict)

    @property
    def verdict(self) -> Verdict | None:
        """FAIL when any gate fails, else INCONCLUSIVE when any is inconclusive, else PASS; None without gates.

        :class:`~pytest_gym_eval.gates.Verdict` is a ``str`` enum, so this compares equal to "PASS" etc.
        """
        if not self.gates:
            return None
        verdicts = {result.verdict for result in self.gates}
        for verdict in (Verdict.FAIL, Verdict.INCONCLUSIVE):
            if verdict in verdicts:
                return verdict
        return Verdict.PASS

    @property
    def title(self) -> str:
        """``dataset``, or ``dataset (agent NAME)`` for one agent of a dataset with several."""
        return _title(self.dataset, self.agent)


def summarize(
    results: Sequence[RolloutResult],
    *,
    thresholds: Mapping[str, float],
    gates: Mapping[str, Sequence[Gate]],
    mode: GateMode,
    confidence: float = 0.95,
) -> list[DatasetSummary]:
    """One :class:`DatasetSummary` per dataset, or per (dataset, agent) when a dataset has several agents.

    ``thresholds`` and ``gates`` are keyed by dataset (as in the node ids); a dataset missing from them has
    threshold :data:`DEFAULT_THRESHOLD` and no gates. Gates are judged in ``mode`` by
    :func:`~pytest_gym_eval.gates.evaluate`. Datasets come in first-seen order, and agents within a dataset.
    Raises ValueError for a bad ``confidence``.
    """
    return [
        _summarize_group(
            dataset,
            agent,
            group,
            threshold=thresholds.get(dataset, DEFAULT_THRESHOLD),
            gates=gates.get(dataset, ()),
            mode=mode,
            confidence=confidence,
        )
        for (dataset, agent), group in _groups(results).items()
    ]


def _groups(results: Sequence[RolloutResult]) -> dict[tuple[str, str | None], list[RolloutResult]]:
    """Results keyed by (dataset, agent or None when the dataset has one agent), datasets first-seen."""
    agents: dict[str, dict[str, None]] = {}
    for result in results:
        agents.setdefault(result.dataset, {})[result.agent] = None
    groups: dict[tuple[str, str | None], list[RolloutResult]] = {}
    for dataset, names in agents.items():
        for agent in names:
            groups[(dataset, agent if len(names) > 1 else None)] = []
    for result in results:
        split = len(agents[result.dataset]) > 1
        groups[(result.dataset, result.agent if split else None)].append(result)
    return groups


def _by_task(results: Sequence[RolloutResult]) -> dict[str, list[RolloutResult]]:
    """Results keyed by task id (first-seen order), each task's sorted by repeat."""
    tasks: dict[str, list[RolloutResult]] = {}
    for result in results:
        tasks.setdefault(result.task_id, []).append(result)
    return {task: sorted(rollouts, key=lambda r: r.repeat) for task, rollouts in tasks.items()}


def _scores(rollouts: Sequence[RolloutResult]) -> tuple[list[float], list[bool]]:
    """Rewards and pass flags of the scored rollouts among ``rollouts``."""
    rewards: list[float] = []
    passed: list[bool] = []
    for rollout in rollouts:
        score = rollout.score
        if score is not None:
            rewards.append(score)
            passed.append(rollout.status == "passed")
    return rewards, passed


def _wall_time(results: Sequence[RolloutResult]) -> float:
    """Seconds from the first start to the last stop, over results with a known time (start > 0)."""
    timed = [r for r in results if r.start > 0.0 and r.stop >= r.start]
    if not timed:
        return 0.0
    return max(r.stop for r in timed) - min(r.start for r in timed)


def _count_error_classes(results: Sequence[RolloutResult]) -> dict[str, int]:
    """Errors by failure class ("unknown" when a result names none), in first-seen order."""
    counts: dict[str, int] = {}
    for result in results:
        if result.status == "error":
            name = result.failure_class or "unknown"
            counts[name] = counts.get(name, 0) + 1
    return counts


def _summarize_group(
    dataset: str,
    agent: str | None,
    results: Sequence[RolloutResult],
    *,
    threshold: float,
    gates: Sequence[Gate],
    mode: GateMode,
    confidence: float,
) -> DatasetSummary:
    tasks = _by_task(results)
    rewards_by_task: list[list[float]] = []
    passed_by_task: list[list[bool]] = []
    flaky: list[str] = []
    for task_id, rollouts in tasks.items():
        rewards, passed = _scores(rollouts)
        rewards_by_task.append(rewards)
        passed_by_task.append(passed)
        if any(passed) and not all(passed):
            flaky.append(task_id)
    counts = [(len(passed), sum(passed)) for passed in passed_by_task]
    error_classes = _count_error_classes(results)
    scored = sum(n for n, _ in counts)
    max_repeats = max(len(rollouts) for rollouts in tasks.values())
    return DatasetSummary(
        dataset=dataset,
        agent=agent,
        tasks=len(tasks),
        rollouts=len(results),
        errors=sum(error_classes.values()),
        scored=scored,
        mean_reward=metric_interval("mean_reward", rewards_by_task, counts, confidence),
        pass_rate=metric_interval("pass_rate", rewards_by_task, counts, confidence),
        pass_at_k={
            k: metric_interval("pass_at_k", rewards_by_task, counts, confidence, k) for k in range(1, max_repeats + 1)
        },
        flaky_tasks=tuple(flaky),
        wall_time=_wall_time(results),
        gates=evaluate(gates, rewards_by_task, passed_by_task, mode, confidence),
        threshold=threshold,
        confidence=confidence,
        error_classes=error_classes,
    )


# --- Session verdict --------------------------------------------------------------------------------------


def session_verdict(summaries: Sequence[DatasetSummary], *, inconclusive_passes: bool) -> tuple[int, str]:
    """The session's exit status under CI gates, and a one-line reason.

    (-1, "") when no summary has a gate (the caller keeps pytest's own status). Otherwise 0 when every gate
    passes (INCONCLUSIVE counts as passing when ``inconclusive_passes``) and no rollout errored in any
    dataset, else 1. Failed rollouts do not fail the session: only the gates judge rewards. Reasons look
    like ``gym gates: FAIL - datasets/mcqa.jsonl mean reward 0.80 < 0.90``, ``gym gates: 2 rollouts
    errored`` or ``gym gates: all 3 gates pass``.
    """
    judged = [(summary, result) for summary in summaries for result in summary.gates]
    if not judged:
        return -1, ""
    errors = sum(summary.errors for summary in summaries)
    failing = [(summary, result) for summary, result in judged if not result.passed(inconclusive_passes)]
    problems = [f"{summary.title} {_gate_brief(result)}" for summary, result in failing[:_MAX_REASONS]]
    if len(failing) > _MAX_REASONS:
        problems.append(f"and {len(failing) - _MAX_REASONS} more failing gates")
    if errors:
        problems.append(f"{_plural(errors, 'rollout')} errored")
    if failing:
        head = "FAIL" if any(result.verdict is Verdict.FAIL for _, result in failing) else "INCONCLUSIVE"
        return 1, f"gym gates: {head} - " + "; ".join(problems)
    if problems:
        return 1, "gym gates: " + "; ".join(problems)
    return 0, "gym gates: " + _all_pass(judged)


def _all_pass(judged: Sequence[tuple[DatasetSummary, GateResult]]) -> str:
    inconclusive = sum(1 for _, result in judged if result.verdict is Verdict.INCONCLUSIVE)
    text = "the gate passes" if len(judged) == 1 else f"all {len(judged)} gates pass"
    if inconclusive:
        text += f" ({inconclusive} inconclusive, counted as passing)"
    return text


def _gate_brief(result: GateResult) -> str:
    """A short reason a gate did not pass, e.g. ``mean reward 0.80 < 0.90``."""
    gate, interval = result.gate, result.interval
    threshold = _fmt_threshold(gate.threshold)
    if math.isnan(interval.estimate):
        return f"{gate.name} has no data (needs >= {threshold})"
    if result.mode is GateMode.POINT:
        return f"{gate.name} {_fmt(interval.estimate)} < {threshold}"
    if result.verdict is Verdict.FAIL:
        return f"{gate.name} {_fmt(interval.estimate)}, upper bound {_fmt(interval.high)} < {threshold}"
    return f"{gate.name} {_fmt_interval(interval)} straddles {threshold}"


# --- Terminal summary -------------------------------------------------------------------------------------


def render_summary(
    summaries: Sequence[DatasetSummary],
    *,
    verbose: bool,
    results: Sequence[RolloutResult] = (),
    width: int = 80,
) -> list[str]:
    """Body lines of the "gym reward summary" terminal section (the caller writes the section header).

    Per summary: the dataset (long paths shortened from the left with "…"), counts and wall time (when the
    results carry times), errors by failure class, mean reward, pass rate and pass@1..k each with its interval
    (infinite bounds print as "n/a"), flaky tasks, and each gate with the verdict; a blank line between
    summaries. ``verbose`` adds one row per task with the reward of each repeat in order ("ERR" for an error,
    "-" for a repeat not run), taken from ``results``. No line is longer than ``width`` (at least 40 is used).
    """
    width = max(width, _MIN_WIDTH)
    lines: list[str] = []
    for index, summary in enumerate(summaries):
        if index:
            lines.append("")
        lines.append(_heading(summary, width))
        lines.extend(_summary_lines(summary, width))
        if verbose:
            lines.extend(_task_rows(summary, results, width))
    return lines


def _heading(summary: DatasetSummary, width: int) -> str:
    suffix = "" if summary.agent is None else f" (agent {summary.agent})"
    path = _shorten_left(summary.dataset, max(width - len(suffix), width // 2))
    return _trim_end(path + suffix, width)


def _summary_lines(summary: DatasetSummary, width: int) -> list[str]:
    counts = (
        f"{_plural(summary.tasks, 'task')}, {_plural(summary.rollouts, 'rollout')} ({summary.scored} scored, "
        f"{_plural(summary.errors, 'error')})"
    )
    if summary.wall_time > 0.0:
        counts += f", wall time {_fmt_duration(summary.wall_time)}"
    lines = _wrap(counts, width, "  ", "    ")
    if summary.errors:
        lines += _field("errors", _errors_text(summary), width)
    lines += _field(
        "mean reward",
        f"{_fmt_interval(summary.mean_reward)}  {_fmt_percent(summary.confidence)} CI "
        f"over {_plural(summary.mean_reward.n, 'task')}",
        width,
    )
    lines += _field(
        "pass rate",
        f"{_fmt_interval(summary.pass_rate)}  Wilson, {_plural(summary.pass_rate.n, 'rollout')}, "
        f"threshold {_fmt_threshold(summary.threshold)}",
        width,
    )
    for k, interval in summary.pass_at_k.items():
        note = "" if interval.n == summary.mean_reward.n else f"  {_plural(interval.n, 'task')} with {k}+ scored"
        lines += _field(f"pass@{k}", _fmt_interval(interval) + note, width)
    lines += _field("flaky tasks", _flaky_text(summary), width)
    if summary.gates:
        lines += _field("gates", _gates_text(summary), width)
        for result in summary.gates:
            lines += _wrap(result.describe(), width, "    ", "      ")
        verdict = summary.verdict
        assert verdict is not None  # there are gates
        lines += _field("verdict", verdict.value, width)
    return lines


def _errors_text(summary: DatasetSummary) -> str:
    """``missing 2, bad_reward 1``: errors by failure class, most frequent first."""
    ranked = sorted(summary.error_classes.items(), key=lambda item: -item[1])
    return ", ".join(f"{name} {count}" for name, count in ranked)


def _flaky_text(summary: DatasetSummary) -> str:
    flaky = summary.flaky_tasks
    if not flaky:
        return "0"
    listed = ", ".join(_trim_middle(task, _MAX_ID_CHARS) for task in flaky[:MAX_LISTED])
    more = f", … and {len(flaky) - MAX_LISTED} more" if len(flaky) > MAX_LISTED else ""
    return f"{len(flaky)} of {summary.tasks}: {listed}{more}"


def _gates_text(summary: DatasetSummary) -> str:
    mode = summary.gates[0].mode
    judged = "on the estimate" if mode is GateMode.POINT else f"on the {_fmt_percent(summary.confidence)} interval"
    return f"{len(summary.gates)} judged {judged} ({mode.value} mode)"


def _task_rows(summary: DatasetSummary, results: Sequence[RolloutResult], width: int) -> list[str]:
    mine = [r for r in results if r.dataset == summary.dataset and (summary.agent is None or r.agent == summary.agent)]
    if not mine:
        return []
    cells = {task: _reward_cells(rollouts) for task, rollouts in _by_task(mine).items()}
    cell_width = max(len(cell) for row in cells.values() for cell in row)
    id_width = min(max(len(task) for task in cells), max(12, (width - 6) // 3))
    per_line = max(1, (width - id_width - 6 + 1) // (cell_width + 1))
    lines = _wrap("rewards by task (r0, r1, ...; ERR = error, - = not run)", width, "  ", "    ")
    for task, row in cells.items():
        padded = [cell.rjust(cell_width) for cell in row]
        head = f"    {_trim_middle(task, id_width):<{id_width}}  "
        for start in range(0, len(padded), per_line):
            prefix = head if start == 0 else " " * len(head)
            lines.append(prefix + " ".join(padded[start : start + per_line]))
    return lines


def _reward_cells(rollouts: Sequence[RolloutResult]) -> list[str]:
    """One cell per repeat 0..max: the reward, "ERR" for an error, "?" without a reward, "-" if not run."""
    by_repeat = {r.repeat: r for r in rollouts}
    cells: list[str] = []
    for repeat in range(max(by_repeat) + 1):
        rollout = by_repeat.get(repeat)
        if rollout is None:
            cells.append("-")
        elif rollout.status == "error":
            cells.append("ERR")
        elif rollout.reward is None:
            cells.append("?")
        else:
            cells.append(_fmt(rollout.reward))
    return cells


# --- JSON report ------------------------------------------------------------------------------------------


def build_report(
    summaries: Sequence[DatasetSummary], results: Sequence[RolloutResult], meta: Mapping[str, object]
) -> dict[str, Any]:
    """The JSON report: ``schema_version``, ``meta``, ``datasets`` (one per summary), ``rollouts`` (all).

    Its layout is described by ``report.schema.json`` (:data:`SCHEMA_PATH`). ``meta`` is free-form (gym
    version, checkout, model, dataset digests, created time, pytest args); values JSON cannot hold become
    strings. Non-finite numbers anywhere (infinite bounds, a nan estimate) become null.
    """
    return {
        "schema_version": REPORT_SCHEMA_VERSION,
        "meta": _json_safe(meta),
        "datasets": [_summary_json(summary) for summary in summaries],
        "rollouts": [_rollout_json(result) for result in results],
    }


def _summary_json(summary: DatasetSummary) -> dict[str, Any]:
    verdict = summary.verdict
    return {
        "dataset": summary.dataset,
        "agent": summary.agent,
        "tasks": summary.tasks,
        "rollouts": summary.rollouts,
        "errors": summary.errors,
        "scored": summary.scored,
        "threshold": _finite(summary.threshold),
        "confidence": summary.confidence,
        "mean_reward": _interval_json(summary.mean_reward),
        "pass_rate": _interval_json(summary.pass_rate),
        "pass_at_k": {str(k): _interval_json(interval) for k, interval in summary.pass_at_k.items()},
        "flaky_tasks": list(summary.flaky_tasks),
        "error_classes": dict(summary.error_classes),
        "wall_time": _finite(summary.wall_time),
        "gates": [_gate_json(result) for result in summary.gates],
        "verdict": None if verdict is None else verdict.value,
    }


def _interval_json(interval: Interval) -> dict[str, Any]:
    return {
        "estimate": _finite(interval.estimate),
        "low": _finite(interval.low),
        "high": _finite(interval.high),
        "n": interval.n,
    }


def _gate_json(result: GateResult) -> dict[str, Any]:
    return {
        "metric": result.gate.metric,
        "k": result.gate.k,
        "threshold": result.gate.threshold,
        "label": result.gate.label,
        **_interval_json(result.interval),
        "verdict": result.verdict.value,
        "mode": result.mode.value,
    }


def _rollout_json(result: RolloutResult) -> dict[str, Any]:
    return {
        "nodeid": result.nodeid,
        "dataset": result.dataset,
        "task_id": result.task_id,
        "repeat": result.repeat,
        "agent": result.agent,
        "status": result.status,
        "reward": None if result.reward is None else _finite(result.reward),
        "failure_class": result.failure_class,
        "record": result.record,
    }


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def _json_safe(value: object) -> Any:
    """``value`` as plain JSON data: non-finite floats → None, mappings → objects with string keys,
    sequences → lists, anything else that JSON has no type for → ``str(value)``."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return _finite(value)
    if isinstance(value, Mapping):
        return {str(key): _json_safe(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(item) for item in value]
    return str(value)


def write_report(path: str | os.PathLike[str], report: Mapping[str, Any]) -> None:
    """Write ``report`` as JSON (indent 2) to ``path`` atomically: a temporary file beside it, then a rename.

    Creates missing parent directories. Raises ValueError when ``report`` holds a non-finite number (use
    :func:`build_report`, which replaces them with null), OSError when the file cannot be written.
    """
    target = Path(path)
    text = json.dumps(report, indent=2, allow_nan=False, ensure_ascii=False) + "\n"
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = target.with_name(f".{target.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(temporary, "x", encoding="utf-8") as stream:
            stream.write(text)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, target)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def load_report(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a report :func:`write_report` wrote, e.g. as the baseline of :func:`compare_to_baseline`.

    Checks by hand the keys this module reads (not the whole schema): ``schema_version`` is
    :data:`REPORT_SCHEMA_VERSION`, ``datasets`` is a list and ``rollouts`` a list of objects with string
    ``dataset``, ``task_id`` and ``status`` and a numeric or null ``reward``. Raises ValueError naming the
    file when it is not valid JSON or fails those checks; OSError when it cannot be read.
    """
    source = Path(path)
    try:
        data = json.loads(source.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ValueError(f"{source}: not a valid JSON report: {error}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{source}: not a pytest-gym-eval report (the top level is not a JSON object)")
    version = data.get("schema_version")
    if isinstance(version, bool) or version != REPORT_SCHEMA_VERSION:
        raise ValueError(
            f"{source}: report schema_version {version!r} is not supported (this version reads {REPORT_SCHEMA_VERSION})"
        )
    if not isinstance(data.get("datasets"), list) or not isinstance(data.get("rollouts"), list):
        raise ValueError(f"{source}: not a pytest-gym-eval report (needs 'datasets' and 'rollouts' lists)")
    for index, rollout in enumerate(data["rollouts"]):
        problem = _rollout_problem(rollout)
        if problem is not None:
            raise ValueError(f"{source}: rollouts[{index}] {problem}")
    return data


def _rollout_problem(rollout: object) -> str | None:
    if not isinstance(rollout, dict):
        return "is not an object"
    for key in ("dataset", "task_id", "status"):
        if not isinstance(rollout.get(key), str):
            return f"has no string {key!r}"
    reward = rollout.get("reward")
    if reward is not None and (isinstance(reward, bool) or not isinstance(reward, (int, float))):
        return f"has a reward that is neither a number nor null: {reward!r}"
    return None


# --- Baseline comparison ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class BaselineComparison:
    """Per-task mean rewards of one dataset (one agent, when the dataset has several) now vs a baseline.

    ``shared_tasks`` counts the tasks both runs scored; ``comparison`` is the paired t-test of current minus
    baseline over those tasks (reward units); ``dropped`` lists ``(task_id, baseline mean, current mean)``
    for each shared task whose mean fell, largest fall first; ``confidence`` is the interval's level.
    """

    dataset: str
    agent: str | None
    shared_tasks: int
    comparison: PairedComparison
    dropped: list[tuple[str, float, float]]
    confidence: float = 0.95


def compare_to_baseline(
    baseline: Mapping[str, Any], results: Sequence[RolloutResult], *, confidence: float = 0.95
) -> list[BaselineComparison]:
    """Compare this run's per-task mean rewards with those of ``baseline`` (a report from :func:`load_report`).

    For each dataset of ``results`` (each (dataset, agent) when a dataset has several agents, grouped as by
    :func:`summarize`), the tasks are those with at least one scored rollout in both runs, matched by dataset
    and task id; each task's value is the mean of its scored rewards. The change is
    :func:`~pytest_gym_eval.stats.paired_difference`, a paired t-test on those per-task means (Student 1908;
    Miller 2024, "Adding Error Bars to Evals", arXiv:2411.00640, §4): pairing by task removes the variation
    between tasks' difficulty, so it is much more sensitive than comparing two independent means. A dataset
    the baseline lacks gets a comparison over 0 tasks. Raises ValueError when ``baseline`` has no
    ``rollouts`` list or ``confidence`` is bad.
    """
    before = _baseline_means(baseline)
    comparisons: list[BaselineComparison] = []
    for (dataset, agent), group in _groups(results).items():
        now = _task_means(group)
        shared = [task for task in now if (dataset, task) in before]
        old = [before[(dataset, task)] for task in shared]
        new = [now[task] for task in shared]
        dropped = [(task, b, c) for task, b, c in zip(shared, old, new, strict=True) if c < b]
        dropped.sort(key=lambda drop: drop[2] - drop[1])
        comparison = paired_difference(old, new, confidence)
        comparisons.append(BaselineComparison(dataset, agent, len(shared), comparison, dropped, confidence))
    return comparisons


def _task_means(results: Sequence[RolloutResult]) -> dict[str, float]:
    """Mean scored reward of each task with at least one scored rollout (first-seen order)."""
    means: dict[str, float] = {}
    for task, rollouts in _by_task(results).items():
        rewards, _ = _scores(rollouts)
        if rewards:
            means[task] = math.fsum(rewards) / len(rewards)
    return means


def _baseline_means(baseline: Mapping[str, Any]) -> dict[tuple[str, str], float]:
    """Mean scored reward per (dataset, task id) of a report's rollouts."""
    rollouts = baseline.get("rollouts")
    if not isinstance(rollouts, list):
        raise ValueError("the baseline report has no 'rollouts' list")
    rewards: dict[tuple[str, str], list[float]] = {}
    for rollout in rollouts:
        if not isinstance(rollout, Mapping) or rollout.get("status") not in _SCORED_STATUSES:
            continue
        reward = rollout.get("reward")
        if isinstance(reward, bool) or not isinstance(reward, (int, float)) or not math.isfinite(reward):
            continue
        key = (str(rollout.get("dataset")), str(rollout.get("task_id")))
        rewards.setdefault(key, []).append(float(reward))
    return {key: math.fsum(values) / len(values) for key, values in rewards.items()}


def _significant_drop(comparison: PairedComparison, max_drop: float) -> bool:
    return comparison.high < 0.0 and comparison.mean_difference < -max_drop


def max_drop_gate(comparisons: Sequence[BaselineComparison], max_drop: float) -> list[str]:
    """A failure line for each comparison whose mean reward fell significantly and by more than ``max_drop``.

    Significant: the upper bound of the interval of current - baseline is below 0; larger than ``max_drop``
    (reward units, >= 0): mean difference < -max_drop. An empty list means the gate passes. Raises
    ValueError when ``max_drop`` is negative or not finite.
    """
    if not math.isfinite(max_drop) or max_drop < 0.0:
        raise ValueError(f"max_drop must be a finite number >= 0, got {max_drop!r}")
    lines: list[str] = []
    for item in comparisons:
        paired = item.comparison
        if _significant_drop(paired, max_drop):
            lines.append(
                f"{_title(item.dataset, item.agent)}: mean reward fell {_fmt(-paired.mean_difference)} "
                f"vs the baseline (change {_fmt_change(paired)}, {_fmt_p(paired.p_value)}, "
                f"{_plural(paired.n, 'task')}), more than the allowed {_fmt_threshold(max_drop)}"
            )
    return lines


def render_baseline(comparisons: Sequence[BaselineComparison], width: int = 80) -> list[str]:
    """Terminal lines comparing with the baseline: per comparison the change of mean reward (current -
    baseline) with its interval and two-sided p-value, then the tasks whose mean fell (at most
    :data:`MAX_LISTED`, then "… and N more"). No line is longer than ``width`` (at least 40 is used)."""
    width = max(width, _MIN_WIDTH)
    lines: list[str] = []
    for index, item in enumerate(comparisons):
        if index:
            lines.append("")
        lines.append(_trim_end(_shorten_left(_title(item.dataset, item.agent), width - 12) + " vs baseline", width))
        lines.extend(_comparison_lines(item, width))
    return lines


def _comparison_lines(item: BaselineComparison, width: int) -> list[str]:
    paired = item.comparison
    if item.shared_tasks == 0:
        return _wrap("no task was scored in both runs", width, "  ", "    ")
    lines = _field(
        "change",
        f"{_fmt_change(paired)}  {_fmt_p(paired.p_value)}, paired t over {_plural(item.shared_tasks, 'task')}, "
        f"{_fmt_percent(item.confidence)} CI",
        width,
    )
    lines += _field("fell", f"{len(item.dropped)} of {_plural(item.shared_tasks, 'task')}", width)
    if not item.dropped:
        return lines
    shown = item.dropped[:MAX_LISTED]
    id_width = min(max(len(task) for task, _, _ in shown), max(12, width // 3))
    for task, before, after in shown:
        text = f"    {_trim_middle(task, id_width):<{id_width}}  {_fmt(before)} -> {_fmt(after)}"
        lines.append(_trim_end(text, width))
    if len(item.dropped) > MAX_LISTED:
        lines.append(f"    … and {len(item.dropped) - MAX_LISTED} more")
    return lines


# --- JUnit suite properties -------------------------------------------------------------------------------


def suite_properties(summaries: Sequence[DatasetSummary], meta: Mapping[str, object]) -> list[tuple[str, str]]:
    """(name, value) pairs for the JUnit XML ``<properties>`` of the test suite.

    First ``gym.<key>`` for each ``meta`` value that is a str, int or finite float; then per summary, with
    ``P = gym.<dataset>`` (``gym.<dataset>[<agent>]`` for one agent of several): ``P.tasks``, ``P.rollouts``,
    ``P.scored``, ``P.errors``, ``P.flaky_tasks`` (a count), ``P.wall_time`` (seconds), ``P.threshold``,
    ``P.mean_reward``, ``P.pass_rate`` and ``P.pass_at_<k>`` each with ``.low`` and ``.high``,
    ``P.gate.<label-slug>`` = verdict (e.g. ``P.gate.mean_reward_ge_0.70``) and ``P.verdict``. Numbers use
    6 significant digits; non-finite numbers (a nan estimate, infinite bounds) are left out.
    """
    properties: list[tuple[str, str]] = []
    for key, value in meta.items():
        text = _property_value(value)
        if text is not None:
            properties.append((f"gym.{key}", text))
    for summary in summaries:
        properties.extend(_summary_properties(summary))
    return properties


def _summary_properties(summary: DatasetSummary) -> list[tuple[str, str]]:
    prefix = f"gym.{summary.dataset}" if summary.agent is None else f"gym.{summary.dataset}[{summary.agent}]"
    pairs: list[tuple[str, object]] = [
        ("tasks", summary.tasks),
        ("rollouts", summary.rollouts),
        ("scored", summary.scored),
        ("errors", summary.errors),
        ("flaky_tasks", len(summary.flaky_tasks)),
        ("wall_time", summary.wall_time),
        ("threshold", summary.threshold),
    ]
    intervals = {"mean_reward": summary.mean_reward, "pass_rate": summary.pass_rate}
    intervals.update({f"pass_at_{k}": interval for k, interval in summary.pass_at_k.items()})
    for name, interval in intervals.items():
        pairs += [(name, interval.estimate), (f"{name}.low", interval.low), (f"{name}.high", interval.high)]
    pairs += [(f"gate.{_slug(result.gate.label)}", result.verdict.value) for result in summary.gates]
    if summary.verdict is not None:
        pairs.append(("verdict", summary.verdict.value))
    properties: list[tuple[str, str]] = []
    for name, value in pairs:
        text = _property_value(value)
        if text is not None:
            properties.append((f"{prefix}.{name}", text))
    return properties


def _property_value(value: object) -> str | None:
    """The property text of a str, int or finite float; None for anything else."""
    if isinstance(value, float):
        return format(value, ".6g") if math.isfinite(value) else None
    if isinstance(value, (str, int)):
        return str(value)
    return None


def _slug(label: str) -> str:
    """``mean reward >= 0.70`` → ``mean_reward_ge_0.70``; ``pass@4 >= 0.50`` → ``pass@4_ge_0.50``."""
    return re.sub(r"[^A-Za-z0-9.@]+", "_", label.replace(">=", "ge")).strip("_")


# --- Formatting -------------------------------------------------------------------------------------------


def _title(dataset: str, agent: str | None) -> str:
    return dataset if agent is None else f"{dataset} (agent {agent})"


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _fmt(value: float) -> str:
    """Two decimals like Gym's own summaries; 3 significant digits past a million; "n/a" when not finite."""
    if not math.isfinite(value):
        return "n/a"
    return f"{value:.2f}" if abs(value) < 1e6 else f"{value:.3g}"


def _fmt_interval(interval: Interval) -> str:
    """``0.80 [0.24, 1.36]``; infinite bounds print as n/a."""
    return f"{_fmt(interval.estimate)} [{_fmt(interval.low)}, {_fmt(interval.high)}]"


def _fmt_change(paired: PairedComparison) -> str:
    sign = "+" if math.isfinite(paired.mean_difference) and paired.mean_difference >= 0 else ""
    return f"{sign}{_fmt(paired.mean_difference)} [{_fmt(paired.low)}, {_fmt(paired.high)}]"


def _fmt_p(p_value: float) -> str:
    if math.isnan(p_value):
        return "p n/a"
    return "p < 0.001" if p_value < 0.001 else f"p = {p_value:.3f}"


def _fmt_threshold(value: float) -> str:
    """Two decimals unless that would hide digits (0.755 stays 0.755), as the gates' labels print them."""
    two = f"{value:.2f}"
    return two if float(two) == value else f"{value:.6g}"


def _fmt_percent(confidence: float) -> str:
    return f"{confidence * 100:.6g}%"


def _fmt_duration(seconds: float) -> str:
    """``12.3 s``, ``4m 05s`` or ``2h 03m``."""
    if seconds < 60.0:
        return f"{seconds:.1f} s"
    whole = round(seconds)
    if whole < 3600:
        return f"{whole // 60}m {whole % 60:02d}s"
    return f"{whole // 3600}h {whole % 3600 // 60:02d}m"


def _shorten_left(text: str, limit: int) -> str:
    """``text`` cut from the left to ``limit`` characters, marked with "…"."""
    return text if len(text) <= limit else "…" + text[len(text) - limit + 1 :]


def _trim_end(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _trim_middle(text: str, limit: int) -> str:
    """``text`` with its middle replaced by "…" to fit ``limit`` characters (keeps both ends of an id)."""
    if len(text) <= limit:
        return text
    head = (limit - 1) // 2
    tail = limit - 1 - head
    return text[:head] + "…" + text[len(text) - tail :]


def _wrap(text: str, width: int, indent: str, continuation: str) -> list[str]:
    return textwrap.wrap(
        text,
        width=width,
        initial_indent=indent,
        subsequent_indent=continuation,
        break_long_words=True,
        break_on_hyphens=False,
    )


def _field(label: str, value: str, width: int) -> list[str]:
    """``  label       value`` with the label in a fixed column, wrapped under the value to fit ``width``."""
    return _wrap(value, width, f"  {label:<{_LABEL_WIDTH}} ", " " * (_LABEL_WIDTH + 3))
