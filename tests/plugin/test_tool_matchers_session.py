"""A failed tool-call assertion in a pytest session is explained call by call (the plugin's
``pytest_assertrepr_compare``); other comparisons keep pytest's own diff."""

from __future__ import annotations

import pytest


def test_a_failed_tool_call_assertion_is_explained(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        from pytest_gym_eval import ToolCall, call, expect_tool_calls

        CALLS = (ToolCall("get_weather", {"city": "Rome"}), ToolCall("search", {"q": "rain"}))

        def test_expected_on_the_right():
            assert CALLS == expect_tool_calls(call("get_weather", {"city": "Paris"}), only=True)

        def test_expected_on_the_left():
            assert expect_tool_calls("search", "get_weather", ordered=True) == list(CALLS)

        def test_a_plain_comparison():
            assert [1, 2] == [1, 3]
        """
    )
    result = pytester.runpytest("-p", "no:randomly")
    result.assert_outcomes(failed=3)
    result.stdout.fnmatch_lines(
        [
            "E*tool calls do not match the expected ones (no other call):",
            "E*  expected call 1: get_weather(city='Paris', ...): not found",
            "E*    closest: call 1, get_weather(city='Rome'): argument city is 'Rome', not 'Paris'",
            "E*  unexpected call 1: get_weather(city='Rome')",
            "E*  unexpected call 2: search(q='rain')",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "E*tool calls do not match the expected ones (in this order):",
            "E*  expected call 1: search(...): matched call 2, search(q='rain')",
            "E*  expected call 2: get_weather(...): not found",
            "E*    closest: call 1, get_weather(city='Rome'): it fits, but not in this order *",
        ]
    )
    result.stdout.fnmatch_lines(["E*At index 1 diff: 2 != 3"])
