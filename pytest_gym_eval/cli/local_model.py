"""``python -m pytest_gym_eval local-model [MODEL.gguf] [--port N] [--name NAME] [--ctx N] [--parallel N] [--threads
N]``: serve a GGUF model with llama.cpp's OpenAI-compatible server on 127.0.0.1 (see
:mod:`pytest_gym_eval.gym.local_model`)."""

from __future__ import annotations

import argparse
import signal
import threading
from pathlib import Path

from pytest_gym_eval import cli
from pytest_gym_eval.gym.local_model import (
    DEFAULT_CTX,
    DEFAULT_PARALLEL,
    DEFAULT_THREADS,
    MODEL_NAME,
    MODEL_PACKAGE,
    LocalModelError,
    bundled_model,
    serve,
)


def main(argv: list[str]) -> int:
    """``python -m pytest_gym_eval local-model [MODEL.gguf] [--port N] [--name NAME] [--ctx N] [--parallel N]
    [--threads N]``.

    Returns 0 after SIGINT or SIGTERM, 2 (message on stderr) when the server or model is not installed or the
    model does not load; argparse exits with 2 on bad usage.
    """
    parser = argparse.ArgumentParser(
        prog="python -m pytest_gym_eval local-model",
        description="Serve a GGUF model with llama.cpp's OpenAI-compatible server on 127.0.0.1 until Ctrl-C.",
    )
    parser.add_argument("model", nargs="?", type=Path, help=f"GGUF file (default: {MODEL_NAME} from {MODEL_PACKAGE})")
    parser.add_argument("--port", type=int, default=0, help="TCP port (default: a free port)")
    parser.add_argument(
        "--name", default=None, help=f"model name to serve it as (default: {MODEL_NAME}, or the file stem)"
    )
    parser.add_argument(
        "--ctx", type=int, default=DEFAULT_CTX, help=f"context tokens, shared by the slots ({DEFAULT_CTX})"
    )
    parser.add_argument(
        "--parallel", type=int, default=DEFAULT_PARALLEL, help=f"requests decoded at once ({DEFAULT_PARALLEL})"
    )
    parser.add_argument(
        "--threads", type=int, default=DEFAULT_THREADS, help=f"CPU threads per request ({DEFAULT_THREADS})"
    )
    args = parser.parse_args(argv)
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        model = args.model if args.model is not None else bundled_model()
        name = args.name or (MODEL_NAME if args.model is None else model.stem)
        if not model.is_file():
            raise LocalModelError(f"no such model file: {model}")
        serve(model, name, args.port, args.ctx, args.parallel, args.threads, stop)
    except LocalModelError as error:
        cli.error("local-model", error)
        return 2
    finally:
        for sig, handler in previous.items():
            if handler is not None:
                signal.signal(sig, handler)
    return 0
