#!/usr/bin/env bash
# The executor on an emulated cluster (benchmarks/emulated_cluster.sh: 2 servers x 2 GPUs at 100
# Mbit/s) with a NIC that is really down: down from the start (FAST plans around it, every byte
# right), and failing in the middle of the run (the call fails within the timeout, the next calls
# with the NIC marked down complete, every byte right). Skipped (77) without root or network
# namespaces.
#   emulated_nic_down.sh EMULATED_CLUSTER_SH ALLTOALLV_PERF
set -euo pipefail
emulate=$1
perf=$2
[[ $(id -u) -eq 0 ]] || { echo "not root: skipped"; exit 77; }
probe=fe-probe-$$
ip netns add "$probe" 2>/dev/null || { echo "no network namespaces: skipped"; exit 77; }
ip netns delete "$probe"
common=(-s 2 -g 2 -r 100 --mpi-over-management --timeout 90 --perf "$perf")
out=$(bash "$emulate" "${common[@]}" --nic-down 1 --tell -- -W zipf:0.8 -b 1M -w 0 -n 2 -s fast --timeout 10 2>&1)
echo "$out"
grep -q "Out of bounds values : 0 OK" <<<"$out"
out=$(bash "$emulate" "${common[@]}" --nic-down-at 1=2 -- -W uniform -b 2M -w 0 -n 30 -s fast --timeout 3 \
  --mark-down-on-failure 1 2>&1)
echo "$out"
grep -q "fast: the call failed on .* ranks" <<<"$out"
grep -q "rank 1's NIC marked down" <<<"$out"
grep -q "Out of bounds values : 0 OK" <<<"$out"
