#!/usr/bin/env python3
"""Plots the gradient histograms written by `trainer grad_stats --csv=F`.

    python3 scripts/plot_grad_stats.py grad_stats.csv grad_stats.png

Two panels, activation gradients above and weight gradients below: the count
of |g| per power-of-two bucket (floor(log2|g|)) on a log count axis, with the
exact zeros at the left and Inf/NaN at the right, and FP16's landmarks as
vertical lines: its largest value 65504, its smallest normal 2^-14 and its
smallest subnormal 2^-24. What lies left of 2^-24 is flushed to zero in FP16;
the suggested loss scale S shifts everything right by log2(S) buckets.

Only the net-wide rows (scope "net") are plotted; the per-layer rows are in
the same CSV for other plots. Needs matplotlib (Debian: python3-matplotlib);
it draws with the Agg backend and never opens a window.
"""
import csv
import math
import sys


def read(path):
    meta = {}
    hist = {}  # kind -> {"zero": n, "nonfinite": n, exponent: n}
    with open(path, newline="") as f:
        lines = []
        for line in f:
            if line.startswith("#"):
                key, _, value = line[1:].partition(":")
                meta[key.strip()] = value.strip()
            else:
                lines.append(line)
    for row in csv.DictReader(lines):
        if row["scope"] != "net":
            continue
        h = hist.setdefault(row["kind"], {})
        key = int(row["log2_lower"]) if row["bin"] == "exp" else row["bin"]
        h[key] = h.get(key, 0) + int(row["count"])
    return meta, hist


def main(argv):
    if len(argv) != 3:
        sys.stderr.write("usage: plot_grad_stats.py GRAD_STATS.csv OUT.png\n")
        return 2
    csv_path, png_path = argv[1], argv[2]
    try:
        meta, hist = read(csv_path)
    except (OSError, KeyError, ValueError) as e:
        sys.stderr.write("plot_grad_stats.py: %s: cannot read the grad_stats CSV: %s\n" % (csv_path, e))
        return 1
    if not hist:
        sys.stderr.write("plot_grad_stats.py: %s: no net-wide rows (scope 'net')\n" % csv_path)
        return 1

    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.stderr.write("plot_grad_stats.py: matplotlib is not installed for %s "
                         "(Debian: apt-get install python3-matplotlib)\n" % sys.executable)
        return 1

    exps = sorted({e for h in hist.values() for e in h if isinstance(e, int)})
    lo, hi = exps[0], exps[-1]
    zero_x, nonfinite_x = lo - 3, hi + 4
    kinds = [k for k in ("activation", "weight") if k in hist]
    fig, axes = plt.subplots(len(kinds), 1, figsize=(11, 3.6 * len(kinds)), sharex=True, squeeze=False)
    landmarks = [
        (math.log2(65504), "FP16 max 65504", "tab:red"),
        (-14, "FP16 min normal $2^{-14}$", "tab:orange"),
        (-24, "FP16 min subnormal $2^{-24}$", "tab:purple"),
    ]
    for ax, kind in zip(axes[:, 0], kinds):
        h = hist[kind]
        total = sum(h.values())
        xs = [e + 0.5 for e in exps] + [zero_x, nonfinite_x]
        ys = [h.get(e, 0) for e in exps] + [h.get("zero", 0), h.get("nonfinite", 0)]
        colors = ["tab:blue"] * len(exps) + ["tab:gray", "black"]
        keep = [i for i, y in enumerate(ys) if y > 0]
        ax.bar([xs[i] for i in keep], [ys[i] for i in keep], width=0.9,
               color=[colors[i] for i in keep])
        ax.set_yscale("log")
        for x, label, color in landmarks:
            ax.axvline(x, color=color, linestyle="--", linewidth=1.2, label=label)
        ax.set_ylabel("count")
        ax.set_title("%s gradients (%d values)" % (kind, total), fontsize=10, loc="left")
        ax.grid(axis="y", alpha=0.3)
    axes[0, 0].legend(loc="upper right", fontsize=8)
    ticks = list(range(lo - lo % 5, hi + 1, 5))
    ax = axes[-1, 0]
    ax.set_xticks([zero_x] + ticks + [nonfinite_x])
    ax.set_xticklabels(["0"] + ["$2^{%d}$" % t for t in ticks] + ["Inf/NaN"])
    ax.set_xlim(zero_x - 1, nonfinite_x + 1)
    ax.set_xlabel("|gradient| (power-of-two bucket; first and last buckets are open-ended)")
    title = "Gradient histogram of %s" % (meta.get("net") or "the net")
    if meta.get("iterations"):
        title += ", %s iterations in FP32" % meta["iterations"]
    if meta.get("loss_scale_log2"):
        title += "; suggested loss scale $2^{%s}$" % meta["loss_scale_log2"]
    fig.suptitle(title)
    fig.tight_layout()
    try:
        fig.savefig(png_path, dpi=110)
    except OSError as e:
        sys.stderr.write("plot_grad_stats.py: %s: %s\n" % (png_path, e))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
