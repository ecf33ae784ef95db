"""pytest-gym-eval's benchmarks, side by side in one run: ``.venv/bin/python benchmarks/run.py``.

1. overhead    a pytest session over N tasks x R repeats against the equivalent raw ``gym eval run --no-serve``,
               both against the same started Gym servers and the same replay model (median of alternated runs);
2. collection  ``pytest --collect-only`` of a 100,000-row dataset against 100,000 ``@pytest.mark.parametrize``
               tests: time (best of 3) and peak RSS, each in a fresh process;
3. read        following a ~1 GB Gym rollouts file with ``RolloutFeed`` until every record is in: MB/s and
               peak memory, and the peak for as many 1.3 KB records;
4. latency     from a rollout line being written (a stand-in ``gym``) to its item's report: median and p95;
5. html        the ``--gym-html`` page of 1,000 and 10,000 rollouts: its size, the time to write it, and in
               headless Chromium the time to first render and from a click to the next frame;
6. throughput  rollouts per second through one Gym against a model that answers in a fixed time, at several
               ``--gym-concurrency`` values: what one machine's Gym does with a slow endpoint;
7. merge       ``python -m pytest_gym_eval merge`` of synthetic shard reports (20,000 tasks x 8 repeats in 8
               shards): wall time and peak RSS in a fresh process, best of 3;
8. adaptive    ``--gym-adaptive`` on simulated rewards: the rollouts its gate spends against a fixed ceiling, for
               true means above, at and below the threshold, and how often its verdict is wrong;
9. warm        the mcqa example's session against a warm Gym (``--gym-keep-alive``) vs raw ``gym eval run
               --no-serve`` over the same input, and the first session's cost of keeping Gym alive.

``--quick`` scales everything down; ``--only`` picks benchmarks. The table is printed; a full run (neither
``--quick`` nor ``--only``) also writes it to ``benchmarks/results.md``, any run to ``--output``. See
``benchmarks/README.md``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import random
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from verdicts import (
    METHOD,
    TABLE_BEGIN,
    TABLE_END,
    Estimate,
    bootstrap,
    median_of,
    median_ratio,
    replace_between_markers,
    stamp,
)

HERE = Path(__file__).resolve().parent
PYTHON_PYTEST = [sys.executable, "-m", "pytest"]
PYTEST = [*PYTHON_PYTEST, "-p", "gym_eval"]
"""Every pytest session the benchmarks start loads this plugin alone: :func:`main` sets
``PYTEST_DISABLE_PLUGIN_AUTOLOAD`` for them. The dev venv also holds pytest-cov, pytest-html, pytest-sugar,
pytest-randomly, pytest-rerunfailures and pytest-timeout for the compatibility tests; importing them (~0.3 s)
is a cost of any pytest session there, with or without this plugin, not this plugin's."""
TIME_V = Path("/usr/bin/time")
AGENT = "mcqa_simple_agent"
LETTERS = "ABCD"
INSTRUCTION = (
    "Answer the multiple-choice question below. You may reason step by step first, "
    "then put only the letter of your final choice inside \\boxed{}."
)
BENCHMARKS = (
    "overhead", "collection", "read", "latency", "html", "throughput", "merge", "adaptive", "warm", "teardown",
)  # fmt: skip


@dataclass
class Row:
    """One line of the results table."""

    benchmark: str
    plugin: str
    baseline: str = ""
    ratio: str = ""
    goal: str = ""
    verdict: str = ""
    summary: str = ""
    """A short label for the READMEs' table (else ``benchmark``)."""


# Synthetic data.


def mcqa_question(
    index: int, rng: random.Random, pad_to: int = 0, with_id: bool = True
) -> tuple[dict[str, Any], str, int]:
    """An original arithmetic multiple-choice row (``id`` unless ``with_id`` is false, prompt, options, expected
    letter) padded with a ``metadata.notes`` field to about ``pad_to`` bytes; returns (row, letter, value)."""
    a, b = rng.randint(12, 989), rng.randint(12, 989)
    symbol, value = [("+", a + b), ("-", a - b), ("x", a * b)][index % 3]
    choices = [value, value + 1, value - 10, value + 100]
    rng.shuffle(choices)
    letter = LETTERS[choices.index(value)]
    lines = "\n".join(f"{L}: {c}" for L, c in zip(LETTERS, choices, strict=True))
    prompt = f"{INSTRUCTION}\n\nQuestion {index}: what is {a} {symbol} {b}?\n{lines}"
    row: dict[str, Any] = {
        "id": f"bench-{index:06d}",
        "responses_create_params": {"input": [{"role": "user", "content": prompt}]},
        "options": [{L: str(c)} for L, c in zip(LETTERS, choices, strict=True)],
        "expected_answer": letter,
        "grading_mode": "strict_single_letter_boxed",
    }
    if not with_id:
        del row["id"]
    if pad_to:
        size = len(json.dumps(row)) + len(', "metadata": {"source": "synthetic arithmetic", "notes": ""}')
        note = f"Generated question {index}; the options hold the result and three near misses. "
        row["metadata"] = {"source": "synthetic arithmetic", "notes": (note * 20)[: max(0, pad_to - size)]}
    return row, letter, value


def recording(row: dict[str, Any], number: int, answer: str, text: str, reward: float) -> dict[str, Any]:
    """A recorded rollout in the format of ``examples/mcqa/recordings/mcqa_rollouts.jsonl``."""
    prompt = row["responses_create_params"]["input"][0]["content"]
    usage_in, usage_out = len(prompt) // 4, len(text) // 4
    return {
        "responses_create_params": {"input": [{"role": "user", "content": prompt}]},
        "response": {
            "id": f"resp_{number:032x}",
            "created_at": 1767225600.0 + number,
            "model": "benchmark-recorded-model",
            "object": "response",
            "output": [
                {
                    "id": f"msg_{number:032x}",
                    "type": "message",
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": text, "annotations": []}],
                }
            ],
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "status": "completed",
            "usage": {
                "input_tokens": usage_in,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": usage_out,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": usage_in + usage_out,
            },
        },
        "reward": reward,
        "expected_answer": row["expected_answer"],
        "extracted_answer": answer,
    }


def write_mcqa(dataset: Path, recordings: Path | None, count: int, pad_to: int = 0, with_id: bool = True) -> None:
    """``count`` questions to ``dataset`` and, when asked, one recorded answer each (every fifth one wrong)."""
    rng = random.Random(2026)
    with dataset.open("w", encoding="utf-8") as rows, (recordings or Path(os.devnull)).open("w") as recorded:
        for index in range(count):
            row, letter, value = mcqa_question(index, rng, pad_to, with_id)
            rows.write(json.dumps(row) + "\n")
            if recordings is not None:
                answer = letter if index % 5 else LETTERS[(LETTERS.index(letter) + 1) % 4]
                text = f"Working it out gives {value}, which is option {letter}.\n\n\\boxed{{{answer}}}"
                recorded.write(json.dumps(recording(row, index, answer, text, float(answer == letter))) + "\n")


