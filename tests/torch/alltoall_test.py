#!/usr/bin/env python3
"""Tests of the "fast" torch.distributed backend (fast_torch) with several CPU processes on one
machine, one per rank as torchrun starts them, as emulated servers (--gpus-per-server):

    torchrun --standalone --nproc-per-node 4 tests/torch/alltoall_test.py --gpus-per-server 2

The registration for CPU and CUDA, all_to_all_single with random uneven splits in several dtypes,
zero-size splits, a rank that sends nothing, repeated calls with changing splits, equal splits,
the list form (non-contiguous tensors too), async calls and futures, torch.compile, mismatched
splits between ranks, bad arguments on one rank, the group timeout and Work.wait(timeout), the
fallback group and the options. Every rank checks every byte it receives against what the
senders' seeded inputs say it must be. Needs fast_torch on PYTHONPATH (<build>/python)."""

import argparse
import datetime
import faulthandler
import os
import sys
import time

import torch
import torch.distributed as dist

import fast_torch
from fast_torch import Options, _C

# bfloat16, int16 and float8 are not in gloo's all_to_all; complex goes as real pairs (PyTorch's
# view_as_real).
DTYPES = [torch.float32, torch.bfloat16, torch.int64, torch.int16, torch.complex64, torch.float8_e4m3fn, torch.bool]
ROW = (3,)  # each row: 3 elements
# torch.compile's backend in test_compile: "aot_eager" traces the collective into a graph (no C++
# compiler run per rank; "inductor" works the same way, see docs/pytorch.md).
COMPILE_BACKEND = "aot_eager"


def rank_input(rank, rows, dtype, seed):
    """The input of `rank` in round `seed`: any rank can recompute any rank's input."""
    g = torch.Generator().manual_seed(seed * 1009 + rank)
    if dtype.is_floating_point or dtype.is_complex:
        return torch.randn((rows,) + ROW, generator=g, dtype=torch.complex64 if dtype.is_complex else None).to(dtype)
    if dtype == torch.bool:
        return torch.randint(0, 2, (rows,) + ROW, generator=g).bool()
    info = torch.iinfo(dtype)
    return torch.randint(info.min, info.max, (rows,) + ROW, generator=g, dtype=dtype)


def same_bytes(a, b):
    """Bit for bit (float8 has no torch.equal)."""
    return a.shape == b.shape and a.dtype == b.dtype and torch.equal(a.view(torch.uint8), b.view(torch.uint8))


def split_matrix(size, seed, zero_rank=None):
    """S[i][j]: rows rank i sends rank j; about a quarter are 0, and `zero_rank` sends nothing."""
    g = torch.Generator().manual_seed(seed)
    s = torch.randint(0, 8, (size, size), generator=g)
    s[torch.rand((size, size), generator=g) < 0.25] = 0
    if zero_rank is not None:
        s[zero_rank, :] = 0
    return s.tolist()


def expected_output(rank, s, dtype, seed):
    size = len(s)
    parts = []
    for i in range(size):
        src = rank_input(i, sum(s[i]), dtype, seed)
        start = sum(s[i][:rank])
        parts.append(src[start:start + s[i][rank]])
    return torch.cat(parts)


def exchange(group, rank, s, dtype, seed, async_op=False):
    size = len(s)
    inp = rank_input(rank, sum(s[rank]), dtype, seed)
    out = torch.empty((sum(s[i][rank] for i in range(size)),) + ROW, dtype=dtype)
    work = dist.all_to_all_single(out, inp, [s[i][rank] for i in range(size)], s[rank], group=group,
                                  async_op=async_op)
    return out, work


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def expect_error(fn, *fragments, error=RuntimeError):
    """Runs fn, which must raise `error` whose message contains every fragment."""
    try:
        fn()
    except error as e:
        text = str(e)
        for f in fragments:
            check(f in text, f"expected {f!r} in the error, got: {text}")
        return text
    raise AssertionError(f"expected an error containing {fragments}, got none")


def test_uneven(group, rank, size):
    for round_ in range(6):  # a new traffic matrix each round, zero-size splits included
        seed = 100 + round_
        s = split_matrix(size, seed, zero_rank=round_ % size if round_ % 2 else None)
        for dtype in DTYPES:
            out, _ = exchange(group, rank, s, dtype, seed)
            check(same_bytes(out, expected_output(rank, s, dtype, seed)), f"round {round_} {dtype}: wrong bytes")
    # The same matrix again: the executor reuses its plan.
    before = fast_torch.describe(group)["plans_reused"]
    s = split_matrix(size, 100)
    for _ in range(3):
        out, _ = exchange(group, rank, s, torch.float32, 100)
        check(torch.equal(out, expected_output(rank, s, torch.float32, 100)), "repeated call: wrong bytes")
    check(fast_torch.describe(group)["plans_reused"] >= before + 2, "plans were not reused")


