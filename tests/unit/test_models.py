"""Policy specs (``--gym-policy``), the baseline, item ids, agent instances and the Gym blocks of several policies."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_gym_eval.tasks.models import (
    Policy,
    PolicySpecError,
    agent_instance,
    base_agent,
    instance_sampling,
    item_id,
    order_policies,
    parse_policy,
    policy_sampling,
    sampling_meta,
    server_blocks,
)
from pytest_gym_eval.tasks.sampling import POLICY_PRECEDENCE, Sampling, apply_sampling


def test_an_endpoint_spec_names_its_url_model_and_key_variable(tmp_path: Path) -> None:
    spec = "cand=https://example.test/v1,model=gpt-x,key=CAND_KEY"
    assert parse_policy(spec, tmp_path, "DEFAULT_KEY") == Policy("cand", "https://example.test/v1", "gpt-x", "CAND_KEY")
    assert parse_policy("base=http://h/v1,model=m", tmp_path, "DEFAULT_KEY").api_key_env == "DEFAULT_KEY"


def test_a_replay_spec_resolves_its_file_against_the_base(tmp_path: Path) -> None:
    (tmp_path / "rec.jsonl").write_text("{}\n")
    assert parse_policy("base=replay:rec.jsonl", tmp_path, "K") == Policy("base", replay=tmp_path / "rec.jsonl")


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("cand", "expected NAME=URL"),
        ("cand=", "expected NAME=URL"),
        ("1cand=http://h/v1,model=m", "got '1cand'"),
        ("a__b=http://h/v1,model=m", "got 'a__b'"),
        ("cand=http://h/v1", "needs its URL and model="),
        ("cand=http://h/v1,model=m,seed=1", "'seed=1' is not"),
        ("cand=http://h/v1,model=m,temperature=1,temperature=0", "'temperature=0' is not"),
        ("cand=http://h/v1,model=m,temperature=", "'temperature=' is not"),
        ("cand=http://h/v1,model=m,temperature=hot", "temperature: expected a number, got 'hot'"),
        ("cand=http://h/v1,model=m,temperature=-0.5", "temperature: expected a finite number >= 0, got -0.5"),
        ("cand=http://h/v1,model=m,temperature=nan", "temperature: expected a finite number >= 0, got nan"),
        ("cand=http://h/v1,model=m,top_p=0", "top_p: expected a number in (0, 1], got 0.0"),
        ("cand=http://h/v1,model=m,top_p=1.5", "top_p: expected a number in (0, 1], got 1.5"),
        ("cand=http://h/v1,model=m,max_output_tokens=0", "max_output_tokens: must be at least 1, got 0"),
        ("cand=http://h/v1,model=m,max_output_tokens=2.5", "max_output_tokens: expected a whole number, got '2.5'"),
        ("cand=http://h/v1,model=m,model=n", "'model=n' is not"),
        ("cand=replay:missing.jsonl", "no such recordings file"),
        ("cand=replay:", "expected a recordings file after replay:, got none"),
        ("cand=http://me@h/v1,model=m", "credentials in the URL (user:password@) cannot reach"),
    ],
)
def test_a_malformed_spec_is_refused_naming_it(tmp_path: Path, spec: str, says: str) -> None:
    with pytest.raises(PolicySpecError) as error:
        parse_policy(spec, tmp_path, "K")
    assert repr(spec) in str(error.value)
    assert says in str(error.value)


def test_an_endpoint_spec_carries_its_own_sampling(tmp_path: Path) -> None:
    spec = "hot=http://h/v1, model=m, temperature=1.5, top_p=0.9, max_output_tokens=32"
    policy = parse_policy(spec, tmp_path, "K")
    assert (policy.url, policy.model, policy.api_key_env) == ("http://h/v1", "m", "K")
    assert policy.sampling == Sampling(temperature=1.5, top_p=0.9, max_output_tokens=32)
    assert isinstance(policy.sampling.max_output_tokens, int)
    assert parse_policy("cold=http://h/v1,model=m", tmp_path, "K").sampling.is_empty


def test_a_policys_own_value_beats_the_option_which_beats_the_row() -> None:
    session = Sampling(temperature=0.0, top_p=0.5, max_output_tokens=48, seed=7, params=(("store", False),))
    hot = Policy("hot", "http://h/v1", "m", sampling=Sampling(temperature=1.5, top_p=1.0))
    cold = Policy("cold", "http://h/v1", "m")
    assert policy_sampling(hot, session) == Sampling(1.5, 1.0, 48, 7, (("store", False),))
    assert policy_sampling(cold, session) == session
    row = {"responses_create_params": {"input": "Q", "temperature": 0.3, "max_output_tokens": 9, "top_p": 0.2}}
    sent = apply_sampling(row, policy_sampling(hot, Sampling(max_output_tokens=48)), repeat=0)
    assert sent["responses_create_params"] == {"input": "Q", "temperature": 1.5, "top_p": 1.0, "max_output_tokens": 48}
    kept = apply_sampling(row, policy_sampling(Policy("own", sampling=Sampling(top_p=0.9)), Sampling()), repeat=0)
    assert kept["responses_create_params"] == {"input": "Q", "temperature": 0.3, "max_output_tokens": 9, "top_p": 0.9}


def test_each_agent_instance_gets_its_policys_sampling() -> None:
    session = Sampling(max_output_tokens=48)
    policies = (Policy("cold", sampling=Sampling(temperature=0.0)), Policy("hot", sampling=Sampling(temperature=1.5)))
    assert instance_sampling("mcqa_simple_agent", policies, session) == Sampling(0.0, None, 48)
    assert instance_sampling("mcqa_simple_agent__hot", policies, session) == Sampling(1.5, None, 48)
    assert instance_sampling("mcqa_simple_agent", (), session) == session


def test_the_meta_shows_each_policys_sampling_and_the_precedence_never_its_url_or_key() -> None:
    session = Sampling(max_output_tokens=48, seed=3)
    policies = (
        Policy("cold", "http://user:secret@h/v1", "m", "COLD_KEY", sampling=Sampling(temperature=0.0)),
        Policy("hot", "http://h/v1", "m", sampling=Sampling(temperature=1.5, top_p=1.0)),
    )
    assert sampling_meta(policies, session) == {
        "policy.cold.temperature": 0.0,
        "policy.cold.max_output_tokens": 48,
        "policy.cold.seed": 3,
        "policy.hot.temperature": 1.5,
        "policy.hot.top_p": 1.0,
        "policy.hot.max_output_tokens": 48,
        "policy.hot.seed": 3,
        "sampling.precedence": POLICY_PRECEDENCE,
    }
    plain = (Policy("a", "http://h/v1", "m"), Policy("b", "http://h/v1", "m"))
    assert sampling_meta(plain, session) == {
        "policy.a.max_output_tokens": 48, "policy.a.seed": 3, "policy.b.max_output_tokens": 48, "policy.b.seed": 3,
    }  # fmt: skip
    assert sampling_meta(plain, Sampling()) == {} == sampling_meta((), session)


def test_the_baseline_comes_first() -> None:
    a, b, c = Policy("a"), Policy("b"), Policy("c")
    assert order_policies([a, b, c], None) == (a, b, c)
    assert order_policies([a, b, c], "c") == (c, a, b)


@pytest.mark.parametrize(
    ("names", "baseline", "says"),
    [
        (["a", "b", "a"], None, "policy 'a' is named twice"),
        (["base", "cand", "Base"], None, "policies 'base' and 'Base' differ only by case"),
        (["a"], None, "two or more"),
        (["a", "b"], "z", "baseline policy 'z' is not one of the policies named: a, b"),
    ],
)
def test_policies_that_cannot_be_compared(names: list[str], baseline: str | None, says: str) -> None:
    with pytest.raises(PolicySpecError, match=says):
        order_policies([Policy(name) for name in names], baseline)


def test_item_ids_carry_the_policy_only_when_there_are_several() -> None:
    assert item_id(0, None) == "r0"
    assert item_id(2, "cand") == "r2-cand"


def test_the_first_policy_runs_the_agent_itself_and_the_others_a_copy() -> None:
    policies = (Policy("base"), Policy("cand"))
    assert agent_instance("mcqa_simple_agent", policies, "base") == "mcqa_simple_agent"
    assert agent_instance("mcqa_simple_agent", policies, "cand") == "mcqa_simple_agent__cand"
    assert agent_instance("mcqa_simple_agent", (), None) == "mcqa_simple_agent"
    assert base_agent("mcqa_simple_agent__cand", policies) == "mcqa_simple_agent"
    assert base_agent("mcqa_simple_agent", policies) == "mcqa_simple_agent"
    assert base_agent("odd__other", policies) == "odd__other"


def test_server_blocks_give_each_policy_a_model_server_an_agent_copy_and_its_environment_server() -> None:
    blocks = server_blocks(
        ["mcqa_simple_agent", "mcqa_simple_agent__cand"], [("cand", "http://h/v1", "m", "CAND_KEY")], "vllm_model"
    )
    assert blocks == {
        "cand_policy_model": {
            "_copy": "policy_model",
            "responses_api_models": {
                "vllm_model": {"base_url": "http://h/v1", "model": "m", "api_key": "${oc.env:CAND_KEY}"}
            },
        },
        "mcqa_simple_agent__cand": {
            "_copy": "mcqa_simple_agent",
            "responses_api_agents": {
                "simple_agent": {"model_server": {"type": "responses_api_models", "name": "cand_policy_model"}}
            },
        },
        "mcqa_simple_agent__cand_environment_server": {
            "environment_servers": {
                "legacy_agent": {
                    "entrypoint": "app.py",
                    "agent_server": {"type": "responses_api_agents", "name": "mcqa_simple_agent__cand"},
                }
            }
        },
    }


def test_server_blocks_of_a_gym_without_environment_servers_serve_the_copy_alone() -> None:
    # Gym 0.6.x: `gym eval run` posts each row to the agent its agent_ref names; no environment server exists.
    agents = ["mcqa_simple_agent", "mcqa_simple_agent__cand"]
    endpoints = [("cand", "http://h/v1", "m", None)]
    blocks = server_blocks(agents, endpoints, "openai_model", environment_servers=False)
    assert sorted(blocks) == ["cand_policy_model", "mcqa_simple_agent__cand"]
    assert blocks == {
        key: value for key, value in server_blocks(agents, endpoints, "openai_model").items() if key in blocks
    }


def test_server_blocks_know_only_the_model_types_whose_fields_they_know() -> None:
    with pytest.raises(PolicySpecError, match="not 'azure_openai_model'"):
        server_blocks([], [("cand", "http://h/v1", "m", None)], "azure_openai_model")
