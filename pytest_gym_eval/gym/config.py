"""The Gym config a run writes (the policy model's endpoint, the head server, observability, a Ray cluster to
join), the Gym config files that define an agent, and the folder Ray keeps its sockets in."""

from __future__ import annotations

import json
import os
import re
import tempfile
from dataclasses import dataclass
from glob import escape as glob_escape
from pathlib import Path

from pytest_gym_eval.core.credentials import config_url, has_secret, url_variable
from pytest_gym_eval.core.rundir import RunPaths

NO_KEY = "no-key"
"""The API key Gym gets when the key's environment variable is unset (loopback and keyless vLLM servers)."""


@dataclass(frozen=True)
class ModelEndpoint:
    """The policy model Gym's servers call: ``url`` is an OpenAI-style base URL ending in ``/v1``.

    ``api_key_env`` names the environment variable holding the key; the key itself is never stored here.
    """

    url: str
    model: str
    model_type: str
    api_key_env: str

    def environment(self, policy: str | None = None) -> dict[str, str]:
        """What Gym's environment needs for the URL a config file holds
        (:func:`~pytest_gym_eval.core.credentials.config_url`): ``{variable: url}`` when the URL holds a secret (a
        ``user:password@``, a ``?password=``), else nothing. ``policy``: another ``--gym-policy`` than the first."""
        return {url_variable(policy): self.url} if has_secret(self.url) else {}

    def api_key(self) -> str | None:
        """The key from the environment, or None when the variable is unset or empty."""
        return os.environ.get(self.api_key_env) or None


RAY_SOCKET_SUFFIX = len("/ray/session_2026-11-30_04-17-08_264037_4194304/sockets/") + len("dash_TaskEventsHead")
"""The longest path Ray puts under its ``RAY_TMPDIR``: a session folder (its PID up to 7 digits) and, in it, the
longest socket name (Ray 2.58's: ``plasma_store``, ``raylet``, and ``dash_<module>`` for each dashboard module, the
longest ``dash_TaskEventsHead``). A socket path over :data:`AF_UNIX_PATH_MAX` does not stop Ray's start: the
dashboard module fails, and Ray waits 60 s for the dashboard before it goes on without it."""
AF_UNIX_PATH_MAX = 107


def ray_temp_dir(run_dir: Path) -> tuple[Path, bool]:
    """A folder for Ray's files (``RAY_TMPDIR``) and whether it was made outside ``run_dir``.

    Ray puts Unix sockets under it, and a socket path may not exceed 107 bytes, so a deep run directory gets
    a short folder under the system temp dir instead, linked from ``<run_dir>/ray``; remove it at the end.
    """
    inside = RunPaths(run_dir).ray
    if len(str(inside)) + RAY_SOCKET_SUFFIX <= AF_UNIX_PATH_MAX:
        inside.mkdir(parents=True, exist_ok=True)
        return inside, False
    short = Path(tempfile.mkdtemp(prefix="gym-ray-", dir="/tmp" if os.path.isdir("/tmp") else None))
    inside.symlink_to(short, target_is_directory=True)
    return short, True


def find_agent_config(checkout: Path, agent: str, resources_server: str | None = None) -> Path | None:
    """The Gym config file in ``checkout`` that defines ``agent`` as a top-level key, or None.

    Looks in ``resources_servers/*/configs/*.yaml`` first, then in ``benchmarks/`` and ``environments/``; with
    ``resources_server`` only in that resources server's ``configs/`` folder, or, named as Gym names one flavor
    (``format_verification/citation_format``), only in that config. Configs are found by the agent they define,
    so one not named after its folder (``equivalence_rule/configs/lc.yaml``) is found too. When several configs of
    one folder define it, the one named after its resources server (``math_with_judge/configs/math_with_judge.yaml``,
    the config ``gym env start --resources-server math_with_judge`` loads) wins over the others in name order
    (``dapo17k.yaml`` also defines ``math_with_judge_simple_agent``, with its judge left ``???``).
    """
    pattern = re.compile(rf"^{re.escape(agent)}:\s*(#.*)?$", re.MULTILINE)
    server, _, flavor = (resources_server or "").partition("/")
    globs = (
        (f"resources_servers/{glob_escape(server)}/configs/{glob_escape(flavor) if flavor else '*'}.yaml",)
        if resources_server
        else ("resources_servers/*/configs/*.yaml", "benchmarks/**/*.yaml", "environments/**/*.yaml")
    )
    for glob in globs:
        for path in sorted(checkout.glob(glob), key=_own_config_first):
            try:
                if pattern.search(path.read_text(encoding="utf-8", errors="replace")):
                    return path
            except OSError:
                continue
    return None


def _own_config_first(path: Path) -> tuple[str, bool, str]:
    """Sort key of a config path: by folder, and in a resources server's ``configs/`` its own (``X/configs/X.yaml``)
    first."""
    return (str(path.parent), path.stem != path.parent.parent.name, path.name)


def write_gym_config(
    path: Path,
    model: ModelEndpoint | None,
    head_server: tuple[str, int],
    capture_dir: Path | None = None,
    ray_address: str | None = None,
) -> None:
    """Write the Gym config for this run (JSON, which Gym's YAML loader reads).

    The API key enters only as the interpolation ``${oc.env:<VAR>}``, resolved inside Gym's processes from
    their environment, so it never appears in argv, in this file or in Gym's printed config; so does a URL holding
    a password (:func:`~pytest_gym_eval.core.credentials.config_url`; Gym's environment needs
    :meth:`ModelEndpoint.environment`). With
    ``capture_dir`` (an absolute folder) Gym's model-call observability is on (``observability_enabled``,
    ``model_call_capture_dir``): Gym then records each rollout's latency (``ng_perf.total_latency_ms``).

    ``ray_address`` (``HOST:PORT`` of an existing cluster's GCS) becomes Gym's ``ray_head_node_address``: Gym
    0.7.0's ``initialize_ray`` (``nemo_gym/server_utils.py``) then calls ``ray.init(address=...)`` to join
    that cluster instead of starting its own, and hands the address to every server that uses Ray; at exit
    it shuts down only a cluster it started itself (``maybe_ray_cluster_exit``), so the cluster outlives
    the run.
    """
    config: dict[str, object] = {"head_server": {"host": head_server[0], "port": head_server[1]}}
    if capture_dir is not None:
        config["observability_enabled"] = True
        config["model_call_capture_dir"] = str(capture_dir.resolve())
    if ray_address is not None:
        config["ray_head_node_address"] = ray_address
    if model is not None:
        config["policy_base_url"] = config_url(model.url, url_variable())
        config["policy_model_name"] = model.model
        config["policy_api_key"] = f"${{oc.env:{model.api_key_env}}}" if model.api_key() else NO_KEY
    path.write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")


def head_server_of(path: Path) -> str | None:
    """``"host:port"`` of the head server the Gym config at ``path`` (:func:`write_gym_config`) names; None when
    the file is missing or holds none (a pytest-xdist worker reads the address the controller's run uses)."""
    try:
        head = json.loads(path.read_text(encoding="utf-8"))["head_server"]
        return f"{head['host']}:{int(head['port'])}"
    except (OSError, ValueError, KeyError, TypeError):
        return None
