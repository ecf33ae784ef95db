"""``python -m pytest_gym_eval html``: the HTML page of a finished session, made from its JSON report
(the page itself: :mod:`pytest_gym_eval.reporting.html`)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from pytest_gym_eval import cli
from pytest_gym_eval.reporting import html, json_reading, json_report, outputs


def main(argv: Sequence[str]) -> int:
    """``python -m pytest_gym_eval html REPORT.json [--baseline OLD.json] [-o PATH]``: the page of a session,
    made afterwards from its ``--gym-report`` file and the rollout records it points to.

    Returns the exit status: 0 when the page was written (also when some records could not be read: the page
    then says which, and those rollouts have no transcript), 2 for a report or baseline that cannot be read
    or a page that cannot be written.
    """
    parser = argparse.ArgumentParser(
        prog="python -m pytest_gym_eval html",
        description="Write the HTML report of a finished session from its --gym-report JSON file. Transcripts "
        "are read from the rollout records the report points to (in the session's run directory).",
    )
    parser.add_argument("report", type=Path, help="the session's --gym-report file")
    parser.add_argument("--baseline", type=Path, help="an earlier --gym-report to compare with")
    parser.add_argument("-o", "--output", type=Path, help="where to write the page (default: REPORT with .html)")
    args = parser.parse_args(list(argv))
    output: Path = args.output or args.report.with_suffix(".html")
    try:
        report = json_report.load_report(args.report)
    except (OSError, ValueError) as error:
        cli.error("html", f"report: {error}")
        return 2
    baseline = None
    if args.baseline is not None:
        try:
            baseline = json_report.load_report(args.baseline)
        except (OSError, ValueError) as error:
            cli.error("html", f"--baseline: {error}")
            return 2
    try:
        conclusion, results = json_reading.conclusion_from_report(report, baseline)
    except ValueError as error:
        cli.error("html", f"report: {args.report}: {error}")
        return 2
    given = report.get("meta")
    meta: Mapping[str, object] = given if isinstance(given, dict) else {}
    try:
        problems = html.write_page(
            output, conclusion, results, meta, baseline=baseline, run_failed=outputs.run_failure(meta),
            history=history if isinstance(history := report.get("history"), dict) else None,
            comparisons=given_comparisons if isinstance(given_comparisons := report.get("comparisons"), list) else None,
        )  # fmt: skip
    except OSError as error:
        cli.error("html", f"cannot write {output}: {error}")
        return 2
    for problem in problems:
        cli.warning("html", f"transcripts missing: {problem}")
    if problems:
        print(
            "warning: the records live in the session's run directory; pytest removes old ones from its basetemp, "
            "--gym-run-dir keeps them",
            file=sys.stderr,
        )
    print(f"wrote {output} ({len(results)} rollouts)")
    return 0
