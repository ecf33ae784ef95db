"""What ``python -m pytest_gym_eval status`` says of each warm Gym, ready or starting."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from pytest_gym_eval.core.rundir import RunPaths
from pytest_gym_eval.gym.orphans import Owner
from pytest_gym_eval.warm.registry import (
    KEY_SHOWN,
    Entry,
    Registry,
    idle_since,
    live_leases,
    read_json,
)
from pytest_gym_eval.warm.spec import (
    WarmSpec,
)


def describe(entry: Entry, now: float | None = None) -> list[str]:
    """The lines ``status`` prints for one warm Gym."""
    now = time.time() if now is None else now
    problem = entry.problem()
    if problem is not None:
        state = f"stale: {problem}"
    else:
        users = live_leases(entry.home)
        since = idle_since(entry.home)
        if users:
            pids = ", ".join(str(user.pid) for user in users)
            state = f"in use by {len(users)} session{'s' if len(users) != 1 else ''} (pid {pids})"
        elif since is not None:
            left = max(0.0, entry.idle_timeout - (now - since))
            state = f"idle for {_minutes(now - since)}, stops in {_minutes(left)}"
        else:
            state = "idle"
    config = entry.configuration
    model = entry.model
    if (config.get("model") or {}).get("replay") is not None:
        model_text = f"{model['model_type']}, replay model at {model['url']}"
    else:
        model_text = f"{model['model_type']} {model['model']!r} at {model['url']} (key from ${model['api_key_env']})"
    host, port = entry.head_server
    return [
        f"{entry.short}  {state}",
        f"    head server {host}:{port}; keeper pid {entry.keeper_owner.pid}; up {_minutes(now - entry.started)} "
        f"(started in {entry.ready_after:.0f} s); idle timeout {entry.idle_timeout:g} s",
        _gym_line(config),
        f"    model: {model_text}",
        f"    home: {entry.home}",
    ]


def _gym_line(config: dict[str, Any]) -> str:
    """The ``status`` line naming a warm Gym's release, checkout and agent config files."""
    return f"    Gym {config.get('gym_version')} at {config.get('gym_checkout')}; configs: " + ", ".join(
        sorted(config.get("configs") or {})
    )


def _minutes(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"


def starting(registry: Registry) -> list[tuple[Path, WarmSpec, Owner]]:
    """The warm Gyms of ``registry`` that are starting: ``(home, spec, keeper)`` of every home whose keeper runs
    (its ``keeper.json``) and that no entry names yet (an entry is written once Gym is ready), oldest first."""
    gyms = registry.root / "gyms"
    if not gyms.is_dir():
        return []
    registered = {entry.home for entry in registry.entries()}
    found = []
    for home in sorted(gyms.iterdir()):
        if home in registered:
            continue
        keeper = Owner.parse(str((read_json(RunPaths(home).keeper) or {}).get("keeper", "")))
        if keeper is None or not keeper.alive():
            continue
        try:
            spec = WarmSpec.load(RunPaths(home).warm_spec)
        except (OSError, ValueError, TypeError, KeyError):
            continue
        found.append((home, spec, keeper))
    return sorted(found, key=lambda found: found[0].stat().st_mtime)


def describe_starting(home: Path, spec: WarmSpec, keeper: Owner, now: float | None = None) -> list[str]:
    """The lines ``status`` prints for a warm Gym that is starting."""
    now = time.time() if now is None else now
    config = spec.configuration
    return [
        f"{spec.key[:KEY_SHOWN]}  starting for {_minutes(now - home.stat().st_mtime)} (its Gym is not ready yet)",
        f"    keeper pid {keeper.pid}; log: {RunPaths(home).keeper_log}; start-up timeout "
        f"{spec.startup_timeout:g} s; idle timeout {spec.idle_timeout:g} s",
        _gym_line(config),
        f"    home: {home}",
    ]
