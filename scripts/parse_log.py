#!/usr/bin/env python3
"""Turns a training log into two CSV tables, as Caffe's tools/extra/parse_log.py.

    python3 scripts/parse_log.py train.log out/            # out/train.log.train, out/train.log.test
    python3 scripts/parse_log.py train.log --summary       # a short report, no files

It reads what `trainer train` logs (glog lines, with or without the year in
the timestamp) and BVLC Caffe's and NVCaffe's logs as well, so one script
compares a Cortado run with a Caffe one. Lines that are not glog lines (a
`mpirun` prefix, other output mixed in) are skipped; a glog prefix further
into a line is found.

`<log>.train` has one row per display: NumIters, Seconds (since the log's
first line), LearningRate, SmoothedLoss (the "Iteration N, loss = X" value,
averaged over `average_loss` iterations), then the train net's outputs by
name, then ImagesPerSecond, LossScale and SkippedSteps where the log has them.
`<log>.test` has one row per test: NumIters, Seconds, LearningRate (the last
one logged before it), then each test net's outputs; the outputs of test net
#k > 0 are named "net<k>/<name>". Cells with no value are empty.

The columns NumIters, Seconds and LearningRate and the output names are
those of Caffe's parser, so plots written for its files read these. Beyond
it: the loss-scale events (updates skipped on Inf/NaN, scale growth) are
counted, and `--summary` prints the last and best test values, the median
images/second and the loss-scale history.

Bad input (no such file, a log with no iteration lines, an output folder
that cannot be written) ends with a message naming the file and exit status 1.
"""
import argparse
import csv
import datetime
import math
import os
import re
import statistics
import sys

# glog: severity, [year]month day, time, thread, file:line] message. Caffe's
# glog has no year (I0523 ...); newer glog writes it (I20261123 ...).
GLOG = re.compile(r"([IWEF])(\d{4})?(\d{2})(\d{2}) (\d{2}):(\d{2}):(\d{2})\.(\d{1,6})\s+\d+ [^\]\s]+:\d+\] (.*)$")
NUM = r"([-+]?(?:(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|(?i:inf|nan)))"

# Caffe prints "Iteration N (X iter/s, Ys/D iters), loss = L", NVCaffe
# "Iteration N (X iter/s, Ys/D iter), E/Fep, loss = L" (epochs where its data
# layer counts them); Cortado and older Caffe print "Iteration N, loss = L".
TRAIN_LOSS = re.compile(r"^Iteration (\d+)(?: \([^)]*\))?,(?: [^,]*ep,)? loss = " + NUM)
LEARNING_RATE = re.compile(r"^Iteration (\d+), lr = " + NUM)
TESTING = re.compile(r"^Iteration (\d+), Testing net \(#(\d+)\)")
OUTPUT = re.compile(r"^\s*(Train|Test) net output #(\d+): (\S+) = " + NUM)
SPEED = re.compile(r"^\s*" + NUM + r" images/s, " + NUM + r" iter/s over the last (\d+) iterations")
LOSS_SCALE = re.compile(r"^\s*loss scale = " + NUM + r", skipped steps = (\d+)")
SKIPPED = re.compile(r"^Iteration (\d+): a weight gradient holds Inf or NaN; update skipped, loss scale "
                     + NUM + r" -> " + NUM)
GROWN = re.compile(r"^Iteration (\d+): (\d+) clean steps, loss scale " + NUM + r" -> " + NUM)
SNAPSHOT = re.compile(r"^Snapshotting to (?:binary proto|HDF5) file (\S+)")
RESTORE = re.compile(r"^Restoring previous solver status from (\S+)")


class LogError(Exception):
    pass


def number(text):
    return float(text)  # float() reads "inf", "-nan" and friends too


class Log:
    """What one log says: train and test rows, loss-scale events, how it ended."""

    def __init__(self):
        self.train = []       # dicts: NumIters, Seconds, LearningRate, ... per display
        self.test = []        # dicts: NumIters, Seconds, LearningRate, outputs
        self.train_outputs = []   # output names in the order first seen
        self.test_outputs = []
        self.skips = []       # (iteration, scale before, scale after)
        self.growths = []     # (iteration, scale before, scale after)
        self.snapshots = []
        self.restored_from = None
        self.ended = None     # "done", "stopped early" or None (the log stops mid-run)
        self.errors = []      # E and F lines, as logged


