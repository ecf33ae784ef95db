"""Tokens, latency and cost of rollouts: read from Gym's rollout records, summed and ranked per dataset.

:func:`record_usage` (its docstring: what Gym 0.7.0 records per rollout, and why latency is never guessed),
:class:`Price` (cost only from prices the user gives), :func:`token_totals`, :func:`latency_summary`, and
:class:`SideUsage` with :func:`ratio` (one policy's usage in a comparison of policies, candidate over baseline), and
:func:`judge_usage`/:func:`judge_tokens` (the judge model's tokens, apart from the policy's). What
users see: docs/gates-and-statistics.md, docs/models.md.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any


@dataclass(frozen=True, slots=True)
class Usage:
    """What one rollout record says about tokens and time; None where it says nothing.

    Token counts are the policy model's, summed over the rollout's model calls; ``latency`` is seconds; the
    ``judge_*`` counts are the judge model's (:func:`judge_usage`), apart from the policy's.
    """

    input_tokens: int | None = None
    output_tokens: int | None = None
    total_tokens: int | None = None
    latency: float | None = None
    judge_input_tokens: int | None = None
    judge_output_tokens: int | None = None
    judge_total_tokens: int | None = None

    @property
    def is_empty(self) -> bool:
        return self == NO_USAGE

    @property
    def judge(self) -> Usage:
        """The judge's tokens as a :class:`Usage` of their own (no latency); :data:`NO_USAGE` when none is known."""
        counts = (self.judge_input_tokens, self.judge_output_tokens, self.judge_total_tokens)
        return NO_USAGE if counts == (None, None, None) else Usage(*counts)

    def properties(self) -> list[tuple[str, object]]:
        """``(name, value)`` pairs for an item's ``user_properties`` (JUnit testcase properties, and how the
        xdist controller learns them): ``input_tokens``, ``output_tokens``, ``total_tokens``, ``latency``
        (seconds), ``judge_input_tokens``, ``judge_output_tokens``, ``judge_total_tokens``, each only when known."""
        pairs: list[tuple[str, object]] = []
        for name in _PROPERTIES:
            value = getattr(self, name)
            if value is not None:
                pairs.append((name, value))
        return pairs


NO_USAGE = Usage()
_PROPERTIES = (
    "input_tokens", "output_tokens", "total_tokens", "latency",
    "judge_input_tokens", "judge_output_tokens", "judge_total_tokens",
)  # fmt: skip
"""The :meth:`Usage.properties` names, in the order of :class:`Usage`'s fields."""


