"""A picture of a net from its prototxt, as pycaffe's caffe.draw and
python/draw_net.py: layers are boxes (type, name and, for convolutions and
pooling, kernel, stride and pad), blobs octagons, edges labelled with the
output counts. Needs pydot (Debian: python3-pydot) and graphviz's dot.

    cortado.draw_net_to_file("models/lenet/lenet_train_test.prototxt", "lenet.png", "LR", phase=cortado.TRAIN)
    python3 -m cortado.draw models/lenet/lenet_deploy.prototxt lenet.svg --rankdir TB

`net` is a prototxt path, its text, a dict from cortado._prototxt.parse, or
a protobuf NetParameter (converted through its text form).
"""
import argparse
import os

from . import Error, TRAIN, TEST, _prototxt

__all__ = ["get_pydot_graph", "draw_net", "draw_net_to_file"]

LAYER_STYLE_DEFAULT = {"shape": "record", "fillcolor": "#6495ED", "style": "filled"}
NEURON_LAYER_STYLE = {"shape": "record", "fillcolor": "#90EE90", "style": "filled"}
BLOB_STYLE = {"shape": "octagon", "fillcolor": "#E0E0E0", "style": "filled"}
_PHASES = {TRAIN: "TRAIN", TEST: "TEST", "TRAIN": "TRAIN", "TEST": "TEST"}


def _pydot():
    try:
        import pydot
    except ImportError:
        raise Error("drawing a net needs pydot and graphviz (Debian: apt-get install python3-pydot graphviz; "
                    "or pip install pydot)") from None
    return pydot


def _net_dict(net):
    if isinstance(net, dict):
        return net
    if hasattr(net, "SerializeToString"):  # a protobuf message
        from google.protobuf import text_format
        net = text_format.MessageToString(net)
    elif isinstance(net, (str, bytes, os.PathLike)) and os.path.exists(net):
        with open(net) as f:
            net = f.read()
    try:
        return _prototxt.parse(net)
    except _prototxt.ParseError as e:
        raise Error("cannot read the net: %s" % e) from None


def _one(msg, field, default=None):
    v = msg.get(field)
    return v[-1] if v else default


def _included(layer, phase):
    """Only the phase rules (as pycaffe's draw: no stages or levels)."""
    if phase is None:
        return True
    want = _PHASES[phase]
    inc = [_one(r, "phase") for r in layer.get("include", [])]
    exc = [_one(r, "phase") for r in layer.get("exclude", [])]
    if inc and all(p is not None for p in inc) and want not in inc:
        return False
    return want not in exc


def _dims(p, field, default=None):
    v = p.get(field)
    if not v:
        return default
    return v[0] if len(v) == 1 else "x".join(str(x) for x in v)


def get_layer_label(layer, rankdir, display_lrm=False):
    sep = " " if rankdir in ("TB", "BT") else "\\n"
    name, type_ = _one(layer, "name", ""), _one(layer, "type", "")
    label = "%s%s(%s)" % (name, sep, type_)
    if type_ in ("Convolution", "Deconvolution", "Pooling"):
        p = _one(layer, "pooling_param" if type_ == "Pooling" else "convolution_param", {})
        k = _dims(p, "kernel_size", "%sx%s" % (_one(p, "kernel_h", 1), _one(p, "kernel_w", 1)))
        s = _dims(p, "stride", 1)
        pad = _dims(p, "pad", 0)
        if type_ == "Pooling":
            label += "%spool=%s" % (sep, _one(p, "pool", "MAX"))
        label += "%skernel size: %s%sstride: %s%spad: %s" % (sep, k, sep, s, sep, pad)
    if display_lrm:
        lrs = [str(_one(ps, "lr_mult", 1)) for ps in layer.get("param", [])]
        if lrs:
            label += "%slr mult: %s" % (sep, ", ".join(lrs))
    return label


