#!/usr/bin/env bash
# The executor's speed on a CUDA GPU, from a stage made by tests/executor/device_stage.sh
# (nothing is built here): alltoallv_device_perf with 8 ranks as 2 servers x 4 on one device,
# uniform blocks of 256 KiB and 4 MiB, fast and direct, rendezvous and credits, the ranks as
# processes (UCX may use CUDA IPC) and as threads, with the copy peak (cudaMemcpyAsync device to
# device of the same bytes) and the plain UCX two-process peak, and the protocol UCX chose per
# size; for every UCX the stage holds (STAGE_DIR/ucx-*/, or STAGE_DIR itself when it is one such
# folder), after checking that the UCX that runs is the stage's. Everything goes to one CSV
# (its label column names the UCX version); the log keeps each run's table and UCX's
# protocol tables (UCX_PROTO_INFO=y). One run per block size and flow control (both schedulers,
# both modes and the peaks in each), so a slow flow cannot cost the other's rows; each run is
# bounded (FAST_PERF_RUN_LIMIT seconds, 40 by default): 4 runs per UCX, under 3 minutes per UCX.
# Ends with "device perf: N passed, N failed".
#   device_perf.sh STAGE_DIR CSV [LOG]
# Environment: FAST_PERF_BLOCKS ("256K 4M"), FAST_PERF_FLOWS ("rendezvous credits"),
# FAST_PERF_WARMUP (2), FAST_PERF_ITERS (10), FAST_PERF_RUN_LIMIT (40), FAST_PERF_TLS
# (sm,self,cuda_copy,cuda_ipc), FAST_PERF_MEMORY (cuda; host checks this script on a machine
# without a GPU).
set -uo pipefail
usage="usage: device_perf.sh STAGE_DIR CSV [LOG]"
[[ ${1:-} == -h || ${1:-} == --help ]] && { sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0; }
[[ $# -ge 2 && -d $1 ]] || { echo "$usage" >&2; exit 2; }
found=0
for f in "$1"/bin/alltoallv_device_perf "$1"/ucx-*/bin/alltoallv_device_perf; do [[ -x $f ]] && found=1; done
((found)) ||
  { echo "device_perf.sh: $1 holds no bin/alltoallv_device_perf, nor ucx-*/bin/alltoallv_device_perf (make it with device_stage.sh)" >&2; exit 2; }
stage=$(cd "$1" && pwd)
csv=$2
log=${3:-/dev/null}
blocks=${FAST_PERF_BLOCKS:-256K 4M}
flows=${FAST_PERF_FLOWS:-rendezvous credits}
warmup=${FAST_PERF_WARMUP:-2}
iters=${FAST_PERF_ITERS:-10}
run_limit=${FAST_PERF_RUN_LIMIT:-40}
tls=${FAST_PERF_TLS:-sm,self,cuda_copy,cuda_ipc}
memory=${FAST_PERF_MEMORY:-cuda}
# Each mode and the peaks share a run's bound; a stuck mode gives up at its own --limit first.
mode_limit=$(((run_limit - 4) / 3))
source "$(dirname "$0")/device_common.sh"
rm -f "$csv"
passed=0
failed=0

timeout 30 nvidia-smi -L 2>&1 | tee -a "$log"
for ucx in "$stage" "$stage"/ucx-*/; do
  [[ -x $ucx/bin/alltoallv_device_perf ]] || continue
  ucx=${ucx%/}
  # The stage's programs find its libraries by RUNPATH; LD_LIBRARY_PATH (below) names them too.
  outside=$(LD_LIBRARY_PATH="$ucx/lib" loads_outside "$ucx" "$ucx/bin/alltoallv_device_perf")
  if [[ -n $outside ]]; then
    failed=$((failed + 1))
    echo "== $(basename "$ucx"): FAILED: alltoallv_device_perf loads $(tr '\n' ' ' <<<"$outside")instead of $ucx/lib's; not measured" | tee -a "$log"
    continue
  fi
  echo "== $(basename "$ucx"): UCX $(LD_LIBRARY_PATH="$ucx/lib" ucx_version "$ucx") from $ucx/lib" | tee -a "$log"
  for block in $blocks; do
    for flow in $flows; do
      echo "== $(basename "$ucx"): blocks of $block, $flow (UCX_TLS=$tls)" | tee -a "$log"
      start=$SECONDS
      rc=0
      LD_LIBRARY_PATH="$ucx/lib" UCX_TLS=$tls UCX_NET_DEVICES=lo UCX_PROTO_INFO=y timeout -k 5 "$run_limit" \
        "$ucx/bin/alltoallv_device_perf" --memory "$memory" --ranks 8 -g 4 -W uniform -b "$block" --flows "$flow" \
        -w "$warmup" -n "$iters" --modes processes,threads --peaks --timeout 10 --limit "$mode_limit" --csv "$csv" \
        >>"$log" 2>&1 || rc=$?
      if ((rc == 0)); then
        passed=$((passed + 1))
        echo "   ok in $((SECONDS - start)) s" | tee -a "$log"
      else
        failed=$((failed + 1))
        echo "   FAILED (exit $rc) in $((SECONDS - start)) s; the rows it measured are in the CSV" | tee -a "$log"
      fi
    done
  done
done

# The rows, short. Fields are counted from the end (the label and the device name hold commas),
# once the protocol, the last field, is taken off.
[[ -f $csv ]] && awk 'NR > 1 {
    ucx = match($0, /UCX [0-9.]+/) ? substr($0, RSTART, RLENGTH) : "?"
    line = $0; protocol = ""
    if (match(line, /,"[^"]*"$/)) { protocol = substr(line, RSTART + 2, RLENGTH - 3); line = substr(line, 1, RSTART) }
    n = split(line, f, ",")
    if (f[1] == "protocol") printf "%-10s protocol for %s-byte messages: %s\n", ucx, f[n - 16], protocol
    else printf "%-10s %-9s %-9s %8s %-6s %-10s %9.3f GB/s  of_copy %-7s of_ucx %s\n", ucx, f[1], f[n - 18], f[n - 16], f[n - 13],
      f[n - 12], f[n - 6], f[n - 5], f[n - 4] }' "$csv" | tee -a "$log"
echo "device perf: $passed passed, $failed failed" | tee -a "$log"
((failed == 0))
