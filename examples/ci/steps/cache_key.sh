#!/usr/bin/env bash
# The key of the cache that holds the plugin's cache folder (Gym's checkout with its venvs, the sdist, uv's cache),
# as `key=...`: appended to $GITHUB_OUTPUT when that is set (a step with `id: gym-cache` then gives
# `steps.gym-cache.outputs.key`), else printed. The key changes whenever what the cache holds would:
#   - the Gym release (GYM_VERSION; unset, the default release the installed plugin provisions, so run install.sh
#     first), the OS, the machine and the runner image (ImageOS on GitHub's runners);
#   - the full version of the Python Gym's venv links to (GYM_EVAL_PYTHON, default python3): a runner image that
#     moves from Python 3.13.N to 3.13.N+1 would otherwise restore a venv whose interpreter is gone;
#   - GYM_ENVIRONMENTS and GYM_EVAL_PACKAGE, as a digest: a pip spec holds characters a key may not (actions/cache
#     refuses a comma: 'pytest-gym-eval[provision]>=0.1,<0.2'; GitLab drops a key with a '/').
# Every part is reduced to the characters both accept: letters, digits, '.', '_' and '-'.
set -euo pipefail
. "$(dirname "$0")/common.sh"
safe() { printf '%s' "$1" | tr -c 'A-Za-z0-9._-' '_'; }
gym_version="${GYM_VERSION:-}"
if [ -z "$gym_version" ] && ! gym_version="$("$python" -c \
    'from pytest_gym_eval.provision import DEFAULT_GYM_VERSION; print(DEFAULT_GYM_VERSION)')"; then
    echo "cache_key: GYM_VERSION is unset and $python cannot say which Gym release pytest-gym-eval provisions:" \
        "run install.sh first" >&2
    exit 1
fi
python_version="$("${GYM_EVAL_PYTHON:-python3}" -c 'import platform; print(platform.python_version())')"
digest="$(printf '%s\n' "${GYM_ENVIRONMENTS:-mcqa}" "${GYM_EVAL_PACKAGE:-pytest-gym-eval[provision]}" | sha256sum)"
key="gym-$(safe "$(uname -s)-$(uname -m)-${ImageOS:-any}")-gym$(safe "$gym_version")"
key+="-py$(safe "$python_version")-${digest:0:16}"
if [ -n "${GITHUB_OUTPUT:-}" ]; then
    echo "key=$key" >>"$GITHUB_OUTPUT"
fi
echo "key=$key"
