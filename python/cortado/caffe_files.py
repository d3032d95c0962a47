"""Caffe-format files from Python, read with protobuf against Cortado's own
schema: prototxt nets, binary .caffemodel weights as numpy arrays.

    from cortado import caffe_files
    net = caffe_files.read_net("models/lenet/lenet_deploy.prototxt")      # a NetParameter
    weights = caffe_files.read_weights("lenet_iter_2000.caffemodel")     # {layer: [float32 arrays]}

The schema is proto/cortado.proto, compiled by protoc (Debian:
protobuf-compiler) into a temporary folder on first use and loaded from
there, so a file Cortado reads, this reads: Caffe's and NVCaffe's field
numbers. Needs protobuf's Python package (Debian: python3-protobuf, the
version of Debian's protoc) and numpy. Errors are CaffeFileError (a
cortado.Error) naming the file.
"""
import collections
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

from . import Error

__all__ = ["CaffeFileError", "load_schema", "read_net", "read_net_text", "read_weights", "blob_array", "included"]


class CaffeFileError(Error):
    """A file that cannot be read: missing, not parseable, a blob whose size
    does not match its shape."""


# ---- The schema ---------------------------------------------------------------------------------

_schema = None


def _default_proto():
    """The repository's proto/cortado.proto beside python/, else the copy
    `pip install ./python` puts in the package, else the one an installed
    Cortado keeps in share/cortado/ (cmake --install, the .deb)."""
    here = os.path.dirname(os.path.abspath(__file__))
    candidates = [os.path.join(os.path.dirname(os.path.dirname(here)), "proto", "cortado.proto"),
                  os.path.join(here, "cortado.proto")]
    candidates += [os.path.join(prefix, "share", "cortado", "cortado.proto")
                   for prefix in (sys.prefix, "/usr/local", "/usr")]
    for path in candidates:
        if os.path.exists(path):
            return path
    return candidates[0]


