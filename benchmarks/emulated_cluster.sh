#!/usr/bin/env bash
# Emulates a two-tier GPU cluster on one Linux machine and runs alltoallv_perf on it:
#   S servers of G GPUs; every NIC (one per GPU, or shared by --gpus-per-nic GPUs) is a
#   rate-limited veth on one bridge (the scale-out switch) in a "switch" namespace; a management
#   bridge for the launcher.
#   Every server has its own boot_id and host name (and Open MPI daemon), so UCX and Open MPI use
#   shared memory only inside a server and the emulated network between servers.
#
#   sudo benchmarks/emulated_cluster.sh [options] [-- alltoallv_perf arguments]
#   sudo benchmarks/emulated_cluster.sh [options] --program PATH [--compare LIB] [-- its arguments]
#
# Run with --help for the options. Needs root (network namespaces, tc, mounts). Creates only its
# own namespaces (named fe<PID>-*), addresses only inside them (198.18.0.0/16 data, 198.19.0.0/24
# management), and removes everything on exit, Ctrl-C or failure.
set -euo pipefail

usage() {
  cat <<'EOF'
usage: emulated_cluster.sh [options] [-- alltoallv_perf arguments]
       emulated_cluster.sh [options] --program PATH [--preload LIB | --compare LIB] [-- its arguments]

Emulates S servers x G GPUs on this machine and runs alltoallv_perf (-g G and --nic-gbit are
passed for you) with one MPI rank per GPU:
  - one network namespace per server (its Open MPI daemon, management link) and one per NIC
    holding that NIC's veth and the ranks of the GPUs it serves (one, or --gpus-per-nic), so
    every rank's traffic leaves through its own NIC (UCX does not bind source addresses, so
    ranks sharing a namespace could not be steered onto different NICs);
  - NICs shaped in both directions with tbf (the NIC's root qdisc: uplink; its bridge port's
    root qdisc: downlink, where incast queues build), one flat bridge as the scale-out switch;
    TCP without slow start after idle (net.ipv4.tcp_slow_start_after_idle=0, as on datacenter
    hosts);
  - per server its own boot_id (bind-mounted in a private mount namespace) and host name, and an
    Open MPI daemon (launched through a small rsh agent), so that UCX and Open MPI use shared
    memory inside a server only.
The executor runs UCX with UCX_TLS=sm,self,tcp; MPI_Alltoallv runs Open MPI's ob1 with
btl self,vader,tcp (shared memory inside a server, TCP over the rank's own NIC across servers).

options:
  -s, --servers S        servers (4)
  -g, --gpus G           GPUs (ranks, NICs) per server (8)
  -r, --rate MBIT        per-NIC rate in Mbit/s, both directions (100)
      --burst SIZE       tbf burst (256kb)
      --limit SIZE       every NIC's and switch port's queue (256kb: shallow, 105 ms at 20 Mbit/s,
                         21 ms at 100 Mbit/s; 16mb: the deep queue, 6.7 s at 20 Mbit/s)
      --nic-limit SIZE   the NICs' own (uplink) queues only, where they differ from --limit: a host
                         holds back its sockets instead of dropping (e.g. 16mb), a switch port drops
      --gpus-per-nic K   K consecutive GPUs of a server share each NIC (1); RANK below names the
                         NIC of that rank, and alltoallv_perf gets --gpus-per-nic K
      --nic-rate RANK=MBIT
                         that rank's NIC at MBIT instead of --rate, both directions (may repeat)
      --nic-down RANK    that rank's NIC is down from the start (may repeat)
      --nic-down-at RANK=SECONDS
                         that rank's NIC goes down SECONDS after the MPI run starts (may repeat)
      --tell             tell alltoallv_perf (its planner and model) of --nic-rate and --nic-down:
                         passes them on as its --nic-rate RANK=GBIT
      --mpi-over-management
                         Open MPI's own traffic (start-up, the executor's bootstrap, the harness's
                         barriers, MPI_Alltoallv) over the unshaped management links instead of the
                         NICs, as a front-end network would carry it: runs with a NIC down need it,
                         and MPI_Alltoallv's times then mean nothing
      --perf PATH        the alltoallv_perf binary (build/benchmarks/alltoallv_perf)
      --timeout SECONDS  hard limit of the whole MPI run (3600)
      --stats            after the run, print every NIC's and bridge port's tc byte counters
                         and every rank's TCP retransmissions and retransmission timeouts
      --program PATH     run this MPI program instead of alltoallv_perf (-g and --nic-gbit are
                         not added), e.g. build/benchmarks/mpi_alltoallv_bench
      --preload LIB      preload LIB into every rank (LD_PRELOAD), e.g. build/mpi/libfast_mpi.so
      --compare LIB      run the program twice on the same emulated cluster: without LIB, then
                         with LIB preloaded
      --env VAR=VALUE    set VAR in every rank's environment (may repeat). With --preload or
                         --compare, FAST_MPI_SCALE_OUT_GBPS is set from --rate unless given here
  -h, --help             this text
