"""Model servers a dataset binds itself (``model_server=`` in ``gym_dataset_settings``): the settings line, the
precedence over ``--gym-model-server``, and the instances and rewired references one Gym serves them with."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_gym_eval.options.gym_options import GymOptions
from pytest_gym_eval.options.settings import parse_dataset_settings
from pytest_gym_eval.session.preflight import agent_environments, model_server_needs
from pytest_gym_eval.tasks.model_servers import (
    ModelServerBinding,
    ModelServerSpecError,
    ServerReference,
    dataset_bindings,
)

JUDGE_A = ModelServerBinding("judge_model", url="http://a/v1", model="ja", api_key_env="KEY_A")
JUDGE_B = ModelServerBinding("judge_model", url="http://b/v1", model="jb")
REFS = [
    ServerReference("quiz", "mcqa", "judge_model_server", "judge_model"),
    ServerReference("essay", "essay", "judging.judge_model_server", "judge_model"),
]


def test_a_settings_line_binds_model_servers_and_a_later_line_wins_by_name(tmp_path: Path) -> None:
    (tmp_path / "j.jsonl").write_text("{}\n")
    lines = [
        "data/*.jsonl: model_server=judge_model=http://a/v1,model=ja,key=KEY_A model_server=genrm_model=policy",
        "data/quiz.jsonl: model_server=judge_model=replay:j.jsonl repeats=2",
    ]
    parsed = parse_dataset_settings(lines, tmp_path)
    assert parsed[0][1].model_servers == (JUDGE_A, ModelServerBinding("genrm_model", policy=True))
    options = GymOptions(rootdir=tmp_path, datasets=tuple(parsed), model_servers=(JUDGE_B,))
    quiz = options.dataset_model_servers(tmp_path / "data" / "quiz.jsonl")
    assert quiz == (
        ModelServerBinding("judge_model", replay=tmp_path / "j.jsonl"),
        ModelServerBinding("genrm_model", policy=True),
    )
    assert options.dataset_model_servers(tmp_path / "data" / "essay.jsonl")[0] == JUDGE_A  # beats the session's
    assert options.dataset_model_servers(tmp_path / "other.jsonl") == (JUDGE_B,)  # no line: the session's


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("judge_model", "expected NAME=URL,model=SERVED_NAME"),
        ("policy_model=http://h/v1,model=m", "is the policy model's server"),
        ("judge_model=http://u:hunter2@h/v1,model=m,colour=red", "'colour=red' is not model="),
        ("judge_model=replay:missing.jsonl", "no such recordings file"),
    ],
)
def test_a_bad_binding_in_a_settings_line_names_the_line(tmp_path: Path, value: str, says: str) -> None:
    with pytest.raises(pytest.UsageError, match="gym_dataset_settings line") as raised:
        parse_dataset_settings([f"data/*.jsonl: model_server={value}"], tmp_path)
    assert says in str(raised.value)
    assert "hunter2" not in str(raised.value)


def test_a_dataset_binding_differing_from_the_sessions_gets_an_instance_and_its_reference_rewired() -> None:
    planned = dataset_bindings((JUDGE_B,), {"quiz.jsonl": (["quiz"], (JUDGE_A,)), "essay.jsonl": (["essay"], ())}, REFS)
    assert planned.served == (
        JUDGE_B,
        ModelServerBinding("judge_model__quiz", url="http://a/v1", model="ja", api_key_env="KEY_A"),
    )
    assert planned.rewired == {
        "quiz": {
            "resources_servers": {
                "mcqa": {"judge_model_server": {"type": "responses_api_models", "name": "judge_model__quiz"}}
            }
        }
    }
    assert planned.bound_in == {"quiz": {"judge_model"}}


def test_without_a_session_binding_every_environment_bound_alike_binds_the_name_itself() -> None:
    datasets = {"quiz.jsonl": (["quiz"], (JUDGE_A,)), "essay.jsonl": (["essay"], (JUDGE_A,))}
    planned = dataset_bindings((), datasets, REFS)
    assert (planned.served, planned.rewired) == ((JUDGE_A,), {})
    assert planned.bound_in == {"quiz": {"judge_model"}, "essay": {"judge_model"}}


def test_environments_bound_differently_get_one_instance_each_the_nested_key_rewired() -> None:
    datasets = {"quiz.jsonl": (["quiz"], (JUDGE_A,)), "essay.jsonl": (["essay"], (JUDGE_B,))}
    planned = dataset_bindings((), datasets, REFS)
    assert [b.name for b in planned.served] == ["judge_model__quiz", "judge_model__essay"]
    essay = planned.rewired["essay"]["resources_servers"]["essay"]["judging"]["judge_model_server"]
    assert essay == {"type": "responses_api_models", "name": "judge_model__essay"}


def test_an_environment_left_unbound_by_one_dataset_keeps_the_name_to_itself() -> None:
    """quiz is bound per dataset; essay relies on its own definition of judge_model: quiz gets an instance, the
    name judge_model stays the environment's (and the preflight checks it for essay)."""
    planned = dataset_bindings((), {"quiz.jsonl": (["quiz"], (JUDGE_A,)), "essay.jsonl": (["essay"], ())}, REFS)
    assert [b.name for b in planned.served] == ["judge_model__quiz"]
    assert planned.bound_in == {"quiz": {"judge_model"}}


