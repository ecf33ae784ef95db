"""``python -m pytest_gym_eval record --upstream URL --output RECORDINGS.jsonl [--model SERVED] [--key-env VAR]
[--port N] [--model-name NAME] [--timeout SECONDS]``: a recording proxy on 127.0.0.1 that forwards each model call
to an endpoint and appends it to a recordings file the replay server reads (see
:mod:`pytest_gym_eval.replay.recorder`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from pytest_gym_eval import cli
from pytest_gym_eval.cli.replay import _port, _seconds, serve_until_signalled
from pytest_gym_eval.core.credentials import redact_value
from pytest_gym_eval.replay.recorder import RecordingProxy


def main(argv: list[str]) -> int:
    """Serve the recording proxy until SIGINT or SIGTERM, then stop and return 0.

    Prints ``recording proxy listening on <base_url>`` once serving (then where it forwards and records) and, at
    the end, how many calls it recorded. Returns 2 (error on stderr) when the key variable is unset or the
    recordings file cannot be written, 1 when the port cannot be bound; argparse exits with 2 on bad usage.
    """
    parser = argparse.ArgumentParser(
        prog=cli.prog("record"),
        description="Forward OpenAI-compatible model calls to an endpoint and record them for replay.",
    )
    parser.add_argument("--upstream", required=True, metavar="URL", help="the endpoint's base URL (http://host/v1)")
    parser.add_argument(
        "--output", required=True, type=Path, metavar="RECORDINGS.jsonl",
        help="recordings file to append each call to (replay it with `python -m pytest_gym_eval replay`)",
    )  # fmt: skip
    parser.add_argument("--model", default=None, metavar="SERVED", help="model name the endpoint serves")
    parser.add_argument("--key-env", default=None, metavar="VAR", help="environment variable holding the API key")
    parser.add_argument("--port", type=_port, default=0, help="TCP port (default: a free port)")
    parser.add_argument("--model-name", default="recorder", help="model id listed by /v1/models")
    parser.add_argument("--timeout", type=_seconds, default=600.0, metavar="SECONDS", help="per upstream call")
    args = parser.parse_args(argv)
    try:
        with open(args.output, "a", encoding="utf-8"):
            pass
    except OSError as exc:
        cli.error("record", f"--output: cannot write {args.output}: {exc.strerror or exc}")
        return 2
    try:
        proxy = RecordingProxy(
            args.upstream, args.output, model=args.model, key_env=args.key_env, model_name=args.model_name,
            port=args.port, timeout=args.timeout,
        )  # fmt: skip
    except ValueError as exc:
        cli.error("record", f"--key-env: {exc}")
        return 2
    banner = [f"forwarding to {redact_value(args.upstream)}, recording to {args.output}"]
    served = serve_until_signalled(
        "record", proxy, args.port, lambda: [f"recording proxy listening on {proxy.base_url}", *banner]
    )
    if served == 0:
        print(f"{proxy.recorded} calls recorded to {args.output}", flush=True)
    return served
