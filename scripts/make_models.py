#!/usr/bin/env python3
"""Writes the ImageNet model folders under models/ (prototxt nets and solvers).

    python3 scripts/make_models.py            # from the repository root
    python3 scripts/make_models.py --check    # exit 1 if a file would change (or is not generated)

Every folder (alexnet, alexnet_bn, googlenet, vgg16, resnet50,
resnet50_nvcaffe, resnet18) gets one file per role:

  train_val.prototxt   Data layers for TRAIN and TEST on the ILSVRC12 LMDBs,
                       loss, top-1 and top-5 accuracy; and a DummyData layer
                       (Gaussian data, label 0) under the stage "synthetic"
                       that replaces the Data layers for benchmarks without
                       ImageNet (trainer --stage=synthetic)
  deploy.prototxt      Input 10x3xHxW, ends in Softmax "prob"
  solver.prototxt      the published recipe

The files state no types: they are FP32 as written, and trainer
--precision=fp16 or bf16 (include/cortado/precision.hpp) chooses 16-bit
storage, FP32 master weights and, for FP16, dynamic loss scaling at run time.
Caffe reads them unchanged (the stage rules are Caffe's NetStateRule).

The files are plain prototxt meant to be read and edited; this script only
saves writing some 7,000 lines by hand and keeps the nets of one architecture
in step. Layer names are Caffe's (conv1, inception_3a/1x1, res2a_branch1,
bn2a_branch1, scale2a_branch1, ...) so that .caffemodel weights trained with
Caffe load by name. Python 3, standard library only.
"""
import argparse
import os
import sys

# ---------------------------------------------------------------------------
# A tiny prototxt writer. A message is a list of (field, value) pairs, in the
# order they are written; a value is a message (a nested list), a str
# (quoted), an Enum (written bare), a bool, an int or a float.


class Enum(str):
    """An enum value: written without quotes (MAX, TRAIN, LMDB)."""


def _scalar(v):
    if isinstance(v, Enum):
        return str(v)
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return '"%s"' % v
    if isinstance(v, float):
        return str(int(v)) if v == int(v) else repr(v)
    return str(v)


def write_message(msg, indent=0):
    lines = []
    pad = "  " * indent
    for key, value in msg:
        if isinstance(value, list):
            lines.append(pad + key + " {")
            lines += write_message(value, indent + 1)
            lines.append(pad + "}")
        else:
            lines.append(pad + key + ": " + _scalar(value))
    return lines


# ---------------------------------------------------------------------------
# Layers. Each helper returns one LayerParameter message.

TRAIN, TEST = Enum("TRAIN"), Enum("TEST")


def filler(kind, **kw):
    m = [("type", kind)]
    for k in ("value", "std"):
        if k in kw:
            m.append((k, kw[k]))
    return m


def layer(name, type_, bottoms, tops, *fields):
    m = [("name", name), ("type", type_)]
    m += [("bottom", b) for b in ([bottoms] if isinstance(bottoms, str) else bottoms)]
    m += [("top", t) for t in ([tops] if isinstance(tops, str) else tops)]
    return m + [f for f in fields if f is not None]


def params(*mults):
    """param { lr_mult decay_mult } blocks, one per (lr, decay) pair."""
    return [("param", [("lr_mult", lr), ("decay_mult", decay)]) for lr, decay in mults]


# The usual weight/bias multipliers of BVLC's nets: the bias learns twice as
# fast and is not decayed.
WB = ((1, 1), (2, 0))


def conv(name, bottom, num_output, kernel, stride=1, pad=0, group=1, bias=True, weight=None,
         bias_filler=None, mults=None, top=None):
    p = [("num_output", num_output)]
    if not bias:
        p.append(("bias_term", False))
    if pad:
        p.append(("pad", pad))
    p.append(("kernel_size", kernel))
    if stride != 1:
        p.append(("stride", stride))
    if group != 1:
        p.append(("group", group))
    if weight:
        p.append(("weight_filler", weight))
    if bias and bias_filler:
        p.append(("bias_filler", bias_filler))
    return layer(name, "Convolution", bottom, top or name, *params(*(mults or ())),
                 ("convolution_param", p))


def fc(name, bottom, num_output, weight=None, bias_filler=None, mults=None):
    p = [("num_output", num_output)]
    if weight:
        p.append(("weight_filler", weight))
    if bias_filler:
        p.append(("bias_filler", bias_filler))
    return layer(name, "InnerProduct", bottom, name, *params(*(mults or ())), ("inner_product_param", p))


