#!/usr/bin/env python3
"""Plots a training log: losses, test accuracy and the loss scale.

    python3 scripts/plot_training_log.py train.log curves.png
    python3 scripts/plot_training_log.py fp32.log fp16.log curves.png --x seconds

Reads Cortado's, BVLC Caffe's and NVCaffe's logs through parse_log.py (same
folder), so runs of different frameworks or precisions share one figure,
each log in its own color. Panels, top to bottom:
  - loss: the smoothed training loss (solid) and each test net output whose
    name contains "loss" (dashed), on a log axis;
  - test outputs whose name contains "accuracy", where any log has them;
  - the loss scale (log2 axis) with a cross at each skipped update, where any
    log has dynamic or static loss scaling.
The x axis is the iteration, or with `--x seconds` the time since the log's
first line. Needs matplotlib (Debian: python3-matplotlib); it draws with the
Agg backend and never opens a window.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import parse_log  # noqa: E402


def main(argv):
    p = argparse.ArgumentParser(description="Plot Cortado or Caffe training logs.")
    p.add_argument("logs", nargs="+", metavar="LOG", help="training logs")
    p.add_argument("output", metavar="OUT.png", help="the image to write (its suffix picks the format)")
    p.add_argument("--x", choices=("iters", "seconds"), default="iters", help="the x axis (default iters)")
    p.add_argument("--title", default=None)
    args = p.parse_args(argv[1:])
    try:
        logs = [(path, parse_log.parse(path)) for path in args.logs]
    except parse_log.LogError as e:
        sys.stderr.write("plot_training_log.py: %s\n" % e)
        return 1
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.stderr.write("plot_training_log.py: needs matplotlib (Debian: python3-matplotlib)\n")
        return 1

    key = "NumIters" if args.x == "iters" else "Seconds"
    has_acc = any(n for _, log in logs for n in log.test_outputs if "accuracy" in n)
    has_scale = any(log.skips or any("LossScale" in r for r in log.train) for _, log in logs)
    panels = 1 + has_acc + has_scale
    fig, axes = plt.subplots(panels, 1, figsize=(8, 3 * panels), sharex=True, squeeze=False)
    axes = [a[0] for a in axes]
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]

    loss_ax = axes[0]
    acc_ax = axes[1] if has_acc else None
    scale_ax = axes[-1] if has_scale else None
    for i, (path, log) in enumerate(logs):
        color = colors[i % len(colors)]
        label = os.path.basename(path)
        rows = [r for r in log.train if r["SmoothedLoss"] > 0]
        if rows:
            loss_ax.plot([r[key] for r in rows], [r["SmoothedLoss"] for r in rows], color=color,
                         label=label + " train")
        for n in log.test_outputs:
            pts = [(r[key], r[n]) for r in log.test if n in r]
            if "loss" in n and pts and all(v > 0 for _, v in pts):
                loss_ax.plot(*zip(*pts), color=color, linestyle="--", marker=".", label="%s test %s" % (label, n))
            if "accuracy" in n and acc_ax is not None and pts:
                acc_ax.plot(*zip(*pts), color=color, marker=".", label="%s %s" % (label, n))
        if scale_ax is not None:
            pts = [(r[key], r["LossScale"]) for r in log.train if "LossScale" in r]
            if pts:
                scale_ax.step(*zip(*pts), where="post", color=color, label=label)
            if log.skips:
                if key == "NumIters":
                    xs = [s[0] for s in log.skips]
                else:  # a skip's time: that of the nearest display at or before it
                    xs = [max([r["Seconds"] for r in log.train if r["NumIters"] <= s[0]] or [0]) for s in log.skips]
                scale_ax.plot(xs, [s[1] for s in log.skips], "x", color=color, label=label + " skipped update")

    loss_ax.set_yscale("log")
    loss_ax.set_ylabel("loss")
    loss_ax.grid(True, which="both", alpha=0.3)
    loss_ax.legend(fontsize="small")
    if acc_ax is not None:
        acc_ax.set_ylabel("test accuracy")
        acc_ax.grid(True, alpha=0.3)
        acc_ax.legend(fontsize="small")
    if scale_ax is not None:
        scale_ax.set_yscale("log", base=2)
        scale_ax.set_ylabel("loss scale")
        scale_ax.grid(True, alpha=0.3)
        scale_ax.legend(fontsize="small")
    axes[-1].set_xlabel("iteration" if key == "NumIters" else "seconds")
    if args.title:
        fig.suptitle(args.title)
    fig.tight_layout()
    try:
        fig.savefig(args.output, dpi=100)
    except (OSError, ValueError) as e:
        sys.stderr.write("plot_training_log.py: %s: cannot write the plot: %s\n" % (args.output, e))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
