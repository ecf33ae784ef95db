"""The stand-in ``gym`` command (see ../README.md)."""

from __future__ import annotations

import json
import os
import signal
import sys
from importlib.metadata import version

RECORDED_ENV = ("PATH", "UV_CACHE_DIR", "TMPDIR", "UV_PYTHON_DOWNLOADS", "XDG_CONFIG_DIRS", "RAY_TMPDIR")


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["--version"]:
        print(f"NeMo Gym v{version('nemo-gym')}")
        print(f"Python {sys.version.split()[0]} ({sys.executable})")
        return 0
    if args[:2] == ["env", "prefetch"]:
        configs = [args[i + 1] for i, arg in enumerate(args[:-1]) if arg == "--config"]
        for config in configs:  # as Gym's own check: a config path that does not exist is an error
            if not os.path.isfile(config):
                print(f"fake gym: config {config} does not exist", file=sys.stderr)
                return 2
        record = os.environ.get("FAKE_GYM_RECORD")
        if record:
            entry = {
                "argv": args,
                "cwd": os.getcwd(),
                "python": sys.executable,
                "env": {name: os.environ.get(name) for name in RECORDED_ENV},
            }
            with open(record, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(entry) + "\n")
        fifo = os.environ.get("FAKE_GYM_HANG_FIFO")
        if fifo:
            with open(fifo, "w", encoding="utf-8") as fh:
                fh.write(f"{os.getpid()}\n")
            while True:
                signal.pause()
        failing = os.environ.get("FAKE_GYM_FAIL_PREFETCH_CONFIG")
        if failing and any(failing in config for config in configs):  # as Gym's config check, then its shutdown
            print("pydantic_core._pydantic_core.ValidationError: 1 validation error for ServerConfig", file=sys.stderr)
            print("  port\n    Input should be a valid integer [type=int_parsing, input_value='x']", file=sys.stderr)
            for number in range(20):
                print(f"shutting down helper {number}", file=sys.stderr)
            return 1
        unset = [name for name in os.environ.get("FAKE_GYM_UNSET_VALUES", "").split(",") if name]
        for name in unset:  # as Gym's config check for a top-level value the config interpolates (a judge's URL)
            if f"++{name}=unused" not in args:
                print(
                    f"Error: Config value\n'judge_model.x.openai_base_url' references\n'{name}', which is not set "
                    f"after merging.\n\nFor example, on the command line:\n  ++{name}=<value>",
                    file=sys.stderr,
                )
                return 1
        undefined = [name for name in os.environ.get("FAKE_GYM_UNDEFINED_SERVERS", "").split(",") if name]
        for name in undefined:  # as Gym's check of a model server a resources server names and no config defines
            if not any(arg.startswith(f"++{name}.responses_api_models.") for arg in args):
                print(
                    f"Error: In server instance 'env', field 'judge_model_server' references \n"
                    f"responses_api_models/'{name}', which is not defined in the merged config.\n"
                    "Available responses_api_models: 'policy_model'",
                    file=sys.stderr,
                )
                return 1
        if os.environ.get("FAKE_GYM_FAIL_PREFETCH"):
            print("ERROR: prefetch failed (FAKE_GYM_FAIL_PREFETCH is set)", file=sys.stderr)
            return 3
        print("Prefetch complete.")
        return 0
    print(f"fake gym: unsupported arguments {args}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