def relu(name, blob):
    return layer(name, "ReLU", blob, blob)


def pool(name, bottom, method, kernel, stride, pad=0):
    p = [("pool", Enum(method)), ("kernel_size", kernel), ("stride", stride)]
    if pad:
        p.append(("pad", pad))
    return layer(name, "Pooling", bottom, name, ("pooling_param", p))


def lrn(name, bottom):
    return layer(name, "LRN", bottom, name,
                 ("lrn_param", [("local_size", 5), ("alpha", 0.0001), ("beta", 0.75)]))


def dropout(name, blob, ratio):
    return layer(name, "Dropout", blob, blob, ("dropout_param", [("dropout_ratio", ratio)]))


def concat(name, bottoms):
    return layer(name, "Concat", bottoms, name)


def eltwise_sum(name, bottoms):
    return layer(name, "Eltwise", bottoms, name)  # SUM is Eltwise's default operation


def batch_norm(name, blob, deploy, scale_bias=False):
    """Caffe's BatchNorm, in place. Without use_global_stats the layer picks
    by phase (batch statistics in TRAIN, the running ones in TEST), as Caffe
    does; the deploy net says so explicitly, as Caffe's released deploy files
    do. Its three statistic blobs are never learned: the layer gives them
    lr_mult 0 itself."""
    p = []
    if deploy:
        p.append(("use_global_stats", True))
    if scale_bias:
        p.append(("scale_bias", True))
    return layer(name, "BatchNorm", blob, blob, ("batch_norm_param", p) if p else None)


def scale(name, blob):
    return layer(name, "Scale", blob, blob, ("scale_param", [("bias_term", True)]))


def softmax_loss(name, bottom, top, weight=None):
    return layer(name, "SoftmaxWithLoss", [bottom, "label"], top,
                 ("loss_weight", weight) if weight is not None else None)


def accuracy(name, bottom, top_k=1):
    return layer(name, "Accuracy", [bottom, "label"], name,
                 ("include", [("phase", TEST)]),
                 ("accuracy_param", [("top_k", top_k)]) if top_k != 1 else None)


# ---------------------------------------------------------------------------
# The nets. Each body(deploy) returns the layers from the "data" blob to the
# classifier's output (train_val also gets the auxiliary heads of GoogLeNet,
# with their losses and accuracies where BVLC has them). The deploy nets
# carry no fillers or multipliers: their weights come from a .caffemodel.


def alexnet_body(deploy, bn=False):
    def f(kind, **kw):
        return None if deploy else filler(kind, **kw)

    def m(*pairs):
        return None if deploy else pairs

    L = []

    def conv_block(n, bottom, num_output, kernel, stride=1, pad=0, group=1, bias_value=0.0):
        name = "conv%d" % n
        if bn:
            # BatchNorm + Scale replace LRN; the Scale's bias makes the
            # convolution's own bias redundant.
            L.append(conv(name, bottom, num_output, kernel, stride, pad, group, bias=False,
                          weight=f("gaussian", std=0.01), mults=m((1, 1))))
            L.append(batch_norm("bn_" + name, name, deploy))
            L.append(scale("scale_" + name, name))
        else:
            L.append(conv(name, bottom, num_output, kernel, stride, pad, group,
                          weight=f("gaussian", std=0.01), bias_filler=f("constant", value=bias_value),
                          mults=m(*WB)))
        L.append(relu("relu%d" % n, name))
        return name

    def norm(n, bottom):
        if bn:
            return bottom
        L.append(lrn("norm%d" % n, bottom))
        return "norm%d" % n

    b = conv_block(1, "data", 96, 11, stride=4)
    L.append(pool("pool1", norm(1, b), "MAX", 3, 2))
    b = conv_block(2, "pool1", 256, 5, pad=2, group=2, bias_value=0.1)
    L.append(pool("pool2", norm(2, b), "MAX", 3, 2))
    conv_block(3, "pool2", 384, 3, pad=1)
    conv_block(4, "conv3", 384, 3, pad=1, group=2, bias_value=0.1)
    conv_block(5, "conv4", 256, 3, pad=1, group=2, bias_value=0.1)
    L.append(pool("pool5", "conv5", "MAX", 3, 2))
    bottom = "pool5"
    for n in (6, 7):
        L.append(fc("fc%d" % n, bottom, 4096, weight=f("gaussian", std=0.005),
                    bias_filler=f("constant", value=0.1), mults=m(*WB)))
        L.append(relu("relu%d" % n, "fc%d" % n))
        L.append(dropout("drop%d" % n, "fc%d" % n, 0.5))
        bottom = "fc%d" % n
    L.append(fc("fc8", bottom, 1000, weight=f("gaussian", std=0.01), bias_filler=f("constant", value=0.0),
                mults=m(*WB)))
    return L, "fc8"


