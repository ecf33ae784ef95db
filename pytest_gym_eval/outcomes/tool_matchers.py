"""Matchers for a rollout's tool calls (public: ``from pytest_gym_eval import call, expect_tool_calls``).

The question every team asks of a tool-calling rollout, "did it call X with arguments containing Y, in this order,
and nothing else?", as one assertion::

    assert rollout.tool_calls == expect_tool_calls(
        call("get_weather", {"city": "Paris"}),              # these arguments, others allowed
        call("send_email", {"to": "ana@example.com"}, exact=True, result={"sent": True}),
        ordered=True, only=True,
    )

A mismatch is explained by the plugin's ``pytest_assertrepr_compare`` hook (:func:`explain`): each expected call
with the actual call it matched, or why the closest one did not (name, a missing or different argument, an
argument it should not have, the result), and each unexpected call. Pure: no pytest, no session; a tool call is
anything with ``name``, ``arguments`` and ``result`` (:class:`pytest_gym_eval.ToolCall`).

How arguments match: with ``exact=False`` (the default) every expected key must be in the call's arguments with an
equal value, where a dict value is matched the same way, recursively, and any other value (a list, a string, a
number) must be equal; with ``exact=True`` the arguments must equal the expected ones. Equal means equal as JSON
values (:func:`same_json`): ``True`` does not equal ``1`` nor ``False`` ``0`` (Python's ``==`` says they do), in
lists and objects too; ``1`` and ``1.0`` are one JSON number. ``result``, when given, is
matched as arguments are (a dict: its keys, recursively; anything else: equal). Arguments that are not a JSON
object (a call whose arguments did not parse) match only ``exact=True`` with an equal value.

How calls match: with ``ordered=True`` the expected calls must match calls of the rollout in that order (other calls
may come between them unless ``only``); with ``ordered=False`` each expected call must match a different call, in
any order (a maximum bipartite matching, so that a greedy first match never hides a possible one). ``only=True``:
every call of the rollout must be matched.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

_MISSING = object()


class ToolCallLike(Protocol):
    """What a matcher reads of a tool call."""

    @property
    def name(self) -> str: ...

    @property
    def arguments(self) -> Any: ...

    @property
    def result(self) -> Any: ...


@dataclass(frozen=True, eq=False)
class ExpectedCall:
    """One expected tool call (made by :func:`call`): the tool's ``name``, the ``arguments`` it must have (None:
    any), ``exact`` (those arguments and no others), and the ``result`` it must have got (unset: any)."""

    name: str
    arguments: Mapping[str, Any] | None = None
    exact: bool = False
    result: Any = _MISSING

    def problems(self, actual: ToolCallLike) -> list[str]:
        """Why ``actual`` is not this call, in words ([] when it is)."""
        if actual.name != self.name:
            return [f"it calls {actual.name!r}, not {self.name!r}"]
        found: list[str] = []
        if self.arguments is not None:
            found += _differences(self.arguments, actual.arguments, exact=self.exact, where="argument")
        if self.result is not _MISSING:
            found += _differences(self.result, actual.result, exact=False, where="result")
        return found

    def __str__(self) -> str:
        shown = "" if self.arguments is None else ", ".join(f"{k}={v!r}" for k, v in self.arguments.items())
        text = f"{self.name}({shown}{', ...' if not self.exact and self.arguments is not None else ''})"
        if self.arguments is None:
            text = f"{self.name}(...)"
        if self.result is not _MISSING:
            text += f" -> {self.result!r}"
        return text


def call(
    name: str, arguments: Mapping[str, Any] | None = None, *, exact: bool = False, result: Any = _MISSING
) -> ExpectedCall:
    """An expected call of tool ``name``: with ``arguments`` (a dict; None: any arguments) that the actual call's
    must contain (``exact=False``, recursively into dict values) or equal (``exact=True``), and, when ``result`` is
    given, that result (matched as arguments are, containment for a dict). Raises TypeError for a name that is no
    string or arguments that are no mapping."""
    if not isinstance(name, str) or not name:
        raise TypeError(f"call(name, ...): the tool's name must be a non-empty string, got {name!r}")
    if arguments is not None and not isinstance(arguments, Mapping):
        raise TypeError(
            f"call({name!r}, arguments): arguments must be a dict of the call's arguments, got {arguments!r}"
        )
    return ExpectedCall(name, None if arguments is None else dict(arguments), exact, result)


def _differences(expected: Any, actual: Any, *, exact: bool, where: str, path: str = "") -> list[str]:
    """How ``actual`` fails to contain (or, ``exact``, to equal) ``expected``, one phrase each ([] when it does)."""
    label = f"{where} {path}" if path else where
    if isinstance(expected, Mapping) and not exact:
        if not isinstance(actual, Mapping):
            return [f"{label} is {actual!r}, not an object with {dict(expected)!r}"]
        found: list[str] = []
        for key, value in expected.items():
            inner = f"{path}.{key}" if path else str(key)
            if key not in actual:
                found.append(f"{where} {inner!r} is missing")
            else:
                found += _differences(value, actual[key], exact=False, where=where, path=inner)
        return found
    if isinstance(expected, Mapping) and isinstance(actual, Mapping):
        found = [f"{where} {k!r} is missing" for k in expected if k not in actual]
        found += [f"unexpected {where} {k!r}={actual[k]!r}" for k in actual if k not in expected]
        found += [
            f"{where} {k!r} is {actual[k]!r}, not {expected[k]!r}"
            for k in expected
            if k in actual and not same_json(expected[k], actual[k])
        ]
        return found
    if not same_json(expected, actual):
        return [f"{label if path else where} is {actual!r}, not {expected!r}"]
    return []


def same_json(expected: Any, actual: Any) -> bool:
    """Whether two values (parsed JSON, or what a test expects of it) are the same JSON value: ``==``, except that
    a bool equals only a bool (Python's ``True == 1`` and ``False == 0.0`` do not hold here), recursively through
    lists, tuples and mappings; an int and a float of one value are one JSON number (``1 == 1.0``)."""
    if isinstance(expected, bool) or isinstance(actual, bool):
        return isinstance(expected, bool) and isinstance(actual, bool) and expected == actual
    if isinstance(expected, Mapping) and isinstance(actual, Mapping):
        return expected.keys() == actual.keys() and all(same_json(expected[k], actual[k]) for k in expected)
    if isinstance(expected, (list, tuple)) and isinstance(actual, (list, tuple)):
        return len(expected) == len(actual) and all(same_json(e, a) for e, a in zip(expected, actual, strict=True))
    return bool(expected == actual)


@dataclass(frozen=True)
class MatchResult:
    """How expected calls met actual ones: ``pairs[i]`` the index of the actual call expected call i matched (None:
    none), ``unexpected`` the indices of actual calls nothing matched, and ``ok``."""

    pairs: tuple[int | None, ...]
    unexpected: tuple[int, ...]
    ok: bool


@dataclass(frozen=True, eq=False)
class ToolCallsExpectation:
    """The expected tool calls of a rollout (made by :func:`expect_tool_calls`); ``==`` against a rollout's
    ``tool_calls`` (a sequence) is True when they match. See the module's docstring for the rules."""

    calls: tuple[ExpectedCall, ...]
    ordered: bool = False
    only: bool = False

    def match(self, actual: Sequence[ToolCallLike]) -> MatchResult:
        """Match the expected calls against ``actual`` (the rollout's tool calls, in order)."""
        fits = [[not expected.problems(candidate) for candidate in actual] for expected in self.calls]
        pairs = _ordered_pairs(fits) if self.ordered else _any_order_pairs(fits, len(actual))
        used = {index for index in pairs if index is not None}
        unexpected = tuple(index for index in range(len(actual)) if index not in used)
        ok = all(index is not None for index in pairs) and not (self.only and unexpected)
        return MatchResult(tuple(pairs), unexpected, ok)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence) and not isinstance(other, (str, bytes)):
            return self.match(other).ok
        return NotImplemented

    def __repr__(self) -> str:
        rules = ", ".join(
            rule for rule, on in (("in this order", self.ordered), ("and no other call", self.only)) if on
        )
        return f"expect_tool_calls({', '.join(map(str, self.calls))}{'; ' + rules if rules else ''})"