def _timestamp(m, state):
    """Seconds since the log's first glog line. Without a year in the log,
    a month that goes backwards is taken as the turn of a year."""
    year, month, day = m.group(2), int(m.group(3)), int(m.group(4))
    micro = int(m.group(8).ljust(6, "0"))
    if year is not None:
        y = int(year)
    else:
        y = state.setdefault("year", 2000)  # a leap year, so 0229 parses
        if state.get("month") is not None and month < state["month"]:
            y += 1
            state["year"] = y
        state["month"] = month
    t = datetime.datetime(y, month, day, int(m.group(5)), int(m.group(6)), int(m.group(7)), micro)
    if "start" not in state:
        state["start"] = t
    return (t - state["start"]).total_seconds()


def parse(path):
    try:
        with open(path, errors="replace") as f:
            lines = f.readlines()
    except OSError as e:
        raise LogError("%s: cannot read the log: %s" % (path, e.strerror or e))
    log = Log()
    state = {}
    lr = math.nan          # the last learning rate logged
    train_row = None       # the display being read
    test_row = None        # the test being read (one row for all nets at one iteration)
    test_net = 0
    for lineno, line in enumerate(lines, 1):
        m = GLOG.search(line.rstrip("\n"))
        if not m:
            continue
        try:
            seconds = _timestamp(m, state)
        except ValueError as e:
            raise LogError("%s:%d: a glog timestamp that is not a date: %s" % (path, lineno, e))
        severity, msg = m.group(1), m.group(9)
        if severity in "EF":
            log.errors.append("%s:%d: %s" % (path, lineno, msg))

        t = TRAIN_LOSS.match(msg)
        if t:
            it = int(t.group(1))
            train_row = {"NumIters": it, "Seconds": seconds, "LearningRate": lr, "SmoothedLoss": number(t.group(2))}
            log.train.append(train_row)
            test_row = None
            continue
        t = LEARNING_RATE.match(msg)
        if t:
            lr = number(t.group(2))
            # Cortado and Caffe log the rate after the outputs of the same
            # iteration: it belongs to that row.
            if train_row is not None and train_row["NumIters"] == int(t.group(1)):
                train_row["LearningRate"] = lr
            continue
        t = TESTING.match(msg)
        if t:
            it, test_net = int(t.group(1)), int(t.group(2))
            if test_row is None or test_row["NumIters"] != it or test_net == 0:
                test_row = {"NumIters": it, "Seconds": seconds, "LearningRate": lr}
                log.test.append(test_row)
            continue
        t = OUTPUT.match(msg)
        if t:
            kind, name, value = t.group(1), t.group(3), number(t.group(4))
            if kind == "Train":
                if train_row is None:
                    continue
                row, names = train_row, log.train_outputs
            else:
                if test_row is None:
                    continue
                if test_net > 0:
                    name = "net%d/%s" % (test_net, name)
                row, names = test_row, log.test_outputs
            if name not in names:
                names.append(name)
            row[name] = value
            continue
        t = SPEED.match(msg)
        if t:
            if train_row is not None:
                train_row["ImagesPerSecond"] = number(t.group(1))
            continue
        t = LOSS_SCALE.match(msg)
        if t:
            if train_row is not None:
                train_row["LossScale"] = number(t.group(1))
                train_row["SkippedSteps"] = int(t.group(2))
            continue
        t = SKIPPED.match(msg)
        if t:
            log.skips.append((int(t.group(1)), number(t.group(2)), number(t.group(3))))
            continue
        t = GROWN.match(msg)
        if t:
            log.growths.append((int(t.group(1)), number(t.group(3)), number(t.group(4))))
            continue
        t = SNAPSHOT.match(msg)
        if t:
            log.snapshots.append(t.group(1))
            continue
        t = RESTORE.match(msg)
        if t:
            log.restored_from = t.group(1)
            continue
        if msg.startswith("Optimization Done."):
            log.ended = "done"
        elif msg.startswith("Optimization stopped early."):
            log.ended = "stopped early"
    if not log.train and not log.test:
        raise LogError("%s: no training or test lines (\"Iteration N, loss = X\", \"Testing net\") in %d lines"
                       % (path, len(lines)))
    # Caffe's logs give the first rows no rate (it is logged after them):
    # they take the first one logged, as Caffe's parser does.
    first_lr = next((r["LearningRate"] for r in log.train if not math.isnan(r["LearningRate"])), None)
    if first_lr is not None:
        for rows in (log.train, log.test):
            for r in rows:
                if not math.isnan(r["LearningRate"]):
                    break
                r["LearningRate"] = first_lr
    return log


