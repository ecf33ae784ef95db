"""The line a failed Gym command's error quotes (:func:`pytest_gym_eval.outcomes.server_logs.failure_reason`): the last
traceback's exception line, Gym's own ``Error:`` line, and, when Gym says a server "finished unexpectedly", the
dead server's own log. The logs here are written for the test in the shapes Gym and Python print (real Gym:
tests/real_gym/test_server_death_real_gym.py)."""

from __future__ import annotations

from pathlib import Path

from pytest_gym_eval.gym.servers import quote_failure
from pytest_gym_eval.outcomes.server_logs import exception_line, failure_reason

START_CHATTER = [
    "Starting Ray cluster...",
    "Waiting for head server to spin up",
    "Checking for HTTP server statuses.",
    "0 / 3 servers ready. Waiting for servers to spin up: ['a', 'b', 'c']",
]
SHUTDOWN_CHATTER = [
    "Sending interrupt signals to servers...",
    "Waiting for processes to finish...",
    "NeMo Gym finished!",
]


def write(path: Path, *lines: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def traceback(*exception: str, frames: int = 2) -> list[str]:
    lines = ["Traceback (most recent call last):"]
    for n in range(frames):
        lines += [f'  File "/checkout/nemo_gym/mod{n}.py", line {10 + n}, in step{n}', f"    step{n + 1}()"]
    lines.append("    ~~~~~^^")
    return [*lines, *exception]


def test_the_last_tracebacks_exception_line_is_the_reason_not_the_chatter_after_it(tmp_path: Path) -> None:
    log = write(
        tmp_path / "gym-env-start.log",
        *START_CHATTER,
        *traceback("KeyError: 'first, handled'"),
        "Retrying ...",
        *traceback("ValueError: the inner cause"),
        "",
        "The above exception was the direct cause of the following exception:",
        "",
        *traceback("nemo_gym.config_types.ConfigError: `policy_base_url` is missing", "  with a second line"),
        *SHUTDOWN_CHATTER,
    )
    found = exception_line(log)
    assert found is not None
    assert found.text == "nemo_gym.config_types.ConfigError: `policy_base_url` is missing"
    assert found.line == len(START_CHATTER) + 7 + 1 + 7 + 3 + 7  # 1-based: each traceback here is 7 lines
    assert str(found).endswith(f"({log}:{found.line})")


def test_lines_other_processes_wrote_keep_their_exception_line_without_the_prefix(tmp_path: Path) -> None:
    log = write(
        tmp_path / "x.log",
        "(mcqa) INFO: started",
        *(f"(mcqa) {line}" for line in traceback("ModuleNotFoundError: No module named 'verifier_lib'")),
        "(pid=4242) some Ray worker line",
    )
    found = exception_line(log)
    assert found is not None and found.text == "ModuleNotFoundError: No module named 'verifier_lib'"


def test_gyms_own_error_line_counts_when_it_comes_last(tmp_path: Path) -> None:
    log = write(tmp_path / "x.log", *START_CHATTER, *traceback("OSError: earlier"), "Error: Unknown agent 'mcqa_x'.")
    assert (found := exception_line(log)) is not None and found.text == "Error: Unknown agent 'mcqa_x'."
    assert exception_line(write(tmp_path / "calm.log", *START_CHATTER, *SHUTDOWN_CHATTER)) is None
    assert exception_line(tmp_path / "missing.log") is None


def test_a_server_that_finished_unexpectedly_is_explained_by_its_own_log(tmp_path: Path) -> None:
    servers = tmp_path / "gym-servers"
    write(servers / "mcqa.log", "INFO: Uvicorn running", *traceback("ImportError: cannot import name 'grade'"), "bye")
    log = write(
        tmp_path / "gym-env-start.log",
        *START_CHATTER,
        *traceback("RuntimeError: Process `mcqa` finished unexpectedly!"),
        *SHUTDOWN_CHATTER,
    )
    found = failure_reason(log, servers)
    assert found is not None and found.text == "ImportError: cannot import name 'grade'"
    assert found.path == servers / "mcqa.log"
    # A server log without a traceback (a crash): its last line, still the server's own.
    write(servers / "mcqa.log", "INFO: Uvicorn running", "Fatal Python error: Segmentation fault")
    assert (
        found := failure_reason(log, servers)
    ) is not None and found.text == "Fatal Python error: Segmentation fault"
    # Without the server's log, Gym's own "finished unexpectedly" is no reason: the caller shows the log's tail.
    assert failure_reason(log, tmp_path / "elsewhere") is None
    assert failure_reason(log) is None


def test_a_server_name_with_a_slash_has_its_log_named_as_gym_names_it(tmp_path: Path) -> None:
    servers = tmp_path / "gym-servers"
    write(servers / "format_verification_citation.log", *traceback("TimeoutError: no answer"))
    log = write(tmp_path / "start.log", "Process `format_verification/citation` finished unexpectedly!")
    assert (found := failure_reason(log, servers)) is not None and found.text == "TimeoutError: no answer"


def test_the_error_quotes_the_reason_with_its_place_or_falls_back_to_the_tail(tmp_path: Path) -> None:
    log = write(tmp_path / "gym-eval-run.log", *traceback("ServerRefNotFoundError: no server 'x'"), *SHUTDOWN_CHATTER)
    quoted = quote_failure(log)
    assert quoted == f": ServerRefNotFoundError: no server 'x' ({log}:7)"
    assert "NeMo Gym finished!" not in quoted
    calm = write(tmp_path / "calm.log", *START_CHATTER)
    assert quote_failure(calm, lines=2) == f"; last lines of {calm}:\n" + "\n".join(START_CHATTER[-2:])
