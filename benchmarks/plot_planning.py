#!/usr/bin/env python3
"""Log-log chart (SVG, standard library only) of planning time against GPU count from
planner_bench's JSON output, with the targets of docs/performance.md as a dashed line.

    build/benchmarks/planner_bench --benchmark_filter='plan_reused/(zipf|moe)/' \\
        --benchmark_repetitions=5 --benchmark_format=json > planning.json
    python3 benchmarks/plot_planning.py planning.json [more.json ...] docs/figures/planning-time.svg

Each point is the median over the repetitions of plan_reused/WORKLOAD/SERVERS (8 GPUs per
server); with several JSON files, a later file's points replace an earlier one's."""
import json
import math
import statistics
import sys

GPUS_PER_SERVER = 8
TARGET_US = {4: 10, 8: 40, 16: 150, 32: 600, 64: 2500, 128: 12000}  # docs/performance.md
COLOURS = {"zipf": "#1f77b4", "moe": "#ff7f0e"}
SCALE = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}


def medians(paths):
    runs = {}  # (workload, servers) -> times in us
    for path in paths:
        seen = {}
        try:
            with open(path) as f:
                for b in json.load(f)["benchmarks"]:
                    parts = b.get("run_name", b["name"]).split("/")
                    if b.get("run_type") != "iteration" or parts[0] != "plan_reused" or parts[1] not in COLOURS:
                        continue
                    key = (parts[1], int(parts[2]))
                    seen.setdefault(key, []).append(b["real_time"] * SCALE[b["time_unit"]])
        except OSError as e:
            sys.exit(f"plot_planning.py: cannot read {path}: {e.strerror}")
        except (ValueError, KeyError, IndexError, TypeError, AttributeError) as e:  # one line, no traceback
            sys.exit(f"plot_planning.py: {path} is not planner_bench JSON output ({type(e).__name__}: {e})")
        runs.update(seen)
    return {k: statistics.median(v) for k, v in runs.items()}


def main(paths, dst):
    points = medians(paths)
    if not points:
        sys.exit("plot_planning.py: no plan_reused/(zipf|moe)/N results in " + ", ".join(paths))
    gpus = sorted({s * GPUS_PER_SERVER for _, s in points} | {s * GPUS_PER_SERVER for s in TARGET_US})
    values = list(points.values()) + list(TARGET_US.values())
    lo, hi = math.floor(math.log10(min(values))), math.ceil(math.log10(max(values)))
    w, h, left, right, top, bottom = 640, 420, 80, 150, 50, 60
    pw, ph = w - left - right, h - top - bottom
    gx0, gx1 = math.log2(gpus[0]), math.log2(gpus[-1])
    x = lambda g: left + (math.log2(g) - gx0) / (gx1 - gx0) * pw
    y = lambda us: top + ph - (math.log10(us) - lo) / (hi - lo) * ph
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">',
           f'<rect width="{w}" height="{h}" fill="white"/>',
           f'<text x="{left + pw / 2}" y="24" text-anchor="middle" font-size="15">Planning time (one thread, '
           f'reused planner), median</text>']
    for e in range(lo, hi + 1):
        label = f"{10 ** e:g} us" if e < 3 else f"{10 ** (e - 3):g} ms"
        out.append(f'<line x1="{left}" x2="{left + pw}" y1="{y(10 ** e):.1f}" y2="{y(10 ** e):.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{left - 6}" y="{y(10 ** e) + 4:.1f}" text-anchor="end">{label}</text>')
    for g in gpus:
        out.append(f'<line x1="{x(g):.1f}" x2="{x(g):.1f}" y1="{top}" y2="{top + ph}" stroke="#eee"/>')
        out.append(f'<text x="{x(g):.1f}" y="{top + ph + 18}" text-anchor="middle">{g}</text>')
    out.append(f'<text x="{left + pw / 2}" y="{h - 14}" text-anchor="middle">GPUs (8 per server, log scale)</text>')

    def series(pts, colour, dashed=False):
        path = " ".join(f"{'M' if k == 0 else 'L'}{x(g):.1f},{y(t):.1f}" for k, (g, t) in enumerate(pts))
        dash = ' stroke-dasharray="6,4"' if dashed else ""
        out.append(f'<path d="{path}" fill="none" stroke="{colour}" stroke-width="2"{dash}/>')
        if not dashed:
            out.extend(f'<circle cx="{x(g):.1f}" cy="{y(t):.1f}" r="3.5" fill="{colour}"/>' for g, t in pts)

    series([(s * GPUS_PER_SERVER, t) for s, t in sorted(TARGET_US.items())], "#444", dashed=True)
    legend = [("target", "#444", True)]
    for name, colour in COLOURS.items():
        pts = sorted((s * GPUS_PER_SERVER, t) for (n, s), t in points.items() if n == name)
        if pts:
            series(pts, colour)
            legend.append((name if name == "moe" else "zipf:0.8", colour, False))
    for k, (name, colour, dashed) in enumerate(legend):
        ly = top + 10 + k * 20
        dash = ' stroke-dasharray="6,4"' if dashed else ""
        out.append(f'<line x1="{left + pw + 16}" x2="{left + pw + 46}" y1="{ly}" y2="{ly}" stroke="{colour}" stroke-width="2"{dash}/>')
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
