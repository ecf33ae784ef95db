"""How every ``python -m pytest_gym_eval COMMAND`` words what goes wrong: one line on standard error,
``python -m pytest_gym_eval COMMAND: error: MESSAGE`` (``warning:`` for what does not stop the command), as
argparse words a usage error under the same ``prog``."""

from __future__ import annotations

import sys

from pytest_gym_eval.core.credentials import redact_value

PROG = "python -m pytest_gym_eval"


def prog(command: str) -> str:
    """The ``prog`` of a subcommand's argument parser: ``python -m pytest_gym_eval COMMAND``."""
    return f"{PROG} {command}"


def error(command: str, message: object) -> None:
    """Print ``python -m pytest_gym_eval COMMAND: error: MESSAGE`` on standard error, any secret of a URL in it
    (an argument echoed, or a path made of one) redacted (:func:`~pytest_gym_eval.core.credentials.redact_value`)."""
    print(f"{prog(command)}: error: {redact_value(str(message))}", file=sys.stderr, flush=True)


def warning(command: str, message: object) -> None:
    """Print ``python -m pytest_gym_eval COMMAND: warning: MESSAGE`` on standard error (redacted as :func:`error`)."""
    print(f"{prog(command)}: warning: {redact_value(str(message))}", file=sys.stderr, flush=True)
