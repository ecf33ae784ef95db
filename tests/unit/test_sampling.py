"""Sampling options: parsing, validation, precedence over a row's own values, the seed route, and what reaches
Gym's input file and the reports (against the stand-in ``gym``; the live tier shows them reaching a real model)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pytest_gym_eval.tasks.sampling import (
    PRECEDENCE,
    Sampling,
    SamplingError,
    apply_sampling,
    parse_param,
    parse_params,
)

ROW: dict[str, Any] = {
    "id": "q1",
    "responses_create_params": {"input": "Which?", "temperature": 0.9, "top_p": 0.5},
    "_ng_task_index": 3,
}


def test_an_option_beats_the_rows_own_value_and_unset_options_keep_it() -> None:
    out = apply_sampling(ROW, Sampling(temperature=0.0, max_output_tokens=64), repeat=0)
    assert out["responses_create_params"] == {
        "input": "Which?",
        "temperature": 0.0,
        "top_p": 0.5,
        "max_output_tokens": 64,
    }
    assert ROW["responses_create_params"]["temperature"] == 0.9  # the dataset's row is not changed
    assert out["_ng_task_index"] == 3 and out["id"] == "q1"


def test_no_options_leave_the_row_as_it_is() -> None:
    assert apply_sampling(ROW, Sampling(), repeat=2) == ROW


def test_generic_params_are_json_values_and_reach_the_request() -> None:
    params = parse_params(['reasoning={"effort": "low"}', "max_tool_calls=3", "user=ci-bot", "store=false"])
    assert params == (("reasoning", {"effort": "low"}), ("max_tool_calls", 3), ("user", "ci-bot"), ("store", False))
    out = apply_sampling(ROW, Sampling(params=params), repeat=0)
    assert out["responses_create_params"]["reasoning"] == {"effort": "low"}
    assert out["responses_create_params"]["store"] is False


def test_the_seed_goes_through_metadata_extra_body_one_per_repeat() -> None:
    row = {"responses_create_params": {"input": "?", "metadata": {"extra_body": '{"top_k": 5}', "tag": "x"}}}
    first = apply_sampling(row, Sampling(seed=7), repeat=0)["responses_create_params"]
    third = apply_sampling(row, Sampling(seed=7), repeat=2)["responses_create_params"]
    assert "seed" not in first  # not a Responses API parameter: Gym 0.7.0 would reject it
    assert json.loads(first["metadata"]["extra_body"]) == {"top_k": 5, "seed": 7}
    assert json.loads(third["metadata"]["extra_body"]) == {"top_k": 5, "seed": 9}
    assert first["metadata"]["tag"] == "x"


@pytest.mark.parametrize(
    ("sampling", "message"),
    [
        ({"temperature": -0.1}, "--gym-temperature: expected a finite number >= 0"),
        ({"temperature": float("nan")}, "--gym-temperature"),
        ({"top_p": 0.0}, "--gym-top-p: expected a number in (0, 1]"),
        ({"top_p": 1.5}, "--gym-top-p"),
        ({"max_output_tokens": 0}, "--gym-max-output-tokens: must be at least 1"),
        ({"params": (("temperature", 1.0),)}, "use --gym-temperature"),
        ({"params": (("input", "hi"),)}, "replace every row's prompt"),
        ({"params": (("seed", 1),)}, "use --gym-seed"),
    ],
)
def test_bad_values_name_the_option(sampling: dict[str, Any], message: str) -> None:
    with pytest.raises(SamplingError) as raised:
        Sampling(**sampling)
    assert message in str(raised.value)


@pytest.mark.parametrize(
    ("text", "message"), [("novalue", "expected KEY=VALUE"), ("=1", "expected KEY=VALUE"), ("x=NaN", "finite")]
)
def test_bad_params_name_the_option(text: str, message: str) -> None:
    with pytest.raises(SamplingError, match="--gym-param") as raised:
        parse_param(text)
    assert message in str(raised.value)


def test_a_param_given_twice_is_an_error() -> None:
    with pytest.raises(SamplingError, match="'user' is given twice"):
        parse_params(["user=a", "user=b"])


def test_the_seed_needs_a_model_type_that_passes_it_on() -> None:
    Sampling(seed=1).check_model_type("vllm_model")
    with pytest.raises(SamplingError, match="--gym-seed: Gym's openai_model server"):
        Sampling(seed=1).check_model_type("openai_model")


def test_meta_names_every_value_and_the_precedence() -> None:
    meta = Sampling(temperature=0.2, seed=3, params=(("reasoning", {"effort": "low"}),)).meta()
    assert meta == {
        "sampling.temperature": 0.2,
        "sampling.reasoning": '{"effort":"low"}',
        "sampling.seed": 3,
        "sampling.precedence": PRECEDENCE,
    }
    assert Sampling().meta() == {}
