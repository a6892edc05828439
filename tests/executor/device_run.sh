#!/usr/bin/env bash
# Runs the executor on a CUDA GPU: exec_cuda_test (ranks as threads or processes on one device,
# every byte checked) over several UCX transport mixes and sizes, and once under compute-sanitizer. Needs a
# stage made by tests/executor/device_stage.sh (the test, libfast_executor, a CUDA-aware UCX and
# the CUDA runtime); the GPU machine needs only its driver. Prints one line per case and ends
# with "device run: N passed, N failed".
#   device_run.sh STAGE_DIR [LOG]
set -uo pipefail
stage=$(cd "${1:?usage: device_run.sh STAGE_DIR [LOG]}" && pwd)
log=${2:-/dev/null}
export LD_LIBRARY_PATH="$stage/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export UCX_NET_DEVICES=lo
test_bin="$stage/bin/exec_cuda_test"
passed=0
failed=0

nvidia-smi -L 2>&1 | tee -a "$log"
"$stage/bin/ucx_info" -v 2>&1 | head -2 | tee -a "$log"
"$stage/bin/ucx_info" -d 2>&1 | grep -E "Transport: (cuda|sm|posix|tcp)|Memory domain: cuda" | sort -u | tee -a "$log"

# case NAME SECONDS TLS ARGS...
case_run() {
  local name=$1 seconds=$2 tls=$3
  shift 3
  echo "== $name (UCX_TLS=$tls)" | tee -a "$log"
  local start=$SECONDS rc=0
  UCX_TLS=$tls timeout "$seconds" "$@" >>"$log" 2>&1 || rc=$?
  if ((rc == 0)); then
    passed=$((passed + 1))
    echo "   ok in $((SECONDS - start)) s" | tee -a "$log"
  else
    failed=$((failed + 1))
    echo "   FAILED (exit $rc) in $((SECONDS - start)) s" | tee -a "$log"
  fi
}

case_run "8 ranks as 2 x 4, shared memory" 80 sm,self,cuda_copy "$test_bin" --require
case_run "8 ranks as 2 x 4, TCP" 80 tcp,self,cuda_copy "$test_bin" --require
case_run "8 ranks as 2 x 4, shared memory and CUDA IPC" 80 sm,self,cuda_copy,cuda_ipc "$test_bin" --require
case_run "8 ranks as 2 x 4 processes, shared memory and CUDA IPC" 120 sm,self,cuda_copy,cuda_ipc "$test_bin" --require --processes
case_run "8 ranks as 2 x 4 processes, TCP" 120 tcp,self,cuda_copy "$test_bin" --require --processes
case_run "8 ranks as 2 x 4, 4 MiB blocks" 80 sm,self,cuda_copy "$test_bin" --require --mean 4194304 --seeds 2
case_run "32 ranks as 4 x 8" 80 sm,self,cuda_copy "$test_bin" --require --ranks 32 --gpus-per-server 8 --mean 32768 --seeds 2
# compute-sanitizer (memcheck, leak check). UCX's CUDA transport probes pointers with
# cuPointerGetAttribute and handles the errors it gets, so a reported error or leak counts only
# where the first host frame outside the CUDA runtime is not UCX's.
if command -v compute-sanitizer >/dev/null; then
  name="compute-sanitizer memcheck and leak check, 4 ranks as 2 x 2"
  echo "== $name (UCX_TLS=sm,self,cuda_copy)" | tee -a "$log"
  sanitizer_log=$(mktemp)
  rc=0
  UCX_TLS=sm,self,cuda_copy timeout 120 compute-sanitizer --tool memcheck --leak-check full --error-exitcode 0 \
    "$test_bin" --require --ranks 4 --gpus-per-server 2 --mean 65536 --seeds 1 >"$sanitizer_log" 2>&1 || rc=$?
  cat "$sanitizer_log" >>"$log"
  ucx_errors=$(grep -c "Program hit" "$sanitizer_log" || true)
  ours=$(awk '/Program hit|Leaked [0-9]+ bytes|Invalid/ { hit = $0; pending = 1; next }
              pending && /Host Frame/ && !/libcudart/ { if (!/libuc[pstm]|libuct_cuda|libucm_cuda/) print hit; pending = 0 }' \
           "$sanitizer_log")
  if ((rc == 0)) && [[ -z $ours ]] && grep -q "all bytes checked" "$sanitizer_log"; then
    passed=$((passed + 1))
    echo "   ok: no error or leak from this project's code ($ucx_errors API errors inside UCX)" | tee -a "$log"
  else
    failed=$((failed + 1))
    echo "   FAILED (exit $rc)${ours:+: $ours}" | tee -a "$log"
  fi
  rm -f "$sanitizer_log"
fi
echo "device run: $passed passed, $failed failed" | tee -a "$log"
((failed == 0))