def test_datasets_running_one_environment_must_bind_it_alike() -> None:
    datasets = {"a.jsonl": (["quiz"], (JUDGE_A,)), "b.jsonl": (["quiz"], ())}
    with pytest.raises(ModelServerSpecError) as raised:
        dataset_bindings((), datasets, REFS)
    message = str(raised.value)
    assert "the datasets running the environment 'quiz' bind its model server 'judge_model' differently" in message
    assert "a.jsonl: url=http://a/v1, model=ja, api_key_env=KEY_A" in message and "b.jsonl: not bound" in message
    alike = {"a.jsonl": (["quiz"], (JUDGE_A,)), "b.jsonl": (["quiz"], (JUDGE_A,))}
    assert dataset_bindings((), alike, REFS).served == (JUDGE_A,)


def test_a_reference_inside_a_list_cannot_be_rebound_per_dataset() -> None:
    refs = [ServerReference("quiz", "mcqa", "judges.0", "judge_model"), *REFS[1:]]
    with pytest.raises(ModelServerSpecError, match=r"inside a list \(judges\.0\)"):
        dataset_bindings((), {"q.jsonl": (["quiz"], (JUDGE_A,)), "e.jsonl": (["essay"], ())}, refs)


def test_the_environments_an_agent_runs_and_the_kind_of_each_reference() -> None:
    loaded = {
        Path("quiz.yaml"): {
            "quiz": {
                "resources_servers": {"mcqa": {"judge_model_server": {"type": "responses_api_models", "name": "j"}}}
            },
            "quiz_agent": {
                "responses_api_agents": {
                    "simple_agent": {"resources_server": {"type": "resources_servers", "name": "quiz"}}
                }
            },
        }
    }
    assert agent_environments(loaded, "quiz_agent") == ["quiz"]
    assert agent_environments(loaded, "other") == []
    (need,) = model_server_needs(loaded)
    assert need.reference() == ServerReference("quiz", "mcqa", "judge_model_server", "j")


def test_a_bindings_record_keeps_no_password_and_reads_it_back_from_the_environment(tmp_path: Path) -> None:
    from pytest_gym_eval.tasks.model_servers import binding_fingerprint, binding_from_record, binding_record

    binding = ModelServerBinding("judge_model", url="http://u:hunter2@h/v1", model="j", api_key_env="J", api="chat")
    record = binding_record(binding, redact=True)
    assert "hunter2" not in str(record)
    assert binding_from_record(record, {}).url == "http://u:***@h/v1"
    assert binding_from_record(record, {binding.url_variable(): binding.url}) == binding
    assert binding_from_record(binding_record(binding), {}) == binding
    facts = binding_fingerprint(binding, "openai_model")
    assert facts == {"url": "http://u:***@h/v1", "model": "j", "api_key_env": "J", "api": "chat", "type": "vllm_model"}
    recordings = tmp_path / "judge.jsonl"
    recordings.write_text("{}\n")
    replayed = binding_fingerprint(ModelServerBinding("judge_model", replay=recordings), "openai_model")
    recordings.write_text("{}\n{}\n")
    assert binding_fingerprint(ModelServerBinding("judge_model", replay=recordings), "openai_model") != replayed