The default queue is shallow, as a datacenter switch's: a port there holds tens of
microseconds of line rate, a few dozen of its largest packets. Here the NICs are thousands of
times slower while the packets are as large (veth passes segments of up to 64 KiB, GSO), so
what is kept is depth in packets: 256 KiB holds 4 of those segments.
Without --tell, alltoallv_perf plans for --rate on every NIC: it is not told of --nic-rate or
--nic-down (nor of --nic-down-at, ever: a NIC that fails is not known in advance).
Everything after -- goes to alltoallv_perf (see its --help), or to --program, e.g.
  emulated_cluster.sh -- -W file:workloads/megatron_moe_4x8.txt -u 8K --every 60 -n 5
  emulated_cluster.sh --program build/benchmarks/mpi_alltoallv_bench \
    --compare build/mpi/libfast_mpi.so --env FAST_MPI_FLOW=credits -- --zipf 1.2 -n 3
EOF
}

servers=4
gpus=8
rate=100
gpus_per_nic=1
burst=256kb
limit=256kb
nic_limit=
declare -A nic_rate=() nic_down_at=()
here=$(cd "$(dirname "$0")/.." && pwd)
perf=$here/build/benchmarks/alltoallv_perf
run_timeout=3600
stats=0
tell=0
perf_args=()
program=
preload=
compare=0
rank_env=()
mpi_if='nic$n' # Open MPI's TCP path: the rank's NIC ($n: its index in the server, in the wrapper)
# Options with a value: "need "$@"" stops with one line naming the option when the value is missing.
need() { [[ -n ${2:-} ]] || { echo "emulated_cluster.sh: $1 needs a value (see --help)" >&2; exit 2; }; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    -s|--servers) need "$@"; servers=$2; shift 2 ;;
    -g|--gpus) need "$@"; gpus=$2; shift 2 ;;
    -r|--rate) need "$@"; rate=$2; shift 2 ;;
    --burst) need "$@"; burst=$2; shift 2 ;;
    --limit) need "$@"; limit=$2; shift 2 ;;
    --nic-limit) need "$@"; nic_limit=$2; shift 2 ;;
    --gpus-per-nic) need "$@"; gpus_per_nic=$2; shift 2 ;;
    --mpi-over-management) mpi_if=mgmt; shift ;;
    --nic-rate) need "$@"; [[ $2 =~ ^([0-9]+)=([0-9]+([.][0-9]+)?)$ ]] ||
      { echo "emulated_cluster.sh: --nic-rate needs RANK=MBIT, got '$2'" >&2; exit 2; }
      nic_rate[${BASH_REMATCH[1]}]=${BASH_REMATCH[2]}; shift 2 ;;
    --nic-down) need "$@"; [[ $2 =~ ^[0-9]+$ ]] ||
      { echo "emulated_cluster.sh: --nic-down needs a rank, got '$2'" >&2; exit 2; }
      nic_down_at[$2]=0; shift 2 ;;
    --nic-down-at) need "$@"; [[ $2 =~ ^([0-9]+)=([0-9]+([.][0-9]+)?)$ ]] ||
      { echo "emulated_cluster.sh: --nic-down-at needs RANK=SECONDS, got '$2'" >&2; exit 2; }
      nic_down_at[${BASH_REMATCH[1]}]=${BASH_REMATCH[2]}; shift 2 ;;
    --perf) need "$@"; perf=$2; shift 2 ;;
    --timeout) need "$@"; run_timeout=$2; shift 2 ;;
    --stats) stats=1; shift ;;
    --tell) tell=1; shift ;;
    --program) need "$@"; program=$2; shift 2 ;;
    --preload) need "$@"; preload=$2; compare=0; shift 2 ;;
    --compare) need "$@"; preload=$2; compare=1; shift 2 ;;
    --env) need "$@"; [[ $2 == [A-Za-z_]*=* ]] || { echo "emulated_cluster.sh: --env needs VAR=VALUE, got '$2'" >&2; exit 2; }
      rank_env+=("$2"); shift 2 ;;
    -h|--help) usage; exit 0 ;;
    --) shift; perf_args=("$@"); break ;;
    *) echo "emulated_cluster.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done

