"""Exports a Caffe-format net (a deploy prototxt and its .caffemodel) to ONNX.

    python3 scripts/export_onnx.py --model=models/resnet50/deploy.prototxt \\
        --weights=resnet50.caffemodel --output=resnet50.onnx [--batch=1] [--fp16]

or from Python (the nets and the weights can also be in memory):

    from cortado import onnx_export
    model = onnx_export.export("deploy.prototxt", "x.caffemodel", "x.onnx")

What it reads: the prototxt and the .caffemodel, parsed by caffe_files with
protobuf against Cortado's own schema, so a file Cortado reads, this reads.
Weights are matched to layers by name, as Caffe does; a layer missing from
the .caffemodel takes the blobs written in the prototxt, else it is an
error. Blobs hold float `data`, `double_data`, or NVCaffe's `raw_data` of
raw_data_type FLOAT16, FLOAT, DOUBLE (or Cortado's BFLOAT16). Layers are
filtered as in the TEST phase (include/exclude rules; stages and level as
given). The net's outputs are Caffe's: the blobs no later layer reads.

What it writes: one ONNX node (or a few) per layer, opset 17 by default,
FP32 (`fp16=True`: every tensor, inputs and outputs included, FP16). Blob
names stay Caffe's: the inputs and outputs carry the prototxt's names, and
a blob that in-place layers rewrite is named after its last writer's value
(earlier values are "blob/layer"). Shapes are static, from the Input layer
(`batch` overrides the first axis); the model is checked by onnx.checker and
by ONNX's strict shape inference against the shapes computed here.

The layer table (_CONVERTERS) with the ONNX it becomes:
  Input            graph inputs
  Convolution      Conv (group, dilation, pad, stride; one Conv per bottom)
  InnerProduct     Gemm (after Flatten when the bottom has more axes); axis > 1: MatMul + Add
  Pooling          MaxPool / AveragePool / GlobalMaxPool / GlobalAveragePool. Caffe's
                   ceil rounding (and its clipping of the last window) is written as
                   explicit end pads with ceil_mode 0: MAX ignores pads, AVE divides by
                   the window clipped to the padded image as Caffe does (padding P
                   becomes a zero Pad node when the last window overhangs the padded
                   image, then count_include_pad 0)
  ReLU             Relu, or LeakyRelu (negative_slope)
  PReLU            PRelu (slopes broadcast over (C, 1, 1))
  ELU              Elu, or Selu for NVCaffe's lambda != 1
  Sigmoid, TanH    Sigmoid, Tanh
  LRN              LRN (ACROSS_CHANNELS); WITHIN_CHANNEL as x * (1 + alpha * avgpool(x^2))^-beta
  BatchNorm        BatchNormalization: mean = blob0 / blob2, var = blob1 / blob2 (0 when
                   blob2 is 0); NVCaffe's scale_bias blobs 3 and 4 as scale and bias
  Scale            Mul (+ Add with bias_term); the scale as a second bottom is reshaped
  Eltwise          Add / Sum (SUM; coefficients as Mul), Mul (PROD), Max (MAX)
  Concat           Concat
  Slice            Split
  Softmax          Softmax
  Flatten          Flatten (axis 1 to the end), else Reshape
  Reshape          Reshape (Caffe's 0 and -1 mean what ONNX's do)
  Dropout, Split   nothing: their tops are the bottom's value (inference)
Any other layer type, or a field with no ONNX equivalent (STOCHASTIC
pooling, batch statistics in a deploy net), is an ExportError that names the
file, the layer and its type.
"""
import argparse
import collections
import re
import sys

import numpy as np

from . import Error
from .caffe_files import blob_array, included, load_schema, read_net_text, read_weights

try:
    import onnx
    from onnx import TensorProto, helper, numpy_helper
except ImportError:  # reported by export() and main(), which need it
    onnx = None

__all__ = ["ExportError", "DEFAULT_OPSET", "export", "main"]

DEFAULT_OPSET = 17
_MIN_OPSET = 13  # Split's sizes and Pad's pads as inputs, Softmax over one axis


class ExportError(Error):
    """The net cannot be exported as given: a layer, a field or a blob (a
    file that cannot be read is caffe_files.CaffeFileError; both are
    cortado.Error)."""


# ---- The graph under construction --------------------------------------------------------------

