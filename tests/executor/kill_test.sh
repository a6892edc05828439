#!/usr/bin/env bash
# A rank dies mid-call: every survivor must report an error within the timeout and fail the next
# call at once. mpirun runs with --enable-recovery (else Open MPI 4.1 kills the whole job as soon
# as one rank exits without MPI_Finalize, and the survivors could report nothing), so its exit
# status says nothing; the ranks write their verdicts to files, checked here. The test fails if
# any survivor's call succeeded, took too long or hung (the hard timeout), or wrote no verdict.
#   kill_test.sh MPIRUN_SH PROGRAM TLS MODE RANKS [FLOW]
set -uo pipefail
mpirun_sh=$1 program=$2 tls=$3 mode=$4 ranks=$5 flow=${6:-rendezvous}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$mpirun_sh" --recovery --tls "$tls" --timeout 90 -np "$ranks" "$program" kill --out "$out" --mode "$mode" --victim 1 --flow "$flow"
status=0
[[ -f "$out/victim" ]] || { echo "the victim never reached the call"; status=1; }
for ((r = 0; r < ranks; ++r)); do
  ((r == 1)) && continue
  if [[ ! -f "$out/rank-$r" ]]; then
    echo "rank $r: no verdict (killed or hung)"
    status=1
  else
    echo "rank $r: $(cat "$out/rank-$r")"
    grep -q '^pass ' "$out/rank-$r" || status=1
  fi
done
exit "$status"