def write_rollouts(path: Path, count: int, record_bytes: int) -> int:
    """``count`` Gym output records of about ``record_bytes`` each (a long model answer), as ``gym eval run``
    writes them; returns the file size."""
    rng = random.Random(7)
    words = ["the", "of", "and", "to", "in", "is", "that", "for", "it", "as", "with", "step", "so", "we", "get"]
    block = " ".join(rng.choice(words) for _ in range(20000))
    block = block.replace("step so", 'step "so"\n')
    with path.open("w", encoding="utf-8") as handle:
        for index in range(count):
            row, letter, value = mcqa_question(index, rng)
            start = rng.randrange(0, len(block) // 2)
            record = recording(row, index, letter, "", 1.0)
            fixed = len(json.dumps(record)) + 250
            text = block[start : start + max(0, record_bytes - fixed)] + f"\n\nSo {value}.\n\\boxed{{{letter}}}"
            record["response"]["output"][0]["content"][0]["text"] = text
            record.update(
                {
                    "mask_sample": False,
                    "failure_kind": None,
                    "failure_reason": None,
                    "_ng_task_index": index,
                    "_ng_rollout_index": 0,
                    "agent_ref": {"type": "responses_api_agents", "name": AGENT},
                    "_ng_environment_server": "mcqa_environment_server",
                    "_ng_result_type": "legacy_agent",
                }
            )
            handle.write(json.dumps(record) + "\n")
    return path.stat().st_size


# Processes.


def run_child(argv: Sequence[str], cwd: Path, timeout: float, env: dict[str, str] | None = None) -> tuple[float, str]:
    """Run ``argv``; (wall seconds, combined output). On any failure or interruption the child gets SIGINT
    (pytest then stops what it started), then SIGKILL."""
    with tempfile.TemporaryFile(mode="w+", encoding="utf-8", errors="replace") as log:
        start = time.perf_counter()
        child = subprocess.Popen(argv, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        try:
            child.wait(timeout)
        except BaseException:
            child.send_signal(signal.SIGINT)
            try:
                child.wait(60)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
            raise
        seconds = time.perf_counter() - start
        log.seek(0)
        output = log.read()
    if child.returncode not in (0, 1):
        raise RuntimeError(f"{' '.join(argv[:6])}... exited with {child.returncode}:\n{output[-3000:]}")
    return seconds, output


def peak_rss_run(argv: Sequence[str], cwd: Path) -> tuple[float, int, str]:
    """Run ``argv`` (a pytest command line) in a fresh process: (wall seconds, peak RSS in KiB, its output)."""
    with tempfile.TemporaryDirectory() as scratch:
        memory = Path(scratch) / "maxrss"
        if TIME_V.exists():
            wrapped = [str(TIME_V), "-v", "-o", str(memory), *argv]
        else:  # pytest in-process, then its own ru_maxrss
            args = argv[len(PYTHON_PYTEST) :]  # with -p gym_eval (autoload is off)
            wrapped = [sys.executable, str(Path(__file__).resolve()), "_pytest", str(memory), *args]
        seconds, output = run_child(wrapped, cwd, 3600)
        found = re.search(r"Maximum resident set size \(kbytes\): (\d+)", memory.read_text())
        assert found, memory.read_text()
        return seconds, int(found.group(1)), output


def peak_rss_kib() -> int:
    """This process's peak RSS in KiB: ``VmHWM`` (``ru_maxrss`` of a child also counts the memory of the parent
    it was forked from), else ``ru_maxrss``."""
    try:
        with open("/proc/self/status") as status:
            return int(next(line for line in status if line.startswith("VmHWM:")).split()[1])
    except (OSError, StopIteration):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def pytest_with_peak(memory: Path, args: list[str]) -> int:
    """Run pytest in this process and write its peak RSS to ``memory`` as ``/usr/bin/time -v`` would."""
    import pytest

    code = pytest.main(args)
    memory.write_text(f"Maximum resident set size (kbytes): {peak_rss_kib()}\n")
    return int(code)


def byte_compile_plugin() -> None:
    """Byte-compile the plugin as ``pip install`` does for an installed package. With ``PYTHONDONTWRITEBYTECODE``
    set (as on these machines) an editable install would otherwise compile every module of the plugin from
    source in every session (~0.1 s), which no installed copy does."""
    import compileall

    import pytest_gym_eval

    compileall.compile_dir(Path(pytest_gym_eval.__file__).parent, quiet=1)


def pytest_ini(project: Path) -> None:
    project.mkdir(parents=True, exist_ok=True)
    (project / "pytest.ini").write_text("[pytest]\n")


def mb(kib: float) -> str:
    return f"{kib / 1024:.0f} MB"


# 1. Overhead against raw Gym.


@contextmanager
def started_gym(root: Path, recordings: Path, delay: float = 0.0) -> Iterator[tuple[Any, tuple[str, int]]]:
    """The replay model (answering after ``delay`` seconds) and Gym's mcqa servers, started once; yields
    (checkout, head server) and stops both, also on failure."""
    from pytest_gym_eval import provision
    from pytest_gym_eval.replay import ReplayServer
    from pytest_gym_eval.run import ModelEndpoint, serving

    checkout = provision.provision()  # instant when cached
    servers = root / "servers"
    servers.mkdir(parents=True)
    with ReplayServer([recordings], log_path=servers / "replay-model.jsonl", delay=delay) as replay:
        model = ModelEndpoint(replay.base_url, "replay", "openai_model", "PYTEST_GYM_EVAL_NO_KEY")
        started = time.monotonic()
        with serving(checkout, model, [AGENT], servers) as head:
            print(f"  Gym's servers ready after {time.monotonic() - started:.0f} s", flush=True)
            yield checkout, head


def raw_gym_run(checkout: Any, root: Path, raw_input: Path, config: Path, repeats: int, expected: int) -> float:
    """One ``gym eval run --no-serve`` over ``raw_input`` (in a session of its own, stopped afterwards)."""
    from pytest_gym_eval import provision
    from pytest_gym_eval.processes import GymProcess
    from pytest_gym_eval.run import ray_temp_dir

    root.mkdir(parents=True)
    output = root / "gym-output" / "rollouts.jsonl"
    ray_dir, made = ray_temp_dir(root)
    argv = [
        str(checkout.gym_executable), "eval", "run", "--no-serve", "--input", str(raw_input), "--output", str(output),
        "--num-repeats", str(repeats), "--config", str(config), "+route_failures_to_sidecar=true",
    ]  # fmt: skip
    start = time.perf_counter()
    process = GymProcess(
        argv, env=provision.gym_environment(checkout, ray_dir), cwd=checkout.path, log_path=root / "eval.log",
        name="gym eval run",
    )  # fmt: skip
    try:
        status = process.wait(3600)
        seconds = time.perf_counter() - start
    finally:
        process.stop()
        if made:
            shutil.rmtree(ray_dir, ignore_errors=True)
    lines = sum(1 for line in output.open() if line.strip()) if output.exists() else 0
    if status != 0 or lines != expected:
        raise RuntimeError(f"raw gym eval run: status {status}, {lines}/{expected} rollouts; see {root}/eval.log")
    return seconds


def bare_pytest_run(project: Path, tests: int) -> float:
    """Wall seconds of a pytest session of ``tests`` trivial parametrized tests (``test_bare.py``), the plugin
    disabled: what pytest itself costs to start, run as many items, report them and end."""
    argv = [*PYTHON_PYTEST, "-p", "no:cacheprovider", "test_bare.py"]  # no plugin at all (autoload is off)
    seconds, output = run_child(argv, project, 600)
    if f"{tests} passed" not in output.splitlines()[-1]:
        raise RuntimeError(f"bare pytest session: {output.splitlines()[-1]}")
    return seconds


def pytest_gym_run(
    checkout: Any, project: Path, runs: Path, head: tuple[str, int], repeats: int, expected: int
) -> tuple[float, float]:
    """One pytest session attached to ``head``; returns its wall time and the part of it spent outside its
    ``gym eval run`` (from the run directory: ``processes.jsonl`` is written when Gym's run starts,
    ``state.json`` when it has exited)."""
    argv = [
        *PYTEST, f"--gym-checkout={checkout.path}", f"--gym-head-server={head[0]}:{head[1]}",
        f"--gym-repeats={repeats}", f"--gym-run-dir={runs}", "mcqa.jsonl", "-p", "no:cacheprovider",
    ]  # fmt: skip
    seconds, output = run_child(argv, project, 3600)
    last = output.splitlines()[-1]
    counts = {kind.rstrip("s"): int(n) for n, kind in re.findall(r"(\d+) (passed|failed|errors?)\b", last)}
    if counts.get("passed", 0) + counts.get("failed", 0) != expected or counts.get("error"):
        raise RuntimeError(f"pytest session: {last} (expected {expected} rollouts)\n{output[-3000:]}")
    (run_dir,) = runs.iterdir()
    gym_seconds = (run_dir / "state.json").stat().st_mtime - (run_dir / "processes.jsonl").stat().st_mtime
    return seconds, seconds - gym_seconds


def added_share(raw: Sequence[float], own: Sequence[float]) -> float:
    """``(median(raw) + median(own)) / median(raw)``: a raw run's time with the plugin's own share added."""
    return (statistics.median(raw) + statistics.median(own)) / statistics.median(raw)


def bench_overhead(work: Path, tasks: int, repeats: int, rounds: int) -> list[Row]:
    """Two sides, in alternating order each round, against the same started servers and replay model: a pytest
    session, and raw ``gym eval run --no-serve --num-repeats R`` over the dataset as a user would type it."""
    root = work / "overhead"
    project = root / "project"
    pytest_ini(project)
    recordings = root / "mcqa_rollouts.jsonl"
    write_mcqa(project / "mcqa.jsonl", recordings, tasks)
    raw_input = root / "raw-input.jsonl"
    with raw_input.open("w") as out:
        for line in (project / "mcqa.jsonl").open():
            row = json.loads(line)
            out.write(json.dumps({**row, "agent_ref": {"type": "responses_api_agents", "name": AGENT}}) + "\n")
    expected = tasks * repeats
    (project / "test_bare.py").write_text(
        f"import pytest\n\n\n@pytest.mark.parametrize('i', range({expected}))\ndef test_bare(i):\n    pass\n"
    )
    sides = ("pytest", "dataset")
    times: dict[str, list[float]] = {side: [] for side in sides}
    own: list[float] = []  # of each pytest session, the seconds outside its `gym eval run`
    bare: list[float] = []  # a pytest session of as many trivial tests, without the plugin
    with started_gym(root, recordings) as (checkout, head):
        config = root / "raw-config.yaml"  # what the plugin writes when attached: the head server only
        config.write_text(json.dumps({"head_server": {"host": head[0], "port": head[1]}}))
        # Warm-up (page cache, Gym's caches).
        raw_gym_run(checkout, root / "warm-up", raw_input, config, repeats, expected)
        pytest_gym_run(checkout, project, root / "runs-warm-up", head, repeats, expected)
        for round_ in range(rounds):
            for side in sides if round_ % 2 == 0 else sides[::-1]:
                if side == "dataset":
                    seconds = raw_gym_run(checkout, root / f"raw-{round_}", raw_input, config, repeats, expected)
                else:
                    runs = root / f"runs-{round_}"
                    seconds, outside = pytest_gym_run(checkout, project, runs, head, repeats, expected)
                    own.append(outside)
                times[side].append(seconds)
                print(f"  round {round_ + 1}: {side} {seconds:.2f} s (load {os.getloadavg()[0]:.1f})", flush=True)
            bare.append(bare_pytest_run(project, expected))
            print(f"  round {round_ + 1}: outside Gym {own[-1]:.2f} s, bare pytest {bare[-1]:.2f} s", flush=True)
    listed = {side: ", ".join(f"{t:.1f}" for t in values) for side, values in times.items()}
    plugin, dataset = times["pytest"], times["dataset"]
    wall = median_ratio(plugin, dataset)
    share = bootstrap([dataset, own], added_share)
    own_median = median_of(own)
    added = bootstrap([own, bare], lambda o, b: statistics.median(o) - statistics.median(b))
    return [
        Row(
            f"Overhead: {tasks} tasks x {repeats} repeats, wall time, median of {rounds} rounds in alternating "
            f"order, against raw `gym eval run --no-serve --num-repeats {repeats}` over the dataset, as a user would "
            f"type it (pytest {listed['pytest']} s; raw {listed['dataset']} s)",
            f"pytest session {statistics.median(plugin):.2f} s",
            f"raw `gym eval run` {statistics.median(dataset):.2f} s",
            wall.text(),
            "<= 1.05",
            wall.verdict(1.05),
            summary=f"overhead: {tasks} tasks x {repeats} repeats vs raw `gym eval run --no-serve --num-repeats "
            f"{repeats}`, wall time",
        ),
        Row(
            "Overhead: of each pytest session, the time outside its own `gym eval run` (start-up, collection and"
            " writing Gym's input before it; the last reports and teardown after it), median; the ratio is"
            f" (raw + this) / raw, free of Gym's run-to-run noise (runs: {', '.join(f'{t:.2f}' for t in own)} s)",
            f"{own_median.text(2)} s",
            f"raw {statistics.median(dataset):.2f} s",
            share.text(),
            "<= 1.05",
            share.verdict(1.05),
            summary="overhead: the session's own time outside its `gym eval run`; ratio (raw + it) / raw",
        ),
        Row(
            f"Overhead: the plugin's own share of a session of {expected} rollouts: its time outside `gym eval run`"
            f" less a bare pytest session (the same pytest, no plugin loaded) running {expected} trivial"
            f" tests (bare: {fmt_list(bare)} s); median difference",
            f"{added.text(2)} s",
            f"bare pytest {statistics.median(bare):.2f} s",
            "",
            "<= 0.3 s",
            added.verdict(0.3),
            summary=f"overhead: the plugin's own share of a session of {expected} rollouts (outside Gym, less bare"
            " pytest)",
        ),
    ]


# 2. Collection at scale.


def bench_collection(work: Path, rows: int, rounds: int) -> list[Row]:
    project = work / "collection"
    pytest_ini(project)
    write_mcqa(project / "dataset.jsonl", None, rows, pad_to=1000)
    write_mcqa(project / "no_ids.jsonl", None, rows, pad_to=1000, with_id=False)
    (project / "test_parametrized.py").write_text(
        f'import pytest\n\n\n@pytest.mark.parametrize("i", range({rows}))\ndef test_trivial(i):\n    pass\n'
    )
    targets = ["test_parametrized.py", "dataset.jsonl", "no_ids.jsonl"]
    results: dict[str, list[tuple[float, int]]] = {target: [] for target in targets}
    for round_ in range(rounds):
        for target in targets[round_ % 3 :] + targets[: round_ % 3]:
            argv = [*PYTEST, "--collect-only", "-q", "-p", "no:cacheprovider", target]
            seconds, rss, output = peak_rss_run(argv, project)
            if f"{rows} tests collected" not in output.splitlines()[-1]:
                raise RuntimeError(f"collecting {target}: {output.splitlines()[-1]}")
            results[target].append((seconds, rss))
            print(f"  round {round_ + 1}: {target} {seconds:.2f} s, peak {mb(rss)}", flush=True)
    _, text = run_child(
        [sys.executable, str(Path(__file__).resolve()), "_input", "dataset.jsonl", str(rows)], project, 600
    )
    written = json.loads(text.strip().splitlines()[-1])
    param_times, param_rss = (list(side) for side in zip(*results["test_parametrized.py"], strict=True))
    table = []
    for target, what in (("dataset.jsonl", "each with an `id`"), ("no_ids.jsonl", "without ids (task id = hash)")):
        size = (project / target).stat().st_size
        data_times, data_rss = (list(side) for side in zip(*results[target], strict=True))
        speed, memory = median_ratio(data_times, param_times), median_ratio(data_rss, param_rss)
        short = "with ids" if target == "dataset.jsonl" else "without ids (task id = hash)"
        table += [
            Row(
                f"Collection: `--collect-only` of {rows:,} rows of {size / rows / 1000:.1f} KB {what} vs {rows:,} "
                f"parametrized tests: time, median of {rounds} rounds (rows {fmt_list(data_times)} s; "
                f"parametrized {fmt_list(param_times)} s)",
                f"{statistics.median(data_times):.2f} s",
                f"{statistics.median(param_times):.2f} s",
                speed.text(),
                "<= 1.0",
                speed.verdict(1.0),
                summary=f"`--collect-only` {rows:,} rows {short} vs {rows:,} parametrized tests: time",
            ),
            Row(
                f"Collection ({what}): peak RSS of the same runs, median",
                mb(statistics.median(data_rss)),
                mb(statistics.median(param_rss)),
                memory.text(),
                "<= 1.0",
                memory.verdict(1.0),
                summary="the same: peak memory",
            ),
        ]
    table.append(
        Row(
            f"Run start: Gym's input for all {rows:,} rows (`write_gym_input`, in a fresh process)",
            f"{written['seconds']:.2f} s, peak RSS {mb(written['peak'])}",
        )
    )
    return table


def fmt_list(values: Sequence[float], digits: int = 2) -> str:
    """``1.23, 1.30, 1.19``: every round's value, for the full table."""
    return ", ".join(f"{value:.{digits}f}" for value in values)


def input_child(dataset: Path, rows: int) -> None:
    """In a fresh process: write Gym's input for every row of ``dataset`` (one repeat) as a session does when
    its run starts; prints JSON with the seconds and the peak RSS."""
    from pytest_gym_eval.plan import RunPlan, write_gym_input

    selected = ((f"{dataset.name}::bench-{i:06d}[r0]", dataset, i + 1, f"bench-{i:06d}", 0, AGENT) for i in range(rows))
    plan = RunPlan.build(selected)
    start = time.perf_counter()
    write_gym_input(plan, dataset.with_name("gym-input.jsonl"))
    print(json.dumps({"seconds": time.perf_counter() - start, "peak": peak_rss_kib()}))


# 3. Reading a large rollouts file.


def follow_child(output: Path, count: int) -> None:
    """In a fresh process: follow ``output`` with :class:`RolloutFeed` until all ``count`` records are in;
    prints JSON with the seconds, the peak RSS before and after, and the time of ``read_full()`` on the last."""
    from pytest_gym_eval.rollouts import RolloutFeed, RolloutRecord, RunState

    state = output.with_name("state.json")
    RunState("running").write(state)
    before = peak_rss_kib()
    start = time.perf_counter()
    feed = RolloutFeed(output, output.with_name("rollouts_failures.jsonl"), state).start()
    try:
        found = feed.wait_all(list(range(count)), timeout=3600)
    finally:
        feed.stop()
    seconds = time.perf_counter() - start
    after = peak_rss_kib()
    last = found[count - 1]
    assert all(isinstance(r, RolloutRecord) and r.reward == 1.0 for r in found.values()), "a record is missing"
    assert isinstance(last, RolloutRecord)
    begin = time.perf_counter()
    full = last.read_full()
    read_full = time.perf_counter() - begin
    assert full["_ng_task_index"] == count - 1
    print(json.dumps({"seconds": seconds, "before": before, "after": after, "read_full": read_full}))


def bench_read(work: Path, megabytes: int, record_kb: int, rounds: int) -> list[Row]:
    """Write a rollouts file of large records and one of as many small ones; follow each ``rounds`` times, each
    in a fresh process."""
    root = work / "read"
    root.mkdir()
    count = megabytes * 1000 // record_kb
    rows = []
    growth: dict[int, list[float]] = {}
    average: dict[int, float] = {}
    for size_kb in (record_kb, 1):
        output = root / f"{size_kb}kb" / "rollouts.jsonl"
        output.parent.mkdir()
        started = time.perf_counter()
        size = write_rollouts(output, count, size_kb * 1000)
        print(f"  wrote {size / 1e6:.0f} MB ({count:,} records) in {time.perf_counter() - started:.0f} s", flush=True)
        follow = [sys.executable, str(Path(__file__).resolve()), "_follow", str(output), str(count)]
        results = []
        for _ in range(rounds):
            _, text = run_child(follow, root, 3600)
            results.append(json.loads(text.strip().splitlines()[-1]))
            seconds, after = results[-1]["seconds"], results[-1]["after"]
            grown = (after - results[-1]["before"]) / 1024
            print(f"  followed in {seconds:.2f} s ({size / 1e6 / seconds:.0f} MB/s), peak {mb(after)}, +{grown:.1f} MB")
        output.unlink()
        growth[size_kb] = [float(r["after"] - r["before"]) for r in results]
        average[size_kb] = size / count / 1000
        seconds = statistics.median(r["seconds"] for r in results)
        rate = size / 1e6 / seconds
        peak = (
            f"peak RSS {mb(statistics.median(r['after'] for r in results))}, "
            f"+{statistics.median(growth[size_kb]) / 1024:.1f} MB while following"
        )
        read_full = statistics.median(r["read_full"] for r in results)
        rows.append(
            Row(
                f"Read: `RolloutFeed` following a {size / 1e6:,.0f} MB rollouts file ({count:,} records of"
                f" {average[size_kb]:.1f} KB) until every record is in, median of {rounds}",
                f"{seconds:.2f} s = {rate:.0f} MB/s; {peak}; `read_full()` of the last record"
                f" {read_full * 1000:.1f} ms",
            )
        )
    ratio = median_ratio(growth[record_kb], growth[1])
    rows.append(
        Row(
            f"Read: memory growth while following {count:,} records of {average[record_kb]:.1f} KB vs as many of"
            f" {average[1]:.1f} KB (rounds: {fmt_list([g / 1024 for g in growth[record_kb]], 1)} MB vs"
            f" {fmt_list([g / 1024 for g in growth[1]], 1)} MB)",
            f"+{statistics.median(growth[record_kb]) / 1024:.1f} MB",
            f"+{statistics.median(growth[1]) / 1024:.1f} MB",
            ratio.text(2),
            "no growth with record size (<= 1.2)",
            ratio.verdict(1.2),
            summary=f"reading a {megabytes:,} MB rollouts file: memory growth, {record_kb} KB vs 1.3 KB records",
        )
    )
    return rows


# 4. Streaming latency.

LATENCY_CONFTEST = """
import json, os, resource, time


def pytest_runtest_logreport(report):
    if report.when == "call":
        with open(os.environ["BENCH_REPORTS"], "a") as handle:
            handle.write(json.dumps({"nodeid": report.nodeid, "reported": time.time()}) + "\\n")


def pytest_sessionstart(session):
    session.config._bench_start = (time.time(), resource.getrusage(resource.RUSAGE_SELF))


def pytest_sessionfinish(session):
    wall0, usage0 = session.config._bench_start
    usage = resource.getrusage(resource.RUSAGE_SELF)
    cpu = usage.ru_utime + usage.ru_stime - usage0.ru_utime - usage0.ru_stime
    with open(os.environ["BENCH_REPORTS"], "a") as handle:
        handle.write(json.dumps({"cpu": cpu, "wall": time.time() - wall0}) + "\\n")
"""


def fake_checkout(root: Path) -> Path:
    """A directory that looks like a Gym checkout whose ``gym`` is ``benchmarks/fake_gym.py``."""
    checkout = root / "fake-gym-checkout"
    (checkout / "nemo_gym").mkdir(parents=True)
    (checkout / "nemo_gym" / "__init__.py").write_text("")
    (checkout / "pyproject.toml").write_text('[project]\nname = "nemo-gym"\nversion = "0.7.0"\n')
    gym = checkout / ".venv" / "bin" / "gym"
    gym.parent.mkdir(parents=True)
    gym.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{HERE / "fake_gym.py"}" "$@"\n')
    gym.chmod(0o755)
    configs = checkout / "resources_servers" / "mcqa" / "configs"
    configs.mkdir(parents=True)
    (configs / "mcqa.yaml").write_text(f"mcqa:\n  resources_servers: {{}}\n{AGENT}:\n  x: 1\n")
    return checkout


def percentile(values: Sequence[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def idle_feed_cpu(work: Path, seconds: float) -> float:
    """Percent of one core a :class:`RolloutFeed` uses following files that do not change (this process is
    otherwise asleep)."""
    from pytest_gym_eval.rollouts import POLL_INTERVAL, RolloutFeed, RunState

    folder = work / "idle-feed"
    folder.mkdir()
    (folder / "rollouts.jsonl").write_text("")
    RunState("running").write(folder / "state.json")
    feed = RolloutFeed(folder / "rollouts.jsonl", folder / "rollouts_failures.jsonl", folder / "state.json")
    before, start = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    feed.start()
    try:
        time.sleep(seconds)
    finally:
        feed.stop()
    after, wall = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter() - start
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    print(f"  idle feed ({POLL_INTERVAL * 1000:g} ms polling): {100 * cpu / wall:.1f} % of one core", flush=True)
    return 100 * cpu / wall


def bench_latency(work: Path, lines: int, pause: float) -> list[Row]:
    root = work / "latency"
    project = root / "project"
    pytest_ini(project)
    (project / "conftest.py").write_text(LATENCY_CONFTEST)
    recordings = root / "recording_rollouts.jsonl"
    write_mcqa(project / "mcqa.jsonl", recordings, lines)
    writes, reports = root / "writes.jsonl", root / "reports.jsonl"
    env = {**os.environ, "BENCH_WRITES": str(writes), "BENCH_REPORTS": str(reports), "BENCH_PAUSE": str(pause)}
    argv = [
        *PYTEST, f"--gym-checkout={fake_checkout(root)}", f"--gym-replay={recordings}",
        f"--gym-run-dir={root / 'runs'}", "mcqa.jsonl", "-p", "no:cacheprovider", "-q",
    ]  # fmt: skip
    run_child(argv, project, 600, env)
    written = {r["id"]: r["written"] for r in map(json.loads, writes.read_text().splitlines())}
    records = [json.loads(line) for line in reports.read_text().splitlines()]
    reported = {r["nodeid"].split("::")[1].split("[")[0]: r["reported"] for r in records if "nodeid" in r}
    session = next(r for r in records if "cpu" in r)
    latencies = [(reported[task] - written[task]) * 1000 for task in written]
    if len(latencies) != lines:
        raise RuntimeError(f"latency: {len(latencies)} of {lines} rollouts reported")
    median, p95 = statistics.median(latencies), percentile(latencies, 0.95)
    print(f"  median {median:.1f} ms, p95 {p95:.1f} ms, max {max(latencies):.1f} ms", flush=True)
    cpu = 100 * session["cpu"] / session["wall"]
    idle = idle_feed_cpu(root, 5.0)
    return [
        Row(
            f"Latency: rollout line written -> its item reported ({lines} rollouts, "
            f"{pause * 500:.0f}-{pause * 1500:.0f} ms apart)",
            f"median {median:.1f} ms, p95 {p95:.1f} ms (max {max(latencies):.1f} ms)",
        ),
        Row(
            "Latency run: CPU of the pytest process (the feed polling included)",
            f"{cpu:.1f} % of one core over {session['wall']:.1f} s",
        ),
        Row(
            "Latency: CPU of an idle `RolloutFeed` (files not changing, 5 s)",
            f"{idle:.1f} % of one core",
        ),
    ]


# The HTML report.

CHROMIUM_FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-default-apps", "--window-size=1400,1000",
)  # fmt: skip
"""As the browser tests start Chromium (conftest.py): headless, as root, no background requests."""
PAGE_TIMINGS = """
const done = arguments[arguments.length - 1];
requestAnimationFrame(() => setTimeout(() => {  // a frame later the first paint has its entry
  const nav = performance.getEntriesByType("navigation")[0];
  const mark = performance.getEntriesByName("gym-first-render")[0];
  const paint = performance.getEntriesByType("paint").find((e) => e.name === "first-contentful-paint");
  done({render: mark.startTime, paint: paint ? paint.startTime : null, load: nav.loadEventEnd});
}, 0));
"""
NEXT_FRAME = """
const done = arguments[arguments.length - 1];
const target = document.querySelector(arguments[0]);
const start = performance.now();
if (target.tagName === "SELECT") {
  target.value = arguments[1];
  target.dispatchEvent(new Event("change"));
} else {
  target.click();
}
requestAnimationFrame(() => setTimeout(() => done(performance.now() - start), 0));
"""
"""Click (or choose a value of a select), then wait for the next frame: milliseconds from the click until the
browser has drawn the result."""
HTML_ACTIONS = (
    ("filter to failed", '.filters button[data-filter="failed"]', ""),
    ("next page", ".pager .next", ""),
    ("sort by mean", ".sort", "low"),
    ("open a transcript (the first: splits the transcripts into lines)", ".cell[data-i]", ""),
    ("open another transcript", ".grid tbody tr:nth-child(5) .cell[data-i]", ""),
)


def synthetic_session(folder: Path, rollouts: int) -> tuple[Any, list[Any], dict[str, Any]]:
    """A finished session of ``rollouts`` mcqa rollouts (4 repeats a task; each task right with its own
    probability, so some are flaky; 1 in 100 errored), its records written as Gym writes them, a gate, a
    baseline report of the same tasks and a replay flip: (conclusion, results, baseline report)."""
    from pytest_gym_eval.gates import Gate, GateMode
    from pytest_gym_eval.reporting.baseline import compare_to_baseline
    from pytest_gym_eval.reporting.json_report import build_report
    from pytest_gym_eval.reporting.summary import Conclusion, Flip, RolloutResult, session_verdict, summarize

    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(13)
    dataset, repeats = "datasets/mcqa.jsonl", 4
    outputs, failures = folder / "rollouts.jsonl", folder / "rollouts_failures.jsonl"
    results, old = [], []
    lines = {outputs: 0, failures: 0}
    with outputs.open("w", encoding="utf-8") as good, failures.open("w", encoding="utf-8") as bad:
        for task in range(rollouts // repeats):
            row, letter, value = mcqa_question(task, rng)
            chance = rng.random()
            for repeat in range(repeats):
                stamp = {"_ng_task_index": task * repeats + repeat, "_ng_rollout_index": 0}
                if rng.random() < 0.01:
                    record = {
                        "responses_create_params": row["responses_create_params"], **stamp,
                        "_ng_failure_class": "agent_run_error", "_ng_failure_http_status": 500,
                        "_ng_failure_message": "500, message='Internal Server Error', url='http://127.0.0.1:1/run'",
                    }  # fmt: skip
                    target, handle, status, reward = failures, bad, "error", None
                else:
                    answer = letter if rng.random() < chance else LETTERS[(LETTERS.index(letter) + 1) % 4]
                    text = f"Working it out gives {value}, which is option {letter}.\n\n\\boxed{{{answer}}}"
                    reward = float(answer == letter)
                    record = {**recording(row, task, answer, text, reward), **stamp}
                    target, handle, status = outputs, good, "passed" if reward == 1.0 else "failed"
                handle.write(json.dumps(record) + "\n")
                lines[target] += 1
                task_id = row["id"]
                results.append(
                    RolloutResult(
                        f"{dataset}::{task_id}[r{repeat}]", dataset, task_id, repeat, AGENT, status, reward,
                        "agent_run_error" if reward is None else None, f"{target}:{lines[target]}",
                    )
                )  # fmt: skip
                old.append(RolloutResult(results[-1].nodeid, dataset, task_id, repeat, AGENT, "passed", 1.0))
    baseline = build_report([], old, {})
    summaries = summarize(
        results, thresholds={dataset: 1.0}, gates={dataset: [Gate("mean_reward", 0.5)]}, mode=GateMode.POINT
    )
    exit_status, reason = session_verdict(summaries, inconclusive_passes=False)
    flip = next(r for r in results if r.reward is not None)
    conclusion = Conclusion(
        summaries, compare_to_baseline(baseline, results), [Flip(flip.nodeid, flip.reward or 0.0, (0.5,))],
        exit_status, reason,
    )  # fmt: skip
    return conclusion, results, baseline


def measure_page(page: Path, profile: Path) -> dict[str, float | None]:
    """Open ``page`` in a fresh headless Chromium and time it: ``render`` (navigation start to the grids drawn,
    the page's ``gym-first-render`` mark), ``paint`` (first contentful paint), ``load`` (load event end), then
    each of :data:`HTML_ACTIONS` (click to next frame); milliseconds."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in (*CHROMIUM_FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    try:
        driver.set_script_timeout(60)
        driver.get(page.resolve().as_uri())
        timings: dict[str, float | None] = dict(driver.execute_async_script(PAGE_TIMINGS))
        for name, selector, value in HTML_ACTIONS:
            timings[name] = float(driver.execute_async_script(NEXT_FRAME, selector, value))
        return timings
    finally:
        driver.quit()


def median_known(values: Sequence[float | None]) -> float:
    """The median of the values the browser reported (None: it did not, e.g. no first-paint entry yet); nan
    when there is none."""
    known = [value for value in values if value is not None]
    return statistics.median(known) if known else math.nan


def shown_ms(value: float) -> str:
    """Milliseconds for the table; ``not reported`` for nan (no round's browser reported the value)."""
    return "not reported" if math.isnan(value) else f"{value:.0f} ms"


def median_known_of(columns: Sequence[Sequence[float | None]], statistic: Callable[..., float]) -> Estimate:
    """:func:`verdicts.bootstrap` of ``statistic`` over rounds that may hold values the browser did not report
    (None; ``statistic`` must skip them, e.g. with :func:`median_known`)."""
    return bootstrap(columns, statistic)  # type: ignore[arg-type]


def bench_html(work: Path, sizes: Sequence[int], rounds: int) -> list[Row]:
    from pytest_gym_eval.reporting import html

    if not (Path("/usr/bin/chromium").exists() and Path("/usr/bin/chromedriver").exists()):
        raise RuntimeError(
            "html: needs /usr/bin/chromium and /usr/bin/chromedriver (apt-get install chromium chromium-driver)"
        )
    rows = []
    for size in sizes:
        folder = work / "html" / str(size)
        conclusion, results, baseline = synthetic_session(folder, size)
        page = folder / "report.html"
        start = time.perf_counter()
        html.write_page(page, conclusion, results, {"model": "benchmark"}, baseline=baseline)
        written = time.perf_counter() - start
        runs = [measure_page(page, folder / f"profile-{i}") for i in range(rounds)]
        median = {key: median_known([run[key] for run in runs]) for key in runs[0]}
        megabytes = page.stat().st_size / 1e6
        each = ", ".join(f"{run['render'] or math.nan:.0f}" for run in runs)
        load = os.getloadavg()[0]
        print(
            f"  {size:,} rollouts: {megabytes:.1f} MB, written in {written:.2f} s; first render "
            f"{median['render']:.0f} ms (runs {each}; load average {load:.1f})",
            flush=True,
        )
        actions = ", ".join(f"{name} {median[name]:.0f} ms" for name, _, _ in HTML_ACTIONS)
        render_ms = median_known_of([[run["render"] for run in runs]], lambda r: median_known(r))
        columns = [[run[name] for run in runs] for name, _, _ in HTML_ACTIONS]
        slowest = median_known_of(columns, lambda *cs: max(median_known(c) for c in cs))
        tasks = size // 4
        rows += [
            Row(
                f"HTML report: {size:,} rollouts ({tasks:,} tasks x 4 repeats, mcqa transcripts, a baseline): page "
                "size; time to write it (reading every record)",
                f"{megabytes:.1f} MB; {written:.2f} s",
            ),
            Row(
                f"HTML report: {size:,} rollouts, headless Chromium: time to first render (navigation start to "
                f"the grids drawn), median of {rounds} (runs {each} ms; load average {load:.1f})",
                f"{shown_ms(median['render'])} (first paint {shown_ms(median['paint'])}, load event "
                f"{shown_ms(median['load'])})",
                ratio=f"{render_ms.text(0)} ms",
                goal="<= 3 s (opens in a few seconds)",
                verdict=render_ms.verdict(3000),
                summary=f"html: page of {size:,} rollouts, first render in headless Chromium",
            ),
            Row(
                f"HTML report: {size:,} rollouts: from a click to the next frame drawn, median of {rounds}",
                actions,
                ratio=f"slowest {slowest.text(0)} ms",
                goal="<= 100 ms each (RAIL: a response within 100 ms feels immediate)",
                verdict=slowest.verdict(100),
                summary=f"html: page of {size:,} rollouts, a click (filter, page, sort, transcript) to the next frame",
            ),
        ]
    return rows


# 5. Throughput against a slow model.


def bench_throughput(work: Path, rollouts: int, latency: float, concurrencies: Sequence[int]) -> list[Row]:
    """Sessions of ``rollouts`` mcqa tasks (1 repeat) attached to one Gym whose replay model answers each
    request after ``latency`` seconds, one per ``--gym-concurrency`` value: the model-call rate (requests the
    model received, first to last, plus one latency) and the session's whole wall time."""
    root = work / "throughput"
    project = root / "project"
    pytest_ini(project)
    recordings = root / "mcqa_rollouts.jsonl"
    write_mcqa(project / "mcqa.jsonl", recordings, rollouts)
    log = root / "servers" / "replay-model.jsonl"
    rows = []
    with started_gym(root, recordings, delay=latency) as (checkout, head):
        for concurrency in concurrencies:
            before = sum(1 for _ in log.open()) if log.exists() else 0
            argv = [
                *PYTEST, f"--gym-checkout={checkout.path}", f"--gym-head-server={head[0]}:{head[1]}",
                f"--gym-concurrency={concurrency}", f"--gym-run-dir={root / f'runs-{concurrency}'}", "mcqa.jsonl",
                "-p", "no:cacheprovider", "-q",
            ]  # fmt: skip
            seconds, output = run_child(argv, project, 3600)
            calls = [json.loads(line) for line in list(log.open())[before:]]
            times = sorted(c["time"] for c in calls if c["path"].endswith("/responses") and c.get("status") == 200)
            if len(times) != rollouts:
                raise RuntimeError(f"{len(times)} model calls for {rollouts} rollouts:\n{output[-3000:]}")
            span = times[-1] - times[0] + latency
            print(f"  --gym-concurrency={concurrency}: {rollouts / span:.1f} rollouts/s, session {seconds:.1f} s")
            rows.append(
                Row(
                    f"Throughput: {rollouts} rollouts through one Gym, model answering in {latency:g} s, "
                    f"`--gym-concurrency={concurrency}`: model calls per second (first to last call) and the "
                    "pytest session's wall time",
                    f"{rollouts / span:.1f} rollouts/s; session {seconds:.1f} s",
                    f"ideal {min(concurrency, rollouts) / latency:.1f} rollouts/s (concurrency / latency)",
                    f"{(rollouts / span) / (min(concurrency, rollouts) / latency):.2f}",
                )
            )
    return rows


# 6. Merging shard reports.


def write_shard_reports(folder: Path, tasks: int, repeats: int, shards: int, seed: int = 20261130) -> list[Path]:
    """Synthetic ``--gym-report`` files of ``shards`` sessions over one dataset of ``tasks`` tasks x ``repeats``
    repeats, as ``--gym-shard=I/N`` sessions write them (plan, meta, per-shard summaries, rollouts).

    Each task has a difficulty p ~ Beta(2, 1); each rollout's reward is 1.0 with probability p, else 0.0, and
    1 rollout in 200 is an error (``agent_run_error``), so every statistic has work to do.
    """
    from pytest_gym_eval.gates import Gate, GateMode
    from pytest_gym_eval.reporting.json_report import build_report, write_report
    from pytest_gym_eval.reporting.summary import RolloutResult, summarize
    from pytest_gym_eval.shard import SHARD_RULE, assign_shards

    rng = random.Random(seed)
    dataset = "datasets/synthetic.jsonl"
    agent = "mcqa_simple_agent"
    ids = [f"task-{index:06d}" for index in range(tasks)]
    owners = assign_shards(dataset, ids, shards)
    gates = [Gate("mean_reward", 0.6), Gate("pass_at_k", 0.8, 4)]
    started = 1767225600.0
    paths = []
    for shard in range(1, shards + 1):
        mine = [task for task in ids if owners[task] == shard]
        results: list[RolloutResult] = []
        for task in mine:
            difficulty = rng.betavariate(2, 1)
            for repeat in range(repeats):
                nodeid = f"{dataset}::{task}[r{repeat}]"
                start = started + rng.random() * 3600
                if rng.random() < 0.005:
                    result = RolloutResult(nodeid, dataset, task, repeat, agent, "error", None, "agent_run_error")
                else:
                    reward = 1.0 if rng.random() < difficulty else 0.0
                    status = "passed" if reward >= 1.0 else "failed"
                    record = f"/runs/shard-{shard}/gym-output/rollouts.jsonl:{len(results) + 1}"
                    result = RolloutResult(nodeid, dataset, task, repeat, agent, status, reward, None, record)
                results.append(replace(result, start=start, stop=start + rng.uniform(1.0, 30.0)))
        summaries = summarize(results, thresholds={dataset: 1.0}, gates={dataset: gates}, mode=GateMode.POINT)
        plan = {
            "shard": {"index": shard, "count": shards},
            "rule": SHARD_RULE,
            "gate_mode": "point",
            "inconclusive": "fail",
            "datasets": [
                {
                    "dataset": dataset, "sha256": "0" * 64, "repeats": repeats, "agent": agent, "tasks": ids,
                    "agents": {}, "threshold": 1.0,
                    "gates": [{"metric": g.metric, "k": g.k, "threshold": g.threshold} for g in gates],
                    "selected": {task: list(range(repeats)) for task in mine},
                }
            ],
        }  # fmt: skip
        meta = {"gym_version": "0.7.0", "model": "synthetic", "model_type": "openai_model"}
        meta["shard"] = f"{shard}/{shards}"
        path = folder / f"shard-{shard}.json"
        write_report(path, build_report(summaries, results, meta, plan=plan))
        paths.append(path)
    return paths


def bench_merge(work: Path, tasks: int, repeats: int, shards: int, rounds: int) -> list[Row]:
    """Time ``python -m pytest_gym_eval merge`` over synthetic shard reports, with and without writing the merged
    JSON report and JUnit XML: the CPU time (user + system: what other work on the machine inflates least), wall
    time and peak RSS of the ``rounds`` fresh processes' best."""
    folder = work / "merge"
    folder.mkdir(parents=True, exist_ok=True)
    paths = write_shard_reports(folder, tasks, repeats, shards)
    size = sum(path.stat().st_size for path in paths)
    rollouts = tasks * repeats
    base = [sys.executable, "-m", "pytest_gym_eval", "merge", *map(str, paths)]
    rows = []
    for label, extra in [
        ("summary and verdict only", []),
        ("also writing the merged JSON report and JUnit XML", ["--gym-report=merged.json", "--junitxml=merged.xml"]),
    ]:
        best: tuple[float, int, float] | None = None
        loads = []
        for _ in range(rounds):
            loads.append(os.getloadavg()[0])
            seconds, peak, cpu, output = merge_with_peak([*base, *extra], folder)
            if f"{rollouts} of {rollouts} selected rollouts" not in output:
                raise RuntimeError(f"the merge did not merge every rollout:\n{output[-3000:]}")
            best = (seconds, peak, cpu) if best is None or cpu < best[2] else best
        assert best is not None
        rows.append(
            Row(
                f"Merge: {shards} shard reports of {tasks:,} tasks x {repeats} repeats ({rollouts:,} rollouts, "
                f"{size / 1e6:.0f} MB of JSON) into one summary and gate verdict, {label}: CPU time (user + "
                f"system) and wall time, best of {rounds} fresh processes (load average "
                f"{min(loads):.1f}-{max(loads):.1f} from other work)",
                f"CPU {best[2]:.2f} s, wall {best[0]:.2f} s, peak RSS {mb(best[1])}",
                goal="seconds: CPU <= 10 s",
                verdict="met" if best[2] <= 10.0 else "not met",
            )
        )
    return rows


# 8. adaptive: rollouts an anytime-valid gate spends, on simulated rewards.


def bench_adaptive(tasks: int, runs: int, max_repeats: int, min_repeats: int) -> list[Row]:
    from pytest_gym_eval.gates import Gate, Verdict
    from pytest_gym_eval.sequential import simulate, wave_ends

    threshold = 0.7
    gate = Gate("mean_reward", threshold)
    rng = random.Random(16)
    rows = []
    fixed = tasks * max_repeats
    ends = wave_ends(min_repeats, max_repeats)
    for mean in (0.9, 0.8, 0.75, 0.7, 0.65, 0.6, 0.5):
        # Half the tasks easier, half harder by 0.2: the mean over tasks is exactly `mean`.
        task_means = [min(1.0, max(0.0, mean + (0.2 if t % 2 else -0.2))) for t in range(tasks)]
        start = time.perf_counter()
        spent, verdicts = [], {v: 0 for v in Verdict}
        for _ in range(runs):
            results, rollouts = simulate(task_means, [gate], min_repeats, max_repeats, rng)
            spent.append(rollouts)
            verdicts[results[0].verdict] += 1
        share = statistics.fmean(spent) / fixed
        seconds = time.perf_counter() - start
        wrong = verdicts[Verdict.FAIL] if mean > threshold else verdicts[Verdict.PASS]
        where = "at" if mean == threshold else ("above" if mean > threshold else "below")
        print(
            f"  true mean {mean:.2f}: {share:.0%} of the rollouts; PASS {verdicts[Verdict.PASS]}, FAIL "
            f"{verdicts[Verdict.FAIL]}, INCONCLUSIVE {verdicts[Verdict.INCONCLUSIVE]} of {runs} ({seconds:.1f} s)",
            flush=True,
        )
        rows.append(
            Row(
                f"adaptive: {tasks} tasks, up to {max_repeats} repeats (waves to {ends}), mean-reward gate >= "
                f"{threshold}, true mean {mean:.2f} ({where}); {runs} simulated runs",
                f"{statistics.fmean(spent):.0f} rollouts ({share:.0%}); PASS {verdicts[Verdict.PASS] / runs:.1%}, "
                f"FAIL {verdicts[Verdict.FAIL] / runs:.1%}",
                f"{fixed} rollouts (fixed {max_repeats})",
                f"{share:.2f}",
                goal="wrong verdicts <= 5%",
                verdict="met" if wrong / runs <= 0.05 else "not met",
            )
        )
    return rows


def merge_with_peak(argv: Sequence[str], cwd: Path) -> tuple[float, int, float, str]:
    """Run a merge command line in a fresh process: (wall seconds, peak RSS in KiB, CPU seconds (user +
    system), its output); RSS and CPU are 0 without ``/usr/bin/time``. The CPU time is what a machine
    shared with other work cannot inflate."""
    env = {**os.environ, "COLUMNS": "100"}
    if not TIME_V.exists():
        seconds, output = run_child(argv, cwd, 600, env)
        return seconds, 0, 0.0, output
    with tempfile.TemporaryDirectory() as scratch:
        memory = Path(scratch) / "maxrss"
        seconds, output = run_child([str(TIME_V), "-v", "-o", str(memory), *argv], cwd, 600, env)
        text = memory.read_text()
        found = re.search(r"Maximum resident set size \(kbytes\): (\d+)", text)
        cpu = sum(float(m) for m in re.findall(r"(?:User|System) time \(seconds\): ([0-9.]+)", text))
        return seconds, int(found.group(1)) if found else 0, cpu, output


# 9. A warm Gym (--gym-keep-alive): the second session against raw Gym, the first session's cost.

MCQA_EXAMPLE = HERE.parent / "examples" / "mcqa"


def warm_session(project: Path, runs: Path, env: dict[str, str], *extra: str) -> tuple[float, str, Path]:
    """One session of the mcqa example (12 tasks x 2 repeats, replayed answers) in ``project``; returns its wall
    time, its output and its run directory."""
    argv = [
        *PYTEST, "--gym-replay=recordings/mcqa_rollouts.jsonl", f"--gym-run-dir={runs}", "-p", "no:cacheprovider",
        *extra,
    ]  # fmt: skip
    seconds, output = run_child(argv, project, 3600, env)
    last = output.splitlines()[-1]
    if "24 rollouts (24 scored, 0 errors)" not in output:
        raise RuntimeError(f"warm: the session did not score its 24 rollouts: {last}\n{output[-3000:]}")
    return seconds, output, max(runs.iterdir(), key=lambda p: p.stat().st_mtime)


def bench_warm(work: Path, rounds: int) -> list[Row]:
    """The mcqa example: a cold session without ``--gym-keep-alive`` and one with it (the first session's cost of
    keeping Gym alive: the keeper started before ``gym env start``, the registry write); then, in alternating
    order, sessions attached to that warm Gym and raw ``gym eval run --no-serve`` over the very input such a
    session hands Gym, against the same servers (median of ``rounds`` each)."""
    from pytest_gym_eval import provision
    from pytest_gym_eval.cli.stop import main as stop_main
    from pytest_gym_eval.registry import Registry, write_private

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


def bench_teardown(work: Path, rounds: int) -> list[Row]:
    """The mcqa example's session (12 tasks x 2 repeats, replayed answers) starting and stopping Gym itself: the
    seconds from its last rollout (the last write to Gym's rollouts file) to the session's end (the pytest
    process exited), median of ``rounds``; and, from its terminal, how long stopping Gym took."""
    root = work / "teardown"
    project = root / "project"
    shutil.copytree(MCQA_EXAMPLE, project, ignore=shutil.ignore_patterns(".pytest_cache", "__pycache__"))
    ends, stops = [], []
    for round_ in range(rounds):
        _, output, run_dir = warm_session(project, root / f"runs-{round_}", dict(os.environ))
        ended = time.time()
        last_rollout = (run_dir / "gym-output" / "rollouts.jsonl").stat().st_mtime
        ends.append(ended - last_rollout)
        stopped = re.search(r"gym: Gym stopped in ([0-9.]+) s", output)
        stops.append(float(stopped.group(1)) if stopped else float("nan"))
        print(f"  round {round_ + 1}: last rollout -> session end {ends[-1]:.2f} s (Gym stopped in {stops[-1]} s)")
    estimate = median_of(ends)
    listed = ", ".join(f"{t:.2f}" for t in ends)
    return [
        Row(
            f"Teardown: the mcqa example's session (12 tasks x 2 repeats) starting Gym itself, from its last rollout "
            f"to the session's end, median of {rounds} ({listed} s; stopping Gym took "
            f"{', '.join(f'{t:.1f}' for t in stops)} s of it)",
            f"{estimate.text()} s",
            goal="<= 2 s",
            verdict=estimate.verdict(2.0),
            summary="teardown: last rollout to session end",
        )
    ]


# The table.


def machine() -> str:
    cpu = "unknown"
    with open("/proc/cpuinfo") as handle:
        for line in handle:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    with open("/proc/meminfo") as handle:
        total_kb = int(handle.readline().split()[1])
    return (
        f"{os.cpu_count()} CPUs (nproc {len(os.sched_getaffinity(0))}), {total_kb / 1024**2:.1f} GiB memory, "
        f"CPU {cpu}, Python {platform.python_version()}, {platform.system()} {platform.release()}"
    )


def cell(text: str) -> str:
    """``text`` safe inside a Markdown table cell."""
    return text.replace("|", "\\|").replace("\n", " ")


def render(rows: list[Row], settings: str, seconds: float, loads: tuple[float, float], full: bool = True) -> str:
    """The table of ``rows`` with the machine, the command, its duration, the date and the load averages (at the
    start and the end: the machine's other work); ``full`` gives every round's values (results.md), else the
    short labels (the READMEs)."""
    lines = [
        f"Machine: {machine()}; load average {loads[0]:.1f} at the start, {loads[1]:.1f} at the end.  ",
        f"Command: `{settings}`; took {seconds / 60:.1f} min; {stamp()}; every pytest session loads this plugin "
        "alone (`PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 -p gym_eval`).  ",
        f"Ratios: the median over the rounds with its interval in brackets, a {METHOD}; a goal is met when the "
        "interval's upper end is within it, unclear when only the median is.",
        "",
        "| benchmark | pytest-gym-eval | baseline | ratio (interval) | goal | verdict |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        cells = (r.benchmark if full else r.summary or r.benchmark, r.plugin, r.baseline, r.ratio, r.goal, r.verdict)
        lines.append("| " + " | ".join(cell(c) for c in cells) + " |")
    return "\n".join(lines) + "\n"


RESULT_FILES = (HERE / "results.md",)
"""Files that get the full table between the markers (on a full run)."""
README_FILES = (HERE.parent / "README.md", HERE / "README.md")
"""Files that get the short table between the markers (on a full run)."""


def main(argv: list[str]) -> int:
    if argv[:1] == ["_follow"]:
        follow_child(Path(argv[1]), int(argv[2]))
        return 0
    if argv[:1] == ["_input"]:
        input_child(Path(argv[1]), int(argv[2]))
        return 0
    if argv[:1] == ["_pytest"]:
        return pytest_with_peak(Path(argv[1]), argv[2:])
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="scale everything down (a few minutes)")
    parser.add_argument("--only", default=",".join(BENCHMARKS), help=f"comma-separated subset of {BENCHMARKS}")
    parser.add_argument("--tasks", type=int, help="overhead: tasks (default 50; quick 10)")
    parser.add_argument("--repeats", type=int, help="overhead: repeats per task (default 4; quick 2)")
    parser.add_argument("--rounds", type=int, help="overhead: alternated runs per side (default 15; quick 2)")
    parser.add_argument("--rows", type=int, help="collection: dataset rows (default 100000; quick 10000)")
    parser.add_argument("--read-mb", type=int, help="read: size of the rollouts file in MB (default 1000; quick 100)")
    parser.add_argument("--record-kb", type=int, default=20, help="read: size of a large record in KB (default 20)")
    parser.add_argument("--latency-lines", type=int, help="latency: rollouts (default 200; quick 40)")
    parser.add_argument("--pause", type=float, default=0.05, help="latency: mean seconds between two lines (0.05)")
    parser.add_argument(
        "--html-rollouts",
        type=int,
        action="append",
        help="html: rollouts of a page (repeatable; default 1000 and 10000)",
    )
    parser.add_argument("--adaptive-tasks", type=int, default=100, help="adaptive: tasks per simulated run (100)")
    parser.add_argument("--adaptive-runs", type=int, default=1000, help="adaptive: simulated runs per mean (1000)")
    parser.add_argument("--warm-rounds", type=int, help="warm: sessions and raw runs per side (default 7; quick 1)")
    parser.add_argument("--teardown-rounds", type=int, help="teardown: sessions (default 3; quick 1)")
    parser.add_argument(
        "--latency", type=float, default=0.5, help="throughput: seconds the model takes per answer (0.5)"
    )
    parser.add_argument("--merge-tasks", type=int, help="merge: tasks (default 20000; quick 2000)")
    parser.add_argument("--merge-repeats", type=int, default=8, help="merge: repeats per task (default 8)")
    parser.add_argument("--merge-shards", type=int, default=8, help="merge: shard reports (default 8)")
    parser.add_argument("--output", type=Path, help="also write the full table to this file (any run)")
    parser.add_argument(
        "--no-write",
        action="store_true",
        help="a full run only prints its table (by default it writes it into benchmarks/results.md and the READMEs)",
    )
    args = parser.parse_args(argv)
    quick = args.quick
    only = [name.strip() for name in args.only.split(",") if name.strip()]
    unknown = set(only) - set(BENCHMARKS)
    if unknown:
        parser.error(f"unknown benchmarks: {', '.join(sorted(unknown))}")
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"  # every child pytest: this plugin alone (see PYTEST)
    started = time.perf_counter()
    load_at_start = os.getloadavg()[0]
    rows: list[Row] = []
    work = Path(tempfile.mkdtemp(prefix="gym-bench-"))
    failed = True
    byte_compile_plugin()
    try:
        for name in only:
            print(f"{name} ...", flush=True)
            if name == "overhead":
                tasks, repeats = args.tasks or (10 if quick else 50), args.repeats or (2 if quick else 4)
                rows += bench_overhead(work, tasks, repeats, args.rounds or (2 if quick else 15))
            elif name == "collection":
                rows += bench_collection(work, args.rows or (10_000 if quick else 100_000), 2 if quick else 7)
            elif name == "read":
                rows += bench_read(work, args.read_mb or (100 if quick else 1000), args.record_kb, 2 if quick else 3)
            elif name == "latency":
                rows += bench_latency(work, args.latency_lines or (40 if quick else 200), args.pause)
            elif name == "throughput":
                concurrencies = (1, 8, 64) if not quick else (4, 32)
                rows += bench_throughput(work, 32 if quick else 128, args.latency, concurrencies)
            elif name == "merge":
                merge_tasks, merge_repeats = args.merge_tasks or (2_000 if quick else 20_000), args.merge_repeats
                rows += bench_merge(work, merge_tasks, merge_repeats, args.merge_shards, 1 if quick else 3)
            elif name == "adaptive":
                rows += bench_adaptive(args.adaptive_tasks, 200 if quick else args.adaptive_runs, 8, 2)
            elif name == "warm":
                rows += bench_warm(work, args.warm_rounds or (1 if quick else 7))
            elif name == "teardown":
                rows += bench_teardown(work, args.teardown_rounds or (1 if quick else 3))
            else:
                rows += bench_html(work, args.html_rollouts or (1_000, 10_000), 1 if quick else 3)
        failed = False
    finally:
        shutil.rmtree(work / "read", ignore_errors=True)  # the large rollouts files
        if failed:
            print(f"benchmark failed; its files (logs, runs) are kept in {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)
    loads = (load_at_start, os.getloadavg()[0])
    settings = " ".join(["benchmarks/run.py", *argv])
    elapsed = time.perf_counter() - started
    table = render(rows, settings, elapsed, loads)
    print("\n" + table)
    if args.output is not None:
        args.output.write_text(f"# pytest-gym-eval benchmark results\n\n{table}")
        print(f"written to {args.output}")
    if not quick and only == list(BENCHMARKS) and not args.no_write:
        short = render(rows, settings, elapsed, loads, full=False)
        for path, block in [*((p, table) for p in RESULT_FILES), *((p, short) for p in README_FILES)]:
            if replace_between_markers(path, block):
                print(f"table written to {path}")
            else:
                print(f"{path} has no markers ({TABLE_BEGIN} ... {TABLE_END}): left alone", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
