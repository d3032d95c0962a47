#!/usr/bin/env python3
"""Tests of scripts/parse_log.py and scripts/plot_training_log.py.

    python3 tests/scripts/parse_log_test.py TRAINER [parse|plot]

"parse" trains a small FP16 net with the real trainer (dynamic loss scaling
started so high that the first updates overflow) and checks the tables
against what the solver settings imply; it also reads a BVLC Caffe log and
bad input. "plot" draws the real log; it exits 77 (ctest's SKIPPED) where no
python3 with matplotlib exists. Standard library only.
"""
import atexit
import csv
import io
import math
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SCRIPTS = os.path.join(ROOT, "scripts")
sys.path.insert(0, SCRIPTS)
import parse_log  # noqa: E402

TRAINER = None

NET = """
name: "TinyFp16"
default_forward_type: FLOAT16
default_backward_type: FLOAT16
layer {
  name: "data" type: "DummyData" top: "data" top: "label"
  dummy_data_param {
    shape { dim: 8 dim: 1 dim: 6 dim: 6 }
    shape { dim: 8 }
    data_filler { type: "gaussian" std: 1 }
    data_filler { type: "constant" value: 3 }
  }
}
layer {
  name: "ip1" type: "InnerProduct" bottom: "data" top: "ip1"
  inner_product_param { num_output: 16 weight_filler { type: "xavier" } }
}
layer { name: "relu1" type: "ReLU" bottom: "ip1" top: "ip1" }
layer {
  name: "ip2" type: "InnerProduct" bottom: "ip1" top: "ip2"
  inner_product_param { num_output: 5 weight_filler { type: "xavier" } }
}
layer {
  name: "accuracy" type: "Accuracy" bottom: "ip2" bottom: "label" top: "accuracy"
  include { phase: TEST }
}
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip2" bottom: "label" top: "loss" }
"""

# 2^24 times a loss near log(5) overflows FP16's 65504 in the first
# gradients: updates are skipped and the scale halves until they fit; with
# a window of 3 clean steps it then grows again.
SOLVER = """
net: "net.prototxt"
test_iter: 2
test_interval: 4
base_lr: 0.1
momentum: 0.9
lr_policy: "inv"
gamma: 0.01
power: 0.75
display: 1
max_iter: 14
random_seed: 1
snapshot_after_train: false
dynamic_loss_scale: true
loss_scale_init: 16777216
loss_scale_window: 3
"""

MAX_ITER, DISPLAY, TEST_INTERVAL = 14, 1, 4
BASE_LR, GAMMA, POWER = 0.1, 0.01, 0.75


def tempdir(prefix):
    d = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, d, True)
    return d


def write_log(prefix, name, text):
    """A log file `name` holding `text` in a new temporary folder: (folder, path)."""
    d = tempdir(prefix)
    path = os.path.join(d, name)
    with open(path, "w") as f:
        f.write(text)
    return d, path


def read_csv(path):
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    return rows[0], [dict(zip(rows[0], r)) for r in rows[1:]]


def run(args, **kw):
    return subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300, **kw)


_trained = {}


def trained_log():
    """Trains once per process; returns (folder, log path)."""
    if not _trained:
        d = tempdir("parse_log_test.")
        with open(os.path.join(d, "net.prototxt"), "w") as f:
            f.write(NET)
        with open(os.path.join(d, "solver.prototxt"), "w") as f:
            f.write(SOLVER)
        r = run([TRAINER, "train", "--solver=solver.prototxt"], cwd=d)
        if r.returncode != 0:
            raise AssertionError("trainer train failed (%d):\n%s" % (r.returncode, r.stdout))
        log = os.path.join(d, "train.log")
        with open(log, "w") as f:
            f.write(r.stdout)
        _trained.update(dir=d, log=log)
    return _trained["dir"], _trained["log"]


