"""Fidelity on Gym's judge environments: each environment's example rows rolled out twice over the same policy and
judge answers, once by Gym alone (``gym env start`` + ``gym eval run``) and once by a pytest-gym-eval session, and
every row's reward and Gym's aggregate file compared.

    python benchmarks/judge_fidelity.py [ENV ...] [--work DIR] [--results FILE]

Per environment (the whole run under ``/tmp/gym-tier.lock``: one real Gym at a time on a shared machine):

1. **Provision** its server venv in the default Gym 0.7.0 checkout (``pytest_gym_eval.provision``).
2. **Answers.** A stand-in OpenAI-compatible server (:class:`StandIn`, on 127.0.0.1) answers the policy's request
   of each row of the checkout's ``resources_servers/<env>/data/example.jsonl`` (read at run time, never copied into
   the repository) with Gym's own recorded answer for that row (``example_rollouts.jsonl``) when there is one, else
   a made-up one (:func:`policy_text`), and every other request (a judge's) with a verdict in the form the
   environment's verifier parses (:data:`VERDICTS`), picked by a digest of the judge's conversation: the same
   request always gets the same verdict, different requests different ones.
3. **Raw Gym.** ``gym env start`` with the environment's config, the policy and every model server its config
   names (:func:`judge_names`) bound to recording proxies in front of the stand-in
   (:class:`~pytest_gym_eval.replay.recorder.RecordingProxy`), then ``gym eval run --no-serve`` over the rows.
   The proxies write the policy's calls (and a judge that is the policy's) to ``policy.jsonl`` and each other
   model server's to ``judge-<NAME>.jsonl``.
4. **The session.** ``pytest --gym-replay=policy.jsonl --gym-model-server=NAME=replay:judge-NAME.jsonl`` over a
   copy of the rows in the work folder: no stand-in, no key, every answer replayed by the project's replay server.
5. **Compare** (:func:`compare`): each row's reward in raw Gym's ``rollouts.jsonl`` against the session's report,
   and raw Gym's ``rollouts_aggregate_metrics.json`` against the one Gym wrote in the session's run (every number
   but timings), and the session's mean reward against Gym's ``mean/reward``.

Each environment's result is appended to ``--results`` (JSON lines) as soon as it is known; ``--table`` prints the
Markdown table of docs/judge-fidelity.md from that file (``--table --write`` puts it there).
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
import traceback
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

LOCK = Path("/tmp/gym-tier.lock")
"""The lock every real-Gym run on this machine takes (``flock /tmp/gym-tier.lock``)."""

VERDICTS: dict[str, tuple[str, ...]] = {
    "equivalence_llm_judge": ("[[A=B]]", "[[A!=B]]"),
    "text_to_sql": ("[[A=B]]", "[[A!=B]]"),
    "terminus_judge": ("[[A=B]]", "[[A!=B]]"),
    "math_with_judge": ("[[A=B]]", "[[A!=B]]"),
    "polymath": ("[[A=B]]", "[[A!=B]]"),
    "over_refusal_detection": ("[[COMPLIED]]", "[[REFUSED]]"),
    "multichallenge": ("[[YES]]", "[[NO]]"),
    "physics_judge": ("[Correct]", "[Incorrect]"),
    "math_with_autograder": ("\\boxed{Correct}", "\\boxed{Incorrect}"),
    "agentif": ("YES", "NO"),
    "longmemeval": ("yes", "no"),
    "frontierscience_judge": ("Judgement: YES", "Judgement: NO"),
    "imo_proofbench_judge": ("Judgement: Yes", "Judgement: No"),
    "false_statement_judge": ("<points>2</points>", "<points>0</points>", "<points>1</points>"),
    "arena_judge": ("[[A>B]]", "[[B>A]]", "[[A=B]]", "[[A>>B]]"),
    "simpleqa": ("A", "B", "C"),
    "abstention": ("A", "B", "C"),
    "omniscience": ("A", "B", "C", "D"),
    "ugphysics_judge": ("## Equivalence Judgement\nTRUE", "## Equivalence Judgement\nFALSE"),
    "inverse_if": (
        '```json\n{"result": "PASS", "explanation": "stand-in"}\n```',
        '```json\n{"result": "FAIL", "explanation": "stand-in"}\n```',
    ),
}
"""Per environment, the judge answers its verifier parses (Gym 0.7.0's ``resources_servers/<env>/app.py``): the
stand-in gives one of them, chosen by the judge request's digest (:func:`verdict`)."""

DEFAULT_ENVIRONMENTS = (
    "math_with_judge", "polymath", "equivalence_llm_judge", "over_refusal_detection", "text_to_sql",
    "multichallenge", "physics_judge", "math_with_autograder", "frontierscience_judge", "imo_proofbench_judge",
    "inverse_if", "false_statement_judge", "simpleqa", "abstention", "omniscience", "arena_judge", "agentif",
    "longmemeval",
)  # fmt: skip
"""In the order the script runs them: the cheapest first."""

NOT_OFFLINE: dict[str, str] = {
    "xstest": "its judge is a local_vllm_model (WildGuard weights served by vLLM on a GPU); also probes judge_url",
    "genrm_compare": "its reward model is a genrm_model: vLLM serving weights on a local GPU",
    "math_with_local_judge": "its judge is a local_vllm_model: vLLM serving weights on a local GPU",
    "gdpval": "calls its judges with its own OpenAI clients (not a Gym model server) and needs reference files",
    "rolemrc": "downloads NLTK data and roberta-large at first use",
    "aegis_v4_safety": "needs its safety classifier's own prompt and output format (Aegis v4 weights)",
    "jailbreak_detection": "needs its safety classifier's own prompt and output format",
    "tavily_search": "the Tavily web search API",
    "browsecomp": "the Tavily web search API",
    "finance_agent_v2": "the Tavily web search API",
    "finance_sec_search": "web search and SEC downloads",
    "deepsearchqa": "its harness_exa_search agent calls the Exa web API",
    "widesearch": "its harness_exa_search agent calls the Exa web API",
    "gdp_pdf": "an agent of its own, multimodal PDF inputs",
    "labbench2_vlm": "an agent of its own, multimodal inputs",
    "toolsandbox": "a sandbox",
    "nemo_user_sim": "a sandbox and five auxiliary models (judge, probe scorer, summary, tool simulation, embedding)",
    "deepswe": "a sandbox (docker)",
    "indian_banking": "a gymnasium_agent with a user simulator, not a simple_agent",
    "conversational_tool_use_simulation": "a simulation agent: every turn goes to the simulator",
    "job_bench": "its own OpenAI client from judge_base_url (bypasses Gym's model servers) and docker",
    "workspace_bench": "its own OpenAI client from judge_base_url (bypasses Gym's model servers) and docker",
    "legal_agent_bench": "its own OpenAI client from judge_base_url (bypasses Gym's model servers); Harbor tasks",
    "verifif": "its own OpenAI client from judge_base_url (bypasses Gym's model servers)",
    "newton_bench": "calls OpenRouter or OpenAI directly",
}
"""Judge environments of Gym 0.7.0 that cannot run offline, and why (/work/wt/judge-research.md section 4, from
their configs and code)."""

NOTES: dict[str, str] = {
    "math_with_judge": (
        "row 2's answer is equivalent to its expected answer only through SymPy on 2^2017-sized powers: Gym's "
        "math_verify child process has 10 s of wall clock (`library_verifier_timeout_seconds`) and returns 0.0 "
        "when it runs out, so on a loaded machine the same answer scores 1.0 in one run and 0.0 in the next"
    ),
    "multichallenge": (
        "rows 3-5 of example.jsonl are identical: Gym gives them one task index (2) and rolls out each (rollouts "
        "0-2 of that task, every one 0.0, the session's reward for it), so the script finds no rollout for row "
        "indices 3 and 4; the session counts them as one task with one rollout (a collection warning says so; "
        "repeats are `--gym-repeats`), so Gym's mean over 5 rollouts (0.27) is not the session's over 3 (0.44)"
    ),
}
"""Why an environment's runs differ, where it is known (from the runs' records), shown in the table."""

USAGE = {
    "input_tokens": 10,
    "input_tokens_details": {"cached_tokens": 0},
    "output_tokens": 5,
    "output_tokens_details": {"reasoning_tokens": 0},
    "total_tokens": 15,
}
"""A response's usage as Gym's ``NeMoGymResponse`` requires it."""

TIMING = ("time", "latency", "duration", "seconds", "throughput", "_ms", "per_second")
"""Parts of the names of aggregate figures that measure time: they differ between any two runs."""


# ---- answers ---------------------------------------------------------------------------------------------------


def digest(value: object) -> int:
    """A stable number for ``value`` (its canonical JSON's sha256), the same in every process."""
    return int(hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:12], 16)


