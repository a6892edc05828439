#!/usr/bin/env bash
# Runs a libFuzzer target for a bounded time on a copy of its seed corpus (new inputs go to a
# scratch directory, never into the repository); fails on any crash, sanitizer report, timeout
# or verifier violation (the targets trap on those). Usage: run_fuzzer.sh BINARY SEEDS SECONDS
set -euo pipefail
binary=$1
seeds=$2
seconds=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/corpus" "$work/artifacts"
"$binary" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=2048 -print_final_stats=1 \
  -artifact_prefix="$work/artifacts/" "$work/corpus" "$seeds" 2>"$work/log" || {
  status=$?
  tail -n 40 "$work/log"
  for a in "$work"/artifacts/*; do [[ -f "$a" ]] && { echo "crashing input ($a), base64:"; base64 "$a" | head -c 4000; echo; }; done
  exit "$status"
}
execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$work/log" | grep -o '[0-9]*$' || echo "?")
echo "$(basename "$binary"): $execs executions in ${seconds}s, corpus $(ls "$work/corpus" | wc -l) new + $(ls "$seeds" | wc -l) seed inputs, no failures"
