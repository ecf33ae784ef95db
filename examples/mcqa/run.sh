#!/usr/bin/env bash
# Set up everything and run the mcqa example against real NeMo Gym, with the replay model (no API key):
# a virtualenv with pytest-gym-eval, Gym 0.7.0 provisioned from its sdist (cached after the first run),
# then `pytest` in this folder. Extra arguments go to pytest (e.g. -v, -n 2, --junitxml=out.xml).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
if [ ! -x "$root/.venv/bin/python" ]; then
    python3 -m venv "$root/.venv"
fi
"$root/.venv/bin/python" -m pip install --quiet --disable-pip-version-check -e "$root[dev]"
"$root/.venv/bin/python" -m pytest_gym_eval provision
cd "$here"
exec "$root/.venv/bin/pytest" --gym-replay=recordings/mcqa_rollouts.jsonl "$@"
