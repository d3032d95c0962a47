"""torchvision's ImageNet classifiers and Cortado's .caffemodel weights, both
ways: AlexNet, VGG-16, ResNet-18 and ResNet-50.

    from cortado import torchvision_weights as tw
    tw.write_caffemodel(model.state_dict(), "resnet50", "resnet50.caffemodel")
    state = tw.read_caffemodel("resnet50.caffemodel", "resnet50")   # {key: numpy array}
    model.load_state_dict({k: torch.from_numpy(v) for k, v in state.items()})

The weights fit the deploy prototxt of each net (DEPLOY below), written
layer for layer after torchvision's module, which differs from Caffe's nets
of the same name in models/: torchvision's AlexNet has other widths, no
groups and no LRN; its ResNets pad pool1 and round its size down, and
ResNet-50 strides on a bottleneck's 3x3. VGG-16 is the same net in both,
so models/vgg16 serves. The one mapping is MAPPINGS: for every torchvision
module holding tensors, its kind and the Caffe layers it becomes; TENSORS
says once, per kind, which tensor is which blob. Nothing is transformed: a
Conv2d weight is (out, in, kh, kw) as a Convolution's, a Linear weight
(out, in) as an InnerProduct's, and NCHW flattening before the first fully
connected layer is the same in both. BatchNorm2d becomes Caffe's pair,
BatchNorm (running mean, running variance, and a moving-average factor
written as 1; eps 1e-5 in the prototxts, as torch's) then Scale (weight,
bias). num_batches_tracked has no Caffe blob: it is dropped going to Caffe
and comes back as 0 (it matters only to BatchNorm2d with momentum=None).

Input size: the ResNets end in global average pooling, as torchvision's
AdaptiveAvgPool2d((1, 1)), and take any size. AlexNet's and VGG-16's
AdaptiveAvgPool2d((6, 6)) and ((7, 7)) are identities at 224x224, where
pool5 is already 6x6 and 7x7, and have no layer in the prototxts; at another
size Cortado stops at fc6 (its bottom gives a different number of inputs),
rather than answer what torchvision would not.

This module needs numpy and protobuf (caffe_files), not torch: a state_dict
may hold torch tensors or numpy arrays, and what comes back is numpy.
Errors are ConversionError (a cortado.Error) naming the torchvision key, the
module, the Caffe layer and the blob.
"""
import collections
import os

import numpy as np

from . import Error
from . import caffe_files

__all__ = ["ConversionError", "ARCHS", "DEPLOY", "MAPPINGS", "TENSORS", "mapping", "deploy_prototxt",
           "state_dict_to_caffe", "caffe_to_state_dict", "write_caffemodel", "read_caffemodel"]


class ConversionError(Error):
    """Weights that do not fit the net: a missing or unknown key, a shape, a layer."""


# ---- The mapping, written once --------------------------------------------------------------------

# The kinds of torchvision module that hold tensors.
WEIGHT = "weight"            # Conv2d(bias=False) -> Convolution with bias_term: false
WEIGHT_BIAS = "weight+bias"  # Conv2d -> Convolution, Linear -> InnerProduct
BATCHNORM = "batchnorm"      # BatchNorm2d -> BatchNorm then Scale (bias_term: true)

# Per kind: tensor name -> (which of the row's Caffe layers, blob index), and
# the Caffe types of those layers. BatchNorm's blob 2 (the moving-average
# factor Caffe divides both statistics by) is written as 1, and read back as
# Caffe reads it; num_batches_tracked has no blob.
TENSORS = {
    WEIGHT: collections.OrderedDict([("weight", (0, 0))]),
    WEIGHT_BIAS: collections.OrderedDict([("weight", (0, 0)), ("bias", (0, 1))]),
    BATCHNORM: collections.OrderedDict([("weight", (1, 0)), ("bias", (1, 1)),
                                        ("running_mean", (0, 0)), ("running_var", (0, 1))]),
}
_CAFFE_TYPES = {
    WEIGHT: (("Convolution", "InnerProduct"),),
    WEIGHT_BIAS: (("Convolution", "InnerProduct"),),
    BATCHNORM: (("BatchNorm",), ("Scale",)),
}
_BN_FACTOR_BLOB = 2
_NOT_STORED = "num_batches_tracked"  # BatchNorm2d's counter: no Caffe blob, 0 on the way back