# ---- per policy: NAME@POLICY ----------------------------------------------------------------------------------


def test_a_name_at_policy_binding_parses_and_is_bound_once_per_policy(tmp_path: Path) -> None:
    from pytest_gym_eval.tasks.model_servers import parse_model_server, parse_model_servers

    binding = parse_model_server("judge_model@cand=http://h/v1,model=j,type=chat", tmp_path)
    assert binding == ModelServerBinding("judge_model", url="http://h/v1", model="j", api="chat", for_policy="cand")
    both = parse_model_servers(["judge_model=policy", "judge_model@cand=policy"], tmp_path)
    assert [b.for_policy for b in both] == [None, "cand"]
    with pytest.raises(ModelServerSpecError, match="'judge_model@cand' is bound twice"):
        parse_model_servers(["judge_model@cand=policy", "judge_model@cand=policy"], tmp_path)
    with pytest.raises(ModelServerSpecError, match="names a --gym-policy after the @"):
        parse_model_server("judge_model@=policy", tmp_path)
    with pytest.raises(pytest.UsageError, match="NAME@POLICY is for --gym-model-server"):
        parse_dataset_settings(["d.jsonl: model_server=judge_model@cand=policy"], tmp_path)


def test_a_policys_own_binding_copies_its_environment_and_points_its_agent_copy_there() -> None:
    from pytest_gym_eval.tasks.model_servers import AgentCopy, merge_blocks, policy_bindings

    mine = ModelServerBinding("judge_model", url="http://c/v1", model="jc", for_policy="cand")
    copies = [
        AgentCopy("quiz_agent__cand", "cand", (("quiz", "simple_agent", "resources_server"),)),
        AgentCopy("essay_agent__other", "other", (("essay", "simple_agent", "resources_server"),)),
    ]
    served, blocks = policy_bindings([mine], copies, REFS)
    assert served == (ModelServerBinding("judge_model__cand", url="http://c/v1", model="jc"),)
    assert blocks == {
        "quiz__cand": {
            "_copy": "quiz",
            "resources_servers": {
                "mcqa": {"judge_model_server": {"type": "responses_api_models", "name": "judge_model__cand"}}
            },
        },
        "quiz_agent__cand": {
            "responses_api_agents": {
                "simple_agent": {"resources_server": {"type": "resources_servers", "name": "quiz__cand"}}
            }
        },
    }  # essay_agent__other: no binding of its own, no copy
    policy_copy = {
        "quiz_agent__cand": {"_copy": "quiz_agent", "responses_api_agents": {"simple_agent": {"model_server": 1}}}
    }
    merged = merge_blocks(policy_copy, blocks)["quiz_agent__cand"]
    assert merged["_copy"] == "quiz_agent"
    assert merged["responses_api_agents"]["simple_agent"] == {
        "model_server": 1,
        "resources_server": {"type": "resources_servers", "name": "quiz__cand"},
    }


def test_a_policys_binding_of_a_name_none_of_its_environments_names_is_an_error_naming_what_they_name() -> None:
    """A misspelt NAME in NAME@POLICY would otherwise be dropped without a word, leaving POLICY's rollouts judged by
    the session's binding of the name the environment does use."""
    from pytest_gym_eval.tasks.model_servers import AgentCopy, policy_bindings

    typo = ModelServerBinding("judge_modle", url="http://c/v1", model="jc", for_policy="cand")
    copies = [AgentCopy("quiz_agent__cand", "cand", (("quiz", "simple_agent", "resources_server"),))]
    with pytest.raises(ModelServerSpecError) as raised:
        policy_bindings([typo], copies, REFS)
    assert str(raised.value) == (
        "--gym-model-server judge_modle@cand: no environment cand's rollouts run (quiz) names the model server "
        "'judge_modle'; they name judge_model"
    )
    # a policy none of whose rollouts were selected (-k base) has nothing to bind: no error
    assert policy_bindings([typo], [], REFS) == ((), {})


# ---- judges the plugin does not manage ------------------------------------------------------------------------


