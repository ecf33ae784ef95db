"""Command line: ``python -m pytest_gym_eval {provision,replay,merge} ...``."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    """Dispatch to a subcommand; returns the process exit status."""
    args = sys.argv[1:] if argv is None else argv
    commands = ("provision", "replay", "merge")
    if not args or args[0] not in commands:
        print(f"usage: python -m pytest_gym_eval {{{','.join(commands)}}} [options]", file=sys.stderr)
        return 2
    if args[0] == "provision":
        from pytest_gym_eval import provision

        return provision.main(args[1:])
    if args[0] == "merge":
        return merge(args[1:])
    from pytest_gym_eval import replay

    return replay.main(args[1:])


def merge(args: list[str]) -> int:
    """``merge REPORT.json... [gate options] [--junitxml PATH] [--gym-report PATH]``: shard reports into one
    summary and gate verdict (:mod:`pytest_gym_eval.merge`)."""
    from pytest_gym_eval import merge as merging

    return merging.main(args)


if __name__ == "__main__":
    sys.exit(main())
