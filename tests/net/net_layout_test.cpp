// The Net's layout plan (net_layout.hpp): which blobs become channels last,
// where the conversions go, and that an NHWC net computes what the NCHW net
// computes (on the CPU in every type pair; on a GPU in 16 bits, with cuDNN's
// NHWC convolutions).
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "cortado/context.hpp"
#include "cortado/layers/batch_norm_layer.hpp"
#include "cortado/layers/cudnn_convolution_layer.hpp"
#include "cortado/net/net_engines.hpp"
#include "cortado/net/net.hpp"
#include "cortado/net/net_layout.hpp"
#include "model_files.hpp"
#include "cortado/util/cuda.hpp"
#include "cortado/data/data_transformer.hpp"
#include "cortado/io/proto_io.hpp"
#include "cortado/util/rng.hpp"
#include "datum_db.hpp"
#include "test_util.hpp"

namespace cortado {
namespace {

// `p` with the net's field channels_last set to `mode`.
NetParameter Laid(NetParameter p, NetParameter::ChannelsLast mode) {
  p.set_channels_last(mode);
  return p;
}

// A residual block (its BatchNorm, the residual add and the ReLU one fused
// chain on a GPU), an LRN (NCHW only) between two groups, a max pooling,
// an out-of-place BatchNorm, a global average pooling and a classifier: two
// NHWC groups, four conversions.
const char* kNet = R"(
  layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 2 dim: 3 dim: 6 dim: 6 } } }
  layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
    convolution_param { num_output: 4 kernel_size: 3 pad: 1 weight_filler { type: "gaussian" std: 0.3 }
                        bias_filler { type: "uniform" min: -0.2 max: 0.2 } } }
  layer { name: "bn1" type: "BatchNorm" bottom: "conv1" top: "conv1" }
  layer { name: "scale1" type: "Scale" bottom: "conv1" top: "conv1"
    scale_param { bias_term: true filler { type: "uniform" min: 0.5 max: 1.5 } } }
  layer { name: "relu1" type: "ReLU" bottom: "conv1" top: "conv1" }
  layer { name: "conv2a" type: "Convolution" bottom: "conv1" top: "conv2a"
    convolution_param { num_output: 4 kernel_size: 3 pad: 1 weight_filler { type: "gaussian" std: 0.3 } } }
  layer { name: "relu2a" type: "ReLU" bottom: "conv2a" top: "relu2a" }
  layer { name: "conv2b" type: "Convolution" bottom: "relu2a" top: "conv2b"
    convolution_param { num_output: 4 kernel_size: 1 bias_term: false weight_filler { type: "gaussian" std: 0.3 } } }
  layer { name: "bias2b" type: "Bias" bottom: "conv2b" top: "conv2b"
    bias_param { filler { type: "uniform" min: -0.3 max: 0.3 } } }
  layer { name: "bn2b" type: "BatchNorm" bottom: "conv2b" top: "conv2b" batch_norm_param { scale_bias: true } }
  layer { name: "sum2" type: "Eltwise" bottom: "conv1" bottom: "conv2b" top: "sum2" }
  layer { name: "relu2" type: "ReLU" bottom: "sum2" top: "sum2" }
  layer { name: "lrn2" type: "LRN" bottom: "sum2" top: "lrn2" lrn_param { local_size: 3 } }
  layer { name: "pool2" type: "Pooling" bottom: "lrn2" top: "pool2"
    pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
  layer { name: "conv3" type: "Convolution" bottom: "pool2" top: "conv3"
    convolution_param { num_output: 5 kernel_size: 3 pad: 1 stride: 1 weight_filler { type: "gaussian" std: 0.3 } } }
  layer { name: "bn3" type: "BatchNorm" bottom: "conv3" top: "bn3" }
  layer { name: "pool3" type: "Pooling" bottom: "bn3" top: "pool3" pooling_param { pool: AVE global_pooling: true } }
  layer { name: "ip" type: "InnerProduct" bottom: "pool3" top: "out"
    inner_product_param { num_output: 3 weight_filler { type: "gaussian" std: 0.3 } } })";

template <typename Ftype, typename Btype>
NetParameter MakeNet(const std::string& text) {
  NetParameter p;
  ParseTextProto(text, "net.prototxt", &p);
  p.set_default_forward_type(type_of<Ftype>());
  p.set_default_backward_type(type_of<Btype>());
  p.set_force_backward(true);
  p.mutable_state()->set_phase(TRAIN);
  return p;
}

// What Net::Prepare hands the plan: typed layers with their splits.
NetParameter Prepared(NetParameter p) {
  for (LayerParameter& lp : *p.mutable_layer()) {
    if (!lp.has_forward_type()) lp.set_forward_type(p.default_forward_type());
    if (!lp.has_backward_type()) lp.set_backward_type(p.default_backward_type());
  }
  std::vector<int> origin;
  return InsertSplits(p, &origin);
}

// The LayoutConvert layers of a built net.
int Conversions(const Net& net) {
  int n = 0;
  for (const auto& l : net.layers()) n += std::string(l->type()) == "LayoutConvert";
  return n;
}

int CountType(const NetParameter& p, const std::string& type) {
  int n = 0;
  for (const LayerParameter& lp : p.layer()) n += lp.type() == type;
  return n;
}

const LayerParameter* LayerNamed(const NetParameter& p, const std::string& name) {
  for (const LayerParameter& lp : p.layer())
    if (lp.name() == name) return &lp;
  return nullptr;
}

