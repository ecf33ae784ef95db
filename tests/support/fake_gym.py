"""A stand-in for Gym's `gym` command, for fast tests of the plugin's error paths (never the only proof).

It understands just what the plugin calls:
- ``gym env start ...``: prints Gym's readiness line and waits for SIGINT (exit 0) like real Gym, answering
  ``GET /readyz`` on the head server of its JSON ``--config`` file (as Gym's head server does), and
  ``GET /server_instances`` listing ``<env>_simple_agent`` and ``<env>_environment_server`` for each environment
  config, whose ``POST .../run`` answers a row as its ``fake`` object says (see ``serve_head``);
  ``FAKE_GYM_START=fail`` makes it exit 3 before that (``traceback``: exit 1 after a traceback and shutdown
  lines), ``FAKE_GYM_START=hang`` never get ready,
  ``FAKE_GYM_START_DELAY=SECONDS`` get ready that much later, ``FAKE_GYM_STOP=slow`` never end after SIGINT
  (SIGUSR1: exit 1 as Gym does when its server ``mcqa`` dies, leaving a traceback in that server's own log),
  ``FAKE_GYM_START=ray-timeout`` exit 1 with Ray's node start-up timeout (leaving Ray's ``raylet.out``),
  ``ray-timeout-once`` do that on the first ``env start`` of ``$FAKE_GYM_CALLS`` only. ``FAKE_GYM_WORKER=1`` also
  starts a child that ignores SIGINT in a process group of its own inside Gym's session (as Ray's idle workers do),
  so only a SIGKILL of the whole session ends it.
- ``gym eval run --input IN --output OUT [--resume] ...``: writes one output line per input row, taking the
  behaviour from the row's ``fake`` object: ``{"reward": x}`` (default 1.0; any JSON, or absent with
  ``"no_reward": true``, or NaN with ``"nan_reward": true``), ``{"failure": "agent_run_error"}`` (a
  failures-file row; with ``"body"``, its ``_ng_failure_response_body``), ``{"skip": true}`` (no line at all),
  ``{"crash": true}`` (exit with SIGSEGV before this row unless ``--resume``), ``{"hold": true}``
  (wait for SIGINT before this row; ``{"hold": "VAR"}`` only while the environment variable VAR is set),
  ``{"usage": {...}}`` (the response's token usage), ``{"latency_ms": x}``
  (Gym's ``ng_perf.total_latency_ms``), ``{"delay": seconds}`` (wait before writing this row), ``{"fields":
  {...}}`` (more fields of the record, as a verifier adds them: ``judge_evaluation``, ...). With
  ``--num-repeats R`` every row is rolled out R times as Gym does (rows in the pattern aabbcc; ``_ng_rollout_index``
  counted per ``_ng_task_index`` in input order across rows, as Gym 0.6.0/0.7.0 number it: 0..R-1 for a row with
  an index of its own, on from the earlier rows' rollouts for rows sharing one); ``{"rewards": [x0, x1, ...]}``
  gives rollout i the reward xi, ``{"reward_env": "VAR"}`` the reward in the environment variable VAR (the same
  dataset file, another reward each session),
  ``{"reward_by_agent": {"AGENT": x, ...}}`` the reward of the agent the row is routed to (``agent_ref``), and
  ``{"usage_by_agent": {"AGENT": {...}}}``, ``{"latency_ms_by_agent": {"AGENT": x}}`` its usage and latency. With
  ``FAKE_GYM_AGGREGATE_DELAY=SECONDS`` it then writes ``OUT_aggregate_metrics.json`` as Gym does, that much later;
  with ``FAKE_GYM_EXIT_DELAY=SECONDS`` it exits that much after its last write (Gym's interpreter takes ~2 s).
Every call appends its argv (and whether the API key variable was visible) to ``$FAKE_GYM_CALLS``.
It pretends to be the Gym release its checkout's ``pyproject.toml`` names (its working folder; 0.7.0 without one):
before 0.7.0 there are no environment servers, so ``/server_instances`` lists none (the agent servers' own
``POST /run`` answers, as in Gym 0.6.x) and ``env start`` exits 1 on a config that names one.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time


def _record(argv: list[str]) -> None:
    calls = os.environ.get("FAKE_GYM_CALLS")
    if calls:
        with open(calls, "a", encoding="utf-8") as handle:
            handle.write(json.dumps({"argv": argv, "pid": os.getpid(), "sid": os.getsid(0)}) + "\n")


def _option(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


RAY_TIMEOUT = (
    "Exception: The current node timed out during startup. This could happen because some of the raylet failed to "
    "startup or the GCS has become overloaded."
)
WORKER = "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True: time.sleep(60)"


def _first_env_start() -> bool:
    calls = os.environ.get("FAKE_GYM_CALLS")
    if not calls:
        return True
    with open(calls, encoding="utf-8") as handle:
        starts = [line for line in handle if '"argv": ["env", "start"' in line]
    return len(starts) <= 1


def pretended_version() -> tuple[int, ...]:
    """The Gym release this stand-in pretends to be (see the module's docstring)."""
    import re

    try:
        with open("pyproject.toml", encoding="utf-8") as handle:
            found = re.search(r'^version = "(\d+)\.(\d+)', handle.read(), re.M)
    except OSError:
        found = None
    return (int(found[1]), int(found[2])) if found else (0, 7)


def _config_texts(argv: list[str]) -> list[str]:
    texts = []
    for index, arg in enumerate(argv[:-1]):
        if arg == "--config":
            try:
                with open(argv[index + 1], encoding="utf-8") as handle:
                    texts.append(handle.read())
            except OSError:
                continue
    return texts


def serve_head(argv: list[str]) -> None:
    """Answer ``GET /readyz`` with 200 on the head server named in a JSON ``--config`` file (in a daemon thread);
    with 503 for the first ``$FAKE_GYM_READYZ_503`` seconds, as Gym's head server does for a moment."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    head = None
    for index, arg in enumerate(argv[:-1]):
        if arg == "--config":
            try:
                with open(argv[index + 1], encoding="utf-8") as handle:
                    head = json.load(handle).get("head_server") or head
            except (OSError, ValueError):
                continue
    if not head:
        return

    ready_at = time.monotonic() + float(os.environ.get("FAKE_GYM_READYZ_503", "0"))

    environments = [
        os.path.basename(argv[i + 1]).removesuffix(".yaml")
        for i, arg in enumerate(argv[:-1])
        if arg == "--config" and "resources_servers" in argv[i + 1]
    ]
    base = f"http://{head['host']}:{int(head['port'])}"
    instances = [
        instance
        for name in environments
        for instance in (
            {"process_name": f"{name}_simple_agent", "server_type": "responses_api_agents", "url": f"{base}/a/{name}"},
            {"process_name": f"{name}_environment_server", "server_type": "environment_servers",
             "url": f"{base}/env/{name}"},
        )
        if instance["server_type"] != "environment_servers" or pretended_version() >= (0, 7)
    ]  # fmt: skip

    class Ready(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            ok = 200 if time.monotonic() >= ready_at else 503  # Gym's head marks itself ready after saying so
            if self.path == "/server_instances":
                return self._send(200, instances)
            self.send_response(ok if self.path == "/readyz" else 404)
            self.end_headers()
            self.wfile.write(b'{"status": "ok"}')

        def do_POST(self) -> None:
            """An environment server's ``/run``: the row's ``fake`` object says what to answer (``reward``, default
            1.0; ``status`` and ``body`` for an HTTP error; ``delay`` seconds first)."""
            row = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            fake = row.get("fake") or {}
            time.sleep(float(fake.get("delay", 0)))
            if not self.path.endswith("/run"):
                return self._send(404, "Not Found")
            if "status" in fake:
                return self._send(int(fake["status"]), fake.get("body", ""))
            text = f"fake answer to {self.path}"
            response = {
                "output": [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}]
            }
            self._send(200, {**row, "response": response, "reward": fake.get("reward", 1.0), "failure_kind": None})

        def _send(self, status: int, value: object) -> None:
            body = json.dumps(value).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer((head["host"], int(head["port"])), Ready)
    threading.Thread(target=server.serve_forever, daemon=True).start()


def _write_ray_logs() -> None:
    """Ray's logs of a failed node start, where Ray keeps them (``$RAY_TMPDIR/ray/session_latest/logs``)."""
    logs = os.path.join(os.environ.get("RAY_TMPDIR", "/tmp"), "ray", "session_latest", "logs")
    os.makedirs(logs, exist_ok=True)
    with open(os.path.join(logs, "raylet.out"), "w", encoding="utf-8") as handle:
        handle.write("[raylet] fake: the raylet did not register in time\n")


def _write_server_log(argv: list[str], server: str, exception: str) -> None:
    """Write server ``server``'s own log into Gym's ``+nemo_gym_log_dir`` as a server that died of ``exception``
    leaves it: each line prefixed ``(<server>) ``, the traceback last."""
    folder = next((arg.split("=", 1)[1] for arg in argv if arg.startswith("+nemo_gym_log_dir=")), None)
    if folder is None:
        return
    os.makedirs(folder, exist_ok=True)
    traceback = ["Traceback (most recent call last):", '  File "app.py", line 3, in verify', exception]
    lines = ["INFO: Uvicorn running", *traceback]
    with open(os.path.join(folder, f"{server}.log"), "a", encoding="utf-8") as handle:
        handle.writelines(f"({server}) {line}\n" for line in lines)


def env_start(argv: list[str]) -> int:
    mode = os.environ.get("FAKE_GYM_START", "")
    print("Starting fake servers", flush=True)
    if os.environ.get("FAKE_GYM_WORKER"):
        subprocess.Popen([sys.executable, "-c", WORKER], preexec_fn=os.setpgrp)
    if mode == "fail":
        print("Error: fake start failure", flush=True)
        return 3
    if pretended_version() < (0, 7) and any("environment_servers" in text for text in _config_texts(argv)):
        print("Traceback (most recent call last):", flush=True)
        print('  File "nemo_gym/cli/env.py", line 1, in start', flush=True)
        print("FileNotFoundError: no server folder environment_servers/legacy_agent in this Gym", flush=True)
        print("NeMo Gym finished!", flush=True)
        return 1
    if mode == "traceback":
        print(
            'Traceback (most recent call last):\n  File "nemo_gym/cli/env.py", line 9, in start\n    go()', flush=True
        )
        print("ValueError: the policy model's base URL has no scheme", flush=True)
        print("Sending interrupt signals to servers...\nNeMo Gym finished!", flush=True)
        return 1
    if mode == "ray-timeout" or (mode == "ray-timeout-once" and _first_env_start()):
        _write_ray_logs()
        print("Traceback (most recent call last):", flush=True)
        print(RAY_TIMEOUT, flush=True)
        return 1
    stop = []
    crashed = []
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    signal.signal(signal.SIGUSR1, lambda *_: crashed.append(1))  # one of Gym's servers dies, as Gym reports it
    time.sleep(float(os.environ.get("FAKE_GYM_START_DELAY", "0")))  # a slow start-up, as on a loaded machine
    if mode != "hang":
        serve_head(argv)
        print("All 1 / 1 servers ready! Polling every 60s", flush=True)
    while not stop:
        if crashed:
            _write_server_log(argv, "mcqa", "MemoryError: fake: the verifier ran out of memory")
            print("Traceback (most recent call last):\nRuntimeError: Process `mcqa` finished unexpectedly!", flush=True)
            print("Process `mcqa` stderr:\nSegmentation fault", flush=True)
            return 1
        time.sleep(0.05)
    if os.environ.get("FAKE_GYM_STOP") == "slow":  # a shutdown that outlasts any grace period
        print("Stopping slowly: only SIGKILL ends this", flush=True)
        while True:
            time.sleep(0.05)
    print("NeMo Gym finished!", flush=True)
    return 0


def eval_run(argv: list[str]) -> int:
    source, output = _option(argv, "--input"), _option(argv, "--output")
    resume = "--resume" in argv
    stem = output[: -len(".jsonl")]
    failures = stem + "_failures.jsonl"
    with open(source, encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle if line.strip()]
    repeats = int(_option(argv, "--num-repeats")) if "--num-repeats" in argv else 1
    numbered: dict[object, int] = {}  # the rollouts each task index has had so far
    repeated = []
    for row in rows:
        for _ in range(repeats):
            index = numbered.get(row["_ng_task_index"], 0)
            numbered[row["_ng_task_index"]] = index + 1
            repeated.append({**row, "_ng_rollout_index": index})
    rows = repeated
    done: set[tuple[int, int]] = set()
    if resume and os.path.exists(output):
        with open(output, encoding="utf-8") as handle:
            done = {_key(json.loads(line)) for line in handle if line.strip()}
    else:
        for path in (output, failures):
            if os.path.exists(path):
                os.unlink(path)
    with open(stem + "_materialized_inputs.jsonl", "w", encoding="utf-8") as materialized:
        for row in rows:
            materialized.write(json.dumps(row) + "\n")
    stop = []
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    for row in rows:
        fake = row.get("fake", {})
        if _key(row) in done or fake.get("skip"):
            continue
        if fake.get("crash") and not resume:
            os.kill(os.getpid(), signal.SIGSEGV)
        hold = fake.get("hold")
        if isinstance(hold, str):
            hold = bool(os.environ.get(hold))
        while hold and not stop:
            time.sleep(0.05)
        if fake.get("delay"):
            time.sleep(float(fake["delay"]))
        if stop:
            return 130
        base = {"_ng_task_index": row["_ng_task_index"], "_ng_rollout_index": row["_ng_rollout_index"]}
        base["agent_ref"] = row.get("agent_ref")
        if fake.get("failure"):
            line = {**base, "_ng_failure_class": fake["failure"], "_ng_failure_message": "fake agent failure"}
            if "body" in fake:
                line["_ng_failure_response_body"] = fake["body"]
            with open(failures, "a", encoding="utf-8") as handle:
                handle.write(json.dumps(line) + "\n")
            continue
        record = {**base, "responses_create_params": row.get("responses_create_params")}
        text = fake.get("text", "fake answer")
        message = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}
        record["response"] = {"output": [message]}
        agent = (row.get("agent_ref") or {}).get("name")
        usage = fake["usage_by_agent"].get(agent) if "usage_by_agent" in fake else fake.get("usage")
        latency_ms = fake["latency_ms_by_agent"].get(agent) if "latency_ms_by_agent" in fake else fake.get("latency_ms")
        if usage is not None:
            record["response"]["usage"] = usage
        if latency_ms is not None:
            record["ng_perf"] = {"total_latency_ms": latency_ms}
        if "rewards" in fake:
            record["reward"] = fake["rewards"][row["_ng_rollout_index"]]
        elif fake.get("nan_reward"):  # NaN in the output (json.dumps writes the bare token); a dataset can't hold it
            record["reward"] = float("nan")
        elif "reward_by_agent" in fake:  # one row rolled out by several agents (policies), a reward for each
            record["reward"] = fake["reward_by_agent"][(row.get("agent_ref") or {}).get("name")]
        elif "reward_env" in fake:  # the reward from an environment variable: one dataset, rewards per session
            record["reward"] = float(os.environ[fake["reward_env"]])
        elif not fake.get("no_reward"):
            record["reward"] = fake.get("reward", 1.0)
        if "expected_answer" in row:
            record["expected_answer"] = row["expected_answer"]
        record.update(fake.get("fields", {}))  # the verifier's own fields (a judge call's judge_evaluation, ...)
        with open(output, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(record) + "\n")
    if "FAKE_GYM_AGGREGATE_DELAY" in os.environ:
        _write_aggregate_metrics(output, stem + "_aggregate_metrics.json")
    time.sleep(float(os.environ.get("FAKE_GYM_EXIT_DELAY", "0")))
    return 0


