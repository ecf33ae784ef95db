"""``python -m pytest_gym_eval judge-recordings ROLLOUTS.jsonl [...] --output JUDGE.jsonl``: the judge calls Gym's
verifiers wrote into rollout records (``judge_evaluations``), as a recordings file the replay server serves (see
:mod:`pytest_gym_eval.replay.judge_recordings`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from pytest_gym_eval import cli
from pytest_gym_eval.replay.judge_recordings import write_judge_recordings
from pytest_gym_eval.replay.recordings import RecordingError


def main(argv: list[str]) -> int:
    """Write the judge recordings; prints ``N judge calls written to OUTPUT``. Returns 0 (with a warning on stderr
    when the rollouts hold no judge call: their environment records none, so use ``record``), 2 for a bad rollouts
    file or an output that cannot be written; argparse exits with 2 on bad usage."""
    parser = argparse.ArgumentParser(
        prog=cli.prog("judge-recordings"),
        description="Extract the judge calls Gym rollouts record (judge_evaluations, *judge_evaluation) for replay.",
    )
    parser.add_argument("rollouts", nargs="+", metavar="ROLLOUTS.jsonl", help="Gym rollouts file(s)")
    parser.add_argument("--output", "-o", required=True, type=Path, metavar="JUDGE.jsonl", help="file to write")
    args = parser.parse_args(argv)
    try:
        count = write_judge_recordings(args.rollouts, args.output)
    except RecordingError as exc:
        cli.error("judge-recordings", exc)
        return 2
    except OSError as exc:
        cli.error("judge-recordings", f"--output: cannot write {args.output}: {exc.strerror or exc}")
        return 2
    if not count:
        cli.warning(
            "judge-recordings",
            "no rollout holds `judge_evaluations` or a `judge_evaluation`: its environment does not record its judge"
            " calls (or made none);"
            " record them with `python -m pytest_gym_eval record`",
        )
    print(f"{count} judge calls written to {args.output}", flush=True)
    return 0