TEST(NetLayout, PlansGroupsAndConversions) {
  NetParameter p = Prepared(MakeNet<float16, float16>(kNet));
  const int layers = p.layer_size();
  std::vector<int> origin;
  const LayoutPlan plan = PlanLayouts(&p, true, &origin);
  EXPECT_EQ(plan.groups, 2);
  EXPECT_EQ(plan.conversions, 4) << p.DebugString();
  EXPECT_EQ(CountType(p, "LayoutConvert"), 4);
  EXPECT_EQ(p.layer_size(), layers + 4);
  ASSERT_EQ(origin.size(), static_cast<size_t>(p.layer_size()));
  // The Input keeps "data" NCHW (a caller fills it); conv1 reads its NHWC copy.
  EXPECT_FALSE(plan.nhwc.count("data"));
  EXPECT_TRUE(plan.nhwc.count("data/nhwc"));
  EXPECT_EQ(LayerNamed(p, "conv1")->bottom(0), "data/nhwc");
  for (const char* b : {"conv1", "conv2a", "relu2a", "conv2b", "sum2", "lrn2/nhwc", "pool2", "conv3", "bn3", "pool3"})
    EXPECT_TRUE(plan.nhwc.count(b)) << b;
  // The LRN and the classifier read NCHW copies; the LRN's top is NCHW and
  // the second group reads its NHWC copy.
  EXPECT_EQ(LayerNamed(p, "lrn2")->bottom(0), "sum2/nchw");
  EXPECT_EQ(LayerNamed(p, "pool2")->bottom(0), "lrn2/nhwc");
  EXPECT_EQ(LayerNamed(p, "ip")->bottom(0), "pool3/nchw");
  for (const char* b : {"lrn2", "out", "sum2/nchw", "pool3/nchw"}) EXPECT_FALSE(plan.nhwc.count(b)) << b;
  // A conversion sits right before its consumer, or right after its producer.
  for (int i = 0; i < p.layer_size(); ++i) {
    const LayerParameter& lp = p.layer(i);
    if (lp.type() != "LayoutConvert") continue;
    EXPECT_EQ(lp.forward_type(), FLOAT16);
    const bool before = i + 1 < p.layer_size() && p.layer(i + 1).bottom(0) == lp.top(0);
    const bool after = i > 0 && p.layer(i - 1).top(0) == lp.bottom(0);
    EXPECT_TRUE(before || after) << lp.name();
  }
  EXPECT_EQ(LayoutPlanSummary(plan), str_cat(plan.nhwc.size(), " blobs NHWC in 2 groups, 4 layout conversions"));
}

TEST(NetLayout, LeavesNetsWithoutAGainAlone) {
  const auto unplanned = [](const NetParameter& net, bool half_only, const std::string& why) {
    NetParameter p = Prepared(net);
    const std::string before = p.DebugString();
    const LayoutPlan plan = PlanLayouts(&p, half_only);
    EXPECT_EQ(plan.groups, 0) << why;
    EXPECT_TRUE(plan.nhwc.empty()) << why;
    EXPECT_EQ(p.DebugString(), before) << why;
  };
  // 16-bit layers only (the GPU's default): an FP32 net has no anchor.
  unplanned(MakeNet<float, float>(kNet), true, "FP32 layers with half_only");
  // Caffe's im2col engine gains nothing from NHWC: no anchor.
  std::string caffe = kNet;
  for (size_t at = 0; (at = caffe.find("convolution_param {", at)) != std::string::npos; at += 10)
    caffe.insert(at + 19, " engine: CAFFE");
  unplanned(MakeNet<float16, float16>(caffe), true, "the CAFFE engine");
  // No convolution: a BatchNorm alone is capable, not an anchor.
  unplanned(MakeNet<float16, float16>(R"(
    layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 2 dim: 3 dim: 4 dim: 4 } } }
    layer { name: "bn" type: "BatchNorm" bottom: "data" top: "bn" }
    layer { name: "ip" type: "InnerProduct" bottom: "bn" top: "out" inner_product_param { num_output: 2 } })"),
            true, "no convolution");
}

TEST(NetLayout, OutputsStayNchwAndInPlaceLayersComputeOnACopy) {
  // The second group's blob "conv3" is an output of the net: what a caller
  // reads stays NCHW. The first group is planned as before.
  const std::string head(kNet, std::string(kNet).find("  layer { name: \"bn3\""));
  NetParameter p = Prepared(MakeNet<float16, float16>(head));
  LayoutPlan plan = PlanLayouts(&p, true);
  EXPECT_EQ(plan.groups, 1);
  EXPECT_FALSE(plan.nhwc.count("conv3"));
  EXPECT_FALSE(plan.nhwc.count("pool2"));
  EXPECT_TRUE(plan.nhwc.count("conv2a"));
  EXPECT_EQ(plan.conversions, 2);  // after the Input, before lrn2
  // An NCHW-only layer in place on a blob of the group (Dropout on conv3)
  // computes in place on an NCHW copy, and the group reads an NHWC copy of
  // its result.
  std::string text = kNet;
  const std::string bn3 = "  layer { name: \"bn3\"";
  text.insert(text.find(bn3), "  layer { name: \"drop\" type: \"Dropout\" bottom: \"conv3\" top: \"conv3\" }\n");
  NetParameter q = Prepared(MakeNet<float16, float16>(text));
  plan = PlanLayouts(&q, true);
  EXPECT_EQ(plan.groups, 2);
  EXPECT_EQ(plan.conversions, 6);  // the four of kNet, and around the Dropout
  EXPECT_TRUE(plan.nhwc.count("conv3"));
  EXPECT_EQ(LayerNamed(q, "drop")->bottom(0), "conv3/nchw");
  EXPECT_EQ(LayerNamed(q, "drop")->top(0), "conv3/nchw");
  EXPECT_FALSE(plan.nhwc.count("conv3/nchw"));
  EXPECT_EQ(LayerNamed(q, "bn3")->bottom(0), "conv3/nhwc");
  EXPECT_TRUE(plan.nhwc.count("conv3/nhwc"));
}

// ResNet-50's two nets (synthetic stage, fp16): one group with every convolution,
// BatchNorm and pooling, and the DummyData's batch (a constant filler: a
// source); one conversion, before fc1000.
TEST(NetLayout, ResNet50IsOneGroup) {
  for (const char* m : {"resnet50", "resnet50_nvcaffe"}) {
    NetParameter r = test::SyntheticModelNet(m, Precision::kFp16);
    r.mutable_state()->set_phase(TRAIN);
    NetParameter p = Prepared(Net::FilterNet(r));
    const LayoutPlan plan = PlanLayouts(&p, true);
    EXPECT_EQ(plan.groups, 1) << m;
    EXPECT_EQ(plan.conversions, 1) << m;
    EXPECT_TRUE(plan.nhwc.count("data")) << m;
    EXPECT_FALSE(plan.nhwc.count("label")) << m;
    int convolutions = 0;
    for (const LayerParameter& lp : p.layer()) {
      if (lp.type() != "Convolution" && lp.type() != "BatchNorm" && lp.type() != "Pooling") continue;
      convolutions += lp.type() == "Convolution";
      for (const auto* names : {&lp.bottom(), &lp.top()})
        for (const std::string& b : *names) EXPECT_TRUE(plan.nhwc.count(b)) << m << ": " << lp.name() << " " << b;
    }
    EXPECT_EQ(convolutions, 53) << m;
  }
}

