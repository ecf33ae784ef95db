"""Binding the model servers a Gym environment names (``--gym-model-server``): the spec parser, the config block
written for Gym, the preflight that names an unbound judge, and the warm-Gym fingerprint."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_gym_eval.gym.model_probe import bound_endpoints
from pytest_gym_eval.session.preflight import model_server_problems
from pytest_gym_eval.tasks.model_servers import (
    ModelServerBinding,
    ModelServerSpecError,
    model_server_blocks,
    model_type_templates,
    parse_model_server,
    parse_model_servers,
    url_environment,
)

# ---- the spec parser ----------------------------------------------------------------------------------------


def test_an_endpoint_spec_gives_name_url_model_key_variable_and_api() -> None:
    binding = parse_model_server("judge_model=http://127.0.0.1:8000/v1,model=j,key=JUDGE_KEY,type=chat", Path("."))
    assert binding == ModelServerBinding(
        "judge_model", url="http://127.0.0.1:8000/v1", model="j", api_key_env="JUDGE_KEY", api="chat"
    )
    assert binding.model_type("openai_model") == "vllm_model"
    assert parse_model_server("judge_model=http://h/v1,model=j", Path(".")).model_type("vllm_model") == "vllm_model"
    assert parse_model_server("judge_model=http://h/v1,model=j", Path(".")).model_type("azure") == "openai_model"


def test_policy_and_replay_forms(tmp_path: Path) -> None:
    assert parse_model_server("genrm_model=policy", tmp_path) == ModelServerBinding("genrm_model", policy=True)
    (tmp_path / "judge.jsonl").write_text("{}\n")
    assert parse_model_server("judge_model=replay:judge.jsonl", tmp_path).replay == tmp_path / "judge.jsonl"


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("judge_model", "expected NAME=URL,model=SERVED_NAME"),
        ("judge_model=", "expected NAME=URL,model=SERVED_NAME"),
        ("1judge=http://h/v1,model=m", "a model server's name"),
        ("policy_model=http://h/v1,model=m", "is the policy model's server"),
        ("cand_policy_model=http://h/v1,model=m", "is the policy model's server"),
        ("judge_model=http://h/v1", "needs its URL (http://...) and model=SERVED_NAME"),
        ("judge_model=h,model=m", "needs its URL (http://...)"),
        ("judge_model=http://h/v1,model=m,temperature=0", "'temperature=0' is not model=SERVED_NAME"),
        ("judge_model=http://h/v1,model=m,model=n", "each at most once"),
        ("judge_model=http://h/v1,model=m,type=anthropic", "type=anthropic: expected responses or chat"),
        ("judge_model=replay:missing.jsonl", "no such recordings file"),
        ("judge_model=replay:", "expected a recordings file after replay:, got none"),
        ("judge_model=http://me@h:8000/v1,model=m", "credentials in the URL (user:password@) cannot reach"),
        ("judge_model=https://me@h/v1,model=m,key=K", "credentials in the URL (user:password@) cannot reach"),
        ("judge_model=http://h/v1?api-version=2,model=m", "a query or fragment (?...) in the URL cannot reach"),
        ("judge_model=replay:,type=chat", "expected a recordings file after replay:, got none"),
    ],
)
def test_a_bad_spec_is_an_error_naming_the_option_and_the_value(text: str, says: str, tmp_path: Path) -> None:
    with pytest.raises(ModelServerSpecError) as raised:
        parse_model_server(text, tmp_path, "gym_model_servers")
    message = str(raised.value)
    assert message.startswith(f"gym_model_servers {text!r}") and says in message


def test_a_password_in_a_bad_spec_is_not_shown() -> None:
    with pytest.raises(ModelServerSpecError) as raised:
        parse_model_server("judge_model=http://user:hunter2@h/v1,model=m,bogus=1", Path("."))
    assert "hunter2" not in str(raised.value) and "judge_model" in str(raised.value)


def test_a_bound_url_with_credentials_is_refused_without_showing_the_password() -> None:
    """Gym's model client sends its own Authorization header, which aiohttp refuses beside a URL's user:password@:
    every judge call failed, and over_refusal_detection scored each failure as an "unclear" verdict (0.5)."""
    with pytest.raises(ModelServerSpecError) as raised:
        parse_model_server("judge_model@cand=http://me:hunter2@h/v1,model=m,type=chat", Path("."))
    assert "Authorization" in str(raised.value) and "key=ENV_VAR" in str(raised.value)
    assert "hunter2" not in str(raised.value)
    with pytest.raises(ModelServerSpecError) as raised:  # Gym appends /responses to the URL: into the query
        parse_model_server("judge_model=http://h/v1?api-key=hunter2,model=m", Path("."))
    assert "query" in str(raised.value) and "hunter2" not in str(raised.value)


def test_a_name_bound_twice_is_an_error() -> None:
    with pytest.raises(ModelServerSpecError, match="'judge_model' is bound twice"):
        parse_model_servers(["judge_model=policy", "judge_model=http://h/v1,model=m"], Path("."))


# ---- the config block written for Gym -----------------------------------------------------------------------

TEMPLATES = {
    "openai_model": {"entrypoint": "app.py", "openai_base_url": "${policy_base_url}", "openai_default_headers": {}},
    "vllm_model": {"entrypoint": "app.py", "base_url": "${policy_base_url}", "uses_reasoning_parser": True},
}


def test_the_block_is_a_full_server_of_the_bound_type_replacing_the_environments_own() -> None:
    bindings = parse_model_servers(["judge_model=http://127.0.0.1:8000/v1,model=j,key=JUDGE_KEY,type=chat"], Path("."))
    blocks = model_server_blocks(
        bindings, "openai_model", TEMPLATES, {"JUDGE_KEY": True}, ("openai_model", "vllm_model", "local_vllm_model")
    )
    assert blocks == {
        "judge_model": {
            "responses_api_models": {
                "_delete_key": "local_vllm_model,openai_model",
                "vllm_model": {
                    "entrypoint": "app.py",
                    "base_url": "http://127.0.0.1:8000/v1",
                    "model": "j",
                    "api_key": "${oc.env:JUDGE_KEY}",
                    "uses_reasoning_parser": True,
                },
            }
        }
    }


def test_no_key_and_no_password_leave_their_environment_variables() -> None:
    bindings = (  # built directly: the parser refuses such a URL, which Gym's model client cannot call
        ModelServerBinding("judge_model", url="https://u:hunter2@judge.example/v1", model="j", api_key_env="JUDGE_KEY"),
        ModelServerBinding("genrm_model", url="http://h/v1", model="g"),
    )
    blocks = model_server_blocks(bindings, "openai_model", TEMPLATES, {"JUDGE_KEY": True})
    text = json.dumps(blocks)
    assert "hunter2" not in text
    judge = blocks["judge_model"]["responses_api_models"]["openai_model"]
    assert judge["openai_base_url"] == "${oc.env:PYTEST_GYM_EVAL_MODEL_SERVER_URL_judge_model}"
    assert judge["openai_api_key"] == "${oc.env:JUDGE_KEY}"
    assert blocks["genrm_model"]["responses_api_models"]["openai_model"]["openai_api_key"] == "no-key"
    assert url_environment(bindings) == {
        "PYTEST_GYM_EVAL_MODEL_SERVER_URL_judge_model": "https://u:hunter2@judge.example/v1"
    }


def test_an_unset_key_variable_gives_no_key() -> None:
    bindings = parse_model_servers(["judge_model=http://h/v1,model=j,key=JUDGE_KEY"], Path("."))
    blocks = model_server_blocks(bindings, "openai_model", TEMPLATES, {"JUDGE_KEY": False})
    assert blocks["judge_model"]["responses_api_models"]["openai_model"]["openai_api_key"] == "no-key"


def test_a_policy_binding_takes_the_policys_own_values() -> None:
    blocks = model_server_blocks(parse_model_servers(["judge_model=policy"], Path(".")), "vllm_model", TEMPLATES, {})
    fields = blocks["judge_model"]["responses_api_models"]["vllm_model"]
    assert (fields["base_url"], fields["model"], fields["api_key"]) == (
        "${policy_base_url}",
        "${policy_model_name}",
        "${policy_api_key}",
    )


def test_a_replay_binding_is_refused_by_the_block_writer(tmp_path: Path) -> None:
    (tmp_path / "j.jsonl").write_text("{}\n")
    with pytest.raises(ModelServerSpecError, match="judge_model=replay"):
        model_server_blocks(parse_model_servers(["judge_model=replay:j.jsonl"], tmp_path), "openai_model", {}, {})


def test_the_template_is_the_checkouts_policy_block(tmp_path: Path) -> None:
    folder = tmp_path / "responses_api_models" / "vllm_model" / "configs"
    folder.mkdir(parents=True)
    (folder / "vllm_model.yaml").write_text(
        "policy_model:\n  responses_api_models:\n    vllm_model:\n      entrypoint: app.py\n      base_url: x\n"
    )
    assert model_type_templates(tmp_path, ["vllm_model", "openai_model"]) == {
        "vllm_model": {"entrypoint": "app.py", "base_url": "x"}
    }


def test_bound_endpoints_are_waited_for_but_not_the_policy_form() -> None:
    bindings = parse_model_servers(["judge_model=http://h/v1,model=j,key=K", "genrm_model=policy"], Path("."))
    [endpoint] = bound_endpoints(bindings, "openai_model")
    assert (endpoint.url, endpoint.model, endpoint.model_type, endpoint.api_key_env) == (
        "http://h/v1",
        "j",
        "openai_model",
        "K",
    )


# ---- preflight: the model servers an environment names ------------------------------------------------------


def write_env(checkout: Path, env: str, text: str) -> Path:
    path = checkout / "resources_servers" / env / "configs" / f"{env}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def ref(name: str) -> str:
    return f"{{type: responses_api_models, name: {name}}}"


STYLE_A = f"""
judge_model:
  responses_api_models:
    openai_model:
      entrypoint: app.py
      openai_base_url: ${{judge_base_url}}
      openai_model: ${{judge_model_name}}
