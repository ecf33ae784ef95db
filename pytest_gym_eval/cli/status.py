"""``python -m pytest_gym_eval status``: the warm Gyms (``--gym-keep-alive``) of this user
(:mod:`pytest_gym_eval.warm`)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from pytest_gym_eval.warm import describe, describe_starting, starting
from pytest_gym_eval.warm.registry import Registry


def main(argv: Sequence[str]) -> int:
    """``python -m pytest_gym_eval status``: list the warm Gyms of this user, those starting too. Exit status 0."""
    parser = argparse.ArgumentParser(
        prog="python -m pytest_gym_eval status",
        description="List the warm Gyms (--gym-keep-alive) of this user: state, head server, configuration.",
    )
    parser.parse_args(argv)
    registry = Registry()
    entries = registry.entries()
    coming = starting(registry)
    if not entries and not coming:
        print(f"no warm Gym (registry {registry.root})")
        return 0
    print(f"warm Gyms (registry {registry.root}):")
    for entry in entries:
        for line in describe(entry):
            print(f"  {line}")
    for home, spec, keeper in coming:
        for line in describe_starting(home, spec, keeper):
            print(f"  {line}")
    return 0