def vgg16_body(deploy):
    def f(kind, **kw):
        return None if deploy else filler(kind, **kw)

    mults = None if deploy else WB
    L = []
    bottom = "data"
    for block, (convs, width) in enumerate(((2, 64), (2, 128), (3, 256), (3, 512), (3, 512)), start=1):
        for i in range(1, convs + 1):
            name = "conv%d_%d" % (block, i)
            L.append(conv(name, bottom, width, 3, pad=1, weight=f("xavier"), bias_filler=f("constant", value=0.0),
                          mults=mults))
            L.append(relu("relu%d_%d" % (block, i), name))
            bottom = name
        L.append(pool("pool%d" % block, bottom, "MAX", 2, 2))
        bottom = "pool%d" % block
    for n in (6, 7):
        L.append(fc("fc%d" % n, bottom, 4096, weight=f("xavier"), bias_filler=f("constant", value=0.0),
                    mults=mults))
        L.append(relu("relu%d" % n, "fc%d" % n))
        L.append(dropout("drop%d" % n, "fc%d" % n, 0.5))
        bottom = "fc%d" % n
    L.append(fc("fc8", bottom, 1000, weight=f("xavier"), bias_filler=f("constant", value=0.0), mults=mults))
    return L, "fc8"


# GoogLeNet's inception modules: 1x1, 3x3 reduce, 3x3, 5x5 reduce, 5x5, pool projection.
INCEPTION = {
    "3a": (64, 96, 128, 16, 32, 32),
    "3b": (128, 128, 192, 32, 96, 64),
    "4a": (192, 96, 208, 16, 48, 64),
    "4b": (160, 112, 224, 24, 64, 64),
    "4c": (128, 128, 256, 24, 64, 64),
    "4d": (112, 144, 288, 32, 64, 64),
    "4e": (256, 160, 320, 32, 128, 128),
    "5a": (256, 160, 320, 32, 128, 128),
    "5b": (384, 192, 384, 48, 128, 128),
}