# Rows: (torchvision module, kind, Caffe layers), in the order of the
# module's state_dict.
ALEXNET = [
    ("features.0", WEIGHT_BIAS, ("conv1",)),
    ("features.3", WEIGHT_BIAS, ("conv2",)),
    ("features.6", WEIGHT_BIAS, ("conv3",)),
    ("features.8", WEIGHT_BIAS, ("conv4",)),
    ("features.10", WEIGHT_BIAS, ("conv5",)),
    ("classifier.1", WEIGHT_BIAS, ("fc6",)),
    ("classifier.4", WEIGHT_BIAS, ("fc7",)),
    ("classifier.6", WEIGHT_BIAS, ("fc8",)),
]

VGG16 = [
    ("features.0", WEIGHT_BIAS, ("conv1_1",)),
    ("features.2", WEIGHT_BIAS, ("conv1_2",)),
    ("features.5", WEIGHT_BIAS, ("conv2_1",)),
    ("features.7", WEIGHT_BIAS, ("conv2_2",)),
    ("features.10", WEIGHT_BIAS, ("conv3_1",)),
    ("features.12", WEIGHT_BIAS, ("conv3_2",)),
    ("features.14", WEIGHT_BIAS, ("conv3_3",)),
    ("features.17", WEIGHT_BIAS, ("conv4_1",)),
    ("features.19", WEIGHT_BIAS, ("conv4_2",)),
    ("features.21", WEIGHT_BIAS, ("conv4_3",)),
    ("features.24", WEIGHT_BIAS, ("conv5_1",)),
    ("features.26", WEIGHT_BIAS, ("conv5_2",)),
    ("features.28", WEIGHT_BIAS, ("conv5_3",)),
    ("classifier.0", WEIGHT_BIAS, ("fc6",)),
    ("classifier.3", WEIGHT_BIAS, ("fc7",)),
    ("classifier.6", WEIGHT_BIAS, ("fc8",)),
]


def resnet_rows(blocks, bottleneck):
    """The rows of a torchvision ResNet with `blocks` blocks per stage, in
    the names of Kaiming He's Caffe release: torchvision's layerS.I is stage
    S+1, block "abcdef"[I] (layer1.0 is res2a); its convK, bnK are branch2a,
    2b, 2c; downsample.0, .1 (the projection) branch1."""
    rows = [("conv1", WEIGHT, ("conv1",)), ("bn1", BATCHNORM, ("bn_conv1", "scale_conv1"))]
    for stage, count in enumerate(blocks, start=2):
        for i in range(count):
            torch_block, caffe_block = "layer%d.%d." % (stage - 1, i), "%d%s" % (stage, "abcdef"[i])

            def row(torch_conv, torch_bn, branch):
                return [(torch_block + torch_conv, WEIGHT, ("res%s_%s" % (caffe_block, branch),)),
                        (torch_block + torch_bn, BATCHNORM,
                         ("bn%s_%s" % (caffe_block, branch), "scale%s_%s" % (caffe_block, branch)))]
            for k, branch in enumerate("abc" if bottleneck else "ab", start=1):
                rows += row("conv%d" % k, "bn%d" % k, "branch2" + branch)
            # A projection where the block changes the shape: every first
            # block but ResNet-18's first (64 channels in and out, stride 1).
            if i == 0 and (bottleneck or stage > 2):
                rows += row("downsample.0", "downsample.1", "branch1")
    return rows + [("fc", WEIGHT_BIAS, ("fc1000",))]


MAPPINGS = collections.OrderedDict([
    ("alexnet", ALEXNET),
    ("vgg16", VGG16),
    ("resnet18", resnet_rows((2, 2, 2, 2), bottleneck=False)),
    ("resnet50", resnet_rows((3, 4, 6, 3), bottleneck=True)),
])
ARCHS = tuple(MAPPINGS)

# The deploy prototxts, relative to the repository root.
DEPLOY = {
    "alexnet": "models/torchvision/alexnet/deploy.prototxt",
    "vgg16": "models/vgg16/deploy.prototxt",
    "resnet18": "models/torchvision/resnet18/deploy.prototxt",
    "resnet50": "models/torchvision/resnet50/deploy.prototxt",
}


def _rows(arch):
    if arch not in MAPPINGS:
        raise ConversionError("unknown architecture '%s' (known: %s)" % (arch, ", ".join(ARCHS)))
    return MAPPINGS[arch]


def mapping(arch):
    """{torchvision state_dict key: (Caffe layer, blob index)} for `arch`,
    in the state_dict's order; num_batches_tracked keys map to None."""
    out = collections.OrderedDict()
    for module, kind, layers in _rows(arch):
        for tensor, (which, blob) in TENSORS[kind].items():
            out[module + "." + tensor] = (layers[which], blob)
        if kind == BATCHNORM:
            out[module + "." + _NOT_STORED] = None
    return out