def verdict(environment: str, conversation: object) -> str:
    """The stand-in judge's answer to a judge request of ``environment`` whose normalised conversation is
    ``conversation``: one of :data:`VERDICTS` (the first, a favourable verdict, when the environment has none)."""
    choices = VERDICTS.get(environment, ("[[A=B]]", "[[A!=B]]"))
    return choices[digest(conversation) % len(choices)]


def policy_text(row: Mapping[str, Any]) -> str:
    """A made-up policy answer for a row without a recorded one: the row's reference SQL, or, boxed, its expected
    answer or a wrong one (by the row's digest: identical rows get the same answer); else a plain sentence."""
    if isinstance(row.get("sql"), str):
        return f"```sql\n{row['sql']}\n```"
    expected = row.get("expected_answer", row.get("answer"))
    if isinstance(expected, (str, int, float)) and str(expected).strip():
        chosen = str(expected) if digest(row) % 2 == 0 else "17"
        return f"Working it out step by step, the answer is \\boxed{{{chosen}}}."
    return f"Here is my answer to the request (stand-in policy, answer {digest(row) % 1000})."


def responses_body(text: str, model: str = "stand-in") -> dict[str, Any]:
    """A Responses API answer saying ``text``, with the fields Gym's ``openai_model`` validates."""
    return {
        "id": f"resp_{digest(text):x}",
        "object": "response",
        "created_at": 0,
        "model": model,
        "status": "completed",
        "output": [
            {
                "type": "message",
                "id": f"msg_{digest(text):x}",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }
        ],
        "parallel_tool_calls": False,
        "tool_choice": "auto",
        "tools": [],
        "usage": USAGE,
    }