def googlenet_body(deploy):
    def f(kind, **kw):
        return None if deploy else filler(kind, **kw)

    mults = None if deploy else WB
    L = []

    def c(name, bottom, num_output, kernel, stride=1, pad=0, relu_name=None):
        L.append(conv(name, bottom, num_output, kernel, stride, pad, weight=f("xavier"),
                      bias_filler=f("constant", value=0.2), mults=mults))
        L.append(relu(relu_name, name))
        return name

    c("conv1/7x7_s2", "data", 64, 7, stride=2, pad=3, relu_name="conv1/relu_7x7")
    L.append(pool("pool1/3x3_s2", "conv1/7x7_s2", "MAX", 3, 2))
    L.append(lrn("pool1/norm1", "pool1/3x3_s2"))
    c("conv2/3x3_reduce", "pool1/norm1", 64, 1, relu_name="conv2/relu_3x3_reduce")
    c("conv2/3x3", "conv2/3x3_reduce", 192, 3, pad=1, relu_name="conv2/relu_3x3")
    L.append(lrn("conv2/norm2", "conv2/3x3"))
    L.append(pool("pool2/3x3_s2", "conv2/norm2", "MAX", 3, 2))

    def inception(key, bottom):
        n1, r3, n3, r5, n5, pp = INCEPTION[key]
        p = "inception_" + key + "/"
        c(p + "1x1", bottom, n1, 1, relu_name=p + "relu_1x1")
        c(p + "3x3_reduce", bottom, r3, 1, relu_name=p + "relu_3x3_reduce")
        c(p + "3x3", p + "3x3_reduce", n3, 3, pad=1, relu_name=p + "relu_3x3")
        c(p + "5x5_reduce", bottom, r5, 1, relu_name=p + "relu_5x5_reduce")
        c(p + "5x5", p + "5x5_reduce", n5, 5, pad=2, relu_name=p + "relu_5x5")
        L.append(pool(p + "pool", bottom, "MAX", 3, 1, pad=1))
        c(p + "pool_proj", p + "pool", pp, 1, relu_name=p + "relu_pool_proj")
        L.append(concat(p + "output", [p + "1x1", p + "3x3", p + "5x5", p + "pool_proj"]))
        return p + "output"

    def aux_head(n, bottom):
        # The auxiliary classifiers of the paper, trained with loss weight
        # 0.3 and dropped at inference.
        p = "loss%d/" % n
        L.append(pool(p + "ave_pool", bottom, "AVE", 5, 3))
        c(p + "conv", p + "ave_pool", 128, 1, relu_name=p + "relu_conv")
        L.append(fc(p + "fc", p + "conv", 1024, weight=f("xavier"), bias_filler=f("constant", value=0.2),
                    mults=mults))
        L.append(relu(p + "relu_fc", p + "fc"))
        L.append(dropout(p + "drop_fc", p + "fc", 0.7))
        L.append(fc(p + "classifier", p + "fc", 1000, weight=f("xavier"), bias_filler=f("constant", value=0.0),
                    mults=mults))
        L.append(softmax_loss(p + "loss", p + "classifier", p + "loss%d" % n, weight=0.3))
        L.append(accuracy(p + "top-1", p + "classifier"))
        L.append(accuracy(p + "top-5", p + "classifier", top_k=5))

    b = inception("3a", "pool2/3x3_s2")
    b = inception("3b", b)
    L.append(pool("pool3/3x3_s2", b, "MAX", 3, 2))
    b = inception("4a", "pool3/3x3_s2")
    if not deploy:
        aux_head(1, b)
    for key in ("4b", "4c", "4d"):
        b = inception(key, b)
    if not deploy:
        aux_head(2, b)
    b = inception("4e", b)
    L.append(pool("pool4/3x3_s2", b, "MAX", 3, 2))
    b = inception("5a", "pool4/3x3_s2")
    b = inception("5b", b)
    L.append(pool("pool5/7x7_s1", b, "AVE", 7, 1))
    L.append(dropout("pool5/drop_7x7_s1", "pool5/7x7_s1", 0.4))
    L.append(fc("loss3/classifier", "pool5/7x7_s1", 1000, weight=f("xavier"), bias_filler=f("constant", value=0.0),
                mults=mults))
    return L, "loss3/classifier"


def resnet_body(deploy, depth, nvcaffe=False):
    """ResNet v1 in the layout of Kaiming He's Caffe release: conv ->
    BatchNorm -> Scale (-> ReLU), no convolution bias where BatchNorm follows,
    projection shortcuts (branch1) at the first block of a stage whose shape
    changes, and the stride on the first 1x1 convolution of a bottleneck. In
    NVCaffe's style (nvcaffe=True) BatchNorm applies scale and bias itself
    (scale_bias) and there are no Scale layers; the names stay the same."""
    weight = None if deploy else filler("msra")
    L = []

    def conv_bn(conv_name, bn_name, scale_name, bottom, num_output, kernel, stride=1, pad=0, bias=False):
        L.append(conv(conv_name, bottom, num_output, kernel, stride, pad, bias=bias, weight=weight,
                      bias_filler=None if deploy else filler("constant", value=0.0)))
        L.append(batch_norm(bn_name, conv_name, deploy, scale_bias=nvcaffe))
        if not nvcaffe:
            L.append(scale(scale_name, conv_name))
        return conv_name

    bottleneck = depth >= 50
    # ResNet-50's conv1 keeps its bias in the Caffe release (the only
    # convolution that does), so that release's weights load; ResNet-18 has
    # no Caffe release to match and follows the paper's count.
    conv_bn("conv1", "bn_conv1", "scale_conv1", "data", 64, 7, stride=2, pad=3, bias=bottleneck)
    L.append(relu("conv1_relu", "conv1"))
    L.append(pool("pool1", "conv1", "MAX", 3, 2))
    blocks = {18: (2, 2, 2, 2), 50: (3, 4, 6, 3)}[depth]
    bottom, channels = "pool1", 64
    for stage, (count, width) in enumerate(zip(blocks, (64, 128, 256, 512)), start=2):
        out = width * 4 if bottleneck else width
        for i in range(count):
            s = "%d%s" % (stage, "abcdef"[i])
            stride = 2 if (i == 0 and stage > 2) else 1

            def names(branch):
                return "res%s_%s" % (s, branch), "bn%s_%s" % (s, branch), "scale%s_%s" % (s, branch)

            shortcut = bottom
            if i == 0 and (stride != 1 or channels != out):
                shortcut = conv_bn(*names("branch1"), bottom, out, 1, stride=stride)
            if bottleneck:
                b = conv_bn(*names("branch2a"), bottom, width, 1, stride=stride)
                L.append(relu("res%s_branch2a_relu" % s, b))
                b = conv_bn(*names("branch2b"), b, width, 3, pad=1)
                L.append(relu("res%s_branch2b_relu" % s, b))
                b = conv_bn(*names("branch2c"), b, out, 1)
            else:
                b = conv_bn(*names("branch2a"), bottom, width, 3, stride=stride, pad=1)
                L.append(relu("res%s_branch2a_relu" % s, b))
                b = conv_bn(*names("branch2b"), b, width, 3, pad=1)
            L.append(eltwise_sum("res" + s, [shortcut, b]))
            L.append(relu("res%s_relu" % s, "res" + s))
            bottom, channels = "res" + s, out
    L.append(pool("pool5", bottom, "AVE", 7, 1))
    L.append(fc("fc1000", "pool5", 1000, weight=None if deploy else filler("gaussian", std=0.01),
                bias_filler=None if deploy else filler("constant", value=0.0)))
    return L, "fc1000"


