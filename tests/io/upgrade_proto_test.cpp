// Caffe's older formats upgraded on reading (io/upgrade_proto.hpp): V1 and V0
// nets written here in Caffe's published formats, as text and as binary,
// become today's layers and build and run; solver_type becomes type; the
// upgrade tools write files that parse to the same messages; errors name the
// file, the line, the layer and the field; the parameters of layer types
// Cortado lacks say so; NVCaffe's accepted fields get one note per net.
#include "cortado/io/upgrade_proto.hpp"

#include <google/protobuf/text_format.h>
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>

#include "command.hpp"
#include "cortado/io/proto_io.hpp"
#include "cortado/net/net.hpp"
#include "temp_dir.hpp"

namespace cortado {
namespace {

using google::protobuf::util::MessageDifferencer;

// The text as written, without the upgrade (protobuf's own parser).
template <typename M>
M raw(const std::string& text) {
  M m;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &m));
  return m;
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// A V1 net (BVLC Caffe's format of 2014-2015), LeNet-like on 6x6 inputs.
const char* kV1Net = R"(name: "v1net"
layers {
  name: "data"
  type: DUMMY_DATA
  top: "data"
  top: "label"
  dummy_data_param {
    shape { dim: 2 dim: 1 dim: 6 dim: 6 }
    shape { dim: 2 }
    data_filler { type: "gaussian" std: 1 }
    data_filler { type: "constant" value: 1 }
  }
}
layers {
  name: "conv1"
  type: CONVOLUTION
  bottom: "data"
  top: "conv1"
  blobs_lr: 1
  blobs_lr: 2
  weight_decay: 1
  weight_decay: 0
  param: "conv1_w"
  param: "conv1_b"
  blob_share_mode: PERMISSIVE
  convolution_param {
    num_output: 3
    kernel_size: 3
    weight_filler { type: "xavier" }
  }
}
layers { name: "relu1" type: RELU bottom: "conv1" top: "conv1" }
layers {
  name: "pool1"
  type: POOLING
  bottom: "conv1"
  top: "pool1"
  pooling_param { pool: MAX kernel_size: 2 stride: 2 }
}
layers {
  name: "ip1"
  type: INNER_PRODUCT
  bottom: "pool1"
  top: "ip1"
  inner_product_param { num_output: 4 weight_filler { type: "xavier" } }
}
layers {
  name: "loss"
  type: SOFTMAX_LOSS
  bottom: "ip1"
  bottom: "label"
  top: "loss"
  loss_weight: 2
  loss_param { normalize: false }
}
layers {
  name: "accuracy"
  type: ACCURACY
  bottom: "ip1"
  bottom: "label"
  top: "accuracy"
  include { phase: TEST }
}
)";

void ExpectV1Upgraded(const NetParameter& p) {
  EXPECT_EQ(p.name(), "v1net");
  EXPECT_EQ(p.layers_size(), 0);
  ASSERT_EQ(p.layer_size(), 7);
  const char* types[] = {"DummyData", "Convolution", "ReLU", "Pooling", "InnerProduct", "SoftmaxWithLoss", "Accuracy"};
  for (int i = 0; i < 7; ++i) EXPECT_EQ(p.layer(i).type(), types[i]) << i;
  const LayerParameter& conv = p.layer(1);
  EXPECT_EQ(conv.name(), "conv1");
  ASSERT_EQ(conv.param_size(), 2);
  EXPECT_EQ(conv.param(0).name(), "conv1_w");
  EXPECT_EQ(conv.param(0).lr_mult(), 1);
  EXPECT_EQ(conv.param(0).decay_mult(), 1);
  EXPECT_EQ(conv.param(0).share_mode(), ParamSpec::PERMISSIVE);
  EXPECT_EQ(conv.param(1).name(), "conv1_b");
  EXPECT_EQ(conv.param(1).lr_mult(), 2);
  EXPECT_EQ(conv.param(1).decay_mult(), 0);
  EXPECT_FALSE(conv.param(1).has_share_mode());
  EXPECT_EQ(conv.convolution_param().num_output(), 3u);
  EXPECT_EQ(conv.convolution_param().weight_filler().type(), "xavier");
  EXPECT_EQ(p.layer(2).bottom(0), "conv1");
  EXPECT_EQ(p.layer(2).top(0), "conv1");
  EXPECT_EQ(p.layer(3).pooling_param().kernel_size(), 2u);
  ASSERT_EQ(p.layer(5).loss_weight_size(), 1);
  EXPECT_EQ(p.layer(5).loss_weight(0), 2);
  EXPECT_FALSE(p.layer(5).loss_param().normalize());
  ASSERT_EQ(p.layer(6).include_size(), 1);
  EXPECT_EQ(p.layer(6).include(0).phase(), TEST);
  EXPECT_EQ(p.layer(0).dummy_data_param().shape_size(), 2);
}