def deploy_prototxt(arch):
    """The path of `arch`'s deploy prototxt in this source tree."""
    _rows(arch)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    path = os.path.join(root, DEPLOY[arch])
    if not os.path.exists(path):
        raise ConversionError("%s: not found (the deploy prototxt of %s lives in Cortado's source tree, "
                              "%s; give its path)" % (path, arch, DEPLOY[arch]))
    return path


# ---- state_dict -> Caffe ----------------------------------------------------------------------------

def _array(value):
    """A float32 numpy copy of a torch tensor or an array."""
    if hasattr(value, "detach"):
        value = value.detach().cpu()
        if str(value.dtype) == "torch.bfloat16":
            value = value.float()
        value = value.numpy()
    return np.array(value, dtype=np.float32)


def _strip_module_prefix(state_dict):
    """Keys of a model saved through DataParallel start with "module."."""
    keys = list(state_dict)
    if keys and all(k.startswith("module.") for k in keys):
        return collections.OrderedDict((k[len("module."):], v) for k, v in state_dict.items())
    return state_dict


def state_dict_to_caffe(state_dict, arch):
    """{Caffe layer: [float32 blobs]} from a torchvision state_dict of `arch`
    (every key present, no other; shapes agreeing within each module)."""
    state_dict = _strip_module_prefix(state_dict)
    table = mapping(arch)
    missing = [k for k in table if k not in state_dict and table[k] is not None]
    if missing:
        layer, blob = table[missing[0]]
        raise ConversionError("%s state_dict: no '%s' (Caffe layer '%s' blob %d)%s"
                              % (arch, missing[0], layer, blob,
                                 "; %d keys missing in all" % len(missing) if len(missing) > 1 else ""))
    unknown = [k for k in state_dict if k not in table]
    if unknown:
        listed = ", ".join(unknown[:5]) + (" ..." if len(unknown) > 5 else "")
        raise ConversionError("%s state_dict: %d keys that torchvision's %s does not have: %s"
                              % (arch, len(unknown), arch, listed))
    blobs = collections.OrderedDict()
    for module, kind, layers in _rows(arch):
        for layer in layers:
            blobs[layer] = []
        for tensor, (which, index) in TENSORS[kind].items():
            key = module + "." + tensor
            value = _array(state_dict[key])
            if kind == BATCHNORM and value.ndim != 1:
                raise ConversionError("%s state_dict: '%s' has shape %s; a BatchNorm2d tensor is (C,)"
                                      % (arch, key, list(value.shape)))
            layer_blobs = blobs[layers[which]]
            if len(layer_blobs) != index:
                raise ConversionError("internal: blob %d of '%s' out of order" % (index, layers[which]))
            layer_blobs.append(value)
        if kind == BATCHNORM:
            channels = {b.shape for layer in layers for b in blobs[layer]}
            if len(channels) != 1:
                raise ConversionError("%s state_dict: module '%s' holds tensors of shapes %s; BatchNorm2d's "
                                      "four are all (C,)" % (arch, module, sorted(channels)))
            blobs[layers[0]].append(np.ones(1, dtype=np.float32))  # the moving-average factor
    return blobs


def _weighted_layers(net):
    """{name: LayerParameter} of the prototxt's layers that carry blobs."""
    types = {t for types in _CAFFE_TYPES.values() for group in types for t in group}
    return collections.OrderedDict((l.name, l) for l in net.layer if l.type in types)


def _check_against_prototxt(arch, blobs, net, where):
    """Every layer of the net with weights has them, none is left over, and
    the types and output counts agree with the mapping's rows."""
    layers = _weighted_layers(net)
    extra = [name for name in layers if name not in blobs]
    if extra:
        raise ConversionError("%s: layers %s (%s) have no torchvision tensor in the %s mapping"
                              % (where, ", ".join(extra), layers[extra[0]].type, arch))
    for module, kind, names in _rows(arch):
        for name, allowed in zip(names, _CAFFE_TYPES[kind]):
            if name not in layers:
                raise ConversionError("%s: no layer '%s' (%s) for torchvision's '%s'"
                                      % (where, name, " or ".join(allowed), module))
            layer = layers[name]
            if layer.type not in allowed:
                raise ConversionError("%s: layer '%s' is %s; torchvision's '%s' needs %s"
                                      % (where, name, layer.type, module, " or ".join(allowed)))
            first = blobs[name][0]
            param = {"Convolution": layer.convolution_param, "InnerProduct": layer.inner_product_param}.get(layer.type)
            if param is not None and param.num_output != first.shape[0]:
                raise ConversionError("%s: layer '%s' has num_output %d; torchvision's '%s.weight' has %d outputs "
                                      "(shape %s)" % (where, name, param.num_output, module, first.shape[0],
                                                      list(first.shape)))
            has_bias = len(blobs[name]) > 1
            if param is not None and param.bias_term != has_bias:
                raise ConversionError("%s: layer '%s' has bias_term %s; torchvision's '%s' has %s bias"
                                      % (where, name, str(param.bias_term).lower(), module, "a" if has_bias else "no"))


