#!/usr/bin/env bash
# Execution traces end to end: alltoallv-mpi on 4 ranks (2 servers) with FAST_TRACE set writes
# both files per rank; `fast-plan trace` reads them back, sets every call against the cost
# model, draws the measured and predicted timelines and merges the Chrome files.
#   trace_test.sh MPIRUN_SH ALLTOALLV_MPI FAST_PLAN
set -euo pipefail
mpirun_sh=$1
example=$2
fast_plan=$3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
export FAST_TRACE=$dir/t
"$mpirun_sh" --tls sm --timeout 60 -np 4 -x FAST_TRACE "$example" 2
for r in 0 1 2 3; do
  for f in "$dir/t.c0.rank$r.json" "$dir/t.c0.rank$r.chrome.json"; do
    [[ -s $f ]] || { echo "trace_test: $f is missing or empty" >&2; exit 1; }
  done
  grep -q '"format": "fast-trace/1"' "$dir/t.c0.rank$r.json"
  grep -q '"traceEvents"' "$dir/t.c0.rank$r.chrome.json"
done
out=$("$fast_plan" trace "$dir/t.c0" --svg "$dir/t.svg" --chrome "$dir/all.json")
echo "$out"
grep -qE '^ +0 alltoallv +(fast|direct) ' <<< "$out"
grep -q 'measured / predicted over 1 calls' <<< "$out"
[[ $(grep -c '<g class="panel"' "$dir/t.svg") -eq 2 ]]
grep -q 'measured (trace)' "$dir/t.svg"
grep -q '"pid":3' "$dir/all.json"
# A NIC marked down (FAST_FABRIC): the traces carry the ranks' rates, so the plan fast-plan trace
# sets against the executor's is the one the executor ran (it checks the step counts).
printf '%s\n' '{"format": "fast-fabric/1", "servers": 2, "gpus_per_server": 2, "scale_up_gbps": 450, "alpha_up_us": 3,
  "alpha_out_us": 10, "nics": {"gpus_per_nic": 1, "gbps": 50, "rates": [{"server": 0, "nic": 1, "gbps": 0}]}}' >"$dir/down.json"
FAST_FABRIC=$dir/down.json FAST_TRACE=$dir/u "$mpirun_sh" --tls sm --timeout 60 -np 4 -x FAST_TRACE -x FAST_FABRIC "$example" 2
grep -q '"nic_gbps": \[50, 0, 50, 50\]' "$dir/u.c0.rank0.json"
"$fast_plan" trace "$dir/u.c0" | grep -q 'measured / predicted over 1 calls'
# A prefix without files is named.
if "$fast_plan" trace "$dir/nothing" 2> "$dir/err"; then echo "trace_test: a missing trace was accepted" >&2; exit 1; fi
grep -q 'no trace files' "$dir/err"
echo "trace_test: OK"
