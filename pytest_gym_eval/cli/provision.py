"""``python -m pytest_gym_eval provision [--gym-version 0.7.0] [--dest DIR] [--environment mcqa ...]``: build a Gym
checkout (see :mod:`pytest_gym_eval.provision`) and print its path."""

from __future__ import annotations

import argparse
from pathlib import Path

from pytest_gym_eval import cli, provision


def main(argv: list[str]) -> int:
    """``python -m pytest_gym_eval provision ...``: prints the checkout path on stdout and returns 0; prints
    the error on stderr and returns 1 on failure (130 when interrupted, 2 for bad arguments)."""
    parser = argparse.ArgumentParser(
        prog="python -m pytest_gym_eval provision",
        description="Download, unpack and build a NeMo Gym checkout for pytest-gym-eval (idempotent).",
    )
    parser.add_argument("--gym-version", default=provision.DEFAULT_GYM_VERSION, help="nemo-gym version (%(default)s)")
    parser.add_argument("--dest", type=Path, default=None, help="checkout folder (default: <cache>/gym-<version>)")
    parser.add_argument(
        "--environment",
        dest="environments",
        action="extend",
        nargs="+",
        metavar="ENV",
        help="environments whose server venvs to prefetch, named as `gym env start --resources-server` names them "
        f"(mcqa, format_verification/citation_format); default: {' '.join(provision.DEFAULT_ENVIRONMENTS)}",
    )
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 2
    try:
        checkout = provision.provision(args.gym_version, args.dest, args.environments or provision.DEFAULT_ENVIRONMENTS)
    except provision.ProvisionError as exc:
        cli.error("provision", exc)
        return 1
    except KeyboardInterrupt:
        cli.error("provision", "interrupted: no manifest was written; the next run rebuilds")
        return 130
    print(checkout.path)
    return 0
