#pragma once
// The Net's layout plan: which blobs live channels last (NHWC).
//
// cuDNN's fastest 16-bit convolutions read and write NHWC; in NCHW they
// reorder their operands first (docs/resnet50_gpu.md). The plan keeps the
// prototxt and the shapes Caffe's and changes only the order of values in
// memory (Blob::layout), where that pays and the layers allow it:
//
// 1. Each layer has a role (layer_traits.hpp, LayerLayoutRole): NCHW only,
//    any layout (value by value), NHWC capable, an NHWC anchor (the cuDNN
//    Convolution), or a source (a data layer that writes its first top in
//    either layout; its other tops, the labels, are NCHW only). Where the plan asks for 16-bit layers only (the GPU
//    default), a capable or anchor layer whose forward or backward type is
//    not FLOAT16 or BFLOAT16 counts as NCHW only.
// 2. The blobs that a layer of the capable, anchor or any-layout roles
//    reads or writes must share its layout: they join one group (by blob
//    name, so an in-place chain is one blob). A source's first top is in
//    the group of its readers.
// 3. A group becomes NHWC when an anchor touches it and none of its blobs
//    is an output of the net (what a caller reads stays NCHW).
// 4. Where an NCHW-only layer meets an NHWC group, a LayoutConvert layer
//    (permute_layer.hpp) is inserted: after an NCHW-only producer of blob b,
//    right before the first group layer that reads b, "b/nhwc" = b in NHWC,
//    read by the group's layers in place of b (b keeps the producer's values
//    under its name; no conversion where only NCHW-only layers read b); before an NCHW-only consumer of
//    an NHWC blob b, "b/nchw" = b in NCHW, read by that consumer (or b
//    itself where it holds an NCHW producer's values). An NCHW-only layer in
//    place on an NHWC blob b (a Dropout) computes in place on "b/nchw", and
//    "b/nhwc" follows it. A conversion takes the NCHW-only layer's types.
//
// ResNet-50: every Convolution, BatchNorm, Scale, ReLU, Eltwise, Split and
// Pooling blob is NHWC (one group), and so is the Data layer's batch; one
// conversion, before the classifier. GoogLeNet: three groups (its LRNs are NCHW
// only), Concat joining the branches along the channels.
//
// The plan runs in Net::Prepare after InsertSplits and BatchNormOutOfPlace.
// Whether it runs: the net's field channels_last (OFF: never; GPU_16BIT:
// a net on a GPU, its 16-bit layers; ALL: every net and type, for tests on
// the CPU). OFF by default until it has been measured on a GPU.

#include <set>
#include <string>
#include <vector>

#include "cortado.pb.h"

namespace cortado {

/// Whether a net with channels_last `mode` on a GPU (or not) gets a plan,
/// and whether it is limited to 16-bit layers.
bool LayoutPlanWanted(NetParameter::ChannelsLast mode, bool on_gpu, bool* half_only);

struct LayoutPlan {
  std::set<std::string> nhwc;  // names of the blobs to create NHWC
  int groups = 0;              // NHWC groups
  int conversions = 0;         // LayoutConvert layers inserted
};

/// Plans `param` (layers already filtered, split and typed) and inserts the
/// conversions. origin (optional) gets, for each layer of the result, the
/// index of the layer of the input it is or serves.
LayoutPlan PlanLayouts(NetParameter* param, bool half_only, std::vector<int>* origin = nullptr);

/// "N blobs NHWC in G groups, C conversions" for the log.
std::string LayoutPlanSummary(const LayoutPlan& plan);

}  // namespace cortado
