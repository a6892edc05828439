#!/usr/bin/env python3
"""How far SimGrid and the cost model part: runs fast-simgrid over a grid of clusters,
workloads, sizes and seeds and summarises SimGrid's time over the model's prediction per
scheduler (median, min, max, and how often SimGrid is slower, i.e. the model optimistic).

    examples/simgrid/sweep.py [--build build] [--shapes 2x1,2x4,...] [--workloads uniform,...]
        [--bytes 1M,16M,256M] [--seeds 1,2,3] [--schedulers fast,direct,...] [--jobs N]
        [--csv rows.csv] [--markdown]

Every case is one fast-simgrid run (all schedulers of the case in one engine, every plan
verified); the defaults, 396 runs of at most 32 GPUs, take about a minute on one core. The
extremes are printed with the command that reproduces them."""
import argparse
import concurrent.futures
import csv
import itertools
import statistics
import subprocess
import sys
import tempfile

SHAPES = "2x1,2x4,2x8,4x1,4x2,4x4,4x8,6x1,8x1,8x2,8x4"
WORKLOADS = "uniform,zipf:0.8,zipf:1.5,moe"
SCHEDULERS = "fast,fast:exact,direct,spreadout"
OPTIMISTIC = 1.001  # SimGrid more than 0.1% slower than the model: the model was optimistic


def options(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default="build", help="build directory holding examples/simgrid/fast-simgrid")
    p.add_argument("--shapes", default=SHAPES, help="SERVERSxGPUS, comma-separated (default %(default)s)")
    p.add_argument("--workloads", default=WORKLOADS, help="fast-simgrid workloads (default %(default)s)")
    p.add_argument("--bytes", default="1M,16M,256M", help="bytes per GPU (default %(default)s)")
    p.add_argument("--seeds", default="1,2,3", help="generator seeds (default %(default)s)")
    p.add_argument("--schedulers", default=SCHEDULERS, help="passed to fast-simgrid (default %(default)s)")
    p.add_argument("--jobs", type=int, default=1, help="fast-simgrid runs at a time (default 1)")
    p.add_argument("--csv", help="also write every row, with its case, to this file")
    p.add_argument("--markdown", action="store_true", help="print the summary as a markdown table")
    o = p.parse_args(argv)
    try:
        o.shape_list = [tuple(int(v) for v in s.split("x")) for s in o.shapes.split(",")]
        o.seed_list = [int(s) for s in o.seeds.split(",")]
    except ValueError:
        p.error(f"--shapes wants SERVERSxGPUS,... and --seeds integers; got '{o.shapes}' and '{o.seeds}'")
    if any(len(s) != 2 or min(s) < 1 for s in o.shape_list) or o.jobs < 1:
        p.error(f"every shape needs servers and GPUs of at least 1 ('{o.shapes}'), and --jobs at least 1")
    return o


def case_args(servers, gpus, workload, size, seed):
    return ["--servers", str(servers), "--gpus", str(gpus), "--workload", workload,
            "--bytes-per-gpu", size, "--seed", str(seed)]


def run_case(binary, schedulers, case):
    args = case_args(*case)
    with tempfile.NamedTemporaryFile("r", suffix=".csv") as out:
        cmd = [binary, *args, "--schedulers", schedulers, "--csv", out.name]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
            sys.exit(f"sweep.py: fast-simgrid {' '.join(args)} failed (exit {done.returncode}): {' / '.join(tail)}")
        rows = list(csv.DictReader(out))
    for r in rows:
        if r["verified"] != "yes":
            sys.exit(f"sweep.py: {r['scheduler']} plan of fast-simgrid {' '.join(args)} did not verify")
        r["case"] = " ".join(args)
        r["ratio"] = float(r["simgrid_us"]) / float(r["model_us"])
    return rows


def summarise(rows, scheduler_order):
    out = []
    for s in scheduler_order:
        mine = [r for r in rows if r["scheduler"] == s]
        if not mine:
            continue
        ratios = [r["ratio"] for r in mine]
        lo = min(mine, key=lambda r: r["ratio"])
        hi = max(mine, key=lambda r: r["ratio"])
        out.append({"scheduler": s, "cases": len(mine), "median": statistics.median(ratios),
                    "min": lo["ratio"], "max": hi["ratio"], "min_case": lo["case"], "max_case": hi["case"],
                    "optimistic": sum(x > OPTIMISTIC for x in ratios),
                    "over2": sum(abs(x - 1) > 0.02 for x in ratios)})
    return out


def markdown(summary):
    lines = ["| scheduler | cases | SimGrid / model: median | min | max | model optimistic (> 0.1%) "
             "| off by more than 2% |", "|---|---:|---:|---:|---:|---:|---:|"]
    for s in summary:
        lines.append(f"| {s['scheduler']} | {s['cases']} | {s['median']:.4f} | {s['min']:.4f} | {s['max']:.4f} "
                     f"| {s['optimistic']} | {s['over2']} |")
    lines.append("")
    for s in summary:  # the ends that depart from 1, with the command that shows them
        ends = [f"{which} {s[key]:.4f} (`fast-simgrid {s[key + '_case']}`)"
                for which, key in (("lowest", "min"), ("highest", "max")) if round(s[key], 4) != 1]
        if ends:
            lines.append(f"- {s['scheduler']}: " + ", ".join(ends))
    return "\n".join(lines)


def main(argv):
    o = options(argv)
    binary = f"{o.build}/examples/simgrid/fast-simgrid"
    cases = list(itertools.product(o.shape_list, o.workloads.split(","), o.bytes.split(","), o.seed_list))
    cases = [(sv, g, w, b, seed) for (sv, g), w, b, seed in cases]
    rows = []
    try:
        with concurrent.futures.ThreadPoolExecutor(o.jobs) as pool:
            for k, got in enumerate(pool.map(lambda c: run_case(binary, o.schedulers, c), cases), 1):
                rows.extend(got)
                if sys.stderr.isatty():
                    print(f"\rsweep.py: {k}/{len(cases)} cases", end="", file=sys.stderr)
    except FileNotFoundError:
        sys.exit(f"sweep.py: {binary} not found (build it: meson compile -C {o.build} examples/simgrid/fast-simgrid)")
    if sys.stderr.isatty():
        print("\r\033[K", end="", file=sys.stderr)
    if o.csv:
        with open(o.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
            w.writeheader()
            w.writerows(rows)
    summary = summarise(rows, [s for s in o.schedulers.split(",")])
    if o.markdown:
        print(markdown(summary))
        return
    for s in summary:
        print(f"{s['scheduler']:<12} {s['cases']:4d} cases: SimGrid / model median {s['median']:.4f}, "
              f"min {s['min']:.4f} ({s['min_case']}), max {s['max']:.4f} ({s['max_case']}); "
              f"model optimistic in {s['optimistic']}, off by more than 2% in {s['over2']}")


if __name__ == "__main__":
    main(sys.argv[1:])