def get_edge_label(layer):
    type_ = _one(layer, "type", "")
    if type_ in ("Data", "ImageData"):
        return "Batch " + str(_one(_one(layer, "data_param", {}) or _one(layer, "image_data_param", {}), "batch_size", ""))
    if type_ in ("Convolution", "Deconvolution"):
        return str(_one(_one(layer, "convolution_param", {}), "num_output", ""))
    if type_ == "InnerProduct":
        return str(_one(_one(layer, "inner_product_param", {}), "num_output", ""))
    return None


def get_pydot_graph(net, rankdir="LR", label_edges=True, phase=None, display_lrm=False):
    """A pydot.Dot of the net."""
    pydot = _pydot()
    net = _net_dict(net)
    if rankdir not in ("LR", "TB", "BT", "RL"):
        raise Error("rankdir must be LR, TB, BT or RL, got %r" % rankdir)
    graph = pydot.Dot(str(_one(net, "name", "Net")) or "Net", graph_type="digraph", rankdir=rankdir,
                      compound="true")
    blobs = {}
    for name in net.get("input", []):  # the legacy input fields
        blobs[name] = pydot.Node("%s_blob" % name, label=name, **BLOB_STYLE)
        graph.add_node(blobs[name])
    for layer in net.get("layer", []):
        if not _included(layer, phase):
            continue
        name, type_ = _one(layer, "name", ""), _one(layer, "type", "")
        node = "%s_%s" % (name, type_)
        bottoms, tops = layer.get("bottom", []), layer.get("top", [])
        style = NEURON_LAYER_STYLE if len(bottoms) == 1 and bottoms == tops else LAYER_STYLE_DEFAULT
        graph.add_node(pydot.Node(node, label=get_layer_label(layer, rankdir, display_lrm), **style))
        for b in bottoms:
            if b + "_blob" not in blobs:
                blobs[b + "_blob"] = True
                graph.add_node(pydot.Node("%s_blob" % b, label=b, **BLOB_STYLE))
            graph.add_edge(pydot.Edge("%s_blob" % b, node))
        for t in tops:
            if t + "_blob" not in blobs:
                blobs[t + "_blob"] = True
                graph.add_node(pydot.Node("%s_blob" % t, label=t, **BLOB_STYLE))
            label = get_edge_label(layer) if label_edges else None
            graph.add_edge(pydot.Edge(node, "%s_blob" % t, **({"label": '"%s"' % label} if label else {})))
    return graph


def draw_net(net, rankdir="LR", ext="png", phase=None, display_lrm=False):
    """The picture as bytes in format `ext` (png, svg, pdf, dot, ...)."""
    graph = get_pydot_graph(net, rankdir, phase=phase, display_lrm=display_lrm)
    try:
        return graph.create(format=ext)
    except Exception as e:  # pydot raises when graphviz's dot is missing or fails
        raise Error("graphviz could not draw the net as %s: %s (Debian: apt-get install graphviz)" % (ext, e)) from None


def draw_net_to_file(net, filename, rankdir="LR", phase=None, display_lrm=False):
    """Writes the picture to `filename`, in the format its extension names."""
    ext = filename[filename.rfind(".") + 1:] if "." in os.path.basename(filename) else "png"
    data = draw_net(net, rankdir, ext, phase, display_lrm)
    with open(filename, "wb") as f:
        f.write(data)


def main(argv=None):
    ap = argparse.ArgumentParser(description="Draws a net from its prototxt (as Caffe's python/draw_net.py).")
    ap.add_argument("input_net_proto_file")
    ap.add_argument("output_image_file")
    ap.add_argument("--rankdir", default="LR", help="LR, TB, BT or RL")
    ap.add_argument("--phase", default="ALL", help="TRAIN, TEST or ALL (the layers of that phase)")
    ap.add_argument("--display_lrm", action="store_true", help="show each layer's lr_mult")
    args = ap.parse_args(argv)
    phase = None if args.phase == "ALL" else args.phase
    if phase not in (None, "TRAIN", "TEST"):
        ap.error("--phase must be TRAIN, TEST or ALL")
    print("Drawing net to %s" % args.output_image_file)
    draw_net_to_file(args.input_net_proto_file, args.output_image_file, args.rankdir, phase, args.display_lrm)


if __name__ == "__main__":
    main()
