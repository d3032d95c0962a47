#!/usr/bin/env python3
"""Tests of the Python module (python/cortado) over the C interface.

    python3 tests/scripts/python_api_test.py LIBCORTADO_C

Forward values against numpy, FP16 storage rounding, reshaping inputs,
backward against the analytic gradient, a solver that learns, weights saved
and loaded (binary proto and HDF5), the switches over a file's fields, and
errors as cortado.Error with the file and line. Needs numpy: without it (in
this python3 or Debian's), it exits 77, ctest's SKIPPED.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

try:
    import numpy as np
except ImportError:
    # A virtualenv's python3 may lack Debian's numpy: try that one.
    if sys.executable != "/usr/bin/python3" and os.path.exists("/usr/bin/python3") and \
            subprocess.run(["/usr/bin/python3", "-c", "import numpy"], stderr=subprocess.DEVNULL).returncode == 0:
        os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
    print("SKIPPED: no numpy (Debian: python3-numpy)")
    sys.exit(77)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))
import cortado  # noqa: E402

LINEAR = """
name: "Linear"
%s
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 2 dim: 3 } } }
layer { name: "target" type: "Input" top: "target" input_param { shape { dim: 2 dim: 2 } } }
layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip"
        inner_product_param { num_output: 2 weight_filler { type: "gaussian" std: 0.5 } } }
layer { name: "prob" type: "Softmax" bottom: "ip" top: "prob" }
layer { name: "loss" type: "EuclideanLoss" bottom: "ip" bottom: "target" top: "loss" }
force_backward: true
"""

CLASSIFIER = """
name: "Classifier"
layer { name: "x" type: "DummyData" top: "x" top: "label"
  dummy_data_param { shape { dim: 16 dim: 8 } shape { dim: 16 }
                     data_filler { type: "gaussian" } data_filler { type: "constant" value: 2 } } }
layer { name: "ip1" type: "InnerProduct" bottom: "x" top: "h" inner_product_param { num_output: 12 weight_filler { type: "xavier" } } }
layer { name: "relu" type: "ReLU" bottom: "h" top: "h" }
layer { name: "ip2" type: "InnerProduct" bottom: "h" top: "y" inner_product_param { num_output: 4 weight_filler { type: "xavier" } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "y" bottom: "label" top: "loss" }
"""

# An in-place BatchNorm after a convolution: a training net reads it from a
# blob of its own ("conv/bn_input") unless batch_norm_out_of_place is off.
BATCH_NORM = """
name: "Bn"
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 2 dim: 3 dim: 4 dim: 4 } } }
layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
        convolution_param { num_output: 2 kernel_size: 1 weight_filler { type: "gaussian" std: 0.5 } } }
