"""Command line: ``python -m pytest_gym_eval {provision,replay,html,plan} ...``."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    """Dispatch to a subcommand; returns the process exit status."""
    args = sys.argv[1:] if argv is None else argv
    commands = ("provision", "replay", "html", "plan")
    if not args or args[0] not in commands:
        print(f"usage: python -m pytest_gym_eval {{{','.join(commands)}}} [options]", file=sys.stderr)
        return 2
    if args[0] == "provision":
        from pytest_gym_eval import provision

        return provision.main(args[1:])
    if args[0] == "plan":
        return plan(args[1:])
    if args[0] == "html":
        from pytest_gym_eval.reporting import html

        return html.main(args[1:])
    from pytest_gym_eval import replay

    return replay.main(args[1:])


def plan(args: list[str]) -> int:
    """``plan REPORT.json --detect-drop D``: tasks and repeats a paired comparison needs
    (:mod:`pytest_gym_eval.planning`)."""
    from pytest_gym_eval import planning

    return planning.main(args)


if __name__ == "__main__":
    sys.exit(main())
