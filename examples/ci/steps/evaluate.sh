#!/usr/bin/env bash
# Run the evaluation: pytest in GYM_EVAL_DIR against the Gym provision.sh made, its gates deciding the exit status.
#   GYM_EVAL_DIR   the folder pytest runs in, whose ini file names the datasets and gates (default .)
#   GYM_EVAL_ARGS  further pytest arguments, split on spaces (the model: --gym-model-url=... --gym-model=...,
#                  its key in OPENAI_API_KEY or the variable --gym-api-key-env names; never a key here)
#   GYM_SHARD, GYM_SHARDS  run shard GYM_SHARD of GYM_SHARDS (--gym-shard; default GitLab's CI_NODE_INDEX and
#                  CI_NODE_TOTAL, else 1 of 1). A shard's own gates judge its share only: the merge job
#                  (merge.sh) judges the whole run, so here a shard's exit status 1 is reported, not returned.
# Writes into GYM_EVAL_OUT: junit, report (JSON), report (HTML page) and summary (Markdown), named
# <kind>-<shard>.<ext> for a shard and <kind>.<ext> otherwise. On GitHub Actions the session also appends the
# Markdown summary to the job's step summary ($GITHUB_STEP_SUMMARY).
set -euo pipefail
. "$(dirname "$0")/common.sh"
shard="${GYM_SHARD:-${CI_NODE_INDEX:-1}}"
shards="${GYM_SHARDS:-${CI_NODE_TOTAL:-1}}"
suffix=""
args=()
if [ "$shards" -gt 1 ]; then
    suffix="-$shard"
    args+=("--gym-shard=$shard/$shards")
fi
mkdir -p "$out"
checkout="$("$python" -m pytest_gym_eval provision "${provision_args[@]}")"  # instant once provision.sh ran
read -ra extra <<<"${GYM_EVAL_ARGS:-}"
cd "${GYM_EVAL_DIR:-.}"
start=$SECONDS
status=0
"$python" -m pytest "--gym-checkout=$checkout" "${args[@]}" "${extra[@]}" \
    "--junitxml=$out/junit$suffix.xml" "--gym-report=$out/report$suffix.json" \
    "--gym-html=$out/report$suffix.html" "--gym-markdown=$out/summary$suffix.md" || status=$?
echo "evaluate: shard $shard of $shards: pytest exit status $status ($(( SECONDS - start )) s)"
if [ "$status" -eq 1 ] && [ "$shards" -gt 1 ]; then
    echo "evaluate: this shard's share did not pass on its own; the merge job judges the gates on every shard"
    exit 0
fi
exit "$status"