layer { name: "bn" type: "BatchNorm" bottom: "conv" top: "conv" }
layer { name: "loss" type: "Reduction" bottom: "conv" top: "loss" loss_weight: 1 }
"""


class PythonApi(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="cortado_python_test.")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def write(self, name, text):
        path = os.path.join(self.dir, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def linear(self, types=""):
        return cortado.Net(self.write("linear.prototxt", LINEAR % types), cortado.TEST)

    def test_forward_matches_numpy(self):
        net = self.linear()
        self.assertEqual(net.inputs, ["data", "target"])
        self.assertEqual(sorted(net.outputs), ["loss", "prob"])
        # A Split layer feeds ip to both Softmax and the loss, as in Caffe.
        self.assertEqual(net.layer_types, ["Input", "Input", "InnerProduct", "Split", "Softmax", "EuclideanLoss"])
        w = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.5]], dtype=np.float32)
        b = np.array([0.1, -0.2], dtype=np.float32)
        net.params["ip"][0].data = w
        net.params["ip"][1].data = b
        x = np.array([[1, 2, 3], [-1, 0.5, 0]], dtype=np.float32)
        t = np.zeros((2, 2), dtype=np.float32)
        out = net.forward(data=x, target=t)
        logits = x @ w.T + b
        e = np.exp(logits - logits.max(axis=1, keepdims=True))
        np.testing.assert_allclose(out["prob"], e / e.sum(axis=1, keepdims=True), rtol=1e-6)
        np.testing.assert_allclose(net.blobs["ip"].data, logits, rtol=1e-6)
        # EuclideanLoss: sum((ip - t)^2) / (2N).
        self.assertAlmostEqual(float(out["loss"]), float(((logits - t) ** 2).sum() / 4), places=5)
        self.assertAlmostEqual(net.loss, float(out["loss"]), places=5)

    def test_backward_gives_the_input_gradient(self):
        net = self.linear()
        w = net.params["ip"][0].data
        x = np.array([[1, 2, 3], [-1, 0.5, 0]], dtype=np.float32)
        t = np.array([[0.5, 0], [0, 1]], dtype=np.float32)
        net.forward(data=x, target=t)
        grads = net.backward()
        dy = (net.blobs["ip"].data - t) / 2
        np.testing.assert_allclose(grads["data"], dy @ w, rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(net.params["ip"][0].diff, dy.T @ x, rtol=1e-5, atol=1e-7)

    def test_broadcasting_and_freeing(self):
        import gc
        import weakref
        net = self.linear()
        net.blobs["data"].data = np.array([1, 2, 3])  # (3,) broadcasts to (2, 3)
        np.testing.assert_array_equal(net.blobs["data"].data, [[1, 2, 3], [1, 2, 3]])
        # Nets and solvers are freed when the last reference goes, without
        # waiting for the cycle collector.
        gc.disable()
        try:
            ref = weakref.ref(net._ref)
            blob = net.blobs["ip"]
            del net
            self.assertIsNotNone(ref(), "a blob still uses the net")
            del blob
            self.assertIsNone(ref())
            solver = cortado.Solver(self.write("s.prototxt", 'net: "%s" base_lr: 0.1 lr_policy: "fixed" max_iter: 1'
                                               % self.write("c.prototxt", CLASSIFIER)))
            sref = weakref.ref(solver._ref)
            train = solver.net
            del solver
            self.assertIsNotNone(sref(), "its net keeps the solver")
            train.forward()
            del train
            self.assertIsNone(sref())
        finally:
            gc.enable()

    def test_inputs_reshape_to_the_array(self):
        net = self.linear()
        out = net.forward(data=np.ones((5, 3)), target=np.zeros((5, 2)))
        self.assertEqual(out["prob"].shape, (5, 2))
        self.assertEqual(net.blobs["ip"].shape, (5, 2))

    def test_16_bit_nets_compute_on_rounded_values(self):
        x = np.array([[0.1, 0.2, 0.3], [-1.7, 0.55, 2.9]], dtype=np.float32)
        w = np.array([[0.5, -1.1, 2.3], [1.5, 0.25, -0.45]], dtype=np.float32)
        for types, rounded in (("FLOAT16", np.float16), ("BFLOAT16", None)):
            net = self.linear("default_forward_type: %s default_backward_type: %s" % (types, types))
            net.params["ip"][0].data = w
            net.params["ip"][1].data = 0.0  # one value for every element
            net.blobs["data"].data = x
            np.testing.assert_array_equal(net.blobs["data"].data, x)  # kept as given until a layer reads it
            net.forward()
            ip = net.blobs["ip"].data
            if rounded is not None:
                # The layer read FP16 inputs and wrote an FP16 top.
                np.testing.assert_array_equal(ip.astype(np.float16).astype(np.float32), ip)
                want = x.astype(np.float16).astype(np.float32) @ w.astype(np.float16).astype(np.float32).T
                np.testing.assert_allclose(ip, want, rtol=2e-3, atol=1e-3)
            else:
                # BF16 keeps 8 bits: the low 16 bits of every float32 are zero.
                self.assertTrue((ip.view(np.uint32) & 0xFFFF == 0).all())
                np.testing.assert_allclose(ip, x @ w.T, rtol=2e-2, atol=2e-2)

    def test_solver_learns_and_weights_round_trip(self):
        self.write("classifier.prototxt", CLASSIFIER)
        solver_file = self.write("solver.prototxt", 'net: "classifier.prototxt" base_lr: 0.1 momentum: 0.9 '
                                 'lr_policy: "fixed" max_iter: 100 random_seed: 3 snapshot_prefix: "%s"'
                                 % os.path.join(self.dir, "snap"))
        solver = cortado.get_solver(solver_file)
        solver.net.forward()
        first = float(solver.net.blobs["loss"].data)
        solver.step(30)
        self.assertEqual(solver.iter, 30)
        solver.net.forward()
        self.assertLess(float(solver.net.blobs["loss"].data), first / 4, "30 steps on a constant label")
        for name in ("w.caffemodel", "w.caffemodel.h5"):
            path = os.path.join(self.dir, name)
            solver.net.save(path)
            net = cortado.Net(self.write("c2.prototxt", CLASSIFIER), path, cortado.TRAIN)
            for layer in ("ip1", "ip2"):
                for k in range(2):
                    np.testing.assert_array_equal(net.params[layer][k].data, solver.net.params[layer][k].data)
            net.close()
        solver.snapshot()
        self.assertTrue(os.path.exists(os.path.join(self.dir, "snap_iter_30.solverstate")))
        solver.close()

    def test_precision_as_the_trainer_applies_it(self):
        self.write("classifier.prototxt", CLASSIFIER)
        solver_file = self.write("solver.prototxt", 'net: "classifier.prototxt" base_lr: 0.1 momentum: 0.9 '
                                 'lr_policy: "fixed" max_iter: 100 random_seed: 3')
        for precision, bits in ((None, 32), ("fp32", 32), ("bf16", 16)):
            net = cortado.Net(self.write("c.prototxt", CLASSIFIER), cortado.TRAIN, precision=precision)
            w = net.params["ip1"][0].data
            # BF16 storage keeps the high 16 bits of each float32 weight.
            self.assertEqual(bool((w.view(np.uint32) & 0xFFFF == 0).all()), bits == 16, precision)
            net.close()
        solver = cortado.get_solver(solver_file, precision="fp16")
        solver.step(5)
        self.assertEqual(solver.iter, 5)
        solver.close()
        with self.assertRaisesRegex(cortado.Error, "expected fp32, fp16 or bf16"):
            cortado.get_solver(solver_file, precision="half")

    def test_switches_override_the_files(self):
        path = self.write("bn.prototxt", BATCH_NORM)
        self.assertIn("conv/bn_input", cortado.Net(path, cortado.TRAIN).blobs)
        net = cortado.Net(path, cortado.TRAIN, switches={"batch_norm_out_of_place": False, "share_diffs": "0"})
        self.assertNotIn("conv/bn_input", net.blobs)
        solver_file = self.write("bn_solver.prototxt", 'net: "bn.prototxt" base_lr: 0.1 lr_policy: "fixed" max_iter: 2')
        self.assertIn("conv/bn_input", cortado.get_solver(solver_file).net.blobs)
        solver = cortado.get_solver(solver_file, switches={"batch_norm_out_of_place": False, "cuda_graphs": False})
        self.assertNotIn("conv/bn_input", solver.net.blobs)
        solver.step(2)
        with self.assertRaises(cortado.Error) as e:
            cortado.Net(path, cortado.TRAIN, switches={"share_diffs": 2})
        self.assertIn("share_diffs=2: expected 0 or 1", str(e.exception))
        with self.assertRaises(cortado.Error) as e:
            cortado.get_solver(solver_file, switches={"channels_last": "nhwc"})
        self.assertIn("channels_last=nhwc: expected 0, 1 or all", str(e.exception))
        with self.assertRaises(cortado.Error) as e:
            cortado.Net(path, cortado.TRAIN, switches={"share_diff": 0})
        self.assertIn("share_diff: not a switch", str(e.exception))
        # The process's switches: set and put back.
        cortado.set_cpu_share(False)
        cortado.set_cpu_share(True)
        cortado.set_cpu_bf16_dot(False)
        cortado.set_cpu_bf16_dot(True)
        with self.assertRaises(cortado.Error) as e:
            cortado._checked("cortado_set_switch", b"share_diffs", b"0")
        self.assertIn("share_diffs is a switch of a net", str(e.exception))

    def test_errors_name_the_file_and_line(self):
        bad = self.write("bad.prototxt", 'name: "x"\nlayer { name: "ip" type: "InnerProduct" bottom: "nothing" top: "y" '
                                         "inner_product_param { num_output: 2 } }\n")
        with self.assertRaises(cortado.Error) as e:
            cortado.Net(bad, cortado.TEST)
        self.assertIn("bad.prototxt:2", str(e.exception))
        with self.assertRaises(cortado.Error) as e:
            cortado.Net(os.path.join(self.dir, "missing.prototxt"), cortado.TEST)
        self.assertIn("missing.prototxt", str(e.exception))
        net = self.linear()
        with self.assertRaises(cortado.Error) as e:
            net.params["ip"][0].data = np.zeros((4, 4))
        self.assertIn("cannot set an array of shape (4, 4)", str(e.exception))
        with self.assertRaises(cortado.Error) as e:
            net.backward()
        self.assertIn("backward needs a forward first", str(e.exception))
        net.blobs["data"].data[...] = 1  # a view of the blob: pycaffe's idiom writes it
        np.testing.assert_array_equal(net.blobs["data"].data, np.ones((2, 3), dtype=np.float32))
        with self.assertRaises(cortado.Error):
            net.blobs["data"].reshape(2 ** 32 + 2, 3)
        with self.assertRaises(cortado.Error):
            net.forward(nothing=np.zeros(3))
        with self.assertRaises(cortado.Error) as e:
            net.copy_from(os.path.join(self.dir, "none.caffemodel"))
        self.assertIn("none.caffemodel", str(e.exception))
        with self.assertRaises(cortado.Error) as e:
            cortado.Net(bad, cortado.TEST, gpu=99)
        self.assertIn("gpu 99", str(e.exception))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.stderr.write("usage: python_api_test.py LIBCORTADO_C\n")
        sys.exit(2)
    os.environ["CORTADO_LIB"] = os.path.abspath(sys.argv[1])
    prog = unittest.main(argv=[sys.argv[0], "-v"], exit=False)
    sys.exit(0 if prog.result.wasSuccessful() else 1)