def test_empty_and_equal(group, rank, size):
    # Nothing at all to send.
    zero = [[0] * size for _ in range(size)]
    out, _ = exchange(group, rank, zero, torch.float32, 7)
    check(out.numel() == 0, "all-zero exchange returned rows")
    # Equal splits (no split sizes): dim 0 divided by the group size.
    inp = torch.arange(size * 2 * 4, dtype=torch.int64).reshape(size * 2, 4) + 1000 * rank
    out = torch.empty_like(inp)
    dist.all_to_all_single(out, inp, group=group)
    want = torch.cat([torch.arange(size * 2 * 4, dtype=torch.int64).reshape(size * 2, 4)[2 * rank:2 * rank + 2]
                      + 1000 * i for i in range(size)])
    check(torch.equal(out, want), "equal splits: wrong bytes")


def test_list_and_async(group, rank, size):
    inputs = [torch.full((j + 1, 2), float(rank * 100 + j)) for j in range(size)]
    outputs = [torch.empty((rank + 1, 2)) for _ in range(size)]
    dist.all_to_all(outputs, inputs, group=group)
    for i, t in enumerate(outputs):
        check(torch.equal(t, torch.full((rank + 1, 2), float(i * 100 + rank))), f"all_to_all: wrong tensor from {i}")
    # Non-contiguous tensors in the list form, as gloo takes them: columns of wider tensors.
    wide_in = [torch.arange(6.).reshape(3, 2) + 10 * rank + 1000 * j for j in range(size)]
    wide_out = [torch.zeros(3, 2) for _ in range(size)]
    dist.all_to_all([w[:, 1] for w in wide_out], [w[:, 0] for w in wide_in], group=group)
    for i, w in enumerate(wide_out):
        want = torch.stack([torch.zeros(3), torch.tensor([0., 2., 4.]) + 10 * i + 1000 * rank], dim=1)
        check(torch.equal(w, want), f"all_to_all, non-contiguous: wrong tensor from {i}: {w.tolist()}")
    # Two calls in flight, waited in reverse order.
    s1, s2 = split_matrix(size, 31), split_matrix(size, 32)
    out1, w1 = exchange(group, rank, s1, torch.bfloat16, 31, async_op=True)
    out2, w2 = exchange(group, rank, s2, torch.int64, 32, async_op=True)
    w2.wait()
    w1.wait()
    check(torch.equal(out1, expected_output(rank, s1, torch.bfloat16, 31)), "async call 1: wrong bytes")
    check(torch.equal(out2, expected_output(rank, s2, torch.int64, 32)), "async call 2: wrong bytes")
    fut = exchange(group, rank, s1, torch.float32, 33, async_op=True)[1].get_future()
    check(torch.equal(fut.wait()[0], expected_output(rank, s1, torch.float32, 33)), "future: wrong result")


def test_compile(group, rank, size):
    """torch.compile-d code that calls the collective: Dynamo puts it in the graph (the functional
    all_to_all_single, no graph break), and the compiled code runs it on the executor."""
    s = split_matrix(size, 61)
    send, recv = s[rank], [s[i][rank] for i in range(size)]

    def dispatch(x):
        out = x.new_empty((sum(recv),) + ROW)
        dist.all_to_all_single(out, x * 2, recv, send, group=group)
        return out + 1

    inp = rank_input(rank, sum(send), torch.float32, 61)
    want = expected_output(rank, s, torch.float32, 61) * 2 + 1
    explained = torch._dynamo.explain(dispatch)(inp)
    check(explained.graph_break_count == 0 and explained.graph_count == 1,
          f"torch.compile: {explained.graph_count} graphs, breaks: {explained.break_reasons}")
    check("all_to_all_single" in explained.graphs[0].code,
          f"the collective is not in the graph: {explained.graphs[0].code}")
    compiled = torch.compile(dispatch, backend=COMPILE_BACKEND)
    for _ in range(2):  # compiles once, then runs the compiled code
        before = fast_torch.describe(group)["operations"]
        check(torch.equal(compiled(inp), want), f"torch.compile ({COMPILE_BACKEND}): wrong bytes")
        check(fast_torch.describe(group)["operations"] == before + 1, "the compiled call did not run on the executor")


