"""The CI example's step scripts run as a fresh runner runs them (the workflows read as files:
tests/unit/test_ci_workflow.py). .ci/run runs them against real Gym."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_gym_eval import provision
from pytest_gym_eval.tasks.shard import assign_shards
from tests.support.fakes import make_fake_checkout, write_recording

ROOT = Path(__file__).resolve().parents[2]


CI = ROOT / "examples" / "ci"


STEPS = CI / "steps"


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


def _fake_python(path: Path, version: str) -> Path:
    """An interpreter that says it is Python ``version`` (all the key script asks it)."""
    path.write_text(f"#!/bin/sh\necho {version}\n", encoding="utf-8")
    path.chmod(0o755)
    return path


def test_the_cache_key_is_safe_and_follows_the_python_and_the_package(
    steps_env: dict[str, str], tmp_path: Path
) -> None:
    def key(**extra: str) -> str:
        result = _step("cache_key", steps_env, **extra)
        assert result.returncode == 0, result.stderr
        (line,) = result.stdout.splitlines()
        assert line.startswith("key="), line
        return line.removeprefix("key=")

    old = _fake_python(tmp_path / "python-old", "3.13.5")
    new = _fake_python(tmp_path / "python-new", "3.13.6")
    spec = "pytest-gym-eval[provision]>=0.1,<0.2"
    keys = {
        "plain": key(GYM_EVAL_PYTHON=str(old)),
        "comma": key(GYM_EVAL_PYTHON=str(old), GYM_EVAL_PACKAGE=spec),
        "slash": key(GYM_EVAL_PYTHON=str(old), GYM_ENVIRONMENTS="mcqa format_verification/citation_format"),
        "path": key(GYM_EVAL_PYTHON=str(old), GYM_EVAL_PACKAGE="/src/pytest-gym-eval[provision]"),
        "python": key(GYM_EVAL_PYTHON=str(new)),
        "version": key(GYM_EVAL_PYTHON=str(old), GYM_VERSION="0.6.0"),
    }
    for name, value in keys.items():
        assert re.fullmatch(r"[A-Za-z0-9._-]+", value), (name, value)
    assert len(set(keys.values())) == len(keys)  # each change gives another cache
    assert "py3.13.5" in keys["plain"] and "py3.13.6" in keys["python"] and "gym0.6.0" in keys["version"]
    assert key(GYM_EVAL_PYTHON=str(old)) == keys["plain"]  # and the same inputs the same cache
    written = tmp_path / "github-output"
    _step("cache_key", steps_env, GYM_EVAL_PYTHON=str(old), GITHUB_OUTPUT=str(written))
    assert written.read_text() == f"key={keys['plain']}\n"


def test_the_cache_key_names_the_gym_release_the_installed_plugin_provisions(
    steps_env: dict[str, str], tmp_path: Path
) -> None:
    # GYM_VERSION unset: the key said "gymdefault", which stays the same when an upgraded plugin provisions
    # another release (its checkout then never reaches an immutable GitHub cache).
    unset = {k: v for k, v in steps_env.items() if k != "GYM_VERSION"}
    python = str(_fake_python(tmp_path / "python", "3.13.5"))
    default = _step("cache_key", unset, GYM_EVAL_PYTHON=python)
    given = _step("cache_key", steps_env, GYM_EVAL_PYTHON=python, GYM_VERSION=provision.DEFAULT_GYM_VERSION)
    assert default.returncode == given.returncode == 0, default.stderr + given.stderr
    assert f"-gym{provision.DEFAULT_GYM_VERSION}-" in default.stdout and "default" not in default.stdout
    assert default.stdout == given.stdout
    missing = _step("cache_key", unset, GYM_EVAL_PYTHON=python, GYM_EVAL_VENV=str(tmp_path / "no-venv"))
    assert missing.returncode == 1 and missing.stdout == ""
    assert "GYM_VERSION is unset" in missing.stderr and "run install.sh first" in missing.stderr


def test_an_empty_shard_passes_and_the_merge_counts_it(steps_env: dict[str, str], tmp_path: Path) -> None:
    # 8 shards over 6 tasks: at least two shards have no task, and a CI matrix runs them all the same.
    owners = assign_shards("data.jsonl", TASKS, 8)
    empty = sorted(set(range(1, 9)) - set(owners.values()))
    assert empty
    out = tmp_path / "out"
    for shard in range(1, 9):
        result = _step("evaluate", steps_env, GYM_SHARD=str(shard), GYM_SHARDS="8")
        assert result.returncode == 0, (shard, result.stdout[-3000:] + result.stderr[-2000:])
        assert (out / f"report-{shard}.json").is_file(), shard
    assert json.loads((out / f"report-{empty[0]}.json").read_text())["rollouts"] == []
    merged = _step("merge", steps_env)
    assert merged.returncode == 0, merged.stdout[-3000:] + merged.stderr[-2000:]
    assert "has no report" not in merged.stdout
    assert json.loads((out / "report.json").read_text())["datasets"][0]["rollouts"] == 6


def test_the_merge_appends_the_run_to_the_history(steps_env: dict[str, str], tmp_path: Path) -> None:
    for shard in ("1", "2"):
        assert _step("evaluate", steps_env, GYM_SHARD=shard, GYM_SHARDS="2").returncode == 0
    history = tmp_path / "history.sqlite"
    merged = _step("merge", steps_env, GYM_EVAL_HISTORY=str(history))
    assert merged.returncode == 0, merged.stdout[-3000:] + merged.stderr[-2000:]
    assert "gym history:" in merged.stdout
    runs = subprocess.run(
        [sys.executable, "-m", "pytest_gym_eval", "history", str(history), "runs"],
        env=steps_env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert "1 run in" in runs.stdout, runs.stdout
