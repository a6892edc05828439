#!/usr/bin/env python3
"""A small mixture-of-experts layer with expert parallelism, run on the "fast" backend and on
gloo: its output must be the same on both, bit for bit. Prints the time of the token dispatch
and of the combine with each backend: gloo, fast (default options: the automatic scheduler) and
fast-direct (the executor's everything-at-once baseline, scheduler="direct").

The layer (a torch.nn.Module): a router (linear) scores every token for every expert, each token
goes to its top-k experts (softmax gates), the tokens are dispatched to the ranks that own those
experts with all_to_all_single (uneven split sizes, changing every call), each rank runs its
experts (two-layer MLPs), and a second all_to_all_single brings the results back to be combined
with the gates. The only change between the backends is the group the layer is given:
dist.new_group(backend="fast") or backend="gloo".

Run it with torchrun, one CPU process per rank (fast_torch installed, or <build>/python on
PYTHONPATH):
    torchrun --nproc-per-node 8 examples/torch/moe_layer.py --gpus-per-server 4
"""

import argparse
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist

import fast_torch

# The groups compared, and the fast_torch.Options of each fast one (gpus_per_server added).
BACKENDS = {"gloo": None, "fast": {}, "fast-direct": {"scheduler": "direct"}}


class MoELayer(torch.nn.Module):
    """Top-k mixture of experts over the ranks of `group`: rank r holds experts [r * E, (r + 1) * E).
    Every rank builds the same weights from `seed`, so the layer is the same on every rank and
    backend. `times` collects the seconds of each dispatch and combine."""

    def __init__(self, d_model, d_hidden, experts_per_rank, top_k, group, seed, skew):
        super().__init__()
        self.group, self.top_k, self.experts_per_rank = group, top_k, experts_per_rank
        self.rank, self.world = dist.get_rank(group), dist.get_world_size(group)
        n = experts_per_rank * self.world
        torch.manual_seed(seed)
        self.router = torch.nn.Linear(d_model, n)
        # Real routers favour some experts: a fixed bias makes the traffic skewed.
        with torch.no_grad():
            self.router.bias += -skew * torch.log1p(torch.arange(n, dtype=torch.float32))
        experts = [torch.nn.Sequential(torch.nn.Linear(d_model, d_hidden), torch.nn.GELU(),
                                       torch.nn.Linear(d_hidden, d_model)) for _ in range(n)]
        mine = slice(self.rank * experts_per_rank, (self.rank + 1) * experts_per_rank)
        self.experts = torch.nn.ModuleList(experts[mine])
        self.times = {"dispatch": [], "combine": []}

    def forward(self, x):
        tokens, k = x.shape[0], self.top_k
        gates, expert = self.router(x).softmax(dim=-1).topk(k, dim=-1)  # [T, k] each
        gates = gates / gates.sum(dim=-1, keepdim=True)
        # Token copies sorted by expert, hence by the rank that owns it.
        flat = expert.reshape(-1)
        order = torch.sort(flat, stable=True).indices
        send_expert = flat[order]
        send = x.repeat_interleave(k, dim=0)[order]
        send_counts = torch.bincount(send_expert // self.experts_per_rank, minlength=self.world)

        recv, recv_expert, splits_out, splits_in = self.dispatch(send, send_expert, send_counts)
        out = torch.empty_like(recv)
        local = recv_expert - self.rank * self.experts_per_rank
        for e, mlp in enumerate(self.experts):
            mask = local == e
            out[mask] = mlp(recv[mask])
        back = self.combine(out, send, splits_out, splits_in)

        y = torch.empty_like(back)
        y[order] = back
        return (y.view(tokens, k, -1) * gates.unsqueeze(-1)).sum(dim=1)

    def dispatch(self, send, send_expert, send_counts):
        """Counts first (one per rank), then the tokens and their expert ids."""
        dist.barrier()  # time the exchange, not the slowest rank's routing (default group)
        t0 = time.perf_counter()
        recv_counts = torch.empty_like(send_counts)
        dist.all_to_all_single(recv_counts, send_counts, group=self.group)
        splits_out, splits_in = send_counts.tolist(), recv_counts.tolist()
        recv = send.new_empty((sum(splits_in), send.shape[1]))
        dist.all_to_all_single(recv, send, splits_in, splits_out, group=self.group)
        recv_expert = send_expert.new_empty(sum(splits_in))
        dist.all_to_all_single(recv_expert, send_expert, splits_in, splits_out, group=self.group)
        self.times["dispatch"].append(time.perf_counter() - t0)
        return recv, recv_expert, splits_out, splits_in

    def combine(self, out, send, splits_out, splits_in):
        dist.barrier()  # nor its experts
        t0 = time.perf_counter()
        back = torch.empty_like(send)
        dist.all_to_all_single(back, out, splits_out, splits_in, group=self.group)
        self.times["combine"].append(time.perf_counter() - t0)
        return back


def run(rank, args):
    """Every backend on the same layer and inputs; returns (outputs, times) per backend."""
    outputs, times = {}, {}
    for name, options in BACKENDS.items():
        if options is None:
            group = dist.new_group(backend=name)
        else:
            group = dist.new_group(backend="fast",
                                   pg_options=fast_torch.Options(gpus_per_server=args.gpus_per_server, **options))
        layer = MoELayer(args.d_model, args.d_hidden, args.experts_per_rank, args.top_k, group, args.seed, args.skew)
        outputs[name] = []
        with torch.no_grad():
            for it in range(args.iterations + 1):  # call 0 warms up (connections, plans)
                g = torch.Generator().manual_seed(args.seed * 7919 + it * 131 + rank)
                outputs[name].append(layer(torch.randn(args.tokens, args.d_model, generator=g)))
        times[name] = {phase: t[1:] for phase, t in layer.times.items()}
    return outputs, times


def report(world, args, verdicts):
    """Rank 0's table: per backend the median over calls of the slowest rank's time."""
    print(f"MoE layer: {world} ranks ({world // args.gpus_per_server} servers x {args.gpus_per_server}), "
          f"{args.tokens} tokens x {args.d_model} per rank, {args.experts_per_rank * world} experts, "
          f"top-{args.top_k}, {args.iterations} calls")
    print(f"{'backend':12} {'dispatch ms':>12} {'combine ms':>12}   (median over calls of the slowest rank)")
    for name in BACKENDS:
        row = []
        for phase in ("dispatch", "combine"):
            slowest = [max(v[1][name][phase][i] for v in verdicts) for i in range(args.iterations)]
            row.append(statistics.median(slowest) * 1e3)
        print(f"{name:12} {row[0]:12.3f} {row[1]:12.3f}")
    bad = [r for r, v in enumerate(verdicts) if not v[0]]
    print("outputs: fast and fast-direct identical to gloo" if not bad else
          f"outputs DIFFER from gloo's on ranks {bad}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gpus-per-server", type=int, default=4, help="ranks per emulated server (default 4)")
    parser.add_argument("--tokens", type=int, default=256, help="tokens per rank and call (default 256)")
    parser.add_argument("--d-model", type=int, default=128, help="model width (default 128)")
    parser.add_argument("--d-hidden", type=int, default=256, help="expert MLP width (default 256)")
    parser.add_argument("--experts-per-rank", type=int, default=2, help="experts on each rank (default 2)")
    parser.add_argument("--top-k", type=int, default=2, help="experts per token (default 2)")
    parser.add_argument("--skew", type=float, default=0.5, help="router bias -skew*log(1+e) towards low experts")
    parser.add_argument("--iterations", type=int, default=5, help="timed calls per backend (default 5)")
    parser.add_argument("--seed", type=int, default=1, help="seed of weights and tokens")
    args = parser.parse_args()
    for name in ("gpus_per_server", "tokens", "d_model", "d_hidden", "experts_per_rank", "top_k", "iterations"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1, got {getattr(args, name)}")
    if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
        parser.error("start it with torchrun, e.g. torchrun --nproc-per-node 8 examples/torch/moe_layer.py")
    world = int(os.environ["WORLD_SIZE"])
    if world % args.gpus_per_server:
        parser.error(f"--gpus-per-server {args.gpus_per_server} does not divide the {world} ranks")
    if args.top_k > args.experts_per_rank * world:
        parser.error(f"--top-k {args.top_k} is more than the {args.experts_per_rank * world} experts")
    torch.set_num_threads(1)  # the ranks share this machine's cores
    dist.init_process_group("gloo")  # the rendezvous that torchrun put in the environment
    rank = dist.get_rank()
    outputs, times = run(rank, args)
    same = all(torch.equal(a, b) for name in BACKENDS if name != "gloo"
               for a, b in zip(outputs[name], outputs["gloo"]))
    verdicts = [None] * world  # every rank's verdict and times, gathered on the default group
    dist.all_gather_object(verdicts, (same, times))
    if rank == 0:
        report(world, args, verdicts)
    dist.destroy_process_group()
    return 0 if all(v[0] for v in verdicts) else 1


if __name__ == "__main__":
    sys.exit(main())