// Builds `p` in `phase` and runs one forward; returns the net.
std::unique_ptr<Net> run_forward(NetParameter p, Phase phase, const SourceInfo& info = SourceInfo()) {
  p.mutable_state()->set_phase(phase);
  auto net = std::make_unique<Net>(p, info);
  net->Forward();
  return net;
}

TEST(Upgrade, V1NetTextBuildsAndRuns) {
  NetParameter p;
  SourceInfo info;
  ParseTextProto(kV1Net, "v1.prototxt", &p, &info);
  ExpectV1Upgraded(p);
  auto train = run_forward(p, TRAIN, info);
  const double loss = train->blob_by_name("loss")->cpu_data<float>()[0];
  EXPECT_TRUE(std::isfinite(loss) && loss > 0) << loss;
  EXPECT_FALSE(train->has_layer("accuracy"));
  auto test = run_forward(p, TEST, info);
  EXPECT_TRUE(test->has_layer("accuracy"));
  // Parameters shared by name keep the V1 names.
  EXPECT_EQ(train->layer_by_name("conv1")->layer_param().param(0).name(), "conv1_w");
}

TEST(Upgrade, V1NetBinaryAndV1Weights) {
  test::TempDir dir;
  // The V1 net as a binary file: the format of an old .caffemodel.
  NetParameter v1 = raw<NetParameter>(kV1Net);
  ASSERT_EQ(v1.layers_size(), 7);
  WriteBinaryProto(dir / "v1.binaryproto", v1);
  NetParameter p;
  ReadBinaryProto(dir / "v1.binaryproto", &p);
  ExpectV1Upgraded(p);

  // Weights of a trained V1 net load into the net built from it: conv1's
  // blobs written in the V1 layer (legacy 4-D shapes, as Caffe wrote them).
  NetParameter weights = raw<NetParameter>(kV1Net);
  V1LayerParameter* conv = weights.mutable_layers(1);
  BlobProto* w = conv->add_blobs();
  w->set_num(3);
  w->set_channels(1);
  w->set_height(3);
  w->set_width(3);
  for (int i = 0; i < 27; ++i) w->add_data(0.01f * i - 0.1f);
  BlobProto* b = conv->add_blobs();
  b->set_num(1);
  b->set_channels(1);
  b->set_height(1);
  b->set_width(3);
  for (int i = 0; i < 3; ++i) b->add_data(0.5f + i);
  WriteBinaryProto(dir / "v1.caffemodel", weights);
  p.mutable_state()->set_phase(TRAIN);
  Net net(p);
  net.CopyTrainedLayersFrom(dir / "v1.caffemodel");
  const auto& blobs = net.layer_by_name("conv1")->blobs();
  ASSERT_EQ(blobs.size(), 2u);
  EXPECT_FLOAT_EQ(blobs[0]->cpu_data<float>()[26], 0.01f * 26 - 0.1f);
  EXPECT_FLOAT_EQ(blobs[1]->cpu_data<float>()[2], 2.5f);
  net.Forward();
}

// A V0 net (BVLC Caffe's format of 2013): net-level input with input_dim, a
// padding layer in front of a convolution, V0 type names and fields.
const char* kV0Net = R"(name: "v0net"
input: "data"
input_dim: 2
input_dim: 1
input_dim: 8
input_dim: 8
layers {
  layer { name: "pad1" type: "padding" pad: 1 }
  bottom: "data"
  top: "pad1"
}
layers {
  layer {
    name: "conv1"
    type: "conv"
    num_output: 2
    kernelsize: 3
    stride: 1
    biasterm: true
    weight_filler { type: "gaussian" std: 0.1 }
    bias_filler { type: "constant" value: 0.5 }
    blobs_lr: 1
    blobs_lr: 2
    weight_decay: 1
    weight_decay: 0
  }
  bottom: "pad1"
  top: "conv1"
}
layers { layer { name: "relu1" type: "relu" } bottom: "conv1" top: "conv1" }
layers {
  layer { name: "pool1" type: "pool" pool: AVE kernelsize: 2 stride: 2 }
  bottom: "conv1"
  top: "pool1"
}
layers { layer { name: "norm1" type: "lrn" local_size: 3 alpha: 0.0001 beta: 0.75 } bottom: "pool1" top: "norm1" }
layers { layer { name: "drop1" type: "dropout" dropout_ratio: 0.25 } bottom: "norm1" top: "norm1" }
layers {
  layer { name: "ip1" type: "innerproduct" num_output: 3 weight_filler { type: "xavier" } }
  bottom: "norm1"
  top: "ip1"
}
layers { layer { name: "prob" type: "softmax" } bottom: "ip1" top: "prob" }
)";

