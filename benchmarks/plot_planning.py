#!/usr/bin/env python3
"""Log-log chart (SVG, standard library only) of what one call costs end to end against GPU
count, from planner_bench's JSON output: (agreement + one rank's planning + predicted exchange)
/ T_lb for each scheduler (fast, automatic, direct) on zipf:0.8 at 256 and 16 MiB per GPU, with
the default's targets of docs/performance.md (grey marks).

    build/benchmarks/planner_bench --benchmark_filter='plan_rank/' \\
        --benchmark_repetitions=5 --benchmark_format=json > planning.json
    python3 benchmarks/plot_planning.py planning.json [more.json ...] docs/figures/planning-time.svg

Each point is the median over seeds of a case's end to end, its planning time the median over
repetitions; with several JSON files, a later file's runs replace an earlier one's."""
import json
import math
import statistics
import sys

GPUS_PER_SERVER = 8
# The default's end-to-end targets per server count (docs/performance.md): (workload, MiB per GPU).
# At 16 MiB from 8 servers on the target is direct's own figure.
E2E_TARGET = {("zipf", 256): {4: 1.03, 8: 1.04, 16: 1.05, 32: 1.06, 64: 1.09, 128: 1.10},
              ("zipf", 16): {4: 1.20},
              ("moe", 256): {4: 1.06, 8: 1.06, 16: 1.06, 32: 1.10, 64: 1.10}}
SCHEDULERS = {"fast": "#1f77b4", "automatic": "#d62728", "direct": "#7f7f7f"}
SIZES = {256: "", 16: "6,4"}  # MiB per GPU: line style
SCALE = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}


def read_runs(paths):
    """{run_name: {"times": [us per repetition], counters}} over all files."""
    runs = {}
    for path in paths:
        seen = {}
        try:
            with open(path) as f:
                for b in json.load(f)["benchmarks"]:
                    if b.get("run_type") != "iteration" or b.get("error_occurred"):
                        continue
                    r = seen.setdefault(b.get("run_name", b["name"]), {"times": []})
                    r["times"].append(b["real_time"] * SCALE[b["time_unit"]])
                    r.update({k: v for k, v in b.items() if isinstance(v, (int, float)) and k not in r})
        except OSError as e:
            sys.exit(f"plot_planning.py: cannot read {path}: {e.strerror}")
        except (ValueError, KeyError, IndexError, TypeError, AttributeError) as e:  # one line, no traceback
            sys.exit(f"plot_planning.py: {path} is not planner_bench JSON output ({type(e).__name__}: {e})")
        runs.update(seen)
    return runs


def end_to_end(r):
    """A plan_rank run's end to end: (agreement + the median planning time + exchange) / T_lb."""
    return (r["agreement_us"] + statistics.median(r["times"]) + r["predicted_us"]) / r["t_lb_us"]


def rank_cases(runs):
    """{(scheduler, workload, MiB, servers): {seed: run}} of plan_rank/SCHED/WL/MIB/SERVERS/SEED."""
    out = {}
    for name, r in runs.items():
        parts = name.split("/")
        if parts[0] != "plan_rank" or len(parts) != 6:
            continue
        out.setdefault((parts[1], parts[2], int(parts[3]), int(parts[4])), {})[int(parts[5])] = r
    return out