def chat_body(text: str, model: str = "stand-in") -> dict[str, Any]:
    """A chat-completions answer saying ``text``."""
    return {
        "id": f"chatcmpl-{digest(text):x}",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def write_jsonl(path: Path, rows: Sequence[Mapping[str, Any]]) -> None:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")


def policy_recordings(rows: Sequence[Mapping[str, Any]], recorded: Path) -> list[dict[str, Any]]:
    """One recording per row that the stand-in answers the row's policy request with: Gym's recorded rollout of
    that row in ``recorded`` (matched on the normalised conversation) when it has a final message, else
    :func:`policy_text`."""
    from pytest_gym_eval.replay.normal import request_conversation

    by_conversation: dict[object, dict[str, Any]] = {}
    if recorded.exists():
        for text in recorded.read_text(encoding="utf-8").splitlines():
            try:  # some example files hold placeholder lines (over_refusal_detection: `<PLACEHOLDER ROW>`)
                line = json.loads(text)
                key = request_conversation(line["responses_create_params"]).key
            except (KeyError, ValueError, TypeError):
                continue
            output = (line.get("response") or {}).get("output") or []
            if output and output[-1].get("type") == "message":
                by_conversation.setdefault(key, line)
    recordings = []
    for row in rows:
        params = row["responses_create_params"]
        found = by_conversation.get(request_conversation(params).key)
        if found is not None:
            response = {**responses_body(""), **found["response"], "usage": USAGE}
            recordings.append({"responses_create_params": params, "response": response})
        else:
            recordings.append({"responses_create_params": params, "response": responses_body(policy_text(row))})
    return recordings


def stand_in_class() -> type:
    from pytest_gym_eval.replay.normal import request_conversation
    from pytest_gym_eval.replay.server import ReplayServer

    class StandIn(ReplayServer):
        """The replay server over the policy's answers, answering every request it has no answer for (a judge's)
        with :func:`verdict`."""

        def __init__(self, environment: str, recordings: Path) -> None:
            super().__init__([recordings], model_name="stand-in")
            self.environment = environment
            self.judged = 0

        def _answer(self, method: str, raw_path: str, raw_body: bytes) -> tuple[int, dict[str, Any]]:
            status, payload = super()._answer(method, raw_path, raw_body)
            if status != 404 or (payload.get("error") or {}).get("code") != "no_recording":
                return status, payload
            chat = raw_path.split("?", 1)[0].rstrip("/").endswith("/chat/completions")
            body = json.loads(raw_body)
            text = verdict(self.environment, repr(request_conversation(body, chat=chat).key))
            self.judged += 1
            return 200, chat_body(text) if chat else responses_body(text)

    return StandIn


# ---- the environment's config ----------------------------------------------------------------------------------


def judge_names(checkout: Path, config: Path) -> list[str]:
    """The model servers ``config``'s resources servers name besides the policy's (``judge_model``, ...)."""
    from pytest_gym_eval.core.gym_yaml import read_yaml_files
    from pytest_gym_eval.session.preflight import model_server_needs

    loaded = {path: data for path, data in read_yaml_files([config], checkout).items() if isinstance(data, dict)}
    names = []
    for need in model_server_needs(loaded):
        if need.server not in ("policy_model", "???", "") and need.server not in names:
            names.append(need.server)
    return names


def agent_of(rows: Sequence[Mapping[str, Any]], environment: str) -> str:
    """The agent the session gives the rows: the first row's ``agent_ref.name``, else ``<env>_simple_agent``."""
    ref = rows[0].get("agent_ref") if rows else None
    return str(ref["name"]) if isinstance(ref, Mapping) and ref.get("name") else f"{environment}_simple_agent"


def raw_config(checkout: Path, head: int, policy_url: str, judges: Mapping[str, str]) -> dict[str, Any]:
    """The config raw Gym gets after the environment's: its head server, the policy and each judge name bound
    (``openai_model`` blocks with the fields of the checkout's own ``openai_model.yaml``, any other type of a
    same-named block deleted), written here independently of the plugin's own config writer."""
    import yaml

    template = yaml.safe_load((checkout / "responses_api_models/openai_model/configs/openai_model.yaml").read_text())
    fields = dict(template["policy_model"]["responses_api_models"]["openai_model"])
    others = sorted(p.name for p in (checkout / "responses_api_models").iterdir() if p.is_dir())
    others = [name for name in others if name != "openai_model" and not name.startswith((".", "_"))]
    config: dict[str, Any] = {
        "head_server": {"host": "127.0.0.1", "port": head},
        "policy_base_url": policy_url,
        "policy_api_key": "no-key",
        "policy_model_name": "stand-in",
    }
    for name, url in judges.items():
        block = {**fields, "openai_base_url": url, "openai_api_key": "no-key", "openai_model": "stand-in"}
        config[name] = {"responses_api_models": {"_delete_key": ",".join(others), "openai_model": block}}
    return config


# ---- running Gym -----------------------------------------------------------------------------------------------


@contextlib.contextmanager
def gym_lock() -> Iterator[None]:
    """Hold ``/tmp/gym-tier.lock`` (waiting for it), as ``flock /tmp/gym-tier.lock`` does."""
    with LOCK.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def free_port() -> int:
    from pytest_gym_eval.gym.processes import free_port as plugin_free_port

    return int(plugin_free_port())


def stop_group(process: subprocess.Popen[bytes], grace: float = 30.0) -> None:
    """SIGINT to ``process``'s group (Gym's own shutdown), SIGKILL after ``grace`` seconds."""
    if process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGINT)
    try:
        process.wait(grace)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(30)


