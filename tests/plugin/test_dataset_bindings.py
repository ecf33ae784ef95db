"""A dataset binds a model server its environment names (``model_server=`` in ``gym_dataset_settings``): the
binding reaches Gym's config (an instance per environment where they differ, the environment's reference rewired
to it), satisfies the preflight for that dataset's environment only, and datasets sharing an environment must
agree; through the stand-in gym."""

from __future__ import annotations

import json

import pytest

from tests.plugin.test_preflight import usage_error_lines, write_dataset
from tests.support.fakes import FakeGym


def judged(environment: str) -> str:
    return (
        f"{environment}:\n  resources_servers:\n    {environment}:\n      entrypoint: app.py\n"
        "      judge_model_server: {type: responses_api_models, name: judge_model}\n"
        f"{environment}_simple_agent:\n  responses_api_agents:\n    simple_agent:\n      entrypoint: app.py\n"
        f"      resources_server: {{type: resources_servers, name: {environment}}}\n"
    )


@pytest.fixture
def two_judged(pytester: pytest.Pytester, fake_gym: FakeGym) -> list[str]:
    for environment in ("mcqa", "essay"):
        configs = fake_gym.checkout / "resources_servers" / environment / "configs"
        configs.mkdir(parents=True, exist_ok=True)
        (configs / f"{environment}.yaml").write_text(judged(environment))
    judge = pytester.path / "judge.jsonl"
    judge.write_text(json.dumps({"responses_create_params": {"input": "Judge?"}, "response": {"output": []}}) + "\n")
    return [write_dataset(pytester.path, "mcqa.jsonl", "a"), write_dataset(pytester.path, "essay.jsonl", "b")]


def settings(pytester: pytest.Pytester, *lines: str) -> None:
    quoted = ",\n    ".join(json.dumps(line) for line in lines)
    pytester.makepyprojecttoml(f"[tool.pytest.ini_options]\ngym_dataset_settings = [\n    {quoted},\n]\n")


def servers_config(pytester: pytest.Pytester) -> dict[str, object]:
    (servers,) = (pytester.path / "runs").glob("*/gym-policies.yaml")
    loaded: dict[str, object] = json.loads(servers.read_text())
    return loaded


def test_datasets_binding_one_judge_name_differently_get_an_instance_each(
    pytester: pytest.Pytester, fake_gym: FakeGym, two_judged: list[str]
) -> None:
    settings(
        pytester,
        "mcqa.jsonl: model_server=judge_model=replay:judge.jsonl",
        "essay.jsonl: model_server=judge_model=policy",
    )
    result = pytester.runpytest_subprocess(*fake_gym.args, *two_judged, "--gym-run-dir=runs", "--gym-report=r.json")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str() + result.stderr.str()
    config = servers_config(pytester)
    replayed = config["judge_model__mcqa"]["responses_api_models"]["openai_model"]  # type: ignore[index]
    assert replayed["openai_base_url"].startswith("http://127.0.0.1:") and replayed["openai_model"] == "replay"
    policy = config["judge_model__essay"]["responses_api_models"]["openai_model"]  # type: ignore[index]
    assert policy["openai_base_url"] == "${policy_base_url}"
    for environment in ("mcqa", "essay"):
        reference = config[environment]["resources_servers"][environment]["judge_model_server"]  # type: ignore[index]
        assert reference == {"type": "responses_api_models", "name": f"judge_model__{environment}"}
    assert "judge_model" not in config
    meta = json.loads((pytester.path / "r.json").read_text())["meta"]
    assert meta["model_server.judge_model__essay.bound_to"] == "policy"
    assert meta["model_server.judge_model__mcqa.bound_to"] == "replay"
    logs = sorted(p.name for p in (pytester.path / "runs").glob("*/logs/replay-model-server-*.jsonl"))
    assert logs == ["replay-model-server-judge_model__mcqa.jsonl"]


def test_a_dataset_binding_beats_the_command_lines_for_its_environment_only(
    pytester: pytest.Pytester, fake_gym: FakeGym, two_judged: list[str]
) -> None:
    settings(pytester, "mcqa.jsonl: model_server=judge_model=replay:judge.jsonl")
    result = pytester.runpytest_subprocess(
        *fake_gym.args, *two_judged, "--gym-run-dir=runs", "--gym-model-server=judge_model=policy"
    )
    assert result.ret == pytest.ExitCode.OK, result.stdout.str() + result.stderr.str()
    config = servers_config(pytester)
    assert config["judge_model"]["responses_api_models"]["openai_model"]["openai_base_url"] == "${policy_base_url}"  # type: ignore[index]
    assert config["mcqa"]["resources_servers"]["mcqa"]["judge_model_server"]["name"] == "judge_model__mcqa"  # type: ignore[index]
    assert "essay" not in config  # the command line's binding serves essay under the name itself