TEST(Upgrade, V0NetTextAndBinaryBuildAndRun) {
  test::TempDir dir;
  WriteBinaryProto(dir / "v0.binaryproto", raw<NetParameter>(kV0Net));
  NetParameter from_text, from_binary;
  SourceInfo info;
  ParseTextProto(kV0Net, "v0.prototxt", &from_text, &info);
  ReadBinaryProto(dir / "v0.binaryproto", &from_binary);
  EXPECT_TRUE(MessageDifferencer::Equals(from_text, from_binary));
  const NetParameter& p = from_text;
  EXPECT_EQ(p.input_size() + p.input_dim_size() + p.layers_size(), 0);
  // The Input layer first; the padding layer folded into conv1.
  ASSERT_EQ(p.layer_size(), 8);
  const char* types[] = {"Input", "Convolution", "ReLU", "Pooling", "LRN", "Dropout", "InnerProduct", "Softmax"};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(p.layer(i).type(), types[i]) << i;
  EXPECT_EQ(p.layer(0).name(), "input");
  ASSERT_EQ(p.layer(0).top_size(), 1);
  EXPECT_EQ(p.layer(0).top(0), "data");
  ASSERT_EQ(p.layer(0).input_param().shape_size(), 1);
  EXPECT_EQ(p.layer(0).input_param().shape(0).dim_size(), 4);
  EXPECT_EQ(p.layer(0).input_param().shape(0).dim(2), 8);
  const LayerParameter& conv = p.layer(1);
  EXPECT_EQ(conv.name(), "conv1");
  ASSERT_EQ(conv.bottom_size(), 1);
  EXPECT_EQ(conv.bottom(0), "data");  // rewired past the padding layer
  const ConvolutionParameter& cp = conv.convolution_param();
  EXPECT_EQ(cp.num_output(), 2u);
  ASSERT_EQ(cp.pad_size(), 1);
  EXPECT_EQ(cp.pad(0), 1u);
  ASSERT_EQ(cp.kernel_size_size(), 1);
  EXPECT_EQ(cp.kernel_size(0), 3u);
  ASSERT_EQ(cp.stride_size(), 1);
  EXPECT_TRUE(cp.bias_term());
  EXPECT_EQ(cp.bias_filler().value(), 0.5f);
  ASSERT_EQ(conv.param_size(), 2);
  EXPECT_EQ(conv.param(1).lr_mult(), 2);
  EXPECT_EQ(conv.param(1).decay_mult(), 0);
  EXPECT_EQ(p.layer(3).pooling_param().pool(), PoolingParameter::AVE);
  EXPECT_EQ(p.layer(3).pooling_param().kernel_size(), 2u);
  EXPECT_EQ(p.layer(4).lrn_param().local_size(), 3u);
  EXPECT_FLOAT_EQ(p.layer(5).dropout_param().dropout_ratio(), 0.25f);
  EXPECT_EQ(p.layer(6).inner_product_param().num_output(), 3u);

  auto net = run_forward(p, TEST, info);
  // pad 1 keeps conv1 at 8x8; AVE pooling halves it.
  EXPECT_EQ(net->blob_by_name("conv1")->shape(), (std::vector<int>{2, 2, 8, 8}));
  EXPECT_EQ(net->blob_by_name("pool1")->shape(), (std::vector<int>{2, 2, 4, 4}));
  const std::shared_ptr<Blob> prob = net->blob_by_name("prob");
  ASSERT_EQ(prob->shape(), (std::vector<int>{2, 3}));
  for (int n = 0; n < 2; ++n) {
    double s = 0;
    for (int c = 0; c < 3; ++c) s += prob->cpu_data<float>()[n * 3 + c];
    EXPECT_NEAR(s, 1, 1e-5);
  }
}

