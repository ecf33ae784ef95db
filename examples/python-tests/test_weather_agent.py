"""Evals as pytest code over a tool-calling agent: Gym's example_single_tool_call environment (a get_weather tool; its
verifier gives reward 1 when the model called it). The cases are built here in Python as a dataset of their own,
and the policy model's answers are this folder's recordings (recordings/weather_rollouts.jsonl, written for these
cases). README.md in this folder says what each part shows and what the run gives."""

import pytest

from pytest_gym_eval import Dataset, Rollout, call, expect_tool_calls

WEATHER = {  # the get_weather tool Gym's example_single_tool_call resources server serves
    "type": "function",
    "name": "get_weather",
    "strict": True,
    "description": "",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    },
}
SYSTEM = "You are a weather assistant. Look up every city the user asks about with get_weather, then answer briefly."


def case(task_id: str, question: str) -> dict:
    return {
        "id": task_id,
        "responses_create_params": {
            "input": [{"role": "developer", "content": SYSTEM}, {"role": "user", "content": question}],
            "tools": [WEATHER],
        },
    }


CITIES = {"paris": ["Paris"], "oslo": ["Oslo"], "rome-milan": ["Rome", "Milan"], "outside": []}
WEATHER_CASES = Dataset(
    "weather-cases",
    [
        case("paris", "Do I need a coat in Paris today?"),
        case("oslo", "What's it like in Oslo right now?"),
        case("rome-milan", "Compare the weather in Rome and Milan."),
        case("outside", "How's it looking outside?"),  # no city: a good answer asks for one, calling no tool
    ],
    agent="example_single_tool_call_simple_agent",
)


@pytest.mark.gym_rollouts(WEATHER_CASES, min_metric={"looked_up": 0.7})  # a gate beside its metric
def test_looks_up_each_city_it_is_asked_about(gym_rollout: Rollout) -> None:
    cities = CITIES[gym_rollout.task_id]
    assert gym_rollout.tool_calls == expect_tool_calls(
        *(call("get_weather", {"city": city}, exact=True) for city in cities),
        ordered=True,  # in the order the user named them
        only=True,  # and no other call
    )
    for tool_call in gym_rollout.tool_calls:  # each call got the tool's answer for its own city
        city = tool_call.arguments["city"]
        assert tool_call.result == {"city": city, "weather_description": f"The weather in {city} is cold."}
    missing = [city for city in cities if city not in gym_rollout.output_text]
    gym_rollout.expect(not missing, f"the answer leaves out {', '.join(missing)}", metric="names_every_city")
    gym_rollout.record_metric(  # recorded whatever the expectation said
        "looked_up",
        bool(gym_rollout.tool_calls),
        reason=None if gym_rollout.tool_calls else f"no tool call; it answered {gym_rollout.output_text!r}",
    )