def test_errors(group, rank, size):
    # Mismatched splits between ranks: rank 1 expects one row more from rank 0 than rank 0 sends.
    s = split_matrix(size, 41)
    inp = rank_input(rank, sum(s[rank]), torch.float32, 41)
    recv = [s[i][rank] for i in range(size)]
    if rank == 1:
        recv[0] += 1
    out = torch.empty((sum(recv),) + ROW)
    t0 = time.monotonic()
    expect_error(lambda: dist.all_to_all_single(out, inp, recv, s[rank], group=group),
                 "fast backend", f"rank {rank}", "rank 1 expects", "rows of 12 bytes")
    check(time.monotonic() - t0 < 10, "the mismatch took more than 10 s to report")
    # Bad arguments on one rank only: its own error here, that rank's error everywhere else.
    send = list(s[rank])
    if rank == size - 1:
        send[0] += 1  # splits no longer add up to the input's rows
    fragments = ["input_split_sizes add up to"] + ([] if rank == size - 1 else
                                                    ["another rank could not run this call", f"rank {size - 1}"])
    expect_error(lambda: dist.all_to_all_single(torch.empty((sum(s[i][rank] for i in range(size)),) + ROW), inp,
                                                [s[i][rank] for i in range(size)], send, group=group), *fragments)
    # A non-contiguous input on rank 0: ValueError there, as with gloo; the others learn why.
    wide = torch.zeros(size * 2, 2)
    given = wide[::2] if rank == 0 else wide[:size]
    if rank == 0:
        expect_error(lambda: dist.all_to_all_single(torch.empty(size, 2), given, group=group),
                     "Tensors must be contiguous", "the input", error=ValueError)
    else:
        expect_error(lambda: dist.all_to_all_single(torch.empty(size, 2), given, group=group),
                     "another rank could not run this call", "rank 0", "Tensors must be contiguous")
    # A non-contiguous output (gloo would write it as if contiguous): ValueError on every rank.
    expect_error(lambda: dist.all_to_all_single(torch.empty(2, size).t(), torch.zeros(size, 2), group=group),
                 "Tensors must be contiguous", "the output", error=ValueError)
    # The group still works.
    out, _ = exchange(group, rank, s, torch.float32, 42)
    check(torch.equal(out, expected_output(rank, s, torch.float32, 42)), "after the errors: wrong bytes")


def test_fallback(group, rank, size, gpus):
    t = torch.tensor([float(rank)])
    dist.all_reduce(t, group=group)  # the inner gloo group
    check(t.item() == size * (size - 1) / 2, "all_reduce through the fallback group")
    gathered = torch.empty(size)
    dist.all_gather_into_tensor(gathered, torch.tensor([float(rank)]), group=group)
    check(gathered.tolist() == [float(r) for r in range(size)], f"all_gather_into_tensor: {gathered.tolist()}")
    dist.barrier(group=group)
    bare = dist.new_group(backend="fast", pg_options=Options(gpus_per_server=gpus, fallback="none"))
    expect_error(lambda: dist.all_reduce(t, group=bare), "not supported by the fast backend", f"rank {rank}")
    # A call in flight whose Work and tensors Python has dropped, then the group goes: the worker
    # drops the last references (which needs the GIL) while the group is destroyed.
    s = split_matrix(size, 51)
    exchange(bare, rank, s, torch.float32, 51, async_op=True)
    dist.destroy_process_group(bare)
    del bare


def test_timeout(rank, size, gpus):
    """Rank 0 skips a call: the others fail within the group's timeout, with no hang; before
    that, Work.wait(timeout) gives up on the call still in flight."""
    group = dist.new_group(backend="fast", timeout=datetime.timedelta(seconds=3),
                           pg_options=Options(gpus_per_server=gpus))
    if rank != 0:
        t0 = time.monotonic()
        work = dist.all_to_all_single(torch.empty(size, 2), torch.zeros(size, 2), group=group, async_op=True)
        expect_error(lambda: work.wait(datetime.timedelta(milliseconds=200)), "did not complete within 200 ms")
        expect_error(work.wait, "fast backend", f"rank {rank}")
        expect_error(work.get_future().wait, "fast backend", f"rank {rank}")
        elapsed = time.monotonic() - t0
        check(elapsed < 30, f"the timeout took {elapsed:.1f} s (group timeout 3 s)")
    dist.barrier()  # the default (gloo) group
    dist.destroy_process_group(group)


