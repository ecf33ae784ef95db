# Sourced by the other step scripts: the virtualenv they share and the Gym release they use.
#   GYM_EVAL_VENV     the virtualenv install.sh makes (default .gym-eval-venv, relative to the working folder)
#   GYM_VERSION       the NeMo Gym release (default: the plugin's default release)
#   GYM_ENVIRONMENTS  the environments whose server venvs are prefetched, space-separated (default mcqa)
#   GYM_EVAL_OUT      where the reports go (default gym-eval-out, relative to the working folder)
absolute() { case "$1" in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac }
venv="$(absolute "${GYM_EVAL_VENV:-.gym-eval-venv}")"
python="$venv/bin/python"
out="$(absolute "${GYM_EVAL_OUT:-gym-eval-out}")"
read -ra environments <<<"${GYM_ENVIRONMENTS:-mcqa}"
provision_args=()
if [ -n "${GYM_VERSION:-}" ]; then
    provision_args+=(--gym-version "$GYM_VERSION")
fi
provision_args+=(--environment "${environments[@]}")
