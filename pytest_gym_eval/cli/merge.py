"""``python -m pytest_gym_eval merge REPORT.json... [gate options] [--junitxml PATH] [--gym-report PATH]``: shard
reports merged into one summary and gate verdict (the merge itself: :mod:`pytest_gym_eval.reporting.merge`)."""

from __future__ import annotations

import argparse
import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import date, datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from pytest_gym_eval import cli
from pytest_gym_eval.history.quarantine import Quarantine, read_quarantine
from pytest_gym_eval.history.urls import redact_url
from pytest_gym_eval.options.gym_options import GymOptions
from pytest_gym_eval.options.readers import settings_layer
from pytest_gym_eval.reporting import json_report, junit_file, outputs, run_history, terminal
from pytest_gym_eval.reporting.conclusion import Conclusion
from pytest_gym_eval.reporting.merge import (
    COMPACT_ABOVE,
    EXIT_CANNOT_MERGE,
    GateOverrides,
    MergedRun,
    exit_status,
    merge_lines,
    merge_reports,
    merged_meta,
    merged_plan,
    separator,
)
from pytest_gym_eval.reporting.shard_report import MergeError, read_shard_report
from pytest_gym_eval.session.conclude import conclude
from pytest_gym_eval.stats.gate_kinds import KINDS
from pytest_gym_eval.stats.gates import HOLM, GateMode, GateSource
from pytest_gym_eval.tasks.models import Policy, agent_instance


def conclude_merged(
    merged: MergedRun,
    overrides: GateOverrides | None = None,
    baseline: Mapping[str, Any] | None = None,
    max_drop: float | None = None,
    quarantine: Quarantine | None = None,
) -> Conclusion:
    """The plugin's own :func:`~pytest_gym_eval.session.conclude.conclude` over the merged rollouts, with each
    dataset's recorded pass threshold and gates (``overrides`` applied) and the tasks of ``quarantine`` left out of
    them; a session comparing policy models compares them again (its policies and ``--gym-max-regression`` and
    ``--gym-min-improvement`` margins as the reports recorded); the reports' test functions' outcomes as they
    give them (``Conclusion.tests``). Raises ValueError for a bad ``max_drop``."""
    overrides = overrides or GateOverrides()
    mode, inconclusive = overrides.settings(merged)
    options = GymOptions(
        rootdir=Path.cwd(), gate_mode=mode, inconclusive_passes=inconclusive, max_drop=max_drop,
        policies=tuple(Policy(name) for name in merged.policies), max_regression=merged.max_regression,
        min_improvement=merged.min_improvement, comparison_sources=merged.comparison_sources,
        familywise=overrides.familywise_of(merged),
    )  # fmt: skip
    thresholds = {entry.dataset: entry.threshold for entry in merged.datasets}
    gates = {entry.dataset: overrides.gates(entry.gates) for entry in merged.datasets}
    selected: dict[str, dict[str, int]] = {}
    for entry in merged.datasets:
        counts = selected.setdefault(entry.dataset, {})
        for task, repeats in merged.selected[entry.dataset].items():
            if quarantine is not None and quarantine.entry_for(entry.dataset, task):
                continue  # left out of the gates: not a rollout they miss
            for policy in merged.policies or (None,):  # each policy's rollouts are a summary of their own
                agent = agent_instance(entry.agent_of(task), options.policies, policy)
                counts[agent] = counts.get(agent, 0) + len(repeats)
    known = [(entry.dataset, task) for entry in merged.datasets for task in entry.tasks]
    conclusion = conclude(
        merged.results, options, baseline, selected, policy=(thresholds, gates), quarantine=quarantine,
        known_tasks=known,
    )  # fmt: skip
    return conclusion.with_tests([test for report in merged.reports for test in report.tests])


