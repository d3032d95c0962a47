#!/usr/bin/env python3
"""Tests of the ONNX export (python/cortado/onnx_export.py, scripts/export_onnx.py),
with ONNX Runtime as the consumer.

    python3 tests/scripts/onnx_export_test.py LIBCORTADO_C BUILD_DIR [unittest arguments]

Every deploy net under models/ gets random weights (set through Cortado's
Python module and saved by Cortado as a .caffemodel), is exported from that
file, passes onnx.checker, runs in ONNX Runtime on random input and is
compared with Cortado's own forward of the same net, weights and input:
max |ort - cortado| / max |cortado| must stay within 1e-4 for every output
and for the logits before each Softmax. A net of the layer types and fields
the models do not use (PReLU, ELU, LRN within channels, pooling with
padding and overhang, dilation, Eltwise's operations, Slice, Reshape ...)
is compared the same way, so are weights stored as FP16 raw_data,
double_data and legacy 4D shapes, and an FP16 export; layers with no ONNX
equivalent must give errors that name them.

ONNX Runtime comes from PyPI into BUILD_DIR/pyenv
(scripts/install_python_deps.sh, run by scripts/test.sh); onnx, protobuf
and numpy from Debian (scripts/install_deps.sh). Where the venv lacks
onnxruntime because PyPI could not be reached (the script leaves
BUILD_DIR/pyenv/UNAVAILABLE saying why), the runtime comparisons are
skipped (exit 77, ctest's SKIPPED) after the checks that need no runtime;
a venv that is merely missing is a failure.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def _venv_python(build_dir):
    return os.path.join(os.path.abspath(build_dir), "pyenv", "bin", "python3")


def _reexec_in_venv():
    """Runs this script under BUILD_DIR/pyenv's python where that is not the
    interpreter already (the venv sees Debian's packages and adds ONNX Runtime)."""
    if len(sys.argv) < 3:
        return
    venv = _venv_python(sys.argv[2])
    if not os.path.exists(venv):
        print("FAILED: no %s: run `bash scripts/install_python_deps.sh %s` (scripts/test.sh does)"
              % (os.path.dirname(os.path.dirname(venv)), sys.argv[2]))
        sys.exit(1)
    if os.path.realpath(sys.prefix) != os.path.realpath(os.path.dirname(os.path.dirname(venv))):
        os.execv(venv, [venv] + sys.argv)


if __name__ == "__main__":
    _reexec_in_venv()

try:
    import numpy as np
    import onnx
except ImportError as e:
    print("FAILED: %s: Debian's python3-numpy and python3-onnx are needed (scripts/install_deps.sh); "
          "interpreter %s" % (e, sys.executable))
    sys.exit(1)

try:
    import onnxruntime as ort
except ImportError:
    ort = None

sys.path.insert(0, os.path.join(ROOT, "python"))
import cortado  # noqa: E402
from cortado import caffe_files, onnx_export  # noqa: E402

TOLERANCE = 1e-4
BATCH = 2
TABLE = []  # (net, input shape, max relative difference, checker, seconds)


def deploy_nets():
    """(name, prototxt) of every deploy net under models/, at any depth
    (models/torchvision/resnet50/deploy.prototxt is torchvision_resnet50)."""
    nets = []
    top = os.path.join(ROOT, "models")
    for folder, dirs, files in os.walk(top):
        dirs.sort()
        d = os.path.relpath(folder, top).replace(os.sep, "_")
        for f in sorted(files):
            if f == "deploy.prototxt" or f.endswith("_deploy.prototxt"):
                nets.append((d if f == "deploy.prototxt" else f[:-len(".prototxt")], os.path.join(folder, f)))
    return sorted(nets)


def random_params(net, rng):
    """Random weights by layer type, at scales that keep activations of
    order one through deep nets (He for filters; BatchNorm statistics with
    positive variances and a moving-average factor that is not 1)."""
    for name, kind in zip(net.layer_names, net.layer_types):
        params = net.params.get(name, [])
        shapes = [p.shape for p in params]
        values = []
        if not shapes:
            continue
        if kind == "BatchNorm":
            c = shapes[0][0]
            factor = rng.uniform(0.5, 2.0)
            values = [rng.normal(0, 0.2, c) * factor, rng.uniform(0.5, 2.0, c) * factor, np.full(shapes[2], factor)]
            if len(shapes) == 5:  # NVCaffe's scale_bias
                values += [rng.uniform(0.5, 1.5, c), rng.normal(0, 0.1, c)]
        elif kind == "Scale":
            values = [rng.uniform(0.5, 1.5, shapes[0])] + [rng.normal(0, 0.1, s) for s in shapes[1:]]
        elif kind == "PReLU":
            values = [rng.uniform(0.05, 0.3, shapes[0])]
        elif shapes:  # Convolution, InnerProduct: weights (out, fan_in...) and a bias
            fan_in = int(np.prod(shapes[0][1:]))
            weight = rng.standard_normal(shapes[0], dtype=np.float32) * np.float32(np.sqrt(2.0 / fan_in))
            values = [weight] + [rng.normal(0, 0.1, s) for s in shapes[1:]]
        for p, v in zip(params, values):
            p.data = np.asarray(v, dtype=np.float32).reshape(p.shape)


def softmax_bottoms(path):
    """The blobs that feed Softmax layers (the logits), from the prototxt."""
    net = caffe_files.read_net(path)
    return [l.bottom[0] for l in net.layer if l.type == "Softmax"]


def relative_difference(got, want):
    scale = float(np.max(np.abs(want)))
    return float(np.max(np.abs(got.astype(np.float64) - want))) / (scale if scale > 0 else 1.0)


def run_ort(model, feeds):
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, feeds)))