judge_base_url: null
refusal:
  resources_servers:
    refusal:
      judge_model_server: {ref("judge_model")}
"""


def test_a_judge_left_null_is_named_with_its_environment_key_and_the_binding_to_add(tmp_path: Path) -> None:
    config = write_env(tmp_path, "refusal", STYLE_A)
    [problem] = model_server_problems(tmp_path, [config], set(), {})
    assert "the model server 'judge_model' is not bound" in problem
    assert "${judge_base_url}, which is not set" in problem
    assert "refusal (resources_servers/refusal/configs/refusal.yaml): judge_model_server" in problem
    assert "--gym-model-server judge_model=URL,model=SERVED_NAME" in problem
    assert model_server_problems(tmp_path, [config], {"judge_model"}, {}) == []


def test_a_policy_judged_environment_needs_nothing(tmp_path: Path) -> None:
    config = write_env(
        tmp_path,
        "equiv",
        f"equiv:\n  resources_servers:\n    equiv:\n      judge_model_server: {ref('policy_model')}\n",
    )
    assert model_server_problems(tmp_path, [config], set(), {}) == []


def test_an_undefined_server_and_nested_keys_are_found(tmp_path: Path) -> None:
    text = f"""
sim:
  resources_servers:
    sim:
      judges:
        retrieval_model_server: {ref("retriever")}
      user_model_server: {ref("retriever")}
