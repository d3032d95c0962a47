#!/usr/bin/env python3
"""TensorBoard event files of `trainer train --tensorboard=DIR`, read back
with TensorBoard's own reader.

    python3 tests/scripts/tensorboard_test.py TRAINER BUILD_DIR [unittest arguments]

Trains LeNet on its synthetic stage for 60 iterations in FP16 (display 10,
test_interval 30, dynamic loss scaling started so high that the first steps
overflow and are skipped, and a window short enough that the scale grows
again), then loads the event folder with tensorboard's EventAccumulator and
checks that its scalars are the log's values at the log's iterations, both
ways (every value the log shows is in the file, and the file holds nothing
the log does not show): the loss, the train and test outputs, the rate, the
loss scale, the skipped steps and images/s; and that every learnable
parameter has a gradient histogram at each display with an update. Also:
--tensorboard wins over the solver's tensorboard_dir, the field alone
works, and a folder that cannot be created ends the run with a message
naming it.

The tensorboard package comes from PyPI into BUILD_DIR/pyenv
(scripts/install_python_deps.sh, run by scripts/test.sh). Where it is
missing because PyPI could not be reached (the script leaves
BUILD_DIR/pyenv/UNAVAILABLE saying why), the test is skipped (exit 77,
ctest's SKIPPED); a venv that is merely missing is a failure.
"""
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def _venv_dir(build_dir):
    return os.path.join(os.path.abspath(build_dir), "pyenv")


def _reexec_in_venv():
    """Runs this script under BUILD_DIR/pyenv's python where that is not the
    interpreter already."""
    if len(sys.argv) < 3:
        return
    venv = _venv_dir(sys.argv[2])
    python = os.path.join(venv, "bin", "python3")
    if not os.path.exists(python):
        print("FAILED: no %s: run `bash scripts/install_python_deps.sh %s` (scripts/test.sh does)"
              % (venv, sys.argv[2]))
        sys.exit(1)
    if os.path.realpath(sys.prefix) != os.path.realpath(venv):
        os.execv(python, [python] + sys.argv)


if __name__ == "__main__":
    if len(sys.argv) < 3:
        print(__doc__)
        sys.exit(2)
    _reexec_in_venv()
    TRAINER = os.path.abspath(sys.argv[1])
    BUILD_DIR = sys.argv[2]
    try:
        from tensorboard.backend.event_processing import event_accumulator
    except ImportError as e:
        unavailable = os.path.join(_venv_dir(BUILD_DIR), "UNAVAILABLE")
        if os.path.exists(unavailable):
            with open(unavailable) as f:
                print("SKIPPED: tensorboard is not installed: %s" % f.read().strip())
            sys.exit(77)
        print("FAILED: %s (interpreter %s): run `bash scripts/install_python_deps.sh %s`"
              % (e, sys.executable, BUILD_DIR))
        sys.exit(1)

SOLVER = """
net: "{root}/models/lenet/lenet_train_test.prototxt"
test_iter: 2
test_interval: 30
base_lr: 0.001
momentum: 0.9
weight_decay: 0.0005
lr_policy: "inv"
gamma: 0.0001
power: 0.75
display: 10
max_iter: {max_iter}
random_seed: 1
snapshot_after_train: false
loss_scale_init: 16777216
loss_scale_window: 20
{extra}
"""

# LeNet's learnable parameters and their sizes.
PARAMS = {"grad/conv1/0": 500, "grad/conv1/1": 20, "grad/conv2/0": 25000, "grad/conv2/1": 50,
          "grad/ip1/0": 400000, "grad/ip1/1": 500, "grad/ip2/0": 5000, "grad/ip2/1": 10}


def train(tmp, max_iter=60, flag_dir=None, extra=""):
    solver = os.path.join(tmp, "solver.prototxt")
    with open(solver, "w") as f:
        f.write(SOLVER.format(root=ROOT, max_iter=max_iter, extra=extra))
    args = [TRAINER, "train", "--solver=" + solver, "--stage=synthetic", "--precision=fp16"]
    if flag_dir:
        args.append("--tensorboard=" + flag_dir)
    return subprocess.run(args, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=240)


def log_values(log):
    """{(tag, step): value} of the log's lines, under the tags the solver
    writes (docs/tensorboard.md), and the iterations whose step was skipped."""
    values, skipped = {}, set()
    display = lr_iter = test_iter = None
    test_net = ""
    for line in log.splitlines():
        msg = line.split("] ", 1)[1] if "] " in line else line  # glog's prefix
        m = re.match(r"Iteration (\d+), loss = (\S+)$", msg)
        if m:
            display = int(m[1])
            values[("train/loss", display)] = float(m[2])
            continue
        m = re.match(r"\s*Train net output #\d+: (\S+) = (\S+)", msg)
        if m:
            values[("train_net/" + m[1], display)] = float(m[2])
            continue
        m = re.match(r"\s*(\S+) images/s, ", msg)
        if m:
            values[("train/images_per_s", display)] = float(m[1])
            continue
        m = re.match(r"Iteration (\d+), lr = (\S+)$", msg)
        if m:
            lr_iter = int(m[1])
            values[("train/lr", lr_iter)] = float(m[2])
            continue
        m = re.match(r"\s*loss scale = (\S+), skipped steps = (\d+)$", msg)
        if m:
            values[("train/loss_scale", lr_iter)] = float(m[1])
            values[("train/skipped_steps", lr_iter)] = float(m[2])
            continue
        m = re.match(r"Iteration (\d+), Testing net \(#(\d+)\)$", msg)
        if m:
            test_iter = int(m[1])
            test_net = m[2] if m[2] != "0" else ""
            continue
        m = re.match(r"Test loss: (\S+)$", msg)
        if m:
            values[("test%s/loss" % test_net, test_iter)] = float(m[1])
            continue
        m = re.match(r"\s*Test net output #\d+: (\S+) = (\S+)", msg)
        if m:
            values[("test_net%s/%s" % (test_net, m[1]), test_iter)] = float(m[2])
            continue
        m = re.match(r"Iteration (\d+): a weight gradient holds Inf or NaN", msg)
        if m:
            skipped.add(int(m[1]))
    return values, skipped