class OnnxExport(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="cortado_onnx_test.")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def write(self, name, text):
        path = os.path.join(self.dir, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def compare(self, label, model, weights=None, batch=BATCH, seed=0, fill=True, fp16=False, tolerance=TOLERANCE):
        """Cortado's forward against ONNX Runtime's on the exported model;
        returns the worst relative difference over the outputs and logits."""
        start = time.time()
        rng = np.random.default_rng(seed)
        net = cortado.Net(model, weights, cortado.TEST) if weights else cortado.Net(model, cortado.TEST)
        if fill:
            random_params(net, rng)
            weights = os.path.join(self.dir, label + ".caffemodel")
            net.save(weights)
        feeds = {}
        for name in net.inputs:
            shape = (batch,) + tuple(net.blobs[name].shape[1:])
            feeds[name] = rng.standard_normal(shape, dtype=np.float32)
        extra = [b for b in softmax_bottoms(model) if b not in net.outputs]
        # Copies: the arrays view the net's memory, which close() frees.
        want = {name: np.array(values) for name, values in net.forward(blobs=extra, **feeds).items()}
        net.close()
        exported = onnx_export.export(model, weights, fp16=fp16, batch=batch, extra_outputs=extra)
        onnx.checker.check_model(exported)
        checker = "passed"
        worst = 0.0
        if ort is not None:
            if fp16:
                feeds = {k: v.astype(np.float16) for k, v in feeds.items()}
            got = run_ort(exported, feeds)
            self.assertEqual(sorted(got), sorted(want), "%s: the ONNX outputs are Cortado's" % label)
            for name in want:
                self.assertEqual(got[name].shape, want[name].shape, "%s: %s" % (label, name))
                diff = relative_difference(got[name], want[name])
                self.assertLessEqual(diff, tolerance, "%s: output '%s' differs by %.3g relative" % (label, name, diff))
                worst = max(worst, diff)
        shape = "x".join(str(d) for d in next(iter(feeds.values())).shape)
        TABLE.append((label, shape, worst if ort is not None else None, checker, time.time() - start))
        return worst

    @unittest.skipIf(ort is None, "no ONNX Runtime")
    def test_every_deploy_net(self):
        nets = deploy_nets()
        names = [n for n, _ in nets]
        self.assertTrue({"lenet_deploy", "alexnet", "googlenet", "vgg16", "resnet18", "resnet50"} <= set(names),
                        "the deploy nets under models/: %s" % names)
        for i, (name, path) in enumerate(nets):
            with self.subTest(net=name):
                self.compare(name, path, seed=i)

    def test_every_deploy_net_checks(self):
        """Without a runtime: every deploy net exports and passes onnx.checker."""
        if ort is not None:
            self.skipTest("covered by test_every_deploy_net")
        for i, (name, path) in enumerate(deploy_nets()):
            with self.subTest(net=name):
                self.compare(name, path, seed=i)

    def test_layer_types_beyond_the_models(self):
        self.compare("layer_zoo", self.write("zoo.prototxt", ZOO), seed=11)

    def test_weight_formats(self):
        """FP16 raw_data, double_data, legacy 4D shapes and FP32 raw_data in
        one .caffemodel: Cortado and the exporter read the same values."""
        pb = caffe_files.load_schema()
        model = os.path.join(ROOT, "models", "lenet", "lenet_deploy.prototxt")
        net = cortado.Net(model, cortado.TEST)
        rng = np.random.default_rng(5)
        random_params(net, rng)
        plain = os.path.join(self.dir, "lenet_plain.caffemodel")
        net.save(plain)
        net.close()
        weights = pb.NetParameter()
        with open(plain, "rb") as f:
            weights.ParseFromString(f.read())
        for layer in weights.layer:
            for blob in layer.blobs:
                values = np.array(blob.data, dtype=np.float32)
                shape = list(blob.shape.dim)
                blob.ClearField("data")
                if layer.name == "conv1":
                    blob.raw_data_type = pb.FLOAT16
                    blob.raw_data = values.astype("<f2").tobytes()
                elif layer.name == "conv2":
                    blob.double_data.extend(values.astype(np.float64).tolist())
                elif layer.name == "ip1":
                    blob.ClearField("shape")
                    legacy = ([1] * 4 + shape)[-4:]
                    blob.num, blob.channels, blob.height, blob.width = legacy
                    blob.data.extend(values.tolist())
                else:
                    blob.raw_data_type = pb.FLOAT
                    blob.raw_data = values.astype("<f4").tobytes()
        mixed = os.path.join(self.dir, "lenet_mixed.caffemodel")
        with open(mixed, "wb") as f:
            f.write(weights.SerializeToString())
        read = caffe_files.read_weights(mixed)
        self.assertEqual(read["conv1"][0].dtype, np.float32)
        self.assertEqual(read["ip1"][0].shape, (1, 1, 500, 800))
        # Old Caffe files keep their blobs in V1 `layers`.
        v1 = pb.NetParameter()
        for layer in weights.layer:
            old = v1.layers.add()
            old.name = layer.name
            old.blobs.extend(layer.blobs)
        v1_path = os.path.join(self.dir, "lenet_v1.caffemodel")
        with open(v1_path, "wb") as f:
            f.write(v1.SerializeToString())
        read_v1 = caffe_files.read_weights(v1_path)
        self.assertEqual(list(read_v1), list(read))
        for name in read:
            for a, b in zip(read[name], read_v1[name]):
                np.testing.assert_array_equal(a, b)
        self.compare("lenet_weight_formats", model, weights=mixed, fill=False)

    def test_fp16_export(self):
        model = os.path.join(ROOT, "models", "lenet", "lenet_deploy.prototxt")
        exported = None
        try:
            worst = self.compare("lenet_fp16", model, fp16=True, tolerance=1e-2, seed=3)
        except Exception as e:  # a runtime without FP16 kernels for a node
            if ort is None or "NOT_IMPLEMENTED" not in str(e):
                raise
            exported = e
        if exported is not None:
            TABLE.append(("lenet_fp16", "-", None, "passed (ORT CPU lacks an FP16 kernel: %s)" % str(exported)[:60], 0))
        else:
            self.assertLessEqual(worst, 1e-2)

    def test_layers_without_an_onnx_equivalent(self):
        path = self.write("train.prototxt", UNSUPPORTED)
        with self.assertRaises(onnx_export.ExportError) as e:
            onnx_export.export(path)
        message = str(e.exception)
        # Both layers named, with the file and line, the type, and the list.
        self.assertIn("train.prototxt:5: layer 'loss' (SoftmaxWithLoss): no ONNX equivalent", message)
        self.assertIn("train.prototxt:6: layer 'spp' (SPP): no ONNX equivalent", message)
        self.assertIn("exportable types: BatchNorm, Concat, Convolution", message)
        # The script says the same and exits 1, writing nothing.
        out = os.path.join(self.dir, "train.onnx")
        run = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "export_onnx.py"), "--model", path,
                              "--output", out], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             universal_newlines=True)
        self.assertEqual(run.returncode, 1, run.stderr)
        self.assertIn("layer 'loss' (SoftmaxWithLoss): no ONNX equivalent", run.stderr)
        self.assertFalse(os.path.exists(out))
        # A field with no equivalent, and a layer without its weights.
        stochastic = self.write("stochastic.prototxt", INPUT + 'layer { name: "pool" type: "Pooling" bottom: "data" '
                                'top: "pool" pooling_param { pool: STOCHASTIC kernel_size: 2 stride: 2 } }\n')
        with self.assertRaisesRegex(onnx_export.ExportError,
                                    r"stochastic.prototxt:3: layer 'pool' \(Pooling\): .*STOCHASTIC has no ONNX"):
            onnx_export.export(stochastic)
        conv = self.write("conv.prototxt", INPUT + 'layer { name: "conv" type: "Convolution" bottom: "data" '
                          'top: "conv" convolution_param { num_output: 2 kernel_size: 3 } }\n')
        with self.assertRaisesRegex(onnx_export.ExportError, r"layer 'conv' \(Convolution\): no weights for it"):
            onnx_export.export(conv)

    def test_the_script_writes_a_model(self):
        model = os.path.join(ROOT, "models", "lenet", "lenet_deploy.prototxt")
        net = cortado.Net(model, cortado.TEST)
        random_params(net, np.random.default_rng(9))
        weights = os.path.join(self.dir, "lenet_script.caffemodel")
        net.save(weights)
        net.close()
        out = os.path.join(self.dir, "lenet.onnx")
        run = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "export_onnx.py"), "--model=" + model,
                              "--weights=" + weights, "--output=" + out, "--batch=3"],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
        self.assertEqual(run.returncode, 0, run.stdout)
        self.assertIn("inputs data [3, 1, 28, 28]; outputs prob [3, 10]", run.stdout)
        m = onnx.load(out)
        onnx.checker.check_model(m)
        self.assertEqual(m.opset_import[0].version, onnx_export.DEFAULT_OPSET)


