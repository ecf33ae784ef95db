#!/usr/bin/env bash
# Provision NeMo Gym GYM_VERSION with the server venvs of GYM_ENVIRONMENTS in the plugin's cache folder
# (PYTEST_GYM_EVAL_CACHE, default ~/.cache/pytest-gym-eval: the checkout gym-<version>/, the sdist and uv's
# cache), the folder the CI job restores and saves. Instant when the restored cache already holds them.
# A release outside the range the plugin supports is refused, naming the range.
set -euo pipefail
. "$(dirname "$0")/common.sh"
start=$SECONDS
checkout="$("$python" -m pytest_gym_eval provision "${provision_args[@]}")"
echo "provision: Gym ${GYM_VERSION:-(default)} at $checkout ($(( SECONDS - start )) s)"
