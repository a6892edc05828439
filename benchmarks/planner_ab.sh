#!/usr/bin/env bash
# Planning time of two revisions of include/fast, compiled into one program and run alternately
# (benchmarks/planner_ab.cpp): the in-process ratio docs/performance.md reports.
#   benchmarks/planner_ab.sh [-a REV] [-b REV] WORKLOAD REPS ROUNDS [WORKLOAD REPS ROUNDS ...]
# A defaults to HEAD~1, B to the working tree. WORKLOAD: zS, mS, vS or megatron=PATH (see the
# .cpp), each with its calls per timing and rounds. Needs g++ and Eigen (scripts/dev installs them).
set -euo pipefail
usage() { sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//'; }
a=HEAD~1
b=
while getopts "a:b:h" opt; do
  case $opt in
    a) a=$OPTARG ;;
    b) b=$OPTARG ;;
    h) usage; exit 0 ;;
    *) usage >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
if [[ $# -eq 0 || $(($# % 3)) -ne 0 ]]; then usage >&2; exit 2; fi
# The arguments are checked before the (slow) build, as planner_ab.cpp checks them.
args=("$@")
for ((k = 0; k < $#; k += 3)); do
  [[ ${args[k]} =~ ^([zmv][1-9][0-9]*|megatron=.+)$ ]] ||
    { echo "planner_ab.sh: unknown workload '${args[k]}' (expected zS, mS, vS or megatron=PATH)" >&2; exit 2; }
  for n in "${args[k + 1]}" "${args[k + 2]}"; do
    [[ $n =~ ^[1-9][0-9]*$ ]] || { echo "planner_ab.sh: REPS and ROUNDS must be positive integers, got '$n'" >&2; exit 2; }
  done
done
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Copies include/fast of a revision (or the working tree) as namespace $2 under $work/$2.
copy() {
  mkdir -p "$work/$2"
  if [[ -n $1 ]]; then
    git -C "$root" archive "$1" include/fast | tar -x -C "$work/$2"
  else
    mkdir -p "$work/$2/include" && cp -r "$root/include/fast" "$work/$2/include/"
  fi
  mv "$work/$2/include/fast" "$work/$2/$2" && rmdir "$work/$2/include"
  # A first line naming the copy: GCC's #pragma once also matches files by content.
  find "$work/$2/$2" -name '*.hpp' -exec sed -i -e "s/namespace fast\b/namespace $2/g" -e "s/\bfast::/$2::/g" \
    -e "1i // $2" {} +
}
copy "$a" fast_a
copy "$b" fast_b
${CXX:-g++} -std=c++20 -O3 -DNDEBUG -I"$work/fast_a" -I"$work/fast_b" $(pkg-config --cflags eigen3) \
  "$root/benchmarks/planner_ab.cpp" -o "$work/planner_ab"
echo "A = ${a}, B = ${b:-the working tree}"
while [[ $# -gt 0 ]]; do
  "$work/planner_ab" "$1" "$2" "$3"
  shift 3
done
