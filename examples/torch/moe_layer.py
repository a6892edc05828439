#!/usr/bin/python3
"""A small mixture-of-experts layer with expert parallelism, run on the "fast" backend and on
gloo: its output must be the same on both, bit for bit. Prints the time of the token dispatch
and of the combine with each backend.

The layer: a router (linear) scores every token for every expert, each token goes to its top-2
experts (softmax gates), the tokens are dispatched to the ranks that own those experts with
all_to_all_single (uneven split sizes, changing every call), each rank runs its experts (two-layer
MLPs), and a second all_to_all_single brings the results back to be combined with the gates.
The only change between the backends is the group: dist.new_group(backend="fast") or "gloo".

Run it as several CPU processes (fast_torch on PYTHONPATH, e.g. <build>/python):
    /usr/bin/python3 examples/torch/moe_layer.py --nproc 4 --gpus-per-server 2
or with torchrun (one process per rank, rendezvous from the environment):
    torchrun --nproc_per_node 4 examples/torch/moe_layer.py --gpus-per-server 2
"""

import argparse
import datetime
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import fast_torch


class MoELayer(torch.nn.Module):
    """Top-2 mixture of experts; this rank holds experts [rank * E, (rank + 1) * E). Every rank
    builds the same weights from `seed`, so the layer is the same on every rank and backend."""

    def __init__(self, d_model, d_hidden, experts_per_rank, rank, world, seed, skew):
        super().__init__()
        torch.manual_seed(seed)
        self.experts_per_rank, self.rank, self.world = experts_per_rank, rank, world
        n = experts_per_rank * world
        self.router = torch.nn.Linear(d_model, n)
        # Real routers favour some experts: a fixed bias makes the traffic skewed.
        with torch.no_grad():
            self.router.bias += -skew * torch.log1p(torch.arange(n, dtype=torch.float32))
        experts = [torch.nn.Sequential(torch.nn.Linear(d_model, d_hidden), torch.nn.GELU(),
                                       torch.nn.Linear(d_hidden, d_model)) for _ in range(n)]
        self.experts = torch.nn.ModuleList(experts[rank * experts_per_rank:(rank + 1) * experts_per_rank])

    def forward(self, x, group, times):
        tokens = x.shape[0]
        gates, expert = self.router(x).softmax(dim=-1).topk(2, dim=-1)  # [T, 2] each
        gates = gates / gates.sum(dim=-1, keepdim=True)
        # Token copies sorted by expert, hence by the rank that owns it.
        flat = expert.reshape(-1)
        order = torch.sort(flat, stable=True).indices
        send_expert = flat[order]
        send = x.repeat_interleave(2, dim=0)[order]
        send_counts = torch.bincount(send_expert // self.experts_per_rank, minlength=self.world)

        dist.barrier()  # time the exchange, not the slowest rank's routing (default group)
        t0 = time.perf_counter()
        recv_counts = torch.empty_like(send_counts)
        dist.all_to_all_single(recv_counts, send_counts, group=group)  # equal splits: one count each
        splits_out, splits_in = send_counts.tolist(), recv_counts.tolist()
        recv = send.new_empty((sum(splits_in), send.shape[1]))
        dist.all_to_all_single(recv, send, splits_in, splits_out, group=group)
        recv_expert = send_expert.new_empty(sum(splits_in))
        dist.all_to_all_single(recv_expert, send_expert, splits_in, splits_out, group=group)
        t1 = time.perf_counter()

        out = torch.empty_like(recv)
        local = recv_expert - self.rank * self.experts_per_rank
        for e, mlp in enumerate(self.experts):
            mask = local == e
            out[mask] = mlp(recv[mask])

        dist.barrier()  # nor its experts
        t2 = time.perf_counter()
        back = torch.empty_like(send)
        dist.all_to_all_single(back, out, splits_out, splits_in, group=group)
        t3 = time.perf_counter()
        times["dispatch"].append(t1 - t0)
        times["combine"].append(t3 - t2)

        y = torch.empty_like(back)
        y[order] = back
        return (y.view(tokens, 2, -1) * gates.unsqueeze(-1)).sum(dim=1)


def run(rank, world, args, backend_options):
    """Every backend on the same layer and inputs; returns (outputs per backend, times)."""
    layer = MoELayer(args.d_model, args.d_hidden, args.experts_per_rank, rank, world, args.seed, args.skew)
    groups = {"gloo": dist.new_group(backend="gloo"),
              "fast": dist.new_group(backend="fast", pg_options=backend_options)}
    outputs, times = {}, {}
    with torch.no_grad():
        for name, group in groups.items():
            times[name] = {"dispatch": [], "combine": []}
            outputs[name] = []
            for it in range(args.iterations + 1):  # call 0 warms up (connections, plans)
                g = torch.Generator().manual_seed(args.seed * 7919 + it * 131 + rank)
                x = torch.randn(args.tokens, args.d_model, generator=g)
                outputs[name].append(layer(x, group, times[name]))
            for k in times[name]:
                del times[name][k][0]
    return outputs, times


def worker(rank, world, args, store_port=None):
    torch.set_num_threads(1)  # the ranks share this machine's cores
    if store_port is None:  # torchrun: the rendezvous is in the environment
        dist.init_process_group("gloo")
    else:
        store = dist.TCPStore("127.0.0.1", store_port, world + 1, False, timeout=datetime.timedelta(seconds=60))
        dist.init_process_group("gloo", store=store, rank=rank, world_size=world)
    options = fast_torch.Options(gpus_per_server=args.gpus_per_server)
    outputs, times = run(rank, world, args, options)
    same = all(torch.equal(a, b) for a, b in zip(outputs["fast"], outputs["gloo"]))
    # Every rank's verdict and times, gathered on the default (gloo) group.
    verdicts = [None] * world
    dist.all_gather_object(verdicts, (same, times))
    if rank == 0:
        print(f"MoE layer: {world} ranks ({world // args.gpus_per_server} servers x {args.gpus_per_server}), "
              f"{args.tokens} tokens x {args.d_model} per rank, {args.experts_per_rank * world} experts, top-2, "
              f"{args.iterations} calls")
        print(f"{'backend':8} {'dispatch ms':>12} {'combine ms':>12}   (median over calls of the slowest rank)")
        for name in ("gloo", "fast"):
            row = []
            for phase in ("dispatch", "combine"):
                slowest = [max(v[1][name][phase][i] for v in verdicts) for i in range(args.iterations)]
                row.append(statistics.median(slowest) * 1e3)
            print(f"{name:8} {row[0]:12.3f} {row[1]:12.3f}")
        bad = [r for r, v in enumerate(verdicts) if not v[0]]
        print("outputs: identical on fast and gloo" if not bad else f"outputs DIFFER on ranks {bad}")
    dist.destroy_process_group()
    if not all(v[0] for v in verdicts):
        sys.exit(1)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nproc", type=int, default=4, help="processes to start (not with torchrun)")
    parser.add_argument("--gpus-per-server", type=int, default=2, help="ranks per emulated server")
    parser.add_argument("--tokens", type=int, default=256, help="tokens per rank and call")
    parser.add_argument("--d-model", type=int, default=128, help="model width")
    parser.add_argument("--d-hidden", type=int, default=256, help="expert MLP width")
    parser.add_argument("--experts-per-rank", type=int, default=2, help="experts on each rank")
    parser.add_argument("--skew", type=float, default=0.5, help="router bias -skew*log(1+e) towards low experts")
    parser.add_argument("--iterations", type=int, default=5, help="timed calls per backend")
    parser.add_argument("--seed", type=int, default=1, help="seed of weights and tokens")
    args = parser.parse_args()
    for name in ("nproc", "gpus_per_server", "tokens", "d_model", "d_hidden", "experts_per_rank", "iterations"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1, got {getattr(args, name)}")
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:  # torchrun
        worker(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), args)
        return 0
    if args.nproc % args.gpus_per_server:
        parser.error(f"--gpus-per-server {args.gpus_per_server} does not divide --nproc {args.nproc}")
    store = dist.TCPStore("127.0.0.1", 0, args.nproc + 1, True, timeout=datetime.timedelta(seconds=60),
                          wait_for_workers=False)
    try:
        mp.start_processes(worker, args=(args.nproc, args, store.port), nprocs=args.nproc, start_method="spawn")
    except mp.ProcessExitedException as e:
        print(f"moe_layer.py: rank {e.error_index} failed (exit code {e.exit_code})", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
