"""The CI example (``examples/ci``): every shell step of its GitHub workflow and of its GitLab job is one call of
a step script in ``examples/ci/steps/``, and ``.ci/run`` runs the same scripts with the same parameters, so the
files users copy cannot drift from what CI runs for real."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from pytest_gym_eval import provision
from pytest_gym_eval.shard import assign_shards
from tests.support.fakes import make_fake_checkout, write_recording

ROOT = Path(__file__).resolve().parents[2]
CI = ROOT / "examples" / "ci"
STEPS = CI / "steps"
GITHUB = CI / "github-workflow.yml"
GITLAB = CI / "gitlab-ci.yml"
CI_RUN = ROOT / ".ci" / "run"
STEP_CALL = re.compile(r"^examples/ci/steps/([a-z_]+)\.sh$")
PARAMETERS = ("GYM_ENVIRONMENTS", "GYM_EVAL_DIR", "GYM_EVAL_ARGS")
"""The parameters that say what is evaluated: the same in both files and in ``.ci/run``."""


def load(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert isinstance(data, dict), path
    return data


def github_runs() -> list[str]:
    """Every ``run:`` of every step of every job of the GitHub workflow."""
    return [step["run"] for job in load(GITHUB)["jobs"].values() for step in job["steps"] if "run" in step]


def gitlab_script_lines() -> list[str]:
    """Every line of every ``before_script``, ``script`` and ``after_script`` of the GitLab pipeline."""
    lines: list[str] = []
    for job in load(GITLAB).values():
        if not isinstance(job, dict):
            continue
        for key in ("before_script", "script", "after_script"):
            value = job.get(key, [])
            lines += [value] if isinstance(value, str) else value
    return lines


def step_name(command: str) -> str:
    """``examples/ci/steps/NAME.sh`` -> NAME; fails for anything else."""
    match = STEP_CALL.match(command.strip())
    assert match is not None, f"{command!r} is not one call of a script in examples/ci/steps/"
    return match.group(1)


def ci_run_text() -> str:
    text = CI_RUN.read_text(encoding="utf-8")
    start, end = text.index("# ---- The CI example (examples/ci)"), text.index("# ---- end of the CI example")
    return text[start:end]


def test_every_github_run_step_is_one_step_script() -> None:
    names = [step_name(run) for run in github_runs()]
    assert set(names) == {"install", "provision", "evaluate", "merge"}
    for name in names:
        script = STEPS / f"{name}.sh"
        assert script.is_file() and os.access(script, os.X_OK), script


def test_every_gitlab_script_line_is_one_step_script() -> None:
    lines = gitlab_script_lines()
    assert lines
    assert {step_name(line) for line in lines} == {step_name(run) for run in github_runs()}


def test_ci_run_runs_the_same_step_scripts() -> None:
    called = set(re.findall(r"examples/ci/steps/([a-z_]+)\.sh", ci_run_text()))
    assert called == {step_name(run) for run in github_runs()}
    assert ".venv/bin/actionlint examples/ci/github-workflow.yml" in ci_run_text()


def test_the_parameters_agree_everywhere() -> None:
    github_env = load(GITHUB)["env"]
    gitlab_env = load(GITLAB)["variables"]
    exports = dict(re.findall(r"\b(GYM_[A-Z_]+)=(\S+)", ci_run_text()))
    for name in PARAMETERS:
        assert github_env[name] == gitlab_env[name] == exports[name], name
    assert github_env["GYM_VERSION"] == gitlab_env["GYM_VERSION"] == provision.DEFAULT_GYM_VERSION
    assert provision.gym_version_problem(github_env["GYM_VERSION"]) is None


def test_the_shard_matrix_matches_the_shard_count() -> None:
    workflow = load(GITHUB)
    shards = int(workflow["env"]["GYM_SHARDS"])
    evaluate = workflow["jobs"]["evaluate"]
    assert evaluate["strategy"]["matrix"]["shard"] == list(range(1, shards + 1))
    assert evaluate["env"]["GYM_SHARD"] == "${{ matrix.shard }}"
    assert load(GITLAB)["gym-evaluate"]["parallel"] == shards
    assert workflow["jobs"]["merge"]["needs"] == "evaluate"
    assert re.search(r"GYM_SHARD=\$shard GYM_SHARDS=" + str(shards) + r"\b", ci_run_text())


def _read_variables(script: Path) -> set[str]:
    text = script.read_text(encoding="utf-8")
    if re.search(r'^\. "\$\(dirname "\$0"\)/common\.sh"$', text, re.M):
        text += (STEPS / "common.sh").read_text(encoding="utf-8")
    return set(re.findall(r"\$\{([A-Z_]+)[:}]", text))


@pytest.mark.parametrize("name", ["install", "provision", "evaluate", "merge"])
def test_every_parameter_the_workflow_sets_is_read_by_the_steps(name: str) -> None:
    """Each GYM_* variable the workflow sets (workflow or job level) is read by some step script: a parameter
    renamed on one side only fails here."""
    workflow = load(GITHUB)
    names = set(workflow["env"]) | {key for job in workflow["jobs"].values() for key in job.get("env", {})}
    read = set().union(
        *(_read_variables(STEPS / f"{step}.sh") for step in ("install", "provision", "evaluate", "merge"))
    )
    for variable in sorted(n for n in names if n.startswith("GYM_")):
        assert variable in read, f"{variable} is set by the workflow but read by no step script"
    assert _read_variables(STEPS / f"{name}.sh"), name


def test_the_cache_is_keyed_on_the_gym_release_and_the_environments() -> None:
    jobs = load(GITHUB)["jobs"]
    caches = [
        step["with"]
        for job in jobs.values()
        for step in job["steps"]
        if step.get("uses", "").startswith("actions/cache")
    ]
    assert len(caches) == 2 and caches[0] == caches[1]  # provision saves what evaluate restores
    assert "env.GYM_VERSION" in caches[0]["key"] and "env.GYM_ENVIRONMENTS" in caches[0]["key"]
    assert caches[0]["path"].startswith("~/.cache/pytest-gym-eval")  # the plugin's default cache folder
    gitlab = load(GITLAB)
    assert "$GYM_VERSION" in gitlab[".gym-cache"]["key"] and "$GYM_ENVIRONMENTS" in gitlab[".gym-cache"]["key"]
    assert gitlab["variables"]["PYTEST_GYM_EVAL_CACHE"] == "$CI_PROJECT_DIR/.cache/pytest-gym-eval"
    assert ".cache/pytest-gym-eval" in gitlab[".gym-cache"]["paths"]


def test_the_reports_are_published() -> None:
    merge = load(GITHUB)["jobs"]["merge"]
    uses = {step.get("uses", "").split("@")[0]: step for step in merge["steps"]}
    assert uses["EnricoMi/publish-unit-test-result-action"]["with"]["files"].endswith("/junit.xml")
    uploaded = uses["actions/upload-artifact"]["with"]["path"].replace("${{ env.GYM_EVAL_OUT }}", "out").split()
    assert {Path(p).name for p in uploaded} == {"report.html", "report.json", "junit.xml", "summary.md"}
    gitlab = load(GITLAB)["gym-merge"]["artifacts"]
    assert gitlab["reports"]["junit"] == "gym-eval-out/junit.xml"
    assert {Path(p).name for p in gitlab["paths"]} == {Path(p).name for p in uploaded}
    merge_script = (STEPS / "merge.sh").read_text(encoding="utf-8")
    for name in ("junit.xml", "report.json", "report.html", "summary.md"):
        assert f"$out/{name}" in merge_script, name


def test_the_step_scripts_are_bash_with_errexit() -> None:
    for script in sorted(STEPS.glob("*.sh")):
        text = script.read_text(encoding="utf-8")
        if script.name == "common.sh":
            continue
        assert text.startswith("#!/usr/bin/env bash\n"), script
        assert "\nset -euo pipefail\n" in text, script
        assert shlex.split(text.splitlines()[0])  # a shebang line that parses


def test_the_readme_ci_section_starts_from_the_workflow() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("\n## CI\n") : readme.index("\n## ", readme.index("\n## CI\n") + 1)]
    for path in ("examples/ci/", "examples/ci/github-workflow.yml", "examples/ci/gitlab-ci.yml"):
        assert f"]({path})" in section, path
    assert "0.6.0 to 0.7.x" in section and "(`>=0.6.0, <0.8`" in section
    assert provision.SUPPORTED_GYM_VERSIONS == ">=0.6.0, <0.8"


# ---------------------------------------------------------------------------------------------------------
# The step scripts run against the stand-in gym (.ci/run runs them against real Gym)

TASKS = ("t1", "t2", "t3", "t4", "t5", "t6")


def _rewards() -> dict[str, float]:
    """Every task of shard 1 of 2 right, one of shard 2's: mean 0.67 over all, 0.33 on shard 2's share."""
    owners = assign_shards("data.jsonl", TASKS, 2)
    second = [task for task in TASKS if owners[task] == 2]
    return {task: 0.0 if task in second[1:] else 1.0 for task in TASKS}


def _provisioned_fake(cache: Path, version: str) -> Path:
    """A stand-in checkout where ``provision`` looks for Gym ``version`` in ``cache``, with a valid manifest, so the
    steps' ``provision`` returns it at once (as from a restored CI cache)."""
    checkout = make_fake_checkout(cache / "fake")
    target = provision.default_checkout_path(version)
    assert target.parent == cache
    checkout.rename(target)
    gym = target / ".venv" / "bin" / "gym"
    manifest = {
        "format_version": provision.MANIFEST_FORMAT, "gym_version": version, "checkout": str(target),
        "gym_executable": str(gym), "environments": ["mcqa"], "env": {}, "path_prepend": [], "xdg_config_dir": None,
    }  # fmt: skip
    (target / provision.STATE_DIR).mkdir()
    (target / provision.STATE_DIR / provision.MANIFEST_NAME).write_text(json.dumps(manifest), encoding="utf-8")
    return target


