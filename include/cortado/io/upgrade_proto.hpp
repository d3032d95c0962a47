#pragma once
// Caffe's older formats, upgraded on reading as BVLC Caffe upgrades them
// (its upgrade_proto rules), and the notes for NVCaffe's fields that Cortado
// accepts without using them.
//
// Nets (NetParameter), in this order:
// - V0 (NetParameter.layers, each holding a V0LayerParameter `layer`):
//   "padding" layers are folded into the convolution or pooling layer they
//   feed (its pad, and its bottom becomes the padding layer's bottom); each
//   V0 layer becomes a V1 layer: the V0 type names ("conv", "innerproduct",
//   "pool", "images", ...) become V1 types and every V0 field moves to the
//   parameter message of its type (num_output -> convolution_param or
//   inner_product_param, source -> data_param / hdf5_data_param /
//   image_data_param / infogain_loss_param, scale/meanfile/cropsize/mirror ->
//   transform_param, ...). A V0 field that the layer's type does not take is
//   an Error naming the file, the layer and the field (BVLC Caffe logs it and
//   drops the field); an unknown V0 type is an Error naming the layer.
// - V1 data layers (DATA, IMAGE_DATA): the legacy scale / mean_file /
//   crop_size / mirror of data_param or image_data_param move to
//   transform_param (an Error when both set the field differently).
// - V1 (NetParameter.layers with enum types) -> NetParameter.layer: the type
//   enum becomes the type string ("Convolution", "SoftmaxWithLoss", ...;
//   MEMORY_DATA and WINDOW_DATA become "MemoryData" and "WindowData", which
//   the layer factory then rejects as unknown types); param names,
//   blob_share_mode, blobs_lr and weight_decay become ParamSpec name,
//   share_mode, lr_mult and decay_mult; bottom, top, name, include, exclude,
//   blobs, loss_weight and every *_param are copied. A net with both `layer`
//   and `layers` is an Error.
// - Net-level inputs (input with input_shape or input_dim, 4 values per
//   input): an Input layer named "input", first in the net, with one top
//   and one shape per input. Inputs without shapes (old .caffemodel files)
//   are dropped.
// - BatchNorm layers with exactly three ParamSpecs (BVLC's old BatchNorm):
//   their lr_mult and decay_mult are set to 0, the statistics being no
//   learned parameters.
// Solvers (SolverParameter):
// - solver_type (the enum) -> type ("SGD", "Nesterov", "AdaGrad",
//   "RMSProp", "AdaDelta", "Adam"); a file that sets both to different
//   solvers is an Error naming both fields. The nets inside the solver
//   (net_param, train_net_param, test_net_param) are upgraded as nets.
//
// A file that was upgraded gets one INFO line ("upgraded V1 layers in <file>;
// run upgrade_net_proto_text to write the upgraded file").

#include <string>
#include <vector>

#include "cortado.pb.h"
#include "cortado/io/proto_io.hpp"

namespace cortado {

/// Whether any rule above would change `net` / `solver`.
bool NetNeedsUpgrade(const NetParameter& net);
bool SolverNeedsUpgrade(const SolverParameter& solver);

/// Upgrades `net` in place; `file` names it in errors and in the log line.
/// With `origins`, (*origins)[i] says where upgraded layer i was written
/// (see SourceInfo). With `info`, errors name lines. Returns whether
/// anything changed.
bool UpgradeNet(const std::string& file, NetParameter* net, std::vector<LayerOrigin>* origins = nullptr,
                const SourceInfo* info = nullptr);
/// Upgrades `solver` and the nets inside it; returns whether anything changed.
bool UpgradeSolver(const std::string& file, SolverParameter* solver, const SourceInfo* info = nullptr);

/// What ReadTextProto and ReadBinaryProto call after parsing: upgrades a
/// NetParameter or SolverParameter (other messages are left alone), records
/// in `info` (if any) where the upgraded layers were written, and for text
/// files (`text`) logs the note of the accepted NVCaffe fields
/// (NoteAcceptedFields).
void UpgradeOnRead(const std::string& file, google::protobuf::Message* msg, SourceInfo* info, bool text);

/// One INFO line for the net (or solver) naming the NVCaffe fields it sets
/// that Cortado accepts and does not use, each with what Cortado does
/// instead (eltwise_mem_sharing, the cuDNN algorithm and math overrides,
/// the net's reduce_buckets, layer debug, BatchNorm and Dropout engine;
/// layer_wise_reduce, test_and_snapshot_last_epochs, the detection
/// evaluation fields). Nothing when none is set. Returns the line.
std::string NoteAcceptedFields(const std::string& file, const NetParameter& net);
std::string NoteAcceptedFields(const std::string& file, const SolverParameter& solver);

/// The layer type that a LayerParameter (or V1LayerParameter) field of
/// Caffe, NVCaffe or the SSD fork belongs to when Cortado does not have that
/// layer type ("python_param" -> "Python", "prior_box_param" -> "PriorBox");
/// nullptr for any other name.
const char* UnavailableLayerType(const std::string& field);

/// The V1 type string of a V1 layer type ("Convolution" for CONVOLUTION, ""
/// for NONE).
std::string V1LayerTypeName(V1LayerParameter::LayerType type);

}  // namespace cortado