TEST(Upgrade, V0DataLayerFields) {
  NetParameter p;
  ParseTextProto(R"(layers { layer { name: "d" type: "data" source: "train_lmdb" batchsize: 16 cropsize: 27
                                     mirror: true scale: 0.5 meanfile: "mean.binaryproto" rand_skip: 3 }
                            top: "data" top: "label" }
                    layers { layer { name: "imgs" type: "images" source: "list.txt" batchsize: 4
                                     shuffle_images: true new_height: 32 new_width: 30 } top: "x" top: "y" })",
                 "v0data.prototxt", &p);
  ASSERT_EQ(p.layer_size(), 2);
  const LayerParameter& d = p.layer(0);
  EXPECT_EQ(d.type(), "Data");
  EXPECT_EQ(d.data_param().source(), "train_lmdb");
  EXPECT_EQ(d.data_param().batch_size(), 16u);
  EXPECT_EQ(d.data_param().rand_skip(), 3u);
  EXPECT_FALSE(d.data_param().has_scale());
  EXPECT_EQ(d.transform_param().crop_size(), 27u);
  EXPECT_TRUE(d.transform_param().mirror());
  EXPECT_EQ(d.transform_param().scale(), 0.5f);
  EXPECT_EQ(d.transform_param().mean_file(), "mean.binaryproto");
  const LayerParameter& im = p.layer(1);
  EXPECT_EQ(im.type(), "ImageData");
  EXPECT_EQ(im.image_data_param().batch_size(), 4u);
  EXPECT_TRUE(im.image_data_param().shuffle());
  EXPECT_EQ(im.image_data_param().new_height(), 32u);
  EXPECT_EQ(im.image_data_param().new_width(), 30u);
}

TEST(Upgrade, V0Errors) {
  // A V0 field the type does not take: the file, its line, the layer, the field.
  const std::string field = error_of([] {
    NetParameter p;
    ParseTextProto("layers {\n  layer {\n    name: \"relu1\"\n    type: \"relu\"\n    num_output: 3\n  }\n}\n",
                   "bad_v0.prototxt", &p);
  });
  EXPECT_TRUE(has(field, "bad_v0.prototxt:5:")) << field;
  EXPECT_TRUE(has(field, "'relu1'")) << field;
  EXPECT_TRUE(has(field, "num_output")) << field;
  const std::string type = error_of([] {
    NetParameter p;
    ParseTextProto("layers {\n  layer {\n    name: \"x\"\n    type: \"warp\"\n  }\n}\n", "bad_type.prototxt", &p);
  });
  EXPECT_TRUE(has(type, "bad_type.prototxt:4:")) << type;
  EXPECT_TRUE(has(type, "unknown V0 layer type 'warp'")) << type;
  // A padding layer feeding a layer that is neither conv nor pool.
  const std::string pad = error_of([] {
    NetParameter p;
    ParseTextProto(R"(input: "data"
layers { layer { name: "pad" type: "padding" pad: 2 } bottom: "data" top: "padded" }
layers { layer { name: "r" type: "relu" } bottom: "padded" top: "r" })",
                   "bad_pad.prototxt", &p);
  });
  EXPECT_TRUE(has(pad, "bad_pad.prototxt:3:")) << pad;
  EXPECT_TRUE(has(pad, "padding layer 'pad'")) << pad;
}

TEST(Upgrade, V1DataTransformationFields) {
  NetParameter p;
  ParseTextProto(R"(layers { name: "d" type: DATA top: "data" top: "label"
                             data_param { source: "db" batch_size: 2 scale: 0.25 crop_size: 5 mirror: true }
                             transform_param { mean_value: 10 } })",
                 "v1data.prototxt", &p);
  ASSERT_EQ(p.layer_size(), 1);
  const LayerParameter& d = p.layer(0);
  EXPECT_FALSE(d.data_param().has_scale() || d.data_param().has_crop_size() || d.data_param().has_mirror());
  EXPECT_EQ(d.transform_param().scale(), 0.25f);
  EXPECT_EQ(d.transform_param().crop_size(), 5u);
  EXPECT_TRUE(d.transform_param().mirror());
  ASSERT_EQ(d.transform_param().mean_value_size(), 1);
  const std::string conflict = error_of([] {
    NetParameter q;
    ParseTextProto("layers {\n  name: \"d\"\n  type: DATA\n  data_param {\n    scale: 0.5\n  }\n"
                   "  transform_param { scale: 2 }\n}\n",
                   "conflict.prototxt", &q);
  });
  EXPECT_TRUE(has(conflict, "conflict.prototxt:5:")) << conflict;
  EXPECT_TRUE(has(conflict, "data_param.scale and transform_param.scale")) << conflict;
}