// A data layer (a source) writes its batch in the layout of its readers'
// group: no conversion after it; its labels stay NCHW. A DummyData with a
// random filler is not a source (its draws would land elsewhere).
const char* kDataNet = R"(
  layer { name: "data" type: "Data" top: "data" top: "label"
    data_param { source: "DB" batch_size: 4 }
    transform_param { crop_size: 5 mirror: true mean_value: 10 mean_value: 20 mean_value: 30 scale: 0.02 } }
  layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
    convolution_param { num_output: 4 kernel_size: 3 pad: 1 weight_filler { type: "gaussian" std: 0.3 } } }
  layer { name: "bn1" type: "BatchNorm" bottom: "conv1" top: "conv1" }
  layer { name: "relu1" type: "ReLU" bottom: "conv1" top: "conv1" }
  layer { name: "pool1" type: "Pooling" bottom: "conv1" top: "pool1"
    pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
  layer { name: "ip" type: "InnerProduct" bottom: "pool1" top: "ip"
    inner_product_param { num_output: 3 weight_filler { type: "gaussian" std: 0.3 } } }
  layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" })";

TEST(NetLayout, DataLayersWriteTheGroupsLayout) {
  NetParameter p = Prepared(MakeNet<float16, float16>(kDataNet));
  LayoutPlan plan = PlanLayouts(&p, true);
  EXPECT_EQ(plan.groups, 1);
  EXPECT_EQ(plan.conversions, 1) << p.DebugString();  // before the classifier only
  EXPECT_TRUE(plan.nhwc.count("data"));
  EXPECT_FALSE(plan.nhwc.count("label"));
  EXPECT_EQ(LayerNamed(p, "conv1")->bottom(0), "data");
  EXPECT_EQ(LayerNamed(p, "loss")->bottom(1), "label");
  // A second reader that needs NCHW gets a conversion of its own.
  std::string two = kDataNet;
  two.insert(two.find("  layer { name: \"loss\""),
             "  layer { name: \"lrn\" type: \"LRN\" bottom: \"data\" top: \"lrn\" }\n"
             "  layer { name: \"silence\" type: \"Silence\" bottom: \"lrn\" }\n");
  NetParameter q = Prepared(MakeNet<float16, float16>(two));
  plan = PlanLayouts(&q, true);
  EXPECT_TRUE(plan.nhwc.count("data"));
  EXPECT_EQ(plan.conversions, 2) << q.DebugString();
  const std::string lrn_reads = LayerNamed(q, "lrn")->bottom(0);  // the NCHW copy of data's split
  EXPECT_EQ(lrn_reads.substr(lrn_reads.size() - 5), "/nchw") << lrn_reads;
  // DummyData: a source with a constant filler (the default) and with a
  // gaussian one, which it draws in NCHW order and moves (CpuResNet50MatchesNchw
  // checks the values through the synthetic stage's gaussian images).
  std::string dummy = kDataNet;
  const size_t from = dummy.find("layer { name: \"data\""), to = dummy.find("  layer { name: \"conv1\"");
  dummy.replace(from, to - from, R"(layer { name: "data" type: "DummyData" top: "data" top: "label"
    dummy_data_param { shape { dim: 4 dim: 3 dim: 5 dim: 5 } shape { dim: 4 } FILLER } }
)");
  for (const bool random : {false, true}) {
    std::string text = dummy;
    text.replace(text.find("FILLER"), 6, random ? "data_filler { type: \"gaussian\" }" : "");
    NetParameter d = Prepared(MakeNet<float16, float16>(text));
    plan = PlanLayouts(&d, true);
    EXPECT_EQ(plan.nhwc.count("data"), 1u) << random;
    EXPECT_EQ(plan.nhwc.count("data/nhwc"), 0u) << random;
    EXPECT_EQ(plan.conversions, 1) << random;
  }
}

// Transform channels last writes Transform's values at (h, w, c).
TEST(NetLayout, TransformChannelsLastMovesTransformsValues) {
  TransformationParameter tp;
  tp.set_crop_size(5);
  tp.set_mirror(true);
  for (float v : {10.f, 20.f, 30.f}) tp.add_mean_value(v);
  tp.set_scale(0.5f);
  const DataTransformer t(tp, TRAIN, "data", "Data");
  Datum d;
  d.set_channels(3);
  d.set_height(7);
  d.set_width(9);
  std::string pixels;
  for (int k = 0; k < 3 * 7 * 9; ++k) pixels.push_back(static_cast<char>((k * 37 + 11) % 251));
  d.set_data(pixels);
  const std::vector<int> shape{3, 5, 5};
  for (uint32_t seed = 1; seed <= 8; ++seed) {  // several crops and both flips
    std::mt19937 g1(seed), g2(seed);
    std::vector<float> planes(75), last(75);
    t.Transform(d, planes.data(), &g1, shape);
    t.Transform(d, last.data(), &g2, shape, true);
    for (size_t c = 0; c < 3; ++c)
      for (size_t i = 0; i < 25; ++i) ASSERT_EQ(last[i * 3 + c], planes[c * 25 + i]);
    EXPECT_EQ(g1(), g2()) << "the same draws";
  }
}

// ---- the values ------------------------------------------------------------------

template <typename P>
class NetLayoutTest : public ::testing::Test {};
TYPED_TEST_SUITE(NetLayoutTest, test::AllPairs, test::PairNames);

struct NetPair {
  std::unique_ptr<Net> nhwc, nchw;
};

NetPair Build(const NetParameter& p, NetParameter::ChannelsLast mode, std::shared_ptr<const Context> ctx = nullptr) {
  NetPair n;
  n.nhwc = std::make_unique<Net>(Laid(p, mode), SourceInfo(), ctx);
  n.nchw = std::make_unique<Net>(Laid(p, NetParameter::OFF), SourceInfo(), ctx);
  EXPECT_EQ(n.nhwc->params().size(), n.nchw->params().size());
  for (size_t i = 0; i < n.nhwc->params().size(); ++i)
    test::SetData(n.nchw->params()[i].get(), test::GetData(*n.nhwc->params()[i]));
  return n;
}