# ---------------------------------------------------------------------------
# Model descriptions: the net, its input, its data, its recipe.

BVLC_MEAN_FILE = "data/ilsvrc12/imagenet_mean.binaryproto"
TRAIN_LMDB = "data/ilsvrc12/ilsvrc12_train_lmdb"
VAL_LMDB = "data/ilsvrc12/ilsvrc12_val_lmdb"

ITERS_PER_EPOCH_256 = 5005  # ceil(1,281,167 ILSVRC12 training images / 256)

MODELS = [
    dict(
        dir="alexnet", name="AlexNet", crop=227, batch=256, test_batch=50,
        body=lambda deploy: alexnet_body(deploy),
        mean=[("mean_file", BVLC_MEAN_FILE)],
        about="BVLC's AlexNet (bvlc_alexnet): LRN, grouped conv2/4/5.",
        recipe=["BVLC's solver for bvlc_alexnet: SGD, base_lr 0.01 divided by 10 every 100,000",
                "iterations, 450,000 iterations (about 90 epochs) of batch 256 on one GPU."],
        solver=[("test_iter", 1000), ("test_interval", 1000), ("base_lr", 0.01), ("lr_policy", "step"),
                ("gamma", 0.1), ("stepsize", 100000), ("display", 20), ("max_iter", 450000), ("momentum", 0.9),
                ("weight_decay", 0.0005), ("snapshot", 10000)],
    ),
    dict(
        dir="alexnet_bn", name="AlexNet-BN", crop=227, batch=256, test_batch=50,
        body=lambda deploy: alexnet_body(deploy, bn=True),
        mean=[("mean_file", BVLC_MEAN_FILE)],
        about="AlexNet with BatchNorm + Scale after every convolution instead of LRN (no convolution bias).",
        recipe=["BVLC's bvlc_alexnet solver, unchanged (base_lr 0.01 divided by 10 every 100,000",
                "iterations, 450,000 iterations of batch 256 on one GPU). BatchNorm tolerates a",
                "larger base_lr; this recipe keeps AlexNet's for a like-for-like comparison."],
        solver=[("test_iter", 1000), ("test_interval", 1000), ("base_lr", 0.01), ("lr_policy", "step"),
                ("gamma", 0.1), ("stepsize", 100000), ("display", 20), ("max_iter", 450000), ("momentum", 0.9),
                ("weight_decay", 0.0005), ("snapshot", 10000)],
    ),
    dict(
        dir="googlenet", name="GoogleNet", crop=224, batch=32, test_batch=50,
        body=googlenet_body,
        # BVLC's GoogLeNet subtracts per-channel means (BGR), not a mean image.
        mean=[("mean_value", 104), ("mean_value", 117), ("mean_value", 123)],
        loss_names=("loss3/loss3", "loss3/loss3", "loss3/top-1", "loss3/top-5"),
        about="BVLC's GoogLeNet (Inception v1, bvlc_googlenet); train_val has the two auxiliary classifiers.",
        recipe=["BVLC's quick_solver for bvlc_googlenet (the released model's): SGD, base_lr 0.01,",
                "poly decay with power 0.5 over 2,400,000 iterations (60 epochs) of batch 32 on one GPU."],
        solver=[("test_iter", 1000), ("test_interval", 4000), ("test_initialization", False), ("display", 40),
                ("average_loss", 40), ("base_lr", 0.01), ("lr_policy", "poly"), ("power", 0.5),
                ("max_iter", 2400000), ("momentum", 0.9), ("weight_decay", 0.0002), ("snapshot", 40000)],
    ),
    dict(
        dir="vgg16", name="VGG_ILSVRC_16_layers", crop=224, batch=64, test_batch=50,
        body=vgg16_body,
        # The VGG release subtracts the mean pixel (BGR) of the training set.
        mean=[("mean_value", 103.939), ("mean_value", 116.779), ("mean_value", 123.68)],
        about="VGG-16 (configuration D of Simonyan and Zisserman), dropout 0.5 after fc6 and fc7.",
        recipe=["The VGG paper (Simonyan and Zisserman, 2014): SGD with momentum 0.9, weight decay",
                "5e-4, batch 256, base_lr 0.01 divided by 10 three times when the validation",
                "accuracy stopped improving, 370,000 iterations (74 epochs). The three drops are",
                "placed at 100,000, 200,000 and 300,000 iterations. Batch 256 = 64 per pass x",
                "iter_size 4 on one GPU. Xavier initialisation (the paper's alternative to",
                "initialising from the 11-layer net)."],
        solver=[("test_iter", 1000), ("test_interval", 5000), ("iter_size", 4), ("base_lr", 0.01),
                ("lr_policy", "multistep"), ("gamma", 0.1), ("stepvalue", 100000), ("stepvalue", 200000),
                ("stepvalue", 300000), ("display", 20), ("max_iter", 370000), ("momentum", 0.9),
                ("weight_decay", 0.0005), ("snapshot", 10000)],
    ),
    dict(
        dir="resnet50", name="ResNet-50", crop=224, batch=64, test_batch=50,
        body=lambda deploy: resnet_body(deploy, 50),
        mean=[("mean_value", 104), ("mean_value", 117), ("mean_value", 123)],
        about="ResNet-50 v1 as Kaiming He's Caffe release: BatchNorm + Scale, stride on the first 1x1.",
        recipe=["The ResNet recipe (He et al., 2015) as usually run with Caffe: SGD with momentum",
                "0.9, weight decay 1e-4, batch 256, base_lr 0.1 divided by 10 at epochs 30 and 60,",
                "90 epochs (%d iterations of 256 images per epoch). Batch 256 = 64 per pass x" % ITERS_PER_EPOCH_256,
                "iter_size 4 on one GPU (BatchNorm statistics over 64 images; the paper used 32",
                "per GPU on 8 GPUs). No scale or colour augmentation: the Data layer crops and mirrors."],
        solver=[("test_iter", 1000), ("test_interval", ITERS_PER_EPOCH_256), ("iter_size", 4), ("base_lr", 0.1),
                ("lr_policy", "multistep"), ("gamma", 0.1), ("stepvalue", 30 * ITERS_PER_EPOCH_256),
                ("stepvalue", 60 * ITERS_PER_EPOCH_256), ("display", 20), ("average_loss", 20),
                ("max_iter", 90 * ITERS_PER_EPOCH_256), ("momentum", 0.9), ("weight_decay", 0.0001),
                ("snapshot", 10 * ITERS_PER_EPOCH_256)],
    ),
    dict(
        dir="resnet50_nvcaffe", name="ResNet-50", crop=224, batch=64, test_batch=50,
        body=lambda deploy: resnet_body(deploy, 50, nvcaffe=True),
        mean=[("mean_value", 104), ("mean_value", 117), ("mean_value", 123)],
        about="The same ResNet-50 in NVCaffe's style: BatchNorm with scale_bias, no Scale layers.",
        recipe=["The ResNet recipe (He et al., 2015) as usually run with Caffe: SGD with momentum",
                "0.9, weight decay 1e-4, batch 256, base_lr 0.1 divided by 10 at epochs 30 and 60,",
                "90 epochs (%d iterations of 256 images per epoch). Batch 256 = 64 per pass x" % ITERS_PER_EPOCH_256,
                "iter_size 4 on one GPU."],
        solver=[("test_iter", 1000), ("test_interval", ITERS_PER_EPOCH_256), ("iter_size", 4), ("base_lr", 0.1),
                ("lr_policy", "multistep"), ("gamma", 0.1), ("stepvalue", 30 * ITERS_PER_EPOCH_256),
                ("stepvalue", 60 * ITERS_PER_EPOCH_256), ("display", 20), ("average_loss", 20),
                ("max_iter", 90 * ITERS_PER_EPOCH_256), ("momentum", 0.9), ("weight_decay", 0.0001),
                ("snapshot", 10 * ITERS_PER_EPOCH_256)],
    ),
    dict(
        dir="resnet18", name="ResNet-18", crop=224, batch=64, test_batch=50,
        body=lambda deploy: resnet_body(deploy, 18),
        mean=[("mean_value", 104), ("mean_value", 117), ("mean_value", 123)],
        about="ResNet-18 (basic blocks), BatchNorm + Scale, projection shortcuts where the shape changes.",
        recipe=["The ResNet recipe (He et al., 2015): SGD with momentum 0.9, weight decay 1e-4,",
                "batch 256, poly decay (power 1) from base_lr 0.1 over 90 epochs",
                "(%d iterations of 256 images per epoch). Batch 256 = 64 per pass x iter_size 4" % ITERS_PER_EPOCH_256,
                "on one GPU."],
        solver=[("test_iter", 1000), ("test_interval", ITERS_PER_EPOCH_256), ("iter_size", 4), ("base_lr", 0.1),
                ("lr_policy", "poly"), ("power", 1.0), ("display", 20), ("average_loss", 20),
                ("max_iter", 90 * ITERS_PER_EPOCH_256), ("momentum", 0.9), ("weight_decay", 0.0001),
                ("snapshot", 10 * ITERS_PER_EPOCH_256)],
    ),
]