def _varint(n):
    out = bytearray()
    while True:
        low, n = n & 0x7F, n >> 7
        out.append(low | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _fill_blob(blob, values):
    """A BlobProto with `values`' shape and float `data`, packed as Caffe
    writes it. The packed field is handed to protobuf's parser whole:
    extending the repeated field from Python takes tens of seconds for
    VGG-16's 138 million weights."""
    blob.shape.dim.extend(values.shape)
    raw = np.ascontiguousarray(values, dtype="<f4").tobytes()
    blob.MergeFromString(b"\x2a" + _varint(len(raw)) + raw)  # field 5 (data), length-delimited


def write_caffemodel(state_dict, arch, path, model=None):
    """Writes `path`, a binary .caffemodel for `model` (default: `arch`'s
    deploy prototxt) from a torchvision state_dict: the prototxt's net, as a
    snapshot of Caffe's holds it, with each layer's blobs. BVLC Caffe reads
    it too. Returns the number of values written."""
    model = model or deploy_prototxt(arch)
    blobs = state_dict_to_caffe(state_dict, arch)
    net = caffe_files.read_net(model)
    _check_against_prototxt(arch, blobs, net, model)
    count = 0
    for layer in net.layer:
        for values in blobs.get(layer.name, []):
            _fill_blob(layer.blobs.add(), values)
            count += values.size
    data = net.SerializeToString()
    try:
        with open(path, "wb") as f:
            f.write(data)
    except OSError as e:
        raise ConversionError("%s: %s" % (path, e.strerror)) from None
    return count


# ---- Caffe -> state_dict ----------------------------------------------------------------------------

def caffe_to_state_dict(weights, arch, shapes=None, where="weights"):
    """torchvision's state_dict of `arch` ({key: numpy array}, its order)
    from {Caffe layer: [float32 blobs]} (caffe_files.read_weights). The
    BatchNorm statistics are divided by the moving-average factor as Caffe
    does (a factor of 0 gives 0); num_batches_tracked is 0 (int64).
    `shapes` ({key: shape}, a torchvision model's) checks every tensor's
    shape, reshaping where only axes of 1 differ (the legacy 4-axis blobs
    of old Caffe files)."""
    out = collections.OrderedDict()
    for module, kind, layers in _rows(arch):
        for name, types in zip(layers, _CAFFE_TYPES[kind]):
            if name not in weights:
                raise ConversionError("%s: no blobs for layer '%s' (%s), torchvision's '%s'"
                                      % (where, name, " or ".join(types), module))
        factor = None
        if kind == BATCHNORM:
            stats = weights[layers[0]]
            if len(stats) <= _BN_FACTOR_BLOB or stats[_BN_FACTOR_BLOB].size != 1:
                raise ConversionError("%s: layer '%s' (BatchNorm) needs 3 blobs (mean, variance, a factor of one "
                                      "value), has %s" % (where, layers[0], [list(b.shape) for b in stats]))
            f = stats[_BN_FACTOR_BLOB].reshape(())
            factor = np.float32(0) if f == 0 else np.float32(1) / f
        for tensor, (which, index) in TENSORS[kind].items():
            layer = layers[which]
            if index >= len(weights[layer]):
                raise ConversionError("%s: layer '%s' has %d blobs; torchvision's '%s.%s' is blob %d"
                                      % (where, layer, len(weights[layer]), module, tensor, index))
            value = np.array(weights[layer][index], dtype=np.float32)
            if kind == BATCHNORM:
                value = value.reshape(-1)  # old Caffe files keep (1, 1, 1, C)
            key = module + "." + tensor
            if shapes is not None and key in shapes and value.shape != tuple(shapes[key]):
                want = tuple(shapes[key])
                if [d for d in value.shape if d != 1] != [d for d in want if d != 1]:
                    raise ConversionError("%s: layer '%s' blob %d has shape %s; torchvision's '%s' is %s"
                                          % (where, layer, index, list(value.shape), key, list(want)))
                value = value.reshape(want)
            if tensor.startswith("running_"):
                value = value * factor
            out[key] = value
        if kind == BATCHNORM:
            out[module + "." + _NOT_STORED] = np.zeros((), dtype=np.int64)
    return out


def read_caffemodel(path, arch, shapes=None):
    """caffe_to_state_dict of a binary .caffemodel file."""
    return caffe_to_state_dict(caffe_files.read_weights(path), arch, shapes, path)
