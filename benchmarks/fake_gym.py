"""A stand-in ``gym`` for the streaming-latency benchmark (modelled on ``tests/support/fake_gym.py``).

- ``gym env start ...``: prints Gym's readiness line, then waits for SIGINT like real Gym.
- ``gym eval run --input IN --output OUT ...``: for each input row, sleeps between 0.5 and 1.5 times
  ``$BENCH_PAUSE`` seconds (random, so that the writes do not keep step with the plugin's polling), appends
  one rollout line (reward 1.0) to OUT, and then appends ``{"id": <row id>, "written": time.time()}`` to
  ``$BENCH_WRITES``: the moment the line was in the file.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sys
import time


def _option(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


def env_start() -> int:
    stop: list[int] = []
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    print("All 1 / 1 servers ready! Polling every 60s", flush=True)
    while not stop:
        time.sleep(0.05)
    return 0


def eval_run(argv: list[str]) -> int:
    source, output = _option(argv, "--input"), _option(argv, "--output")
    pause = float(os.environ.get("BENCH_PAUSE", "0.05"))
    writes = os.environ["BENCH_WRITES"]
    with open(source, encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle if line.strip()]
    rng = random.Random(0)
    for row in rows:
        time.sleep(pause * (0.5 + rng.random()))
        record = {
            "responses_create_params": row["responses_create_params"],
            "response": {"output": [{"type": "message", "role": "assistant", "content": []}]},
            "reward": 1.0,
            "_ng_task_index": row["_ng_task_index"],
            "_ng_rollout_index": 0,
            "agent_ref": row.get("agent_ref"),
        }
        with open(output, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(record) + "\n")
        written = time.time()
        with open(writes, "a", encoding="utf-8") as handle:
            handle.write(json.dumps({"id": row["id"], "written": written}) + "\n")
    return 0


def main() -> int:
    argv = sys.argv[1:]
    if argv[:2] == ["env", "start"]:
        return env_start()
    if argv[:2] == ["eval", "run"]:
        return eval_run(argv)
    print(f"fake gym: unsupported command {argv}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
