// Net construction: filtering by phase/level/stage, split insertion, in-place
// tops, shared parameters, backward need, look-up, weights copy.
#include "cortado/net/net.hpp"

#include <gtest/gtest.h>

#include "cortado/io/proto_io.hpp"
#include "cortado/util/rng.hpp"

namespace cortado {
namespace {

NetParameter parse(const std::string& text) {
  NetParameter p;
  ParseTextProto(text, "test.prototxt", &p);
  return p;
}

const char* kTiny = R"(
name: "tiny"
layer { name: "data" type: "DummyData" top: "data" top: "label"
  dummy_data_param {
    shape { dim: 4 dim: 3 } shape { dim: 4 }
    data_filler { type: "gaussian" std: 1 } data_filler { type: "constant" value: 1 } } }
layer { name: "ip1" type: "InnerProduct" bottom: "data" top: "ip1"
  inner_product_param { num_output: 5 weight_filler { type: "gaussian" std: 0.5 } } }
layer { name: "relu" type: "ReLU" bottom: "ip1" top: "ip1" }
layer { name: "ip2" type: "InnerProduct" bottom: "ip1" top: "ip2"
  inner_product_param { num_output: 3 weight_filler { type: "gaussian" std: 0.5 } } }
layer { name: "acc" type: "Accuracy" bottom: "ip2" bottom: "label" top: "acc" include { phase: TEST } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip2" bottom: "label" top: "loss" }
)";

NetParameter with_phase(const std::string& text, Phase phase) {
  NetParameter p = parse(text);
  p.mutable_state()->set_phase(phase);
  return p;
}

TEST(Net, FiltersByPhaseAndInsertsSplits) {
  Net train(with_phase(kTiny, TRAIN));
  EXPECT_FALSE(train.has_layer("acc"));
  EXPECT_TRUE(train.has_layer("loss"));
  Net test(with_phase(kTiny, TEST));
  ASSERT_TRUE(test.has_layer("acc"));
  // ip2 and label feed two layers each in TEST: split layers are inserted.
  EXPECT_TRUE(test.has_layer("ip2_ip2_0_split"));
  EXPECT_TRUE(test.has_layer("label_data_1_split"));
  EXPECT_FALSE(train.has_layer("ip2_ip2_0_split"));
  EXPECT_EQ(test.output_blobs().size(), 2u);
}

TEST(Net, StateRules) {
  NetState s;
  s.set_phase(TRAIN);
  s.set_level(2);
  s.add_stage("deploy");
  NetStateRule r;
  EXPECT_TRUE(Net::StateMeetsRule(s, r, "x"));
  r.set_min_level(3);
  EXPECT_FALSE(Net::StateMeetsRule(s, r, "x"));
  r.clear_min_level();
  r.set_max_level(2);
  EXPECT_TRUE(Net::StateMeetsRule(s, r, "x"));
  r.add_stage("deploy");
  EXPECT_TRUE(Net::StateMeetsRule(s, r, "x"));
  r.add_not_stage("deploy");
  EXPECT_FALSE(Net::StateMeetsRule(s, r, "x"));
  NetStateRule phase_rule;
  phase_rule.set_phase(TEST);
  EXPECT_FALSE(Net::StateMeetsRule(s, phase_rule, "x"));
  NetParameter p = parse(R"(
    layer { name: "a" type: "Silence" include { stage: "deploy" } }
    layer { name: "b" type: "Silence" exclude { stage: "deploy" } }
    layer { name: "c" type: "Silence" include { min_level: 1 } })");
  *p.mutable_state() = s;
  const NetParameter f = Net::FilterNet(p);
  ASSERT_EQ(f.layer_size(), 2);
  EXPECT_EQ(f.layer(0).name(), "a");
  EXPECT_EQ(f.layer(1).name(), "c");
}

TEST(Net, InPlaceAndLookup) {
  Net net(with_phase(kTiny, TRAIN));
  ASSERT_NE(net.layer_by_name("relu"), nullptr);
  const int relu = 2;
  ASSERT_EQ(net.layer_names()[relu], "relu");
  EXPECT_EQ(net.bottom_vecs()[relu][0], net.top_vecs()[relu][0]);  // in place
  EXPECT_EQ(net.blob_by_name("ip1")->shape(), (std::vector<int>{4, 5}));
  EXPECT_EQ(net.blob_by_name("nope"), nullptr);
  EXPECT_EQ(net.layer_by_name("nope"), nullptr);
  EXPECT_EQ(net.learnable_params().size(), 4u);
}

TEST(Net, BackwardOnlyWhereNeeded) {
  NetParameter p = with_phase(kTiny, TEST);
  Net net(p);
  const auto& names = net.layer_names();
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == "data" || names[i] == "acc") EXPECT_FALSE(net.layer_need_backward()[i]) << names[i];
    if (names[i] == "ip1" || names[i] == "loss") EXPECT_TRUE(net.layer_need_backward()[i]) << names[i];
    if (names[i] == "loss") {
      EXPECT_TRUE(net.bottom_need_backward()[i][0]);
      EXPECT_FALSE(net.bottom_need_backward()[i][1]);  // the label
    }
    if (names[i] == "ip1") EXPECT_FALSE(net.bottom_need_backward()[i][0]);  // data needs no gradient
  }
  // Freezing ip1 (lr_mult 0): its weights get no gradient; with force_backward it runs anyway.
  NetParameter frozen = p;
  for (auto& l : *frozen.mutable_layer())
    if (l.name() == "ip1") {
      l.add_param()->set_lr_mult(0);
      l.add_param()->set_lr_mult(0);
    }
  Net f(frozen);
  EXPECT_FALSE(f.layer_need_backward()[1]);
  frozen.set_force_backward(true);
  Net fb(frozen);
  EXPECT_TRUE(fb.layer_need_backward()[1]);
  EXPECT_TRUE(fb.bottom_need_backward()[1][0]);
}

