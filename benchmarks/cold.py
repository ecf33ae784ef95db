"""The ``cold`` benchmark: the mcqa example's whole session, starting Gym itself, against what a user would
otherwise type on the same machine: ``gym env start`` until it says its servers are ready, ``gym eval run
--no-serve --num-repeats R`` over the same input, then Ctrl-C and Gym's own stop.

Run alone: ``.venv/bin/python benchmarks/run.py --only cold``."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import time
from pathlib import Path
from typing import TYPE_CHECKING

from common import AGENT, MCQA_EXAMPLE, Row, fmt_list, raw_gym_run, warm_session
from verdicts import median_ratio

if TYPE_CHECKING:
    from pytest_gym_eval.gym.config import ModelEndpoint
    from pytest_gym_eval.provision import GymCheckout

NAME = "cold"
"""Its name in ``--only`` and the table."""

GOAL = 0.9
"""Issue 27: a cold session at most 0.9x of the raw commands."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--cold-rounds", type=int, help="cold: sessions and raw runs per side (default 5; quick 1)")


def run(work: Path, args: argparse.Namespace, quick: bool) -> list[Row]:
    """The table's rows of this benchmark, with ``args``' settings (``quick``: scaled down)."""
    return bench_cold(work, args.cold_rounds or (1 if quick else 5))


def raw_cold(
    checkout: GymCheckout, root: Path, raw_input: Path, repeats: int, expected: int, model: ModelEndpoint
) -> dict[str, float]:
    """What a user types without the plugin, timed from the first command: ``gym env start`` (the mcqa config, a
    config naming the model, and ``+skip_venv_if_present=true``, as Gym's own guide advises: without it every
    start rebuilt each server's venv, 19-83 s to ready here instead of ~15 s) until its
    ``servers ready!`` line, ``gym eval run --no-serve`` over ``raw_input``, then Ctrl-C (SIGINT to its process
    group, as a terminal sends) and the wait until ``gym env start`` has exited. Returns the seconds of each
    phase's end: ``ready``, ``rollouts``, ``stopped``."""
    from pytest_gym_eval.gym.config import find_agent_config, ray_temp_dir, write_gym_config
    from pytest_gym_eval.gym.processes import GymProcess, free_port
    from pytest_gym_eval.gym.servers import READY_MARKER
    from pytest_gym_eval.provision import gym_environment

    root.mkdir(parents=True)
    head = ("127.0.0.1", free_port())
    config = root / "config.json"
    write_gym_config(config, model, head)
    agent_config = find_agent_config(checkout.path, AGENT)
    ray_dir, made = ray_temp_dir(root)
    argv = [
        str(checkout.gym_executable), "env", "start", "--config", str(agent_config),
        "--model-type", model.model_type, "--config", str(config), "+skip_venv_if_present=true",
    ]  # fmt: skip
    env = gym_environment(checkout, ray_dir)
    log = root / "gym-env-start.log"
    start = time.perf_counter()
    servers = GymProcess(argv, env=env, cwd=checkout.path, log_path=log, name="gym env start")
    try:
        while READY_MARKER not in log.read_text(errors="replace"):
            if servers.poll() is not None or time.perf_counter() - start > 900:
                raise RuntimeError(f"raw: `gym env start` did not get ready; see {log}")
            time.sleep(0.05)  # a user sees the line at once; the raw side gets no poll delay to speak of
        ready = time.perf_counter() - start
        rollouts = ready + raw_gym_run(checkout, root / "eval", raw_input, config, repeats, expected)
        servers.interrupt()
        if servers.wait(120) is None:
            raise RuntimeError(f"raw: `gym env start` did not stop within 120 s of Ctrl-C; see {log}")
        stopped = time.perf_counter() - start
    finally:
        servers.stop()
        if made:
            shutil.rmtree(ray_dir, ignore_errors=True)
    return {"ready": ready, "rollouts": rollouts, "stopped": stopped}


