#!/usr/bin/env bash
# Runs an MPI program for the executor's tests: as root, oversubscribed, loopback only, yielding
# when idle, under a hard timeout.
#   mpirun.sh [--recovery] [--tls sm|tcp] [--timeout SECONDS] -np N program [args...]
# --recovery: mpirun keeps the job alive when a rank exits without MPI_Finalize (Open MPI's
# --enable-recovery), so survivors can report; mpirun's exit status then says nothing about the
# ranks, and the caller must check what they wrote.
set -euo pipefail
recovery=()
tls=${UCX_TLS:-sm,self}
limit=120
while [[ $# -gt 0 ]]; do
  case "$1" in
    --recovery) recovery=(--enable-recovery); shift ;;
    --tls) tls="$2,self"; shift 2 ;;
    --timeout) limit="$2"; shift 2 ;;
    *) break ;;
  esac
done
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_mpi_yield_when_idle=1
export OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo
export UCX_NET_DEVICES=lo UCX_TLS="$tls"
# Open MPI's own traffic: shared memory and TCP over loopback (not its UCX layer, so that the
# executor's UCX settings above apply to the executor alone).
export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader,tcp
exec timeout -k 10 "$limit" mpirun "${recovery[@]}" "$@"
