"""The rollout a test function asserts on (:class:`Rollout`, public: ``from pytest_gym_eval import Rollout``), its
tool calls (:class:`ToolCall`), and what a test function's parametrization asks the session to roll out
(:class:`RolloutRequest`). Pure: built from a parsed Gym record (a dict), no pytest and no session here.

How a test gets one: docs/hooks-and-api.md ("Rollouts in test functions").
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pytest_gym_eval.outcomes.custom_metrics import check_name, metric_reason, metric_value
from pytest_gym_eval.outcomes.outcome import output_text
from pytest_gym_eval.outcomes.usage import Usage, record_usage
from pytest_gym_eval.tasks.dataset import Task

RolloutStatus = Literal["passed", "failed", "error"]
"""What the plugin concluded of a rollout, in the words of its reports: ``passed`` (the verifier's reward reached the
dataset's pass threshold), ``failed`` (a reward below it), ``error`` (no verdict: Gym failed the rollout, it never
came, or its reward is unusable)."""

NOT_VERIFIER_FIELDS = frozenset({"responses_create_params", "response", "reward", "agent_ref", "ng_perf"})
"""Keys of a Gym record that are the request, the response, the reward or Gym's bookkeeping (with every ``_ng_``
key), not what the verifier recorded."""


def _json_or_text(value: Any) -> Any:
    """A tool call's arguments or output: the parsed JSON when ``value`` is a JSON text, else ``value`` as is."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


@dataclass(frozen=True)
class ToolCall:
    """One tool call of a rollout (a ``function_call`` item of the response) and the result it got back.

    ``arguments`` and ``result`` are parsed JSON when the record holds them as JSON text (as the Responses API
    does), else as recorded; ``result`` is None when no ``function_call_output`` answered the call.
    """

    name: str
    arguments: Any
    call_id: str | None = None
    result: Any = None


def tool_calls(output: list[dict[str, Any]]) -> tuple[ToolCall, ...]:
    """The tool calls among a response's ``output`` items, in order, each with the output of the
    ``function_call_output`` item of the same ``call_id``."""
    results = {item.get("call_id"): item.get("output") for item in output if item.get("type") == "function_call_output"}
    return tuple(
        ToolCall(
            str(item.get("name", "")),
            _json_or_text(item.get("arguments")),
            item.get("call_id"),
            _json_or_text(results.get(item.get("call_id"))),
        )
        for item in output
        if item.get("type") == "function_call"
    )


