"""``python -m pytest_gym_eval stop [--all] [KEY ...]``: stop warm Gyms (``--gym-keep-alive``) now
(:mod:`pytest_gym_eval.warm`)."""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence

from pytest_gym_eval import cli
from pytest_gym_eval.gym.orphans import find_leftovers, stop_leftovers
from pytest_gym_eval.gym.processes import DEFAULT_GRACE, grace_seconds
from pytest_gym_eval.warm.registry import Registry, live_leases, stop_warm


def main(argv: Sequence[str]) -> int:
    """``python -m pytest_gym_eval stop [--all] [KEY ...]``: stop warm Gyms now. Without arguments the ones no
    session uses (and stale ones); ``KEY`` (a prefix of one key, as ``status`` shows it) that one; a Gym that
    sessions are using is left running unless ``--all`` is given (their pending rollouts would error), and
    ``--all`` alone stops every one. Also stops what dead keepers left running. Exit status 0; 1 when something
    would not stop, a KEY matches no Gym or more than one, or a KEY names a Gym in use (left running without
    ``--all``); 2 for an empty KEY (an unset shell variable)."""
    parser = argparse.ArgumentParser(
        prog="python -m pytest_gym_eval stop",
        description="Stop warm Gyms (--gym-keep-alive) now: by default those no session uses.",
    )
    parser.add_argument("keys", nargs="*", metavar="KEY", help="key prefixes, as `status` shows them")
    parser.add_argument(
        "--all", action="store_true", help="also stop warm Gyms sessions are using (every one, or the KEYs named)"
    )
    parser.add_argument(
        "--grace",
        type=grace_seconds,
        default=DEFAULT_GRACE,
        help="seconds Gym gets after SIGINT (default: %(default)s)",
    )
    args = parser.parse_args(argv)
    if any(not key.strip() for key in args.keys):
        parser.error("a KEY is empty (an unset shell variable?): name a key as `status` shows it, or none")
    registry = Registry()
    status = 0
    entries = registry.entries()
    chosen = entries
    if args.keys:
        chosen = []
        for key in args.keys:
            matches = [entry for entry in entries if entry.key.startswith(key)]
            if not matches:
                cli.error("stop", f"no warm Gym's key starts with {key!r}")
                status = 1
            elif len(matches) > 1:
                shown = ", ".join(entry.short for entry in matches)
                cli.error("stop", f"{key!r} starts {len(matches)} warm Gyms' keys ({shown}): give more of the key")
                status = 1
            else:
                chosen += [entry for entry in matches if entry not in chosen]
    for entry in chosen:
        try:
            with registry.lock(entry.key, deadline=time.monotonic() + 60):
                current = registry.read(entry.key)
                if current is None or current.keeper != entry.keeper:
                    continue  # it stopped, or was replaced, meanwhile
                users = live_leases(current.home) if current.problem(check_head=False) is None else []
                if users and not args.all:
                    print(f"{current.short}: in use by {len(users)} session(s), left running (--all stops it too)")
                    if args.keys:  # named, yet not stopped: a script must be able to tell
                        status = 1
                    continue
                left = stop_warm(current, registry, args.grace)
        except TimeoutError as error:
            cli.error("stop", f"{entry.short}: {error}")
            status = 1
            continue
        if left:
            cli.error("stop", f"{entry.short}: {len(left)} processes would not stop: {left}")
            status = 1
        else:
            print(f"{entry.short}: stopped (head server {entry.head_server[0]}:{entry.head_server[1]})")
    if args.all or not args.keys:
        status = max(status, _stop_dead_keepers(registry, args.grace))
    return status


def _stop_dead_keepers(registry: Registry, grace: float) -> int:
    """Stop what keepers that died (SIGKILL) left running in this registry's homes; 1 when some would not stop."""
    status = 0
    for leftovers in find_leftovers():
        if not registry.owns(leftovers.owner.run_dir):
            continue
        still = stop_leftovers(leftovers, grace)
        print(f"stopped {leftovers.summary()} a dead keeper (pid {leftovers.owner.pid}) left running")
        if still:
            status = 1
    return status
