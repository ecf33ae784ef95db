"""The ``on_demand`` benchmark: the plugin's own cost of one on-demand rollout (``gym_run_row``) beyond the HTTP call
to the environment server's ``/run``: in a pytest session attached to a stand-in Gym (a head server and an
environment server in this process that answer at once), the median time of a ``gym_run_row`` call less the median
time of a bare ``POST /run`` of the same row (the same standard-library client), interleaved.

The stand-in answers in well under a millisecond, so what is left is the plugin's own work (finding the server, the
request, building the :class:`~pytest_gym_eval.Rollout`); against real Gym with the replay model the call itself
took 0.03-0.13 s (docs: gym-notes). Run alone: ``.venv/bin/python benchmarks/run.py --only on_demand``."""

from __future__ import annotations

import argparse
import json
import statistics
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from common import AGENT, PYTEST, Row, run_child
from verdicts import median_of

NAME = "on_demand"
"""Its name in ``--only`` and the table."""

TEST = """
import json, time, urllib.request

ROW = {row!r}


def test_calls(gym_run_row):
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({{}}))
    url = "{url}/run"
    gym_run_row(ROW)  # the first call asks the head server for its servers (once per session)
    plugin, raw = [], []
    for _ in range({calls}):
        start = time.perf_counter()
        rollout = gym_run_row(ROW)
        plugin.append(time.perf_counter() - start)
        assert rollout.reward == 1.0
        start = time.perf_counter()
        headers = {{"Content-Type": "application/json"}}
        request = urllib.request.Request(url, data=json.dumps(ROW).encode(), headers=headers)
        with opener.open(request, timeout=60) as answer:
            json.loads(answer.read())
        raw.append(time.perf_counter() - start)
    with open("times.json", "w") as handle:
        json.dump({{"plugin": plugin, "raw": raw}}, handle)
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--on-demand-calls", type=int, help="on_demand: calls per session (default 300; quick 50)")
    parser.add_argument("--on-demand-rounds", type=int, help="on_demand: sessions (default 5; quick 2)")


def run(work: Path, args: argparse.Namespace, quick: bool) -> list[Row]:
    """The table's rows of this benchmark, with ``args``' settings (``quick``: scaled down)."""
    calls = args.on_demand_calls or (50 if quick else 300)
    return bench_on_demand(work, calls, args.on_demand_rounds or (2 if quick else 5))


ROW = {
    "responses_create_params": {
        "input": [{"role": "user", "content": "Which planet is closest to the Sun? A: Mercury"}]
    },
    "options": [{"A": "Mercury"}],
    "expected_answer": "A",
}
ANSWER_TEXT = "The answer is \\\\boxed{A}."


@contextmanager
def stand_in_gym() -> Iterator[str]:
    """A head server (``/readyz``, ``/server_instances``) and an environment server (``/run``, answering the row with
    reward 1.0 and a one-message response) on one loopback port; yields ``host:port``."""
    instances: list[dict[str, object]] = []

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            self._send(instances if self.path == "/server_instances" else {"status": "ok"})

        def do_POST(self) -> None:
            row = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            message = {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": ANSWER_TEXT}],
            }
            usage = {"input_tokens": 40, "output_tokens": 8}
            self._send({**row, "response": {"output": [message], "usage": usage}, "reward": 1.0, "failure_kind": None})

        def _send(self, value: object) -> None:
            body = json.dumps(value).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    head = f"127.0.0.1:{server.server_address[1]}"
    instances += [
        {"process_name": AGENT, "server_type": "responses_api_agents", "url": f"http://{head}/agent"},
        {"process_name": "mcqa_environment_server", "server_type": "environment_servers", "url": f"http://{head}/env"},
    ]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield head
    finally:
        server.shutdown()
        server.server_close()


def bench_on_demand(work: Path, calls: int, rounds: int) -> list[Row]:
    """``rounds`` pytest sessions attached to :func:`stand_in_gym`, each timing ``calls`` ``gym_run_row`` calls and
    as many bare ``POST /run`` calls, interleaved; the plugin's overhead per call is the difference of the medians
    (in ms), the estimate the median over the rounds."""
    from pytest_gym_eval import provision

    checkout = provision.provision()  # instant when cached: attaching still reads the agent's Gym config
    root = work / "on_demand"
    root.mkdir()
    overheads, raws = [], []
    with stand_in_gym() as head:
        (root / "test_calls.py").write_text(TEST.format(row=ROW, url=f"http://{head}/env", calls=calls))
        for round_ in range(rounds):
            argv = [
                *PYTEST, f"--gym-checkout={checkout.path}", f"--gym-head-server={head}", f"--gym-agent={AGENT}",
                f"--gym-run-dir={root / 'runs'}", "-p", "no:cacheprovider", "-q", "test_calls.py",
            ]  # fmt: skip
            _, output = run_child(argv, root, 600)
            if "1 passed" not in output:
                raise RuntimeError(f"on_demand: the session failed:\n{output[-3000:]}")
            times = json.loads((root / "times.json").read_text())
            plugin, raw = statistics.median(times["plugin"]) * 1000, statistics.median(times["raw"]) * 1000
            overheads.append(plugin - raw)
            raws.append(raw)
            print(f"  round {round_ + 1}: gym_run_row {plugin:.2f} ms, bare POST /run {raw:.2f} ms", flush=True)
    estimate = median_of(overheads)
    return [
        Row(
            f"On-demand rollout (gym_run_row) against a stand-in Gym that answers at once: the plugin's time per call "
            f"beyond a bare POST /run of the same row (median of {calls} interleaved calls, {rounds} sessions; the "
            f"bare call took {statistics.median(raws):.2f} ms)",
            f"{estimate.text(2)} ms",
            goal="< 100 ms",
            verdict=estimate.verdict(100.0),
            summary="on-demand rollout: plugin overhead per call",
        )
    ]
