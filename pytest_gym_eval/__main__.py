"""Command line: ``python -m pytest_gym_eval {provision,replay,html,local-model} ...``."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    """Dispatch to a subcommand; returns the process exit status."""
    args = sys.argv[1:] if argv is None else argv
    commands = ("provision", "replay", "html", "local-model")
    if not args or args[0] not in commands:
        print(f"usage: python -m pytest_gym_eval {{{','.join(commands)}}} [options]", file=sys.stderr)
        return 2
    if args[0] == "provision":
        from pytest_gym_eval import provision

        return provision.main(args[1:])
    if args[0] == "html":
        from pytest_gym_eval.reporting import html

        return html.main(args[1:])
    if args[0] == "local-model":
        from pytest_gym_eval import local_model

        return local_model.main(args[1:])
    from pytest_gym_eval import replay

    return replay.main(args[1:])


if __name__ == "__main__":
    sys.exit(main())