TEST(Upgrade, InputFieldsAndErrors) {
  NetParameter p;
  ParseTextProto(R"(input: "a" input_shape { dim: 1 dim: 2 } input: "b" input_shape { dim: 3 }
                    layer { name: "s" type: "Silence" bottom: "a" bottom: "b" })",
                 "inputs.prototxt", &p);
  ASSERT_EQ(p.layer_size(), 2);
  EXPECT_EQ(p.layer(0).type(), "Input");
  ASSERT_EQ(p.layer(0).top_size(), 2);
  EXPECT_EQ(p.layer(0).top(1), "b");
  EXPECT_EQ(p.layer(0).input_param().shape(1).dim(0), 3);
  EXPECT_EQ(p.layer(1).name(), "s");
  Net net(p);
  EXPECT_EQ(net.blob_by_name("a")->shape(), (std::vector<int>{1, 2}));

  const std::string dims = error_of([] {
    NetParameter q;
    ParseTextProto("name: \"x\"\ninput: \"a\"\ninput_dim: 1\ninput_dim: 2\n", "dims.prototxt", &q);
  });
  EXPECT_TRUE(has(dims, "dims.prototxt:3:")) << dims;
  EXPECT_TRUE(has(dims, "4 per input")) << dims;

  // Errors of the upgraded net name the line of the layer as written: the
  // Input layer's at the input field, a V1 layer's at its field.
  const std::string bad_layer = error_of([] {
    NetParameter q;
    SourceInfo info;
    ParseTextProto("input: \"data\"\ninput_dim: 1\ninput_dim: 1\ninput_dim: 4\ninput_dim: 4\n"
                   "layers {\n  name: \"conv\"\n  type: CONVOLUTION\n  bottom: \"data\"\n  top: \"conv\"\n"
                   "  convolution_param {\n    kernel_size: 3\n    num_output: 2\n    group: 3\n  }\n}\n",
                   "lines.prototxt", &q, &info);
    Net net(q, info);
  });
  EXPECT_TRUE(has(bad_layer, "lines.prototxt:14:")) << bad_layer;
  EXPECT_TRUE(has(bad_layer, "'conv'")) << bad_layer;
  EXPECT_TRUE(has(bad_layer, "group")) << bad_layer;
}

TEST(Upgrade, BatchNormParamSpecs) {
  NetParameter p;
  ParseTextProto(R"(layer { name: "bn" type: "BatchNorm" bottom: "x" top: "x"
                      param { lr_mult: 1 } param { lr_mult: 1 decay_mult: 2 } param { lr_mult: 1 } }
                    layer { name: "bn2" type: "BatchNorm" bottom: "x" top: "x"
                      batch_norm_param { scale_bias: true }
                      param { lr_mult: 0 } param { lr_mult: 0 } param { lr_mult: 0 } param { lr_mult: 1 } })",
                 "bn.prototxt", &p);
  ASSERT_EQ(p.layer(0).param_size(), 3);
  for (const ParamSpec& s : p.layer(0).param()) {
    EXPECT_EQ(s.lr_mult(), 0);
    EXPECT_EQ(s.decay_mult(), 0);
  }
  EXPECT_EQ(p.layer(1).param(3).lr_mult(), 1);  // four ParamSpecs: not BVLC's old BatchNorm
  EXPECT_TRUE(NetNeedsUpgrade(raw<NetParameter>("layer { type: 'BatchNorm' param {} param {} param {} }")));
  EXPECT_FALSE(NetNeedsUpgrade(
      raw<NetParameter>("layer { type: 'BatchNorm' param {lr_mult: 0 decay_mult: 0} param {lr_mult: 0 decay_mult: 0} "
                        "param {lr_mult: 0 decay_mult: 0} }")));
}