def _write_aggregate_metrics(output: str, path: str) -> None:
    """As Gym does once every rollout is in: one entry per agent with its key metrics (the mean reward, and
    ``pass@1/accuracy`` on a 0-100 scale), after ``$FAKE_GYM_AGGREGATE_DELAY`` seconds (Gym takes ~2 s)."""
    time.sleep(float(os.environ["FAKE_GYM_AGGREGATE_DELAY"]))
    rewards: dict[str, list[float]] = {}
    if os.path.exists(output):
        with open(output, encoding="utf-8") as handle:
            for line in handle:
                record = json.loads(line) if line.strip() else {}
                name = (record.get("agent_ref") or {}).get("name")
                if isinstance(name, str) and isinstance(record.get("reward"), (int, float)):
                    rewards.setdefault(name, []).append(float(record["reward"]))
    entries = [
        {
            "agent_ref": {"name": name},
            "key_metrics": {
                "mean/reward": sum(values) / len(values),
                "pass@1/accuracy": 100 * sum(values) / len(values),
            },
        }
        for name, values in rewards.items()
    ]
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(entries, handle)


def _key(row: dict[str, int]) -> tuple[int, int]:
    return row["_ng_task_index"], row.get("_ng_rollout_index", 0)


def main() -> int:
    argv = sys.argv[1:]
    _record(argv)
    if argv[:2] == ["env", "start"]:
        return env_start(argv)
    if argv[:2] == ["eval", "run"]:
        return eval_run(argv)
    if argv[:1] == ["--version"]:
        print("0.0.0-fake")
        return 0
    print(f"fake gym: unsupported command {argv}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
