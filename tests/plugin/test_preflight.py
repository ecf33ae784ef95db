"""Configuration errors are usage errors: what can be checked before Gym starts (an agent no config defines, an
environment or a model server the checkout lacks, Gym's own ``pyproject.toml`` taken as the configuration) ends
the session at collection with one message and exit status 4, never as an error on every item."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from pytest_gym_eval.session import preflight
from tests.support.fakes import FakeGym, make_fake_checkout


def write_dataset(folder: Path, name: str, *task_ids: str) -> str:
    rows = [
        {"id": t, "responses_create_params": {"input": f"Question {t}?"}, "fake": {"reward": 1.0}} for t in task_ids
    ]
    (folder / name).write_text("".join(json.dumps(row) + "\n" for row in rows))
    return name


def usage_error_lines(result: pytest.RunResult) -> list[str]:
    return [line for line in result.errlines if line.startswith("ERROR:")]


@pytest.mark.parametrize("xdist", [[], ["-n", "2"]], ids=["one-process", "xdist"])
def test_a_dataset_whose_agent_no_config_defines_is_one_usage_error(
    pytester: pytest.Pytester, fake_gym: FakeGym, xdist: list[str]
) -> None:
    name = write_dataset(pytester.path, "quiz.jsonl", "a", "b", "c")
    result = pytester.runpytest_subprocess(*fake_gym.args, "-rA", name, "--gym-min-mean-reward=0.5", *xdist)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    (line,) = [line for line in result.errlines + result.outlines if "defines the agent" in line]
    assert "'quiz_simple_agent' (used by quiz.jsonl)" in line and "the agents it defines: mcqa_simple_agent" in line
    assert "--gym-agent" in line
    assert fake_gym.calls() == []  # before Gym starts
    assert not any(line.startswith(("ERROR quiz", "FAILED quiz", "PASSED quiz")) for line in result.outlines)
    assert "gym reward summary" not in result.stdout.str()


def test_an_unknown_model_type_is_one_usage_error_naming_the_model_servers(
    pytester: pytest.Pytester, fake_gym: FakeGym
) -> None:
    for model in ("openai_model", "vllm_model", "vllm_model.egg-info"):  # a build's leftover is no model server
        (fake_gym.checkout / "responses_api_models" / model).mkdir(parents=True)
    name = write_dataset(pytester.path, "mcqa.jsonl", "a", "b")
    result = pytester.runpytest(*fake_gym.args, name, "--gym-model-type=anthropic")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert usage_error_lines(result) == [
        "ERROR: --gym-model-type: this Gym has no model server 'anthropic' (openai_model, vllm_model)"
    ]
    assert fake_gym.calls() == []
    # Attached to running servers (--gym-head-server), the model is theirs: nothing to check it against.
    attached = pytester.runpytest(
        *fake_gym.args, name, "--gym-model-type=anthropic", "--gym-head-server=127.0.0.1:9", "--gym-startup-timeout=1"
    )
    assert attached.ret != pytest.ExitCode.USAGE_ERROR


def test_an_environment_the_checkout_lacks_is_one_usage_error(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    pytester.makeini("[pytest]\ngym_dataset_settings =\n    mcqa.jsonl: resources_server=elsewhere\n")
    name = write_dataset(pytester.path, "mcqa.jsonl", "a")
    result = pytester.runpytest(*fake_gym.args, name)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    (line,) = usage_error_lines(result)
    assert "resources_server=elsewhere" in line and "has no environment 'elsewhere'" in line and line.endswith("mcqa")
    assert fake_gym.calls() == []


def test_a_row_agent_ref_no_config_defines_is_a_usage_error(pytester: pytest.Pytester, fake_gym: FakeGym) -> None:
    row = {"id": "own", "responses_create_params": {"input": "Q?"}, "agent_ref": {"name": "nonexistent_agent"}}
    (pytester.path / "mcqa.jsonl").write_text(json.dumps(row) + "\n")
    result = pytester.runpytest(*fake_gym.args, "mcqa.jsonl")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    (line,) = usage_error_lines(result)
    assert "defines the agent 'nonexistent_agent' (used by mcqa.jsonl)" in line
    # --collect-only lists the items whatever the configuration: nothing would start Gym.
    assert pytester.runpytest(*fake_gym.args, "mcqa.jsonl", "--collect-only").ret == pytest.ExitCode.OK


def test_a_gym_checkout_given_with_a_space_is_not_silently_the_configuration(pytester: pytest.Pytester) -> None:
    checkout = make_fake_checkout(pytester.path)
    (checkout / "pyproject.toml").write_text('[tool.pytest.ini_options]\naddopts = "--strict-markers"\n')
    project = pytester.mkdir("project")
    (project / "pytest.ini").write_text("[pytest]\n")
    (project / "datasets").mkdir()
    write_dataset(project / "datasets", "mcqa.jsonl", "a")
    os.chdir(project)
    result = pytester.runpytest("--collect-only", "-q", "--gym-checkout", str(checkout), "datasets/mcqa.jsonl")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    (line,) = usage_error_lines(result)
    assert f"Gym's own {checkout}/pyproject.toml" in line
    assert f"--gym-checkout={checkout}" in line
    # With '=' pytest never takes the checkout for a path to test: the project's own configuration holds.
    fine = pytester.runpytest("--collect-only", "-q", f"--gym-checkout={checkout}", "datasets/mcqa.jsonl")
    assert fine.ret == pytest.ExitCode.OK and "datasets/mcqa.jsonl::a[r0]" in fine.outlines


def test_defined_agents_reads_the_checkouts_configs(tmp_path: Path) -> None:
    checkout = make_fake_checkout(tmp_path, ("mcqa", "math"))
    assert preflight.defined_agents(checkout) == ["math_simple_agent", "mcqa_simple_agent"]
    assert preflight.defined_agents(checkout, "math") == ["math_simple_agent"]
    assert preflight.environments(checkout) == ["math", "mcqa"]
    assert preflight.model_types(checkout) is None


def test_a_long_list_names_the_closest(tmp_path: Path) -> None:
    names = [f"env{i}_simple_agent" for i in range(40)] + ["mcqa_simple_agent"]
    assert preflight.named(sorted(names), "mcq_simple_agent") == "41 in all, the closest: mcqa_simple_agent"
    assert preflight.named(["a", "b"], "c") == "a, b"
    assert preflight.named(sorted(names), "zzz").startswith("41 in all, e.g. env0_simple_agent")
    # a typo inside the shared suffix: found by the name's leading part, not lost among the suffix's look-alikes
    assert preflight.named(sorted(names), "mcqa_simpel_agent") == "41 in all, the closest: mcqa_simple_agent"


@pytest.mark.parametrize("problem", ["missing", "not-a-checkout", "half-built"])
def test_a_gym_checkout_that_is_no_checkout_is_one_usage_error(pytester: pytest.Pytester, problem: str) -> None:
    """--gym-checkout names a folder the session uses as it is (it never builds it): a typo or an unbuilt folder
    is one usage error before Gym starts, never "Gym would not start" on every item."""
    checkout = pytester.path / "gym"
    if problem != "missing":
        checkout.mkdir()
    if problem == "half-built":
        (checkout / ".pytest-gym-eval").mkdir()
        (checkout / ".pytest-gym-eval" / "provisioning").write_text("")
    name = write_dataset(pytester.path, "quiz.jsonl", "a", "b")
    result = pytester.runpytest_subprocess(f"--gym-checkout={checkout}", name, "-p", "no:randomly")
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.outlines[-20:]
    (line,) = usage_error_lines(result)
    expected = {"missing": "no such folder", "not-a-checkout": "is not a NeMo Gym checkout", "half-built": "half-built"}
    assert line.startswith("ERROR: --gym-checkout") and expected[problem] in line, line
    assert not any("quiz.jsonl::" in line for line in result.outlines)  # no item ran, none errored


JUDGED_MCQA = (
    "mcqa:\n  resources_servers:\n    mcqa:\n      entrypoint: app.py\n"
    "      judge_model_server: {type: responses_api_models, name: judge_model}\n"
    "mcqa_simple_agent:\n  responses_api_agents:\n    simple_agent:\n      entrypoint: app.py\n"
)


def test_an_unbound_judge_is_one_usage_error_and_a_binding_reaches_gyms_config(
    pytester: pytest.Pytester, fake_gym: FakeGym
) -> None:
    (fake_gym.checkout / "resources_servers" / "mcqa" / "configs" / "mcqa.yaml").write_text(JUDGED_MCQA)
    name = write_dataset(pytester.path, "mcqa.jsonl", "a", "b")
    result = pytester.runpytest_subprocess(*fake_gym.args, name)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    (line,) = usage_error_lines(result)
    assert "the model server 'judge_model' is not bound (no config of the run defines it)" in line
    assert "named by mcqa (resources_servers/mcqa/configs/mcqa.yaml): judge_model_server" in line
    assert "add --gym-model-server judge_model=URL,model=SERVED_NAME" in line
    assert fake_gym.calls() == []

    bound = pytester.runpytest_subprocess(
        *fake_gym.args, name, "--gym-model-server=judge_model=policy", "--gym-run-dir=runs"
    )
    assert bound.ret == pytest.ExitCode.OK, bound.stdout.str()
    (servers,) = (pytester.path / "runs").glob("*/gym-policies.yaml")
    block = json.loads(servers.read_text())["judge_model"]["responses_api_models"]
    assert block["openai_model"]["openai_base_url"] == "${policy_base_url}"


def test_a_binding_no_selected_environment_names_is_a_warning_naming_what_they_name(
    pytester: pytest.Pytester, fake_gym: FakeGym
) -> None:
    """A misspelt ``judge_modle=...`` beside the right binding is served and called by no rollout: the session says
    so before the start, naming the model servers the environments do name, and runs."""
    (fake_gym.checkout / "resources_servers" / "mcqa" / "configs" / "mcqa.yaml").write_text(JUDGED_MCQA)
    name = write_dataset(pytester.path, "mcqa.jsonl", "a")
    bindings = ["--gym-model-server=judge_model=policy", "--gym-model-server=judge_modle=policy"]
    result = pytester.runpytest_subprocess(*fake_gym.args, name, *bindings)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "*warning: --gym-model-server judge_modle: no config of the selected environments names the model server"
            " 'judge_modle' (they name judge_model); it is served, and no rollout of this run calls it*"
        ]
    )
    assert "--gym-model-server judge_model:" not in result.stdout.str()


def test_a_replay_binding_serves_the_judge_from_a_loopback_replay_server(
    pytester: pytest.Pytester, fake_gym: FakeGym
) -> None:
    """``--gym-model-server NAME=replay:FILE``: the session starts a replay server for ``NAME`` and Gym's config
    binds ``NAME`` to it (loopback URL, the replay model, no key); the run passes."""
    (fake_gym.checkout / "resources_servers" / "mcqa" / "configs" / "mcqa.yaml").write_text(JUDGED_MCQA)
    name = write_dataset(pytester.path, "mcqa.jsonl", "a")
    judge = pytester.path / "judge.jsonl"
    judge.write_text(json.dumps({"responses_create_params": {"input": "Judge?"}, "response": {"output": []}}) + "\n")
    result = pytester.runpytest_subprocess(
        *fake_gym.args, name, "--gym-model-server=judge_model=replay:judge.jsonl", "--gym-run-dir=runs"
    )
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    (servers,) = (pytester.path / "runs").glob("*/gym-policies.yaml")
    block = json.loads(servers.read_text())["judge_model"]["responses_api_models"]["openai_model"]
    assert block["openai_base_url"].startswith("http://127.0.0.1:")
    assert (block["openai_model"], block["openai_api_key"]) == ("replay", "no-key")
    assert "not supported yet" not in result.stdout.str() + result.stderr.str()


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--gym-model-server=judge_model"], "--gym-model-server 'judge_model': expected NAME=URL,model=SERVED_NAME"),
        (["--gym-model-server=policy_model=http://h/v1,model=m"], "is the policy model's server"),
        (
            ["--gym-model-server=judge_model=policy", "--gym-head-server=127.0.0.1:9"],
            "cannot be combined with --gym-head-server",
        ),
    ],
)
def test_a_bad_model_server_binding_is_a_usage_error_naming_the_option(
    pytester: pytest.Pytester, fake_gym: FakeGym, args: list[str], says: str
) -> None:
    name = write_dataset(pytester.path, "mcqa.jsonl", "a")
    result = pytester.runpytest_subprocess(*fake_gym.args, name, *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert says in result.stderr.str()
    assert fake_gym.calls() == []


def test_a_bound_endpoint_that_does_not_answer_stops_the_start_naming_it(
    pytester: pytest.Pytester, fake_gym: FakeGym
) -> None:
    from pytest_gym_eval.gym.processes import free_port

    (fake_gym.checkout / "resources_servers" / "mcqa" / "configs" / "mcqa.yaml").write_text(JUDGED_MCQA)
    name = write_dataset(pytester.path, "mcqa.jsonl", "a")
    judge = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    result = pytester.runpytest_subprocess(
        *fake_gym.args, name, f"--gym-model-server=judge_model={judge},model=j", "--gym-startup-timeout=2"
    )
    assert result.ret != pytest.ExitCode.OK
    assert f"the model endpoint {judge} (model server judge_model) did not answer GET /models" in result.stdout.str()
    assert not any(call.get("argv", [None])[:1] == ["env"] for call in fake_gym.calls()), fake_gym.calls()