// Round r's forward and backward: inputs and output diffs from r alone.
template <typename Btype>
void Step(Net* net, int r) {
  set_random_seed(1000 + r);
  for (size_t i = 0; i < net->input_blobs().size(); ++i)
    test::FillUniform(net->input_blobs()[i], -1.5, 1.5, 5 + 17 * static_cast<uint32_t>(r + i));
  net->ClearParamDiffs();
  net->Forward();
  for (size_t o = 0; o < net->output_blobs().size(); ++o) {
    Blob* top = net->output_blobs()[o];
    if (net->blob_loss_weight(net->output_blob_indices()[o]) != 0) continue;
    test::SetDiff(top, test::RandomVector(top->count(), 97 + static_cast<uint32_t>(o + 3 * r)), type_of<Btype>());
  }
  net->Backward();
}

// Forward and backward on both nets with the same inputs and output diffs.
template <typename Btype>
void RunBoth(NetPair* n, int rounds) {
  for (int r = 0; r < rounds; ++r)
    for (Net* net : {n->nhwc.get(), n->nchw.get()}) Step<Btype>(net, r);
}

// |a - b| <= tol * max(1, |b|) for each value.
void ExpectClose(const std::vector<double>& a, const std::vector<double>& b, double tol, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  int failures = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::fabs(a[i] - b[i]) <= tol * std::max(1.0, std::fabs(b[i]))) continue;
    if (++failures <= 5) ADD_FAILURE() << what << " index " << i << ": " << a[i] << " against " << b[i];
  }
}

// a's output, input gradient and parameter gradients (and, with
// param_values, its parameters) against b's, within tol; `what` prefixes
// the messages.
void ExpectNetsClose(const Net& a, const Net& b, double tol, const std::string& what, bool param_values = false) {
  ExpectClose(test::GetData(*a.output_blobs()[0]), test::GetData(*b.output_blobs()[0]), tol, what + "output");
  ExpectClose(test::GetDiff(*a.input_blobs()[0]), test::GetDiff(*b.input_blobs()[0]), tol, what + "input diff");
  for (size_t i = 0; i < a.params().size(); ++i) {
    if (param_values)
      ExpectClose(test::GetData(*a.params()[i]), test::GetData(*b.params()[i]), tol,
                  what + "param " + a.param_display_names()[i]);
    ExpectClose(test::GetDiff(*a.params()[i]), test::GetDiff(*b.params()[i]), tol,
                what + "param diff " + a.param_display_names()[i]);
  }
}

// On the CPU the NHWC net computes what the NCHW net computes, to the bit:
// Convolution, BatchNorm, Scale, Bias and Pooling run their CPU code on NCHW
// stand-ins, ReLU, Eltwise and Split work value by value, and the
// conversions move values without arithmetic. Outputs, the input's
// gradient, the parameters (BatchNorm's running statistics) and their
// gradients, over two rounds.
TYPED_TEST(NetLayoutTest, CpuNhwcNetMatchesNchw) {
  using F = typename TypeParam::Ftype;
  using B = typename TypeParam::Btype;
  NetPair n = Build(MakeNet<F, B>(kNet), NetParameter::ALL);
  const Net& a = *n.nhwc;
  EXPECT_EQ(a.blob_by_name("conv1")->layout(), Layout::NHWC);
  EXPECT_EQ(a.blob_by_name("bn3")->layout(), Layout::NHWC);
  EXPECT_EQ(a.blob_by_name("pool2")->layout(), Layout::NHWC);
  EXPECT_EQ(a.blob_by_name("data")->layout(), Layout::NCHW);
  EXPECT_EQ(a.blob_by_name("lrn2")->layout(), Layout::NCHW);
  EXPECT_EQ(a.blob_by_name("out")->layout(), Layout::NCHW);
  EXPECT_EQ(n.nchw->blob_by_name("conv1")->layout(), Layout::NCHW);
  EXPECT_EQ(Conversions(a), 4);

  RunBoth<B>(&n, 2);
  const Net& b = *n.nchw;

  EXPECT_EQ(test::GetData(*a.output_blobs()[0]), test::GetData(*b.output_blobs()[0]));
  EXPECT_EQ(test::GetDiff(*a.input_blobs()[0]), test::GetDiff(*b.input_blobs()[0]));
  for (size_t i = 0; i < a.params().size(); ++i) {
    EXPECT_EQ(test::GetData(*a.params()[i]), test::GetData(*b.params()[i])) << a.param_display_names()[i];
    EXPECT_EQ(test::GetDiff(*a.params()[i]), test::GetDiff(*b.params()[i])) << a.param_display_names()[i];
  }
}

// A Dropout in place on an NHWC blob draws its mask over the NCHW copy, in
// the NCHW net's order: the same bits.
TYPED_TEST(NetLayoutTest, CpuInPlaceDropoutComputesOnAnNchwCopy) {
  using F = typename TypeParam::Ftype;
  using B = typename TypeParam::Btype;
  std::string text = kNet;
  const std::string bn3 = "  layer { name: \"bn3\"";
  text.insert(text.find(bn3), "  layer { name: \"drop\" type: \"Dropout\" bottom: \"conv3\" top: \"conv3\" }\n");
  NetPair n = Build(MakeNet<F, B>(text), NetParameter::ALL);
  EXPECT_EQ(n.nhwc->blob_by_name("conv3/nchw")->layout(), Layout::NCHW);
  EXPECT_EQ(n.nhwc->blob_by_name("conv3/nhwc")->layout(), Layout::NHWC);
  RunBoth<B>(&n, 2);
  EXPECT_EQ(test::GetData(*n.nhwc->output_blobs()[0]), test::GetData(*n.nchw->output_blobs()[0]));
  EXPECT_EQ(test::GetDiff(*n.nhwc->input_blobs()[0]), test::GetDiff(*n.nchw->input_blobs()[0]));
}

