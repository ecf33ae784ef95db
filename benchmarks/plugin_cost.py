"""The plugin's cost where it is not used: a one-test project's pytest CPU time with the plugin loaded against the
same run without it (``benchmarks/run.py --only plain``, or ``python benchmarks/plugin_cost.py [ROUNDS]``).

Both sides run with ``PYTEST_DISABLE_PLUGIN_AUTOLOAD=1`` so that the dev environment's other plugins (pytest-cov,
pytest-html, ...) load on neither; the plugin side adds ``-p gym_eval``, which loads this plugin by its entry point
as an installed copy is loaded, the plain side ``-p noop_plugin``, an empty module in the project: ``-p`` makes
pytest look its name up among every installed distribution's entry points (what autoload does on every run,
plugin or not), so both sides pay that alike. The measure is the child's CPU time (user + system, from
``getrusage(RUSAGE_CHILDREN)`` before and after each run): on a shared machine it varies far less than wall time.
The sides alternate in each round (which goes first alternates too), after one warm-up run of each; the ratio is
the median over the rounds with the paired bootstrap interval of :mod:`verdicts`.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from verdicts import median_ratio

NAME = "plain"
"""Its name in ``--only`` and the table."""

GOAL = 1.05
"""The plugin side's CPU time at most this times the plain run's (issue 23)."""


def child_cpu(argv: list[str], cwd: Path, env: dict[str, str]) -> float:
    """Run ``argv`` to its end; the CPU seconds (user + system) it and its own children used. Raises
    :class:`RuntimeError` with its output when it fails."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited with {done.returncode}:\n{done.stdout[-2000:]}{done.stderr}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def plain_project(folder: Path) -> Path:
    """A project of one passing test, an empty ``pytest.ini`` and an empty plugin module, no dataset."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pytest.ini").write_text("[pytest]\n")
    (folder / "test_one.py").write_text("def test_one():\n    assert True\n")
    (folder / "noop_plugin.py").write_text('"""The plain side\'s plugin: nothing."""\n')
    return folder


def measure(folder: Path, rounds: int) -> dict[str, list[float]]:
    """CPU seconds per round of each side, ``{"plugin": [...], "plain": [...]}``, ``rounds`` each."""
    project = plain_project(folder)
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    commands = {
        "plugin": [sys.executable, "-m", "pytest", "-q", "-p", "gym_eval", "test_one.py"],
        "plain": [sys.executable, "-m", "pytest", "-q", "-p", "noop_plugin", "test_one.py"],
    }
    for argv in commands.values():  # warm-up: the page cache and the byte-compiled modules
        child_cpu(argv, project, env)
    times: dict[str, list[float]] = {side: [] for side in commands}
    for round_ in range(rounds):
        for side in list(commands) if round_ % 2 == 0 else list(commands)[::-1]:
            times[side].append(child_cpu(commands[side], project, env))
        print(f"  round {round_ + 1}: plugin {times['plugin'][-1]:.3f} s, plain {times['plain'][-1]:.3f} s", flush=True)
    return times


def bench_plugin_cost(work: Path, rounds: int) -> dict[str, str]:
    """The benchmark table's row (the fields of ``run.Row``): median CPU seconds of each side and their ratio."""
    times = measure(work / "plain", rounds)
    plugin, plain = times["plugin"], times["plain"]
    ratio = median_ratio(plugin, plain)
    listed = {side: ", ".join(f"{t:.2f}" for t in values) for side, values in times.items()}
    return {
        "benchmark": f"Plugin cost where unused: a one-test project without datasets, pytest's CPU time (user + "
        f"system) with `-p gym_eval` against `-p` an empty module, both with plugin autoload off, median of {rounds} "
        f"alternated rounds (plugin {listed['plugin']} s; plain {listed['plain']} s)",
        "plugin": f"{statistics.median(plugin):.3f} s CPU",
        "baseline": f"empty plugin {statistics.median(plain):.3f} s CPU",
        "ratio": ratio.text(),
        "goal": f"<= {GOAL}",
        "verdict": ratio.verdict(GOAL),
        "summary": "plain project: a one-test pytest run's CPU time with the plugin installed vs without",
    }


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="gym-bench-") as scratch:
        row = bench_plugin_cost(Path(scratch), int(sys.argv[1]) if len(sys.argv) > 1 else 10)
    print("\n".join(f"{key}: {value}" for key, value in row.items()))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--plain-rounds", type=int, help="plain: paired rounds (default 20; quick 3)")


def run(work: Path, args: argparse.Namespace, quick: bool) -> list[Any]:
    """The table's row of this benchmark (``quick``: 3 rounds)."""
    from common import Row

    return [Row(**bench_plugin_cost(work, args.plain_rounds or (3 if quick else 20)))]
