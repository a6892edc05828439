#!/usr/bin/env python3
"""torch_alltoall.py: torch.distributed.all_to_all_single on real MoE traffic with the "fast"
backend (FAST plans, and the executor's direct baseline) against gloo, every byte checked.

Each selected matrix of a token-count file (e.g. workloads/megatron_moe_4x8.txt: 32 x 32
per matrix, entry (i, j) = tokens rank i sends rank j) becomes one all_to_all_single per backend:
rank i sends M[i][j] rows of --token-bytes to rank j. With fewer ranks than the matrix has, the
matrix is folded (ranks i*F .. i*F+F-1 become rank i). Calls are interleaved across backends
(warm-up, then timed), each after a barrier; a call's time is its slowest rank's. Prints per
matrix and backend the median time, algbw (bytes per rank / time), T_lb (busiest server's
inter-server bytes / its G NICs) and wrong bytes, then the median over matrices.

Launch (fast_torch installed or on PYTHONPATH, e.g. <build>/python; the Python that has PyTorch,
e.g. that of `scripts/dev torch-venv`):
  - torchrun:  torchrun --nproc-per-node 8 benchmarks/torch_alltoall.py -g 4 --nic-gbit 100 -W FILE
               (the rendezvous from the environment)
  - mpirun:    ranks from OMPI_COMM_WORLD_*, rank 0 serves the store at --master-addr; this is how
               benchmarks/emulated_cluster.sh runs it (--program PYTHON -- benchmarks/torch_alltoall.py),
               see docs/pytorch.md
  - locally without a launcher: python benchmarks/torch_alltoall.py --nproc 8 -g 4 --nic-gbit 100 -W FILE
"""

import argparse
import csv
import datetime
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import fast_torch

BACKENDS = ("fast", "direct", "gloo")


def read_matrices(path, side, every, limit):
    """Every `every`-th side x side matrix of a file of integers (one per line, row-major)."""
    with open(path) as f:
        values = [int(line) for line in f if line.strip()]
    if not values or len(values) % (side * side):
        raise SystemExit(f"torch_alltoall.py: {path}: {len(values)} entries are not whole {side} x {side} matrices")
    count = len(values) // (side * side)
    picked = list(range(0, count, every))[:limit] if limit else list(range(0, count, every))
    return side, [(k, torch.tensor(values[k * side * side:(k + 1) * side * side]).view(side, side)) for k in picked]


def fold(m, world):
    """Sums blocks of F x F ranks into one rank, F = side / world."""
    side = m.shape[0]
    if world > side or side % world:
        raise SystemExit(f"torch_alltoall.py: {world} ranks do not divide the matrices' {side} ranks")
    f = side // world
    return m.view(world, f, world, f).sum(dim=(1, 3))


def lower_bound_s(tokens, gpus, token_bytes, nic_bytes_per_s):
    """T_lb: the busiest server's inter-server bytes (sent or received) over its G NICs."""
    servers = tokens.shape[0] // gpus
    per_server = tokens.view(servers, gpus, servers, gpus).sum(dim=(1, 3)) * token_bytes
    inter = per_server - torch.diag(torch.diag(per_server))
    busiest = max(inter.sum(dim=1).max().item(), inter.sum(dim=0).max().item())
    return busiest / (gpus * nic_bytes_per_s)


def measured_scale_up_gbps(local_ranks):
    """memcpy between buffers larger than the caches, shared by the ranks of this host that run on
    the same cores (as alltoallv_perf measures it)."""
    a, b = torch.ones(32 << 20, dtype=torch.uint8), torch.empty(32 << 20, dtype=torch.uint8)
    best = min(_timed(lambda: b.copy_(a)) for _ in range(5))
    share = min(1.0, (os.cpu_count() or 1) / local_ranks)
    return a.numel() / best * share / 1e9


def _timed(fn):
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


class Case:
    """One rank's buffers of one matrix: block j of the input holds rank*world + j, so that the
    receiver knows what every block must hold."""

    def __init__(self, tokens, rank, row):
        world = tokens.shape[0]
        self.send_splits = tokens[rank].tolist()
        self.recv_splits = tokens[:, rank].tolist()
        marks = torch.arange(world, dtype=torch.int32) + rank * world
        self.input = marks.repeat_interleave(tokens[rank]).unsqueeze(1).expand(-1, row).contiguous()
        self.want = (torch.arange(world, dtype=torch.int32) * world + rank).repeat_interleave(tokens[:, rank])
        self.output = torch.empty((sum(self.recv_splits), row), dtype=torch.int32)

    def run(self, group):
        self.output.fill_(-1)
        dist.barrier()  # the default group: every rank starts the call together
        t0 = time.perf_counter()
        dist.all_to_all_single(self.output, self.input, self.recv_splits, self.send_splits, group=group)
        elapsed = time.perf_counter() - t0
        wrong = int((self.output != self.want.unsqueeze(1)).sum().item()) * 4
        return elapsed, wrong


