#!/usr/bin/env bash
# One device session's work, as one command on the GPU machine: for every UCX of a stage made by
# tests/executor/device_stage.sh (nothing is built here), the speed (device_perf.sh) and then
# the correctness run (device_run.sh), both bounded so that the whole fits in about 8 minutes:
# each perf run in FAST_PERF_RUN_LIMIT seconds (34 here; 4 runs per UCX), each UCX's correctness
# cases in FAST_RUN_BUDGET seconds (80 here). At most about 8.2 minutes with two UCX versions
# when every bound is reached; far less when the cases pass.
#   device_session.sh STAGE_DIR OUT_DIR
# OUT_DIR receives four files: session.log (this output: the machine, each script's lines and
# the perf table), perf.csv, perf.log and run.log. Ends with "device session: ..." and exits
# non-zero if either script failed.
set -uo pipefail
usage="usage: device_session.sh STAGE_DIR OUT_DIR"
[[ ${1:-} == -h || ${1:-} == --help ]] && { sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0; }
[[ $# -eq 2 && -d $1 ]] || { echo "$usage" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
stage=$(cd "$1" && pwd)
mkdir -p "$2" || { echo "device_session.sh: cannot make $2" >&2; exit 2; }
out=$(cd "$2" && pwd)
export FAST_PERF_RUN_LIMIT=${FAST_PERF_RUN_LIMIT:-34} FAST_RUN_BUDGET=${FAST_RUN_BUDGET:-80}
start=$SECONDS
{
  echo "device session: $(date -u '+%Y-%m-%d %H:%M:%S UTC') on $(hostname), $(nproc) cores"
  timeout 30 nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader 2>&1
  echo "stage: $(du -sh "$stage" | cut -f1) in $stage: $(cd "$stage" && echo ucx-*/)"
  echo "bounds: FAST_PERF_RUN_LIMIT=$FAST_PERF_RUN_LIMIT s per perf run, FAST_RUN_BUDGET=$FAST_RUN_BUDGET s per UCX for the cases"
  perf_rc=0
  "$here/device_perf.sh" "$stage" "$out/perf.csv" "$out/perf.log" || perf_rc=$?
  run_rc=0
  "$here/device_run.sh" "$stage" "$out/run.log" || run_rc=$?
  echo "device session: device_perf.sh exit $perf_rc, device_run.sh exit $run_rc, $((SECONDS - start)) s"
  ((perf_rc == 0 && run_rc == 0))
} 2>&1 | tee "$out/session.log"
