#!/usr/bin/env python3
"""Converts the weights of torchvision's AlexNet, VGG-16, ResNet-18 and
ResNet-50 to Cortado's .caffemodel and back (docs/pytorch.md):

    python3 scripts/convert_torchvision.py to-caffe --arch=resnet50 --state-dict=resnet50.pth \
        --output=resnet50.caffemodel [--model=deploy.prototxt]
    python3 scripts/convert_torchvision.py to-torch --arch=resnet50 --weights=resnet50.caffemodel \
        --output=resnet50.pth

A .pth is a state_dict saved with torch.save (a checkpoint dict holding one
under "state_dict" or "model" is read too). The .caffemodel fits --model,
by default the net's deploy prototxt in this tree (models/torchvision/<arch>,
models/vgg16 for VGG-16). The mapping is
python/cortado/torchvision_weights.py's. Needs PyTorch and torchvision
(Debian: python3-torch python3-torchvision), protobuf, numpy and protoc
(scripts/install_deps.sh); not the Cortado library.
"""
import argparse
import collections
import os
import subprocess
import sys

try:
    import numpy  # noqa: F401
    import google.protobuf  # noqa: F401
    import torch
    import torchvision
except ImportError as e:
    # Another python3 ahead of Debian's on the PATH (a virtualenv, pyenv)
    # may lack Debian's packages: run under Debian's where it has them.
    debian = "/usr/bin/python3"
    if os.path.realpath(sys.executable) != os.path.realpath(debian) and os.path.exists(debian) and subprocess.run(
            [debian, "-c", "import numpy, google.protobuf, torch, torchvision"],
            stderr=subprocess.DEVNULL).returncode == 0:
        os.execv(debian, [debian] + sys.argv)
    sys.exit("convert_torchvision: %s (Debian: python3-torch python3-torchvision python3-protobuf python3-numpy; "
             "scripts/install_deps.sh)" % e)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python"))
import cortado  # noqa: E402
from cortado import torchvision_weights as tw  # noqa: E402


def torchvision_model(arch):
    """torchvision's model of `arch`, random weights (no download)."""
    return getattr(torchvision.models, arch)(weights=None)


def load_state_dict(path):
    """A state_dict from a .pth file: the dict itself, or the one a
    checkpoint keeps under "state_dict" or "model"."""
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise cortado.Error("%s: no such file" % path) from None
    except Exception as e:  # pickle's and torch's many errors
        raise cortado.Error("%s: not a state_dict saved by torch.save (%s: %s)"
                            % (path, type(e).__name__, str(e).splitlines()[0] if str(e) else "")) from None
    if isinstance(obj, dict):
        for key in ("state_dict", "model"):
            if isinstance(obj.get(key), dict):
                obj = obj[key]
                break
    if not isinstance(obj, dict) or not all(hasattr(v, "shape") for v in obj.values()):
        raise cortado.Error("%s: holds a %s, not a state_dict of tensors" % (path, type(obj).__name__))
    return obj


def to_caffe(args):
    state = load_state_dict(args.state_dict)
    model = args.model or tw.deploy_prototxt(args.arch)
    count = tw.write_caffemodel(state, args.arch, args.output, model)
    print("%s: %d tensors, %d values -> %s (for %s)" % (args.arch, len(state), count, args.output, model))


def to_torch(args):
    model = torchvision_model(args.arch)
    template = model.state_dict()
    shapes = {k: tuple(v.shape) for k, v in template.items()}
    arrays = tw.read_caffemodel(args.weights, args.arch, shapes)
    state = collections.OrderedDict((k, torch.from_numpy(v).to(template[k].dtype))
                                    for k, v in arrays.items())
    model.load_state_dict(state, strict=True)  # torchvision's own check
    try:
        torch.save(state, args.output)
    except OSError as e:
        raise cortado.Error("%s: %s" % (args.output, e.strerror)) from None
    print("%s: %s -> %d tensors in %s (num_batches_tracked 0)" % (args.arch, args.weights, len(state), args.output))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    caffe = commands.add_parser("to-caffe", help="a torchvision state_dict (.pth) to a .caffemodel")
    caffe.add_argument("--state-dict", required=True, help="a .pth holding a state_dict")
    caffe.add_argument("--model", help="the deploy prototxt the weights fit (default: the arch's in this tree)")
    torch_ = commands.add_parser("to-torch", help="a .caffemodel to a torchvision state_dict (.pth)")
    torch_.add_argument("--weights", required=True, help="a binary .caffemodel")
    for p in (caffe, torch_):
        p.add_argument("--arch", required=True, choices=tw.ARCHS)
        p.add_argument("--output", required=True)
    args = parser.parse_args(argv)
    try:
        (to_caffe if args.command == "to-caffe" else to_torch)(args)
    except cortado.Error as e:
        sys.stderr.write("convert_torchvision: %s\n" % e)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