def utc_today() -> date:
    """Today's date in UTC: a quarantine entry holds through its expiry day, in UTC."""
    return datetime.now(timezone.utc).date()


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m pytest_gym_eval merge",
        description="Merge the --gym-report files of shard sessions (--gym-shard=I/N) into one summary and one "
        "gate verdict, recomputed from the rollouts; exits with the gate status (0 pass, 1 fail or errors, "
        "2 the reports cannot be merged).",
        allow_abbrev=False,
    )
    parser.add_argument("reports", nargs="+", type=Path, metavar="REPORT.json", help="a shard's --gym-report file")
    gates = parser.add_argument_group("gates (default: as the reports recorded them)")
    for kind in KINDS:  # the session's gate options, as the option table declares them
        repeated = {"action": "append", "default": []} if kind.repeatable else {"type": str}
        gates.add_argument(kind.flag, dest=kind.dest, metavar=kind.metavar, help=kind.help, **repeated)
    gates.add_argument("--gym-gate-on", choices=[m.value for m in GateMode], help="judge on the estimate or the bound")
    gates.add_argument("--gym-inconclusive", choices=["fail", "pass"], help="what an INCONCLUSIVE gate does")
    gates.add_argument(
        "--gym-familywise", choices=["off", HOLM], help="holm: judge the merged gates as one family (Holm)"
    )
    gates.add_argument("--gym-baseline", type=Path, metavar="PATH.json", help="compare with an earlier report")
    gates.add_argument("--gym-max-drop", type=float, metavar="REWARD", help="fail on a significant drop past this")
    out = parser.add_argument_group("outputs")
    out.add_argument("--junitxml", type=Path, metavar="PATH", help="write JUnit XML (a testcase per rollout)")
    out.add_argument("--gym-report", type=Path, metavar="PATH.json", help="write the merged JSON report")
    out.add_argument("--gym-html", type=Path, metavar="PATH.html", help="write the HTML report")
    out.add_argument(
        "--gym-markdown", type=Path, metavar="PATH.md",
        help="write the Markdown summary (also appended to $GITHUB_STEP_SUMMARY when that is set)",
    )  # fmt: skip
    gates.add_argument(
        "--gym-quarantine", type=Path, metavar="FILE",
        help="leave the tasks of this quarantine list out of the gates until their expiry (docs/history.md)",
    )  # fmt: skip
    out.add_argument(
        "--gym-history", metavar="PATH|URL",
        help="append the merged run (once; shard sessions do not write) to this history: a SQLite file or a "
        "postgresql:// URL",
    )  # fmt: skip
    parser.add_argument("-v", "--verbose", action="store_true", help="a row per task with every repeat's reward")
    return parser


def _overrides(args: argparse.Namespace) -> GateOverrides:
    """The gate options as :class:`GateOverrides` (every kind's, as a session reads its command line:
    :func:`~pytest_gym_eval.options.readers.settings_layer`); raises ValueError naming the option for a bad
    value."""
    try:
        given = settings_layer(lambda dest: getattr(args, dest, None), GateSource.COMMAND_LINE).gates
    except pytest.UsageError as error:
        raise ValueError(str(error)) from None
    return GateOverrides(
        given=tuple(given),
        gate_mode=None if args.gym_gate_on is None else GateMode(args.gym_gate_on),
        inconclusive_passes=None if args.gym_inconclusive is None else args.gym_inconclusive == "pass",
        familywise=args.gym_familywise,
    )


def _refuse_overwriting_inputs(args: argparse.Namespace) -> None:
    """Raise ValueError when an output (``--gym-report``, ``--junitxml``, ``--gym-html``) is one of the reports
    read or the baseline: the merge would replace its own input."""
    inputs = [*args.reports, *([args.gym_baseline] if args.gym_baseline is not None else [])]
    for option, output in (("--gym-report", args.gym_report), ("--junitxml", args.junitxml),
                           ("--gym-html", args.gym_html), ("--gym-markdown", args.gym_markdown)):  # fmt: skip
        if output is None or not output.exists():
            continue
        for source in inputs:
            if source.exists() and os.path.samefile(source, output):
                raise ValueError(f"{option} {output} is an input of this merge ({source}): write it elsewhere")


