#!/usr/bin/env python3
"""Log-log chart (SVG, standard library only) of planning time against GPU count from
planner_bench's JSON output: what one rank pays (planner::make_rank, the slowest of rank 0, the
busiest rank and a drawn one) and the whole plan, for zipf:0.8 and moe, with the per-rank
targets of docs/performance.md (dashed) and the exchange's lower bound T_lb (dotted).

    build/benchmarks/planner_bench --benchmark_filter='plan_(rank|whole)/' \\
        --benchmark_repetitions=5 --benchmark_format=json > planning.json
    python3 benchmarks/plot_planning.py planning.json [more.json ...] docs/figures/planning-time.svg

Each point is the median over seeds of a case's median over repetitions; with several JSON
files, a later file's runs replace an earlier one's."""
import json
import math
import statistics
import sys

GPUS_PER_SERVER = 8
TARGET_US = {4: 8, 8: 20, 16: 50, 32: 150, 64: 400, 128: 1200}  # per rank, docs/performance.md
COLOURS = {"zipf": "#1f77b4", "moe": "#ff7f0e"}
LABELS = {"zipf": "zipf:0.8", "moe": "moe"}
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


def per_case(runs, kind):
    """{(workload, servers): {seed: us}}: plan_KIND's median over repetitions per seed; for
    plan_rank, the slowest of its three ranks."""
    out = {}
    for name, r in runs.items():
        parts = name.split("/")
        if parts[0] != f"plan_{kind}" or parts[1] not in COLOURS:
            continue
        key, seed = (parts[1], int(parts[2])), int(parts[3])
        value = statistics.median(r["times"])
        cell = out.setdefault(key, {})
        cell[seed] = max(cell.get(seed, 0.0), value)
    return out


def medians(runs, kind):
    """{(workload, servers): median over seeds}."""
    return {k: statistics.median(v.values()) for k, v in per_case(runs, kind).items()}


def lower_bounds(runs):
    """{(workload, servers): median T_lb over seeds} from plan_whole's t_lb_us counter."""
    out = {}
    for name, r in runs.items():
        parts = name.split("/")
        if parts[0] == "plan_whole" and parts[1] in COLOURS and "t_lb_us" in r:
            out.setdefault((parts[1], int(parts[2])), []).append(r["t_lb_us"])
    return {k: statistics.median(v) for k, v in out.items()}


def main(paths, dst):
    runs = read_runs(paths)
    rank, whole, tlb = medians(runs, "rank"), medians(runs, "whole"), lower_bounds(runs)
    if not rank and not whole:
        sys.exit("plot_planning.py: no plan_rank or plan_whole results in " + ", ".join(paths))
    sizes = {s for _, s in list(rank) + list(whole)} | set(TARGET_US)
    gpus = sorted(s * GPUS_PER_SERVER for s in sizes)
    values = list(rank.values()) + list(whole.values()) + list(TARGET_US.values()) + list(tlb.values())
    lo, hi = math.floor(math.log10(min(values))), math.ceil(math.log10(max(values)))
    w, h, left, right, top, bottom = 700, 440, 80, 210, 50, 60
    pw, ph = w - left - right, h - top - bottom
    gx0, gx1 = math.log2(gpus[0]), math.log2(gpus[-1])
    x = lambda g: left + (math.log2(g) - gx0) / (gx1 - gx0) * pw
    y = lambda us: top + ph - (math.log10(us) - lo) / (hi - lo) * ph
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">',
           f'<rect width="{w}" height="{h}" fill="white"/>',
           f'<text x="{left + pw / 2}" y="24" text-anchor="middle" font-size="15">Planning time (one thread, '
           f'reused planner), median over seeds</text>']
    for e in range(lo, hi + 1):
        label = f"{10 ** e:g} us" if e < 3 else f"{10 ** (e - 3):g} ms" if e < 6 else f"{10 ** (e - 6):g} s"
        out.append(f'<line x1="{left}" x2="{left + pw}" y1="{y(10 ** e):.1f}" y2="{y(10 ** e):.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{left - 6}" y="{y(10 ** e) + 4:.1f}" text-anchor="end">{label}</text>')
    for g in gpus:
        out.append(f'<line x1="{x(g):.1f}" x2="{x(g):.1f}" y1="{top}" y2="{top + ph}" stroke="#eee"/>')
        out.append(f'<text x="{x(g):.1f}" y="{top + ph + 18}" text-anchor="middle">{g}</text>')
    out.append(f'<text x="{left + pw / 2}" y="{h - 14}" text-anchor="middle">GPUs (8 per server, log scale)</text>')

    def series(pts, colour, dash=""):
        path = " ".join(f"{'M' if k == 0 else 'L'}{x(g):.1f},{y(t):.1f}" for k, (g, t) in enumerate(pts))
        style = f' stroke-dasharray="{dash}"' if dash else ""
        out.append(f'<path d="{path}" fill="none" stroke="{colour}" stroke-width="2"{style}/>')
        if not dash:
            out.extend(f'<circle cx="{x(g):.1f}" cy="{y(t):.1f}" r="3.5" fill="{colour}"/>' for g, t in pts)

    legend = []
    series([(s * GPUS_PER_SERVER, t) for s, t in sorted(TARGET_US.items())], "#444", "6,4")
    legend.append(("per-rank target", "#444", "6,4"))
    for name, colour in COLOURS.items():
        for points, what, dash in ((rank, "one rank", ""), (whole, "whole plan", "2,3")):
            pts = sorted((s * GPUS_PER_SERVER, t) for (n, s), t in points.items() if n == name)
            if pts:
                if dash:  # the whole plan: a thinner line with markers
                    series(pts, colour, dash)
                    out.extend(f'<rect x="{x(g) - 3:.1f}" y="{y(t) - 3:.1f}" width="6" height="6" fill="{colour}"/>'
                               for g, t in pts)
                else:
                    series(pts, colour)
                legend.append((f"{LABELS[name]}: {what}", colour, dash))
    pts = sorted((s * GPUS_PER_SERVER, t) for (n, s), t in tlb.items() if n == "zipf")
    if pts:
        series(pts, "#2ca02c", "1,3")
        legend.append(("T_lb (zipf:0.8, 256 MiB)", "#2ca02c", "1,3"))
    for k, (name, colour, dash) in enumerate(legend):
        ly = top + 10 + k * 20
        style = f' stroke-dasharray="{dash}"' if dash else ""
        out.append(f'<line x1="{left + pw + 16}" x2="{left + pw + 46}" y1="{ly}" y2="{ly}" stroke="{colour}" stroke-width="2"{style}/>')
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