class _Graph:
    """Nodes, initializers and unique names; `fp16` stores every float
    initializer as float16. The Caffe blob names (`reserved`) are kept for
    the values that end up with them (claim); every other value gets a
    fresh name that avoids them."""

    def __init__(self, fp16, reserved):
        self.nodes, self.inits = [], []
        self.used, self.reserved, self.node_names = set(), set(reserved), set()
        self.float_dtype = np.float16 if fp16 else np.float32

    @staticmethod
    def _unique(hint, taken):
        name, k = hint, 1
        while name in taken:
            k += 1
            name = "%s_%d" % (hint, k)
        return name

    def fresh(self, hint):
        name = self._unique(hint, self.used | self.reserved)
        self.used.add(name)
        return name

    def claim(self, blob):
        """The value name `blob` itself (a Caffe blob's final value)."""
        assert blob not in self.used, blob
        self.used.add(blob)
        return blob

    def node_name(self, hint):
        name = self._unique(hint, self.node_names)
        self.node_names.add(name)
        return name

    def const(self, hint, array):
        array = np.asarray(array)
        if array.dtype.kind == "f":
            array = array.astype(self.float_dtype, copy=False)
        name = self.fresh(hint)
        self.inits.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def node(self, op, inputs, output, name, **attrs):
        """One node with one output, named `output` (a name from fresh())."""
        self.nodes.append(helper.make_node(op, list(inputs), [output], name=name, **attrs))
        return output


class _Layer:
    """What a converter sees: the LayerParameter, its bottoms' values and
    shapes, its weights, and the names its tops are to take."""

    def __init__(self, param, where, graph, bottoms, shapes, blobs, top_names):
        self.p, self.where, self.g = param, where, graph
        self.name, self.type = param.name, param.type
        self.bottoms, self.shapes, self.blobs, self.top_names = bottoms, shapes, blobs, top_names

    def error(self, message):
        return ExportError("%s: layer '%s' (%s): %s" % (self.where, self.name, self.type, message))

    def tmp(self, what):
        """A value name for a node inside this layer's subgraph."""
        return self.g.fresh("%s/%s" % (self.name, what))

    def node(self, op, inputs, output=None, **attrs):
        """One node named after the layer; `output` None: an internal value."""
        return self.g.node(op, inputs, output or self.tmp(op.lower()), self.g.node_name(self.name), **attrs)

    def const(self, what, array):
        return self.g.const("%s/%s" % (self.name, what), array)

    def blob(self, i, shape):
        """Parameter blob i as an array of `shape`. Its own shape must be that
        one up to leading 1s (Caffe's legacy 4D shapes: an InnerProduct
        weight stored as (1, 1, N, K))."""
        if i >= len(self.blobs):
            raise self.error("needs %d parameter blobs, the weights have %d" % (i + 1, len(self.blobs)))
        b = self.blobs[i]

        def core(dims):
            dims = list(dims)
            while dims and dims[0] == 1:
                dims.pop(0)
            return dims
        if b.size != int(np.prod(shape, dtype=np.int64)) or (b.ndim > 1 and core(b.shape) != core(shape)):
            raise self.error("blob %d has shape %s, expected %s" % (i, list(b.shape), list(shape)))
        return b.reshape(shape)

    def bottoms_n(self, low, high=None):
        n = len(self.bottoms)
        if n < low or (high is not None and n > high):
            want = str(low) if high == low else "%d to %s" % (low, high if high is not None else "any")
            raise self.error("has %d bottoms, expected %s" % (n, want))

    def axis(self, axis, rank, field):
        a = axis + rank if axis < 0 else axis
        if not 0 <= a < rank:
            raise self.error("%s = %d is out of range for a bottom of %d axes" % (field, axis, rank))
        return a


def _pair(p, plural, h, w, default):
    """A 2D conv/pool field: `plural` (repeated, 1 or 2 values) or h/w."""
    if p.HasField(h) or p.HasField(w):
        return int(getattr(p, h)), int(getattr(p, w))
    v = list(getattr(p, plural))
    if not v:
        return default, default
    return (int(v[0]), int(v[0])) if len(v) == 1 else (int(v[0]), int(v[1]))


# ---- The converters: each returns [(value name, shape)] for its tops ----------------------------

def _input(L):
    """Never called: the driver makes Input tops the graph's inputs."""
    raise AssertionError("Input is handled by the driver")