def test_a_verifier_with_its_own_judge_client_is_found_with_its_keys_and_variables(tmp_path: Path) -> None:
    from pytest_gym_eval.session.preflight import unmanaged_judge_warning, unmanaged_judges

    (tmp_path / "resources_servers" / "proofs").mkdir(parents=True)
    (tmp_path / "resources_servers" / "proofs" / "app.py").write_text(
        'import os\nARGS = os.environ["JUDGE_SERVER_ARGS"]\nT = os.getenv("JUDGE_TIMEOUT")\n'
    )
    config = tmp_path / "resources_servers" / "bench" / "configs" / "bench.yaml"
    loaded = {
        config: {
            "bench": {
                "resources_servers": {
                    "bench": {
                        "judge_base_url": "${oc.env:BENCH_JUDGE_URL,''}",
                        "judge_api_key": "${oc.env:BENCH_JUDGE_KEY,''}",
                        "judge_model": "grok",
                        "judge_temperature": 0.0,
                        "tavily_api_key": "x",
                    }
                }
            },
            "policy_judged": {  # the policy's own endpoint: the session sets it
                "resources_servers": {
                    "verifif": {"judge_base_url": "${policy_base_url}", "judge_model": "${policy_model_name}"}
                }
            },
            "served": {  # a model server reference and its model name: a managed judge
                "resources_servers": {
                    "proofs": {
                        "judge_model_server": {"type": "responses_api_models", "name": "judge_model"},
                        "judge_model_name": "",
                    }
                }
            },
        }
    }
    found = unmanaged_judges(tmp_path, loaded)
    assert [(j.environment, j.keys, j.variables) for j in found] == [
        ("bench", ("judge_base_url", "judge_api_key", "judge_model"), ()),
        ("served", (), ("JUDGE_SERVER_ARGS",)),
    ]
    warning = unmanaged_judge_warning(found[0], tmp_path)
    assert warning.startswith("judge endpoint not managed by pytest-gym-eval: the environment bench")
    assert "(resources_servers/bench/configs/bench.yaml)" in warning
    assert "the keys judge_base_url, judge_api_key, judge_model of its resources server block" in warning
    assert "$JUDGE_SERVER_ARGS" in unmanaged_judge_warning(found[1], tmp_path)


# ---- replay bindings with type= --------------------------------------------------------------------------------


def test_a_replay_binding_takes_type_like_an_endpoint(tmp_path: Path) -> None:
    from pytest_gym_eval.tasks.model_servers import parse_model_server

    (tmp_path / "judge.jsonl").write_text("{}\n")
    chat = parse_model_server("judge_model=replay:judge.jsonl,type=chat", tmp_path)
    assert (chat.replay, chat.api, chat.model_type("openai_model")) == (tmp_path / "judge.jsonl", "chat", "vllm_model")
    plain = parse_model_server("judge_model=replay:judge.jsonl", tmp_path)
    assert (plain.api, plain.model_type("openai_model")) == (None, "openai_model")
    with pytest.raises(ModelServerSpecError, match="type=grpc: expected responses or chat"):
        parse_model_server("judge_model=replay:judge.jsonl,type=grpc", tmp_path)
    (tmp_path / "a,b.jsonl").write_text("{}\n")  # a comma in the file's name stays part of it
    assert parse_model_server("judge_model=replay:a,b.jsonl,type=responses", tmp_path).replay == tmp_path / "a,b.jsonl"


def test_a_session_wide_binding_no_config_refers_to_is_warned_about_with_the_names_they_use() -> None:
    """References anywhere in the run's configs count (a resources server's judge, an agent's user simulator); a
    model server's own definition does not."""
    from pytest_gym_eval.session.preflight import unused_binding_warnings

    loaded = {
        Path("env.yaml"): {
            "env": {"resources_servers": {"kind": {"judge": {"type": "responses_api_models", "name": "judge_model"}}}},
            "agent": {"responses_api_agents": {"a": {"user": {"type": "responses_api_models", "name": "simulator"}}}},
            "judge_modle": {"responses_api_models": {"openai_model": {"openai_base_url": "http://h/v1"}}},
        }
    }
    (warning,) = unused_binding_warnings(["judge_model", "judge_modle", "simulator"], loaded)
    assert warning == (
        "--gym-model-server judge_modle: no config of the selected environments names the model server "
        "'judge_modle' (they name judge_model, simulator); it is served, and no rollout of this run calls it"
    )
    assert unused_binding_warnings(["x"], {})[0].endswith(
        "(they name no model server besides the policy's); it is served, and no rollout of this run calls it"
    )