@pytest.fixture
def steps_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The environment the step scripts get: a "venv" whose python is this one, the stand-in Gym provisioned in
    a cache of its own, and an evaluation folder with a dataset whose gate (mean reward >= 0.6) passes over all
    tasks while one of 2 shards' share fails it."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("PYTEST_GYM_EVAL_CACHE", str(cache))
    _provisioned_fake(cache, provision.DEFAULT_GYM_VERSION)
    venv_bin = tmp_path / "venv" / "bin"
    venv_bin.mkdir(parents=True)
    (venv_bin / "python").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n', encoding="utf-8")
    (venv_bin / "python").chmod(0o755)
    project = tmp_path / "project"
    project.mkdir()
    rewards = _rewards()
    owners = assign_shards("data.jsonl", TASKS, 2)
    shares = [[rewards[task] for task in TASKS if owners[task] == shard] for shard in (1, 2)]
    assert min(sum(share) / len(share) for share in shares) < 0.6 <= sum(rewards.values()) / len(TASKS)
    rows = [
        {"id": task, "responses_create_params": {"input": f"Q {task}"}, "fake": {"reward": reward}}
        for task, reward in rewards.items()
    ]
    (project / "data.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    (project / "pytest.ini").write_text(
        "[pytest]\ngym_datasets = data.jsonl\ngym_dataset_settings =\n    data.jsonl: min_mean_reward=0.6\n"
    )
    recording = write_recording(tmp_path / "recording_rollouts.jsonl")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GYM_", "GITHUB_", "CI_NODE_"))}
    env.update(
        GYM_EVAL_VENV=str(tmp_path / "venv"), GYM_EVAL_DIR=str(project), GYM_EVAL_OUT=str(tmp_path / "out"),
        GYM_VERSION=provision.DEFAULT_GYM_VERSION, GYM_ENVIRONMENTS="mcqa",
        GYM_EVAL_ARGS=f"--gym-replay={recording} --gym-agent=mcqa_simple_agent -p no:cacheprovider",
        PYTEST_GYM_EVAL_CACHE=str(cache),
        PYTHONPATH=os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep),
        GITHUB_STEP_SUMMARY=str(tmp_path / "step-summary.md"),
    )  # fmt: skip
    return env