// Concat and Slice along the channels keep a group NHWC (runs of channels
// per pixel): an inception-like branch and a split, the same bits as NCHW.
TYPED_TEST(NetLayoutTest, CpuConcatAndSliceStayNhwc) {
  using F = typename TypeParam::Ftype;
  using B = typename TypeParam::Btype;
  const char* net = R"(
    layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 2 dim: 3 dim: 5 dim: 5 } } }
    layer { name: "conv_a" type: "Convolution" bottom: "data" top: "a"
      convolution_param { num_output: 4 kernel_size: 1 weight_filler { type: "gaussian" std: 0.3 } } }
    layer { name: "conv_b" type: "Convolution" bottom: "data" top: "b"
      convolution_param { num_output: 3 kernel_size: 3 pad: 1 weight_filler { type: "gaussian" std: 0.3 } } }
    layer { name: "cat" type: "Concat" bottom: "a" bottom: "b" top: "cat" }
    layer { name: "conv_c" type: "Convolution" bottom: "cat" top: "c"
      convolution_param { num_output: 6 kernel_size: 1 weight_filler { type: "gaussian" std: 0.3 } } }
    layer { name: "slice" type: "Slice" bottom: "c" top: "s1" top: "s2" slice_param { slice_point: 2 } }
    layer { name: "conv_d" type: "Convolution" bottom: "s1" top: "d"
      convolution_param { num_output: 3 kernel_size: 1 weight_filler { type: "gaussian" std: 0.3 } } }
    layer { name: "conv_e" type: "Convolution" bottom: "s2" top: "e"
      convolution_param { num_output: 3 kernel_size: 1 weight_filler { type: "gaussian" std: 0.3 } } }
    layer { name: "sum" type: "Eltwise" bottom: "d" bottom: "e" top: "sum" }
    layer { name: "pool" type: "Pooling" bottom: "sum" top: "pool" pooling_param { pool: AVE global_pooling: true } }
    layer { name: "ip" type: "InnerProduct" bottom: "pool" top: "out"
      inner_product_param { num_output: 2 weight_filler { type: "gaussian" std: 0.3 } } })";
  NetPair n = Build(MakeNet<F, B>(net), NetParameter::ALL);
  const Net& a = *n.nhwc;
  for (const char* blob : {"cat", "s1", "s2", "sum"}) EXPECT_EQ(a.blob_by_name(blob)->layout(), Layout::NHWC) << blob;
  EXPECT_EQ(Conversions(a), 2);  // after the Input, before the classifier
  RunBoth<B>(&n, 2);
  const Net& b = *n.nchw;
  EXPECT_EQ(test::GetData(*a.output_blobs()[0]), test::GetData(*b.output_blobs()[0]));
  EXPECT_EQ(test::GetDiff(*a.input_blobs()[0]), test::GetDiff(*b.input_blobs()[0]));
  for (size_t i = 0; i < a.params().size(); ++i)
    EXPECT_EQ(test::GetDiff(*a.params()[i]), test::GetDiff(*b.params()[i])) << a.param_display_names()[i];
}

// A Data layer reading a real LMDB writes its batch NHWC: the NCHW net's
// batch, moved (the same records, crops and flips: the layer's seed follows
// the process seed), and then the same loss and gradients to the bit.
TYPED_TEST(NetLayoutTest, CpuDataLayerWritesNhwcBatches) {
  using F = typename TypeParam::Ftype;
  using B = typename TypeParam::Btype;
  const std::filesystem::path db =
      std::filesystem::path(::testing::TempDir()) /
      str_cat("cortado_layout_db_", ::getpid(), "_", static_cast<int>(type_of<F>()), "_",
              static_cast<int>(type_of<B>()));
  std::filesystem::remove_all(db);
  test::WriteRawDatumDb(
      db.string(), 10, 3, 7, 6, [](int i, int k) { return static_cast<uint8_t>((i * 53 + k * 29) % 256); },
      [](int i) { return i % 3; });
  std::string text = kDataNet;
  text.replace(text.find("DB"), 2, db.string());
  const NetParameter p = MakeNet<F, B>(text);
  std::unique_ptr<Net> nets[2];
  for (int k = 0; k < 2; ++k) {
    set_random_seed(77);
    nets[k] = std::make_unique<Net>(Laid(p, k == 0 ? NetParameter::ALL : NetParameter::OFF), SourceInfo(), nullptr);
  }
  Net& a = *nets[0];
  Net& b = *nets[1];
  EXPECT_EQ(a.blob_by_name("data")->layout(), Layout::NHWC);
  EXPECT_EQ(a.blob_by_name("label")->layout(), Layout::NCHW);
  EXPECT_EQ(b.blob_by_name("data")->layout(), Layout::NCHW);
  EXPECT_EQ(Conversions(a), 1);
  for (int round = 0; round < 3; ++round) {  // past the end of the database
    for (Net* net : {&a, &b}) {
      net->ClearParamDiffs();
      net->Forward();
      net->Backward();
    }
    const std::vector<double> nhwc = test::GetData(*a.blob_by_name("data"));
    const std::vector<double> nchw = test::GetData(*b.blob_by_name("data"));
    ASSERT_EQ(nhwc.size(), nchw.size());
    const size_t pixels = 25, image = 75;
    for (size_t n = 0; n < 4; ++n)
      for (size_t c = 0; c < 3; ++c)
        for (size_t i = 0; i < pixels; ++i)
          ASSERT_EQ(nhwc[n * image + i * 3 + c], nchw[n * image + c * pixels + i]) << round << " " << n << " " << c;
    EXPECT_EQ(test::GetData(*a.blob_by_name("label")), test::GetData(*b.blob_by_name("label"))) << round;
    EXPECT_EQ(test::GetData(*a.blob_by_name("loss")), test::GetData(*b.blob_by_name("loss"))) << round;
    for (size_t i = 0; i < a.params().size(); ++i)
      EXPECT_EQ(test::GetDiff(*a.params()[i]), test::GetDiff(*b.params()[i])) << a.param_display_names()[i];
  }
  nets[0].reset();
  nets[1].reset();
  std::filesystem::remove_all(db);
}