die() { echo "emulated_cluster.sh: $*" >&2; exit 1; }
[[ $(id -u) -eq 0 ]] || die "must run as root: it creates network namespaces, tc qdiscs and mounts"
[[ $servers =~ ^[0-9]+$ && $servers -ge 1 && $servers -le 80 ]] || die "--servers must be 1..80, got '$servers'"
[[ $gpus =~ ^[0-9]+$ && $gpus -ge 1 && $gpus -le 150 ]] || die "--gpus must be 1..150, got '$gpus'"
((servers * gpus <= 150)) || die "at most 150 ranks (management addresses), got $servers x $gpus"
[[ $rate =~ ^[0-9]+([.][0-9]+)?$ ]] || die "--rate must be a number of Mbit/s, got '$rate'"
[[ $gpus_per_nic =~ ^[1-9][0-9]*$ ]] && ((gpus % gpus_per_nic == 0)) ||
  die "--gpus-per-nic must divide --gpus $gpus, got '$gpus_per_nic'"
for r in "${!nic_rate[@]}" "${!nic_down_at[@]}"; do
  ((r < servers * gpus)) || die "--nic-rate/--nic-down: rank $r is not one of the $((servers * gpus)) ranks"
done
for r in "${!nic_rate[@]}"; do
  [[ ${nic_rate[$r]} =~ [1-9] ]] || die "--nic-rate $r=${nic_rate[$r]}: a rate above 0 (a NIC at 0 is --nic-down $r)"
done
# From here on the options' ranks name NICs: NIC n serves ranks n * K .. n * K + K - 1.
nics=$((gpus / gpus_per_nic)) # per server
declare -A nic_mbit=() nic_fails=()
for r in "${!nic_rate[@]}"; do nic_mbit[$((r / gpus_per_nic))]=${nic_rate[$r]}; done
for r in "${!nic_down_at[@]}"; do nic_fails[$((r / gpus_per_nic))]=${nic_down_at[$r]}; done
nic_name() { # nic_name NIC: "rank 1's NIC", or "the NIC of ranks 2-3"
  if ((gpus_per_nic == 1)); then echo "rank $1's NIC"; else
    echo "the NIC of ranks $(($1 * gpus_per_nic))-$(($1 * gpus_per_nic + gpus_per_nic - 1))"; fi
}
if [[ -n $program ]]; then
  [[ -x $program && -f $program ]] || die "--program '$program' is not an executable file"
  program=$(cd "$(dirname "$program")" && pwd)/$(basename "$program")