def _count(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if not math.isfinite(value) or value < 0 or value != int(value):
        return None
    return int(value)


def record_usage(record: Mapping[str, Any]) -> Usage:
    """The :class:`Usage` of one Gym rollout record (a parsed line of Gym's output or failures file): the policy's
    (:func:`policy_usage`) with the judge's tokens (:func:`judge_usage`) beside them. Never raises."""
    usage = policy_usage(record)
    judge = judge_usage(record)
    if judge is NO_USAGE:
        return usage
    counts = (judge.input_tokens, judge.output_tokens, judge.total_tokens)
    return replace(usage, judge_input_tokens=counts[0], judge_output_tokens=counts[1], judge_total_tokens=counts[2])


def policy_usage(record: Mapping[str, Any]) -> Usage:
    """The policy's :class:`Usage` in one Gym rollout record.

    Tokens come from ``response.usage`` (``input_tokens``/``output_tokens``/``total_tokens``, or the chat
    layout's ``prompt_tokens``/``completion_tokens``); a missing total is the sum of the two others when both are
    known. Latency is ``ng_perf.total_latency_ms`` / 1000. Values that are not non-negative whole numbers (or a
    finite non-negative latency) are ignored. Never raises for a record of any shape.

    What Gym 0.7.0 records, per rollout line of its output file:

    - ``response.usage``: the policy model's token counts in the OpenAI Responses layout (``input_tokens``,
      ``output_tokens``, ``total_tokens``). Gym's simple agents add up the usage of every model call of a
      multi-turn rollout into the final response (``accumulate_response_usage``), so this is the rollout's total.
      A chat-completions layout (``prompt_tokens``, ``completion_tokens``) is read too.
    - ``ng_perf.total_latency_ms``: the rollout's wall time from dispatch to result, written by Gym only when its
      model-call observability is on (``observability_enabled``). Without it the plugin reports no latency: the
      start of a rollout is nowhere in Gym's files, and the time its line lands says nothing about when it started
      (Gym runs rollouts concurrently), so it is not guessed.
    """
    response = record.get("response")
    usage = response.get("usage") if isinstance(response, Mapping) else None
    input_tokens = output_tokens = total_tokens = None
    if isinstance(usage, Mapping):
        input_tokens = _count(usage.get("input_tokens", usage.get("prompt_tokens")))
        output_tokens = _count(usage.get("output_tokens", usage.get("completion_tokens")))
        total_tokens = _count(usage.get("total_tokens"))
        if total_tokens is None and input_tokens is not None and output_tokens is not None:
            total_tokens = input_tokens + output_tokens
    latency = None
    perf = record.get("ng_perf")
    if isinstance(perf, Mapping):
        millis = perf.get("total_latency_ms")
        if isinstance(millis, (int, float)) and not isinstance(millis, bool) and math.isfinite(millis) and millis >= 0:
            latency = float(millis) / 1000.0
    if input_tokens is None and output_tokens is None and total_tokens is None and latency is None:
        return NO_USAGE
    return Usage(input_tokens, output_tokens, total_tokens, latency)


JUDGE_EVALUATIONS = "judge_evaluations"
"""The rollout record's key of the list of judge calls its verifier made (equivalence_llm_judge, math_with_judge,
xstest, ...)."""
ONE_JUDGE_EVALUATION = "judge_evaluation"
"""The ending of a rollout record's key holding one judge call (an object, null when none was made): Gym 0.7.0's
over_refusal_detection, jailbreak_detection and aegis_v4_safety write ``judge_evaluation``, jailbreak_detection
also ``quality_judge_evaluation``, bbq ``answer_judge_evaluation`` and ``explanation_judge_evaluation``."""


def single_judge_keys(record: Mapping[str, Any]) -> list[str]:
    """The keys of ``record`` (a Gym rollout record) that hold one judge call each: every key ending in
    :data:`ONE_JUDGE_EVALUATION` whose value is an object, sorted. Never raises."""
    return sorted(
        key for key, value in record.items()
        if isinstance(key, str) and key.endswith(ONE_JUDGE_EVALUATION) and isinstance(value, Mapping)
    )  # fmt: skip


def judge_calls(record: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The judge calls one Gym rollout record holds, as objects with a ``response``: each object of its
    ``judge_evaluations`` list, then the object of each :func:`single_judge_keys` key. Never raises."""
    evaluations = record.get(JUDGE_EVALUATIONS)
    found = [e for e in evaluations if isinstance(e, Mapping)] if isinstance(evaluations, list) else []
    return found + [record[key] for key in single_judge_keys(record)]


def judge_usage(record: Mapping[str, Any]) -> Usage:
    """The judge model's tokens in one Gym rollout record: :func:`policy_usage` of the ``response`` of each judge
    call it holds (:func:`judge_calls`: the elements of ``judge_evaluations``, as about 16 of Gym 0.7.0's resources
    servers record them, and the one call of a ``judge_evaluation`` key, as over_refusal_detection records it),
    summed; no latency. A count is summed over the calls that give it (a call recorded through chat completions by
    Gym may carry none, a failed one has no response). :data:`NO_USAGE` when the record has no judge call with a
    count. Never raises for a record of any shape. Apart from the policy's :func:`policy_usage`, which counts the
    rollout's ``response`` only; :func:`record_usage` gives both."""
    usages = [policy_usage(call) for call in judge_calls(record)]
    totals = token_totals(usages)
    if not totals.rollouts:
        return NO_USAGE

    def known(name: str) -> int | None:
        counts = [getattr(usage, name) for usage in usages if getattr(usage, name) is not None]
        return sum(counts) if counts else None

    return Usage(known("input_tokens"), known("output_tokens"), known("total_tokens"))


def judge_tokens(records: Mapping[str, Iterable[Mapping[str, Any]]]) -> dict[str, TokenTotals]:
    """The judge's token totals per dataset: ``records`` maps a dataset to its rollout records (parsed lines of
    Gym's rollouts file), and each dataset gets :func:`token_totals` of their :func:`judge_usage` (``rollouts``
    counts the rollouts whose judge calls gave a count). To show beside the policy's tokens, never added to them.
    """
    return {dataset: token_totals(judge_usage(record) for record in rows) for dataset, rows in records.items()}


@dataclass(frozen=True)
class Price:
    """Prices per million tokens the user gave (``--gym-price-per-mtok IN:OUT``), in their currency.

    Cost is computed only from prices the user gives (``--gym-price-per-mtok IN:OUT``, in currency units per
    million tokens); there is no built-in price list.
    """

    input_per_mtok: float
    output_per_mtok: float

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        """``input_tokens * IN / 1e6 + output_tokens * OUT / 1e6`` (the currency of the prices)."""
        return input_tokens * self.input_per_mtok / 1e6 + output_tokens * self.output_per_mtok / 1e6

    def meta(self) -> dict[str, object]:
        """``price_per_mtok.input`` and ``price_per_mtok.output`` for the report's meta and JUnit suite."""
        return {"price_per_mtok.input": self.input_per_mtok, "price_per_mtok.output": self.output_per_mtok}


def parse_price(text: str, where: str = "--gym-price-per-mtok") -> Price:
    """``"IN:OUT"`` (e.g. ``0.15:0.60``) as a :class:`Price`; raises ValueError naming ``where`` when either part
    is not a finite number >= 0."""
    first, sep, second = text.partition(":")
    try:
        prices = (float(first), float(second)) if sep else None
    except ValueError:
        prices = None
    if prices is None or not all(math.isfinite(p) and p >= 0 for p in prices):
        raise ValueError(f"{where}: expected IN:OUT prices per million tokens (numbers >= 0), got {text!r}")
    return Price(*prices)


@dataclass(frozen=True)
class TokenTotals:
    """Token sums over a group of rollouts: ``rollouts`` counts those whose record gave any token count; each
    sum is over the rollouts that gave that count (so ``input + output`` may differ from ``total`` when a
    record lacks one of them)."""

    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    rollouts: int = 0

    def cost(self, price: Price | None) -> float | None:
        """The estimated cost at ``price`` (None without prices or without any token count)."""
        if price is None or not self.rollouts:
            return None
        return price.cost(self.input_tokens, self.output_tokens)


def token_totals(usages: Iterable[Usage]) -> TokenTotals:
    """Sum the token counts of ``usages`` (see :class:`TokenTotals`)."""
    totals = [0, 0, 0]
    counted = 0
    for usage in usages:
        values = (usage.input_tokens, usage.output_tokens, usage.total_tokens)
        if all(value is None for value in values):
            continue
        counted += 1
        for index, value in enumerate(values):
            if value is not None:
                totals[index] += value
    return TokenTotals(totals[0], totals[1], totals[2], rollouts=counted)


@dataclass(frozen=True)
class LatencySummary:
    """Median and 95th percentile (seconds) of ``n`` rollout latencies; nan when ``n`` is 0."""

    median: float
    p95: float
    n: int


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0 <= q <= 1) of ``values`` by linear interpolation between order statistics
    (Hyndman and Fan 1996, definition 7; numpy's default and ``statistics.quantiles(method="inclusive")``):
    with the sorted values ``x[0..n-1]``, ``h = (n - 1) q``, the result is ``x[⌊h⌋] + (h - ⌊h⌋)(x[⌊h⌋+1] - x[⌊h⌋])``.
    nan for no values; raises ValueError for ``q`` outside [0, 1]."""
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"q must be in [0, 1], got {q!r}")
    ordered = sorted(values)
    if not ordered:
        return math.nan
    h = (len(ordered) - 1) * q
    low = math.floor(h)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (h - low) * (ordered[high] - ordered[low])


def latency_summary(latencies: Iterable[float]) -> LatencySummary:
    """Median (:func:`statistics.median`) and p95 (:func:`percentile`) of the given latencies (seconds)."""
    values = [value for value in latencies if math.isfinite(value)]
    if not values:
        return LatencySummary(math.nan, math.nan, 0)
    return LatencySummary(statistics.median(values), percentile(values, 0.95), len(values))


def usage_from_properties(properties: Mapping[str, object]) -> Usage:
    """The :class:`Usage` an item's ``user_properties`` carry (as :meth:`Usage.properties` wrote them; values
    that are not numbers are ignored). This is how the pytest-xdist controller learns a worker's usage."""

    def number(name: str) -> float | None:
        value = properties.get(name)
        if isinstance(value, bool):
            return None
        if isinstance(value, (int, float)):
            return float(value)
        try:
            return float(str(value)) if value is not None else None
        except ValueError:
            return None

    counts = [number(name) for name in _PROPERTIES if name != "latency"]
    latency = number("latency")
    tokens = [int(value) if value is not None and math.isfinite(value) else None for value in counts]
    if all(value is None for value in tokens) and latency is None:
        return NO_USAGE
    return Usage(tokens[0], tokens[1], tokens[2], latency, tokens[3], tokens[4], tokens[5])


@dataclass(frozen=True)
class SideUsage:
    """One policy's tokens and latency in a comparison of policies (``--gym-policy``), over the rollouts of the
    comparison's pairs: ``tokens`` (:class:`TokenTotals`) and ``latency`` (:class:`LatencySummary`, seconds)."""

    tokens: TokenTotals = field(default_factory=TokenTotals)
    latency: LatencySummary = field(default_factory=lambda: latency_summary(()))

    @property
    def recorded(self) -> bool:
        """Whether any of its rollouts recorded a token count or a latency."""
        return bool(self.tokens.rollouts or self.latency.n)

    @property
    def tokens_per_rollout(self) -> float | None:
        """``tokens.total_tokens / tokens.rollouts``: the mean total tokens of a rollout that recorded a count;
        None when none did."""
        return self.tokens.total_tokens / self.tokens.rollouts if self.tokens.rollouts else None


def ratio(candidate: float | None, baseline: float | None) -> float | None:
    """``candidate / baseline`` (e.g. 1.25: the candidate uses a quarter more); None when either is None or not
    finite, or ``baseline`` is not above 0 (no ratio makes sense then)."""
    if candidate is None or baseline is None or not (math.isfinite(candidate) and math.isfinite(baseline)):
        return None
    return candidate / baseline if baseline > 0 else None