// ResNet-50's NVCaffe file at batch 1 in FP32 on the CPU: the loss and
// every weight gradient are the NCHW net's bits.
TEST(NetLayout, CpuResNet50MatchesNchw) {
  NetParameter p = test::SyntheticModelNet("resnet50_nvcaffe", Precision::kFp32);
  SetBatchSize(&p, 1);
  p.mutable_state()->set_phase(TRAIN);
  NetPair n = Build(p, NetParameter::ALL);
  RunBoth<float>(&n, 1);
  const Net& a = *n.nhwc;
  const Net& b = *n.nchw;

  EXPECT_EQ(Conversions(a), 1);
  EXPECT_EQ(a.blob_by_name("data")->layout(), Layout::NHWC);
  EXPECT_EQ(a.blob_by_name("res5c")->layout(), Layout::NHWC);
  ASSERT_EQ(a.output_blobs().size(), b.output_blobs().size());
  for (size_t o = 0; o < a.output_blobs().size(); ++o)
    EXPECT_EQ(test::GetData(*a.output_blobs()[o]), test::GetData(*b.output_blobs()[o])) << "output " << o;
  for (size_t i = 0; i < a.params().size(); ++i)
    EXPECT_EQ(test::GetDiff(*a.params()[i]), test::GetDiff(*b.params()[i])) << a.param_display_names()[i];
}

// ---- on a GPU ----------------------------------------------------------------------

// kNet with 40 channels where it has 4: the channels-last kernels' paths of
// 8 channels a thread, and row reductions over more than one warp of
// channels with a tail (40 = 32 + 8). Within a wider tolerance: longer sums.
std::string Wide(std::string text) {
  for (size_t at = 0; (at = text.find("num_output: 4 ", at)) != std::string::npos; at += 15)
    text.replace(at, 14, "num_output: 40 ");
  return text;
}
double GpuTolerance(bool wide) { return (wide ? 96 : 48) * type_epsilon<float16>(); }

// FP16 on the GPU (the default mode's nets): cuDNN's NHWC convolutions, the
// NHWC BatchNorm reductions and the conversions against the same net in
// NCHW on the same GPU. Other algorithms sum in other orders: within a few
// FP16 roundings. Also with conv2a on Caffe's engine (NCHW stand-ins on the
// device) in the group that conv1 anchors.
TEST(NetLayout, GpuNhwcNetMatchesNchw) {
  if (!test::HaveDevice()) GTEST_SKIP() << "no CUDA device";
  for (const int variant : {0, 1, 2}) {
    const bool caffe_engine = variant == 1, wide = variant == 2;
    test::ActiveGpuContext gpu;
    std::string text = wide ? Wide(kNet) : kNet;
    if (caffe_engine) {
      const size_t at = text.find("convolution_param {", text.find("name: \"conv2a\""));
      text.insert(at + 19, " engine: CAFFE");
    }
    NetPair n = Build(MakeNet<float16, float16>(text), NetParameter::GPU_16BIT, gpu.ctx);
    EXPECT_EQ(n.nhwc->blob_by_name("conv1")->layout(), Layout::NHWC) << variant;
    RunBoth<float16>(&n, 2);
    const Net& a = *n.nhwc;
    const Net& b = *n.nchw;
    const double tol = GpuTolerance(wide);
    ExpectNetsClose(a, b, tol, "");
  }
}

// cuDNN's graph API (cudnn_convolution_layer.hpp, the net's cudnn.api:
// GRAPH) against the legacy calls on the same GPU: FP16 in NCHW and in NHWC,
// FP32 in NCHW (FMA math in both): outputs, input gradients and weight
// gradients within a few roundings (other engines add in other orders).
TEST(NetLayout, GpuGraphApiMatchesLegacy) {
  if (!test::HaveDevice()) GTEST_SKIP() << "no CUDA device";
#ifdef CORTADO_USE_CUDA
  for (int variant = 0; variant < 4; ++variant) {
    const bool half = variant != 2, nhwc = variant == 1 || variant == 3, wide = variant == 3;
    const std::string what = half ? (nhwc ? (wide ? "FP16 NHWC 40 channels" : "FP16 NHWC") : "FP16 NCHW") : "FP32 NCHW";
    test::ActiveGpuContext gpu;
    const std::string text = wide ? Wide(kNet) : kNet;
    const NetParameter p =
        Laid(half ? MakeNet<float16, float16>(text) : MakeNet<float, float>(text),
             nhwc ? NetParameter::GPU_16BIT : NetParameter::OFF);
    NetParameter graph = p;
    graph.mutable_cudnn()->set_api(CuDNNParameter::GRAPH);
    NetPair n;  // nhwc: the graph API's net, nchw: the legacy one
    n.nhwc = std::make_unique<Net>(graph, SourceInfo(), gpu.ctx);
    n.nchw = std::make_unique<Net>(p, SourceInfo(), gpu.ctx);
    for (size_t i = 0; i < n.nhwc->params().size(); ++i)
      test::SetData(n.nchw->params()[i].get(), test::GetData(*n.nhwc->params()[i]));
    for (int r = 0; r < 2; ++r) {
      if (half) Step<float16>(n.nhwc.get(), r); else Step<float>(n.nhwc.get(), r);
      if (half) Step<float16>(n.nchw.get(), r); else Step<float>(n.nchw.get(), r);
    }
    const double tol = half ? GpuTolerance(wide) : 1e-4;
    const Net& a = *n.nhwc;
    const Net& b = *n.nchw;
    // Not the legacy calls against themselves: the graph net's convolutions
    // ran passes on graph plans (a shape without one falls back, with a
    // warning), the legacy net's none.
    auto graph_passes = [&](const Net& net) {
      int passes = 0;
      for (const auto& l : net.layers()) {
        if (half) {
          if (auto* c = dynamic_cast<const CuDNNConvolutionLayer<float16, float16>*>(l.get()))
            passes += c->graph_api_passes();
        } else if (auto* c = dynamic_cast<const CuDNNConvolutionLayer<float, float>*>(l.get())) {
          passes += c->graph_api_passes();
        }
      }
      return passes;
    };
    EXPECT_GT(graph_passes(a), 0) << what << ": no convolution pass ran on a graph plan";
    EXPECT_EQ(graph_passes(b), 0) << what;
    std::cout << what << ": " << graph_passes(a) << " convolution passes on graph plans\n";
    ExpectNetsClose(a, b, tol, what + " ");
  }
#endif
}

