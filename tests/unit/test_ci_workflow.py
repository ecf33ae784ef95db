"""The CI example (``examples/ci``): every shell step of its GitHub workflow and of its GitLab job is one call of
a step script in ``examples/ci/steps/``, and ``.ci/run`` runs the same scripts with the same parameters, so the
files users copy cannot drift from what CI runs for real."""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

from pytest_gym_eval import provision

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
    assert set(names) == {"cache_key", "install", "provision", "evaluate", "merge"}
    for name in names:
        script = STEPS / f"{name}.sh"
        assert script.is_file() and os.access(script, os.X_OK), script


def test_every_gitlab_script_line_is_one_step_script() -> None:
    lines = gitlab_script_lines()
    assert lines
    # GitLab computes no cache key by script (its key is the release alone): every other step is the same.
    assert {step_name(line) for line in lines} == {step_name(run) for run in github_runs()} - {"cache_key"}


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


@pytest.mark.parametrize("name", ["cache_key", "install", "provision", "evaluate", "merge"])
def test_every_parameter_the_workflow_sets_is_read_by_the_steps(name: str) -> None:
    """Each GYM_* variable the workflow sets (workflow or job level) is read by some step script: a parameter
    renamed on one side only fails here."""
    workflow = load(GITHUB)
    names = set(workflow["env"]) | {key for job in workflow["jobs"].values() for key in job.get("env", {})}
    read = set().union(
        *(_read_variables(STEPS / f"{step}.sh") for step in ("cache_key", "install", "provision", "evaluate", "merge"))
    )
    for variable in sorted(n for n in names if n.startswith("GYM_")):
        assert variable in read, f"{variable} is set by the workflow but read by no step script"
    assert _read_variables(STEPS / f"{name}.sh"), name


def test_the_gym_cache_key_comes_from_the_key_script() -> None:
    # A key that interpolates the pip spec breaks on a comma (actions/cache) or a '/' (GitLab), and one without
    # the Python version restores a venv whose interpreter a new runner image no longer has: the key script
    # (tests/plugin/test_ci_workflow_steps.py runs it) gives one from all of them, in characters both accept.
    jobs = load(GITHUB)["jobs"]
    caches = []
    for name in ("provision", "evaluate"):
        steps = jobs[name]["steps"]
        (at,) = [i for i, step in enumerate(steps) if step.get("uses", "").startswith("actions/cache")]
        key_step = next(step for step in steps if step.get("id") == "gym-cache")
        assert step_name(key_step["run"]) == "cache_key" and steps.index(key_step) < at, name
        # The key names the Gym release the installed plugin provisions when GYM_VERSION is unset: install first.
        install = next(i for i, step in enumerate(steps) if "run" in step and step_name(step["run"]) == "install")
        assert install < steps.index(key_step), name
        caches.append(steps[at]["with"])
    assert caches[0] == caches[1]  # provision saves what evaluate restores
    assert caches[0]["key"] == "${{ steps.gym-cache.outputs.key }}"
    assert caches[0]["path"].startswith("~/.cache/pytest-gym-eval")  # the plugin's default cache folder
    gitlab = load(GITLAB)
    # GitLab computes no key by script: the release alone, which holds no '/', and provision.sh keeps it current.
    assert gitlab[".gym-cache"]["key"] == "gym-$GYM_VERSION"
    assert gitlab["gym-provision"]["cache"]["policy"] == "pull-push"
    assert gitlab["variables"]["PYTEST_GYM_EVAL_CACHE"] == "$CI_PROJECT_DIR/.cache/pytest-gym-eval"
    assert ".cache/pytest-gym-eval" in gitlab[".gym-cache"]["paths"]


def test_the_api_key_reaches_only_the_evaluate_step() -> None:
    workflow = load(GITHUB)
    assert "OPENAI_API_KEY" not in workflow["env"]
    holders = []
    for job_name, job in workflow["jobs"].items():
        assert "OPENAI_API_KEY" not in job.get("env", {}), job_name
        holders += [(job_name, step.get("run")) for step in job["steps"] if "OPENAI_API_KEY" in step.get("env", {})]
    assert holders == [("evaluate", "examples/ci/steps/evaluate.sh")]
    assert "secrets." not in GITHUB.read_text(encoding="utf-8").replace(
        "OPENAI_API_KEY: ${{ secrets.OPENAI_API_KEY }}", ""
    )
    assert load(GITLAB)["gym-evaluate"]["environment"]["name"] == "gym-eval"  # the variable's scope


def test_a_rerun_shard_replaces_its_artifact() -> None:
    for job in load(GITHUB)["jobs"].values():
        for step in job["steps"]:
            if step.get("uses", "").startswith("actions/upload-artifact"):
                assert step["with"]["overwrite"] is True, step


def test_the_merge_keeps_the_history_in_a_cache_saved_by_the_default_branch() -> None:
    workflow = load(GITHUB)
    history = workflow["env"]["GYM_EVAL_HISTORY"]
    steps = workflow["jobs"]["merge"]["steps"]
    names = [step.get("uses", "").split("@")[0] or step_name(step["run"]) for step in steps]
    restore, merge, save = (names.index(n) for n in ("actions/cache/restore", "merge", "actions/cache/save"))
    assert restore < merge < save
    assert steps[restore]["with"]["path"] == steps[save]["with"]["path"] == "${{ env.GYM_EVAL_HISTORY }}"
    assert steps[restore]["with"]["key"] == steps[save]["with"]["key"]
    assert steps[save]["with"]["key"].startswith(steps[restore]["with"]["restore-keys"])
    assert "github.event.repository.default_branch" in steps[save]["if"]
    gitlab = load(GITLAB)
    assert gitlab["variables"]["GYM_EVAL_HISTORY"] == history
    assert gitlab["gym-merge"]["cache"]["paths"] == [history]
    assert gitlab["variables"]["GYM_HISTORY_CACHE_POLICY"] == "pull"
    assert gitlab["gym-merge"]["rules"][0]["variables"]["GYM_HISTORY_CACHE_POLICY"] == "pull-push"
    assert "GYM_EVAL_HISTORY" in _read_variables(STEPS / "merge.sh")


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