def test_registration(group, rank, size, gpus):
    """One backend object serves the group's CPU and CUDA tensors."""
    check(dist.Backend.backend_capability["fast"] == ["cpu", "cuda"],
          f"devices: {dist.Backend.backend_capability['fast']}")
    cpu, cuda = (group._get_backend(torch.device(d)) for d in ("cpu", "cuda"))
    check(cpu.name() == "fast" and cuda is cpu, f"the group's backends: {cpu.name()} for cpu, {cuda.name()} for cuda")
    info = fast_torch.describe(group)
    check(info["servers"] == size // gpus and info["gpus_per_server"] == gpus, f"server grouping: {info}")


def run_rank(rank, size, args):
    # A rank still running at the deadline prints where every thread is and exits.
    faulthandler.dump_traceback_later(args.deadline, exit=True)
    dist.init_process_group("gloo")  # the rendezvous that torchrun put in the environment
    group = dist.new_group(backend="fast", pg_options=Options(gpus_per_server=args.gpus_per_server, flow=args.flow))
    test_registration(group, rank, size, args.gpus_per_server)
    for test in (test_uneven, test_empty_and_equal, test_list_and_async, test_compile, test_errors):
        test(group, rank, size)
        dist.barrier()
        if rank == 0:
            print(f"{test.__name__}: ok", flush=True)
    test_fallback(group, rank, size, args.gpus_per_server)
    test_timeout(rank, size, args.gpus_per_server)
    if rank == 0:
        print("test_fallback, test_timeout: ok", flush=True)
    dist.destroy_process_group(group)
    dist.destroy_process_group()


def test_options():
    """Options and FAST_TORCH_* variables are checked before any collective, naming the culprit."""
    got = Options(scheduler="direct").resolve({"FAST_TORCH_SCHEDULER": "fast", "FAST_TORCH_GPUS_PER_SERVER": "4"},
                                             presets=_C.preset)
    check(got["scheduler"] == "direct" and got["gpus_per_server"] == 4, f"option precedence: {got}")
    check(got["scale_out_gbps"] == _C.preset("h200")["scale_out_gbps"], "preset figures")
    got = Options(preset="mi300x", scale_out_gbps=0.0125).resolve({}, presets=_C.preset)
    check(got["scale_out_gbps"] == 0.0125 and got["scale_up_gbps"] == _C.preset("mi300x")["scale_up_gbps"],
          f"preset and override: {got}")
    for options, environ, fragment in [
        (Options(scheduler="bogus"), {}, "Options.scheduler must be one of automatic, fast, direct, got 'bogus'"),
        (Options(), {"FAST_TORCH_FLOW": "fast"}, "FAST_TORCH_FLOW must be one of rendezvous, credits"),
        (Options(), {"FAST_TORCH_GPUS_PER_SERVER": "four"}, "FAST_TORCH_GPUS_PER_SERVER must be an integer"),
        (Options(gpus_per_server=-2), {}, "Options.gpus_per_server must be 0"),
        (Options(scale_out_gbps=0), {}, "scale_out_gbps must be positive"),
        (Options(), {"FAST_TORCH_ALPHA_OUT_US": "nan"}, "FAST_TORCH_ALPHA_OUT_US must be finite"),
        (Options(), {"FAST_TORCH_PRESET": "a100"}, "FAST_TORCH_PRESET must be one of h200, mi300x"),
    ]:
        try:
            options.resolve(environ, presets=_C.preset)
        except ValueError as e:
            check(fragment in str(e), f"expected {fragment!r}, got {e}")
        else:
            raise AssertionError(f"no error for {options} {environ}")
    check("FAST" in dist.Backend._plugins, "the backend is not registered")
    print("test_options: ok", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gpus-per-server", type=int, default=2, help="ranks per emulated server")
    parser.add_argument("--flow", default="rendezvous", help="rendezvous or credits")
    parser.add_argument("--deadline", type=float, default=240, help="seconds before a rank dumps its stacks and exits")
    args = parser.parse_args()
    if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
        parser.error("start it with torchrun (RANK and WORLD_SIZE are not set)")
    rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    if size % args.gpus_per_server:
        parser.error(f"--gpus-per-server {args.gpus_per_server} does not divide the {size} ranks")
    if rank == 0:
        test_options()
    run_rank(rank, size, args)
    if rank == 0:
        print(f"all ranks passed ({size} processes, {args.gpus_per_server} per server, {args.flow})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