else
  [[ -x $perf ]] || die "no alltoallv_perf at '$perf' (build it: scripts/dev build, or pass --perf)"
  [[ -z $preload ]] || die "--preload and --compare need --program"
fi
if [[ -n $preload ]]; then
  [[ -f $preload ]] || die "--preload/--compare '$preload' is not a file"
  preload=$(cd "$(dirname "$preload")" && pwd)/$(basename "$preload")
  [[ " ${rank_env[*]} " == *" FAST_MPI_SCALE_OUT_GBPS="* ]] ||
    rank_env+=("FAST_MPI_SCALE_OUT_GBPS=$(awk -v r="$rate" 'BEGIN { printf "%.6g", r / 8000 }')")
fi
for tool in ip tc unshare mount mpirun orted timeout; do
  command -v "$tool" >/dev/null || die "'$tool' not found"
done

tag=fe$$
switch=$tag-sw
work=$(mktemp -d /tmp/fast-emulated.XXXXXX)
created=()
mpirun_pid=

cleanup() {
  local status=$?
  trap - EXIT INT TERM
  # Our own processes only: the MPI run we started, then anything still inside our namespaces
  # (its daemons and ranks), by PID.
  if [[ -n $mpirun_pid ]] && kill -0 "$mpirun_pid" 2>/dev/null; then
    kill -TERM "$mpirun_pid" 2>/dev/null || true
    sleep 1
  fi
  local ns pid
  for ns in "${created[@]}"; do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null || true; done
  done
  for ns in "${created[@]}"; do ip netns delete "$ns" 2>/dev/null || true; done
  rm -rf "$work"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

in_ns() { local ns=$1; shift; ip netns exec "$ns" "$@"; }
add_ns() { ip netns add "$1"; created+=("$1"); ip -n "$1" link set lo up; }
shape() { tc -n "$1" qdisc replace dev "$2" root tbf rate "${3:-$rate}mbit" burst "$burst" limit "${4:-$limit}"; }

# The switch: a flat data bridge (STP off, forwarding at once) and the management bridge.
add_ns "$switch"
ip -n "$switch" link add br0 type bridge stp_state 0 forward_delay 0
ip -n "$switch" link add mbr type bridge stp_state 0 forward_delay 0
ip -n "$switch" addr add 198.19.0.1/24 dev mbr
ip -n "$switch" link set br0 up
ip -n "$switch" link set mbr up

hostfile=$work/hostfile
: >"$hostfile"
for ((s = 0; s < servers; s++)); do
  ns=$tag-s$s
  add_ns "$ns"
  ip -n "$switch" link add "m$s" type veth peer name mgmt netns "$ns"
  ip -n "$switch" link set "m$s" master mbr up
  ip -n "$ns" addr add "198.19.0.$((10 + s))/24" dev mgmt
  ip -n "$ns" link set mgmt up
  for ((n = 0; n < nics; n++)); do
    # The NIC's namespace: its veth (shaped uplink), the ranks of its GPUs, and a management link
    # to reach its server's Open MPI daemon. UCX 1.13 never binds its TCP sockets to a source
    # address, so source routing cannot steer ranks that share a namespace onto different NICs:
    # each NIC gets one.
    gns=$ns-n$n
    add_ns "$gns"
    # A step-wise schedule leaves a connection idle between its steps; Linux would restart each
    # such connection from a slow-start window, which datacenter hosts turn off.
    ip netns exec "$gns" sysctl -qw net.ipv4.tcp_slow_start_after_idle=0
    nic=$((s * nics + n))
    port=p${s}n$n
    ip -n "$switch" link add "$port" type veth peer name "nic$n" netns "$gns"
    ip -n "$switch" link set "$port" master br0 up
    ip -n "$gns" addr add "198.18.$s.$((n + 1))/16" dev "nic$n"
    ip -n "$gns" link set "nic$n" up
    ip -n "$gns" route replace 198.18.0.0/16 dev "nic$n" proto kernel scope link src "198.18.$s.$((n + 1))" rto_min 1s
    ip -n "$switch" link add "r$nic" type veth peer name mgmt netns "$gns"
    ip -n "$switch" link set "r$nic" master mbr up
    ip -n "$gns" addr add "198.19.0.$((100 + nic))/24" dev mgmt
    ip -n "$gns" link set mgmt up
    shape "$gns" "nic$n" "${nic_mbit[$nic]:-}" "${nic_limit:-$limit}" # uplink: what its GPUs send
    shape "$switch" "$port" "${nic_mbit[$nic]:-}" # downlink: what they receive (incast queues here)
  done
  head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n' |
    sed -E 's/^(.{8})(.{4})(.{4})(.{4})(.{12}).*/\1-\2-\3-\4-\5\n/' >"$work/boot_id.$s"
  echo "server$s slots=$gpus" >>"$hostfile"
done

# Open MPI starts one daemon per server through this agent (as ssh would): the daemon enters the
# server's namespace with a private mount and UTS namespace holding the server's boot_id and
# host name; the ranks it starts inherit them.
agent=$work/agent.sh
cat >"$agent" <<EOF
#!/usr/bin/env bash
set -euo pipefail
host=\$1; shift
s=\${host#server}
exec ip netns exec $tag-s\$s unshare --mount --uts --propagation private -- /bin/sh -c \\
  'mount --bind $work/boot_id.'\$s' /proc/sys/kernel/random/boot_id && hostname '\$host' && exec /bin/sh -c "\$0"' "\$*"
EOF
# Every rank uses its own NIC: UCX and Open MPI's TCP BTL are restricted to it (Open MPI's to the
# management link with --mpi-over-management). The --env values
# and (second wrapper) the preloaded library reach the rank through env, not `ip`.
write_wrapper() { # write_wrapper FILE [LD_PRELOAD=LIB]
  local extra=("${rank_env[@]}")
  [[ -z ${2:-} ]] || extra+=("$2")
  cat >"$1" <<EOF
#!/bin/sh
n=\$((\${OMPI_COMM_WORLD_LOCAL_RANK:?} / $gpus_per_nic))
export OMPI_MCA_btl_tcp_if_include=$mpi_if UCX_NET_DEVICES=nic\$n
exec ip netns exec $tag-\$(hostname | sed 's/^server/s/')-n\$n env ${extra[*]@Q} "\$@"
EOF
  chmod +x "$1"
}
wrapper=$work/rank.sh
write_wrapper "$wrapper"
[[ -z $preload ]] || write_wrapper "$work/rank_preload.sh" "LD_PRELOAD=$preload"
chmod +x "$agent"

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_plm_rsh_agent=$agent OMPI_MCA_plm_rsh_no_tree_spawn=1
export OMPI_MCA_oob_tcp_if_include=198.19.0.0/24
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_hwloc_base_binding_policy=none
export OMPI_MCA_mpi_yield_when_idle=1
export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader,tcp
export UCX_TLS=sm,self,tcp
export PMIX_MCA_ptl_tcp_remote_connections=1 PMIX_MCA_ptl_tcp_if_include=198.19.0.0/24
# Avoid UCX's warnings about the unused transports of the namespaces (e.g. no IB devices).
export UCX_WARN_UNUSED_ENV_VARS=n

nic_gbit=$(awk -v r="$rate" 'BEGIN { printf "%.6g", r / 1000 }')
echo "emulated_cluster.sh: $servers servers x $gpus GPUs, $nics NICs each ($gpus_per_nic GPUs per NIC)," \
  "tbf ${rate} Mbit/s burst $burst limit ${nic_limit:-$limit} / $limit, namespaces $tag-*" >&2
for n in "${!nic_mbit[@]}"; do echo "emulated_cluster.sh: $(nic_name "$n") at ${nic_mbit[$n]} Mbit/s" >&2; done
# A NIC goes down at both ends of its cable (its veth and its switch port), as a link failure
# does; its packets in flight are lost.
nic_down() { # nic_down NIC
  local s=$(($1 / nics)) n=$(($1 % nics))
  ip -n "$tag-s$s-n$n" link set "nic$n" down
  ip -n "$switch" link set "p${s}n$n" down
  echo "emulated_cluster.sh: $(nic_name "$1") is down" >&2
}
for n in "${!nic_fails[@]}"; do [[ ${nic_fails[$n]} != 0 ]] || nic_down "$n"; done
status=0
run_mpi() { # run_mpi WRAPPER PROGRAM ARGS...
  ip netns exec "$switch" timeout -k 10 "$run_timeout" mpirun --hostfile "$hostfile" -np $((servers * gpus)) \
    --map-by "ppr:$gpus:node" "$@" &
  mpirun_pid=$!
  local n downs=()
  for n in "${!nic_fails[@]}"; do
    [[ ${nic_fails[$n]} == 0 ]] || { (sleep "${nic_fails[$n]}" && nic_down "$n") & downs+=($!); }
  done
  wait "$mpirun_pid" || status=$?
  mpirun_pid=
  for n in "${downs[@]}"; do kill "$n" 2>/dev/null || true; done
}
if [[ -z $program ]]; then
  told=()
  if ((tell)); then
    for n in "${!nic_mbit[@]}"; do
      told+=(--nic-rate "$((n * gpus_per_nic))=$(awk -v m="${nic_mbit[$n]}" 'BEGIN { printf "%.6g", m / 1000 }')")
    done
    for n in "${!nic_fails[@]}"; do [[ ${nic_fails[$n]} != 0 ]] || told+=(--nic-rate "$((n * gpus_per_nic))=0"); done
  fi
  run_mpi "$wrapper" "$perf" -g "$gpus" --gpus-per-nic "$gpus_per_nic" --nic-gbit "$nic_gbit" "${told[@]}" \
    "${perf_args[@]}"
else
  if [[ -z $preload || $compare -eq 1 ]]; then
    [[ $compare -eq 0 ]] || echo "== $(basename "$program") without $(basename "$preload")"
    run_mpi "$wrapper" "$program" "${perf_args[@]}"
  fi
  if [[ -n $preload ]]; then
    echo "== $(basename "$program") with $(basename "$preload") preloaded: ${rank_env[*]}"
    run_mpi "$work/rank_preload.sh" "$program" "${perf_args[@]}"
  fi
fi

if ((stats)); then
  echo "# tc byte counters: NIC = uplink (sent by its ranks), port = downlink (received by them);"
  echo "# its ranks' TCP segments retransmitted and retransmission timeouts (each stalls a flow >= rto_min, 1 s)"
  printf "# %-8s %-6s %14s %8s %14s %8s %8s %5s\n" server nic "NIC bytes" drops "port bytes" drops retrans RTOs
  total_rto=0
  for ((s = 0; s < servers; s++)); do
    for ((n = 0; n < nics; n++)); do
      up=$(tc -n "$tag-s$s-n$n" -s qdisc show dev "nic$n" | awk '/Sent/ { print $2, $7; exit }' | tr -d ',')
      down=$(tc -n "$switch" -s qdisc show dev "p${s}n$n" | awk '/Sent/ { print $2, $7; exit }' | tr -d ',')
      read -r retrans rtos < <(ip netns exec "$tag-s$s-n$n" nstat -asz TcpRetransSegs TcpExtTCPTimeouts |
        awk '/^TcpRetransSegs/ { r = $2 } /^TcpExtTCPTimeouts/ { t = $2 } END { print r + 0, t + 0 }')
      printf "  %-8s %-6s %14s %8s %14s %8s %8s %5s\n" "server$s" "nic$n" $up $down "$retrans" "$rtos"
      total_rto=$((total_rto + rtos))
    done
  done
  echo "# retransmission timeouts, all ranks: $total_rto"
fi
exit "$status"
