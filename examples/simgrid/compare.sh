#!/usr/bin/env bash
# The SimGrid-versus-cost-model comparison of docs/simulators.md, end to end:
#   examples/simgrid/compare.sh [BUILD_DIR] [OUT_DIR]
# Runs fast-simgrid on every 60th real Megatron-LM matrix (workloads/megatron_moe_4x8.txt)
# under the fair configuration (fast-simgrid's defaults) and under SimGrid's own defaults, then
# on zipf:0.8 at 4, 8 and 16 servers x 8 GPUs. Writes one .txt (the table) and one .csv per run
# to OUT_DIR (default: simgrid-compare/). About 5 minutes on one core; 16 x 8 uses SimGrid's
# fair-bottleneck solver (same shares as max-min, to 4 digits where both were run, and 20x
# faster on the 16k concurrent flows of direct).
set -euo pipefail
case ${1:-} in
  -h|--help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  -*) echo "compare.sh: unknown option '$1' (usage: compare.sh [BUILD_DIR] [OUT_DIR]; see --help)" >&2; exit 2 ;;
esac
cd "$(dirname "$0")/../.."
build=${1:-build}
out=${2:-simgrid-compare}
sim="$build/examples/simgrid/fast-simgrid"
[[ -x "$sim" ]] || { echo "compare.sh: $sim not built (is libsimgrid-dev installed?)" >&2; exit 1; }
mkdir -p "$out"
run() {
  local name=$1
  shift
  echo "== $name: fast-simgrid $*" >&2
  "$sim" "$@" --csv "$out/$name.csv" | tee "$out/$name.txt"
}
megatron=workloads/megatron_moe_4x8.txt
run megatron-fair --workload "file:$megatron" --unit-bytes 8K --every 60
run megatron-simgrid-defaults --workload "file:$megatron" --unit-bytes 8K --every 60 \
  --cfg=network/model:LV08 --cfg=network/crosstraffic:1 --cfg=network/TCP-gamma:4194304
run megatron-lv08-factors --workload "file:$megatron" --unit-bytes 8K --every 60 --cfg=network/model:LV08
run megatron-lv08-window --workload "file:$megatron" --unit-bytes 8K --every 60 --cfg=network/model:LV08 \
  --cfg=network/TCP-gamma:4194304
run megatron-crosstraffic --workload "file:$megatron" --unit-bytes 8K --every 60 --cfg=network/crosstraffic:1
run zipf-4x8 --servers 4 --workload zipf:0.8
run zipf-8x8 --servers 8 --workload zipf:0.8
run zipf-16x8 --servers 16 --workload zipf:0.8 --cfg=network/solver:fairbottleneck