def expect_tool_calls(*calls: ExpectedCall | str, ordered: bool = False, only: bool = False) -> ToolCallsExpectation:
    """The tool calls a rollout must have made: each a :func:`call` (or a tool's name alone: any arguments), in
    this order when ``ordered``, and no call beyond them when ``only``. Compare it with ``==`` to
    ``rollout.tool_calls``. ``expect_tool_calls(only=True)``: no tool call at all. Raises TypeError for anything
    else than a call or a name."""
    made = []
    for item in calls:
        if isinstance(item, str):
            made.append(call(item))
        elif isinstance(item, ExpectedCall):
            made.append(item)
        else:
            raise TypeError(f"expect_tool_calls(...): expected call(...) or a tool's name, got {item!r}")
    return ToolCallsExpectation(tuple(made), ordered, only)


def _ordered_pairs(fits: list[list[bool]]) -> list[int | None]:
    """Each expected call's actual call in order: the earliest fitting call after the previous match (greedy
    earliest is optimal for a subsequence); after the first that cannot be placed, none are placed."""
    pairs: list[int | None] = []
    start = 0
    for row in fits:
        index = next((i for i in range(start, len(row)) if row[i]), None)
        pairs.append(index)
        start = len(row) if index is None else index + 1
    return pairs


def _any_order_pairs(fits: list[list[bool]], actual: int) -> list[int | None]:
    """A maximum matching of expected calls to distinct actual calls (Kuhn's augmenting paths: tens of calls)."""
    owner: list[int | None] = [None] * actual

    def place(expected: int, seen: set[int]) -> bool:
        for index in range(actual):
            if fits[expected][index] and index not in seen:
                seen.add(index)
                holder = owner[index]
                if holder is None or place(holder, seen):
                    owner[index] = expected
                    return True
        return False

    for expected in range(len(fits)):
        place(expected, set())
    pairs: list[int | None] = [None] * len(fits)
    for index, holder in enumerate(owner):
        if holder is not None:
            pairs[holder] = index
    return pairs