TEST(Upgrade, LayerAndLayersTogetherIsAnError) {
  const std::string e = error_of([] {
    NetParameter p;
    ParseTextProto("layer { name: \"a\" type: \"ReLU\" }\nlayers { name: \"b\" type: RELU }\n", "both.prototxt", &p);
  });
  EXPECT_TRUE(has(e, "both.prototxt:2:")) << e;
  EXPECT_TRUE(has(e, "'layer'") && has(e, "'layers'")) << e;
}

// V1 types Cortado does not have end in the layer factory's unknown-type
// error, which names the layer.
TEST(Upgrade, UnavailableV1TypeIsTheUsualUnknownTypeError) {
  NetParameter p;
  SourceInfo info;
  ParseTextProto("layers {\n  name: \"mem\"\n  type: MEMORY_DATA\n  top: \"data\"\n}\n", "mem.prototxt", &p, &info);
  ASSERT_EQ(p.layer_size(), 1);
  EXPECT_EQ(p.layer(0).type(), "MemoryData");
  const std::string e = error_of([&] { Net net(p, info); });
  EXPECT_TRUE(has(e, "mem.prototxt:3:")) << e;
  EXPECT_TRUE(has(e, "layer 'mem' (MemoryData)")) << e;
  EXPECT_TRUE(has(e, "unknown layer type 'MemoryData'")) << e;
  EXPECT_EQ(V1LayerTypeName(V1LayerParameter::WINDOW_DATA), "WindowData");
  EXPECT_EQ(V1LayerTypeName(V1LayerParameter::SOFTMAX_LOSS), "SoftmaxWithLoss");
}

// The parameters of layer types Cortado lacks: the parse error names the
// file, the line and the layer, and says the type is not available.
TEST(Upgrade, UnavailableLayerParametersSaySo) {
  const std::string python = error_of([] {
    NetParameter p;
    ParseTextProto("layer {\n  name: \"py\"\n  type: \"Python\"\n  python_param {\n    module: \"m\"\n  }\n}\n",
                   "py.prototxt", &p);
  });
  EXPECT_TRUE(has(python, "py.prototxt:4:")) << python;
  EXPECT_TRUE(has(python, "layer type 'Python' (python_param) is not available in Cortado")) << python;
  EXPECT_TRUE(has(python, "'py'")) << python;
  const std::string prior = error_of([] {
    NetParameter p;
    ParseTextProto("layer { name: \"pb\" type: \"PriorBox\"\n prior_box_param { min_size: 30 } }", "ssd.prototxt", &p);
  });
  EXPECT_TRUE(has(prior, "ssd.prototxt:2:")) << prior;
  EXPECT_TRUE(has(prior, "layer type 'PriorBox' (prior_box_param) is not available in Cortado")) << prior;
  // V1 layers too, named in their `layers` block.
  const std::string window = error_of([] {
    NetParameter p;
    ParseTextProto("layers {\n  name: \"w\"\n  type: WINDOW_DATA\n  window_data_param { source: \"x\" }\n}\n",
                   "window.prototxt", &p);
  });
  EXPECT_TRUE(has(window, "window.prototxt:4:")) << window;
  EXPECT_TRUE(has(window, "layer type 'WindowData' (window_data_param) is not available in Cortado")) << window;
  EXPECT_TRUE(has(window, "'w'")) << window;
  // Any other unknown field keeps protobuf's message.
  const std::string other = error_of([] {
    NetParameter p;
    ParseTextProto("layer { name: \"c\" foo_param { } }", "other.prototxt", &p);
  });
  EXPECT_TRUE(has(other, "no field named \"foo_param\"")) << other;
  EXPECT_STREQ(UnavailableLayerType("detection_output_param"), "DetectionOutput");
  EXPECT_EQ(UnavailableLayerType("convolution_param"), nullptr);
}