TEST(Net, SplitSumsGradients) {
  // y = ip(x) used twice by an Eltwise SUM: d loss / d ip weights doubles
  // compared with using it once with coefficient 1.
  const char* twice = R"(
    force_backward: true
    layer { name: "x" type: "DummyData" top: "x" dummy_data_param { shape { dim: 2 dim: 3 } data_filler { type: "constant" value: 1 } } }
    layer { name: "ip" type: "InnerProduct" bottom: "x" top: "y" inner_product_param { num_output: 2 bias_term: false weight_filler { type: "constant" value: 0.5 } } }
    layer { name: "sum" type: "Eltwise" bottom: "y" bottom: "y" top: "z" }
    layer { name: "l" type: "Flatten" bottom: "z" top: "loss" loss_weight: 1 })";
  const char* once = R"(
    force_backward: true
    layer { name: "x" type: "DummyData" top: "x" dummy_data_param { shape { dim: 2 dim: 3 } data_filler { type: "constant" value: 1 } } }
    layer { name: "ip" type: "InnerProduct" bottom: "x" top: "y" inner_product_param { num_output: 2 bias_term: false weight_filler { type: "constant" value: 0.5 } } }
    layer { name: "l" type: "Flatten" bottom: "y" top: "loss" loss_weight: 1 })";
  Net a(with_phase(twice, TRAIN)), b(with_phase(once, TRAIN));
  EXPECT_TRUE(a.has_layer("y_ip_0_split"));
  const double la = a.ForwardBackward(), lb = b.ForwardBackward();
  EXPECT_NEAR(la, 2 * lb, 1e-5);
  const Blob* wa = a.learnable_params()[0];
  const Blob* wb = b.learnable_params()[0];
  for (size_t i = 0; i < wa->count(); ++i)
    EXPECT_NEAR(wa->cpu_diff<float>()[i], 2 * wb->cpu_diff<float>()[i], 1e-5);
}