def accumulate(folder):
    acc = event_accumulator.EventAccumulator(
        folder, size_guidance={event_accumulator.SCALARS: 0, event_accumulator.HISTOGRAMS: 0})
    acc.Reload()
    return acc


class TensorBoardTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="cortado_tensorboard_")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def test_events_hold_the_logs_values(self):
        tb = os.path.join(self.tmp, "tb")
        field_dir = os.path.join(self.tmp, "from_field")
        r = train(self.tmp, flag_dir=tb, extra='tensorboard_dir: "%s"' % field_dir)
        self.assertEqual(r.returncode, 0, r.stdout[-4000:])
        self.assertFalse(os.path.exists(field_dir), "--tensorboard must win over tensorboard_dir")
        files = [f for f in os.listdir(tb) if f.startswith("events.out.tfevents.")]
        self.assertEqual(len(files), 1, files)
        self.assertIn("TensorBoard events: " + os.path.join(tb, files[0]), r.stdout)

        logged, skipped = log_values(r.stdout)
        acc = accumulate(tb)
        events = {}
        for tag in acc.Tags()["scalars"]:
            for e in acc.Scalars(tag):
                self.assertNotIn((tag, e.step), events, "one value per tag and step")
                events[(tag, e.step)] = e.value
        # The log's run: displays 0..60 by 10, tests at 0, 30, 60, and skips.
        displays = set(range(0, 61, 10))
        self.assertEqual({s for t, s in logged if t == "train/loss"}, displays)
        self.assertEqual({s for t, s in logged if t == "test_net/accuracy"}, {0, 30, 60})
        self.assertTrue(skipped, "the first steps overflow at a loss scale of 2^24")
        self.assertGreater(logged[("train/skipped_steps", 50)], 0)
        self.assertGreater(logged[("train/loss_scale", 50)], logged[("train/loss_scale", 10)],
                           "the scale grows after 20 clean steps")
        # Both ways: the same (tag, step) pairs, the same values (the log
        # prints 6 significant digits, 9 for the loss scale).
        self.assertEqual(sorted(set(events) - set(logged)), [], "in the events, not in the log")
        self.assertEqual(sorted(set(logged) - set(events)), [], "in the log, not in the events")
        for key, want in sorted(logged.items()):
            self.assertTrue(math.isclose(events[key], want, rel_tol=1e-5, abs_tol=1e-12),
                            "%s at %d: event %r, log %r" % (key[0], key[1], events[key], want))
        for tag in ("train/loss", "train_net/loss", "train/lr", "train/loss_scale", "train/skipped_steps",
                    "train/images_per_s", "test_net/accuracy", "test_net/loss"):
            self.assertIn(tag, acc.Tags()["scalars"])

        # Gradient histograms: each learnable parameter at each display with
        # an update (not Solve's last display at 60), all its values counted
        # unless the step overflowed.
        self.assertEqual(sorted(acc.Tags()["histograms"]), sorted(PARAMS))
        for tag, count in PARAMS.items():
            hist = acc.Histograms(tag)
            self.assertEqual([h.step for h in hist], sorted(displays - {60}), tag)
            self.assertTrue(any(h.histogram_value.sum_squares > 0 for h in hist), tag + ": only zeros")
            for h in hist:
                v = h.histogram_value
                if h.step not in skipped:
                    self.assertEqual(v.num, count, "%s at %d" % (tag, h.step))
                    self.assertLessEqual(v.min, v.max)
                self.assertEqual(sum(v.bucket), v.num)
                self.assertEqual(len(v.bucket), len(v.bucket_limit))
                self.assertEqual(list(v.bucket_limit), sorted(v.bucket_limit))

    def test_solver_field_alone_and_histogram_interval(self):
        field_dir = os.path.join(self.tmp, "runs", "lenet")  # parents created
        r = train(self.tmp, max_iter=20,
                  extra='tensorboard_dir: "%s" tensorboard_histogram_interval: 20' % field_dir)
        self.assertEqual(r.returncode, 0, r.stdout[-4000:])
        acc = accumulate(field_dir)
        self.assertEqual([e.step for e in acc.Scalars("train/loss")], [0, 10, 20])
        self.assertEqual([h.step for h in acc.Histograms("grad/conv1/0")], [0])

    def test_folder_that_cannot_be_created(self):
        blocker = os.path.join(self.tmp, "file")
        with open(blocker, "w") as f:
            f.write("not a folder")
        bad = os.path.join(blocker, "tb")
        r = train(self.tmp, max_iter=1, flag_dir=bad)
        self.assertEqual(r.returncode, 1, r.stdout[-4000:])
        self.assertIn("TensorBoard folder '%s': cannot create it" % bad, r.stdout)


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0]] + sys.argv[3:])