def train_columns(log):
    cols = ["NumIters", "Seconds", "LearningRate", "SmoothedLoss"] + log.train_outputs
    for extra in ("ImagesPerSecond", "LossScale", "SkippedSteps"):
        if any(extra in r for r in log.train):
            cols.append(extra)
    return cols


def test_columns(log):
    return ["NumIters", "Seconds", "LearningRate"] + log.test_outputs


def _cell(v):
    if v is None:
        return ""
    if isinstance(v, float) and math.isfinite(v) and v == int(v) and abs(v) < 1e15:
        return "%d" % v  # 65536, not 65536.0
    return repr(v) if isinstance(v, float) else str(v)


def write_csv(path, columns, rows, delimiter):
    try:
        with open(path + ".tmp", "w", newline="") as f:
            w = csv.writer(f, delimiter=delimiter, lineterminator="\n")
            w.writerow(columns)
            for r in rows:
                w.writerow([_cell(r.get(c)) for c in columns])
        os.replace(path + ".tmp", path)
    except OSError as e:
        raise LogError("%s: cannot write: %s" % (path, e.strerror or e))


def summary(log, path):
    out = ["log: %s" % path]
    last_iter = max([r["NumIters"] for r in log.train + log.test])
    ended = {"done": "Optimization Done", "stopped early": "stopped early"}.get(log.ended, "no end line (still running, or killed)")
    out.append("iterations: %d (%s)" % (last_iter, ended))
    if log.restored_from:
        out.append("resumed from: %s" % log.restored_from)
    out.append("rows: %d train, %d test" % (len(log.train), len(log.test)))
    if log.test:
        last = log.test[-1]
        values = ", ".join("%s = %g" % (n, last[n]) for n in log.test_outputs if n in last)
        out.append("last test: iteration %d: %s" % (last["NumIters"], values))
        for n in log.test_outputs:
            if "accuracy" not in n:
                continue
            rows = [r for r in log.test if n in r and not math.isnan(r[n])]
            if rows:
                best = max(rows, key=lambda r: r[n])
                out.append("best %s: %g at iteration %d" % (n, best[n], best["NumIters"]))
    speeds = [r["ImagesPerSecond"] for r in log.train if "ImagesPerSecond" in r]
    if speeds:
        out.append("images/s: median %g over %d displays (min %g, max %g)"
                   % (statistics.median(speeds), len(speeds), min(speeds), max(speeds)))
    scales = [r for r in log.train if "LossScale" in r]
    if scales or log.skips or log.growths:
        line = "loss scale:"
        if scales:
            line += " last %g," % scales[-1]["LossScale"]
        line += " %d updates skipped" % len(log.skips)
        if log.skips:
            line += " (iterations %s)" % ", ".join(str(s[0]) for s in log.skips[:10])
            if len(log.skips) > 10:
                line += " ..."
        line += ", %d growths" % len(log.growths)
        out.append(line)
    if log.snapshots:
        out.append("snapshots: %s" % ", ".join(log.snapshots))
    for e in log.errors[:5]:
        out.append("error line: %s" % e)
    return "\n".join(out)


def main(argv):
    p = argparse.ArgumentParser(description="Parse a Cortado or Caffe training log into CSV tables.")
    p.add_argument("logfile", help="the training log (glog lines)")
    p.add_argument("output_dir", nargs="?", help="where <log>.train and <log>.test go")
    p.add_argument("--delimiter", default=",", help="the CSV column delimiter (default ',')")
    p.add_argument("--summary", action="store_true", help="print a short report of the run")
    args = p.parse_args(argv[1:])
    if args.output_dir is None and not args.summary:
        p.error("give an output folder, --summary, or both")
    if len(args.delimiter) != 1:
        p.error("--delimiter must be one character, got %r" % args.delimiter)
    try:
        log = parse(args.logfile)
        if args.output_dir is not None:
            if not os.path.isdir(args.output_dir):
                raise LogError("%s: the output folder does not exist" % args.output_dir)
            base = os.path.join(args.output_dir, os.path.basename(args.logfile))
            write_csv(base + ".train", train_columns(log), log.train, args.delimiter)
            write_csv(base + ".test", test_columns(log), log.test, args.delimiter)
        if args.summary:
            print(summary(log, args.logfile))
    except LogError as e:
        sys.stderr.write("parse_log.py: %s\n" % e)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