def _convolution(L):
    p = L.p.convolution_param
    L.bottoms_n(1, None)
    if p.axis != 1:
        raise L.error("convolution_param.axis = %d: only 1 is exported" % p.axis)
    kh, kw = _pair(p, "kernel_size", "kernel_h", "kernel_w", 0)
    ph, pw = _pair(p, "pad", "pad_h", "pad_w", 0)
    sh, sw = _pair(p, "stride", "stride_h", "stride_w", 1)
    dilation = [int(d) for d in p.dilation] or [1]
    dh, dw = dilation[0], dilation[-1]
    group, n_out = int(p.group), int(p.num_output)
    if len(L.shapes[0]) != 4 or max(len(p.kernel_size), len(p.pad), len(p.stride), len(p.dilation)) > 2:
        raise L.error("only 2D convolutions (N, C, H, W) are exported; bottom %s" % list(L.shapes[0]))
    n, c, h, w = L.shapes[0]
    if c % group or n_out % group:
        raise L.error("convolution_param.group = %d does not divide %d input or %d output channels" % (group, c, n_out))
    weight = L.const("weight", L.blob(0, (n_out, c // group, kh, kw)))
    inputs = [weight]
    if p.bias_term:
        inputs.append(L.const("bias", L.blob(1, (n_out,))))
    oh = (h + 2 * ph - (dh * (kh - 1) + 1)) // sh + 1
    ow = (w + 2 * pw - (dw * (kw - 1) + 1)) // sw + 1
    outs = []
    for bottom, shape, top in zip(L.bottoms, L.shapes, L.top_names):
        if shape != L.shapes[0]:
            raise L.error("every bottom must have the first's shape %s, got %s" % (list(L.shapes[0]), list(shape)))
        L.node("Conv", [bottom] + inputs, top, kernel_shape=[kh, kw], pads=[ph, pw, ph, pw], strides=[sh, sw],
               dilations=[dh, dw], group=group)
        outs.append((top, (n, n_out, oh, ow)))
    return outs


def _inner_product(L):
    p = L.p.inner_product_param
    L.bottoms_n(1, 1)
    shape = L.shapes[0]
    axis = L.axis(p.axis, len(shape), "inner_product_param.axis")
    k = int(np.prod(shape[axis:], dtype=np.int64))
    n_out = int(p.num_output)
    w = L.blob(0, (k, n_out) if p.transpose else (n_out, k))
    bias = L.blob(1, (n_out,)) if p.bias_term else None
    x = L.bottoms[0]
    if axis == 1:
        if len(shape) != 2:
            x = L.node("Flatten", [x], axis=1)
        inputs = [x, L.const("weight", w)] + ([L.const("bias", bias)] if bias is not None else [])
        L.node("Gemm", inputs, L.top_names[0], transB=0 if p.transpose else 1)
    else:
        x = L.node("Reshape", [x, L.const("shape", np.array([0] * axis + [k], dtype=np.int64))])
        wt = w if p.transpose else w.T
        if bias is None:
            L.node("MatMul", [x, L.const("weight", wt)], L.top_names[0])
        else:
            y = L.node("MatMul", [x, L.const("weight", wt)])
            L.node("Add", [y, L.const("bias", bias)], L.top_names[0])
    return [(L.top_names[0], tuple(shape[:axis]) + (n_out,))]


def _pool_extent(size, k, pad, stride, floor):
    """Caffe's (and Cortado's) output extent: rounded up unless `floor`, and
    the last window must start inside the image or its near padding."""
    out = (size + 2 * pad - k + (0 if floor else stride - 1)) // stride + 1
    if (out - 1) * stride >= size + pad:
        out -= 1
    return out


def _pooling(L):
    p = L.p.pooling_param
    L.bottoms_n(1, 1)
    if len(L.top_names) != 1:
        raise L.error("the argmax top of MAX pooling has no ONNX equivalent here (one top only)")
    shape = L.shapes[0]
    if len(shape) != 4:
        raise L.error("bottom has shape %s; Pooling needs 4 axes" % list(shape))
    n, c, h, w = shape
    method = p.PoolMethod.Name(p.pool)
    if method == "STOCHASTIC":
        raise L.error("pooling_param.pool = STOCHASTIC has no ONNX equivalent")
    top = L.top_names[0]
    if p.global_pooling:
        L.node("GlobalMaxPool" if method == "MAX" else "GlobalAveragePool", [L.bottoms[0]], top)
        return [(top, (n, c, 1, 1))]
    kh, kw = (int(p.kernel_h), int(p.kernel_w)) if p.HasField("kernel_h") or p.HasField("kernel_w") \
        else (int(p.kernel_size),) * 2
    ph, pw = (int(p.pad_h), int(p.pad_w)) if p.HasField("pad_h") or p.HasField("pad_w") else (int(p.pad),) * 2
    sh, sw = (int(p.stride_h), int(p.stride_w)) if p.HasField("stride_h") or p.HasField("stride_w") \
        else (int(p.stride),) * 2
    floor = p.torch_pooling or p.round_mode == p.FLOOR
    oh, ow = _pool_extent(h, kh, ph, sh, floor), _pool_extent(w, kw, pw, sw, floor)
    # The last window may overhang the padded input (ceil rounding): extra
    # end pads eh, ew make ONNX's floor rounding give Caffe's extent.
    eh, ew = max(0, (oh - 1) * sh + kh - h - 2 * ph), max(0, (ow - 1) * sw + kw - w - 2 * pw)
    window = dict(kernel_shape=[kh, kw], strides=[sh, sw])
    if method == "MAX":
        L.node("MaxPool", [L.bottoms[0]], top, pads=[ph, pw, ph + eh, pw + ew], **window)
    elif eh == 0 and ew == 0:
        # Every window lies inside the padded input: Caffe divides by the
        # kernel's area, padding included.
        L.node("AveragePool", [L.bottoms[0]], top, pads=[ph, pw, ph, pw], count_include_pad=1, **window)
    else:
        # Caffe's divisor counts the padding P but not the overhang: pad P
        # with zeros as data, then exclude the overhang from the count.
        x = L.bottoms[0]
        if ph or pw:
            x = L.node("Pad", [x, L.const("pads", np.array([0, 0, ph, pw, 0, 0, ph, pw], dtype=np.int64)),
                               L.const("zero", np.zeros((), dtype=np.float32))], mode="constant")
        L.node("AveragePool", [x], top, pads=[0, 0, eh, ew], count_include_pad=0, **window)
    return [(top, (n, c, oh, ow))]


def _elementwise(op, **attrs):
    def convert(L):
        L.bottoms_n(1, 1)
        L.node(op, [L.bottoms[0]], L.top_names[0], **attrs)
        return [(L.top_names[0], L.shapes[0])]
    return convert


def _relu(L):
    slope = L.p.relu_param.negative_slope
    if slope:
        return _elementwise("LeakyRelu", alpha=float(slope))(L)
    return _elementwise("Relu")(L)


def _channel_shape(values, rank):
    """A per-channel (axis 1) vector shaped to broadcast over (N, C, ...)."""
    return values.reshape((-1,) + (1,) * (rank - 2))


def _prelu(L):
    L.bottoms_n(1, 1)
    shape = L.shapes[0]
    if len(shape) < 2:
        raise L.error("bottom has shape %s; PReLU needs at least 2 axes" % list(shape))
    if L.p.prelu_param.channel_shared:
        slope = L.blob(0, (1,))
    else:
        slope = _channel_shape(L.blob(0, (shape[1],)), len(shape))
    L.node("PRelu", [L.bottoms[0], L.const("slope", slope)], L.top_names[0])
    return [(L.top_names[0], shape)]


def _elu(L):
    p = L.p.elu_param
    scale = getattr(p, "lambda")
    if scale != 1:  # NVCaffe's lambda * ELU(x) is SELU's form
        return _elementwise("Selu", alpha=float(p.alpha), gamma=float(scale))(L)
    return _elementwise("Elu", alpha=float(p.alpha))(L)


def _lrn(L):
    p = L.p.lrn_param
    L.bottoms_n(1, 1)
    shape, x, top = L.shapes[0], L.bottoms[0], L.top_names[0]
    size = int(p.local_size)
    if size % 2 == 0:
        raise L.error("lrn_param.local_size = %d must be odd" % size)
    if p.norm_region == p.ACROSS_CHANNELS:
        L.node("LRN", [x], top, size=size, alpha=float(p.alpha), beta=float(p.beta), bias=float(p.k))
    else:
        # Caffe's WITHIN_CHANNEL: x * (1 + alpha * mean of x^2 over the
        # size x size window, zeros beyond the border)^-beta (k unused).
        pad = (size - 1) // 2
        sq = L.node("Mul", [x, x])
        mean = L.node("AveragePool", [sq], kernel_shape=[size, size], pads=[pad] * 4, strides=[1, 1],
                      count_include_pad=1)
        scaled = L.node("Mul", [mean, L.const("alpha", np.array(p.alpha, dtype=np.float32))])
        s = L.node("Add", [scaled, L.const("one", np.array(1, dtype=np.float32))])
        s = L.node("Pow", [s, L.const("minus_beta", np.array(-p.beta, dtype=np.float32))])
        L.node("Mul", [x, s], top)
    return [(top, shape)]


def _batch_norm(L):
    p = L.p.batch_norm_param
    L.bottoms_n(1, 1)
    if p.HasField("use_global_stats") and not p.use_global_stats:
        raise L.error("batch_norm_param.use_global_stats = false normalizes with the batch's statistics; "
                      "a deploy net exports the running statistics (remove the field)")
    shape = L.shapes[0]
    if len(shape) < 2:
        raise L.error("bottom has shape %s; BatchNorm needs at least 2 axes (N, C, ...)" % list(shape))
    c = shape[1]
    factor = float(L.blob(2, (1,))[0])
    scale = 0.0 if factor == 0 else 1.0 / factor
    mean = L.blob(0, (c,)).astype(np.float64) * scale
    var = L.blob(1, (c,)).astype(np.float64) * scale
    if p.scale_bias:
        gamma, beta = L.blob(3, (c,)), L.blob(4, (c,))
    else:
        gamma, beta = np.ones(c, dtype=np.float32), np.zeros(c, dtype=np.float32)
    L.node("BatchNormalization", [L.bottoms[0], L.const("scale", gamma), L.const("bias", beta),
                                  L.const("mean", mean.astype(np.float32)), L.const("var", var.astype(np.float32))],
           L.top_names[0], epsilon=float(p.eps))
    return [(L.top_names[0], shape)]


def _scale(L):
    p = L.p.scale_param
    L.bottoms_n(1, 2)
    shape = L.shapes[0]
    axis = L.axis(p.axis, len(shape), "scale_param.axis")
    if len(L.bottoms) == 2:
        s_shape = tuple(L.shapes[1])
        if tuple(shape[axis:axis + len(s_shape)]) != s_shape:
            raise L.error("the scale bottom's shape %s does not match the bottom's axes from %d: %s"
                          % (list(s_shape), axis, list(shape)))
        broadcast = s_shape + (1,) * (len(shape) - axis - len(s_shape))
        s = L.node("Reshape", [L.bottoms[1], L.const("shape", np.array(broadcast, dtype=np.int64))])
        bias_blob = 0
    else:
        num_axes = int(p.num_axes)
        end = len(shape) if num_axes == -1 else axis + num_axes
        if end > len(shape):
            raise L.error("scale_param.num_axes = %d goes past the bottom's %d axes" % (num_axes, len(shape)))
        s_shape = tuple(shape[axis:end])
        broadcast = s_shape + (1,) * (len(shape) - end)
        s = L.const("scale", L.blob(0, s_shape).reshape(broadcast))
        bias_blob = 1
    top = L.top_names[0]
    if p.bias_term:
        y = L.node("Mul", [L.bottoms[0], s])
        L.node("Add", [y, L.const("bias", L.blob(bias_blob, s_shape).reshape(broadcast))], top)
    else:
        L.node("Mul", [L.bottoms[0], s], top)
    return [(top, shape)]


def _eltwise(L):
    p = L.p.eltwise_param
    L.bottoms_n(2, None)
    shape = L.shapes[0]
    for s in L.shapes[1:]:
        if s != shape:
            raise L.error("bottoms have shapes %s and %s; Eltwise needs one shape" % (list(shape), list(s)))
    op = p.EltwiseOp.Name(p.operation)
    xs, top = list(L.bottoms), L.top_names[0]
    if len(p.coeff) and op != "SUM":
        raise L.error("eltwise_param.coeff applies to SUM only")
    if op == "SUM" and len(p.coeff):
        if len(p.coeff) != len(xs):
            raise L.error("eltwise_param.coeff has %d values for %d bottoms" % (len(p.coeff), len(xs)))
        xs = [x if c == 1 else L.node("Mul", [x, L.const("coeff", np.array(c, dtype=np.float32))])
              for x, c in zip(xs, p.coeff)]
    if op == "PROD":
        y = xs[0]
        for i, x in enumerate(xs[1:]):
            y = L.node("Mul", [y, x], top if i == len(xs) - 2 else None)
    else:
        onnx_op = {"SUM": "Add" if len(xs) == 2 else "Sum", "MAX": "Max"}[op]
        L.node(onnx_op, xs, top)
    return [(top, shape)]


def _concat(L):
    p = L.p.concat_param
    L.bottoms_n(1, None)
    shape = L.shapes[0]
    axis = L.axis(p.axis if p.HasField("axis") or not p.HasField("concat_dim") else p.concat_dim,
                  len(shape), "concat_param.axis")
    total = 0
    for s in L.shapes:
        if len(s) != len(shape) or any(a != b for i, (a, b) in enumerate(zip(s, shape)) if i != axis):
            raise L.error("bottom shapes %s and %s differ off axis %d" % (list(shape), list(s), axis))
        total += s[axis]
    L.node("Concat", L.bottoms, L.top_names[0], axis=axis)
    out = list(shape)
    out[axis] = total
    return [(L.top_names[0], tuple(out))]


def _slice(L):
    p = L.p.slice_param
    L.bottoms_n(1, 1)
    shape = L.shapes[0]
    axis = L.axis(p.slice_dim if p.HasField("slice_dim") else p.axis, len(shape), "slice_param.axis")
    dim, tops = shape[axis], L.top_names
    if len(p.slice_point):
        points = [0] + [int(v) for v in p.slice_point] + [dim]
        if len(points) != len(tops) + 1 or any(a >= b for a, b in zip(points, points[1:])):
            raise L.error("slice_param.slice_point %s does not split %d into %d parts"
                          % (list(p.slice_point), dim, len(tops)))
        sizes = [b - a for a, b in zip(points, points[1:])]
    else:
        if dim % len(tops):
            raise L.error("%d tops do not divide axis %d of size %d" % (len(tops), axis, dim))
        sizes = [dim // len(tops)] * len(tops)
    L.g.nodes.append(helper.make_node("Split", [L.bottoms[0], L.const("split", np.array(sizes, dtype=np.int64))],
                                      list(tops), name=L.g.node_name(L.name), axis=axis))
    return [(t, shape[:axis] + (s,) + shape[axis + 1:]) for t, s in zip(tops, sizes)]


def _softmax(L):
    L.bottoms_n(1, 1)
    axis = L.axis(L.p.softmax_param.axis, len(L.shapes[0]), "softmax_param.axis")
    L.node("Softmax", [L.bottoms[0]], L.top_names[0], axis=axis)
    return [(L.top_names[0], L.shapes[0])]


def _reshape_to(L, out_shape, target):
    """Reshape to `target` (ONNX's 0 and -1 allowed), known to give out_shape;
    Flatten where that is the same (a batch-independent form)."""
    if len(out_shape) == 2 and out_shape[0] == L.shapes[0][0]:
        L.node("Flatten", [L.bottoms[0]], L.top_names[0], axis=1)
    else:
        L.node("Reshape", [L.bottoms[0], L.const("shape", np.array(target, dtype=np.int64))], L.top_names[0])
    return [(L.top_names[0], tuple(out_shape))]


def _flatten(L):
    p = L.p.flatten_param
    L.bottoms_n(1, 1)
    shape = L.shapes[0]
    a = L.axis(p.axis, len(shape), "flatten_param.axis")
    e = L.axis(p.end_axis, len(shape), "flatten_param.end_axis")
    if e < a:
        raise L.error("flatten_param.end_axis %d comes before axis %d" % (p.end_axis, p.axis))
    out = shape[:a] + (int(np.prod(shape[a:e + 1], dtype=np.int64)),) + shape[e + 1:]
    return _reshape_to(L, out, [0] * a + [-1] + list(shape[e + 1:]))


def _reshape(L):
    p = L.p.reshape_param
    L.bottoms_n(1, 1)
    shape = L.shapes[0]
    rank = len(shape)
    axis = p.axis + rank + 1 if p.axis < 0 else p.axis
    if not 0 <= axis <= rank:
        raise L.error("reshape_param.axis = %d is out of range for %d axes" % (p.axis, rank))
    end = rank if p.num_axes == -1 else axis + p.num_axes
    if p.num_axes < -1 or end > rank:
        raise L.error("reshape_param.num_axes = %d is out of range" % p.num_axes)
    dims = [int(d) for d in p.shape.dim]
    out = list(shape[:axis])
    for i, d in enumerate(dims):
        if d == 0:
            if axis + i >= rank:
                raise L.error("reshape_param.shape dim %d is 0 but the bottom has no axis %d" % (i, axis + i))
            out.append(shape[axis + i])
        else:
            out.append(d)
    out += list(shape[end:])
    count = int(np.prod(shape, dtype=np.int64))
    if out.count(-1) > 1:
        raise L.error("reshape_param.shape has more than one -1")
    if -1 in out:
        known = int(np.prod([d for d in out if d != -1], dtype=np.int64))
        if known == 0 or count % known:
            raise L.error("cannot infer the -1 in %s from %d values" % (dims, count))
        out[out.index(-1)] = count // known
    if int(np.prod(out, dtype=np.int64)) != count:
        raise L.error("shape %s holds %d values, the bottom %s holds %d"
                      % (out, int(np.prod(out, dtype=np.int64)), list(shape), count))
    return _reshape_to(L, out, [0] * axis + dims + list(shape[end:]))


_CONVERTERS = {
    "BatchNorm": _batch_norm,
    "Concat": _concat,
    "Convolution": _convolution,
    "Dropout": None,  # identity at inference
    "ELU": _elu,
    "Eltwise": _eltwise,
    "Flatten": _flatten,
    "InnerProduct": _inner_product,
    "Input": _input,
    "LRN": _lrn,
    "PReLU": _prelu,
    "Pooling": _pooling,
    "ReLU": _relu,
    "Reshape": _reshape,
    "Scale": _scale,
    "Sigmoid": _elementwise("Sigmoid"),
    "Slice": _slice,
    "Softmax": _softmax,
    "Split": None,  # identity
    "TanH": _elementwise("Tanh"),
}

# Layers whose parameters come from the weights (the others take none).
_HAS_WEIGHTS = {"BatchNorm", "Convolution", "InnerProduct", "PReLU"}


# ---- The driver ---------------------------------------------------------------------------------

def _layer_line(text, name):
    """The prototxt line of layer `name` (for messages), or None."""
    if text is None:
        return None
    m = re.search(r'\blayers?\s*\{\s*name\s*:\s*"%s"' % re.escape(name), text)
    if m is None:
        return None
    return text.count("\n", 0, m.end()) + 1


def _net_inputs(net, layers, where, batch):
    """[(name, shape)] of the net's inputs: Input layers and the legacy
    `input` fields."""
    inputs = []
    legacy = [tuple(int(d) for d in s.dim) for s in net.input_shape]
    if not legacy and len(net.input_dim):
        dims = [int(d) for d in net.input_dim]
        legacy = [tuple(dims[i:i + 4]) for i in range(0, len(dims), 4)]
    for i, name in enumerate(net.input):
        if i >= len(legacy):
            raise ExportError("%s: input '%s' has no input_shape" % (where, name))
        inputs.append((name, legacy[i]))
    for layer in layers:
        if layer.type != "Input":
            continue
        shapes = [tuple(int(d) for d in s.dim) for s in layer.input_param.shape]
        if not shapes:
            raise ExportError("%s: layer '%s' (Input): input_param.shape is needed for a static ONNX input"
                              % (where, layer.name))
        if len(shapes) not in (1, len(layer.top)):
            raise ExportError("%s: layer '%s' (Input): %d shapes for %d tops"
                              % (where, layer.name, len(shapes), len(layer.top)))
        for i, top in enumerate(layer.top):
            inputs.append((top, shapes[0] if len(shapes) == 1 else shapes[i]))
    if batch is not None:
        inputs = [(n, (int(batch),) + s[1:]) for n, s in inputs]
    return inputs


def _check_shapes(model, where):
    """ONNX's strict shape inference must give the shapes computed here. It
    runs on the graph with the weights as inputs of their shapes (no data to
    copy: seconds saved on VGG-16's 550 MB)."""
    g = model.graph
    weights = [helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)) for t in g.initializer]
    skeleton = helper.make_model(helper.make_graph(g.node, g.name, list(g.input) + weights, g.output),
                                 opset_imports=model.opset_import)
    try:
        onnx.shape_inference.infer_shapes(skeleton, check_type=True, strict_mode=True)
    except Exception as e:
        raise ExportError("%s: ONNX shape inference disagrees with the exporter: %s" % (where, e)) from None


def export(model, weights=None, output=None, *, opset=DEFAULT_OPSET, fp16=False, batch=None, stages=(), level=0,
           extra_outputs=(), proto=None, check=True):
    """Exports `model` (a prototxt path, or a NetParameter) with `weights` (a
    .caffemodel path, a {layer: [arrays]} dict, or None: only the prototxt's
    own blobs) to an onnx.ModelProto; writes it to `output` when given.

    batch overrides the inputs' first axis; stages and level select layers as
    the net's state does (phase TEST); extra_outputs names more blobs to
    output (their final values); check runs onnx.checker and strict shape
    inference on the result."""
    if onnx is None:
        raise ExportError("the onnx Python package is needed (Debian: python3-onnx; scripts/install_deps.sh)")
    max_opset = onnx.defs.onnx_opset_version()
    if not _MIN_OPSET <= opset <= max_opset:
        raise ExportError("opset %d: this exporter writes %d to %d (the installed onnx %s knows up to %d)"
                          % (opset, _MIN_OPSET, max_opset, onnx.__version__, max_opset))
    pb = load_schema(proto)
    net, text = read_net_text(model, pb) if isinstance(model, str) else (model, None)
    where = model if isinstance(model, str) else (net.name or "net")
    if len(net.layers):
        raise ExportError("%s: V1 `layers` (an old Caffe file): upgrade it first with upgrade_net_proto_text" % where)
    if isinstance(weights, str):
        weights = read_weights(weights, pb)
    weights = weights or {}
    stages = set(stages)
    layers = [l for l in net.layer if included(l, level, stages)]

    def located(layer):
        line = _layer_line(text, layer.name)
        return "%s:%d" % (where, line) if line else where

    # Every unknown type at once, as the Net reports all its errors.
    unknown = [l for l in layers if l.type not in _CONVERTERS]
    if unknown:
        raise ExportError("\n".join(
            ["%s: layer '%s' (%s): no ONNX equivalent" % (located(l), l.name, l.type) for l in unknown] +
            ["exportable types: %s (a deploy net: an Input layer, no data, loss or accuracy layers)"
             % ", ".join(sorted(_CONVERTERS))]))

    inputs = _net_inputs(net, layers, where, batch)
    g = _Graph(fp16, [name for name, _ in inputs] + [t for l in layers for t in l.top])
    elem = TensorProto.FLOAT16 if fp16 else TensorProto.FLOAT
    current, shapes = {}, {}   # Caffe blob -> its current ONNX value; ONNX value -> shape
    for name, shape in inputs:
        current[name] = g.claim(name)
        shapes[current[name]] = shape
    # The last layer that computes a new value of each blob names that value
    # after the blob; earlier values are "blob/layer".
    last_writer = {}
    for i, layer in enumerate(layers):
        if _CONVERTERS[layer.type] is not None and layer.type != "Input":
            for top in layer.top:
                last_writer[top] = i
    available = collections.OrderedDict((name, None) for name, _ in inputs)
    for i, layer in enumerate(layers):
        if layer.type == "Input":
            continue
        for b in layer.bottom:
            if b not in current:
                raise ExportError("%s: layer '%s' (%s): bottom '%s' is produced by no earlier layer"
                                  % (located(layer), layer.name, layer.type, b))
            available.pop(b, None)
        bottoms = [current[b] for b in layer.bottom]
        convert = _CONVERTERS[layer.type]
        if convert is None:  # Dropout, Split: the tops are the bottom's value
            if len(layer.bottom) != 1:
                raise ExportError("%s: layer '%s' (%s): has %d bottoms, expected 1"
                                  % (located(layer), layer.name, layer.type, len(layer.bottom)))
            for top in layer.top:
                current[top] = bottoms[0]
                available[top] = None
            continue
        blobs = weights.get(layer.name)
        if blobs is None and len(layer.blobs):
            blobs = [blob_array(b, "%s: layer '%s' blob %d" % (where, layer.name, k))
                     for k, b in enumerate(layer.blobs)]
        needs_blobs = layer.type in _HAS_WEIGHTS or (
            layer.type == "Scale" and (len(layer.bottom) == 1 or layer.scale_param.bias_term))
        if needs_blobs and not blobs:
            raise ExportError("%s: layer '%s' (%s): no weights for it (%s)"
                              % (located(layer), layer.name, layer.type,
                                 "no layer of that name in the weights" if weights else "no --weights given"))
        top_names = [g.claim(top) if last_writer.get(top) == i and top not in g.used
                     else g.fresh("%s/%s" % (top, layer.name)) for top in layer.top]
        L = _Layer(layer, located(layer), g, bottoms, [shapes[b] for b in bottoms], blobs or [], top_names)
        for top, (value, shape) in zip(layer.top, convert(L)):
            current[top] = value
            shapes[value] = tuple(int(d) for d in shape)
            available[top] = None
    outputs = list(available)
    for name in extra_outputs:
        if name not in current:
            raise ExportError("%s: extra output '%s' is not a blob of the net" % (where, name))
        if name not in outputs:
            outputs.append(name)
    input_values = [current[n] for n, _ in inputs]
    graph_outputs, output_values = [], set()
    for name in outputs:
        value = current[name]
        # An output keeps the blob's name where that name is free; an input
        # passed through, or a value that is already an output (Split,
        # Dropout), goes out through an Identity of its own.
        if value in input_values or value in output_values or (value != name and name not in g.used):
            alias = g.claim(name) if name not in g.used else g.fresh(name + "/output")
            value = g.node("Identity", [value], alias, g.node_name(alias))
            shapes[value] = shapes[current[name]]
        output_values.add(value)
        graph_outputs.append(helper.make_tensor_value_info(value, elem, list(shapes[value])))
    graph = helper.make_graph(
        g.nodes, net.name or "cortado",
        [helper.make_tensor_value_info(v, elem, list(s)) for v, (_, s) in zip(input_values, inputs)],
        graph_outputs, initializer=g.inits)
    model_proto = helper.make_model(graph, producer_name="cortado", opset_imports=[helper.make_opsetid("", opset)])
    if check:
        onnx.checker.check_model(model_proto)
        _check_shapes(model_proto, where)
    if output:
        onnx.save(model_proto, output)
    return model_proto


def main(argv=None):
    ap = argparse.ArgumentParser(
        prog="export_onnx.py",
        description="Exports a Caffe-format deploy net and its weights to an ONNX model (FP32; --fp16 for FP16).")
    ap.add_argument("--model", required=True, help="the deploy prototxt (an Input layer with a shape)")
    ap.add_argument("--weights", help=".caffemodel with the trained weights (by layer name)")
    ap.add_argument("--output", required=True, help="the .onnx file to write")
    ap.add_argument("--opset", type=int, default=DEFAULT_OPSET, help="ONNX opset (default %(default)s)")
    ap.add_argument("--fp16", action="store_true", help="store weights, inputs, outputs and activations as FP16")
    ap.add_argument("--batch", type=int, help="the inputs' first axis (default: the prototxt's)")
    ap.add_argument("--stage", action="append", default=[], help="a NetState stage (repeatable)")
    ap.add_argument("--level", type=int, default=0, help="the NetState level (default 0)")
    ap.add_argument("--extra-output", action="append", default=[], help="another blob to output (repeatable)")
    ap.add_argument("--proto", help="cortado.proto (default: the repository's)")
    args = ap.parse_args(argv)
    if args.batch is not None and args.batch <= 0:
        ap.error("--batch must be positive")
    try:
        m = export(args.model, args.weights, args.output, opset=args.opset, fp16=args.fp16, batch=args.batch,
                   stages=args.stage, level=args.level, extra_outputs=args.extra_output, proto=args.proto)
    except Error as e:  # ExportError, CaffeFileError
        sys.stderr.write("export_onnx: %s\n" % e)
        return 1
    g = m.graph
    print("%s: %d nodes, %d initializers, opset %d, %s; inputs %s; outputs %s"
          % (args.output, len(g.node), len(g.initializer), args.opset, "FP16" if args.fp16 else "FP32",
             ", ".join("%s %s" % (i.name, [d.dim_value for d in i.type.tensor_type.shape.dim]) for i in g.input),
             ", ".join("%s %s" % (o.name, [d.dim_value for d in o.type.tensor_type.shape.dim]) for o in g.output)))
    return 0