class RealTrainerLog(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir, cls.log = trained_log()
        r = run([sys.executable, os.path.join(SCRIPTS, "parse_log.py"), cls.log, cls.dir])
        if r.returncode != 0:
            raise AssertionError("parse_log.py failed (%d):\n%s" % (r.returncode, r.stdout))
        cls.train_cols, cls.train = read_csv(cls.log + ".train")
        cls.test_cols, cls.test = read_csv(cls.log + ".test")
        with open(cls.log) as f:
            cls.text = f.read()

    def test_columns(self):
        self.assertEqual(self.train_cols[:4], ["NumIters", "Seconds", "LearningRate", "SmoothedLoss"])
        for c in ("loss", "ImagesPerSecond", "LossScale", "SkippedSteps"):
            self.assertIn(c, self.train_cols)
        self.assertEqual(self.test_cols, ["NumIters", "Seconds", "LearningRate", "accuracy", "loss"])

    def test_a_train_row_per_display_and_the_last_iteration(self):
        # Step displays 0..MAX_ITER-1; Solve logs the loss once more at MAX_ITER.
        self.assertEqual([int(r["NumIters"]) for r in self.train], list(range(0, MAX_ITER, DISPLAY)) + [MAX_ITER])

    def test_learning_rate_follows_the_inv_policy(self):
        for r in self.train[:-1]:
            it = int(r["NumIters"])
            expected = BASE_LR * (1 + GAMMA * it) ** -POWER
            self.assertAlmostEqual(float(r["LearningRate"]), expected, delta=1e-5 * expected, msg="iteration %d" % it)

    def test_a_test_row_per_interval(self):
        # Tests run at iterations that are multiples of test_interval, the
        # last one included when it is one.
        self.assertEqual([int(r["NumIters"]) for r in self.test], list(range(0, MAX_ITER + 1, TEST_INTERVAL)))
        for r in self.test:
            self.assertTrue(0.0 <= float(r["accuracy"]) <= 1.0)
            self.assertGreater(float(r["loss"]), 0.0)
            # A test row's rate is the last one logged before it.
            it = int(r["NumIters"])
            before = [float(t["LearningRate"]) for t in self.train if int(t["NumIters"]) < it]
            if before:
                self.assertEqual(float(r["LearningRate"]), before[-1])

    def test_seconds_start_at_zero_and_never_go_back(self):
        secs = [float(r["Seconds"]) for r in self.train]
        self.assertGreaterEqual(secs[0], 0.0)
        self.assertEqual(secs, sorted(secs))

    def test_train_loss_output_equals_the_smoothed_loss_without_averaging(self):
        # average_loss is 1, so the smoothed loss is the iteration's loss.
        for r in self.train[:-1]:
            self.assertEqual(r["SmoothedLoss"], r["loss"])

    def test_overflow_skips_and_scale_history(self):
        log = parse_log.parse(self.log)
        self.assertGreater(len(log.skips), 0, "loss scale 2^24 should overflow FP16 gradients")
        self.assertEqual(log.skips[0], (0, 16777216.0, 8388608.0))
        for it, before, after in log.skips:
            self.assertEqual(after, before / 2)
        for it, before, after in log.growths:
            self.assertEqual(after, before * 2)
        self.assertGreater(len(log.growths), 0, "3 clean steps should double the scale")
        # Each display shows the scale its step used and the skips so far.
        skipped_by = {}
        for r in self.train[:-1]:
            it = int(r["NumIters"])
            skipped_by[it] = sum(1 for s in log.skips if s[0] <= it)
            self.assertEqual(int(r["SkippedSteps"]), skipped_by[it], "iteration %d" % it)
        self.assertEqual(float(self.train[0]["LossScale"]), 16777216.0)
        self.assertEqual(log.ended, "done")

    def test_summary(self):
        r = run([sys.executable, os.path.join(SCRIPTS, "parse_log.py"), self.log, "--summary"])
        self.assertEqual(r.returncode, 0, r.stdout)
        last = self.test[-1]
        self.assertIn("iterations: %d (Optimization Done)" % MAX_ITER, r.stdout)
        self.assertIn("last test: iteration %d: accuracy = %g" % (int(last["NumIters"]), float(last["accuracy"])), r.stdout)
        log = parse_log.parse(self.log)
        self.assertIn("%d updates skipped" % len(log.skips), r.stdout)
        self.assertIn("%d growths" % len(log.growths), r.stdout)
        self.assertIn("images/s: median", r.stdout)

    def test_mpirun_prefixes_and_foreign_lines_are_skipped(self):
        # The same log with Open MPI's --tag-output prefix and noise between
        # lines gives the same tables.
        tagged = os.path.join(self.dir, "tagged.log")
        with open(tagged, "w") as f:
            for line in self.text.splitlines():
                f.write("[1,0]<stderr>:" + line + "\n")
                f.write("some other program's output: Iteration 99, loss = 5\n")
        a, b = parse_log.parse(self.log), parse_log.parse(tagged)
        self.assertEqual(a.train, b.train)
        self.assertEqual(a.test, b.test)


# A BVLC Caffe log (its format, values made up): the year-less timestamp
# crosses midnight and the turn of the year, "Iteration N (X iter/s, ...)",
# two test nets, and the rate logged after the first display.
CAFFE_LOG = """\
Log file created at: 2016/12/31 23:59:58
I1231 23:59:58.100000 12345 solver.cpp:337] Iteration 0, Testing net (#0)
I1231 23:59:58.500000 12345 solver.cpp:404]     Test net output #0: accuracy = 0.1
I1231 23:59:58.500000 12345 solver.cpp:404]     Test net output #1: loss = 2.3 (* 1 = 2.3 loss)
I1231 23:59:58.600000 12345 solver.cpp:337] Iteration 0, Testing net (#1)
I1231 23:59:58.700000 12345 solver.cpp:404]     Test net output #0: accuracy = 0.12
W1231 23:59:59.000000 12345 net.cpp:100] a warning that is not parsed
I1231 23:59:59.100000 12345 solver.cpp:228] Iteration 0, loss = 2.30259
I1231 23:59:59.100000 12345 solver.cpp:244]     Train net output #0: loss = 2.30259 (* 1 = 2.30259 loss)
I1231 23:59:59.200000 12345 sgd_solver.cpp:106] Iteration 0, lr = 0.01
I0101 00:00:01.100000 12345 solver.cpp:218] Iteration 100 (50 iter/s, 2s/100 iters), loss = 0.25
I0101 00:00:01.100000 12345 solver.cpp:237]     Train net output #0: loss = 0.2 (* 1 = 0.2 loss)
I0101 00:00:01.200000 12345 sgd_solver.cpp:105] Iteration 100, lr = 0.00992565
I0101 00:00:02.000000 12345 solver.cpp:337] Iteration 200, Testing net (#0)
I0101 00:00:02.500000 12345 solver.cpp:404]     Test net output #0: accuracy = 0.9
I0101 00:00:02.500000 12345 solver.cpp:404]     Test net output #1: loss = 0.3 (* 1 = 0.3 loss)
I0101 00:00:02.600000 12345 solver.cpp:337] Iteration 200, Testing net (#1)
I0101 00:00:02.700000 12345 solver.cpp:404]     Test net output #0: accuracy = nan
E0101 00:00:03.000000 12345 solver.cpp:500] something went wrong
"""


class CaffeLog(unittest.TestCase):
    def setUp(self):
        self.dir, self.path = write_log("parse_log_caffe.", "caffe.log", CAFFE_LOG)

    def test_tables(self):
        log = parse_log.parse(self.path)
        self.assertEqual([r["NumIters"] for r in log.train], [0, 100])
        self.assertEqual([r["SmoothedLoss"] for r in log.train], [2.30259, 0.25])
        self.assertEqual([r["loss"] for r in log.train], [2.30259, 0.2])
        self.assertEqual([r["LearningRate"] for r in log.train], [0.01, 0.00992565])
        # Seconds from the first glog line; 23:59:59.1 -> 00:00:01.1 is 2 s.
        self.assertAlmostEqual(log.train[0]["Seconds"], 1.0)
        self.assertAlmostEqual(log.train[1]["Seconds"], 3.0)
        self.assertEqual(log.test_outputs, ["accuracy", "loss", "net1/accuracy"])
        self.assertEqual([r["NumIters"] for r in log.test], [0, 200])
        self.assertEqual(log.test[0]["net1/accuracy"], 0.12)
        self.assertTrue(math.isnan(log.test[1]["net1/accuracy"]))
        # The first test precedes any rate: it takes the first one logged.
        self.assertEqual(log.test[0]["LearningRate"], 0.01)
        self.assertEqual(log.test[1]["LearningRate"], 0.00992565)
        self.assertAlmostEqual(log.test[1]["Seconds"], 3.9)
        self.assertEqual(log.ended, None)
        self.assertEqual(len(log.errors), 1)
        self.assertIn("caffe.log:19: something went wrong", log.errors[0])

    def test_files_and_delimiter(self):
        r = run([sys.executable, os.path.join(SCRIPTS, "parse_log.py"), self.path, self.dir, "--delimiter", ";"])
        self.assertEqual(r.returncode, 0, r.stdout)
        with open(self.path + ".test") as f:
            lines = f.read().splitlines()
        self.assertEqual(lines[0], "NumIters;Seconds;LearningRate;accuracy;loss;net1/accuracy")
        self.assertEqual(lines[1].split(";")[3:], ["0.1", "2.3", "0.12"])
        self.assertEqual(lines[2].split(";")[3:], ["0.9", "0.3", "nan"])
        with open(self.path + ".train") as f:
            self.assertEqual(f.read().splitlines()[0], "NumIters;Seconds;LearningRate;SmoothedLoss;loss")

    def test_summary_says_the_log_has_no_end(self):
        r = run([sys.executable, os.path.join(SCRIPTS, "parse_log.py"), self.path, "--summary"])
        self.assertEqual(r.returncode, 0, r.stdout)
        self.assertIn("iterations: 200 (no end line", r.stdout)
        self.assertIn("best accuracy: 0.9 at iteration 200", r.stdout)
        self.assertIn("error line: ", r.stdout)


# NVCaffe 0.17 adds the epochs its data layer has read to the loss line.
NVCAFFE_LOG = """\
I0523 10:00:00.000000  1234 solver.cpp:356] Iteration 0 (0 iter/s, 1.2s/20 iter), 0/91.0ep, loss = 6.91
I0523 10:00:00.000000  1234 solver.cpp:374]     Train net output #0: loss = 6.91 (* 1 = 6.91 loss)
I0523 10:00:00.100000  1234 sgd_solver.cpp:170] Iteration 0, lr = 0.1, m = 0.9, lrm = 0.01, wd = 0.0001, gs = 1
I0523 10:00:06.000000  1234 solver.cpp:356] Iteration 20 (3.4 iter/s, 5.8s/20 iter), 1.7/91.0ep, loss = 6.9
I0523 10:00:06.000000  1234 solver.cpp:374]     Train net output #0: loss = 6.8 (* 1 = 6.8 loss)
I0523 10:00:06.100000  1234 sgd_solver.cpp:170] Iteration 20, lr = 0.099, m = 0.9, lrm = 0.0099, wd = 0.0001, gs = 1
"""


class NvcaffeLog(unittest.TestCase):
    def test_epoch_field_and_extra_rate_fields(self):
        _, path = write_log("parse_log_nvcaffe.", "nvcaffe.log", NVCAFFE_LOG)
        log = parse_log.parse(path)
        self.assertEqual([r["NumIters"] for r in log.train], [0, 20])
        self.assertEqual([r["SmoothedLoss"] for r in log.train], [6.91, 6.9])
        self.assertEqual([r["loss"] for r in log.train], [6.91, 6.8])
        self.assertEqual([r["LearningRate"] for r in log.train], [0.1, 0.099])


class BadInput(unittest.TestCase):
    def parse_log(self, *args):
        return run([sys.executable, os.path.join(SCRIPTS, "parse_log.py")] + list(args))

    def test_missing_log(self):
        r = self.parse_log("/nonexistent/train.log", "--summary")
        self.assertEqual(r.returncode, 1)
        self.assertIn("parse_log.py: /nonexistent/train.log: cannot read the log", r.stdout)

    def test_log_without_iterations(self):
        d, path = write_log("parse_log_bad.", "empty.log",
                            "I1123 06:58:59.466806 23623 solver.cpp:89] Solving LeNet\nnot a glog line\n")
        r = self.parse_log(path, d)
        self.assertEqual(r.returncode, 1)
        self.assertIn("empty.log: no training or test lines", r.stdout)
        self.assertFalse(os.path.exists(path + ".train"))

    def test_bad_timestamp_names_the_line(self):
        _, path = write_log("parse_log_bad.", "bad.log", "I1123 06:58:59.4 1 solver.cpp:1] Iteration 0, loss = 1\n"
                                                          "I1340 06:58:59.4 1 solver.cpp:1] Iteration 1, loss = 1\n")
        r = self.parse_log(path, "--summary")
        self.assertEqual(r.returncode, 1)
        self.assertIn("bad.log:2: a glog timestamp that is not a date", r.stdout)

    def test_missing_output_folder(self):
        d, path = write_log("parse_log_bad.", "caffe.log", CAFFE_LOG)
        r = self.parse_log(path, os.path.join(d, "no_such_dir"))
        self.assertEqual(r.returncode, 1)
        self.assertIn("no_such_dir: the output folder does not exist", r.stdout)

    def test_usage(self):
        r = self.parse_log("only_a_log.log")
        self.assertEqual(r.returncode, 2)
        self.assertIn("give an output folder, --summary, or both", r.stdout)


def python_with_matplotlib():
    for p in (sys.executable, "python3", "/usr/bin/python3"):
        try:
            if subprocess.run([p, "-c", "import matplotlib"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL).returncode == 0:
                return p
        except OSError:
            pass
    return None


def plot():
    python = python_with_matplotlib()
    if python is None:
        print("SKIPPED: no python3 with matplotlib (Debian: python3-matplotlib)")
        return 77
    d, log = trained_log()
    plot_py = os.path.join(SCRIPTS, "plot_training_log.py")
    failures = 0
    for extra in ([], ["--x", "seconds"]):
        png = os.path.join(d, "curves%s.png" % len(extra))
        r = run([python, plot_py, log, log, png] + extra)
        with open(png, "rb") if os.path.exists(png) else io.BytesIO() as f:
            head = f.read(8)
        if r.returncode != 0 or head != b"\x89PNG\r\n\x1a\n" or os.path.getsize(png) < 10000:
            print("FAILED: plot_training_log.py %s: exit %d, header %r\n%s" % (" ".join(extra), r.returncode, head, r.stdout))
            failures += 1
    r = run([python, plot_py, "/nonexistent.log", os.path.join(d, "x.png")])
    if r.returncode != 1 or "/nonexistent.log: cannot read the log" not in r.stdout:
        print("FAILED: a missing log: exit %d\n%s" % (r.returncode, r.stdout))
        failures += 1
    print("plot_training_log.py: %d failures" % failures)
    return 1 if failures else 0


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[2] not in ("parse", "plot"):
        sys.stderr.write("usage: parse_log_test.py TRAINER parse|plot\n")
        sys.exit(2)
    TRAINER = os.path.abspath(sys.argv[1])
    if sys.argv[2] == "plot":
        sys.exit(plot())
    prog = unittest.main(argv=[sys.argv[0], "-v"], exit=False)
    sys.exit(0 if prog.result.wasSuccessful() else 1)