@dataclass(frozen=True)
class Rollout:
    """One rollout of one task, as a test function gets it from the ``gym_rollout`` fixture.

    - ``task_id``, ``repeat`` (0-based), ``agent``: what was rolled out; ``dataset``: the dataset's name as the
      reports show it (its path relative to the rootdir); ``row``: the dataset row (a dict, as in the file).
    - ``status`` (:data:`RolloutStatus`) and ``reward`` (the verifier's, a float; None for an error).
    - ``output``: the response's output items (dicts in the OpenAI Responses layout: messages, function calls,
      their outputs, reasoning); ``output_text``: the text of the model's last message ('' when there is none);
      ``tool_calls``: the :class:`ToolCall` items in order, with their results.
    - ``usage``: the policy model's tokens summed over the rollout and its latency in seconds
      (:class:`~pytest_gym_eval.outcomes.usage.Usage`; None where Gym recorded nothing); also as ``input_tokens``,
      ``output_tokens`` and ``latency``.
    - ``verifier_fields``: what the record holds beside the request, the response, the reward and Gym's own
      stamps (mcqa: ``expected_answer``, ``extracted_answer``); ``record``: the whole Gym record.
    - ``record_path``/``record_line``: where the record is (1-based line of Gym's output file); None when it is
      in no file.
    - ``metrics``: the custom metrics this test recorded for the rollout (:meth:`record_metric`), name -> value;
      ``metric_reasons``: the reasons given with them, name -> text.
    """

    task_id: str
    repeat: int
    status: RolloutStatus
    reward: float | None
    row: dict[str, Any]
    output: list[dict[str, Any]]
    output_text: str
    tool_calls: tuple[ToolCall, ...]
    usage: Usage
    verifier_fields: dict[str, Any]
    record: dict[str, Any] = field(repr=False)
    record_path: Path | None = None
    record_line: int | None = None
    agent: str = ""
    dataset: str = ""
    metrics: dict[str, float] = field(default_factory=dict, compare=False)
    metric_reasons: dict[str, str] = field(default_factory=dict, compare=False)
    recorder: Callable[[str, float, str | None], None] | None = field(default=None, repr=False, compare=False)
    """Where :meth:`record_metric` sends a metric: name, value and reason (None: no reason, "" takes back an
    earlier one); the ``gym_rollout`` fixture sets it. None: nowhere."""
    failed_expectations: list[str] | None = field(default=None, repr=False, compare=False)
    """Where :meth:`expect` notes a failed expectation (the ``gym_rollout`` fixture sets it to the test's list, which
    fails the test at its end); None: :meth:`expect` raises at once."""

    def expect(
        self, condition: object, message: str = "", *, metric: str | None = None, reason: str | None = None
    ) -> bool:
        """A soft expectation: note whether ``condition`` holds and go on, e.g. ``rollout.expect("\\boxed" in
        rollout.output_text, "no boxed answer", metric="boxed")``. Every expectation runs, and so does every
        ``record_metric`` after it; once the test function has returned, the test fails listing each failed
        expectation's ``message``, as an assertion would have, but after the rest of the
        test had its say. With ``metric``, also records the metric ``metric`` as 1.0 (held) or 0.0 (see
        :meth:`record_metric`), so the expectation's pass rate is a gateable metric; the metric's reason is
        ``reason`` when given, else ``message`` when the expectation failed (a held one has none). Returns whether
        it held. Outside a ``gym_rollout`` test a failed expectation raises AssertionError at once."""
        held = bool(condition)
        if metric is not None:
            if reason is None and not held:
                reason = message or "expectation failed"
            self.record_metric(metric, held, reason=reason)
        if not held:
            text = message or "expectation failed"
            if self.failed_expectations is None:
                raise AssertionError(text)
            self.failed_expectations.append(text)
        return held

    def record_metric(self, name: str, value: float | bool, reason: str | None = None) -> None:
        """Record a custom metric of this rollout, e.g. ``rollout.record_metric("boxed", 1.0)``.

        ``name``: a letter or ``_``, then up to 63 letters, digits, ``_``, ``.`` or ``-``. ``value``: a finite
        number (int, float, a numpy scalar), or a bool, recorded as 1.0/0.0. Recording a name again replaces its
        value (and its reason). ``reason``: why it has this value, a short text (``record_metric("terse", 0,
        reason="3 sentences, not 1")``): control characters become spaces and it is cut to 200 characters. The
        failure text of a failed test lists the metrics it recorded with their reasons, and the JSON report, JUnit
        and the HTML page's rollout view show each rollout's values and reasons. Each dataset's summary
        (terminal, JSON, JUnit, HTML, ``merge``) shows each metric's mean over the rollouts that recorded it, with
        the mean reward's interval (clustered by task), and ``--gym-min-metric=NAME:BOUND`` gates it. Raises
        TypeError for a value that is no number (or a name or reason that is no string), ValueError for NaN,
        infinity or a bad name, and RuntimeError for a rollout no ``gym_rollout`` fixture gave (nothing would
        report it).
        """
        number = metric_value(check_name(name), value)
        text = None if reason is None else metric_reason(name, reason)
        if self.recorder is None:
            raise RuntimeError(
                f"record_metric({name!r}): this rollout did not come from the gym_rollout fixture, so no report "
                "would carry the metric"
            )
        if text is None and name in self.metric_reasons:
            text = ""  # recorded again without a reason: the earlier one no longer holds
        self.recorder(name, number, text)
        self.metrics[name] = number
        if text:
            self.metric_reasons[name] = text
        else:
            self.metric_reasons.pop(name, None)

    @property
    def passed(self) -> bool:
        """Whether the reward reached the dataset's pass threshold."""
        return self.status == "passed"

    @property
    def input_tokens(self) -> int | None:
        return self.usage.input_tokens

    @property
    def output_tokens(self) -> int | None:
        return self.usage.output_tokens

    @property
    def latency(self) -> float | None:
        """Seconds from dispatch to result, when Gym recorded it (``ng_perf``); else None."""
        return self.usage.latency

    @classmethod
    def from_record(
        cls,
        record: Mapping[str, Any],
        *,
        task_id: str,
        repeat: int,
        status: RolloutStatus,
        reward: float | None,
        row: Mapping[str, Any] | None = None,
        agent: str = "",
        dataset: str = "",
        record_path: Path | None = None,
        record_line: int | None = None,
    ) -> Rollout:
        """The rollout of one parsed Gym ``record`` (a line of Gym's output or failures file, or the answer of an
        environment server's ``/run``) with the verdict on it (``status``, ``reward``). Never raises for a record
        of any shape: what is missing is empty (no output, '' text, no tool calls, no usage)."""
        response = record.get("response")
        raw_output = response.get("output") if isinstance(response, Mapping) else None
        output = [item for item in raw_output if isinstance(item, dict)] if isinstance(raw_output, list) else []
        verifier = {
            key: value for key, value in record.items() if key not in NOT_VERIFIER_FIELDS and not key.startswith("_ng_")
        }
        return cls(
            task_id=task_id,
            repeat=repeat,
            status=status,
            reward=reward,
            row=dict(row or {}),
            output=output,
            output_text=output_text(dict(record)),
            tool_calls=tool_calls(output),
            usage=record_usage(record),
            verifier_fields=verifier,
            record=dict(record),
            record_path=record_path,
            record_line=record_line,
            agent=agent,
            dataset=dataset,
        )


