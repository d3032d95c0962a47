#!/usr/bin/env python3
"""The examples pycaffe users write, against Cortado's Python package and
real nets (models/lenet): net surgery through numpy views, classification
with Transformer and Classifier, a solver's step/solve/snapshot/restore,
`import cortado as caffe` running a pycaffe snippet, draw_net, and
`pip install` of the package into a temporary virtual environment, then
imported from outside the source tree.

    python3 tests/scripts/pycaffe_examples_test.py LIBCORTADO_C

Needs numpy (exit 77, ctest's SKIPPED, without it). The pip test needs
Debian's python3 with venv, setuptools and wheel (python3-venv,
python3-setuptools, python3-wheel) and is skipped without them; draw_net's
picture needs pydot and graphviz (python3-pydot, graphviz), and is checked in
the virtual environment where the running python3 lacks pydot.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import unittest

try:
    import numpy as np
except ImportError:
    if sys.executable != "/usr/bin/python3" and os.path.exists("/usr/bin/python3") and \
            subprocess.run(["/usr/bin/python3", "-c", "import numpy"], stderr=subprocess.DEVNULL).returncode == 0:
        os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
    print("SKIPPED: no numpy (Debian: python3-numpy)")
    sys.exit(77)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))
import cortado  # noqa: E402

LENET = os.path.join(ROOT, "models", "lenet")
DEPLOY = os.path.join(LENET, "lenet_deploy.prototxt")
TRAIN_TEST = os.path.join(LENET, "lenet_train_test.prototxt")


def solver_text(prefix, max_iter=12, type_=None):
    """LeNet's solver on its synthetic stage (DummyData, label 0)."""
    return ('net: "%s" train_state { stage: "synthetic" } test_state { stage: "synthetic" } '
            'test_iter: 1 test_interval: 1000 test_initialization: false base_lr: 0.01 momentum: 0.9 '
            'weight_decay: 0.0005 lr_policy: "fixed" display: 0 max_iter: %d snapshot_prefix: "%s" '
            'random_seed: 1 %s' % (TRAIN_TEST, max_iter, prefix, 'type: "%s"' % type_ if type_ else ""))


def digit(seed=0):
    """A 28 x 28 x 1 image in [0, 1], as load_image gives a grey one."""
    return np.random.RandomState(seed).rand(28, 28, 1).astype(np.float32)