def raw_gym(
    checkout: Any, environment: str, agent: str, rows_file: Path, root: Path, policy_url: str, judges: Mapping[str, str]
) -> Path:
    """``gym env start`` + ``gym eval run --no-serve`` over ``rows_file``; returns the output folder."""
    from pytest_gym_eval.provision import gym_environment

    head = free_port()
    config = root / "raw-config.json"
    config.write_text(json.dumps(raw_config(checkout.path, head, policy_url, judges), indent=2))
    env_config = checkout.path / "resources_servers" / environment / "configs" / f"{environment}.yaml"
    env = gym_environment(checkout, root / "ray")
    gym = str(checkout.gym_executable)
    start_log = (root / "raw-env-start.log").open("wb")
    start = subprocess.Popen(
        [gym, "env", "start", "--config", str(env_config), "--model-type", "openai_model", "--config", str(config),
         "+skip_venv_if_present=true", f"+nemo_gym_log_dir={root / 'raw-server-logs'}"],
        cwd=checkout.path, env=env, stdout=start_log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    output = root / "raw-output" / "rollouts.jsonl"
    try:
        deadline = time.monotonic() + 1200
        while "servers ready!" not in (root / "raw-env-start.log").read_text(errors="replace"):
            if start.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"raw gym env start did not get ready; see {root / 'raw-env-start.log'}")
            time.sleep(2)
        with (root / "raw-eval-run.log").open("wb") as log:
            status = subprocess.run(
                [gym, "eval", "run", "--no-serve", "--agent", agent, "--input", str(rows_file), "--output",
                 str(output), "--num-repeats", "1", "+head_server.host=127.0.0.1", f"+head_server.port={head}",
                 "+route_failures_to_sidecar=true"],
                cwd=checkout.path, env=env, stdout=log, stderr=subprocess.STDOUT, timeout=1800,
            ).returncode  # fmt: skip
        if status != 0:
            raise RuntimeError(f"raw gym eval run exited {status}; see {root / 'raw-eval-run.log'}")
    finally:
        stop_group(start)
        start_log.close()
    return output.parent


