#!/usr/bin/env bash
# Run this folder's tests against real NeMo Gym with the replay model (no API key): test functions over a tool-calling
# agent's rollouts (Gym's example_single_tool_call environment), on cases built in Python, with tool-call matchers, a
# soft expectation, a metric with reasons and that metric's gate on the test's mark. The policy model's answers are
# this folder's recordings. scripts/setup.sh first (the virtualenv and Gym 0.7.0 with that environment, quick once
# done). Extra arguments go to pytest (e.g. -v, --junitxml=out.xml, --gym-report=report.json).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
"$root/scripts/setup.sh"
cd "$here"
exec "$root/.venv/bin/pytest" --gym-replay=recordings/weather_rollouts.jsonl "$@"