def load_schema(proto=None):
    """The module protoc generates from cortado.proto (`proto`, default the
    repository's), compiled once per process into a temporary folder."""
    global _schema
    if _schema is not None and proto is None:
        return _schema
    proto = os.path.abspath(proto or _default_proto())
    if not os.path.exists(proto):
        raise CaffeFileError("%s: no such file (Cortado's schema; give its path with --proto)" % proto)
    protoc = shutil.which("protoc")
    if protoc is None:
        raise CaffeFileError("protoc not found: it compiles %s (Debian: protobuf-compiler)" % proto)
    with tempfile.TemporaryDirectory(prefix="cortado_proto.") as out:
        run = subprocess.run([protoc, "--proto_path=" + os.path.dirname(proto), "--python_out=" + out, proto],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
        if run.returncode != 0:
            raise CaffeFileError("protoc failed on %s:\n%s" % (proto, run.stdout))
        name = os.path.splitext(os.path.basename(proto))[0] + "_pb2"
        spec = importlib.util.spec_from_file_location("_cortado_onnx_" + name, os.path.join(out, name + ".py"))
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    if _schema is None:
        _schema = module
    return module


# ---- Reading nets and weights -------------------------------------------------------------------

def read_net(path, pb=None):
    """A NetParameter from a prototxt file."""
    return read_net_text(path, pb)[0]


def read_net_text(path, pb=None):
    """(NetParameter, the file's text) from a prototxt file."""
    from google.protobuf import text_format
    pb = pb or load_schema()
    try:
        with open(path) as f:
            text = f.read()
    except OSError as e:
        raise CaffeFileError("%s: %s" % (path, e.strerror)) from None
    net = pb.NetParameter()
    try:
        text_format.Parse(text, net)
    except text_format.ParseError as e:
        # The message starts "line:column : ...".
        raise CaffeFileError("%s:%s" % (path, e)) from None
    return net, text


_RAW_TYPES = {"FLOAT16": "<f2", "FLOAT": "<f4", "DOUBLE": "<f8", "BFLOAT16": "<u2"}


def _blob_shape(blob):
    if blob.HasField("shape"):
        return tuple(int(d) for d in blob.shape.dim)
    if any(blob.HasField(f) for f in ("num", "channels", "height", "width")):
        return (blob.num, blob.channels, blob.height, blob.width)
    return None


def _varint(wire, i):
    value, shift = 0, 0
    while True:
        b = wire[i]
        value |= (b & 0x7F) << shift
        i += 1
        if b < 0x80:
            return value, i
        shift += 7


def _packed_field(blob, number, dtype):
    """Repeated field `number` of `blob` (float `data` 5, `double_data` 8) as
    an array read from the message's wire bytes, where it is one packed run
    (as protobuf writes [packed = true] fields); else None. Iterating the
    field instead (np.fromiter) takes about 10 s for VGG-16's 138 million
    weights; this takes a copy."""
    wire = blob.SerializeToString()
    i, found = 0, None
    while i < len(wire):
        key, i = _varint(wire, i)
        field, kind = key >> 3, key & 7
        if kind == 2:  # length-delimited
            length, i = _varint(wire, i)
            if field == number:
                if found is not None:
                    return None
                found = (i, length)
            i += length
        elif kind == 0:
            i = _varint(wire, i)[1]
        elif kind in (1, 5) and field != number:
            i += 8 if kind == 1 else 4
        else:
            return None
    if found is None:
        return None
    return np.frombuffer(wire, dtype=dtype, count=found[1] // np.dtype(dtype).itemsize, offset=found[0])


def blob_array(blob, what="blob"):
    """A BlobProto's data as a float32 array (shape from the proto, flat where
    it has none): float `data`, `double_data`, or `raw_data` of raw_data_type."""
    if len(blob.double_data):
        values = _packed_field(blob, 8, "<f8")
        if values is None or values.size != len(blob.double_data):
            values = np.fromiter(blob.double_data, dtype=np.float64, count=len(blob.double_data))
    elif len(blob.data):
        values = _packed_field(blob, 5, "<f4")
        if values is None or values.size != len(blob.data):
            values = np.fromiter(blob.data, dtype=np.float32, count=len(blob.data))
    elif blob.HasField("raw_data"):
        if not blob.HasField("raw_data_type"):
            raise CaffeFileError("%s: raw_data without raw_data_type (FLOAT16, FLOAT or DOUBLE)" % what)
        type_name = blob.DESCRIPTOR.fields_by_name["raw_data_type"].enum_type.values_by_number[blob.raw_data_type].name
        dtype = np.dtype(_RAW_TYPES[type_name])
        if len(blob.raw_data) % dtype.itemsize:
            raise CaffeFileError("%s: raw_data holds %d bytes, not a whole number of %s values"
                              % (what, len(blob.raw_data), type_name))
        values = np.frombuffer(blob.raw_data, dtype=dtype)
        if type_name == "BFLOAT16":  # the high half of a float32
            values = (values.astype(np.uint32) << 16).view(np.float32)
    else:
        values = np.zeros(0, dtype=np.float32)
    shape = _blob_shape(blob)
    if shape is not None:
        if int(np.prod(shape, dtype=np.int64)) != values.size:
            raise CaffeFileError("%s: shape %s needs %d values, the blob holds %d"
                              % (what, list(shape), int(np.prod(shape, dtype=np.int64)), values.size))
        values = values.reshape(shape)
    return values.astype(np.float32, copy=False)


def read_weights(path, pb=None):
    """{layer name: [float32 arrays]} from a binary .caffemodel (its `layer`
    list, or the V1 `layers` of old files)."""
    pb = pb or load_schema()
    if path.endswith(".h5"):
        raise CaffeFileError("%s: HDF5 weights are not read here; save them as a .caffemodel "
                          "(cortado.Net(model, weights).save(\"x.caffemodel\"))" % path)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise CaffeFileError("%s: %s" % (path, e.strerror)) from None
    net = pb.NetParameter()
    try:
        net.ParseFromString(data)
    except Exception as e:  # protobuf's DecodeError
        raise CaffeFileError("%s: not a binary NetParameter (.caffemodel): %s" % (path, e)) from None
    weights = collections.OrderedDict()
    for layer in list(net.layer) + list(net.layers):
        if len(layer.blobs):
            weights[layer.name] = [blob_array(b, "%s: layer '%s' blob %d" % (path, layer.name, i))
                                   for i, b in enumerate(layer.blobs)]
    return weights


# ---- Layer filtering, as the Net's (phase TEST) --------------------------------------------------------

def _meets_rule(rule, level, stages):
    if rule.HasField("phase") and rule.phase != 1:  # TEST
        return False
    if rule.HasField("min_level") and level < rule.min_level:
        return False
    if rule.HasField("max_level") and level > rule.max_level:
        return False
    if any(s not in stages for s in rule.stage):
        return False
    return not any(s in stages for s in rule.not_stage)


def included(layer, level=0, stages=()):
    """Whether `layer` is in the net in the TEST phase at `level` with `stages`."""
    if len(layer.include):
        return any(_meets_rule(r, level, stages) for r in layer.include)
    return not any(_meets_rule(r, level, stages) for r in layer.exclude)
