"""The root-cause finder (:mod:`pytest_gym_eval.outcomes.causes`) on hand-written failure records and server logs.

The shapes mirror what real Gym 0.7.0 wrote when its policy model's endpoint (the replay model behind the test
fault proxy) answered 429, 500, 400 ``invalid_prompt``, a replay 404, a Responses body missing fields, or a body
that is not JSON: see tests/real_gym/test_faults_real_gym.py, which proves the same causes against real Gym.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_gym_eval.outcomes.causes import (
    CLASSES,
    MODEL_BAD_RESPONSE,
    REPLAY_NO_RECORDING,
    Cause,
    ServerLogs,
    diagnose,
    endpoint_error,
    redact,
    server_label,
    unwrap,
)

AGENT = "SimpleAgent___mcqa_simple_agent"
POLICY = "SimpleModelServer___policy_model"
ENDPOINT = "http://127.0.0.1:44805/v1/responses"


def wrapped(key: str, inner: bytes) -> bytes:
    """The body a Gym server answers (HTTP 500) when the server it called failed with body ``inner``: the JSON
    string ``Hit an exception in <key> calling an inner server: <repr of inner>``."""
    return json.dumps(f"Hit an exception in {key} calling an inner server: {inner!r}").encode()


def agent_body(inner: bytes, innermost_key: str | None = POLICY) -> str:
    """The agent's ``/run`` body around a policy-model failure, as in the failures file: two agent layers
    (``/run`` calls the agent's own ``/v1/responses``) and, for an HTTP error from the endpoint, the policy
    model's layer; Gym keeps 2,000 characters of it."""
    body = wrapped(innermost_key, inner) if innermost_key else inner
    text = wrapped(AGENT, wrapped(AGENT, body)).decode()
    return text if len(text) <= 2000 else text[:2000] + "…"


def openai_error(message: str, kind: str, code: str | None) -> bytes:
    return json.dumps({"error": {"message": message, "type": kind, "param": None, "code": code}}).encode()


def failure(body: str, index: int = 0) -> dict[str, object]:
    """A failures-file row of a failed agent ``/run`` (route_failures_to_sidecar)."""
    return {
        "_ng_failure_class": "agent_run_error",
        "_ng_failure_type": "ClientResponseError",
        "_ng_failure_message": "500, message='Internal Server Error', url='http://127.0.0.1:16498/run'",
        "_ng_failure_http_status": 500,
        "_ng_failure_response_body": body,
        "_ng_task_index": index,
        "_ng_rollout_index": 0,
    }


RATE_LIMIT = openai_error(
    "Rate limit reached for gpt-4.1 on tokens per min (TPM): Limit 30000.", "requests", "rate_limit_exceeded"
)
SERVER_ERROR = openai_error("The server had an error while processing your request.", "server_error", None)
INVALID_PROMPT = openai_error(
    "Invalid prompt: flagged as potentially violating our usage policy.", "invalid_request_error", "invalid_prompt"
)
NO_RECORDING = openai_error(
    'no recorded answer for this conversation (first user message: "[case no-recording] Which test '
    + "x" * 3000
    + '"); 7 recordings loaded',
    "not_found",
    "no_recording",
)
VALIDATION = (
    "4 validation errors for NeMoGymResponse\n"
    "parallel_tool_calls\n  Field required [type=missing, input_value={'id': 'resp_4', '...'}, input_type=dict]\n"
    "    For further information visit https://errors.pydantic.dev/2.14/v/missing\n"
    "tool_choice\n  Field required [type=missing, input_value={'id': 'resp_4', '...'}, input_type=dict]\n"
    "    For further information visit https://errors.pydantic.dev/2.14/v/missing\n"
    "tools\n  Field required [type=missing, input_value={'id': 'resp_4', '...'}, input_type=dict]\n"
    "    For further information visit https://errors.pydantic.dev/2.14/v/missing\n"
    "usage.output_tokens_details\n  Field required [type=missing, input_value={'input_tokens': 140}, input_type=dict]\n"
    "    For further information visit https://errors.pydantic.dev/2.14/v/missing"
)
NOT_JSON_REPR = "JSONDecodeError('unexpected character: line 1 column 1 (char 0)')"


def upstream_lines(status: int, body: bytes, retries: int = 2) -> list[str]:
    """What the policy model logs for an endpoint error: a retry line per retried attempt, then the failure."""
    kind = "rate_limit" if status in (429, 502, 503, 504, 520) else "http_error"
    text = body.decode()
    lines = [
        f"[model_retry url={ENDPOINT} status={status} kind={kind} try={t} max_tries=3 error_msg={text[:200]}]"
        for t in range(1, retries + 1)
    ]
    return [*lines, f"🚨 [upstream_request_failed] server={POLICY} method=POST url={ENDPOINT} status={status}",
            f"Response content: {text[:2000]}"]  # fmt: skip


def caught_lines(module_type: str, message: str, repr_text: str) -> list[str]:
    """What a Gym server logs when its handler raised: the banner, a traceback, ``repr(e)``."""
    return [
        "🚨 Caught an exception printed above in policy_model (SimpleModelServer). If you expect this to be fed "
        "back into this model, the exception repr i.e. `repr(e)` is returned to the model.",
        "Formatted exception:   + Exception Group Traceback (most recent call last):",
        '  |   File "/gym/starlette/_utils.py", line 104, in create_collapsing_task_group',
        f"    | {module_type}: {message.splitlines()[0]}",
        "    +------------------------------------",
        "",
        "The above exception was the direct cause of the following exception:",
        "",
        "Traceback (most recent call last):",
        '  File "/gym/responses_api_models/openai_model/app.py", line 95, in responses',
        "    return NeMoGymResponse.model_validate(openai_response_dict)",
        f"{module_type}: {message}",
        "",
        f"repr(e): {repr_text}",
    ]


def write_log(folder: Path, server: str, lines: list[str]) -> Path:
    """A server log as Gym writes it under logs/gym-servers: every line prefixed with ``(<server>) ``."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{server}.log"
    head = ["Found ulimit of %s and failed to automatically increase", f"({server}) INFO:     Started server process"]
    body = [f"({server}) {line}" for text in lines for line in text.split("\n")]
    with path.open("a", encoding="utf-8") as handle:
        handle.write("\n".join([*head, *body]) + "\n")
    return path


def line_of(path: Path, text: str) -> int:
    """1-based number of the first line of ``path`` containing ``text``."""
    return next(n for n, line in enumerate(path.read_text().splitlines(), 1) if text in line)


@pytest.fixture
def logs(tmp_path: Path) -> tuple[ServerLogs, Path]:
    folder = tmp_path / "gym-servers"
    log = write_log(
        folder,
        "policy_model",
        [
            *upstream_lines(429, RATE_LIMIT),
            *upstream_lines(500, SERVER_ERROR),
            *upstream_lines(400, INVALID_PROMPT, retries=0),
            *upstream_lines(404, NO_RECORDING),
            *caught_lines("pydantic_core._pydantic_core.ValidationError", VALIDATION, VALIDATION),
            *caught_lines("orjson.JSONDecodeError", "unexpected character: line 1 column 1 (char 0)", NOT_JSON_REPR),
        ],
    )
    agent_line = f"🚨 [upstream_request_failed] server={AGENT} method=POST url=x status=500"
    write_log(folder, "mcqa_simple_agent", [agent_line])
    return ServerLogs(folder), log


def test_unwrap_peels_every_server_layer_off_the_endpoints_body() -> None:
    chain = unwrap(agent_body(RATE_LIMIT))
    assert chain.servers == (AGENT, AGENT, POLICY)
    assert json.loads(chain.innermost) == json.loads(RATE_LIMIT) and not chain.truncated


def test_unwrap_survives_a_body_gym_cut_short() -> None:
    body = agent_body(NO_RECORDING)
    assert body.endswith("…")  # the nesting multiplies the escaping: 2,000 characters hold little of the centre
    chain = unwrap(body)
    assert chain.servers == (AGENT, AGENT, POLICY) and chain.truncated
    assert chain.innermost.startswith('{"error": {"message": "no recorded answer for this conversation')
    error = endpoint_error(chain.innermost)
    assert error is not None and error.message.startswith("no recorded answer")


@pytest.mark.parametrize(
    ("inner", "summary", "failure_class", "log_text"),
    [
        (RATE_LIMIT, "policy model: HTTP 429 rate_limit_exceeded: Rate limit reached for gpt-4.1 on tokens per min "
         "(TPM): Limit 30000.", "model_http_429", "status=429"),
        (SERVER_ERROR, "policy model: HTTP 500 server_error: The server had an error while processing your request.",
         "model_http_500", "status=500"),
        (INVALID_PROMPT, "policy model: HTTP 400 invalid_prompt: Invalid prompt: flagged as potentially violating "
         "our usage policy.", "model_http_400", "status=400"),
    ],
)  # fmt: skip
def test_an_endpoint_http_error_names_the_server_status_error_and_log_line(
    logs: tuple[ServerLogs, Path], inner: bytes, summary: str, failure_class: str, log_text: str
) -> None:
    index, log = logs
    cause = diagnose(failure(agent_body(inner)), index)
    assert (cause.summary, cause.failure_class) == (summary, failure_class)
    assert cause.log == f"{log}:{line_of(log, f'method=POST url={ENDPOINT} {log_text}')}"


def test_an_endpoint_gyms_client_stopped_calling_says_so(tmp_path: Path) -> None:
    # Gym 0.7.0's model client stops calling an endpoint for good after a 401 saying the key is invalid: every
    # later rollout fails with that same 401 without a request sent. The cause says so, with the log line.
    invalid = openai_error("Incorrect API key provided: sk-...abcd.", "invalid_request_error", "invalid_api_key")
    folder = tmp_path / "gym-servers"
    log = write_log(folder, "policy_model", [*upstream_lines(401, invalid, retries=0)])
    index = ServerLogs(folder)
    assert "stopped calling" not in diagnose(failure(agent_body(invalid)), index).summary
    write_log(folder, "policy_model", [f"[model_retry_stop url={ENDPOINT} status=401 error_msg={invalid.decode()}]"])
    cause = diagnose(failure(agent_body(invalid)), index)
    stop_line = line_of(log, "[model_retry_stop")
    assert cause.failure_class == "model_http_401"
    assert cause.summary.endswith(
        f"(Gym's model client stopped calling this endpoint after an HTTP 401 like it ({log}:{stop_line}): every later"
        " request of that server fails so without reaching the endpoint, until Gym restarts)"
    )
    assert "stopped calling" not in diagnose(failure(agent_body(SERVER_ERROR)), index).summary  # another status


def test_a_replay_404_shows_the_whole_message_from_the_log(logs: tuple[ServerLogs, Path]) -> None:
    index, log = logs
    cause = diagnose(failure(agent_body(NO_RECORDING)), index)
    assert cause.failure_class == REPLAY_NO_RECORDING
    assert cause.summary.startswith("policy model: HTTP 404 no_recording: no recorded answer for this conversation")
    assert cause.summary.endswith("…") and len(cause.summary) < 400  # the log's full text, trimmed to one line
    assert cause.log == f"{log}:{line_of(log, f'method=POST url={ENDPOINT} status=404')}"


def test_a_responses_body_gym_rejects_names_the_missing_fields(logs: tuple[ServerLogs, Path]) -> None:
    index, log = logs
    # The policy model raised (no HTTP error from the endpoint): its body is the exception's repr, one layer less.
    cause = diagnose(failure(agent_body(json.dumps(VALIDATION).encode(), innermost_key=None)), index)
    assert cause.summary == (
        "policy model: response rejected by Gym (ValidationError: 4 validation errors for NeMoGymResponse: "
        "parallel_tool_calls, tool_choice, tools, usage.output_tokens_details: Field required)"
    )
    assert cause.failure_class == MODEL_BAD_RESPONSE
    number = int(cause.log.rsplit(":", 1)[1])
    assert log.read_text().splitlines()[number - 1] == (
        "(policy_model) pydantic_core._pydantic_core.ValidationError: 4 validation errors for NeMoGymResponse"
    )


def test_a_body_that_is_not_json_is_a_rejected_response(logs: tuple[ServerLogs, Path]) -> None:
    index, log = logs
    cause = diagnose(failure(agent_body(json.dumps(NOT_JSON_REPR).encode(), innermost_key=None)), index)
    assert cause.summary == (
        "policy model: response rejected by Gym (JSONDecodeError: unexpected character: line 1 column 1 (char 0))"
    )
    assert cause.failure_class == MODEL_BAD_RESPONSE
    assert (
        log.read_text()
        .splitlines()[int(cause.log.rsplit(":", 1)[1]) - 1]
        .startswith("(policy_model) orjson.JSONDecodeError: ")
    )


def test_without_logs_the_cause_comes_from_the_body_alone() -> None:
    # Servers attached with --gym-head-server keep their logs elsewhere: no status, no log line, still the cause.
    cause = diagnose(failure(agent_body(RATE_LIMIT)), None)
    assert cause.summary.startswith("policy model: HTTP error rate_limit_exceeded: Rate limit reached")
    assert (cause.failure_class, cause.log) == ("model_http_error", "")
    assert diagnose(failure(agent_body(NO_RECORDING)), None).failure_class == REPLAY_NO_RECORDING


def test_two_different_errors_point_to_their_own_log_lines(tmp_path: Path) -> None:
    first = openai_error("upstream overloaded for prompt A", "server_error", None)
    second = openai_error("upstream overloaded for prompt B", "server_error", None)
    folder = tmp_path / "gym-servers"
    log = write_log(folder, "policy_model", [*upstream_lines(500, first), *upstream_lines(500, second)])
    index = ServerLogs(folder)
    causes = [diagnose(failure(agent_body(body)), index) for body in (second, first)]
    first_failure = line_of(log, "upstream_request_failed")
    assert [c.log for c in causes] == [
        f"{log}:{first_failure + 4}",  # the second failure block (2 retry lines, the failure, its content)
        f"{log}:{first_failure}",
    ]
    assert "prompt B" in causes[0].summary and "prompt A" in causes[1].summary


def test_logs_are_read_incrementally(tmp_path: Path) -> None:
    folder = tmp_path / "gym-servers"
    write_log(folder, "policy_model", upstream_lines(429, RATE_LIMIT))
    index = ServerLogs(folder)
    assert diagnose(failure(agent_body(SERVER_ERROR)), index).failure_class == "model_http_error"  # not logged yet
    log = write_log(folder, "policy_model", upstream_lines(500, SERVER_ERROR))
    cause = diagnose(failure(agent_body(SERVER_ERROR)), index)
    assert cause.failure_class == "model_http_500" and cause.log.startswith(f"{log}:")
    assert len(index.upstream) == 2  # each logged failure indexed once


def test_a_record_without_a_body_keeps_gyms_class_and_message() -> None:
    record = {"_ng_failure_class": "environment_server_failed", "_ng_failure_message": "sandbox \\'x\\' lost"}
    cause = diagnose(record)
    assert cause == Cause(
        "Gym recorded the rollout as failed (environment_server_failed): sandbox \\'x\\' lost",
        "environment_server_failed",
        found=False,
    )


def test_an_unforeseen_body_never_raises() -> None:
    for body in ("\"Hit an exception in X calling an inner server: b'\\x", '"', "Request was cancelled", "{"):
        assert isinstance(diagnose(failure(body)), Cause)


def test_secrets_never_reach_the_summary(logs: tuple[ServerLogs, Path]) -> None:
    index, _ = logs
    secret = "my-endpoint-key-123456"
    other = "sk-proj-Ab3dEfGh1jKlMn0pQrSt"
    body = openai_error(f"Incorrect API key provided: {secret}; also {other}", "auth", "invalid_key")
    cause = diagnose(failure(agent_body(body)), index, secrets=[secret])
    assert secret not in cause.summary and other not in cause.summary
    assert "[redacted]" in cause.summary


def test_redact_covers_the_usual_shapes() -> None:
    text = (
        "Authorization: Bearer abcdefghijklmnop api_key=zyxwvutsrq url=https://h/v1?key=abc123 "
        "nvapi-9aB8cD7eF6gH5iJ4kL3m hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"
    )
    assert redact(text) == (
        "Authorization: Bearer [redacted] api_key=[redacted] url=https://h/v1?[redacted] [redacted] [redacted]"
    )
    assert redact("value s3cr3t-value here", ["s3cr3t-value"]) == "value [redacted] here"
    # Names that merely start like a key stay: an agent, a task id.
    names = "agent hf_simple_agent_with_tools, task sk-learn-regression, pk_index_lookup"
    assert redact(names) == names


def test_server_labels() -> None:
    assert server_label(POLICY) == ("policy model", "model")
    assert server_label("VLLMModel___judge_model") == ("model server judge_model", "model")
    assert server_label(AGENT) == ("agent mcqa_simple_agent", "agent")
    assert server_label("mcqa", "MCQAResourcesServer") == ("resources server mcqa", "resources")


def test_every_class_is_documented_in_the_readme() -> None:
    section = (Path(__file__).parents[2] / "docs" / "outcomes.md").read_text()
    missing = [name for name in CLASSES if f"`{name}`" not in section]
    assert missing == []


def test_recent_activity_shows_the_connection_retries_gym_repeats_without_end(tmp_path: Path) -> None:
    folder = tmp_path / "gym-servers"
    retry = (
        "[request_retry url={} error=ServerDisconnectedError retry={} elapsed_s={}] Hit {} global "
        "`ServerDisconnectedError` while querying {}."
    )
    lines = [retry.format(ENDPOINT, n * 50, n * 25.0, n * 100, ENDPOINT) for n in range(1, 6)]
    log = write_log(folder, "policy_model", [*upstream_lines(429, RATE_LIMIT), *lines])
    index = ServerLogs(folder)
    index.refresh()
    # HTTP errors are retried 3 times and then fail the rollout: not what a stalled run is waiting on.
    assert index.recent_activity() == [f"{log}:{line_of(log, f'retry={n * 50} ')}: {lines[n - 1]}" for n in (3, 4, 5)]


def test_rollouts_failing_alike_each_cite_their_own_log_line(tmp_path: Path) -> None:
    # Five rollouts failed with one HTTP 500: Gym logged five identical blocks, one per rollout.
    folder = tmp_path / "gym-servers"
    log = write_log(folder, "policy_model", [line for _ in range(5) for line in upstream_lines(500, SERVER_ERROR)])
    index = ServerLogs(folder)
    first = line_of(log, "upstream_request_failed")
    causes = [diagnose(failure(agent_body(SERVER_ERROR), task), index) for task in range(5)]
    assert [c.log for c in causes] == [f"{log}:{first + 4 * n}" for n in range(5)]
    assert {c.failure_class for c in causes} == {"model_http_500"}
    # Asked again (the HTML report, a later look), a rollout cites the line it was given; one more rollout than
    # lines shares the last.
    assert diagnose(failure(agent_body(SERVER_ERROR), 2), index).log == causes[2].log
    assert diagnose(failure(agent_body(SERVER_ERROR), 9), index).log == causes[4].log
    assert len(index.upstream) == 1  # one error, indexed once


def test_exceptions_raised_alike_each_cite_their_own_log_line(tmp_path: Path) -> None:
    folder = tmp_path / "gym-servers"
    caught = caught_lines("orjson.JSONDecodeError", "unexpected character: line 1 column 1 (char 0)", NOT_JSON_REPR)
    log = write_log(folder, "policy_model", [*caught, *caught])
    index = ServerLogs(folder)
    causes = [diagnose(failure(agent_body(NOT_JSON_REPR.encode(), None), task), index) for task in range(2)]
    assert causes[0].failure_class == "model_bad_response" and causes[0].log != causes[1].log
    assert [int(c.log.rsplit(":", 1)[1]) for c in causes] == [
        n
        for n, line in enumerate(log.read_text().splitlines(), 1)
        if line.endswith(") orjson.JSONDecodeError: unexpected character: line 1 column 1 (char 0)")
    ]


def test_a_recording_with_chat_completion_token_counts_points_to_vllm_model(tmp_path: Path) -> None:
    # mrcr's and ruler2's example recordings carry a chat completion's usage; openai_model's Responses check
    # rejects it, and --gym-model-type=vllm_model (chat completions) replays them exactly.
    usage = "{'prompt_tokens': 112, 'total_tokens': 385, 'completion_tokens': 273, 'prompt_tokens_details': None}"
    validation = "2 validation errors for NeMoGymResponse\n" + "".join(
        f"usage.{name}\n  Field required [type=missing, input_value={usage}, input_type=dict]\n"
        "    For further information visit https://errors.pydantic.dev/2.14/v/missing\n"
        for name in ("input_tokens", "output_tokens")
    )
    folder = tmp_path / "gym-servers"
    write_log(
        folder, "policy_model", caught_lines("pydantic_core._pydantic_core.ValidationError", validation, validation)
    )
    cause = diagnose(failure(agent_body(json.dumps(validation).encode(), innermost_key=None)), ServerLogs(folder))
    assert cause.failure_class == MODEL_BAD_RESPONSE
    assert cause.summary.startswith(
        "policy model: response rejected by Gym (ValidationError: 2 validation errors for NeMoGymResponse: "
        "usage.input_tokens, usage.output_tokens: Field required); its token counts (usage) are not the Responses"
    )
    assert "--gym-model-type=vllm_model" in cause.summary


def test_an_unexpected_error_gets_a_documented_class_and_an_os_error_one_line() -> None:
    import errno

    from pytest_gym_eval.outcomes.causes import CLASSES, unexpected_error

    full = OSError(errno.ENOSPC, "No space left on device", "/runs/gym-run-1/state.json")
    assert unexpected_error(full) == (
        "run_dir_full",
        "no space left on device: /runs/gym-run-1/state.json (the disk of the run directory is full: free some "
        "space, or point --gym-run-dir elsewhere)",
    )
    denied = PermissionError(errno.EACCES, "Permission denied", "/runs/x")
    assert unexpected_error(denied) == ("os_error", "Permission denied: /runs/x (PermissionError)")
    assert unexpected_error(ValueError("bug")) == ("unexpected_exception", "")
    assert {"run_dir_full", "os_error", "unexpected_exception", "unknown"} <= set(CLASSES)
