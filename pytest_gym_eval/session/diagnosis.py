"""What an item's error says about its cause (:class:`Diagnosis`): the root cause of a rollout Gym recorded as
failed, what Gym was doing when a wait was given up, where the replay model logged a request it had no recording
for, and the long messages every pending item would repeat, shown whole once. The API key's value never gets out.
No pytest session here: it takes the options, the run directory, the feed and the plan as arguments."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from pytest_gym_eval.core.rundir import RunPaths
from pytest_gym_eval.gym.feed import Missing, RolloutFeed, RolloutRecord
from pytest_gym_eval.gym.processes import tail
from pytest_gym_eval.options.gym_options import GymOptions
from pytest_gym_eval.outcomes import causes
from pytest_gym_eval.outcomes.outcome import RolloutOutcome
from pytest_gym_eval.tasks.plan import RunPlan

STALL_LISTED = 5
"""Pending rollouts a stalled run's error message names (the rest are counted)."""


RECORD_HINT = (
    "to record it: run the dataset once against a live model with --gym-run-dir; that run's "
    'gym-output/rollouts.jsonl is a --gym-replay file (docs/replay.md, "Recording your own")'
)
"""The line after a ``replay_no_recording`` error: how to give the replay model an answer for the prompt."""
JUDGE_FAILED = "judge_failed"
"""Gym's failure class of a rollout whose verifier's judge call failed (``judge_failsafe``; its reward 0.0 is no
score): a replayed judge's request without a recording lands here."""
JUDGE_RECORD_HINT = (
    "to record the judge's answers: `python -m pytest_gym_eval judge-recordings ROLLOUTS.jsonl -o judge.jsonl` "
    "from a live run's rollouts, or `python -m pytest_gym_eval record` as the judge's endpoint; then "
    '--gym-replay=judge.jsonl (docs/models.md, "Judge recordings")'
)
"""The line after a replayed judge's miss: how to give the judge an answer for the request."""
BOUND_JUDGE_RECORD_HINT = (
    "to record the judge's answers: `python -m pytest_gym_eval judge-recordings ROLLOUTS.jsonl -o judge.jsonl` "
    "from a live run's rollouts; then --gym-model-server NAME=replay:judge.jsonl "
    '(docs/models.md, "Judge recordings")'
)
"""The line after the miss of a judge bound with ``--gym-model-server NAME=replay:FILE``."""


def bound_replay_miss_lines(misses: Mapping[str, Sequence[str]]) -> list[str]:
    """The session's closing warning for each ``--gym-model-server NAME=replay:FILE`` binding whose replay server
    answered some request with a 404 (``misses``: its :attr:`~pytest_gym_eval.replay.server.ReplayServer.misses`
    by ``NAME``): :func:`~pytest_gym_eval.replay.judge_recordings.judge_miss_summary`'s line and what it means for
    the rewards. Some verifiers score a failed judge call instead of failing the rollout (Gym 0.7.0's
    over_refusal_detection gives 0.5, "unclear"), so no rollout's error may name the miss."""
    from pytest_gym_eval.replay.judge_recordings import judge_miss_summary

    return [
        f"{summary}; a verifier that scores a failed judge call instead of failing the rollout gave those "
        "rollouts its fallback reward"
        for name in sorted(misses)
        if (summary := judge_miss_summary(name, misses[name])) is not None
    ]


FAILED_JUDGE_SHOWN = 300
"""Characters of the first failed judge call's error :func:`failed_judge_call_lines` shows."""