TEST(Upgrade, SolverType) {
  SolverParameter s;
  ParseTextProto("base_lr: 0.1\nsolver_type: ADAM\n", "solver.prototxt", &s);
  EXPECT_EQ(s.type(), "Adam");
  EXPECT_FALSE(s.has_solver_type());
  const std::pair<const char*, const char*> all[] = {{"SGD", "SGD"},           {"NESTEROV", "Nesterov"},
                                                     {"ADAGRAD", "AdaGrad"},   {"RMSPROP", "RMSProp"},
                                                     {"ADADELTA", "AdaDelta"}, {"ADAM", "Adam"}};
  for (const auto& [e, name] : all) {
    SolverParameter t;
    ParseTextProto(std::string("solver_type: ") + e, "s.prototxt", &t);
    EXPECT_EQ(t.type(), name) << e;
  }
  // Both, naming the same solver: fine. Different: an error naming both fields.
  SolverParameter same;
  ParseTextProto("type: \"Nesterov\"\nsolver_type: NESTEROV\n", "same.prototxt", &same);
  EXPECT_EQ(same.type(), "Nesterov");
  const std::string e = error_of([] {
    SolverParameter t;
    ParseTextProto("base_lr: 0.1\ntype: \"SGD\"\nsolver_type: ADAM\n", "both.prototxt", &t);
  });
  EXPECT_TRUE(has(e, "both.prototxt:3:")) << e;
  EXPECT_TRUE(has(e, "solver_type: ADAM") && has(e, "type: \"SGD\"")) << e;
  // The nets inside a solver are upgraded too.
  SolverParameter inline_net;
  ParseTextProto("net_param { layers { name: \"r\" type: RELU bottom: \"x\" top: \"x\" } }\n"
                 "test_net_param { input: \"x\" input_dim: 1 input_dim: 1 input_dim: 1 input_dim: 1 }\n",
                 "inline.prototxt", &inline_net);
  ASSERT_EQ(inline_net.net_param().layer_size(), 1);
  EXPECT_EQ(inline_net.net_param().layer(0).type(), "ReLU");
  ASSERT_EQ(inline_net.test_net_param(0).layer_size(), 1);
  EXPECT_EQ(inline_net.test_net_param(0).layer(0).type(), "Input");
  EXPECT_TRUE(SolverNeedsUpgrade(raw<SolverParameter>("solver_type: SGD")));
  EXPECT_FALSE(SolverNeedsUpgrade(raw<SolverParameter>("type: 'SGD' net_param { layer { type: 'ReLU' } }")));
}

TEST(Upgrade, NotesOneLinePerNet) {
  NetParameter p = raw<NetParameter>(R"(eltwise_mem_sharing: true
      reduce_buckets: 5
      layer { name: "c" type: "Convolution" debug: true convolution_param { conv_algos_override: "1,1,1" } }
      layer { name: "d" type: "Dropout" debug: true dropout_param { engine: CUDNN } }
      layer { name: "b" type: "BatchNorm" cudnn_math_override: 1 batch_norm_param { engine: CAFFE } })");
  const std::string note = NoteAcceptedFields("n.prototxt", p);
  EXPECT_EQ(note.find('\n'), std::string::npos) << note;
  EXPECT_TRUE(has(note, "n.prototxt: accepted and not used by Cortado")) << note;
  for (const char* part : {"eltwise_mem_sharing", "reduce_buckets of the net", "debug in 2 layers",
                           "cudnn_math_override in 1 layer ", "conv_algos_override in 1 layer",
                           "dropout_param.engine in 1 layer", "batch_norm_param.engine in 1 layer"})
    EXPECT_TRUE(has(note, part)) << part << " in " << note;
  EXPECT_EQ(NoteAcceptedFields("plain.prototxt", raw<NetParameter>("layer { name: 'r' type: 'ReLU' }")), "");
  const std::string solver = NoteAcceptedFields(
      "s.prototxt",
      raw<SolverParameter>("layer_wise_reduce: false test_and_snapshot_last_epochs: 2 eval_type: 'detection'"));
  for (const char* part : {"layer_wise_reduce", "test_and_snapshot_last_epochs", "eval_type"})
    EXPECT_TRUE(has(solver, part)) << part << " in " << solver;
}

// The tools, from the build (an environment variable of the same name
// replaces the path, as for the other tools' tests).
std::string tool(const char* env, const char* built) {
  const char* v = std::getenv(env);
  return v && *v ? v : built;
}

template <typename M>
M read_raw_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return raw<M>(ss.str());
}