def main(paths, dst):
    cases = rank_cases(read_runs(paths))
    points = {}  # (scheduler, MiB) -> [(gpus, median end to end)] on zipf
    for (sch, wl, size, servers), by_seed in cases.items():
        if wl == "zipf" and sch in SCHEDULERS and size in SIZES:
            e2e = statistics.median(end_to_end(r) for r in by_seed.values())
            points.setdefault((sch, size), []).append((servers * GPUS_PER_SERVER, e2e))
    if not points:
        sys.exit("plot_planning.py: no plan_rank/SCHEDULER/zipf results in " + ", ".join(paths))
    targets = [(s * GPUS_PER_SERVER, t) for (wl, size), row in E2E_TARGET.items() if wl == "zipf"
               for s, t in row.items()]
    gpus = sorted({g for pts in points.values() for g, _ in pts} | {g for g, _ in targets})
    values = [v for pts in points.values() for _, v in pts] + [t for _, t in targets]
    lo, hi = math.log10(min(values) * 0.98), math.log10(max(values) * 1.05)
    w, h, left, right, top, bottom = 720, 440, 70, 230, 50, 60
    pw, ph = w - left - right, h - top - bottom
    gx0, gx1 = math.log2(gpus[0]), math.log2(gpus[-1]) if len(gpus) > 1 else math.log2(gpus[0]) + 1
    x = lambda g: left + (math.log2(g) - gx0) / (gx1 - gx0) * pw
    y = lambda v: top + ph - (math.log10(v) - lo) / (hi - lo) * ph
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">',
           f'<rect width="{w}" height="{h}" fill="white"/>',
           f'<text x="{left + pw / 2}" y="24" text-anchor="middle" font-size="15">One call end to end, '
           f'(agreement + one rank\'s planning + exchange) / T_lb, zipf:0.8</text>']
    for v in (1.0, 1.05, 1.1, 1.2, 1.5, 2, 3, 5, 10, 20):
        if lo <= math.log10(v) <= hi:
            out.append(f'<line x1="{left}" x2="{left + pw}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#ddd"/>')
            out.append(f'<text x="{left - 6}" y="{y(v) + 4:.1f}" text-anchor="end">{v:g}</text>')
    for g in gpus:
        out.append(f'<line x1="{x(g):.1f}" x2="{x(g):.1f}" y1="{top}" y2="{top + ph}" stroke="#eee"/>')
        out.append(f'<text x="{x(g):.1f}" y="{top + ph + 18}" text-anchor="middle">{g}</text>')
    out.append(f'<text x="{left + pw / 2}" y="{h - 14}" text-anchor="middle">GPUs (8 per server, log scale)</text>')
    legend = []
    for (sch, size), pts in sorted(points.items(), key=lambda kv: (list(SCHEDULERS).index(kv[0][0]), -kv[0][1])):
        pts.sort()
        colour, dash = SCHEDULERS[sch], SIZES[size]
        path = " ".join(f"{'M' if k == 0 else 'L'}{x(g):.1f},{y(v):.1f}" for k, (g, v) in enumerate(pts))
        style = f' stroke-dasharray="{dash}"' if dash else ""
        out.append(f'<path d="{path}" fill="none" stroke="{colour}" stroke-width="2"{style}/>')
        out.extend(f'<circle cx="{x(g):.1f}" cy="{y(v):.1f}" r="3.5" fill="{colour}"/>' for g, v in pts)
        legend.append((f"{sch}, {size} MiB per GPU", colour, dash))
    out.extend(f'<rect x="{x(g) - 4:.1f}" y="{y(t) - 1.5:.1f}" width="8" height="3" fill="#444"/>' for g, t in targets)
    legend.append(("target of the default", "#444", "target"))
    for k, (name, colour, dash) in enumerate(legend):
        ly = top + 10 + k * 20
        if dash == "target":
            out.append(f'<rect x="{left + pw + 27}" y="{ly - 1.5}" width="8" height="3" fill="{colour}"/>')
        else:
            style = f' stroke-dasharray="{dash}"' if dash else ""
            out.append(f'<line x1="{left + pw + 16}" x2="{left + pw + 46}" y1="{ly}" y2="{ly}" stroke="{colour}" '
                       f'stroke-width="2"{style}/>')
        out.append(f'<text x="{left + pw + 52}" y="{ly + 4}">{name}</text>')
    out.append("</svg>")
    try:
        with open(dst, "w") as f:
            f.write("\n".join(out) + "\n")
    except OSError as e:
        sys.exit(f"plot_planning.py: cannot write {dst}: {e.strerror}")


if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        sys.exit(0 if len(sys.argv) > 1 and sys.argv[1] in ("-h", "--help") else 2)
    main(sys.argv[1:-1], sys.argv[-1])