def failed_judge_call_lines(output: Path, secrets: Sequence[str] = ()) -> list[str]:
    """The session's closing warning when Gym's rollouts file ``output`` holds judge calls that failed (a judge
    call, :func:`~pytest_gym_eval.outcomes.usage.judge_calls`, with no ``response`` and an ``error``): how many of
    the calls, in how many rollouts, and the first error, through :func:`~pytest_gym_eval.outcomes.causes.redact`
    (``secrets`` too) and cut to :data:`FAILED_JUDGE_SHOWN` characters. Some verifiers score a failed judge call
    instead of failing the rollout (Gym 0.7.0's over_refusal_detection gives 0.5, "unclear"), so no rollout's
    error may say it: a live judge that could not be called at all would otherwise pass unnoticed. Empty when none
    failed or the file is missing; lines that are not JSON objects are skipped."""
    from pytest_gym_eval.core.files import iter_json_lines
    from pytest_gym_eval.outcomes.usage import judge_calls

    calls = failed = rollouts = 0
    first = ""
    try:
        for _, record in iter_json_lines(output, skip_invalid=True):
            if not isinstance(record, dict):
                continue
            judged = judge_calls(record)
            mine = [call for call in judged if call.get("response") is None and call.get("error")]
            calls += len(judged)
            failed += len(mine)
            rollouts += bool(mine)
            first = first or (str(mine[0]["error"]) if mine else "")
    except OSError:
        return []
    if not failed:
        return []
    shown = causes.redact(first, secrets)
    shown = shown if len(shown) <= FAILED_JUDGE_SHOWN else shown[:FAILED_JUDGE_SHOWN] + " ..."
    return [
        f"{failed} of {calls} judge calls in Gym's records failed ({rollouts} rollout{'s' if rollouts != 1 else ''}); "
        f"the first: {shown}; a verifier that scores a failed judge call instead of failing the rollout gave those "
        "rollouts its fallback reward"
    ]


