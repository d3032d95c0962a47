#!/usr/bin/env python3
"""Tests of the torchvision weight converter (python/cortado/torchvision_weights.py,
scripts/convert_torchvision.py) against PyTorch itself.

    python3 tests/scripts/torchvision_weights_test.py LIBCORTADO_C BUILD_DIR [unittest arguments]

For each of AlexNet, VGG-16, ResNet-18 and ResNet-50: torchvision's model
with seeded random weights (BatchNorm's running statistics, weights and
biases drawn too, every bias drawn), in eval mode, converted to a
.caffemodel for its deploy prototxt; Cortado's FP32 forward on the CPU of a
batch of 2 random 224x224 images gives logits (the blob before "prob"; the
torchvision model's output is its logits) within 1e-4 of torchvision's,
relative to their largest magnitude. The .caffemodel converted back gives a
state_dict bit-equal to the original, whose model's output equals the
first's. Also: the ResNets at another size, AlexNet's and VGG-16's error at
one, the converter's errors, and the script both ways.

PyTorch and torchvision come from Debian (python3-torch,
python3-torchvision: scripts/install_deps.sh). The script runs under the
first of this interpreter, BUILD_DIR/pyenv's and Debian's /usr/bin/python3
that imports torch; where none does, it exits 77 (ctest's SKIPPED) saying so.
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
NEEDS = "import numpy, torch, torchvision, google.protobuf"


def _has_torch(python):
    return subprocess.run([python, "-c", NEEDS], stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL).returncode == 0


def _reexec_with_torch():
    """Runs this script under an interpreter that imports torch, if this one
    does not; exits 77 where none does."""
    try:
        exec(NEEDS)
        return
    except ImportError as e:
        missing = str(e)
    candidates = []
    if len(sys.argv) >= 3:
        candidates.append(os.path.join(os.path.abspath(sys.argv[2]), "pyenv", "bin", "python3"))
    candidates.append("/usr/bin/python3")
    for python in candidates:
        if os.path.exists(python) and os.path.realpath(python) != os.path.realpath(sys.executable) \
                and _has_torch(python):
            os.execv(python, [python] + sys.argv)
    print("SKIPPED: %s under %s, and no other interpreter (%s) imports torch: install Debian's python3-torch "
          "and python3-torchvision (scripts/install_deps.sh)" % (missing, sys.executable, ", ".join(candidates)))
    sys.exit(77)


if __name__ == "__main__":
    _reexec_with_torch()

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torchvision  # noqa: E402

sys.path.insert(0, os.path.join(ROOT, "python"))
import cortado  # noqa: E402
from cortado import torchvision_weights as tw  # noqa: E402

TOLERANCE = 1e-4
BATCH = 2
LOGITS = {"alexnet": "fc8", "vgg16": "fc8", "resnet18": "fc1000", "resnet50": "fc1000"}
TABLE = []  # (net, input, max relative difference, round trip, seconds)


def random_model(arch, seed):
    """torchvision's `arch` in eval mode with seeded random weights; every
    bias and BatchNorm's four tensors drawn as well, so that none is the
    default that a mapping mistake could leave unnoticed."""
    torch.manual_seed(seed)
    model = getattr(torchvision.models, arch)(weights=None).eval()
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, torch.nn.BatchNorm2d):
                module.weight.uniform_(0.5, 1.5)
                module.bias.normal_(0.0, 0.1)
                module.running_mean.normal_(0.0, 0.1)
                module.running_var.uniform_(0.5, 2.0)
            elif getattr(module, "bias", None) is not None:
                module.bias.normal_(0.0, 0.05)
    return model


def torch_forward(model, x):
    with torch.no_grad():
        return model(torch.from_numpy(x)).numpy()


def cortado_forward(prototxt, weights, logits, x):
    """Cortado's FP32 CPU forward; a copy of the logits."""
    net = cortado.Net(prototxt, weights, cortado.TEST, gpu=-1)
    try:
        return np.array(net.forward(blobs=[logits], data=x)[logits])
    finally:
        net.close()


