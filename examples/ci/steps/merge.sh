#!/usr/bin/env bash
# Merge the shards' reports (GYM_EVAL_OUT/report-*.json, as evaluate.sh writes them) into one run: report.json,
# junit.xml, report.html and summary.md in GYM_EVAL_OUT. The merged run's gates decide the exit status; on
# GitHub Actions the Markdown summary goes to the job's step summary too. The merge needs no Gym.
set -euo pipefail
. "$(dirname "$0")/common.sh"
shopt -s nullglob
reports=("$out"/report-*.json)
if [ "${#reports[@]}" -eq 0 ]; then
    echo "merge: no shard reports (report-*.json) in $out" >&2
    exit 2
fi
"$python" -m pytest_gym_eval merge "${reports[@]}" \
    "--junitxml=$out/junit.xml" "--gym-report=$out/report.json" \
    "--gym-html=$out/report.html" "--gym-markdown=$out/summary.md"
