#!/usr/bin/env python3
"""Bar chart (SVG, standard library only) of alltoallv_perf --csv output: algbw per scheduler
for each workload, with the emulated bound (size / T_lb) as a line over each group.

    python3 benchmarks/plot_emulated.py results.csv docs/figures/emulated-cluster.svg ["subtitle"]

Multi-matrix workloads are drawn from their summary rows (matrix "med/N"), generators from
their single row; other per-matrix rows are skipped."""
import csv
import re
import sys
from collections import OrderedDict

COLOURS = {"fast": "#1f77b4", "direct": "#ff7f0e", "mpi": "#2ca02c"}
INDEX = re.compile(r"@[0-9]+$")  # file:PATH@I is one matrix; PATH itself may hold '@' (workload.hpp)


def label(workload, matrix):
    if workload.startswith("file:"):
        name = INDEX.sub("", workload).split("/")[-1].replace(".txt", "")
        return f"{name}|median of {matrix.split('/')[-1]} matrices" if matrix.startswith("med/") else name
    return workload


def read(src):
    groups = OrderedDict()  # label -> {scheduler: algbw, "bound": algbw at T_lb}
    with open(src, newline="") as f:
        for r in csv.DictReader(f):
            multi = r["workload"].startswith("file:") and not INDEX.search(r["workload"])
            if multi and not r["matrix"].startswith("med/"):
                continue
            g = groups.setdefault(label(r["workload"], r["matrix"]), {})
            g[r["scheduler"]] = float(r["algbw_MBps"])
            # algbw at the bound: size / T_lb = algbw * time / T_lb
            g["bound"] = float(r["algbw_MBps"]) * float(r["time_over_tlb"])
    return groups


def main(src, dst, subtitle=""):
    try:
        groups = read(src)
    except OSError as e:
        sys.exit(f"plot_emulated.py: cannot read {src}: {e.strerror}")
    except (ValueError, KeyError, TypeError, AttributeError) as e:  # one line, no traceback
        sys.exit(f"plot_emulated.py: {src} is not alltoallv_perf --csv output ({type(e).__name__}: {e})")
    if not groups:
        sys.exit(f"plot_emulated.py: {src} holds no rows to plot")
    scheds = [s for s in COLOURS if any(s in g for g in groups.values())]
    top = max(max(v for v in g.values()) for g in groups.values()) * 1.15
    w, h, left, bottom, topm = 900, 420, 70, 110, 50
    pw, ph = w - left - 20, h - bottom - topm
    gw = pw / len(groups)
    bw = gw * 0.8 / len(scheds)
    y = lambda v: topm + ph - v / top * ph
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">',
           f'<rect width="{w}" height="{h}" fill="white"/>',
           f'<text x="{w / 2}" y="22" text-anchor="middle" font-size="15">All-to-All(v) on an emulated 4 x 8 cluster '
           f'(100 Mbit/s per GPU NIC): median algbw</text>',
           f'<text x="{w / 2}" y="40" text-anchor="middle" fill="#555">{subtitle}</text>']
    step = 10 ** len(str(int(top))) / 10
    while top / step < 4:
        step /= 2
    v = 0.0
    while v <= top:
        out.append(f'<line x1="{left}" x2="{left + pw}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{left - 6}" y="{y(v) + 4:.1f}" text-anchor="end">{v:g}</text>')
        v += step
    out.append(f'<text x="18" y="{topm + ph / 2}" transform="rotate(-90 18 {topm + ph / 2})" '
               f'text-anchor="middle">algbw (MB/s per GPU)</text>')
    for k, (name, g) in enumerate(groups.items()):
        x0 = left + k * gw + gw * 0.1
        for j, s in enumerate(scheds):
            if s not in g:
                continue
            x = x0 + j * bw
            out.append(f'<rect x="{x:.1f}" y="{y(g[s]):.1f}" width="{bw - 2:.1f}" height="{y(0) - y(g[s]):.1f}" '
                       f'fill="{COLOURS[s]}"/>')
            out.append(f'<text x="{x + bw / 2 - 1:.1f}" y="{y(g[s]) - 3:.1f}" text-anchor="middle" '
                       f'font-size="10">{g[s]:.1f}</text>')
        yb = y(g["bound"])
        out.append(f'<line x1="{x0 - 3:.1f}" x2="{x0 + gw * 0.8 + 3:.1f}" y1="{yb:.1f}" y2="{yb:.1f}" '
                   f'stroke="black" stroke-width="2" stroke-dasharray="5,3"/>')
        cx = left + k * gw + gw / 2
        for n, part in enumerate(name.split("|")):  # "|" starts a second line
            out.append(f'<text x="{cx:.1f}" y="{y(0) + 18 + 14 * n:.1f}" text-anchor="middle">{part}</text>')
    out.append(f'<line x1="{left}" x2="{left + pw}" y1="{y(0)}" y2="{y(0)}" stroke="black"/>')
    lx = left + 10
    for s in scheds:
        out.append(f'<rect x="{lx}" y="{h - 40}" width="14" height="14" fill="{COLOURS[s]}"/>')
        out.append(f'<text x="{lx + 20}" y="{h - 28}">{s}</text>')
        lx += 90
    out.append(f'<line x1="{lx}" x2="{lx + 24}" y1="{h - 33}" y2="{h - 33}" stroke="black" stroke-width="2" '
               f'stroke-dasharray="5,3"/>')
    out.append(f'<text x="{lx + 30}" y="{h - 28}">emulated bound (size / T_lb)</text>')
    out.append("</svg>")
    try:
        with open(dst, "w") as f:
            f.write("\n".join(out) + "\n")
    except OSError as e:
        sys.exit(f"plot_emulated.py: cannot write {dst}: {e.strerror}")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        sys.exit(0)
    if len(sys.argv) not in (3, 4):
        print("usage: plot_emulated.py RESULTS.csv OUT.svg [SUBTITLE] (see --help)", file=sys.stderr)
        sys.exit(2)
    main(*sys.argv[1:])
