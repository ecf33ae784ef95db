"""``python -m pytest_gym_eval plan REPORT.json --detect-drop D``: how many tasks and repeats a paired comparison
needs to detect a drop of D in mean reward (the power analysis: :mod:`pytest_gym_eval.stats.power`)."""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence
from pathlib import Path

from pytest_gym_eval import cli
from pytest_gym_eval.reporting.json_report import load_report
from pytest_gym_eval.stats.power import plan_lines


def main(argv: Sequence[str]) -> int:
    """``plan REPORT.json --detect-drop D [--power P] [--alpha A] [--correlation R]``; returns the exit status
    (2 for a bad argument or a report that cannot be read)."""
    parser = argparse.ArgumentParser(
        prog="python -m pytest_gym_eval plan",
        description="How many tasks and repeats a paired comparison needs to detect a mean-reward drop, from an "
        "earlier --gym-report's between-task and within-task variance (Miller 2024, arXiv:2411.00640, Section 5).",
    )
    parser.add_argument("report", type=Path, help="a JSON report written by --gym-report")
    parser.add_argument("--detect-drop", type=float, required=True, metavar="D", help="drop in mean reward")
    parser.add_argument("--power", type=float, default=0.8, help="probability of detecting it (default 0.8)")
    parser.add_argument("--alpha", type=float, default=0.05, help="two-sided significance level (default 0.05)")
    parser.add_argument(
        "--correlation",
        type=float,
        default=0.5,
        help="correlation of the two runs' task means, in [0, 1) (default 0.5; the same model before and after a "
        "small change sits near 1)",
    )
    args = parser.parse_args(list(argv))
    if not (args.detect_drop > 0 and math.isfinite(args.detect_drop)):
        parser.error(f"--detect-drop must be a finite number > 0, got {args.detect_drop}")
    for option, value in (("--power", args.power), ("--alpha", args.alpha)):
        if not 0.0 < value < 1.0:
            parser.error(f"{option} must lie in (0, 1), got {value}")
    if not 0.0 <= args.correlation < 1.0:
        parser.error(f"--correlation must lie in [0, 1), got {args.correlation}")
    try:
        report = load_report(args.report)
    except (OSError, ValueError) as error:
        cli.error("plan", error)
        return 2
    for line in plan_lines(report, args.detect_drop, args.power, args.alpha, args.correlation):
        print(line)
    return 0