class Diagnosis:
    """The error texts of one process's items; ``server_logs`` (Gym's servers' logs, read once asked)."""

    def __init__(self, options: GymOptions) -> None:
        self.options = options
        self.server_logs: causes.ServerLogs | None = None
        self._stall_lines: tuple[object, list[str]] | None = None
        self._start_failure_shown: str | None = None  # the node id whose error showed Gym's start failure
        self._errors_shown: dict[str, str] = {}  # a long error message -> the node id whose error showed it

    def start_failure(self, nodeid: str, message: str) -> str:
        """The text of an item that errored because Gym could not start: the whole ``message`` (with the log's
        last lines) on the first such item of this process, one line pointing to it on every other."""
        if self._start_failure_shown is None:
            self._start_failure_shown = nodeid
            return message
        first = message.splitlines()[0] if message else "Gym could not start"
        return f"{first} (the whole message and the log: the error of {self._start_failure_shown} above)"

    def error_once(self, nodeid: str, message: str) -> str:
        """The text of an item's error when Gym ended without its rollout (``gym_exited``: its servers crashed,
        and every pending rollout errors alike): the whole ``message`` on the first item of this process to show
        it, and when another item shows the same message of three lines or more, its first line and a pointer to
        the first item."""
        lines = message.splitlines()
        first_shown = self._errors_shown.setdefault(message, nodeid)
        if first_shown == nodeid or len(lines) < 3:
            return message
        return f"{lines[0]} (the whole message: the error of {first_shown} above)"

    def explain(self, record: RolloutRecord, run_dir: Path | None) -> causes.Cause:
        """The root cause of a rollout Gym recorded as failed, from its record and this run's server logs
        (:func:`pytest_gym_eval.outcomes.causes.diagnose`), with the API key's value redacted."""
        if self.server_logs is None and run_dir is not None:
            self.server_logs = causes.ServerLogs(RunPaths(run_dir).server_logs)
        try:
            full = record.read_full()
        except (OSError, ValueError):
            full = {}
        full.setdefault("_ng_failure_class", record.failure_class)
        if record.failure_message:
            full.setdefault("_ng_failure_message", record.failure_message)
        return causes.diagnose(full, self.server_logs, self.secrets())

    def secrets(self) -> tuple[str, ...]:
        key = os.environ.get(self.options.api_key_env)
        return (key,) if key else ()

    def error_context(
        self,
        found: RolloutRecord | Missing,
        outcome: RolloutOutcome,
        run_dir: Path | None,
        feed: RolloutFeed | None,
        plan: RunPlan,
    ) -> list[str]:
        """Lines that follow an error's own message: what Gym was doing when a wait was given up, where the
        replay model logged a request it had no recording for (for a rollout Gym recorded as ``judge_failed``, the
        judge's requests the replay model had no recording for: :func:`~pytest_gym_eval.replay.judge_recordings.
        judge_miss_summary`)."""
        if isinstance(found, Missing) and found.failure_class == causes.ROLLOUT_TIMEOUT:
            return self.stall_report(run_dir, feed, plan)
        judged = run_dir is not None and outcome.cause is not None and outcome.cause.failure_class == JUDGE_FAILED
        if judged and run_dir is not None and (lines := self.bound_judge_misses(run_dir)):
            return lines
        replaying = self.options.replay and self.options.head_server is None and run_dir is not None
        if not replaying or outcome.cause is None:
            return []
        assert run_dir is not None
        log = RunPaths(run_dir).replay_log
        if outcome.cause.failure_class == causes.REPLAY_NO_RECORDING:
            return [f"the replay model's requests: {log}", RECORD_HINT]
        if outcome.cause.failure_class == JUDGE_FAILED:  # the judge is the policy model: the same replay server
            from pytest_gym_eval.replay.judge_recordings import judge_miss_summary
            from pytest_gym_eval.replay.server import logged_misses

            summary = judge_miss_summary("policy_model", logged_misses(log))
            if summary is not None:
                return [summary, f"the replay model's requests: {log}", JUDGE_RECORD_HINT]
        if not outcome.cause.found:
            # Gym's wrapper alone: a prompt with no recording reaches Gym as the agent's HTTP 500.
            return [f"the replay model's requests: {log} (a 404 there: no recording matches the prompt)"]
        return []

    def bound_judge_misses(self, run_dir: Path) -> list[str]:
        """For a ``judge_failed`` rollout: per ``NAME=replay:FILE`` binding (``--gym-model-server``, or a dataset's
        own ``model_server=``, then named as served: ``NAME__<environment>``) whose replay server
        had no recording for some request (its log, :meth:`RunPaths.model_server_replay_log`), the miss summary
        naming ``NAME`` (:func:`~pytest_gym_eval.replay.judge_recordings.judge_miss_summary`) and the log; then
        :data:`BOUND_JUDGE_RECORD_HINT`. Empty when no replayed binding missed (or none is replayed, or attached)."""
        if self.options.head_server is not None:
            return []
        from pytest_gym_eval.replay.judge_recordings import judge_miss_summary
        from pytest_gym_eval.replay.server import logged_misses

        lines = []
        prefix = RunPaths(run_dir).model_server_replay_log("")  # every replayed binding's, a dataset's own too
        for log in sorted(prefix.parent.glob(f"{prefix.stem}*{prefix.suffix}")):
            name = log.stem.removeprefix(prefix.stem)
            if (summary := judge_miss_summary(name, logged_misses(log))) is not None:
                lines += [summary, f"the replay model's requests: {log}"]
        return [*lines, BOUND_JUDGE_RECORD_HINT] if lines else []

    def stall_report(self, run_dir: Path | None, feed: RolloutFeed | None, plan: RunPlan) -> list[str]:
        """Which rollouts were still pending when the run stalled and what Gym was doing then: the last
        progress ``gym eval run`` logged, its servers' last retries (computed once per stall)."""
        assert feed is not None
        stall = feed.stall
        if self._stall_lines is not None and self._stall_lines[0] is stall:
            return self._stall_lines[1]
        landed = feed.records()
        pending = [r.nodeid for r in plan.rollouts if r.stamp not in landed]
        lines = []
        if pending:
            shown = ", ".join(pending[:STALL_LISTED]) + (
                f" and {len(pending) - STALL_LISTED} more" if len(pending) > STALL_LISTED else ""
            )
            lines.append(f"still pending ({len(pending)} of {len(plan.rollouts)}): {shown}")
        if run_dir is not None:
            eval_log = RunPaths(run_dir).eval_log
            progress = causes.eval_progress(eval_log)
            if progress:
                lines.append(f"gym eval run's last progress: {progress}")
            else:
                last = tail(eval_log, 3)
                if last:
                    lines.append(f"last lines of {eval_log}:")
                    lines += [f"  {causes.redact(line, self.secrets())[:300]}" for line in last.splitlines()]
            if self.server_logs is None:
                self.server_logs = causes.ServerLogs(RunPaths(run_dir).server_logs)
            self.server_logs.refresh()
            activity = self.server_logs.recent_activity()
            if activity:
                lines.append("Gym's servers keep retrying:")
                lines += [f"  {causes.redact(line, self.secrets())}" for line in activity]
        self._stall_lines = (stall, lines)
        return lines
