"""Command line: ``python -m pytest_gym_eval COMMAND ...``; each command is a function ``(argv) -> int``."""

from __future__ import annotations

import importlib
import sys

COMMANDS = {
    "provision": ("pytest_gym_eval.cli.provision", "build Gym's checkout and venvs from its sdist"),
    "replay": ("pytest_gym_eval.cli.replay", "serve recorded rollouts as a policy model on 127.0.0.1"),
    "record": ("pytest_gym_eval.cli.record", "record model calls (a judge's) through a proxy, for replay"),
    "judge-recordings": ("pytest_gym_eval.cli.judge_recordings", "judge calls in Gym rollouts, as replay recordings"),
    "html": ("pytest_gym_eval.cli.html", "build the HTML report from a JSON report"),
    "cleanup": ("pytest_gym_eval.cli.cleanup", "stop what a dead pytest session left running"),
    "local-model": ("pytest_gym_eval.cli.local_model", "serve a small local LLM (llama.cpp) on 127.0.0.1"),
    "merge": ("pytest_gym_eval.cli.merge", "merge shard reports into one summary and gate verdict"),
    "plan": ("pytest_gym_eval.cli.plan", "tasks and repeats a paired comparison needs to detect a drop"),
    "status": ("pytest_gym_eval.cli.status", "list this user's warm Gyms (--gym-keep-alive)"),
    "stop": ("pytest_gym_eval.cli.stop", "stop warm Gyms now: stop [--all] [KEY ...]"),
    "history": ("pytest_gym_eval.cli.history", "runs, flaky and quarantined tasks, drift from --gym-history"),
}
"""Subcommand -> (``module`` whose ``main(argv) -> int`` runs it, or ``module:function`` for another function of
that signature; one-line description)."""


def main(argv: list[str] | None = None) -> int:
    """Dispatch to a subcommand; returns the process exit status: 0 for ``-h``/``--help`` (the usage on stdout), 2
    for an unknown or missing command (the usage on stderr, after what was wrong)."""
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] not in COMMANDS:
        lines = [f"usage: python -m pytest_gym_eval {{{','.join(COMMANDS)}}} [options]"]
        lines += [f"  {name:<12} {description}" for name, (_, description) in COMMANDS.items()]
        lines.append("`python -m pytest_gym_eval COMMAND --help` describes a command's options.")
        if args and args[0] in ("-h", "--help"):
            print("\n".join(lines))
            return 0
        problem = f"unknown command {args[0]!r}" if args else "no command given"
        print("\n".join([f"python -m pytest_gym_eval: error: {problem}", *lines]), file=sys.stderr)
        return 2
    module_name, _, function = COMMANDS[args[0]][0].partition(":")
    module = importlib.import_module(module_name)
    status: int = getattr(module, function or "main")(args[1:])
    return status


if __name__ == "__main__":
    sys.exit(main())