def relative_difference(got, want):
    scale = float(np.max(np.abs(want)))
    return float(np.max(np.abs(got.astype(np.float64) - want))) / (scale if scale > 0 else 1.0)


def bits(a):
    a = np.ascontiguousarray(a)
    return a.dtype, a.shape, a.tobytes()


class TorchvisionWeights(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="cortado_torchvision_test.")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def check_net(self, arch, seed):
        start = time.time()
        model = random_model(arch, seed)
        original = model.state_dict()
        x = np.random.default_rng(seed).standard_normal((BATCH, 3, 224, 224), dtype=np.float32)
        want = torch_forward(model, x)
        weights = os.path.join(self.dir, arch + ".caffemodel")
        tw.write_caffemodel(original, arch, weights)
        prototxt = tw.deploy_prototxt(arch)
        got = cortado_forward(prototxt, weights, LOGITS[arch], x)
        self.assertEqual(got.shape, want.shape)
        diff = relative_difference(got, want)
        self.assertLessEqual(diff, TOLERANCE, "%s: Cortado's logits differ from torchvision's by %.3g relative"
                             % (arch, diff))
        # Back: the same keys in the same order, every tensor bit for bit
        # (num_batches_tracked is 0 in both: a fresh model's, and the one the
        # way back writes).
        shapes = {k: tuple(v.shape) for k, v in original.items()}
        back = tw.read_caffemodel(weights, arch, shapes)
        self.assertEqual(list(back), list(original))
        for key, value in original.items():
            self.assertEqual(bits(back[key]), bits(value.numpy()), "%s: '%s' changed on the round trip" % (arch, key))
        del model
        again = getattr(torchvision.models, arch)(weights=None).eval()
        again.load_state_dict({k: torch.from_numpy(v) for k, v in back.items()}, strict=True)
        self.assertTrue(np.array_equal(torch_forward(again, x), want), "%s: the round trip's model differs" % arch)
        TABLE.append((arch, "%dx3x224x224" % BATCH, diff, "bit-equal, same output", time.time() - start))
        return again, prototxt, weights, x

    def test_alexnet(self):
        _, prototxt, weights, _ = self.check_net("alexnet", 1)
        self.check_other_size_fails(prototxt, weights)

    def test_vgg16(self):
        _, prototxt, weights, _ = self.check_net("vgg16", 2)
        self.check_other_size_fails(prototxt, weights)

    def test_resnet18(self):
        model, prototxt, weights, x224 = self.check_net("resnet18", 3)
        # Global average pooling, as AdaptiveAvgPool2d((1, 1)): any size.
        start = time.time()
        x = np.random.default_rng(30).standard_normal((1, 3, 160, 192), dtype=np.float32)
        diff = relative_difference(cortado_forward(prototxt, weights, "fc1000", x), torch_forward(model, x))
        self.assertLessEqual(diff, TOLERANCE)
        TABLE.append(("resnet18", "1x3x160x192", diff, "-", time.time() - start))
        # The comparison sees the architecture: Caffe's ResNet-18, the same
        # layers and weights but pool1 unpadded and rounding up, is far off.
        caffe = os.path.join(ROOT, "models", "resnet18", "deploy.prototxt")
        diff = relative_difference(cortado_forward(caffe, weights, "fc1000", x224), torch_forward(model, x224))
        self.assertGreater(diff, 1e-2, "Caffe's ResNet-18 should not match torchvision's")
        TABLE.append(("resnet18 on models/resnet18 (Caffe's)", "2x3x224x224", diff, "-", None))

    def test_resnet50(self):
        self.check_net("resnet50", 4)

    def check_other_size_fails(self, prototxt, weights):
        """torchvision's AdaptiveAvgPool2d is an identity only at 224x224:
        Cortado refuses another size at fc6, whose input count changes."""
        net = cortado.Net(prototxt, weights, cortado.TEST, gpu=-1)
        try:
            with self.assertRaisesRegex(cortado.Error, "fc6"):
                net.forward(data=np.zeros((1, 3, 256, 256), dtype=np.float32))
        finally:
            net.close()

    def test_mapping_covers_torchvision(self):
        """Every state_dict key of torchvision's four models is in the table,
        in the state_dict's order (write_caffemodel checks the other side:
        every layer of the prototxt with weights is mapped)."""
        for arch in tw.ARCHS:
            with self.subTest(arch=arch):
                keys = list(getattr(torchvision.models, arch)(weights=None).state_dict())
                self.assertEqual(list(tw.mapping(arch)), keys)

    def test_errors(self):
        model = random_model("resnet18", 5)
        state = model.state_dict()
        out = os.path.join(self.dir, "errors.caffemodel")
        # A missing key names itself and its Caffe layer.
        partial = dict(state)
        del partial["layer2.0.bn1.running_var"]
        with self.assertRaisesRegex(tw.ConversionError,
                                    r"resnet18 state_dict: no 'layer2.0.bn1.running_var' \(Caffe layer "
                                    r"'bn3a_branch2a' blob 1\)"):
            tw.write_caffemodel(partial, "resnet18", out)
        # A key of another net.
        extra = dict(state)
        extra["layer1.0.conv3.weight"] = torch.zeros(256, 64, 1, 1)
        with self.assertRaisesRegex(tw.ConversionError, r"keys that torchvision's resnet18 does not have: "
                                    r"layer1.0.conv3.weight"):
            tw.write_caffemodel(extra, "resnet18", out)
        # Another architecture's state_dict.
        with self.assertRaisesRegex(tw.ConversionError, r"resnet50 state_dict: no 'layer1.0.conv3.weight'"):
            tw.write_caffemodel(state, "resnet50", out)
        # DataParallel's "module." prefix is accepted.
        prefixed = {"module." + k: v for k, v in state.items()}
        tw.write_caffemodel(prefixed, "resnet18", out)
        # Caffe's AlexNet is not torchvision's: the widths disagree.
        alexnet = getattr(torchvision.models, "alexnet")(weights=None).state_dict()
        with self.assertRaisesRegex(tw.ConversionError, r"models/alexnet/deploy.prototxt: layer 'conv1' has "
                                    r"num_output 96; torchvision's 'features.0.weight' has 64 outputs"):
            tw.write_caffemodel(alexnet, "alexnet", out, os.path.join(ROOT, "models", "alexnet", "deploy.prototxt"))
        # Caffe's ResNet-50 has a bias in conv1; torchvision's has none.
        resnet50 = random_model("resnet50", 6).state_dict()
        with self.assertRaisesRegex(tw.ConversionError, r"layer 'conv1' has bias_term true; torchvision's 'conv1' "
                                    r"has no bias"):
            tw.write_caffemodel(resnet50, "resnet50", out, os.path.join(ROOT, "models", "resnet50", "deploy.prototxt"))
        # A .caffemodel without a layer of the table, and with a wrong shape.
        weights = tw.state_dict_to_caffe(state, "resnet18")
        del weights["scale4a_branch1"]
        with self.assertRaisesRegex(tw.ConversionError, r"no blobs for layer 'scale4a_branch1' \(Scale\), "
                                    r"torchvision's 'layer3.0.downsample.1'"):
            tw.caffe_to_state_dict(weights, "resnet18")
        weights = tw.state_dict_to_caffe(state, "resnet18")
        weights["fc1000"][0] = weights["fc1000"][0][:10]
        with self.assertRaisesRegex(tw.ConversionError, r"layer 'fc1000' blob 0 has shape \[10, 512\]; "
                                    r"torchvision's 'fc.weight' is \[1000, 512\]"):
            tw.caffe_to_state_dict(weights, "resnet18", {"fc.weight": (1000, 512)})
        with self.assertRaisesRegex(tw.ConversionError, "unknown architecture 'resnet34'"):
            tw.mapping("resnet34")

    def test_caffe_moving_average_factor(self):
        """A .caffemodel trained by Caffe keeps BatchNorm's statistics summed,
        with the factor in blob 2: the way back divides as Caffe does."""
        state = random_model("resnet18", 7).state_dict()
        weights = tw.state_dict_to_caffe(state, "resnet18")
        weights["bn_conv1"] = [weights["bn_conv1"][0] * 4, weights["bn_conv1"][1] * 4, np.array([4.0], np.float32)]
        back = tw.caffe_to_state_dict(weights, "resnet18")
        np.testing.assert_allclose(back["bn1.running_mean"], state["bn1.running_mean"].numpy(), rtol=1e-6)
        np.testing.assert_allclose(back["bn1.running_var"], state["bn1.running_var"].numpy(), rtol=1e-6)

    def test_the_script_both_ways(self):
        state = random_model("resnet18", 8).state_dict()
        pth = os.path.join(self.dir, "script.pth")
        torch.save({"epoch": 3, "state_dict": state}, pth)  # a checkpoint holding one
        caffemodel = os.path.join(self.dir, "script.caffemodel")
        back = os.path.join(self.dir, "script_back.pth")
        script = os.path.join(ROOT, "scripts", "convert_torchvision.py")
        for args in (["to-caffe", "--arch=resnet18", "--state-dict=" + pth, "--output=" + caffemodel],
                     ["to-torch", "--arch=resnet18", "--weights=" + caffemodel, "--output=" + back]):
            run = subprocess.run([sys.executable, script] + args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                 universal_newlines=True)
            self.assertEqual(run.returncode, 0, run.stdout)
        self.assertIn("-> 122 tensors in", run.stdout)
        loaded = torch.load(back)
        self.assertEqual(list(loaded), list(state))
        for key in state:
            self.assertTrue(torch.equal(loaded[key], state[key]) and loaded[key].dtype == state[key].dtype, key)
        # A user error: one line naming the key, exit 1, nothing written.
        torch.save({k: v for k, v in state.items() if k != "fc.bias"}, pth)
        out = os.path.join(self.dir, "none.caffemodel")
        run = subprocess.run([sys.executable, script, "to-caffe", "--arch=resnet18", "--state-dict=" + pth,
                              "--output=" + out], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             universal_newlines=True)
        self.assertEqual(run.returncode, 1, run.stderr)
        self.assertIn("no 'fc.bias' (Caffe layer 'fc1000' blob 1)", run.stderr)
        self.assertFalse(os.path.exists(out))


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.stderr.write("usage: torchvision_weights_test.py LIBCORTADO_C BUILD_DIR [unittest arguments]\n")
        sys.exit(2)
    os.environ["CORTADO_LIB"] = os.path.abspath(sys.argv[1])
    os.environ.setdefault("GLOG_minloglevel", "1")  # the nets' INFO lines (fused chains) drown the table
    start = time.time()
    prog = unittest.main(argv=[sys.argv[0], "-v"] + sys.argv[3:], exit=False)
    print("\n%-38s %-13s %-28s %-24s %s" % ("net", "input", "logits max rel. difference", "round trip", "seconds"))
    for arch, shape, diff, trip, seconds in TABLE:
        print("%-38s %-13s %-28s %-24s %s" % (arch, shape, "%.2e" % diff, trip,
                                                "-" if seconds is None else "%.1f" % seconds))
    print("(torch %s, torchvision %s, Cortado FP32 on the CPU; %.0f s in all)"
          % (torch.__version__, torchvision.__version__, time.time() - start))
    sys.exit(0 if prog.result.wasSuccessful() else 1)
