"""Tool-call matchers (pytest_gym_eval.outcomes.tool_matchers): names, arguments contained or exact, results, order, no
other
call, and the explanation of a mismatch."""

from __future__ import annotations

import pytest

from pytest_gym_eval import ToolCall, call, expect_tool_calls
from pytest_gym_eval.outcomes.tool_matchers import explain

WEATHER = ToolCall("get_weather", {"city": "Paris", "units": "C"}, "c1", {"temp": 12, "sky": "rain"})
EMAIL = ToolCall("send_email", {"to": "ana@example.com", "body": {"text": "hi", "lang": "en"}}, "c2", "sent")
SEARCH = ToolCall("search", "not json", "c3", None)
CALLS = (WEATHER, EMAIL, SEARCH)


@pytest.mark.parametrize(
    ("expectation", "matches"),
    [
        (expect_tool_calls("get_weather"), True),  # a name alone: any arguments
        (expect_tool_calls(call("get_weather", {"city": "Paris"})), True),  # contained
        (expect_tool_calls(call("get_weather", {"city": "Rome"})), False),
        (expect_tool_calls(call("get_weather", {"city": "Paris"}, exact=True)), False),  # units too
        (expect_tool_calls(call("get_weather", {"city": "Paris", "units": "C"}, exact=True)), True),
        (expect_tool_calls(call("send_email", {"body": {"lang": "en"}})), True),  # contained, recursively
        (expect_tool_calls(call("send_email", {"body": {"lang": "fr"}})), False),
        (expect_tool_calls(call("get_weather", result={"temp": 12})), True),  # a result, contained
        (expect_tool_calls(call("get_weather", result={"temp": 13})), False),
        (expect_tool_calls(call("send_email", result="sent")), True),
        (expect_tool_calls(call("search", {"q": "x"})), False),  # unparsed arguments are no object
        (expect_tool_calls("send_email", "get_weather"), True),  # any order by default
        (expect_tool_calls("send_email", "get_weather", ordered=True), False),
        (expect_tool_calls("get_weather", "search", ordered=True), True),  # others may come between
        (expect_tool_calls("get_weather", "send_email", only=True), False),  # search is unexpected
        (expect_tool_calls("get_weather", "send_email", "search", ordered=True, only=True), True),
        (expect_tool_calls("get_weather", "get_weather"), False),  # two expected calls need two calls
        (expect_tool_calls(only=True), False),  # no tool call at all
    ],
)
def test_rules(expectation: object, matches: bool) -> None:
    assert (CALLS == expectation) is matches  # noqa: SIM300 (the rollout side on the left, as users write it)
    assert (expectation == list(CALLS)) is matches


def test_no_call_at_all() -> None:
    assert () == expect_tool_calls(only=True)  # noqa: SIM300
    assert () != expect_tool_calls("get_weather")  # noqa: SIM300


def test_any_order_finds_a_matching_that_a_greedy_first_fit_would_miss() -> None:
    # Expected 1 (any get_weather) fits both calls, expected 2 only the first: greedy would give call 1 to expected 1.
    paris, rome = ToolCall("get_weather", {"city": "Paris"}), ToolCall("get_weather", {"city": "Rome"})
    assert [paris, rome] == expect_tool_calls("get_weather", call("get_weather", {"city": "Paris"}))


def test_the_explanation_says_call_by_call_what_did_not_fit() -> None:
    expectation = expect_tool_calls(
        call("get_weather", {"city": "Paris"}),
        call("send_email", {"to": "bob@example.com", "body": {"lang": "en"}}),
        ordered=True,
        only=True,
    )
    assert explain(expectation, CALLS) == [
        "tool calls do not match the expected ones (in this order, no other call):",
        "  expected call 1: get_weather(city='Paris', ...): matched call 1, get_weather(city='Paris', units='C')",
        "  expected call 2: send_email(to='bob@example.com', body={'lang': 'en'}, ...): not found",
        "    closest: call 2, send_email(to='ana@example.com', body={'text': 'hi', 'lang': 'en'}): argument to is"
        " 'ana@example.com', not 'bob@example.com'",
        "  unexpected call 2: send_email(to='ana@example.com', body={'text': 'hi', 'lang': 'en'})",
        "  unexpected call 3: search('not json')",
    ]
    exact = explain(expect_tool_calls(call("get_weather", {"city": "Paris"}, exact=True)), CALLS)
    assert exact[-1] == "    closest: call 1, get_weather(city='Paris', units='C'): unexpected argument 'units'='C'"
    missing = explain(expect_tool_calls(call("get_weather", {"day": "mon"}, result={"sky": "sun"})), CALLS)
    assert missing[-1].endswith(": argument 'day' is missing; result sky is 'rain', not 'sun'")
    assert explain(expect_tool_calls("get_weather"), ())[1] == "  the rollout made no tool call"


def test_bad_expectations_are_refused() -> None:
    with pytest.raises(TypeError, match="non-empty string"):
        call("")
    with pytest.raises(TypeError, match="must be a dict"):
        call("f", ["city"])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="expected call"):
        expect_tool_calls(3)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("expected", "arguments", "matches"),
    [
        ({"x": True}, {"x": 1}, False),  # a JSON true is no number, though True == 1 in Python
        ({"x": 1}, {"x": True}, False),
        ({"x": False}, {"x": 0}, False),
        ({"x": 0.0}, {"x": False}, False),
        ({"x": [True, 2]}, {"x": [1, 2]}, False),  # inside a list too
        ({"x": {"y": [False]}}, {"x": {"y": [0]}}, False),  # and a list inside an object
        ({"x": True}, {"x": True}, True),
        ({"x": 1}, {"x": 1.0}, True),  # one JSON number
        ({"x": [1, {"y": True}]}, {"x": [1.0, {"y": True}]}, True),
    ],
)
@pytest.mark.parametrize("exact", [False, True])
def test_a_bool_matches_only_a_bool(expected: dict, arguments: dict, matches: bool, exact: bool) -> None:
    made = [ToolCall("f", arguments, "c1", arguments)]
    assert (made == expect_tool_calls(call("f", expected, exact=exact))) is matches
    assert (made == expect_tool_calls(call("f", result=expected))) is matches
    bare = [ToolCall("f", {}, "c1", arguments["x"])]  # a result that is no object
    assert (bare == expect_tool_calls(call("f", result=expected["x"]))) is matches


def test_the_explanation_of_a_bool_against_a_number_says_so() -> None:
    lines = explain(expect_tool_calls(call("f", {"x": True})), [ToolCall("f", {"x": 1})])
    assert lines[-1] == "    closest: call 1, f(x=1): argument x is 1, not True"