class Examples(unittest.TestCase):
    weights = None  # LeNet trained on the synthetic stage, by setUpClass

    @classmethod
    def setUpClass(cls):
        cls.shared = tempfile.mkdtemp(prefix="cortado_pycaffe_test.")
        path = os.path.join(cls.shared, "solver.prototxt")
        with open(path, "w") as f:
            f.write(solver_text(os.path.join(cls.shared, "lenet"), max_iter=20))
        cortado.set_random_seed(1)
        solver = cortado.get_solver(path)
        solver.solve()
        cls.weights = os.path.join(cls.shared, "lenet_synthetic.caffemodel")
        solver.net.save(cls.weights)
        solver.close()

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.shared, ignore_errors=True)

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="cortado_pycaffe_test.")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def path(self, *names):
        return os.path.join(self.dir, *names)

    # ---- net surgery ----------------------------------------------------------------------------

    def test_net_surgery(self):
        net = cortado.Net(DEPLOY, self.weights, cortado.TEST)
        fresh = cortado.Net(DEPLOY, cortado.TEST)  # random (xavier) weights
        x = np.random.RandomState(1).rand(64, 1, 28, 28).astype(np.float32)
        want = net.forward(data=x)["prob"].copy()
        self.assertFalse(np.allclose(fresh.forward(data=x)["prob"], want))
        # Copy every parameter, as pycaffe's net surgery does.
        for name in net.params:
            for i in range(len(net.params[name])):
                fresh.params[name][i].data[...] = net.params[name][i].data
        np.testing.assert_array_equal(fresh.forward(data=x)["prob"], want)
        # A write through a view changes the next forward: the last bias of
        # ip2 lifted far above the others makes every image class 9.
        fresh.params["ip2"][1].data[9] += 1000
        self.assertTrue((fresh.forward(data=x)["prob"].argmax(axis=1) == 9).all())
        # A view held across passes: written after a forward, read after the next.
        w, b = fresh.params["conv1"][0].data, fresh.params["conv1"][1].data
        prob = fresh.blobs["prob"].data
        w[...] = 0
        b[...] = np.arange(20)
        fresh.forward(data=x)
        conv1 = fresh.blobs["conv1"].data
        np.testing.assert_array_equal(conv1, np.broadcast_to(np.arange(20, dtype=np.float32)[None, :, None, None],
                                                             conv1.shape))
        np.testing.assert_array_equal(prob, fresh.blobs["prob"].data)
        # Save and load back.
        fresh.save(self.path("surgery.caffemodel"))
        back = cortado.Net(DEPLOY, self.path("surgery.caffemodel"), cortado.TEST)
        for name in fresh.params:
            for i in range(len(fresh.params[name])):
                np.testing.assert_array_equal(back.params[name][i].data, fresh.params[name][i].data)
        np.testing.assert_array_equal(back.forward(data=x)["prob"], fresh.forward(data=x)["prob"])

    def test_surgery_on_a_16_bit_net(self):
        """FP16 and BF16 blobs: the arrays are float32 and convert at each pass."""
        x = np.random.RandomState(2).rand(64, 1, 28, 28).astype(np.float32)
        for precision in ("fp16", "bf16"):
            net = cortado.Net(DEPLOY, self.weights, cortado.TEST, precision=precision)
            self.assertEqual(net.blobs["data"].data.dtype, np.float32)
            w = net.params["conv1"][0].data
            net.forward(data=x)
            w[...] = 0  # after a forward has read (and cached) the 16-bit copy
            net.params["conv1"][1].data[...] = 0.5
            net.forward(data=x)
            np.testing.assert_array_equal(net.blobs["conv1"].data, 0.5)

    def test_forward_start_end_and_layers(self):
        net = cortado.Net(DEPLOY, self.weights, cortado.TEST)
        x = np.random.RandomState(3).rand(64, 1, 28, 28).astype(np.float32)
        full = net.forward(data=x)["prob"].copy()
        part = net.forward(data=x, end="pool1")
        self.assertEqual(list(part), ["pool1"])
        self.assertEqual(part["pool1"].shape, (64, 20, 12, 12))
        rest = net.forward(start="conv2")
        np.testing.assert_array_equal(rest["prob"], full)
        self.assertEqual([l.type for l in net.layers][:3], ["Input", "Convolution", "Pooling"])
        self.assertEqual(net.layers[1].blobs[0].data.shape, net.params["conv1"][0].data.shape)
        self.assertEqual(net.top_names["conv1"], ["conv1"])
        self.assertEqual(net.bottom_names["conv1"], ["data"])
        self.assertEqual(net.blobs["data"].num, 64)
        with self.assertRaises(cortado.Error):
            net.forward(end="no_such_layer")

    # ---- classification -------------------------------------------------------------------------

    def test_transformer(self):
        t = cortado.io.Transformer({"data": (1, 3, 8, 6)})
        t.set_transpose("data", (2, 0, 1))
        t.set_channel_swap("data", (2, 1, 0))
        t.set_raw_scale("data", 255)
        t.set_mean("data", np.array([10.0, 20.0, 30.0]))
        t.set_input_scale("data", 0.5)
        im = np.random.RandomState(4).rand(8, 6, 3).astype(np.float32)
        keep = im.copy()
        x = t.preprocess("data", im)
        np.testing.assert_array_equal(im, keep)  # the caller's array is left alone
        self.assertEqual(x.shape, (3, 8, 6))
        np.testing.assert_allclose(x[0], (im[:, :, 2] * 255 - 10) * 0.5, rtol=1e-6)
        np.testing.assert_allclose(t.deprocess("data", x), im, rtol=1e-5, atol=1e-6)
        # Another size is resized first.
        self.assertEqual(t.preprocess("data", np.ones((16, 12, 3))).shape, (3, 8, 6))
        with self.assertRaises(cortado.Error):
            t.set_mean("data", np.zeros(4))
        with self.assertRaises(cortado.Error):
            t.preprocess("image", im)

    def test_classification(self):
        images = [digit(5), digit(6)]
        clf = cortado.Classifier(DEPLOY, self.weights, image_dims=(32, 32))
        for oversample in (False, True):
            probs = clf.predict(images, oversample=oversample)
            self.assertEqual(probs.shape, (2, 10))
            np.testing.assert_allclose(probs.sum(axis=1), 1, rtol=1e-5)
            self.assertTrue((probs.argmax(axis=1) == 0).all(), "trained on label 0")
        # The same by hand, as pycaffe's classification example does.
        net = cortado.Net(DEPLOY, self.weights, cortado.TEST)
        t = cortado.io.Transformer({"data": net.blobs["data"].data.shape})
        t.set_transpose("data", (2, 0, 1))
        net.blobs["data"].reshape(1, 1, 28, 28)
        net.blobs["data"].data[...] = t.preprocess("data", images[0])
        out = net.forward()
        self.assertEqual(out["prob"].shape, (1, 10))
        self.assertEqual(int(out["prob"][0].argmax()), 0)
        # An image file, where an image library is installed.
        try:
            import matplotlib.image
        except ImportError:
            return
        matplotlib.image.imsave(self.path("digit.png"), images[0][:, :, 0], cmap="gray", vmin=0, vmax=1)
        im = cortado.io.load_image(self.path("digit.png"), color=False)
        self.assertEqual(im.shape, (28, 28, 1))
        np.testing.assert_allclose(im, images[0], atol=3 / 255)  # 8 bits, through RGB

    # ---- solvers --------------------------------------------------------------------------------

    def test_solver_step_snapshot_restore(self):
        path = self.path("solver.prototxt")
        with open(path, "w") as f:
            f.write(solver_text(self.path("snap"), max_iter=12))
        cortado.set_random_seed(2)
        solver = cortado.SGDSolver(path)
        self.assertEqual(len(solver.test_nets), 1)
        w = solver.net.params["conv1"][0].data  # held across steps: shows the updates
        before = w.copy()
        solver.step(5)
        self.assertEqual(solver.iter, 5)
        self.assertFalse(np.array_equal(w, before))
        np.testing.assert_array_equal(w, solver.net.params["conv1"][0].data)
        # The test net shares the weights.
        np.testing.assert_array_equal(solver.test_nets[0].params["conv1"][0].data, w)
        solver.snapshot()
        state = self.path("snap_iter_5.solverstate")
        self.assertTrue(os.path.exists(state))
        at5 = {k: [b.data.copy() for b in v] for k, v in solver.net.params.items()}
        solver.solve()
        self.assertEqual(solver.iter, 12)
        other = cortado.SGDSolver(path)
        other.restore(state)
        self.assertEqual(other.iter, 5)
        for k, v in other.net.params.items():
            for i, b in enumerate(v):
                np.testing.assert_array_equal(b.data, at5[k][i])
        # A write into the train net's weights reaches the next step's forward.
        for b in other.net.params["ip2"]:
            b.data[...] = 0
        other.step(1)
        np.testing.assert_allclose(other.net.blobs["loss"].data, np.log(10), rtol=1e-5)
        with self.assertRaisesRegex(cortado.Error, "AdamSolver runs Adam"):
            cortado.AdamSolver(path)

    # ---- import cortado as caffe ----------------------------------------------------------------

    def test_pycaffe_snippet(self):
        snippet = textwrap.dedent('''
            import numpy as np
            import cortado as caffe
            caffe.set_mode_cpu()
            net = caffe.Net(DEPLOY, WEIGHTS, caffe.TEST)
            print([(k, v.data.shape) for k, v in net.blobs.items()][:2])
            print([(k, v[0].data.shape, v[1].data.shape) for k, v in net.params.items()][:1])
            transformer = caffe.io.Transformer({'data': net.blobs['data'].data.shape})
            transformer.set_transpose('data', (2, 0, 1))
            net.blobs['data'].reshape(1, 1, 28, 28)
            net.blobs['data'].data[...] = transformer.preprocess('data', IMAGE)
            output = net.forward()
            output_prob = output['prob'][0]
            print('predicted class is:', output_prob.argmax())
            filters = net.params['conv1'][0].data
            filters[...] = filters * 2
            net.params['conv1'][1].data[...] *= 2
            conv1_before = net.blobs['conv1'].data.copy()
            net.forward()
            RESULT = (output_prob.argmax(), conv1_before, net.blobs['conv1'].data.copy())
        ''')
        scope = {"DEPLOY": DEPLOY, "WEIGHTS": self.weights, "IMAGE": digit(7)}
        exec(compile(snippet, "pycaffe_snippet", "exec"), scope)
        cls, before, after = scope["RESULT"]
        self.assertEqual(int(cls), 0)
        np.testing.assert_allclose(after, 2 * before, rtol=1e-5, atol=1e-6)  # conv1 is linear in its parameters

    # ---- draw_net ----------------------------------------------------------------------------

    def test_draw_net(self):
        try:
            import pydot  # noqa: F401
        except ImportError:
            with self.assertRaisesRegex(cortado.Error, "pydot"):
                cortado.draw_net_to_file(TRAIN_TEST, self.path("lenet.svg"))
            self.skipTest("no pydot here (the pip test draws in its environment)")
        if shutil.which("dot") is None:
            self.skipTest("no graphviz")
        cortado.draw_net_to_file(TRAIN_TEST, self.path("lenet.svg"), "TB", phase=cortado.TRAIN)
        with open(self.path("lenet.svg")) as f:
            svg = f.read()
        self.assertIn("conv1", svg)
        self.assertIn("kernel size: 5", svg)

    # ---- pip install ----------------------------------------------------------------------------

    def test_pip_install_into_a_venv(self):
        py = "/usr/bin/python3"
        if not os.path.exists(py) or subprocess.run(
                [py, "-c", "import venv, ensurepip, numpy, setuptools, wheel"], stderr=subprocess.DEVNULL).returncode:
            self.skipTest("needs Debian's python3 with venv, numpy, setuptools and wheel")
        # The repository's python/ and proto/, as `pip install ./python` sees them.
        src = self.path("src", "python")
        shutil.copytree(os.path.join(ROOT, "python"), src, ignore=shutil.ignore_patterns("build", "*.egg-info",
                                                                                     "__pycache__"))
        shutil.copytree(os.path.join(ROOT, "proto"), self.path("src", "proto"))
        venv = self.path("venv")
        subprocess.run([py, "-m", "venv", "--system-site-packages", venv], check=True)
        env = dict(os.environ, CORTADO_LIB=os.environ["CORTADO_LIB"], PIP_NO_INDEX="1")
        env.pop("PYTHONPATH", None)
        run = subprocess.run([os.path.join(venv, "bin", "pip"), "install", "--no-build-isolation", src], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
        self.assertEqual(run.returncode, 0, run.stdout)
        script = textwrap.dedent('''
            import os, shutil, sys, numpy as np
            import cortado as caffe
            here = os.path.dirname(caffe.__file__)
            assert here.startswith(sys.prefix), here
            assert caffe._library_path() == os.path.join(here, "libcortado_c.so"), caffe._library_path()
            from cortado import caffe_files
            assert caffe_files._default_proto() == os.path.join(here, "cortado.proto"), caffe_files._default_proto()
            assert caffe_files.read_net(sys.argv[1]).layer[-1].type == "Softmax"  # the schema the package carries
            net = caffe.Net(sys.argv[1], sys.argv[2], caffe.TEST)
            x = np.random.rand(64, 1, 28, 28).astype(np.float32)
            net.params["ip2"][1].data[3] += 1000
            assert (net.forward(data=x)["prob"].argmax(axis=1) == 3).all()
            try:
                import pydot
            except ImportError:
                print("no pydot")
            else:
                if shutil.which("dot"):
                    caffe.draw_net_to_file(sys.argv[3], "lenet.png", "LR")
                    assert open("lenet.png", "rb").read(8) == b"\\x89PNG\\r\\n\\x1a\\n"
                    print("drew")
            print("ok", caffe.__version__)
        ''')
        outside = self.path("elsewhere")
        os.makedirs(outside)
        env.pop("CORTADO_LIB")
        run = subprocess.run([os.path.join(venv, "bin", "python"), "-c", script, DEPLOY, self.weights, TRAIN_TEST],
                             cwd=outside, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             universal_newlines=True)
        self.assertEqual(run.returncode, 0, run.stdout)
        self.assertIn("ok 0.", run.stdout)
        sys.stderr.write("[venv: %s]\n" % ("drew a net" if "drew" in run.stdout else "no pydot or graphviz"))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.stderr.write("usage: pycaffe_examples_test.py LIBCORTADO_C\n")
        sys.exit(2)
    os.environ["CORTADO_LIB"] = os.path.abspath(sys.argv[1])
    os.environ.setdefault("GLOG_minloglevel", "1")
    prog = unittest.main(argv=[sys.argv[0], "-v"], exit=False)
    sys.exit(0 if prog.result.wasSuccessful() else 1)