def _step(name: str, env: dict[str, str], **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(STEPS / f"{name}.sh")], cwd=ROOT, env={**env, **extra}, capture_output=True, text=True, timeout=300
    )


def test_shards_leave_the_verdict_to_the_merge(steps_env: dict[str, str], tmp_path: Path) -> None:
    out = tmp_path / "out"
    for shard in ("1", "2"):
        result = _step("evaluate", steps_env, GYM_SHARD=shard, GYM_SHARDS="2")
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
        for name in ("junit", "report", "summary"):
            assert list(out.glob(f"{name}-{shard}.*")), (name, shard)
    failed = [json.loads((out / f"report-{shard}.json").read_text())["session"]["exit_status"] for shard in (1, 2)]
    assert sorted(failed) == [0, 1]  # one shard's share failed the gate; its step said so and went on
    merged = _step("merge", steps_env)
    assert merged.returncode == 0, merged.stdout[-3000:] + merged.stderr[-2000:]
    report = json.loads((out / "report.json").read_text())
    assert report["session"]["exit_status"] == 0 and report["datasets"][0]["rollouts"] == 6
    assert {p.name for p in out.iterdir()} >= {"junit.xml", "report.json", "summary.md"}
    assert (tmp_path / "step-summary.md").read_text().count("### Gym eval: ") == 3  # 2 shards and the merge


def test_an_unsharded_evaluation_returns_pytests_exit_status(steps_env: dict[str, str], tmp_path: Path) -> None:
    passing = _step("evaluate", steps_env)
    assert passing.returncode == 0, passing.stdout[-3000:]
    assert (tmp_path / "out" / "report.json").is_file() and (tmp_path / "out" / "junit.xml").is_file()
    failing = _step("evaluate", steps_env, GYM_EVAL_ARGS=steps_env["GYM_EVAL_ARGS"] + " --gym-min-mean-reward=0.9")
    assert failing.returncode == 1, failing.stdout[-3000:]
    assert "pytest exit status 1" in failing.stdout


def test_provision_refuses_a_release_outside_the_range(steps_env: dict[str, str]) -> None:
    result = _step("provision", steps_env, GYM_VERSION="0.5.1")
    assert result.returncode == 1
    assert "Gym 0.5.1 is not supported: this pytest-gym-eval supports NeMo Gym 0.6.0 to 0.7.x" in result.stderr


def test_merge_without_shard_reports_fails(steps_env: dict[str, str]) -> None:
    result = _step("merge", steps_env)
    assert result.returncode == 2 and "no shard reports (report-*.json)" in result.stderr