def test_a_dataset_binding_satisfies_the_preflight_for_its_own_environment_only(
    pytester: pytest.Pytester, fake_gym: FakeGym, two_judged: list[str]
) -> None:
    settings(pytester, "mcqa.jsonl: model_server=judge_model=policy")
    result = pytester.runpytest_subprocess(*fake_gym.args, *two_judged)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    (line,) = usage_error_lines(result)
    assert "the model server 'judge_model' is not bound" in line
    assert "named by essay (resources_servers/essay/configs/essay.yaml): judge_model_server" in line
    assert "mcqa (" not in line
    assert fake_gym.calls() == []


def test_datasets_sharing_an_environment_must_bind_it_alike(
    pytester: pytest.Pytester, fake_gym: FakeGym, two_judged: list[str]
) -> None:
    settings(
        pytester,
        "mcqa.jsonl: model_server=judge_model=policy",
        "essay.jsonl: agent=mcqa_simple_agent model_server=judge_model=replay:judge.jsonl",
    )
    result = pytester.runpytest_subprocess(*fake_gym.args, *two_judged)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    (line,) = usage_error_lines(result)
    assert "the datasets running the environment 'mcqa' bind its model server 'judge_model' differently" in line
    assert "mcqa.jsonl: bound_to=policy" in line and "essay.jsonl: bound_to=replay" in line
    assert fake_gym.calls() == []


def test_a_password_in_a_dataset_bindings_url_is_never_echoed(
    pytester: pytest.Pytester, fake_gym: FakeGym, two_judged: list[str]
) -> None:
    settings(pytester, "mcqa.jsonl: model_server=judge_model=http://u:hunter2@127.0.0.1:9/v1,modle=j")
    result = pytester.runpytest_subprocess(*fake_gym.args, *two_judged)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "model_server" in result.stderr.str()
    assert "hunter2" not in result.stdout.str() + result.stderr.str()


def policies(fake_gym: FakeGym) -> list[str]:
    return [
        f"--gym-checkout={fake_gym.checkout}", "-p", "no:cacheprovider",
        f"--gym-policy=base=replay:{fake_gym.recording}", f"--gym-policy=cand=replay:{fake_gym.recording}",
    ]  # fmt: skip


def test_a_policys_own_judge_is_served_through_a_copy_of_its_environment(
    pytester: pytest.Pytester, fake_gym: FakeGym, two_judged: list[str]
) -> None:
    """``NAME@POLICY``: the candidate's rollouts are scored by a copy of the environment whose judge is the
    candidate's binding; the baseline's keep the environment and the session's binding."""
    result = pytester.runpytest_subprocess(
        *policies(fake_gym), two_judged[0], "--gym-run-dir=runs", "--gym-report=r.json",
        "--gym-model-server=judge_model=policy", "--gym-model-server=judge_model@cand=replay:judge.jsonl",
    )  # fmt: skip
    assert result.ret == pytest.ExitCode.OK, result.stdout.str() + result.stderr.str()
    config = servers_config(pytester)
    assert config["judge_model"]["responses_api_models"]["openai_model"]["openai_base_url"] == "${policy_base_url}"  # type: ignore[index]
    mine = config["judge_model__cand"]["responses_api_models"]["openai_model"]  # type: ignore[index]
    assert mine["openai_base_url"].startswith("http://127.0.0.1:") and mine["openai_model"] == "replay"
    assert config["mcqa__cand"] == {  # a copy of the environment, its judge the candidate's
        "_copy": "mcqa",
        "resources_servers": {
            "mcqa": {"judge_model_server": {"type": "responses_api_models", "name": "judge_model__cand"}}
        },
    }
    agent = config["mcqa_simple_agent__cand"]["responses_api_agents"]["simple_agent"]  # type: ignore[index]
    assert agent["resources_server"] == {"type": "resources_servers", "name": "mcqa__cand"}
    assert agent["model_server"]["name"] == "cand_policy_model"
    assert "mcqa" not in config and "mcqa_simple_agent" not in config  # the baseline's stay as they are
    meta = json.loads((pytester.path / "r.json").read_text())["meta"]
    assert meta["model_server.judge_model__cand.bound_to"] == "replay"


