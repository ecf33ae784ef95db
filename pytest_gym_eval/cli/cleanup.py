"""``python -m pytest_gym_eval cleanup``: list, then stop, what pytest sessions that died left running (finding
and stopping it: :mod:`pytest_gym_eval.gym.orphans`)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from pytest_gym_eval.core.rundir import RunPaths
from pytest_gym_eval.gym.orphans import CLEANUP_COMMAND, find_leftovers, stop_leftovers
from pytest_gym_eval.gym.processes import DEFAULT_GRACE, grace_seconds


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m pytest_gym_eval cleanup [--dry-run] [--run-dir DIR] [--grace S]``: list, then stop, what
    dead pytest sessions left running. Exit status 0 when nothing is left, 1 when something would not stop, 2 for
    a ``--run-dir`` that is no run directory or a negative ``--grace``."""
    parser = argparse.ArgumentParser(
        prog=CLEANUP_COMMAND,
        description="Stop the Gym and Ray processes that pytest sessions which died (e.g. by SIGKILL) left running. "
        "Only processes started by pytest-gym-eval for a session whose pytest is gone are touched.",
    )
    parser.add_argument("--dry-run", action="store_true", help="only list what would be stopped")
    parser.add_argument("--run-dir", type=Path, help="only the leftovers of the run in this run directory")
    parser.add_argument(
        "--grace",
        type=grace_seconds,
        default=DEFAULT_GRACE,
        help="seconds Gym gets after SIGINT (default: %(default)s)",
    )
    args = parser.parse_args(argv)
    if args.run_dir is not None:
        if not args.run_dir.is_dir():
            parser.error(f"--run-dir {args.run_dir}: no such directory")
        paths = RunPaths(args.run_dir)
        if not any(path.exists() for path in (paths.state, paths.processes, paths.manifest)):
            parser.error(f"--run-dir {args.run_dir}: not a run directory (no state.json, processes.jsonl or manifest)")
    everything = find_leftovers(args.run_dir)
    if not everything:
        where = f" in {args.run_dir}" if args.run_dir is not None else ""
        print(f"nothing left running{where} by a pytest session that died")
        return 0
    status = 0
    for leftovers in everything:
        whose = "warm Gym keeper" if leftovers.warm else "pytest session"
        print(f"{whose} pid {leftovers.owner.pid} (gone), run directory {leftovers.owner.run_dir}:")
        for process in leftovers.processes:
            print(f"  pid {process.pid:>7}  session {process.sid:>7}  {process.command[:100] or process.name}")
        if args.dry_run:
            continue
        still = stop_leftovers(leftovers, args.grace)
        if still:
            status = 1
            print(f"  {len(still)} would not stop: {', '.join(str(p.pid) for p in still)}", file=sys.stderr)
        else:
            print(f"  stopped {leftovers.summary()}")
    return status