def bench_cold(work: Path, rounds: int) -> list[Row]:
    """In alternating order, ``rounds`` cold sessions of the mcqa example (12 tasks x 2 repeats, replayed answers;
    each starts the replay model and Gym, runs, stops) and ``rounds`` raw runs (:func:`raw_cold`) over the very
    input such a session hands Gym, against the same replay model (started once, outside the raw side's
    time). Median wall times and their ratio with its paired interval."""
    from pytest_gym_eval import provision
    from pytest_gym_eval.gym.run import ModelEndpoint
    from pytest_gym_eval.replay import ReplayServer

    root = work / "cold"
    project = root / "project"
    shutil.copytree(MCQA_EXAMPLE, project, ignore=shutil.ignore_patterns(".pytest_cache", "__pycache__"))
    checkout = provision.provision()  # instant when cached
    env = dict(os.environ)
    recordings = project / "recordings" / "mcqa_rollouts.jsonl"
    sides: dict[str, list[float]] = {"session": [], "raw": []}
    phases: list[dict[str, float]] = []
    # A first session, not counted: the first Gym start after provisioning is slower (files not yet in the page
    # cache), and its input is what every raw run gets.
    seconds, _, run_dir = warm_session(project, root / "runs-first", env)
    print(f"  first session (not counted) {seconds:.1f} s", flush=True)
    same_input = root / "gym-input.jsonl"
    shutil.copyfile(run_dir / "gym-input.jsonl", same_input)
    same_repeats = int(json.loads((run_dir / "manifest.json").read_text()).get("row_repeats", 1))  # whole tasks: 2
    with ReplayServer([recordings], log_path=root / "replay-model.jsonl") as replay:
        model = ModelEndpoint(replay.base_url, "replay", "openai_model", "PYTEST_GYM_EVAL_NO_KEY")
        for round_ in range(rounds):
            for side in ("session", "raw") if round_ % 2 == 0 else ("raw", "session"):
                if side == "session":
                    seconds, _, _ = warm_session(project, root / f"runs-{round_}", env)
                else:
                    phase = raw_cold(checkout, root / f"raw-{round_}", same_input, same_repeats, 24, model)
                    phases.append(phase)
                    seconds = phase["stopped"]
                    print(
                        f"  round {round_ + 1}: raw ready {phase['ready']:.1f} s, rollouts done "
                        f"{phase['rollouts']:.1f} s, stopped {phase['stopped']:.1f} s",
                        flush=True,
                    )
                sides[side].append(seconds)
                print(f"  round {round_ + 1}: {side} {seconds:.2f} s", flush=True)
    session, raw = statistics.median(sides["session"]), statistics.median(sides["raw"])
    ratio = median_ratio(sides["session"], sides["raw"])
    ready = statistics.median(p["ready"] for p in phases)
    run_s = statistics.median(p["rollouts"] - p["ready"] for p in phases)
    stop = statistics.median(p["stopped"] - p["rollouts"] for p in phases)
    return [
        Row(
            f"Cold: the mcqa example's whole session starting Gym itself (12 tasks x 2 repeats, replay model: start, "
            f"rollouts, stop) vs raw `gym env start` until ready, `gym eval run --no-serve --num-repeats "
            f"{same_repeats}` over the same input, Ctrl-C and Gym's stop; alternating, median of {rounds} "
            f"(session {fmt_list(sides['session'], 1)} s; raw {fmt_list(sides['raw'], 1)} s)",
            f"pytest session {session:.1f} s",
            f"raw {raw:.1f} s (ready {ready:.1f} s, rollouts {run_s:.1f} s, stop {stop:.1f} s)",
            ratio.text(),
            f"<= {GOAL}",
            ratio.verdict(GOAL),
            summary="cold: the mcqa example's whole session starting Gym vs raw `gym env start`, `gym eval run`, stop",
        )
    ]
