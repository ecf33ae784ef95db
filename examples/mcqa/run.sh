#!/usr/bin/env bash
# Set up everything and run the mcqa example against real NeMo Gym, with the replay model (no API key):
# scripts/setup.sh (a virtualenv with pytest-gym-eval, Gym 0.7.0 provisioned from its sdist, cached after the
# first run, and what the project's tests need), then `pytest` in this folder. Extra arguments go to pytest
# (e.g. -v, -n 2, --junitxml=out.xml).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
"$root/scripts/setup.sh"  # the virtualenv, Gym, and what the tests need too (quick when already done)
cd "$here"
exec "$root/.venv/bin/pytest" --gym-replay=recordings/mcqa_rollouts.jsonl "$@"