def _describe(actual: ToolCallLike) -> str:
    arguments = actual.arguments
    shown = ", ".join(f"{k}={v!r}" for k, v in arguments.items()) if isinstance(arguments, Mapping) else repr(arguments)
    return f"{actual.name}({shown})"


def explain(expectation: ToolCallsExpectation, actual: Sequence[ToolCallLike]) -> list[str]:
    """The lines pytest shows when ``actual == expectation`` failed: the rules, then each expected call with the
    call it matched or, for one that matched none, the closest call of the same name (else the first call) and why
    it does not fit, then each unexpected call when ``only``."""
    result = expectation.match(actual)
    rules = [rule for rule, on in (("in this order", expectation.ordered), ("no other call", expectation.only)) if on]
    lines = [f"tool calls do not match the expected ones{' (' + ', '.join(rules) + ')' if rules else ''}:"]
    if not actual:
        lines.append("  the rollout made no tool call")
    for number, (expected, index) in enumerate(zip(expectation.calls, result.pairs, strict=True), 1):
        if index is not None:
            lines.append(f"  expected call {number}: {expected}: matched call {index + 1}, {_describe(actual[index])}")
            continue
        lines.append(f"  expected call {number}: {expected}: not found")
        candidates = [i for i, candidate in enumerate(actual) if candidate.name == expected.name] or list(
            range(len(actual))
        )
        if candidates:
            closest = min(candidates, key=lambda i: len(expected.problems(actual[i])))
            problems = expected.problems(actual[closest])
            if not problems and expectation.ordered:
                problems = ["it fits, but not in this order (it comes before an earlier expected call's match)"]
            lines.append(f"    closest: call {closest + 1}, {_describe(actual[closest])}: {'; '.join(problems)}")
    if expectation.only:
        lines += [f"  unexpected call {index + 1}: {_describe(actual[index])}" for index in result.unexpected]
    return lines
