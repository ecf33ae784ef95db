"""``python -m pytest_gym_eval replay ROLLOUTS.jsonl [...] [--port N] [--model-name NAME] [--log PATH] [--delay
SECONDS]``: serve recorded rollouts as an OpenAI-compatible model on 127.0.0.1 (see :mod:`pytest_gym_eval.replay`)."""

from __future__ import annotations

import argparse
import math
import os
import signal
import tempfile
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from pytest_gym_eval import cli
from pytest_gym_eval.replay import RecordingError, ReplayServer
from pytest_gym_eval.replay.server import LoopbackServer


def _port(text: str) -> int:
    """An argparse type: a TCP port number, 0 (any free port) to 65535."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number, got {text!r}") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port from 0 (any free one) to 65535, got {port}")
    return port


def _seconds(text: str) -> float:
    """An argparse type: a finite number of seconds >= 0."""
    try:
        seconds = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if not (math.isfinite(seconds) and seconds >= 0):
        raise argparse.ArgumentTypeError(f"expected a finite number of seconds >= 0, got {text!r}")
    return seconds


def main(argv: list[str]) -> int:
    """``python -m pytest_gym_eval replay ROLLOUTS.jsonl [...] [--port N] [--model-name NAME] [--log PATH]``.

    Prints ``replay model server listening on <base_url> (<n> recordings)`` once serving, serves until
    SIGINT or SIGTERM, then stops and returns 0. Returns 2 (error on stderr) for a bad rollouts file or a log
    that cannot be written, 1 when the port cannot be bound; argparse exits with 2 on bad usage (a port outside
    0..65535, a delay that is not a finite number >= 0).
    """
    parser = argparse.ArgumentParser(
        prog="python -m pytest_gym_eval replay",
        description="Serve recorded NeMo Gym rollouts as an OpenAI-compatible model on 127.0.0.1.",
    )
    parser.add_argument("rollouts", nargs="+", metavar="ROLLOUTS.jsonl", help="Gym rollouts file(s) to replay")
    parser.add_argument("--port", type=_port, default=0, help="TCP port (default: a free port)")
    parser.add_argument("--model-name", default="replay", help="model id listed by /v1/models")
    parser.add_argument(
        "--log", type=Path, default=None, metavar="PATH",
        help="append a JSON line per request (default: replay-model-<pid>.jsonl in the temp directory)",
    )  # fmt: skip
    parser.add_argument("--delay", type=_seconds, default=0.0, metavar="SECONDS", help="hold each answer back")
    args = parser.parse_args(argv)
    log_path = args.log or Path(tempfile.gettempdir()) / f"replay-model-{os.getpid()}.jsonl"
    try:  # now, not on the first request (which would fail without an answer)
        with open(log_path, "a", encoding="utf-8"):
            pass
    except OSError as exc:
        cli.error("replay", f"--log: cannot write {log_path}: {exc.strerror or exc}")
        return 2
    try:
        server = ReplayServer(
            args.rollouts, log_path=log_path, model_name=args.model_name, port=args.port, delay=args.delay
        )
    except RecordingError as exc:
        cli.error("replay", exc)
        return 2
    return serve_until_signalled(
        "replay",
        server,
        args.port,
        lambda: [
            f"replay model server listening on {server.base_url} ({server.recordings} recordings)",
            f"logging every request and answer to {log_path}",
        ],
    )


def serve_until_signalled(command: str, server: LoopbackServer, port: int, banner: Callable[[], Sequence[str]]) -> int:
    """Start ``server`` on 127.0.0.1:``port``, print ``banner()``'s lines (read once it listens: its URL), serve
    until SIGINT or SIGTERM, then stop it and restore the signal handlers. Returns 0, or 1 with ``command``'s error
    printed when it cannot listen. The ``replay`` and ``record`` commands' serving loop."""
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        try:
            server.start()
        except OSError as exc:
            cli.error(command, f"cannot listen on 127.0.0.1:{port}: {exc}")
            return 1
        for line in banner():
            print(line, flush=True)
        while not stop.wait(timeout=1.0):
            pass
    finally:
        server.stop()
        for sig, handler in previous.items():
            if handler is not None:
                signal.signal(sig, handler)
    return 0