// cuDNN's fused NHWC BatchNorm (the net's cudnn.batch_norm) against the layer's own
// kernels in the same NHWC FP16 net on the same GPU: bn1 with its fused Scale
// and ReLU, bn2b with the residual add and ReLU (BN_ADD_ACTIVATION where the
// sum has memory of its own), bn3 alone. Outputs, gradients and the running statistics within
// a few FP16 roundings (cuDNN rounds once where the fused chain rounds as the
// unfused layers store).
TEST(NetLayout, GpuCudnnBatchNormMatchesOwnKernels) {
  if (!test::HaveDevice()) GTEST_SKIP() << "no CUDA device";
#ifdef CORTADO_USE_CUDA
  for (const bool wide : {false, true}) {
    test::ActiveGpuContext gpu;
    const std::string text = wide ? Wide(kNet) : kNet;
    const std::string what = wide ? "40 channels: " : "";
    NetPair n;  // nhwc: cuDNN's BatchNorm, nchw: the own kernels (both NHWC)
    const NetParameter p = Laid(MakeNet<float16, float16>(text), NetParameter::GPU_16BIT);
    NetParameter cudnn = p;
    cudnn.mutable_cudnn()->set_batch_norm(true);
    n.nhwc = std::make_unique<Net>(cudnn, SourceInfo(), gpu.ctx);
    n.nchw = std::make_unique<Net>(p, SourceInfo(), gpu.ctx);
    for (size_t i = 0; i < n.nhwc->params().size(); ++i)
      test::SetData(n.nchw->params()[i].get(), test::GetData(*n.nhwc->params()[i]));
    for (int r = 0; r < 2; ++r) {
      Step<float16>(n.nhwc.get(), r);
      Step<float16>(n.nchw.get(), r);
    }
    const Net& a = *n.nhwc;
    const Net& b = *n.nchw;
    // Not a comparison of the own kernels with themselves: at 40 channels
    // bn1 (made out of place by the net, with its Scale and ReLU) ran on
    // cuDNN; the other net's BatchNorms did not. Which others cuDNN took
    // (it may refuse 4 or 5 channels) is printed.
    auto ran = [](const Net& net, const char* name) {
      return dynamic_cast<const BatchNormLayer<float16, float16>&>(*net.layer_by_name(name)).cudnn_ran();
    };
    if (wide) EXPECT_TRUE(ran(a, "bn1")) << what << "cuDNN did not run bn1 (see the log's warning)";
    for (const char* name : {"bn1", "bn2b", "bn3"}) {
      EXPECT_FALSE(ran(b, name)) << what << name;
      std::cout << what << name << (ran(a, name) ? " ran on cuDNN\n" : " ran on the layer's kernels\n");
    }
    const double tol = GpuTolerance(wide);
    ExpectNetsClose(a, b, tol, what, /*param_values=*/true);
  }
#endif
}

// What `trainer time` reports of a net's engines (net_engines.hpp): on the
// CPU every BatchNorm is counted, none on cuDNN; channels-last blobs where
// the layout plan made them.
TEST(NetLayout, EnginesAreCounted) {
  for (const bool plan : {false, true}) {
    Net net(Laid(MakeNet<float16, float16>(kNet), plan ? NetParameter::ALL : NetParameter::OFF));
    Step<float16>(&net, 0);
    const EngineUse use = CountEngines(net);
    EXPECT_EQ(use.batch_norms, 3);
    EXPECT_EQ(use.batch_norm_cudnn, 0);
    EXPECT_EQ(use.batch_norm_cudnn_backward, 0);
    EXPECT_EQ(use.cudnn_convolutions, 0);
    if (plan) EXPECT_GT(use.nhwc_blobs, 0);
    else EXPECT_EQ(use.nhwc_blobs, 0);
    EXPECT_NE(EngineUseWords(use).find("bn_layers=3 bn_cudnn=0"), std::string::npos) << EngineUseWords(use);
  }
}

// A projection block as ResNet-50 has four (the shortcut a BatchNorm's
// output, the sum fused into branch2's chain, 40 channels), with cuDNN's
// BatchNorm asked for: both BatchNorms run cuDNN forward and backward, since
// the memory plans give the sum and the chain's input gradient memory of
// their own (the data plan would else compute the sum in the shortcut's
// memory, and the diff plan give the head's input gradient the sum's); the
// values match the own kernels' on a net built without the switch.
TEST(NetLayout, GpuCudnnBatchNormRunsAProjectionBlock) {
  if (!test::HaveDevice()) GTEST_SKIP() << "no CUDA device";
#ifdef CORTADO_USE_CUDA
  const char* block = R"(
    layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 4 dim: 8 dim: 6 dim: 6 } } }
    layer { name: "conv1" type: "Convolution" bottom: "data" top: "a"
      convolution_param { num_output: 40 kernel_size: 1 bias_term: false weight_filler { type: "gaussian" std: 0.3 } } }
    layer { name: "bn1" type: "BatchNorm" bottom: "a" top: "a" }
    layer { name: "scale1" type: "Scale" bottom: "a" top: "a"
      scale_param { bias_term: true filler { type: "uniform" min: 0.5 max: 1.5 } } }
    layer { name: "conv2" type: "Convolution" bottom: "data" top: "b"
      convolution_param { num_output: 40 kernel_size: 3 pad: 1 bias_term: false weight_filler { type: "gaussian" std: 0.2 } } }
    layer { name: "bn2" type: "BatchNorm" bottom: "b" top: "b" }
    layer { name: "scale2" type: "Scale" bottom: "b" top: "b"
      scale_param { bias_term: true filler { type: "uniform" min: 0.5 max: 1.5 } } }
    layer { name: "sum" type: "Eltwise" bottom: "a" bottom: "b" top: "c" }
    layer { name: "relu" type: "ReLU" bottom: "c" top: "c" }
    layer { name: "conv3" type: "Convolution" bottom: "c" top: "d"
      convolution_param { num_output: 8 kernel_size: 1 weight_filler { type: "gaussian" std: 0.3 } } })";
  test::ActiveGpuContext gpu;
  NetPair n;  // nhwc: cuDNN's BatchNorm, nchw: the own kernels (both NHWC)
  const NetParameter p = Laid(MakeNet<float16, float16>(block), NetParameter::GPU_16BIT);
  NetParameter cudnn = p;
  cudnn.mutable_cudnn()->set_batch_norm(true);
  n.nhwc = std::make_unique<Net>(cudnn, SourceInfo(), gpu.ctx);
  n.nchw = std::make_unique<Net>(p, SourceInfo(), gpu.ctx);
  for (size_t i = 0; i < n.nhwc->params().size(); ++i)
    test::SetData(n.nchw->params()[i].get(), test::GetData(*n.nhwc->params()[i]));
  const Net& a = *n.nhwc;
  const Net& b = *n.nchw;
  // The plans: the own kernels' net computes the sum in the shortcut and
  // gives bn2's input gradient the sum's buffer; the cuDNN net neither.
  EXPECT_NE(&a.blob_by_name("c")->data(), &a.blob_by_name("a")->data());
  EXPECT_EQ(&b.blob_by_name("c")->data(), &b.blob_by_name("a")->data());
  ASSERT_TRUE(a.blob_by_name("b/bn_input")) << "bn2 no longer reads a renamed bottom";
  EXPECT_NE(&a.blob_by_name("c")->diff(), &a.blob_by_name("b/bn_input")->diff());
  EXPECT_EQ(&b.blob_by_name("c")->diff(), &b.blob_by_name("b/bn_input")->diff());
  for (int r = 0; r < 2; ++r) {
    Step<float16>(n.nhwc.get(), r);
    Step<float16>(n.nchw.get(), r);
  }
  const EngineUse use = CountEngines(a);
  EXPECT_EQ(use.batch_norms, 2);
  EXPECT_EQ(use.batch_norm_cudnn, 2);
  EXPECT_EQ(use.batch_norm_cudnn_backward, 2);
  EXPECT_EQ(CountEngines(b).batch_norm_cudnn, 0);
  for (const char* name : {"bn1", "bn2"}) {
    const auto& bn = dynamic_cast<const BatchNormLayer<float16, float16>&>(*a.layer_by_name(name));
    EXPECT_TRUE(bn.cudnn_ran()) << name << ": cuDNN's forward did not run (see the log's warning)";
    EXPECT_TRUE(bn.cudnn_backward_ran()) << name << ": cuDNN's backward did not run (see the log's warning)";
    using Bn = BatchNormLayer<float16, float16>;
    EXPECT_FALSE(dynamic_cast<const Bn&>(*b.layer_by_name(name)).cudnn_ran()) << name;
  }
  const double tol = GpuTolerance(true);
  ExpectNetsClose(a, b, tol, "");
