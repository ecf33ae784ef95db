#!/usr/bin/env bash
# Merge the shards' reports (GYM_EVAL_OUT/report-*.json, as evaluate.sh writes them) into one run: report.json,
# junit.xml, report.html and summary.md in GYM_EVAL_OUT. The merged run's gates decide the exit status; on
# GitHub Actions the Markdown summary goes to the job's step summary too, and the gates that did not pass and the
# errored rollouts are annotated (the shards leave that to the merge). The merge needs no Gym.
#   GYM_EVAL_HISTORY  the run history the merged run is appended to (--gym-history, written once per run however
#                     many shards): a SQLite file (relative to the working folder) or a postgresql:// URL without
#                     its password (give that in PGPASSWORD); unset: no history
set -euo pipefail
. "$(dirname "$0")/common.sh"
shopt -s nullglob
reports=("$out"/report-*.json)
if [ "${#reports[@]}" -eq 0 ]; then
    echo "merge: no shard reports (report-*.json) in $out" >&2
    exit 2
fi
history=()
case "${GYM_EVAL_HISTORY:-}" in
    "") ;;
    *://*) history=("--gym-history=$GYM_EVAL_HISTORY") ;;
    *) history=("--gym-history=$(absolute "$GYM_EVAL_HISTORY")") ;;
esac
"$python" -m pytest_gym_eval merge "${reports[@]}" "${history[@]}" \
    "--junitxml=$out/junit.xml" "--gym-report=$out/report.json" \
    "--gym-html=$out/report.html" "--gym-markdown=$out/summary.md"