"""
    [problem] = model_server_problems(tmp_path, [write_env(tmp_path, "sim", text)], set(), {})
    assert "'retriever' is not bound (no config of the run defines it)" in problem
    assert "sim (resources_servers/sim/configs/sim.yaml): judges.retrieval_model_server; sim" in problem
    assert problem.endswith("user_model_server; add --gym-model-server retriever=URL,model=SERVED_NAME"
                            "[,key=ENV_VAR][,type=responses|chat] (or retriever=policy to use the policy model's "
                            "endpoint)")  # fmt: skip


@pytest.mark.parametrize(
    ("url", "environ", "says"),
    [
        ("${oc.env:ARENA_URL,MISSING}", {}, "comes from $ARENA_URL, which is not set"),
        ("${oc.env:ARENA_URL}", {}, "comes from $ARENA_URL, which is not set"),
        ("${oc.env:ARENA_URL}", {"ARENA_URL": "http://h/v1"}, None),
        ("${oc.env:ARENA_URL,http://h/v1}", {}, None),
        ("http://<host_url>:8000/v1", {}, "is the placeholder"),
        ("'???'", {}, "is '???'"),
        ("https://integrate.api.nvidia.com/v1", {}, None),
        ("${oc.select:judge_base_url,null}", {}, "is ${judge_base_url}, which is not set"),
    ],
)
def test_a_defined_servers_url_is_usable_only_when_set(
    url: str, environ: dict[str, str], says: str | None, tmp_path: Path
) -> None:
    text = f"""
arena_judge:
  responses_api_models:
    vllm_model:
      base_url: {url}
arena:
  resources_servers:
    arena:
      judge_model_server: {ref("arena_judge")}
"""
    problems = model_server_problems(tmp_path, [write_env(tmp_path, "arena", text)], set(), environ)
    if says is None:
        assert problems == []
    else:
        assert len(problems) == 1 and says in problems[0], problems


def test_a_local_gpu_server_must_be_bound(tmp_path: Path) -> None:
    text = f"""
guard:
  responses_api_models:
    local_vllm_model:
      model: allenai/wildguard
xs:
  resources_servers:
    xs:
      judge_model_server: {ref("guard")}
"""
    [problem] = model_server_problems(tmp_path, [write_env(tmp_path, "xs", text)], set(), {})
    assert "local_vllm_model server, which serves model weights on a local GPU" in problem


def test_a_server_defined_in_another_config_of_the_run_counts(tmp_path: Path) -> None:
    judge = write_env(tmp_path, "judges", "judge_model:\n  responses_api_models:\n    openai_model:\n"
                      "      openai_base_url: http://127.0.0.1:9/v1\n")  # fmt: skip
    config = write_env(tmp_path, "refusal", STYLE_A.replace("judge_base_url: null\n", ""))
    assert len(model_server_problems(tmp_path, [config], set(), {})) == 1
    assert model_server_problems(tmp_path, [config, judge], set(), {}) == []


def test_the_report_meta_names_each_binding_without_a_key_or_password() -> None:
    from pytest_gym_eval.tasks.model_servers import model_server_meta

    bindings = (  # built directly: the parser refuses such a URL, which Gym's model client cannot call
        ModelServerBinding(
            "judge_model", url="https://u:hunter2@judge.example/v1", model="j", api_key_env="JUDGE_KEY", api="chat"
        ),
        ModelServerBinding("genrm_model", policy=True),
    )
    meta = model_server_meta(bindings, "openai_model")
    assert meta == {
        "model_server.judge_model.url": "https://u:***@judge.example/v1",
        "model_server.judge_model.model": "j",
        "model_server.judge_model.api_key_env": "JUDGE_KEY",
        "model_server.judge_model.type": "vllm_model",
        "model_server.genrm_model.bound_to": "policy",
    }