def remember_merged(target: str, merged: MergedRun, meta: dict[str, object]) -> run_history.Remembered:
    """Append the merged run to the history at ``target`` once: its key is that of the reports merged
    (:func:`run_history.run_key`), so merging the same reports again writes nothing; a merge of reports whose Gym
    never started writes nothing either (:func:`run_history.never_started`)."""
    if run_history.never_started(merged.results):
        return run_history.Remembered(redact_url(target), message=run_history.NEVER_STARTED)
    key = run_history.run_key([report.meta for report in merged.reports])
    run, rollouts = run_history.run_records(merged.results, meta, policies=merged.policies, run_id=key)
    return run_history.remember(target, run, rollouts)


def main(argv: Sequence[str]) -> int:
    """``python -m pytest_gym_eval merge``: merge, print the reward summary, write the outputs asked for, and
    return the exit status (:func:`exit_status`; 2 when the reports cannot be merged)."""
    args = _parser().parse_args(list(argv))
    try:
        overrides = _overrides(args)
        if args.gym_max_drop is not None and args.gym_baseline is None:
            raise ValueError("--gym-max-drop needs --gym-baseline")
        _refuse_overwriting_inputs(args)
        baseline = None
        if args.gym_baseline is not None:
            try:
                baseline = json_report.load_report(args.gym_baseline)
            except (OSError, ValueError) as error:
                raise ValueError(f"--gym-baseline: {error}") from None
        quarantine = read_quarantine(args.gym_quarantine, today=utc_today()) if args.gym_quarantine else None
        merged = merge_reports([read_shard_report(path) for path in args.reports])
        conclusion = conclude_merged(merged, overrides, baseline, args.gym_max_drop, quarantine)
    except (MergeError, ValueError) as error:  # (QuarantineError is a ValueError naming the file and line)
        cli.error("merge", error)
        return EXIT_CANNOT_MERGE
    columns = shutil.get_terminal_size((80, 24)).columns
    lines = merge_lines(merged)
    lines.append(separator("gym reward summary", columns))
    lines += terminal.render_conclusion(
        conclusion, verbose=args.verbose, results=merged.results, width=min(columns, 100)
    )
    mode, _ = overrides.settings(merged)
    meta = merged_meta(merged, mode)
    remembered = None
    if args.gym_history:  # the merged run, written once (docs/history.md: shard sessions do not write)
        remembered = remember_merged(args.gym_history, merged, meta)
        conclusion = replace(conclusion, history=tuple(remembered.lines()))
    lines += [f"gym {line}" for line in conclusion.quarantined]
    lines += conclusion.history
    lines += [f"gym warning: {line}" for line in conclusion.warnings]
    final = (exit_status(merged, conclusion), conclusion.reason or "merged shard reports")
    try:
        if args.junitxml is not None:
            thresholds = {entry.dataset: entry.threshold for entry in merged.datasets}
            junit_file.write_junit_xml(
                args.junitxml, merged.results, conclusion, meta, thresholds, final=final,
            )  # fmt: skip
            lines.append(f"junit xml: {args.junitxml}")
    except OSError as error:
        print("\n".join(lines))
        cli.error("merge", f"cannot write {error.filename}: {error.strerror}")
        return EXIT_CANNOT_MERGE
    written = outputs.write_outputs(  # the session's own output step
        conclusion, merged.results, meta, final,
        paths=outputs.OutputPaths(args.gym_report, args.gym_html, args.gym_markdown), environ=os.environ,
        plan=merged_plan(merged, overrides), baseline=baseline,
        history=remembered.report_block() if remembered is not None else None,
        indent=2 if len(merged.results) <= COMPACT_ABOVE else None,
    )  # fmt: skip
    lines += written.lines
    if written.failed:
        print("\n".join(lines))
        cli.error("merge", "cannot write " + "; ".join(written.failed))
        return EXIT_CANNOT_MERGE
    # On GitHub Actions the merged run's gates and errored rollouts are annotated here, once: the shard sessions
    # leave them to the merge (their gates judge a share only).
    lines += outputs.annotation_lines(
        conclusion, merged.results, os.environ, rootdir=Path.cwd(),
    )  # fmt: skip
    print("\n".join(lines))
    return exit_status(merged, conclusion)