SYNTHETIC = "synthetic"  # the stage that swaps ImageNet for DummyData (trainer --stage=synthetic)


def generated_note(path):
    return ["# Generated by scripts/make_models.py; edit freely (regenerate with",
            "# `python3 scripts/make_models.py`, which overwrites %s)." % path]


def data_layers(m):
    # Caffe's rules: a layer is kept when one include rule matches, and every
    # condition of a rule must hold, so "TRAIN and not synthetic" is one rule.
    def data(phase, source, batch, mirror):
        t = [("mirror", mirror), ("crop_size", m["crop"])] + m["mean"]
        return layer("data", "Data", [], ["data", "label"],
                     ("include", [("phase", phase), ("not_stage", SYNTHETIC)]),
                     ("transform_param", t),
                     ("data_param", [("source", source), ("batch_size", batch), ("backend", Enum("LMDB"))]))
    return [data(TRAIN, TRAIN_LMDB, m["batch"], True), data(TEST, VAL_LMDB, m["test_batch"], False)]


def synthetic_layer(m):
    # Random images (Gaussian, as PyTorch's benchmarks' torch.randn), label 0.
    # `trainer time` draws them once (dummy_data_param.redraw false, set by
    # the tool, not here: the files stay Caffe's); `train` redraws them on the
    # host at every forward, as Caffe does.
    return layer("data", "DummyData", [], ["data", "label"],
                 ("include", [("stage", SYNTHETIC)]),
                 ("dummy_data_param", [
                     ("shape", [("dim", m["batch"]), ("dim", 3), ("dim", m["crop"]), ("dim", m["crop"])]),
                     ("shape", [("dim", m["batch"])]),
                     ("data_filler", filler("gaussian", std=1.0)),
                     ("data_filler", filler("constant", value=0.0)),
                 ]))


