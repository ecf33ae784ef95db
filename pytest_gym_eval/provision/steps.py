"""Provisioning's named steps: each logs to ``<checkout>/.pytest-gym-eval/logs/<step>.log``, runs its commands in a
session of their own (killed on Ctrl-C or a timeout), and fails with a :class:`ProvisionError` naming the step,
its log and the log lines that state the error.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from pytest_gym_eval.provision.errors import ProvisionError

STEPS = ("preflight", "download", "unpack", "python", "venv", "prefetch", "manifest")
_LOG_TAIL_LINES = 8


def log_stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _tail(path: Path, lines: int = _LOG_TAIL_LINES) -> list[str]:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - 16384))
            text = fh.read().decode("utf-8", "replace")
    except OSError:
        return []
    kept = [line.rstrip()[:300] for line in text.splitlines() if line.strip()]
    return kept[-lines:]


def step_error(step: str, log_path: Path, reason: str) -> ProvisionError:
    tail = _tail(log_path)
    message = f"provision step '{step}' failed: {reason}\n  log: {log_path}"
    try:
        with open(log_path, "rb") as handle:  # the error line may lie above the tail (a tool's shutdown after it)
            handle.seek(max(0, os.path.getsize(log_path) - 262_144))
            quoted = error_lines(handle.read().decode("utf-8", "replace"))
    except OSError:
        quoted = []
    if quoted and quoted[0] not in tail:
        message += "\n  the error:\n" + "\n".join(f"    {line}" for line in quoted)
    if tail:
        message += "\n  last lines of the log:\n" + "\n".join(f"    {line}" for line in tail)
    return ProvisionError(message, step=step, log_path=log_path)


def _kill_process_group(proc: subprocess.Popen[Any], grace: float = 5.0) -> None:
    """Stop a step's subprocess (started in a session of its own) and everything in its process group."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=grace)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


class Step:
    """One running step: its log file and the subprocesses it runs."""

    def __init__(self, name: str, log_path: Path, fh: IO[str], log: Callable[[str], None]) -> None:
        self.name = name
        self.log_path = log_path
        self.fh = fh
        self.log = log

    def write(self, text: str) -> None:
        self.fh.write(text if text.endswith("\n") else text + "\n")
        self.fh.flush()

    def run(
        self,
        cmd: Sequence[str],
        *,
        cwd: Path,
        env: Mapping[str, str],
        capture: bool = False,
        check: bool = True,
        timeout: float | None = None,
    ) -> tuple[int, str]:
        """Run ``cmd`` with output into the log (stdout also returned when ``capture``).

        Returns ``(returncode, stdout)``. Raises ``ProvisionError`` on a non-zero exit when ``check``. On any
        interruption (Ctrl-C) or timeout the subprocess's process group is killed before re-raising."""
        self.write(f"$ {shlex.join(cmd)}    # cwd {cwd}")
        proc = subprocess.Popen(
            list(cmd),
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE if capture else self.fh,
            stderr=self.fh,
            start_new_session=True,
            text=True,
        )
        try:
            out, _ = proc.communicate(timeout=timeout)
        except BaseException:
            _kill_process_group(proc)
            self.write(f"(killed {cmd[0]})")
            raise
        out = out or ""
        if capture and out:
            self.write(out)
        if proc.returncode != 0:
            self.write(f"(exit status {proc.returncode})")
            if check:
                raise ProvisionError(f"`{shlex.join(cmd)}` exited with status {proc.returncode}")
        return proc.returncode, out


class Build:
    def __init__(self, logs_dir: Path, log: Callable[[str], None]) -> None:
        self.logs_dir = logs_dir
        self.log = log
        self.seconds: dict[str, float] = {}

    @contextlib.contextmanager
    def step(self, name: str) -> Iterator[Step]:
        log_path = self.logs_dir / f"{name}.log"
        self.logs_dir.mkdir(parents=True, exist_ok=True)
        self.log(f"pytest-gym-eval provision: [{name}] started (log: {log_path})")
        start = time.monotonic()
        with open(log_path, "a", encoding="utf-8") as fh:
            step = Step(name, log_path, fh, self.log)
            step.write(f"=== step {name} started {utc_now()}")
            try:
                yield step
            except ProvisionError as exc:
                step.write(f"error: {exc}")
                self.log(f"pytest-gym-eval provision: [{name}] failed after {time.monotonic() - start:.1f} s")
                if exc.step is not None:
                    raise
                raise step_error(name, log_path, str(exc)) from exc
            except Exception as exc:
                step.write(f"error: {type(exc).__name__}: {exc}")
                self.log(f"pytest-gym-eval provision: [{name}] failed after {time.monotonic() - start:.1f} s")
                raise step_error(name, log_path, f"{type(exc).__name__}: {exc}") from exc
            except BaseException:
                step.write("interrupted")
                self.log(f"pytest-gym-eval provision: [{name}] interrupted; no manifest written")
                raise
            elapsed = time.monotonic() - start
            step.write(f"=== step {name} done in {elapsed:.1f} s")
        self.seconds[name] = round(elapsed, 3)
        self.log(f"pytest-gym-eval provision: [{name}] done in {elapsed:.1f} s")


def utc_now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


_ERROR_LINE = re.compile(r"\b[A-Z]\w*(?:Error|Exception)\b|\berror\b|\bvalidation errors?\b", re.IGNORECASE)
"""A log line that states an error (a Gym config validation error, an exception's last traceback line)."""


def error_lines(text: str, context: int = 2) -> list[str]:
    """The lines of a step's log ``text`` that say what went wrong: the last line stating an error (an
    exception's ``Type: message``, ``ERROR ...``, ``1 validation error for ...``) and up to ``context`` indented
    lines after it (pydantic names the field and the reason there), each trimmed to 300 characters; [] when no
    line states an error. Lines the plugin itself wrote (``$ command``, ``(exit status N)``) do not count."""
    lines = [line.rstrip() for line in text.splitlines()]
    own = ("$ ", "(exit status", "(killed", "--- environment", "=== step", "error: `")
    for index in range(len(lines) - 1, -1, -1):
        line = lines[index]
        if line.strip() and not line.startswith(own) and _ERROR_LINE.search(line):
            after = [n for n in lines[index + 1 : index + 1 + context] if n.startswith((" ", "\t")) and n.strip()]
            return [text[:300] for text in [line.strip(), *(n.strip() for n in after)]]
    return []
