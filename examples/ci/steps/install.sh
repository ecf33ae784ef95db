#!/usr/bin/env bash
# Install pytest-gym-eval (and uv, which provisioning uses) into a virtualenv of its own, with uv when it is on
# PATH, else with pip.
#   GYM_EVAL_PACKAGE  what pip installs (default 'pytest-gym-eval[provision]'; pin a version, or give a path)
#   GYM_EVAL_PYTHON   the interpreter that makes the virtualenv (default python3)
#   GYM_EVAL_VENV     see common.sh
set -euo pipefail
. "$(dirname "$0")/common.sh"
start=$SECONDS
package="${GYM_EVAL_PACKAGE:-pytest-gym-eval[provision]}"
if command -v uv >/dev/null; then  # uv when the runner has it (much faster), else pip
    [ -x "$python" ] || uv venv --quiet --python "${GYM_EVAL_PYTHON:-python3}" "$venv"
    uv pip install --quiet --python "$python" "$package"
else
    [ -x "$python" ] || "${GYM_EVAL_PYTHON:-python3}" -m venv "$venv"
    "$python" -m pip install --quiet --disable-pip-version-check "$package"
fi
"$python" -m pytest --version
echo "install: pytest-gym-eval in $venv ($(( SECONDS - start )) s)"
