#!/usr/bin/env bash
# The count agreement's time per call, gather against servers (FAST_AGREEMENT), on this host:
# alltoallv_perf runs small uniform calls (the plan is reused, so a call is mostly its
# agreement) with execution traces on (FAST_TRACE), and `fast-plan trace` reads each call's
# agreement phase (the slowest rank's, from its call's start to the counts agreed). The kinds
# alternate, ROUNDS runs each, so that noise on a shared machine hits them alike; the warm-up
# calls are left out. Prints the median per kind.
#   benchmarks/agreement_timing.sh BUILD_DIR TLS RANKS GPUS_PER_SERVER [CALLS] [ROUNDS]
#   benchmarks/agreement_timing.sh build sm 32 8
#   benchmarks/agreement_timing.sh build tcp 8 2
set -euo pipefail
if [[ $# -lt 4 ]]; then
  sed -n '2,10p' "$0" >&2
  exit 2
fi
build=$1 tls=$2 ranks=$3 gpus=$4 calls=${5:-50} rounds=${6:-2}
here=$(cd "$(dirname "$0")" && pwd)
warmup=5
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for ((k = 0; k < rounds; ++k)); do
  for kind in gather servers; do
    FAST_AGREEMENT=$kind FAST_TRACE="$out/$kind$k" "$here/../tests/executor/mpirun.sh" --tls "$tls" --timeout 300 \
      -np "$ranks" -x FAST_AGREEMENT -x FAST_TRACE "$build/benchmarks/alltoallv_perf" -g "$gpus" -W uniform -b 1K \
      -s fast -w "$warmup" -n "$calls" > "$out/$kind$k.log" 2>&1 || { cat "$out/$kind$k.log" >&2; exit 1; }
    # One communicator per run: PREFIX.c0.rank<R>.json.
    "$build/examples/fast-plan" trace "$out/$kind$k.c0" |
      awk -v w="$warmup" '$1 ~ /^[0-9]+$/ && $2 == "alltoallv" && $1 >= w { print $5 }' >> "$out/$kind.us"
  done
done
echo "count agreement per call, $ranks ranks = $((ranks / gpus)) servers x $gpus over UCX $tls (median of the slowest rank's agreement phase)"
for kind in gather servers; do
  sort -n "$out/$kind.us" | awk -v kind="$kind" '{ v[NR] = $1 } END {
    if (NR == 0) { print kind ": no calls traced"; exit 1 }
    printf "%-8s median %6.0f us over %d calls (min %.0f, max %.0f)\n", kind, v[int((NR + 1) / 2)], NR, v[1], v[NR] }'
done