def session(checkout: Any, environment: str, root: Path, judges: Sequence[str]) -> Path:
    """The plugin's session over the rows, every answer replayed; returns its JSON report's path."""
    argv = [
        sys.executable, "-m", "pytest", "-p", "gym_eval", "-p", "no:cacheprovider", "-p", "no:randomly",
        f"--gym-checkout={checkout.path}", "--gym-replay=policy.jsonl", f"{environment}.jsonl",
        "--gym-run-dir=runs", "--gym-report=report.json", "-q", "-rN",
        *(f"--gym-model-server={name}=replay:judge-{name}.jsonl" for name in judges),
    ]  # fmt: skip
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTHONPATH": str(HERE.parent)}
    with (root / "session.log").open("wb") as log:
        subprocess.run(argv, cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT, timeout=2400, check=False)
    return root / "report.json"


# ---- the comparison --------------------------------------------------------------------------------------------


def task_ids(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The session's task id of each row (its own id field, else its digest's first 12 characters)."""
    from pytest_gym_eval.tasks.dataset import DEFAULT_ID_FIELDS, own_task_id, row_digest

    return [own_task_id(row, DEFAULT_ID_FIELDS) or row_digest(row)[:12] for row in rows]  # type: ignore[arg-type]


def figures(aggregate: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """Every number of a Gym aggregate file (``agent/path -> value``), timings left out."""
    found: dict[str, float] = {}

    def walk(value: object, path: str) -> None:
        if isinstance(value, Mapping):
            for key, inner in value.items():
                walk(inner, f"{path}/{key}" if path else str(key))
        elif isinstance(value, list):
            for index, inner in enumerate(value):
                walk(inner, f"{path}[{index}]")
        elif (
            isinstance(value, (int, float))
            and not isinstance(value, bool)
            and not any(part in path.lower() for part in TIMING)
        ):
            found[path] = float(value)

    for entry in aggregate:
        walk({k: v for k, v in entry.items() if k != "agent_ref"}, str((entry.get("agent_ref") or {}).get("name")))
    return found


def same(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


def compare(
    rows: Sequence[Mapping[str, Any]],
    raw_rollouts: Sequence[Mapping[str, Any]],
    raw_aggregate: Sequence[Mapping[str, Any]],
    report: Mapping[str, Any],
    session_aggregate: Sequence[Mapping[str, Any]],
) -> dict[str, Any]:
    """Raw Gym's run against the session's, for the same ``rows`` (in input order): ``rows``, ``raw_rewards`` and
    ``session_rewards`` (per row, None where a run has none), ``rewards_equal`` (every row has a reward in both,
    and they are equal), ``aggregate_equal`` (the two aggregate files hold the same numbers, timings aside:
    ``aggregate_differences`` lists those that differ), ``mean_equal`` (the session's mean reward is Gym's
    ``mean/reward``) and ``errors`` (the session's rollouts with status error)."""
    ids = task_ids(rows)
    raw: list[float | None] = [None] * len(rows)
    for record in raw_rollouts:
        index = record.get("_ng_task_index")
        if isinstance(index, int) and 0 <= index < len(rows) and isinstance(record.get("reward"), (int, float)):
            raw[index] = float(record["reward"])
    by_task = {r["task_id"]: r for r in report.get("rollouts", [])}
    mine = [None if (r := by_task.get(task)) is None or r.get("reward") is None else float(r["reward"]) for task in ids]
    raw_figures, session_figures = figures(raw_aggregate), figures(session_aggregate)
    differences = sorted(
        key
        for key in set(raw_figures) | set(session_figures)
        if not same(raw_figures.get(key), session_figures.get(key))
    )
    gym_mean = next((v for k, v in raw_figures.items() if k.endswith("/mean/reward")), None)
    (summary, *_) = report.get("datasets") or [{}]
    session_mean = (summary.get("mean_reward") or {}).get("estimate")
    return {
        "rows": len(rows),
        "raw_rewards": raw,
        "session_rewards": mine,
        "rewards_equal": all(a is not None and same(a, b) for a, b in zip(raw, mine, strict=True)),
        "aggregate_equal": bool(raw_figures) and not differences,
        "aggregate_differences": differences,
        "aggregate_figures": len(raw_figures),
        "gym_mean_reward": gym_mean,
        "session_mean_reward": session_mean,
        "mean_equal": gym_mean is not None and session_mean is not None and same(gym_mean, float(session_mean)),
        "errors": [r["task_id"] for r in report.get("rollouts", []) if r.get("status") == "error"],
    }


# ---- one environment -------------------------------------------------------------------------------------------


def run_environment(environment: str, work: Path) -> dict[str, Any]:
    """Provision, record (raw Gym), replay (the session) and compare one environment; its result."""
    from pytest_gym_eval import provision
    from pytest_gym_eval.replay.recorder import RecordingProxy

    root = work / environment
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    started = time.monotonic()
    checkout = provision.provision(environments=(environment,))
    example = checkout.path / "resources_servers" / environment / "data" / "example.jsonl"
    rows = read_jsonl(example)
    rows_file = root / f"{environment}.jsonl"
    shutil.copy(example, rows_file)  # the session's dataset; raw Gym reads the same file
    config = checkout.path / "resources_servers" / environment / "configs" / f"{environment}.yaml"
    judges = judge_names(checkout.path, config)
    answers = root / "stand-in-policy.jsonl"
    write_jsonl(answers, policy_recordings(rows, example.parent / "example_rollouts.jsonl"))
    agent = agent_of(rows, environment)
    with contextlib.ExitStack() as stack:
        stand_in = stack.enter_context(stand_in_class()(environment, answers))
        policy = stack.enter_context(RecordingProxy(stand_in.base_url, root / "policy.jsonl"))
        proxies = {
            name: stack.enter_context(RecordingProxy(stand_in.base_url, root / f"judge-{name}.jsonl"))
            for name in judges
        }
        output = raw_gym(
            checkout, environment, agent, rows_file, root, policy.base_url,
            {name: proxy.base_url for name, proxy in proxies.items()},
        )  # fmt: skip
        judged = stand_in.judged
    for name in judges:  # a judge never called still gets its (empty) recordings file
        (root / f"judge-{name}.jsonl").touch()
    report_path = session(checkout, environment, root, judges)
    if not report_path.exists():
        raise RuntimeError(f"the session wrote no report; see {root / 'session.log'}")
    (run_dir,) = (root / "runs").iterdir()
    result = compare(
        rows,
        read_jsonl(output / "rollouts.jsonl"),
        json.loads((output / "rollouts_aggregate_metrics.json").read_text()),
        json.loads(report_path.read_text()),
        json.loads((run_dir / "gym-output" / "rollouts_aggregate_metrics.json").read_text()),
    )
    return {
        "environment": environment,
        "runs": True,
        "agent": agent,
        "judges": judges or ["policy_model"],
        "judge_calls": judged,
        **result,
        "seconds": round(time.monotonic() - started),
    }


def table(results: Sequence[Mapping[str, Any]]) -> str:
    """The Markdown table of docs/judge-fidelity.md: the last result of each environment, then those that cannot
    run offline."""
    last = {r["environment"]: r for r in results}
    lines = [
        "| environment | runs? | judge | rows | judge calls | rewards equal | aggregates equal | reason if not |",
        "|---|---|---|---|---|---|---|---|",
    ]

    def yes(value: object) -> str:
        return "yes" if value else "**no**"

    for name, r in last.items():
        if r.get("runs"):
            rewards = ", ".join("-" if v is None else f"{v:g}" for v in r["raw_rewards"])
            differing = [name.split("/", 1)[-1] for name in r["aggregate_differences"]]
            shown = ", ".join(f"`{name}`" for name in differing[:3]) + (", ..." if len(differing) > 3 else "")
            reason = "; ".join(filter(None, [
                f"{len(differing)} of {r['aggregate_figures']} figures differ: {shown}" if differing else "",
                f"errored: {', '.join(r['errors'])}" if r["errors"] else "",
                NOTES.get(name, "") if differing or not r["rewards_equal"] else "",
            ]))  # fmt: skip
            lines.append(
                f"| {name} | yes | {', '.join(r['judges'])} | {r['rows']} | {r['judge_calls']} | "
                f"{yes(r['rewards_equal'])} ({rewards}) | {yes(r['aggregate_equal'] and r['mean_equal'])} | {reason} |"
            )
        else:
            reason = str(r.get("reason", "")).splitlines()[0][:200]
            lines.append(f"| {name} | **no** | | | | | | {reason} |")
    for name, reason in NOT_OFFLINE.items():
        if name not in last:
            lines.append(f"| {name} | not offline | | | | | | {reason} |")
    return "\n".join(lines)


DOC = HERE.parent / "docs" / "judge-fidelity.md"
START, END = "<!-- judge-fidelity table -->", "<!-- end judge-fidelity table -->"


def write_table(doc: Path, text: str) -> None:
    """Replace what stands between :data:`START` and :data:`END` in ``doc`` with ``text``."""
    page = doc.read_text(encoding="utf-8")
    head, rest = page.split(START, 1)
    _, tail = rest.split(END, 1)
    doc.write_text(f"{head}{START}\n{text}\n{END}{tail}", encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("environments", nargs="*", default=list(DEFAULT_ENVIRONMENTS))
    parser.add_argument("--work", type=Path, default=Path("/tmp/judge-fidelity"))
    parser.add_argument("--results", type=Path, default=None, help="JSON lines (default: WORK/results.jsonl)")
    parser.add_argument(
        "--stop-after", type=float, default=math.inf, help="seconds after which no further environment starts"
    )
    parser.add_argument("--table", action="store_true", help="print the table of the results file and stop")
    parser.add_argument("--write", action="store_true", help=f"with --table: write it into {DOC.name} too")
    args = parser.parse_args(argv)
    results_path = args.results or args.work / "results.jsonl"
    if args.table:
        text = table(read_jsonl(results_path))
        print(text)
        if args.write:
            write_table(DOC, text)
        return 0
    args.work.mkdir(parents=True, exist_ok=True)
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))  # stop Gym on the way out
    failed = 0
    stop_at = time.monotonic() + args.stop_after
    with gym_lock():  # the environments one after another in one hold: each provisions, starts Gym twice
        for environment in args.environments:
            if time.monotonic() > stop_at:
                print(f"{environment}: not started (--stop-after {args.stop_after:g} s)", flush=True)
                failed += 1
                continue
            print(f"{environment}: ...", flush=True)
            try:
                result = run_environment(environment, args.work)
            except Exception as exc:  # one environment's failure is its row, not the end of the run
                traceback.print_exc()
                result = {"environment": environment, "runs": False, "reason": f"{type(exc).__name__}: {exc}"}
            with results_path.open("a", encoding="utf-8") as out:
                out.write(json.dumps(result) + "\n")
            ok = result.get("runs") and result["rewards_equal"] and result["aggregate_equal"] and result["mean_equal"]
            failed += not ok
            print(f"{environment}: {json.dumps({k: v for k, v in result.items() if k != 'aggregate_differences'})}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