@dataclass(frozen=True)
class RolloutRequest:
    """One (task, repeat) pair of a dataset that a test function's ``gym_rollouts`` mark asks for: the value of its
    ``gym_rollout`` parametrization, which collection plans into the session's one ``gym eval run``.

    ``dataset`` is the dataset's name (its path relative to the rootdir, as in a dataset item's node id), ``path``
    the file, ``agent`` the agent it is rolled out by. ``dataset_tasks`` holds every task id of the dataset (for
    ``--gym-shard``, whose rule sees the whole set); ``counted`` whether the pair counts in the dataset's statistics
    (a pair beyond the dataset's own repeats does not, unless the mark says ``count=True``); ``min_metric`` the
    ``(custom metric, minimum mean)`` gates the test's mark declares for the dataset.
    """

    dataset: str
    path: Path
    task: Task
    repeat: int
    agent: str
    dataset_tasks: tuple[str, ...] = field(default=(), compare=False, repr=False)
    counted: bool = True
    """Whether the pair counts in the dataset's statistics
    (:func:`pytest_gym_eval.session.results.counts_in_dataset`)."""
    min_metric: tuple[tuple[str, float], ...] = field(default=(), compare=False, repr=False)

    @property
    def task_id(self) -> str:
        return self.task.task_id

    @property
    def nodeid(self) -> str:
        """The node id the dataset's own item for this pair has (``<dataset>::<task>[r<k>]``): the pair is
        planned under it, so a pair a dataset item and a test function both need is rolled out once."""
        return f"{self.dataset}::{self.task.task_id}[r{self.repeat}]"

    @property
    def test_id(self) -> str:
        """The parametrization id a test function shows for it: ``<task>-r<k>`` (``test_x[mcqa-001-r0]``)."""
        return f"{self.task.task_id}-r{self.repeat}"

    def planned_row(self) -> tuple[str, Path, int, str, int, str]:
        """The pair as a planned row: ``(nodeid, dataset path, line, task id, repeat, agent)``."""
        return (self.nodeid, self.path, self.task.line, self.task.task_id, self.repeat, self.agent)
