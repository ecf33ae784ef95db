"""What several benchmarks share: the table's :class:`Row`, synthetic mcqa data, child processes and their peak
memory, a started Gym with the replay model, raw ``gym eval run``, and the mcqa example's session."""

from __future__ import annotations

import json
import os
import random
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
"""benchmarks/"""
RUNNER = HERE / "run.py"
"""The runner, which a benchmark's child process re-enters (``run.py _follow|_input|_pytest ...``)."""
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


def response_object(number: int, text: str, input_tokens: int, output_tokens: int) -> dict[str, Any]:
    """An OpenAI Responses object with one assistant message ``text`` and the given token usage, as the replay
    model serves it (ids and creation time from ``number``)."""
    return {
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
            "input_tokens": input_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": output_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": input_tokens + output_tokens,
        },
    }


def recording(row: dict[str, Any], number: int, answer: str, text: str, reward: float) -> dict[str, Any]:
    """A recorded rollout in the format of ``examples/mcqa/recordings/mcqa_rollouts.jsonl``."""
    prompt = row["responses_create_params"]["input"][0]["content"]
    return {
        "responses_create_params": {"input": [{"role": "user", "content": prompt}]},
        "response": response_object(number, text, len(prompt) // 4, len(text) // 4),
        "reward": reward,
        "expected_answer": row["expected_answer"],
        "extracted_answer": answer,
    }


WRONG_EVERY = 5
""":func:`write_mcqa` records a wrong answer for every task whose index is a multiple of this (those rollouts fail),
and :func:`write_bare_tests` fails the same tests."""


def write_mcqa(dataset: Path, recordings: Path | None, count: int, pad_to: int = 0, with_id: bool = True) -> None:
    """``count`` questions to ``dataset`` and, when asked, one recorded answer each (every fifth one wrong)."""
    rng = random.Random(2026)
    with dataset.open("w", encoding="utf-8") as rows, (recordings or Path(os.devnull)).open("w") as recorded:
        for index in range(count):
            row, letter, value = mcqa_question(index, rng, pad_to, with_id)
            rows.write(json.dumps(row) + "\n")
            if recordings is not None:
                answer = letter if index % WRONG_EVERY else LETTERS[(LETTERS.index(letter) + 1) % 4]
                text = f"Working it out gives {value}, which is option {letter}.\n\n\\boxed{{{answer}}}"
                recorded.write(json.dumps(recording(row, index, answer, text, float(answer == letter))) + "\n")


def write_raw_input(dataset: Path, raw_input: Path) -> None:
    """``dataset``'s rows as raw ``gym eval run`` takes them: each with the mcqa agent named in ``agent_ref`` (what
    the plugin adds to Gym's input itself)."""
    with raw_input.open("w") as out:
        for line in dataset.open():
            row = json.loads(line)
            out.write(json.dumps({**row, "agent_ref": {"type": "responses_api_agents", "name": AGENT}}) + "\n")


def check_ran(output: str, expected: int, what: str) -> None:
    """Raise RuntimeError naming ``what`` unless pytest's last line of ``output`` says ``expected`` tests passed or
    failed, and none errored."""
    last = output.splitlines()[-1] if output.strip() else "(no output)"
    counts = {kind.rstrip("s"): int(n) for n, kind in re.findall(r"(\d+) (passed|failed|errors?)\b", last)}
    if counts.get("passed", 0) + counts.get("failed", 0) != expected or counts.get("error"):
        raise RuntimeError(f"{what}: {last} (expected {expected} tests)\n{output[-3000:]}")


def write_bare_tests(project: Path, tasks: int, repeats: int) -> None:
    """``test_bare.py`` in ``project``: a bare pytest session's ``tasks x repeats`` trivial tests, which fail where
    the session's rollouts of :func:`write_mcqa`'s dataset fail (every repeat of every fifth task), each with a
    one-line message and no traceback, as the plugin's failed rollouts show. pytest's own work for failures is
    then in the floor too: its failure summary scans, for each failure, every other test's teardown report
    (``TerminalReporter._get_teardown_reports``), failures x tests in all."""
    (project / "test_bare.py").write_text(
        "import pytest\n\n\n"
        f"@pytest.mark.parametrize('i', range({tasks * repeats}))\n"
        "def test_bare(i):\n"
        f"    if (i // {repeats}) % {WRONG_EVERY} == 0:\n"
        "        pytest.fail('reward 0 is below the pass threshold 1', pytrace=False)\n"
    )


def bare_pytest_session(project: Path, tests: int, env: dict[str, str] | None = None) -> float:
    """Wall seconds of a bare pytest session (no plugin loaded: autoload is off) of :func:`write_bare_tests`'
    ``tests`` trivial tests in ``project``: what pytest itself costs to start, run as many items, report them and
    end, the floor for any pytest plugin. Raises RuntimeError when it did not run them all."""
    argv = [*PYTHON_PYTEST, "-p", "no:cacheprovider", "test_bare.py"]
    seconds, output = run_child(argv, project, 3600, env)
    check_ran(output, tests, "bare pytest session")
    return seconds


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
            wrapped = [sys.executable, str(RUNNER), "_pytest", str(memory), *args]
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


def fmt_list(values: Sequence[float], digits: int = 2) -> str:
    """``1.23, 1.30, 1.19``: every round's value, for the full table."""
    return ", ".join(f"{value:.{digits}f}" for value in values)


@contextmanager
def started_gym(root: Path, recordings: Path, delay: float = 0.0) -> Iterator[tuple[Any, tuple[str, int]]]:
    """The replay model (answering after ``delay`` seconds) and Gym's mcqa servers, started once; yields
    (checkout, head server) and stops both, also on failure."""
    from pytest_gym_eval import provision
    from pytest_gym_eval.gym.run import ModelEndpoint
    from pytest_gym_eval.gym.standalone import serving
    from pytest_gym_eval.replay import ReplayServer

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
    from pytest_gym_eval.gym.processes import GymProcess
    from pytest_gym_eval.gym.run import ray_temp_dir

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
