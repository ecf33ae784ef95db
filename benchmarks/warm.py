"""The ``warm`` benchmark: the mcqa example's session against a warm Gym (``--gym-keep-alive``) vs raw ``gym eval run
--no-serve`` over the same input, and the first session's cost of keeping Gym alive.

Run alone: ``.venv/bin/python benchmarks/run.py --only warm``."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import time
from pathlib import Path

from common import (
    MCQA_EXAMPLE,
    Row,
    raw_gym_run,
    warm_session,
)
from verdicts import median_ratio

NAME = "warm"
"""Its name in ``--only`` and the table."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--warm-rounds", type=int, help="warm: sessions and raw runs per side (default 7; quick 1)")


def run(work: Path, args: argparse.Namespace, quick: bool) -> list[Row]:
    """The table's rows of this benchmark, with ``args``' settings (``quick``: scaled down)."""
    return bench_warm(work, args.warm_rounds or (1 if quick else 7))


def bench_warm(work: Path, rounds: int) -> list[Row]:
    """The mcqa example: a cold session without ``--gym-keep-alive`` and one with it (the first session's cost of
    keeping Gym alive: the keeper started before ``gym env start``, the registry write); then, in alternating
    order, sessions attached to that warm Gym and raw ``gym eval run --no-serve`` over the very input such a
    session hands Gym, against the same servers (median of ``rounds`` each)."""
    from pytest_gym_eval import provision
    from pytest_gym_eval.cli.stop import main as stop_main
    from pytest_gym_eval.warm.registry import Registry, write_private

    root = work / "warm"
    project = root / "project"
    shutil.copytree(MCQA_EXAMPLE, project, ignore=shutil.ignore_patterns(".pytest_cache", "__pycache__"))
    registry = root / "registry"
    env = {**os.environ, "PYTEST_GYM_EVAL_WARM": str(registry)}
    checkout = provision.provision()  # instant when cached
    previous = os.environ.get("PYTEST_GYM_EVAL_WARM")
    os.environ["PYTEST_GYM_EVAL_WARM"] = str(registry)  # for stop_main, in this process
    try:
        cold, _, _ = warm_session(project, root / "runs-cold", env)
        print(f"  cold session, no --gym-keep-alive: {cold:.1f} s", flush=True)
        first, _, _ = warm_session(project, root / "runs-first", env, "--gym-keep-alive=3600")
        (entry,) = Registry(registry).entries()
        # The keeper's own start: from the spec the session wrote to `gym env start` launched (processes.jsonl).
        keeper = (entry.home / "processes.jsonl").stat().st_mtime - (entry.home / "spec.json").stat().st_mtime
        writes = []
        for _ in range(50):
            started = time.perf_counter()
            write_private(root / "entry-copy.json", entry.to_json())
            writes.append(time.perf_counter() - started)
        write = statistics.median(writes)
        print(
            f"  first session with --gym-keep-alive: {first:.1f} s (Gym ready after {entry.ready_after:.0f} s; "
            f"keeper {keeper * 1000:.0f} ms before `gym env start`; registry write {write * 1e6:.0f} us)",
            flush=True,
        )
        config = root / "raw-config.yaml"
        config.write_text(json.dumps({"head_server": {"host": entry.head_server[0], "port": entry.head_server[1]}}))
        sides: dict[str, list[float]] = {"warm": [], "raw": []}
        same_input: Path | None = None
        same_repeats = 1
        for round_ in range(rounds):
            for side in ("warm", "raw") if round_ % 2 == 0 else ("raw", "warm"):  # round 1 writes the input
                if side == "warm":
                    seconds, output, run_dir = warm_session(
                        project, root / f"runs-warm-{round_}", env, "--gym-keep-alive=3600"
                    )
                    if "gym: attached to warm Gym" not in output:
                        raise RuntimeError(f"warm: the session did not attach:\n{output[-3000:]}")
                    if same_input is None:  # and its --num-repeats (whole tasks: 2; a row per rollout: 1)
                        same_input = run_dir / "gym-input.jsonl"
                        manifest = json.loads((run_dir / "manifest.json").read_text())
                        same_repeats = int(manifest.get("row_repeats", 1))
                else:
                    assert same_input is not None
                    seconds = raw_gym_run(checkout, root / f"raw-{round_}", same_input, config, same_repeats, 24)
                sides[side].append(seconds)
                print(f"  round {round_ + 1}: {side} {seconds:.2f} s", flush=True)
    finally:
        stop_main(["--all"])
        if previous is None:
            os.environ.pop("PYTEST_GYM_EVAL_WARM", None)
        else:
            os.environ["PYTEST_GYM_EVAL_WARM"] = previous
    warm, raw = statistics.median(sides["warm"]), statistics.median(sides["raw"])
    ratio = median_ratio(sides["warm"], sides["raw"])
    listed = {side: ", ".join(f"{t:.1f}" for t in values) for side, values in sides.items()}
    return [
        Row(
            f"Warm: the mcqa example's session (12 tasks x 2 repeats) attached to a warm Gym (`--gym-keep-alive`), "
            f"median of {rounds} (warm {listed['warm']} s; raw {listed['raw']} s)",
            f"pytest session {warm:.2f} s",
            f"raw `gym eval run --no-serve` over the same input, same servers {raw:.2f} s",
            ratio.text(),
            "<= 1.3",
            ratio.verdict(1.3),
            summary="warm: the mcqa example's session attached to a warm Gym vs raw `gym eval run --no-serve`",
        ),
        Row(
            "Warm: the same example's session starting Gym itself (no `--gym-keep-alive`), one run",
            f"pytest session {cold:.1f} s",
            f"raw over the same input {raw:.2f} s",
            f"{cold / raw:.1f}",
        ),
        Row(
            "Warm: the first session with `--gym-keep-alive`, one run: its cost of keeping Gym alive is the keeper "
            "process started before `gym env start` and the registry entry written; it skips stopping Gym",
            f"{first:.1f} s (Gym ready after {entry.ready_after:.0f} s); keeper {keeper * 1000:.0f} ms, registry "
            f"write {write * 1e6:.0f} us",
            f"cold session without it {cold:.1f} s",
            f"{first / cold:.2f}",
        ),
    ]