INPUT = 'name: "x"\nlayer { name: "data" type: "Input" top: "data" input_param { shape { dim: 1 dim: 3 dim: 8 dim: 8 } } }\n'

UNSUPPORTED = INPUT + """layer { name: "label" type: "Input" top: "label" input_param { shape { dim: 1 } } }
layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip" inner_product_param { num_output: 4 } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" }
layer { name: "spp" type: "SPP" bottom: "data" top: "spp" spp_param { pyramid_height: 2 } }
"""

# The layer types and fields of the export table that the models/ nets do
# not reach. Input 2 x 4 x 12 x 11: Caffe's ceil rounding makes the last
# window overhang the padded input (ave_pad, max_pad: rows; ave_nopad:
# columns) and drops a window that would start in the padding (max_hw).
ZOO = """
name: "LayerZoo"
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 2 dim: 4 dim: 12 dim: 11 } } }
layer { name: "conv_dil" type: "Convolution" bottom: "data" top: "conv_dil"
  convolution_param { num_output: 6 kernel_size: 3 dilation: 2 pad: 2 group: 2 } }
layer { name: "conv_hw" type: "Convolution" bottom: "data" top: "conv_hw"
  convolution_param { num_output: 6 kernel_h: 3 kernel_w: 1 pad_h: 1 pad_w: 0 stride_h: 1 stride_w: 1 bias_term: false } }
layer { name: "prelu" type: "PReLU" bottom: "conv_dil" top: "conv_dil" }
layer { name: "prelu_shared" type: "PReLU" bottom: "conv_hw" top: "conv_hw" prelu_param { channel_shared: true } }
layer { name: "sum" type: "Eltwise" bottom: "conv_dil" bottom: "conv_hw" top: "sum"
  eltwise_param { operation: SUM coeff: 0.5 coeff: -1.5 } }
layer { name: "prod" type: "Eltwise" bottom: "conv_dil" bottom: "conv_hw" bottom: "sum" top: "prod"
  eltwise_param { operation: PROD } }
layer { name: "max" type: "Eltwise" bottom: "conv_dil" bottom: "conv_hw" bottom: "prod" top: "max"
  eltwise_param { operation: MAX } }
layer { name: "leaky" type: "ReLU" bottom: "max" top: "max" relu_param { negative_slope: 0.1 } }
layer { name: "bn" type: "BatchNorm" bottom: "max" top: "bn" batch_norm_param { scale_bias: true eps: 0.001 } }
layer { name: "elu" type: "ELU" bottom: "bn" top: "elu" elu_param { alpha: 0.7 } }
layer { name: "selu" type: "ELU" bottom: "bn" top: "selu" elu_param { alpha: 1.6733 lambda: 1.0507 } }
layer { name: "sigmoid" type: "Sigmoid" bottom: "elu" top: "sigmoid" }
layer { name: "tanh" type: "TanH" bottom: "selu" top: "tanh" }
layer { name: "concat" type: "Concat" bottom: "sigmoid" bottom: "tanh" bottom: "bn" top: "concat" }
layer { name: "lrn_within" type: "LRN" bottom: "concat" top: "lrn_within"
  lrn_param { norm_region: WITHIN_CHANNEL local_size: 3 alpha: 0.5 beta: 0.75 } }
layer { name: "lrn_across" type: "LRN" bottom: "concat" top: "lrn_across" lrn_param { local_size: 5 alpha: 0.3 beta: 0.6 k: 2 } }
layer { name: "split" type: "Split" bottom: "lrn_across" top: "a" top: "b" }
layer { name: "slice" type: "Slice" bottom: "a" top: "s0" top: "s1" top: "s2" slice_param { axis: 1 slice_point: 3 slice_point: 10 } }
layer { name: "halves" type: "Slice" bottom: "b" top: "h0" top: "h1" slice_param { axis: 1 } }
layer { name: "ave_pad" type: "Pooling" bottom: "s1" top: "ave_pad" pooling_param { pool: AVE kernel_size: 3 stride: 2 pad: 1 } }
layer { name: "ave_nopad" type: "Pooling" bottom: "s1" top: "ave_nopad" pooling_param { pool: AVE kernel_size: 2 stride: 2 } }
layer { name: "ave_fit" type: "Pooling" bottom: "s0" top: "ave_fit" pooling_param { pool: AVE kernel_size: 3 stride: 1 pad: 1 } }
layer { name: "max_pad" type: "Pooling" bottom: "s2" top: "max_pad" pooling_param { pool: MAX kernel_size: 3 stride: 2 pad: 1 } }
layer { name: "max_hw" type: "Pooling" bottom: "s2" top: "max_hw"
  pooling_param { pool: MAX kernel_h: 3 kernel_w: 2 stride_h: 2 stride_w: 3 pad_h: 1 pad_w: 1 } }
layer { name: "max_floor" type: "Pooling" bottom: "s2" top: "max_floor" pooling_param { pool: MAX kernel_size: 2 stride: 2 round_mode: FLOOR } }
layer { name: "gmax" type: "Pooling" bottom: "h0" top: "gmax" pooling_param { pool: MAX global_pooling: true } }
layer { name: "gave" type: "Pooling" bottom: "h1" top: "gave" pooling_param { pool: AVE global_pooling: true } }
layer { name: "gmax_flat" type: "Flatten" bottom: "gmax" top: "gmax_flat" }
layer { name: "scale_bottom" type: "Scale" bottom: "gave" bottom: "gmax_flat" top: "scaled" scale_param { axis: 0 } }
layer { name: "split_out" type: "Split" bottom: "scaled" top: "scaled_a" top: "scaled_b" }
layer { name: "flat_hw" type: "Flatten" bottom: "ave_pad" top: "flat_hw" flatten_param { axis: 2 } }
layer { name: "reshape" type: "Reshape" bottom: "max_pad" top: "reshape" reshape_param { shape { dim: 0 dim: -1 dim: 2 } } }
layer { name: "scale_bias" type: "Scale" bottom: "reshape" top: "reshape" scale_param { axis: 1 num_axes: 2 bias_term: true } }
layer { name: "drop" type: "Dropout" bottom: "flat_hw" top: "flat_hw" dropout_param { dropout_ratio: 0.3 } }
layer { name: "ip_axis2" type: "InnerProduct" bottom: "flat_hw" top: "ip_axis2" inner_product_param { num_output: 5 axis: 2 } }
layer { name: "ip_t" type: "InnerProduct" bottom: "ave_nopad" top: "ip_t" inner_product_param { num_output: 7 transpose: true } }
layer { name: "bn_plain" type: "BatchNorm" bottom: "ip_t" top: "ip_t" }
layer { name: "scale_plain" type: "Scale" bottom: "ip_t" top: "ip_t" scale_param { bias_term: true } }
layer { name: "prob" type: "Softmax" bottom: "ip_t" top: "prob" }
layer { name: "ave_fit_sm" type: "Softmax" bottom: "ave_fit" top: "ave_fit_sm" softmax_param { axis: 2 } }
"""


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.stderr.write("usage: onnx_export_test.py LIBCORTADO_C BUILD_DIR [unittest arguments]\n")
        sys.exit(2)
    os.environ["CORTADO_LIB"] = os.path.abspath(sys.argv[1])
    marker = os.path.join(os.path.dirname(os.path.dirname(_venv_python(sys.argv[2]))), "UNAVAILABLE")
    if ort is None and not os.path.exists(marker):
        print("FAILED: no onnxruntime in %s: run scripts/install_python_deps.sh %s (scripts/test.sh does)"
              % (os.path.dirname(os.path.dirname(_venv_python(sys.argv[2]))), sys.argv[2]))
        sys.exit(1)
    start = time.time()
    prog = unittest.main(argv=[sys.argv[0], "-v"] + sys.argv[3:], exit=False)
    print("\n%-22s %-16s %-26s %-8s %s" % ("net", "input", "ORT max rel. difference", "checker", "seconds"))
    for label, shape, diff, checker, seconds in TABLE:
        print("%-22s %-16s %-26s %-8s %.1f" % (label, shape, "-" if diff is None else "%.2e" % diff, checker, seconds))
    print("(onnx %s, onnxruntime %s, opset %d; %.0f s in all)"
          % (onnx.__version__, ort.__version__ if ort else "absent", onnx_export.DEFAULT_OPSET, time.time() - start))
    if not prog.result.wasSuccessful():
        sys.exit(1)
    if ort is None:
        with open(marker) as f:
            print("SKIPPED: the ONNX Runtime comparisons: onnxruntime could not be installed (%s)" % f.read().strip())
        sys.exit(77)
    sys.exit(0)