@pytest.mark.parametrize(
    ("binding", "says"),
    [
        ("judge_model@other=policy", "'other' is no --gym-policy (base, cand)"),
        ("judge_model@base=policy", "'base' is the baseline policy"),
    ],
)
def test_a_binding_for_no_policy_or_the_baseline_is_a_usage_error(
    pytester: pytest.Pytester, fake_gym: FakeGym, two_judged: list[str], binding: str, says: str
) -> None:
    result = pytester.runpytest_subprocess(*policies(fake_gym), two_judged[0], f"--gym-model-server={binding}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert says in result.stderr.str()
    assert fake_gym.calls() == []


def test_a_verifier_with_a_judge_client_of_its_own_is_a_warning_naming_it_not_an_error(
    pytester: pytest.Pytester, fake_gym: FakeGym, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BENCH_JUDGE_KEY", "sk-never-shown-" + "x" * 12)
    (fake_gym.checkout / "resources_servers" / "mcqa" / "configs" / "mcqa.yaml").write_text(
        "mcqa:\n  resources_servers:\n    mcqa:\n      entrypoint: app.py\n"
        "      judge_base_url: ${oc.env:BENCH_JUDGE_URL,''}\n      judge_api_key: ${oc.env:BENCH_JUDGE_KEY,''}\n"
        "      judge_model: grok\n"
        "mcqa_simple_agent:\n  responses_api_agents:\n    simple_agent:\n      entrypoint: app.py\n"
    )
    name = write_dataset(pytester.path, "mcqa.jsonl", "a")
    result = pytester.runpytest_subprocess(*fake_gym.args, name)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str() + result.stderr.str()
    result.stdout.fnmatch_lines(
        [
            "gym: warning: judge endpoint not managed by pytest-gym-eval: the environment mcqa "
            "(resources_servers/mcqa/configs/mcqa.yaml) calls its judge with a client of its own configured by the "
            "keys judge_base_url, judge_api_key, judge_model of its resources server block; *"
        ]
    )
    assert "sk-never-shown" not in result.stdout.str() + result.stderr.str()


def test_a_replay_binding_with_type_chat_is_served_by_gyms_chat_model_server(
    pytester: pytest.Pytester, fake_gym: FakeGym, two_judged: list[str]
) -> None:
    result = pytester.runpytest_subprocess(
        *fake_gym.args,
        two_judged[0],
        "--gym-run-dir=runs",
        "--gym-model-server=judge_model=replay:judge.jsonl,type=chat",
    )
    assert result.ret == pytest.ExitCode.OK, result.stdout.str() + result.stderr.str()
    server = servers_config(pytester)["judge_model"]["responses_api_models"]  # type: ignore[index]
    assert "openai_model" not in server and "openai_model" in server.get("_delete_key", "openai_model")
    assert server["vllm_model"]["model"] == "replay" and server["vllm_model"]["base_url"].startswith(
        "http://127.0.0.1:"
    )


def test_failed_judge_calls_in_gyms_records_are_named_at_the_sessions_end(
    pytester: pytest.Pytester, fake_gym: FakeGym
) -> None:
    """A verifier that scores a failed judge call (over_refusal_detection: 0.5, "unclear") leaves no error: the
    session's end names the failed calls Gym's records hold, with the first one's error."""
    failed = {"responses_create_params": {}, "response": None, "error": "Judge HTTP 500: ValueError('boom')"}
    rows = [
        {
            "id": "t0",
            "responses_create_params": {"input": "Q0?"},
            "fake": {"reward": 0.5, "fields": {"judge_evaluation": failed}},
        },
        {"id": "t1", "responses_create_params": {"input": "Q1?"}, "fake": {"reward": 1.0}},
    ]
    (pytester.path / "mcqa.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    result = pytester.runpytest_subprocess(*fake_gym.args, "mcqa.jsonl", "-p", "no:randomly")
    result.stdout.fnmatch_lines(
        [
            "gym: warning: 1 of 1 judge calls in Gym's records failed (1 rollout); the first: Judge HTTP 500: "
            "ValueError('boom'); a verifier that scores a failed judge call instead of failing the rollout gave those "
            "rollouts its fallback reward"
        ]
    )
