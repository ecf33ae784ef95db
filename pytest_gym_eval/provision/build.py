"""``provision``: make sure a checkout of one Gym release with the server venvs of some environments exists, building
it in seven named steps under an exclusive lock (see the package docstring).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from glob import escape as glob_escape
from pathlib import Path
from typing import Any

from pytest_gym_eval.provision import python
from pytest_gym_eval.provision.checkout import (
    GymCheckout,
    base_environment,
    checkout_env,
    checkout_from_manifest,
    gym_environment,
)
from pytest_gym_eval.provision.environments import (
    DEFAULT_ENVIRONMENTS,
    PREFETCH_ARGS,
    missing_tools,
    normalise_environments,
    relative,
    resolve_environments,
)
from pytest_gym_eval.provision.errors import ProvisionError
from pytest_gym_eval.provision.host import abspath, cache_root, default_checkout_path, lock_path, require_platform
from pytest_gym_eval.provision.manifest import (
    BUILD_MARKER,
    MANIFEST_FORMAT,
    STATE_DIR,
    manifest_path,
    read_manifest,
    write_manifest,
)
from pytest_gym_eval.provision.sdist import download_sdist, find_sdist, unpack
from pytest_gym_eval.provision.steps import Build, Step, error_lines, log_stderr, utc_now
from pytest_gym_eval.provision.versions import (
    DEFAULT_GYM_VERSION,
    format_version,
    read_requires_python,
    require_supported_gym,
)

_VERSION_RE = re.compile(r"^[0-9A-Za-z][0-9A-Za-z.+!_-]*$")


@contextlib.contextmanager
def _exclusive_lock(path: Path, log: Callable[[str], None]) -> Iterator[None]:
    import fcntl  # POSIX only: imported here, never when the plugin loads (see platform_problem)

    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log(f"pytest-gym-eval provision: waiting for another provisioning process (lock {path}) ...")
            start = time.monotonic()
            fcntl.flock(fd, fcntl.LOCK_EX)
            log(f"pytest-gym-eval provision: got the lock after {time.monotonic() - start:.1f} s")
        yield
    finally:
        os.close(fd)  # releases the lock; the file stays (unlinking lock files races)


def _prefetch(
    checkout: GymCheckout, configs: Mapping[str, Sequence[Path]], step: Step, log: Callable[[str], None]
) -> dict[str, str]:
    """``gym env prefetch --config <config>`` for each config of each environment (``configs`` as
    ``resolve_environments`` gives them), one call per config, as ``gym env start --config`` will load it.

    An environment that fails does not stop the others: returns ``{environment: why}`` for each one that
    failed (the command, its exit status and the log lines stating the error, see :func:`error_lines`)."""
    run_dir = checkout.path / STATE_DIR / "run" / "prefetch"
    failed: dict[str, str] = {}
    for name, paths in configs.items():
        start = step.fh.tell()
        try:
            for config in paths:
                step.write(f"--- environment {name}: {config}")
                _prefetch_config(checkout, config, step, gym_environment(checkout, run_dir))
        except ProvisionError as error:
            try:
                with open(step.log_path, encoding="utf-8", errors="replace") as handle:
                    handle.seek(start)
                    quoted = error_lines(handle.read())
            except OSError:
                quoted = []
            failed[name] = str(error) + "".join(f"\n      {line}" for line in quoted)
            log(f"pytest-gym-eval provision: [prefetch] {name} failed: {quoted[0] if quoted else error}")
            continue
        shown = ", ".join(relative(path, checkout.path) for path in paths)
        log(f"pytest-gym-eval provision: [prefetch] {name} ready ({shown})")
    return failed


UNSET_VALUE = re.compile(r"references\s+'([A-Za-z_][A-Za-z0-9_]*)',\s+which is not set")
"""Gym's complaint about a top-level value a config interpolates and nobody set (``judge_base_url`` in an
environment whose judge is a model server of its own): what the session binds at run time
(``--gym-model-server``), not what prefetching server venvs needs."""
UNDEFINED_SERVER = re.compile(
    r"references\s+responses_api_models/'([A-Za-z_][A-Za-z0-9_]*)',\s+which\s+is\s+not\s+defined"
)
"""Gym's complaint about a model server a resources server names and no config of the environment defines
(``judge_model`` of physics_judge, simpleqa's ``genrm_model``): bound by the session at run time
(``--gym-model-server``)."""
PLACEHOLDER_TRIES = 8


def placeholder_server(name: str) -> list[str]:
    """Overrides that define the model server ``name`` as an ``openai_model`` at an address nothing listens on, for
    a prefetch (which builds venvs and calls no model)."""
    fields = {"entrypoint": "app.py", "openai_base_url": "http://127.0.0.1:9/v1", "openai_api_key": "unused",
              "openai_model": "unused"}  # fmt: skip
    return [f"++{name}.responses_api_models.openai_model.{key}={value}" for key, value in fields.items()]


def _prefetch_config(checkout: GymCheckout, config: Path, step: Step, env: Mapping[str, str]) -> None:
    """``gym env prefetch --config config``; when Gym refuses the config for a value it interpolates and nobody
    set (:data:`UNSET_VALUE`, e.g. a judge's ``judge_base_url``), again with that value set to a placeholder
    (``++judge_base_url=unused``), and for a model server it names and no config defines (:data:`UNDEFINED_SERVER`,
    physics_judge's ``judge_model``) with that server defined at a placeholder address (:func:`placeholder_server`):
    prefetching builds venvs and never calls a model. Raises :class:`ProvisionError` as :meth:`Step.run` does when
    it still fails (or after :data:`PLACEHOLDER_TRIES` placeholders)."""
    placeholders: list[str] = []
    for _ in range(PLACEHOLDER_TRIES):
        start = step.fh.tell()
        cmd = [str(checkout.gym_executable), "env", "prefetch", "--config", str(config), *PREFETCH_ARGS, *placeholders]
        try:
            step.run(cmd, cwd=checkout.path, env=dict(env))
            return
        except ProvisionError:
            with open(step.log_path, encoding="utf-8", errors="replace") as handle:
                handle.seek(start)
                said = handle.read()
            if (unset := UNSET_VALUE.search(said)) is not None:
                name, added = unset.group(1), [f"++{unset.group(1)}=unused"]
            elif (undefined := UNDEFINED_SERVER.search(said)) is not None:
                name, added = undefined.group(1), placeholder_server(undefined.group(1))
            else:
                raise
            if added[0] in placeholders:
                raise
            placeholders += added
            step.write(f"(prefetch again with {name} set to a placeholder: nothing is called at prefetch)")
    raise ProvisionError(f"prefetch of {config}: more than {PLACEHOLDER_TRIES} unset values", step="prefetch")


def _prefetch_failure(failed: Mapping[str, str], log_path: Path, ready: Sequence[str]) -> ProvisionError:
    """One error for every environment whose prefetch failed (each with the log lines stating its error), naming
    the log and the environments that are ready nonetheless."""
    lines = [f"provision step 'prefetch' failed for {len(failed)} environment{'s' if len(failed) != 1 else ''}:"]
    lines += [f"  {name}: {why}" for name, why in failed.items()]
    lines.append(f"  log: {log_path}")
    if ready:
        lines.append(f"  ready nonetheless: {', '.join(ready)}")
    return ProvisionError("\n".join(lines), step="prefetch", log_path=log_path)


@dataclass
class _Plan:
    version: str
    checkout: Path
    environments: list[str]
    log: Callable[[str], None]
    cache: Path = field(default_factory=cache_root)


def provision(
    version: str = DEFAULT_GYM_VERSION,
    dest: Path | None = None,
    environments: Sequence[str] = DEFAULT_ENVIRONMENTS,
    *,
    log: Callable[[str], None] = log_stderr,
) -> GymCheckout:
    """Make sure a Gym ``version`` checkout with the server venvs of ``environments`` exists; return it.

    ``dest`` is the checkout folder (default ``default_checkout_path(version)``). ``log`` receives progress
    lines (default: printed to stderr), including each step's start and duration in seconds.

    When the checkout's manifest is valid and lists every requested environment this returns at once (no
    lock, no network, no subprocess: only a check that the gym executable exists). When only environments
    are missing it runs ``prefetch`` for those and rewrites the manifest. Otherwise it deletes a half-built
    checkout (one with ``.pytest-gym-eval/provisioning`` but no valid manifest) and builds from scratch. All
    of this happens under an exclusive lock on ``<dest>.lock``; a second process waits for it.

    Raises ``ProvisionError`` naming the failed step and its log (with the log's last lines), or when
    ``dest`` exists but was not made by ``provision`` (it is never deleted), or on a platform Gym cannot run
    on (see ``platform_problem``). A missing tool (uv, a Python satisfying Gym's ``requires-python``, git for
    an environment that installs from git) or an environment without configs (see ``environment_configs``)
    is reported before the sdist or any package is downloaded. ``KeyboardInterrupt`` kills the running step's
    subprocess and propagates; no manifest is written.

    ``environments`` are resources servers as ``gym env start --resources-server`` names them (``mcqa``,
    ``format_verification/citation_format``); a server without a default config (``equivalence_rule``) stands
    for all its configs that define a resources server.
    """
    require_platform()
    if not _VERSION_RE.match(version):
        raise ProvisionError(f"invalid Gym version {version!r}")
    require_supported_gym(version, "--gym-version")
    envs = normalise_environments(environments)
    checkout = abspath(dest) if dest is not None else default_checkout_path(version)
    manifest, _ = read_manifest(checkout, version)
    if manifest is not None and all(e in manifest["environments"] for e in envs):
        return checkout_from_manifest(manifest)
    with _exclusive_lock(lock_path(checkout), log):
        return _provision_locked(_Plan(version, checkout, envs, log))


def _provision_locked(plan: _Plan) -> GymCheckout:
    checkout, log = plan.checkout, plan.log
    manifest, why = read_manifest(checkout, plan.version)
    if manifest is not None:
        missing = [e for e in plan.environments if e not in manifest["environments"]]
        if not missing:
            log(f"pytest-gym-eval provision: {checkout} is ready (provisioned by another process)")
            return checkout_from_manifest(manifest)
        build = Build(checkout / STATE_DIR / "logs", log)
        current = checkout_from_manifest(manifest)
        with build.step("prefetch") as step:
            configs = resolve_environments(checkout, missing)
            if problems := missing_tools(checkout, configs):
                raise ProvisionError(f"missing tool: {'; '.join(problems)}")
            failed = _prefetch(current, configs, step, log)
            prefetch_log = step.log_path
        missing = [name for name in missing if name not in failed]
        configs = {name: paths for name, paths in configs.items() if name not in failed}
        updated = dict(manifest)
        updated["environments"] = [*manifest["environments"], *missing]
        updated["environment_configs"] = {
            **(manifest.get("environment_configs") or {}),
            **{name: [relative(p, checkout) for p in paths] for name, paths in configs.items()},
        }
        updated["step_seconds"] = {
            **(manifest.get("step_seconds") or {}),
            "prefetch": build.seconds["prefetch"],
        }
        updated["updated"] = utc_now()
        write_manifest(checkout, updated)
        if failed:
            raise _prefetch_failure(failed, prefetch_log, updated["environments"])
        return checkout_from_manifest(updated)

    _remove_stale_trash(checkout)
    if checkout.exists():
        if not checkout.is_dir():
            raise ProvisionError(f"{checkout} exists and is not a folder; choose another --dest")
        if _made_by_provision(checkout):
            what = "is not usable" if manifest_path(checkout).exists() else "is half-built"
            log(f"pytest-gym-eval provision: {checkout} {what} ({why}): deleting it and rebuilding from scratch")
            # Rename first, so an interrupted delete never leaves a checkout without its marker.
            trash = checkout.with_name(f"{checkout.name}.deleting-{os.getpid()}")
            os.replace(checkout, trash)
            shutil.rmtree(trash, ignore_errors=True)
        elif any(checkout.iterdir()):
            raise ProvisionError(
                f"{checkout} exists but was not made by `python -m pytest_gym_eval provision` (no "
                f"{STATE_DIR}/{BUILD_MARKER}); refusing to delete it. Choose another --dest, remove it, or "
                "use it directly as a checkout if it is a uv-synced Gym clone"
            )
    return _build(plan)


def _made_by_provision(checkout: Path) -> bool:
    """The build marker exists, or the folder holds nothing but an empty STATE_DIR (a crash right after
    creating it, before the marker was written)."""
    state = checkout / STATE_DIR
    if (state / BUILD_MARKER).exists():
        return True
    return [p.name for p in checkout.iterdir()] == [STATE_DIR] and state.is_dir() and not any(state.iterdir())


def _remove_stale_trash(checkout: Path) -> None:
    """Delete ``<checkout>.deleting-*`` folders left by an interrupted delete (the caller holds the lock)."""
    if checkout.parent.is_dir():
        for trash in checkout.parent.glob(f"{glob_escape(checkout.name)}.deleting-*"):
            shutil.rmtree(trash, ignore_errors=True)


def _build(plan: _Plan) -> GymCheckout:
    checkout, log, cache = plan.checkout, plan.log, plan.cache
    state = checkout / STATE_DIR
    state.mkdir(parents=True, exist_ok=True)
    (state / BUILD_MARKER).write_text(f"started {utc_now()} by pid {os.getpid()}\n", encoding="utf-8")
    uv_cache, tmp = cache / "uv-cache", cache / "tmp"
    for folder in (uv_cache, tmp):
        folder.mkdir(parents=True, exist_ok=True)
    build = Build(state / "logs", log)
    total_start = time.monotonic()

    # Everything that can be missing is looked for before the sdist (44 MB) is downloaded: uv first (before
    # any index request), then the index's entry for the sdist, then a Python for its requires-python.
    with build.step("preflight") as step:
        uv = python.find_uv()
        uv_version = python.uv_version(uv, step, cache)
        step.write(f"uv {format_version(uv_version)} at {uv}")
        sdist = find_sdist(plan.version, step)
        candidates, searched = python.discover_pythons(uv, sdist.requires_python, step, cache)
        if sdist.requires_python is not None:
            python.check_uv_for(python.choose_interpreter(sdist.requires_python, candidates, searched), uv, uv_version)
        else:
            step.write("the index gives no requires-python: the interpreter is chosen after unpacking")

    with build.step("download") as step:
        sdist_path = download_sdist(sdist, cache / "sdists", step)

    with build.step("unpack") as step:
        unpack(sdist_path, checkout, step)
        if not (checkout / "nemo_gym").is_dir():
            raise ProvisionError(f"{sdist.filename} has no nemo_gym/ folder: not a Gym sdist")
        configs = resolve_environments(checkout, plan.environments)
        for name, paths in configs.items():
            step.write(f"environment {name}: {', '.join(relative(p, checkout) for p in paths)}")
        if problems := missing_tools(checkout, configs):
            raise ProvisionError(f"missing tool: {'; '.join(problems)}")

    with build.step("python") as step:
        pyproject = checkout / "pyproject.toml"
        requires_python = read_requires_python(pyproject) if pyproject.exists() else None
        step.write(f"requires-python: {requires_python!r}")
        if requires_python != sdist.requires_python:
            step.write(f"(the index said {sdist.requires_python!r}: looking for interpreters again)")
            candidates, searched = python.discover_pythons(uv, requires_python, step, cache)
        choice = python.choose_interpreter(requires_python, candidates, searched)
        python.check_uv_for(choice, uv, uv_version)
        step.write(f"chosen: {choice}")
        uv_bin = state / "bin"
        uv_bin.mkdir(parents=True, exist_ok=True)
        (uv_bin / "uv").symlink_to(uv)  # a folder holding only uv: nothing else shadows Gym's PATH
        xdg_dir: Path | None = None
        if choice.workaround:
            xdg_dir = state / "xdg"
            (xdg_dir / "uv").mkdir(parents=True, exist_ok=True)
            uv_toml = xdg_dir / "uv" / "uv.toml"
            uv_toml.write_text(
                "# Written by pytest-gym-eval provision: no interpreter satisfies requires-python here.\n"
                f'[pip]\npython-version = "{choice.pretend_version}"\n',
                encoding="utf-8",
            )
            warning = (
                f"warning: no Python satisfies Gym's requires-python {requires_python!r}; using "
                f"{choice.path} (Python {format_version(choice.version)}) and telling uv it is "
                f"{choice.pretend_version} "
                f"(uv pip install --python-version {choice.pretend_version}, and {uv_toml} via "
                "XDG_CONFIG_DIRS for the server venvs Gym builds). Install Python "
                f"{choice.pretend_version} to avoid this workaround."
            )
            step.write(warning)
            log(f"pytest-gym-eval provision: {warning}")

    env: dict[str, str] = {
        "UV_PYTHON_DOWNLOADS": "never",
        "UV_CACHE_DIR": str(uv_cache),
        "TMPDIR": str(tmp),
    }
    path_prepend = [str(uv_bin), str(choice.path.parent)]
    partial_manifest: dict[str, Any] = {
        "env": env,
        "path_prepend": path_prepend,
        "xdg_config_dir": str(xdg_dir) if xdg_dir else None,
    }
    gym = checkout / ".venv" / "bin" / "gym"
    current = GymCheckout(checkout, gym, plan.version, checkout_env(partial_manifest), ())

    with build.step("venv") as step:
        sub_env = base_environment()
        sub_env.update(current.env)
        venv = checkout / ".venv"
        venv_python = venv / "bin" / "python"
        if choice.workaround or not (checkout / "uv.lock").exists():
            uvs = str(uv)
            step.run([uvs, "venv", "--python", str(choice.path), str(venv)], cwd=checkout, env=sub_env)
            install = [uvs, "pip", "install", "--python", str(venv_python)]
            if choice.pretend_version:
                install += ["--python-version", choice.pretend_version]
            if (checkout / "uv.lock").exists():
                reqs = state / "requirements.txt"
                export = ["export", "--frozen", "--no-hashes", "--no-emit-project", "--extra", "dev"]
                step.run([uvs, *export, "-o", str(reqs)], cwd=checkout, env=sub_env)
                install += ["-r", str(reqs)]
            else:
                step.write("note: the checkout has no uv.lock; dependencies are resolved afresh")
            step.run([*install, "-e", ".[dev]"], cwd=checkout, env=sub_env)
        else:
            cmd = [str(uv), "sync", "--frozen", "--extra", "dev", "--python", str(choice.path)]
            step.run(cmd, cwd=checkout, env=sub_env)
        if not gym.exists():
            raise ProvisionError(f"the venv has no gym executable ({gym} missing)")

    with build.step("prefetch") as step:
        failed = _prefetch(current, configs, step, log)
        prefetch_log = step.log_path
        if len(failed) == len(configs):  # nothing is ready: no manifest, the next run rebuilds
            raise _prefetch_failure(failed, prefetch_log, [])
    configs = {name: paths for name, paths in configs.items() if name not in failed}

    with build.step("manifest") as step:
        seconds = dict(build.seconds)
        seconds["total"] = round(time.monotonic() - total_start, 3)
        manifest: dict[str, Any] = {
            "format_version": MANIFEST_FORMAT,
            "gym_version": plan.version,
            "checkout": str(checkout),
            "sdist": {"filename": sdist.filename, "sha256": sdist.sha256, "path": str(sdist_path)},
            "python": {
                "path": str(choice.path),
                "version": format_version(choice.version),
                "requires_python": requires_python,
                "workaround": choice.workaround,
                "pretend_version": choice.pretend_version,
            },
            "gym_executable": str(gym),
            "environments": [name for name in plan.environments if name not in failed],
            "environment_configs": {name: [relative(p, checkout) for p in paths] for name, paths in configs.items()},
            "env": {
                **env,
                "PATH": current.env["PATH"],
                **({"XDG_CONFIG_DIRS": current.env["XDG_CONFIG_DIRS"]} if xdg_dir else {}),
            },
            "path_prepend": path_prepend,
            "xdg_config_dir": str(xdg_dir) if xdg_dir else None,
            "uv": {"path": str(uv), "version": format_version(uv_version), "link": str(uv_bin / "uv")},
            "created": utc_now(),
            "step_seconds": seconds,
        }
        write_manifest(checkout, manifest)
        step.write(f"wrote {manifest_path(checkout)}")
    log(f"pytest-gym-eval provision: {checkout} ready in {time.monotonic() - total_start:.1f} s")
    if failed:
        raise _prefetch_failure(failed, prefetch_log, manifest["environments"])
    return checkout_from_manifest(manifest)