def make_groups(args, world, scale_up_gbps):
    groups = {}
    for name in args.backends:
        if name == "gloo":
            groups[name] = dist.new_group(backend="gloo", timeout=datetime.timedelta(minutes=10))
            continue
        options = fast_torch.Options(
            gpus_per_server=args.gpus, scheduler="fast" if name == "fast" else "direct", flow=args.flow,
            scale_up_gbps=scale_up_gbps, scale_out_gbps=args.nic_gbit / 8, alpha_up_us=args.alpha_up_us,
            alpha_out_us=args.alpha_out_us, fallback="none")
        groups[name] = dist.new_group(backend="fast", pg_options=options, timeout=datetime.timedelta(minutes=10))
    return groups


def benchmark(rank, world, args, local_ranks):
    torch.set_num_threads(1)
    side, matrices = read_matrices(args.workload, args.side, args.every, args.matrices)
    mine = args.scale_up_gbps or measured_scale_up_gbps(local_ranks)
    up = torch.tensor([mine], dtype=torch.float64)
    dist.broadcast(up, 0)  # one figure: every rank must plan alike
    groups = make_groups(args, world, up.item())
    row = args.token_bytes // 4  # int32 elements: gloo's all_to_all has no 16-bit integers
    nic = args.nic_gbit * 1e9 / 8
    if rank == 0:
        print(f"# torch_alltoall: {world // args.gpus} servers x {args.gpus} ranks, NIC {args.nic_gbit:g} Gbit/s, "
              f"{args.token_bytes} bytes per token, {len(matrices)} matrices of {args.workload} "
              f"({side} ranks{f' folded to {world}' if side != world else ''}), warm-up {args.warmup}, "
              f"{args.iters} timed calls; planner fabric: scale-up {up.item():.3g} GB/s"
              f"{'' if args.scale_up_gbps else ' (measured memcpy share)'}, scale-out {args.nic_gbit / 8:g} GB/s, "
              f"alpha_up {args.alpha_up_us:g} us, alpha_out {args.alpha_out_us:g} us, flow {args.flow}", flush=True)
        print(f"{'matrix':>6} {'backend':8} {'median ms':>10} {'algbw MB/s':>11} {'T_lb ms':>8} {'time/T_lb':>9} "
              f"{'#wrong':>7}", flush=True)
    rows, summary = [], {name: [] for name in args.backends}
    for index, m in matrices:
        tokens = fold(m, world)
        case = Case(tokens, rank, row)
        times = {name: [] for name in args.backends}
        wrong = {name: 0 for name in args.backends}
        for call in range(args.warmup + args.iters):
            for name, group in groups.items():
                elapsed, bad = case.run(group)
                stats = torch.tensor([elapsed, float(bad)], dtype=torch.float64)
                dist.all_reduce(stats[:1], op=dist.ReduceOp.MAX)
                dist.all_reduce(stats[1:], op=dist.ReduceOp.SUM)
                wrong[name] += int(stats[1].item())
                if call >= args.warmup:
                    times[name].append(stats[0].item())
                    rows.append((index, name, call - args.warmup, stats[0].item(), int(stats[1].item())))
        t_lb = lower_bound_s(tokens, args.gpus, args.token_bytes, nic)
        per_rank = tokens.sum().item() * args.token_bytes / world
        for name in args.backends:
            med = statistics.median(times[name])
            summary[name].append((med, per_rank / med / 1e6, med / t_lb, wrong[name]))
            if rank == 0:
                print(f"{index:6d} {name:8} {med * 1e3:10.1f} {per_rank / med / 1e6:11.2f} {t_lb * 1e3:8.1f} "
                      f"{med / t_lb:9.2f} {wrong[name]:7d}", flush=True)
    if rank == 0:
        print(f"# median over {len(matrices)} matrices:")
        for name in args.backends:
            s = summary[name]
            print(f"{'all':>6} {name:8} {statistics.median(x[0] for x in s) * 1e3:10.1f} "
                  f"{statistics.median(x[1] for x in s):11.2f} {'':8} {statistics.median(x[2] for x in s):9.2f} "
                  f"{sum(x[3] for x in s):7d}")
        if "fast" in summary and "gloo" in summary:
            ratio = statistics.median(x[1] for x in summary["fast"]) / statistics.median(x[1] for x in summary["gloo"])
            print(f"# fast / gloo algbw: {ratio:.2f} x")
        if args.csv:
            with open(args.csv, "w", newline="") as f:
                out = csv.writer(f)
                out.writerow(["matrix", "backend", "call", "time_s", "wrong_bytes"])
                out.writerows(rows)
    failed = sum(x[3] for s in summary.values() for x in s)
    for group in groups.values():
        dist.destroy_process_group(group)
    return failed