#endif
}

// cuDNN's graph-API plans are finalized with a handle and cached per
// Context: a new Context measures its own, even where its handle reuses a
// destroyed Context's address (the plans of the dead handle must not run on it).
TEST(NetLayout, GpuGraphPlansAreNotSharedByANewContext) {
  if (!test::HaveDevice()) GTEST_SKIP() << "no CUDA device";
#ifdef CORTADO_USE_CUDA
  NetParameter p = MakeNet<float16, float16>(Wide(kNet));
  p.mutable_cudnn()->set_api(CuDNNParameter::GRAPH);
  std::vector<size_t> measured;
  for (int round = 0; round < 2; ++round) {
    test::ActiveGpuContext gpu;  // a new Context (and cuDNN handle) each round
    Net net(p, SourceInfo(), gpu.ctx);
    const size_t before = cudnn_graph_plans_cached();
    Step<float16>(&net, 0);
    measured.push_back(cudnn_graph_plans_cached() - before);
  }
  EXPECT_GT(measured[0], 0u) << "no plan was measured";
  EXPECT_EQ(measured[1], measured[0]) << "the second Context reused plans of the first";
#endif
}

// Channel padding (the net's cudnn.pad_channels) against
// the unpadded NHWC net on the same GPU: conv1 reads kNet's 3 input
// channels (padded to 4 or 8), and with 8 the 4-channel convolutions are
// padded too; the input gradient comes back through the padded data
// gradient. FP16, and FP16 forward with FP32 backward (the bottom padded
// again in the backward type). Within a few FP16 roundings: other kernels.
TEST(NetLayout, GpuPaddedChannelsMatchUnpadded) {
  if (!test::HaveDevice()) GTEST_SKIP() << "no CUDA device";
#ifdef CORTADO_USE_CUDA
  for (const int multiple : {4, 8}) {
    for (const bool mixed : {false, true}) {
      const std::string what = "padded to " + std::to_string(multiple) + (mixed ? ", FP16/FP32: " : ": ");
      test::ActiveGpuContext gpu;
      // GPU_16BIT: 16-bit pairs only.
      const NetParameter p = Laid(mixed ? MakeNet<float16, float>(kNet) : MakeNet<float16, float16>(kNet),
                                  mixed ? NetParameter::ALL : NetParameter::GPU_16BIT);
      NetParameter padded_net = p;
      padded_net.mutable_cudnn()->set_pad_channels(multiple);
      NetPair n;  // nhwc: padded, nchw: not padded (both NHWC)
      n.nhwc = std::make_unique<Net>(padded_net, SourceInfo(), gpu.ctx);
      n.nchw = std::make_unique<Net>(p, SourceInfo(), gpu.ctx);
      ASSERT_EQ(n.nhwc->blob_by_name("conv1")->layout(), Layout::NHWC) << what;
      for (size_t i = 0; i < n.nhwc->params().size(); ++i)
        test::SetData(n.nchw->params()[i].get(), test::GetData(*n.nhwc->params()[i]));
      for (int r = 0; r < 2; ++r) {
        if (mixed) {
          Step<float>(n.nhwc.get(), r);
          Step<float>(n.nchw.get(), r);
        } else {
          Step<float16>(n.nhwc.get(), r);
          Step<float16>(n.nchw.get(), r);
        }
      }
      const Net& a = *n.nhwc;
      const Net& b = *n.nchw;
      // The padded net padded (the setting is each layer's from its set-up), the other did not.
      auto padded = [&](const Net& net, const char* layer) {
        const LayerBase* l = net.layer_by_name(layer);
        if (mixed) return dynamic_cast<const CuDNNConvolutionLayer<float16, float>&>(*l).padded_channels();
        return dynamic_cast<const CuDNNConvolutionLayer<float16, float16>&>(*l).padded_channels();
      };
      EXPECT_EQ(padded(a, "conv1"), multiple) << what;
      EXPECT_EQ(padded(a, "conv2a"), multiple == 8 ? 8 : 0) << what;
      EXPECT_EQ(padded(b, "conv1"), 0) << what;
      const double tol = GpuTolerance(false);
      ExpectNetsClose(a, b, tol, what);
    }
  }
#endif
}

}  // namespace
}  // namespace cortado