TEST(Upgrade, ToolsWriteTheUpgradedFile) {
  test::TempDir dir;
  write_file(dir / "v1.prototxt", kV1Net);
  write_file(dir / "v0.prototxt", kV0Net);
  write_file(dir / "solver.prototxt",
             "base_lr: 0.01\nsolver_type: NESTEROV\nmomentum: 0.9\nnet_param {\n" + std::string(kV1Net) + "}\n");
  const std::string net_tool = tool("CORTADO_UPGRADE_NET_PROTO_TEXT", CORTADO_UPGRADE_NET_PROTO_TEXT);
  const std::string solver_tool = tool("CORTADO_UPGRADE_SOLVER_PROTO_TEXT", CORTADO_UPGRADE_SOLVER_PROTO_TEXT);
  for (const char* name : {"v1", "v0"}) {
    SCOPED_TRACE(name);
    const std::string in = dir / (std::string(name) + ".prototxt"), out = dir / (std::string(name) + "_new.prototxt");
    const test::CommandRun r = test::RunCommand("timeout 60 " + net_tool + " " + in + " " + out);
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_TRUE(has(r.output, "upgraded")) << r.output;
    // The file written is today's format (protobuf alone parses it, nothing
    // left to upgrade) and the same net the reader makes of the old file.
    const NetParameter written = read_raw_file<NetParameter>(out);
    EXPECT_FALSE(NetNeedsUpgrade(written));
    NetParameter upgraded;
    ReadTextProto(in, &upgraded);
    EXPECT_TRUE(MessageDifferencer::Equals(written, upgraded)) << written.DebugString();
  }
  const std::string out = dir / "solver_new.prototxt";
  test::CommandRun r = test::RunCommand("timeout 60 " + solver_tool + " " + (dir / "solver.prototxt") + " " + out);
  ASSERT_EQ(r.status, 0) << r.output;
  const SolverParameter written = read_raw_file<SolverParameter>(out);
  EXPECT_FALSE(SolverNeedsUpgrade(written));
  EXPECT_EQ(written.type(), "Nesterov");
  SolverParameter upgraded;
  ReadTextProto(dir / "solver.prototxt", &upgraded);
  EXPECT_TRUE(MessageDifferencer::Equals(written, upgraded));
  ExpectV1Upgraded(written.net_param());

  // Bad input: the error and status 1.
  write_file(dir / "bad.prototxt", "base_lr: 0.1\ntype: \"SGD\"\nsolver_type: ADAM\n");
  r = test::RunCommand("timeout 60 " + solver_tool + " " + (dir / "bad.prototxt") + " " + (dir / "x.prototxt"));
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_TRUE(has(r.output, "bad.prototxt:3:")) << r.output;
  r = test::RunCommand("timeout 60 " + net_tool + " " + (dir / "v1.prototxt"));
  EXPECT_EQ(r.status, 1) << r.output;
}

TEST(Upgrade, CheckPrototxtTool) {
  test::TempDir dir;
  write_file(dir / "v1.prototxt", kV1Net);
  write_file(dir / "py.prototxt", "layer { name: \"p\" type: \"Python\" python_param { module: \"m\" } }\n");
  write_file(dir / "mem.prototxt", "layers { name: \"m\" type: MEMORY_DATA top: \"x\" }\n");
  write_file(dir / "typo.prototxt", "layer { name: \"c\" type: \"ReLU\" relu_parm { } }\n");
  write_file(dir / "solver.prototxt", "base_lr: 0.1\nsolver_type: ADAM\n");
  const std::string check = tool("CORTADO_CHECK_PROTOTXT", CORTADO_CHECK_PROTOTXT);
  const test::CommandRun r = test::RunCommand("timeout 60 " + check + " " + (dir / "v1.prototxt") + " " +
                                              (dir / "py.prototxt") + " " + (dir / "mem.prototxt") + " " +
                                              (dir / "typo.prototxt"));
  EXPECT_EQ(r.status, 1) << r.output;  // typo.prototxt FAILED
  EXPECT_TRUE(has(r.output, "OK\t" + (dir / "v1.prototxt") + "\t7 layers")) << r.output;
  EXPECT_TRUE(has(r.output, "UNAVAILABLE\t" + (dir / "py.prototxt"))) << r.output;
  EXPECT_TRUE(has(r.output, "UNAVAILABLE\t" + (dir / "mem.prototxt") + "\t" + (dir / "mem.prototxt") +
                                ": layer 'm': layer type 'MemoryData' is not available in Cortado"))
      << r.output;
  EXPECT_TRUE(has(r.output, "FAILED\t" + (dir / "typo.prototxt") + "\t" + (dir / "typo.prototxt") + ":1:"))
      << r.output;
  const test::CommandRun s = test::RunCommand("timeout 60 " + check + " --solver " + (dir / "solver.prototxt"));
  EXPECT_EQ(s.status, 0) << s.output;
  EXPECT_TRUE(has(s.output, "OK\t" + (dir / "solver.prototxt"))) << s.output;
}

}  // namespace
}  // namespace cortado