def rank_main(rank, world, args, port, local_ranks):
    """mpirun (port: rank 0 serves the store there) or torchrun (port None: its rendezvous)."""
    if port is None:
        dist.init_process_group("gloo", timeout=datetime.timedelta(minutes=10))
    else:
        store = dist.TCPStore(args.master_addr, port, world, rank == 0, timeout=datetime.timedelta(minutes=5),
                              wait_for_workers=False)
        dist.init_process_group("gloo", store=store, rank=rank, world_size=world,
                                timeout=datetime.timedelta(minutes=10))
    failed = benchmark(rank, world, args, local_ranks)
    dist.destroy_process_group()
    if failed:
        sys.exit(1)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-g", "--gpus", type=int, required=True, help="ranks (GPUs) per server")
    p.add_argument("--nic-gbit", type=float, required=True, help="scale-out NIC rate per GPU, Gbit/s (T_lb, planner)")
    p.add_argument("-W", "--workload", required=True, help="token-count matrix file (e.g. workloads/megatron_moe_4x8.txt)")
    p.add_argument("--side", type=int, default=32, help="ranks of the file's matrices (side x side entries each)")
    p.add_argument("--every", type=int, default=60, help="every K-th matrix of the file")
    p.add_argument("--matrices", type=int, default=0, help="at most this many matrices (0: all selected)")
    p.add_argument("-u", "--token-bytes", type=int, default=1600, help="bytes per token (a multiple of 4)")
    p.add_argument("-w", "--warmup", type=int, default=1, help="untimed calls per backend and matrix")
    p.add_argument("-n", "--iters", type=int, default=3, help="timed calls per backend and matrix")
    p.add_argument("--backends", default=",".join(BACKENDS), help="comma-separated: fast, direct, gloo")
    p.add_argument("--flow", default="rendezvous", choices=("rendezvous", "credits"), help="the executor's flow control")
    p.add_argument("--scale-up-gbps", type=float, default=0, help="planner's scale-up GB/s (default: measured)")
    p.add_argument("--alpha-up-us", type=float, default=50, help="planner's per-step scale-up latency, us")
    p.add_argument("--alpha-out-us", type=float, default=500, help="planner's per-step scale-out latency, us")
    p.add_argument("--csv", default="", help="every timed call: matrix, backend, call, time_s, wrong_bytes")
    p.add_argument("--nproc", type=int, default=0, help="start this many local processes (no launcher)")
    p.add_argument("--master-addr", default=os.environ.get("MASTER_ADDR", "127.0.0.1"),
                   help="address of rank 0's store (emulated cluster: rank 0's management address)")
    p.add_argument("--master-port", type=int, default=29517, help="its port (mpirun)")
    args = p.parse_args()
    args.backends = [b for b in args.backends.split(",") if b]
    for b in args.backends:
        if b not in BACKENDS:
            p.error(f"--backends: unknown backend {b!r} (fast, direct, gloo)")
    for name in ("gpus", "side", "every", "iters", "token_bytes"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.token_bytes % 4 or args.nic_gbit <= 0:
        p.error("--token-bytes must be a multiple of 4 and --nic-gbit positive")
    # Gloo and UCX on the same NIC: the emulated cluster names it in UCX_NET_DEVICES.
    nic = os.environ.get("UCX_NET_DEVICES", "")
    if nic and "," not in nic and ":" not in nic and "GLOO_SOCKET_IFNAME" not in os.environ:
        os.environ["GLOO_SOCKET_IFNAME"] = nic
    if args.nproc:
        store = dist.TCPStore("127.0.0.1", 0, args.nproc + 1, True, wait_for_workers=False)
        args.master_addr = "127.0.0.1"
        mp.start_processes(local_rank_main, args=(args, store.port), nprocs=args.nproc, start_method="spawn")
        return 0
    env = os.environ
    if "OMPI_COMM_WORLD_RANK" in env:
        rank, world = int(env["OMPI_COMM_WORLD_RANK"]), int(env["OMPI_COMM_WORLD_SIZE"])
        rank_main(rank, world, args, args.master_port, int(env.get("OMPI_COMM_WORLD_LOCAL_SIZE", world)))
    elif "RANK" in env:
        rank, world = int(env["RANK"]), int(env["WORLD_SIZE"])
        rank_main(rank, world, args, None, int(env.get("LOCAL_WORLD_SIZE", world)))
    else:
        p.error("no launcher found: pass --nproc, or run under mpirun or torchrun")
    return 0


def local_rank_main(rank, args, port):
    """--nproc: rank `rank` of args.nproc local processes, the store already served by the parent."""
    store_world = args.nproc + 1
    store = dist.TCPStore("127.0.0.1", port, store_world, False, timeout=datetime.timedelta(minutes=5))
    dist.init_process_group("gloo", store=store, rank=rank, world_size=args.nproc,
                            timeout=datetime.timedelta(minutes=10))
    failed = benchmark(rank, args.nproc, args, args.nproc)
    dist.destroy_process_group()
    if failed:
        sys.exit(1)


if __name__ == "__main__":
    sys.exit(main())
