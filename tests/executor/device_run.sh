#!/usr/bin/env bash
# Runs the executor on a CUDA GPU: exec_cuda_test (ranks as threads or processes on one device,
# every byte checked) over several UCX transport mixes and sizes, and once under
# compute-sanitizer when the machine has it, for each UCX of a stage made by
# tests/executor/device_stage.sh (the test, libfast_executor, a CUDA-aware UCX and the CUDA
# runtime per UCX; nothing is built here). The GPU machine needs its driver, and the CUDA
# toolkit only for the sanitizer. Prints one line per case, checks first that the UCX that runs
# is the stage's, and ends with "device run: N passed, N failed, N skipped".
#   device_run.sh STAGE_DIR [LOG [PATTERN]]
# STAGE_DIR: the stage (each STAGE_DIR/ucx-*/ in turn) or one UCX's folder of it (with
#   bin/exec_cuda_test). PATTERN: run only the cases whose names match this extended regular
#   expression.
# FAST_RUN_BUDGET: seconds per UCX (unset: each case has its own bound). A case starts only with
#   20 s of the budget left, its bound cut to what is left (it then fails if it needs more, and
#   says so); the cases that cannot start are counted as skipped.
set -uo pipefail
usage="usage: device_run.sh STAGE_DIR [LOG [PATTERN]]"
[[ ${1:-} == -h || ${1:-} == --help ]] && { sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0; }
[[ $# -ge 1 && -d $1 ]] || { echo "$usage" >&2; exit 2; }
stage=$(cd "$1" && pwd)
log=${2:-/dev/null}
pattern=${3:-}
budget=${FAST_RUN_BUDGET:-}
[[ -z $budget || $budget =~ ^[0-9]+$ ]] || { echo "device_run.sh: FAST_RUN_BUDGET=$budget is not a number of seconds" >&2; exit 2; }
if [[ -x $stage/bin/exec_cuda_test ]]; then
  ucx_dirs=("$stage")
else
  ucx_dirs=()
  for dir in "$stage"/ucx-*/; do [[ -x $dir/bin/exec_cuda_test ]] && ucx_dirs+=("${dir%/}"); done
  ((${#ucx_dirs[@]})) || { echo "device_run.sh: $stage holds no bin/exec_cuda_test, nor ucx-*/bin/exec_cuda_test (make it with device_stage.sh)" >&2; exit 2; }
fi
source "$(dirname "$0")/device_common.sh"
export UCX_NET_DEVICES=lo
passed=0
failed=0
skipped=0

timeout 30 nvidia-smi -L 2>&1 | tee -a "$log"

verdict() { # verdict OK MESSAGE
  if (($1)); then passed=$((passed + 1)); else failed=$((failed + 1)); fi
  echo "   $2" | tee -a "$log"
}

# bound SECONDS: prints the seconds a case may take, SECONDS cut to the budget left, or nothing
# (the case is skipped) when less than 20 s are left.
bound() {
  local left
  if [[ -z $budget ]]; then echo "$1"; return; fi
  left=$((budget - (SECONDS - ucx_start)))
  ((left >= 20)) || return 0
  echo $((left < $1 ? left : $1))
}

# case_run NAME SECONDS TLS ARGS...
case_run() {
  local name=$1 seconds=$2 tls=$3 allowed cut=""
  shift 3
  [[ -z $pattern || $name =~ $pattern ]] || return 0
  echo "== $ucx_name: $name (UCX_TLS=$tls)" | tee -a "$log"
  allowed=$(bound "$seconds")
  if [[ -z $allowed ]]; then
    skipped=$((skipped + 1))
    echo "   skipped: the time budget of $budget s is spent" | tee -a "$log"
    return 0
  fi
  # Cut: the test's own --limit (the last one counts) comes 10 s before the timeout.
  ((allowed == seconds)) || set -- "$@" --limit $((allowed - 10))
  local start=$SECONDS rc=0
  UCX_TLS=$tls timeout -k 10 "$allowed" "$@" >>"$log" 2>&1 || rc=$?
  # A case that ran out of a bound the budget had cut may have needed only its own.
  ((allowed == seconds || SECONDS - start < allowed - 10)) || cut=" (its bound cut to the budget's $allowed s of $seconds s)"
  if ((rc == 0)); then
    verdict 1 "ok in $((SECONDS - start)) s"
  else
    verdict 0 "FAILED (exit $rc) in $((SECONDS - start)) s$cut"
  fi
}

# compute-sanitizer (memcheck, leak check). UCX's CUDA transport probes pointers with
# cuPointerGetAttribute and handles the errors it gets, so a reported error or leak counts only
# where the first host frame outside the CUDA runtime and driver is not UCX's; a report without
# a host frame counts.
sanitizer_case() {
  local name="compute-sanitizer memcheck and leak check, 4 ranks as 2 x 2"
  [[ -z $pattern || $name =~ $pattern ]] || return 0
  echo "== $ucx_name: $name (UCX_TLS=sm,self,cuda_copy)" | tee -a "$log"
  if ! command -v compute-sanitizer >/dev/null; then
    skipped=$((skipped + 1))
    echo "   skipped: no compute-sanitizer on PATH" | tee -a "$log"
    return 0
  fi
  local sanitizer_log rc=0 ucx_errors ours allowed
  allowed=$(bound 120)
  if [[ -z $allowed ]]; then
    skipped=$((skipped + 1))
    echo "   skipped: the time budget of $budget s is spent" | tee -a "$log"
    return 0
  fi
  sanitizer_log=$(mktemp)
  UCX_TLS=sm,self,cuda_copy timeout -k 10 "$allowed" compute-sanitizer --tool memcheck --leak-check full --error-exitcode 0 \
    "$test_bin" --require --ranks 4 --gpus-per-server 2 --mean 65536 --seeds 1 >"$sanitizer_log" 2>&1 || rc=$?
  cat "$sanitizer_log" >>"$log"
  ucx_errors=$(grep -c "Program hit" "$sanitizer_log" || true)
  ours=$(awk '
    /Program hit|Leaked [0-9]+ bytes|Invalid/ { if (pending) print hit; hit = $0; pending = 1; next }
    pending && /Host Frame/ && !/libcudart|libcuda\.so/ { if (!/libuc[pstm]|libuct_cuda|libucm_cuda/) print hit; pending = 0 }
    END { if (pending) print hit }' "$sanitizer_log")
  if ((rc == 0)) && [[ -z $ours ]] && grep -q "all bytes checked" "$sanitizer_log"; then
    verdict 1 "ok: no error or leak from this project's code ($ucx_errors API errors inside UCX)"
  else
    verdict 0 "FAILED (exit $rc)${ours:+: $ours}"
  fi
  rm -f "$sanitizer_log"
}

# run_ucx DIR: every case with the UCX of one folder of the stage, after checking that this UCX
# (not a system one) is what runs.
run_ucx() {
  local dir=$1 outside p0=$passed f0=$failed s0=$skipped
  ucx_name=$(basename "$dir")
  ucx_start=$SECONDS
  test_bin="$dir/bin/exec_cuda_test"
  # The stage's programs find its libraries by RUNPATH; LD_LIBRARY_PATH, which would win over
  # it, names them first too.
  export LD_LIBRARY_PATH="$dir/lib${outer_library_path:+:$outer_library_path}"
  echo "== $ucx_name: the UCX that runs is the stage's" | tee -a "$log"
  outside=$(loads_outside "$dir" "$test_bin")
  if [[ -z $outside ]]; then
    verdict 1 "ok: UCX $(ucx_version "$dir") from $dir/lib"
  else
    verdict 0 "FAILED: exec_cuda_test loads $(tr '\n' ' ' <<<"$outside")instead of $dir/lib's; its cases are not run"
    return 0
  fi
  "$dir/bin/ucx_info" -d 2>&1 | grep -E "Transport: (cuda|sm|posix|tcp)|Memory domain: cuda" | sort -u | tee -a "$log"
  # The test's own bound (--limit; 100 s by default) comes before the timeout, so a stuck case
  # still names its busy ranks and what the others reported.
  case_run "8 ranks as 2 x 4, shared memory" 80 sm,self,cuda_copy "$test_bin" --require --limit 70
  case_run "8 ranks as 2 x 4, TCP" 80 tcp,self,cuda_copy "$test_bin" --require --limit 70
  case_run "8 ranks as 2 x 4, shared memory and CUDA IPC" 80 sm,self,cuda_copy,cuda_ipc "$test_bin" --require --limit 70
  case_run "8 ranks as 2 x 4 processes, shared memory and CUDA IPC" 130 sm,self,cuda_copy,cuda_ipc "$test_bin" --require --processes
  case_run "8 ranks as 2 x 4 processes, TCP" 130 tcp,self,cuda_copy "$test_bin" --require --processes
  case_run "32 ranks as 4 x 8" 80 sm,self,cuda_copy "$test_bin" --require --ranks 32 --gpus-per-server 8 --mean 32768 --seeds 2 --limit 70
  sanitizer_case
  # 4 MiB blocks as processes, where UCX can use CUDA IPC, then as threads over
  # sm,self,cuda_copy (staged through host fragments), where UCX 1.13.1's original protocols
  # stalled a transfer in 7 of 10 runs (docs/executor.md): last, as a stall takes its whole
  # bound.
  case_run "8 ranks as 2 x 4 processes, 4 MiB blocks, shared memory and CUDA IPC" 240 sm,self,cuda_copy,cuda_ipc "$test_bin" --require --processes --mean 4194304 --seeds 2 --limit 220
  case_run "8 ranks as 2 x 4, 4 MiB blocks" 130 sm,self,cuda_copy "$test_bin" --require --mean 4194304 --seeds 2 --limit 110
  echo "device run, $ucx_name: $((passed - p0)) passed, $((failed - f0)) failed, $((skipped - s0)) skipped in $((SECONDS - ucx_start)) s" | tee -a "$log"
}

outer_library_path=${LD_LIBRARY_PATH:-}
for dir in "${ucx_dirs[@]}"; do run_ucx "$dir"; done
echo "device run: $passed passed, $failed failed, $skipped skipped" | tee -a "$log"
((failed == 0))