TEST(Net, SharedParametersUseOneBuffer) {
  const char* text = R"(
    layer { name: "x" type: "DummyData" top: "x" dummy_data_param { shape { dim: 2 dim: 3 } data_filler { type: "gaussian" } } }
    layer { name: "ip_a" type: "InnerProduct" bottom: "x" top: "a"
      param { name: "w" } param { name: "b" } inner_product_param { num_output: 3 weight_filler { type: "gaussian" } } }
    layer { name: "ip_b" type: "InnerProduct" bottom: "a" top: "b"
      param { name: "w" } param { name: "b" } inner_product_param { num_output: 3 } })";
  Net net(with_phase(text, TRAIN));
  EXPECT_EQ(net.learnable_params().size(), 2u);
  EXPECT_EQ(net.params().size(), 4u);
  EXPECT_EQ(net.param_owners()[2], 0);
  const Blob& wa = *net.layer_by_name("ip_a")->blobs()[0];
  const Blob& wb = *net.layer_by_name("ip_b")->blobs()[0];
  EXPECT_EQ(wa.cpu_data<float>(), wb.cpu_data<float>());
  // A shape mismatch is an error that names the parameter and the owner.
  std::string bad = text;
  bad.replace(bad.rfind("num_output: 3"), 13, "num_output: 4");
  try {
    Net n(with_phase(bad, TRAIN));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("shared parameter 'w'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("ip_a"), std::string::npos) << e.what();
  }
}

TEST(Net, LayerTypesFromDefaultsAndOverrides) {
  NetParameter p = with_phase(kTiny, TRAIN);
  p.set_default_forward_type(FLOAT16);
  p.set_default_backward_type(FLOAT16);
  p.mutable_layer(5)->set_forward_type(FLOAT);  // the loss in FP32
  Net net(p);
  EXPECT_EQ(net.layer_by_name("ip1")->forward_type(), FLOAT16);
  EXPECT_EQ(net.layer_by_name("loss")->forward_type(), FLOAT);
  EXPECT_EQ(net.layer_by_name("loss")->backward_type(), FLOAT16);
  const double loss = net.ForwardBackward();
  EXPECT_GT(loss, 0);
  EXPECT_GT(net.learnable_params()[0]->asum_diff(), 0);
}

TEST(Net, CopyTrainedLayersAndToProto) {
  set_random_seed(11);
  Net a(with_phase(kTiny, TRAIN));
  set_random_seed(12);
  Net b(with_phase(kTiny, TEST));
  NetParameter weights;
  a.ToProto(&weights);
  for (const auto& l : weights.layer()) EXPECT_FALSE(l.has_forward_type());
  b.CopyTrainedLayersFrom(weights, "a.caffemodel");
  const Blob& wa = *a.layer_by_name("ip2")->blobs()[0];
  const Blob& wb = *b.layer_by_name("ip2")->blobs()[0];
  for (size_t i = 0; i < wa.count(); ++i) EXPECT_EQ(wa.cpu_data<float>()[i], wb.cpu_data<float>()[i]);
  // Wrong shapes in the file name the layer and both shapes.
  weights.mutable_layer(1)->mutable_blobs(0)->mutable_shape()->set_dim(0, 6);
  try {
    b.CopyTrainedLayersFrom(weights, "a.caffemodel");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("a.caffemodel: layer 'ip1'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace cortado

namespace cortado {
namespace {

// A layer may add ParamSpecs in LayerSetUp (BatchNorm freezes its running
// statistics with lr_mult 0, as in Caffe); the Net must honour them.
TEST(Net, LayerProvidedParamSpecsFreezeStatistics) {
  NetParameter p = parse(R"(
    layer { name: "x" type: "DummyData" top: "x" dummy_data_param { shape { dim: 4 dim: 3 } data_filler { type: "gaussian" } } }
    layer { name: "bn" type: "BatchNorm" bottom: "x" top: "y" batch_norm_param { scale_bias: true } }
    layer { name: "l" type: "Flatten" bottom: "y" top: "loss" loss_weight: 1 })");
  p.mutable_state()->set_phase(TRAIN);
  Net net(p);
  ASSERT_EQ(net.learnable_params().size(), 5u);  // mean, variance, factor, scale, bias
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(net.params_lr()[i], 0.f) << i;
    EXPECT_EQ(net.params_weight_decay()[i], 0.f) << i;
    EXPECT_FALSE(net.layer_by_name("bn")->param_propagate_down(i)) << i;
  }
  EXPECT_EQ(net.params_lr()[3], 1.f);
  EXPECT_TRUE(net.layer_by_name("bn")->param_propagate_down(3));
}

}  // namespace
}  // namespace cortado
