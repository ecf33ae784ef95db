"""Command line: ``python -m pytest_gym_eval {provision,replay,html,cleanup,status,stop} ...``."""

from __future__ import annotations

import sys

COMMANDS = ("provision", "replay", "html", "cleanup", "status", "stop")


def status(args: list[str]) -> int:
    """``status``: list the warm Gyms (``--gym-keep-alive``) of this user (:func:`pytest_gym_eval.warm.status_main`)."""
    from pytest_gym_eval import warm

    return warm.status_main(args)


def stop(args: list[str]) -> int:
    """``stop [--all] [KEY ...]``: stop warm Gyms now (:func:`pytest_gym_eval.warm.stop_main`)."""
    from pytest_gym_eval import warm

    return warm.stop_main(args)


def main(argv: list[str] | None = None) -> int:
    """Dispatch to a subcommand; returns the process exit status."""
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] not in COMMANDS:
        print(f"usage: python -m pytest_gym_eval {{{','.join(COMMANDS)}}} [options]", file=sys.stderr)
        return 2
    if args[0] == "provision":
        from pytest_gym_eval import provision

        return provision.main(args[1:])
    if args[0] == "html":
        from pytest_gym_eval.reporting import html

        return html.main(args[1:])
    if args[0] == "cleanup":
        from pytest_gym_eval import orphans

        return orphans.main(args[1:])
    if args[0] == "status":
        return status(args[1:])
    if args[0] == "stop":
        return stop(args[1:])
    from pytest_gym_eval import replay

    return replay.main(args[1:])


if __name__ == "__main__":
    sys.exit(main())
