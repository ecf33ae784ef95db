#!/usr/bin/env bash
# Run this folder's tests against real NeMo Gym with the replay model (no API key): the mcqa example's rollouts in
# test functions, a custom metric gated at 0.9, and one row rolled out on demand, all in one Gym session.
# scripts/setup.sh first (the virtualenv and Gym 0.7.0, quick once done). Extra arguments go to pytest
# (e.g. -v, --junitxml=out.xml).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
"$root/scripts/setup.sh"
cd "$here"
exec "$root/.venv/bin/pytest" --gym-replay=../mcqa/recordings/mcqa_rollouts.jsonl --gym-min-metric=boxed:0.9 "$@"