def train_val_layers(m):
    body, logits = m["body"](False)
    loss, loss_top, top1, top5 = m.get("loss_names", ("loss", "loss", "accuracy", "accuracy_top5"))
    return data_layers(m) + [synthetic_layer(m)] + body + [
        softmax_loss(loss, logits, loss_top),
        accuracy(top1, logits),
        accuracy(top5, logits, top_k=5),
    ]


def deploy_layers(m):
    body, logits = m["body"](True)
    inp = layer("data", "Input", [], "data", ("input_param", [
        ("shape", [("dim", 10), ("dim", 3), ("dim", m["crop"]), ("dim", m["crop"])])]))
    return [inp] + body + [layer("prob", "Softmax", logits, "prob")]


def net_file(path, comments, name, layers):
    lines = generated_note(path) + ["# " + c for c in comments]
    lines += write_message([("name", name)])
    for l in layers:
        lines += write_message([("layer", l)])
    return "\n".join(lines) + "\n"


def solver_file(path, comments, fields):
    lines = generated_note(path) + ["# " + c for c in comments] + write_message(fields)
    return "\n".join(lines) + "\n"


def model_files(m):
    d = "models/" + m["dir"]
    per_gpu = "Batch per GPU: %d (train), %d (test)." % (m["batch"], m["test_batch"])
    types_note = ["Types: FP32 as written (no type fields). trainer --precision=fp16 or bf16",
                  "gives every layer 16-bit storage with FP32 math (docs/mixed_precision.md)."]
    synthetic_note = ["--stage=synthetic replaces the Data layers by one DummyData (batch %d," % m["batch"],
                      "Gaussian data, label 0) in both phases: benchmarks without ImageNet, e.g.",
                      "trainer time --solver=%s/solver.prototxt --stage=synthetic --precision=fp16 --gpu=0" % d]
    deploy_note = "Inference: 10 images of %dx%d, class probabilities in \"prob\"." % (m["crop"], m["crop"])
    files = {
        "train_val.prototxt": net_file(d + "/train_val.prototxt", [m["about"], per_gpu] + types_note + synthetic_note,
                                       m["name"], train_val_layers(m)),
        "deploy.prototxt": net_file(d + "/deploy.prototxt", [m["about"], deploy_note], m["name"], deploy_layers(m)),
    }
    precision_note = [
        "Precision at run time: trainer train --solver=%s/solver.prototxt --precision=fp16" % d,
        "(FP16 storage, FP32 master weights, dynamic loss scaling: start 65536, halve on",
        "overflow and skip the step, double after 2000 clean iterations) or --precision=bf16",
        "(FP32 master weights, no loss scaling: BF16 has FP32's exponent range); FP32",
        "without the flag. A field stated here (solver_data_type, dynamic_loss_scale)",
        "wins over the flag."]
    fields = [("net", "%s/train_val.prototxt" % d)] + m["solver"] + [
        ("snapshot_prefix", "%s/%s" % (d, m["dir"])), ("random_seed", 1), ("solver_mode", Enum("GPU"))]
    files["solver.prototxt"] = solver_file(d + "/solver.prototxt", m["recipe"] + [per_gpu] + precision_note, fields)
    return files


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=".", help="the repository root (default: the working directory)")
    ap.add_argument("--check", action="store_true",
                    help="write nothing; exit 1 if a file is missing or differs, or a folder holds another prototxt")
    args = ap.parse_args()
    if not os.path.isdir(os.path.join(args.root, "models")):
        sys.exit("make_models.py: error: %s has no models/ folder; run from the repository root or give --root"
                 % os.path.abspath(args.root))
    stale, extra = [], []
    for m in MODELS:
        folder = os.path.join(args.root, "models", m["dir"])
        files = model_files(m)
        if os.path.isdir(folder):
            extra += [os.path.join(folder, n) for n in sorted(os.listdir(folder))
                      if n.endswith(".prototxt") and n not in files]
        for name, text in sorted(files.items()):
            path = os.path.join(folder, name)
            try:
                with open(path) as f:
                    same = f.read() == text
            except OSError:
                same = False
            if same:
                continue
            stale.append(path)
            if args.check:
                continue
            os.makedirs(folder, exist_ok=True)
            tmp = path + ".tmp"
            with open(tmp, "w") as f:
                f.write(text)
            os.replace(tmp, path)
    for p in extra:
        print("make_models.py: not one of the generated files (one net, one deploy net, one solver): " + p)
    if args.check:
        for p in stale:
            print("make_models.py: out of date: " + p)
        return 1 if stale or extra else 0
    print("make_models.py: %d file(s) written, %d model folder(s)" % (len(stale), len(MODELS)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
