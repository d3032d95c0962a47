// The Net's layer fusion (net_fusion.hpp, layers/layer_fusion.hpp): which
// chains it fuses and which it leaves, and that a fused net computes what the
// same net with fuse_layers: false computes, for every type pair: bit for bit
// on the CPU (forward, backward, a few SGD steps), within a few ulps on a GPU
// (fused kernels against the unfused layers' kernels; skipped without one).

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "cortado/io/proto_io.hpp"
#include "cortado/layers/layer_fusion.hpp"
#include "cortado/net/net.hpp"
#include "cortado/net/net_fusion.hpp"
#include "cortado/solvers/solver.hpp"
#include "cortado/util/rng.hpp"
#include "test_util.hpp"
#include "test_scopes.hpp"

namespace cortado {
namespace {

template <typename P>
class NetFusionTest : public ::testing::Test {};
TYPED_TEST_SUITE(NetFusionTest, test::AllPairs, test::PairNames);

// conv -> BatchNorm (scale_bias, in place) -> ReLU (in place), as NVCaffe's ResNet-50.
const char* kBnScaleBias = R"(
  layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 2 dim: 3 dim: 6 dim: 5 } } }
  layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
    convolution_param { num_output: 4 kernel_size: 3 pad: 1 weight_filler { type: "gaussian" std: 0.4 }
                        bias_filler { type: "uniform" min: -0.2 max: 0.2 } } }
  layer { name: "bn" type: "BatchNorm" bottom: "conv" top: "conv"
    batch_norm_param { scale_bias: true scale_filler { type: "uniform" min: 0.5 max: 1.5 }
                       bias_filler { type: "uniform" min: -0.5 max: 0.5 } } }
  layer { name: "relu" type: "ReLU" bottom: "conv" top: "conv" })";

// conv -> BatchNorm -> Scale (bias_term) -> ReLU, all in place, as BVLC's ResNet-50.
const char* kBnScale = R"(
  layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 2 dim: 3 dim: 6 dim: 5 } } }
  layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
    convolution_param { num_output: 4 kernel_size: 3 pad: 1 weight_filler { type: "gaussian" std: 0.4 }
                        bias_filler { type: "uniform" min: -0.2 max: 0.2 } } }
  layer { name: "bn" type: "BatchNorm" bottom: "conv" top: "conv" }
  layer { name: "scale" type: "Scale" bottom: "conv" top: "conv"
    scale_param { bias_term: true filler { type: "uniform" min: 0.5 max: 1.5 }
                  bias_filler { type: "uniform" min: -0.5 max: 0.5 } } }
  layer { name: "relu" type: "ReLU" bottom: "conv" top: "conv" })";

// x + 0.5 y -> Eltwise SUM -> ReLU (in place), the residual add.
const char* kEltwise = R"(
  layer { name: "x" type: "Input" top: "x" input_param { shape { dim: 2 dim: 3 dim: 4 dim: 5 } } }
  layer { name: "y" type: "Input" top: "y" input_param { shape { dim: 2 dim: 3 dim: 4 dim: 5 } } }
  layer { name: "sum" type: "Eltwise" bottom: "x" bottom: "y" top: "sum" eltwise_param { coeff: 1 coeff: 0.5 } }
  layer { name: "relu" type: "ReLU" bottom: "sum" top: "sum" })";

// Three bottoms: the fused backward writes two gradients per pass over the
// top, then the third alone; y's gradient is not asked for.
const char* kEltwise3 = R"(
  layer { name: "x" type: "Input" top: "x" input_param { shape { dim: 2 dim: 3 dim: 4 dim: 5 } } }
  layer { name: "y" type: "Input" top: "y" input_param { shape { dim: 2 dim: 3 dim: 4 dim: 5 } } }
  layer { name: "z" type: "Input" top: "z" input_param { shape { dim: 2 dim: 3 dim: 4 dim: 5 } } }
  layer { name: "w" type: "Input" top: "w" input_param { shape { dim: 2 dim: 3 dim: 4 dim: 5 } } }
  layer { name: "sum" type: "Eltwise" bottom: "x" bottom: "y" bottom: "z" bottom: "w" top: "sum"
    propagate_down: true propagate_down: false propagate_down: true propagate_down: true
    eltwise_param { coeff: 1 coeff: 0.5 coeff: -1 coeff: 2 } }
  layer { name: "relu" type: "ReLU" bottom: "sum" top: "sum" })";

// ResNet's branch2c: conv -> BatchNorm (scale_bias, out of place) -> the
// residual add of the shortcut "a" (computed before) -> ReLU in place.
const char* kResidual = R"(
  layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 2 dim: 3 dim: 6 dim: 5 } } }
  layer { name: "conv1" type: "Convolution" bottom: "data" top: "a"
    convolution_param { num_output: 4 kernel_size: 1 weight_filler { type: "gaussian" std: 0.5 } } }
  layer { name: "conv2" type: "Convolution" bottom: "data" top: "b"
    convolution_param { num_output: 4 kernel_size: 3 pad: 1 weight_filler { type: "gaussian" std: 0.4 } } }
  layer { name: "bn2" type: "BatchNorm" bottom: "b" top: "bn"
    batch_norm_param { scale_bias: true scale_filler { type: "uniform" min: 0.5 max: 1.5 }
                       bias_filler { type: "uniform" min: -0.5 max: 0.5 } } }
  layer { name: "sum" type: "Eltwise" bottom: "a" bottom: "bn" top: "c" }
  layer { name: "relu" type: "ReLU" bottom: "c" top: "c" })";

// The same with BVLC's BatchNorm + Scale in place, the chain's blob the
// Eltwise's first bottom.
const char* kResidualScale = R"(
  layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 2 dim: 3 dim: 6 dim: 5 } } }
  layer { name: "conv1" type: "Convolution" bottom: "data" top: "a"
    convolution_param { num_output: 4 kernel_size: 1 weight_filler { type: "gaussian" std: 0.5 } } }
  layer { name: "conv2" type: "Convolution" bottom: "data" top: "b"
    convolution_param { num_output: 4 kernel_size: 3 pad: 1 weight_filler { type: "gaussian" std: 0.4 } } }
  layer { name: "bn2" type: "BatchNorm" bottom: "b" top: "b" }
  layer { name: "scale2" type: "Scale" bottom: "b" top: "b"
    scale_param { bias_term: true filler { type: "uniform" min: 0.5 max: 1.5 }
                  bias_filler { type: "uniform" min: -0.5 max: 0.5 } } }
  layer { name: "sum" type: "Eltwise" bottom: "b" bottom: "a" top: "c" }
  layer { name: "relu" type: "ReLU" bottom: "c" top: "c" })";

template <typename P>
NetParameter MakeNet(const std::string& text, bool fuse, Phase phase = TRAIN) {
  NetParameter p;
  ParseTextProto(text, "net.prototxt", &p);
  p.set_default_forward_type(type_of<typename P::Ftype>());
  p.set_default_backward_type(type_of<typename P::Btype>());
  p.set_fuse_layers(fuse);
  p.set_force_backward(true);
  p.mutable_state()->set_phase(phase);
  return p;
}

// text with the first `from` replaced by `to` (which must be there).
std::string Replaced(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  CORTADO_CHECK(at != std::string::npos) << from;
  return text.replace(at, from.size(), to);
}

std::string FusedInto(const Net& net, const std::string& layer) {
  auto* f = dynamic_cast<const FusableLayer*>(net.layer_by_name(layer));
  return f ? f->fused_into() : "(not fusable)";
}

// Two builds of one net, fused and not, run on the same inputs, parameters
// and top gradients.
struct NetPair {
  std::unique_ptr<Net> fused, plain;
};

template <typename P>
NetPair Build(const std::string& text, Phase phase = TRAIN, std::shared_ptr<const Context> ctx = nullptr,
              const std::string& edit = "") {
  NetPair n;
  n.fused = std::make_unique<Net>(MakeNet<P>(text + edit, true, phase), SourceInfo(), ctx);
  n.plain = std::make_unique<Net>(MakeNet<P>(text + edit, false, phase), SourceInfo(), ctx);
  // The same parameters: the fused net's, copied (same types on both sides).
  for (size_t i = 0; i < n.fused->params().size(); ++i)
    test::SetData(n.plain->params()[i].get(), test::GetData(*n.fused->params()[i]));
  for (size_t i = 0; i < n.fused->input_blobs().size(); ++i) {
    test::FillUniform(n.fused->input_blobs()[i], -1.5, 1.5, 11 + static_cast<uint32_t>(i));
    test::SetData(n.plain->input_blobs()[i], test::GetData(*n.fused->input_blobs()[i]));
  }
  return n;
}

// Forward, then backward from the same random top gradient; `forwards`
// rounds (the running statistics move with each).
template <typename P>
void Run(NetPair* n, int forwards = 2) {
  for (int f = 0; f < forwards; ++f) {
    for (Net* net : {n->fused.get(), n->plain.get()}) {
      net->ClearParamDiffs();
      net->Forward();
      for (size_t o = 0; o < net->output_blobs().size(); ++o) {
        Blob* top = net->output_blobs()[o];
        test::SetDiff(top, test::RandomVector(top->count(), 97 + static_cast<uint32_t>(o + f)),
                      type_of<typename P::Btype>());
      }
      net->Backward();
    }
  }
}

// ulps == 0: bit for bit. Else within ulps epsilons of the pair's coarser type.
template <typename P>
void ExpectSame(const std::vector<double>& got, const std::vector<double>& want, double ulps, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    if (ulps == 0) {
      ASSERT_EQ(got[i], want[i]) << what << " index " << i;
    } else {
      const double tol = ulps * type_epsilon<test::Coarser<P>>() * std::max(1.0, std::fabs(want[i]));
      ASSERT_NEAR(got[i], want[i], tol) << what << " index " << i;
    }
  }
}

// Outputs, input gradients, parameters and parameter gradients (the running
// statistics included).
template <typename P>
void Compare(const NetPair& n, double ulps) {
  const Net& a = *n.fused;
  const Net& b = *n.plain;
  for (size_t o = 0; o < a.output_blobs().size(); ++o)
    ExpectSame<P>(test::GetData(*a.output_blobs()[o]), test::GetData(*b.output_blobs()[o]), ulps, "output");
  for (size_t i = 0; i < a.input_blobs().size(); ++i)
    ExpectSame<P>(test::GetDiff(*a.input_blobs()[i]), test::GetDiff(*b.input_blobs()[i]), ulps, "input diff");
  for (size_t i = 0; i < a.params().size(); ++i) {
    ExpectSame<P>(test::GetData(*a.params()[i]), test::GetData(*b.params()[i]), ulps, "param data " + std::to_string(i));
    ExpectSame<P>(test::GetDiff(*a.params()[i]), test::GetDiff(*b.params()[i]), ulps, "param diff " + std::to_string(i));
  }
}

// ---- which chains are fused ----------------------------------------------------------

TYPED_TEST(NetFusionTest, FusesTheThreeChains) {
  NetPair a = Build<TypeParam>(kBnScaleBias);
  EXPECT_EQ(FusedInto(*a.fused, "relu"), "bn");
  EXPECT_EQ(FusedInto(*a.plain, "relu"), "");
  NetPair b = Build<TypeParam>(kBnScale);
  EXPECT_EQ(FusedInto(*b.fused, "scale"), "bn");
  EXPECT_EQ(FusedInto(*b.fused, "relu"), "bn");
  EXPECT_EQ(FusedInto(*b.plain, "scale"), "");
  NetPair c = Build<TypeParam>(kEltwise);
  EXPECT_EQ(FusedInto(*c.fused, "relu"), "sum");
  EXPECT_EQ(FusedInto(*c.plain, "relu"), "");
  // The fused-away layers stay in the net, with their blobs.
  EXPECT_EQ(b.fused->layers().size(), b.plain->layers().size());
  EXPECT_EQ(b.fused->layer_by_name("scale")->blobs().size(), 2u);
}

TYPED_TEST(NetFusionTest, NotWhenReLUIsNotInPlace) {
  const std::string text = Replaced(kBnScaleBias, "type: \"ReLU\" bottom: \"conv\" top: \"conv\"",
                                     "type: \"ReLU\" bottom: \"conv\" top: \"out\"");
  NetPair n = Build<TypeParam>(text);
  EXPECT_EQ(FusedInto(*n.fused, "relu"), "");
  Run<TypeParam>(&n);
  Compare<TypeParam>(n, 0);
}

TYPED_TEST(NetFusionTest, NotWhenThePreReLUValueHasAnotherReader) {
  // A layer in place between BatchNorm and the ReLU reads BatchNorm's output:
  // the chain ends there.
  std::string between(kBnScaleBias);
  const size_t at = between.find("  layer { name: \"relu\"");
  between.insert(at, "  layer { name: \"twice\" type: \"Power\" bottom: \"conv\" top: \"conv\" "
                     "power_param { scale: 2 } }\n");
  NetPair n = Build<TypeParam>(between);
  EXPECT_EQ(FusedInto(*n.fused, "relu"), "");
  Run<TypeParam>(&n);
  Compare<TypeParam>(n, 0);
  // BatchNorm's top read by a Pooling and by the ReLU: the Net splits it,
  // so the ReLU reads a copy and writes a blob of its own.
  std::string split = Replaced(Replaced(kBnScaleBias, "type: \"BatchNorm\" bottom: \"conv\" top: \"conv\"",
                                        "type: \"BatchNorm\" bottom: \"conv\" top: \"bn\""),
                               "type: \"ReLU\" bottom: \"conv\" top: \"conv\"", "type: \"ReLU\" bottom: \"bn\" top: \"r\"");
  split += "\n  layer { name: \"pool\" type: \"Pooling\" bottom: \"bn\" top: \"pool\" "
           "pooling_param { pool: AVE kernel_size: 2 } }";
  NetPair m = Build<TypeParam>(split);
  EXPECT_EQ(FusedInto(*m.fused, "relu"), "");
  Run<TypeParam>(&m);
  Compare<TypeParam>(m, 0);
}

TYPED_TEST(NetFusionTest, NotWithANegativeSlope) {
  NetPair n = Build<TypeParam>(kEltwise, TRAIN, nullptr, "\n layer { name: \"leaky\" type: \"ReLU\" bottom: \"sum\" "
                                                          "top: \"sum\" relu_param { negative_slope: 0.1 } }");
  // The first ReLU is fused; the leaky one after it is not (the chain ends).
  EXPECT_EQ(FusedInto(*n.fused, "relu"), "sum");
  EXPECT_EQ(FusedInto(*n.fused, "leaky"), "");
  NetParameter p = MakeNet<TypeParam>(std::string(kBnScaleBias), true);
  p.mutable_layer(3)->mutable_relu_param()->set_negative_slope(0.1f);
  Net leaky(p);
  EXPECT_EQ(FusedInto(leaky, "relu"), "");
  Run<TypeParam>(&n);
  Compare<TypeParam>(n, 0);
}

TYPED_TEST(NetFusionTest, NotForEltwiseProductOrScaleOnAnotherAxis) {
  NetParameter p = MakeNet<TypeParam>(kEltwise, true);
  p.mutable_layer(2)->mutable_eltwise_param()->clear_coeff();
  p.mutable_layer(2)->mutable_eltwise_param()->set_operation(EltwiseParameter::PROD);
  Net prod(p);
  EXPECT_EQ(FusedInto(prod, "relu"), "");
  NetParameter q = MakeNet<TypeParam>(kBnScale, true);
  q.mutable_layer(3)->mutable_scale_param()->set_axis(2);  // a (H) scale: not BatchNorm's channels
  Net other_axis(q);
  EXPECT_EQ(FusedInto(other_axis, "scale"), "");
  EXPECT_EQ(FusedInto(other_axis, "relu"), "");  // the chain ended at the Scale
}

TYPED_TEST(NetFusionTest, NotAcrossTypesOrWhenSwitchedOff) {
  NetParameter p = MakeNet<TypeParam>(kBnScaleBias, true);
  // The ReLU in another (supported) pair than BatchNorm's.
  const Type other = type_of<typename TypeParam::Ftype>() == FLOAT ? FLOAT16 : FLOAT;
  p.mutable_layer(3)->set_forward_type(other);
  p.mutable_layer(3)->set_backward_type(other);
  Net mixed(p);
  EXPECT_EQ(FusedInto(mixed, "relu"), "");
  Net off(MakeNet<TypeParam>(kBnScale, false));
  EXPECT_EQ(FusedInto(off, "scale"), "");
  EXPECT_EQ(FusedInto(off, "relu"), "");
}

TYPED_TEST(NetFusionTest, OnlyWhenHeadAndTailAgreeOnBackward) {
  // propagate_down: false on the ReLU: it sends no gradient to BatchNorm's
  // top. Fused only where the Net then runs the backward of neither.
  std::string text = std::string(kBnScaleBias) + R"(
    layer { name: "ip" type: "InnerProduct" bottom: "conv" top: "ip" inner_product_param { num_output: 2 } }
    layer { name: "loss" type: "Flatten" bottom: "ip" top: "loss" loss_weight: 1 })";
  text = Replaced(text, "type: \"ReLU\" bottom: \"conv\" top: \"conv\"",
                  "type: \"ReLU\" bottom: \"conv\" top: \"conv\" propagate_down: false");
  for (bool force : {false, true}) {
    NetParameter p = MakeNet<TypeParam>(text, true);
    p.set_force_backward(force);
    Net net(p);
    const int bn = 2, relu = 3;
    ASSERT_EQ(net.layer_names()[relu], "relu");
    const bool agree = net.layer_need_backward()[bn] == net.layer_need_backward()[relu] &&
                       (!net.layer_need_backward()[relu] || net.bottom_need_backward()[relu][0]);
    EXPECT_EQ(FusedInto(net, "relu"), agree ? "bn" : "") << "force_backward " << force;
  }
  NetPair n = Build<TypeParam>(text);
  Run<TypeParam>(&n);
  Compare<TypeParam>(n, 0);
}

// The residual add joins a BatchNorm chain right before it; not after a
// ReLU (kBlock's bn2: the sum keeps its own ReLU), not with a layer between
// them, not with other coefficients.
TYPED_TEST(NetFusionTest, ResidualAddJoinsTheBatchNormChainBeforeIt) {
  NetPair n = Build<TypeParam>(kResidual);
  EXPECT_EQ(FusedInto(*n.fused, "sum"), "bn2");
  EXPECT_EQ(FusedInto(*n.fused, "relu"), "bn2");
  EXPECT_EQ(FusedInto(*n.plain, "sum"), "");
  NetPair m = Build<TypeParam>(kResidualScale);
  EXPECT_EQ(FusedInto(*m.fused, "scale2"), "bn2");
  EXPECT_EQ(FusedInto(*m.fused, "sum"), "bn2");
  EXPECT_EQ(FusedInto(*m.fused, "relu"), "bn2");
  // conv1 moved between the BatchNorm and the sum: the sum is its own head.
  std::string between = kResidual;
  const size_t conv1 = between.find("  layer { name: \"conv1\"");
  const size_t conv2 = between.find("  layer { name: \"conv2\"");
  const std::string conv1_text = between.substr(conv1, conv2 - conv1);
  between.erase(conv1, conv2 - conv1);
  between.insert(between.find("  layer { name: \"sum\""), conv1_text);
  NetPair b = Build<TypeParam>(between);
  EXPECT_EQ(FusedInto(*b.fused, "sum"), "");
  EXPECT_EQ(FusedInto(*b.fused, "relu"), "sum");
  Run<TypeParam>(&b);
  Compare<TypeParam>(b, 0);
  // Coefficients other than 1: not a residual add.
  NetPair c =
      Build<TypeParam>(Replaced(kResidual, "top: \"c\" }", "top: \"c\" eltwise_param { coeff: 1 coeff: 0.5 } }"));
  EXPECT_EQ(FusedInto(*c.fused, "sum"), "");
  EXPECT_EQ(FusedInto(*c.fused, "relu"), "sum");
  Run<TypeParam>(&c);
  Compare<TypeParam>(c, 0);
}

// A parameter is reported ready for the gradient sums (the listener of
// Net::set_param_ready_listener) only once its gradient is complete: a fused
// Scale's, which its BatchNorm head's backward writes, after the head, not
// after the Scale's own (empty) backward. Each parameter once; what the
// listener sees is the final gradient.
TEST(NetFusion, ParamsAreReportedReadyOnceTheirHeadWroteThem) {
  using P = test::TypePair<float, float>;
  for (const bool fuse : {true, false}) {
    Net net(MakeNet<P>(kResidualScale, fuse));
    ASSERT_EQ(FusedInto(net, "scale2"), fuse ? "bn2" : "");
    test::FillUniform(net.input_blobs()[0], -1, 1, 3);
    net.ClearParamDiffs();
    net.Forward();
    Blob* out = net.output_blobs()[0];
    test::SetDiff(out, test::RandomVector(out->count(), 11), FLOAT);
    const auto& params = net.learnable_params();
    std::vector<std::vector<double>> when_ready(params.size());
    std::vector<int> reported(params.size(), 0);
    net.set_param_ready_listener([&](const std::vector<int>& ready) {
      for (int k : ready) {
        when_ready[static_cast<size_t>(k)] = test::GetDiff(*params[static_cast<size_t>(k)]);
        ++reported[static_cast<size_t>(k)];
      }
    });
    net.Backward();
    for (size_t k = 0; k < params.size(); ++k) {
      const std::string what = std::string(fuse ? "fused: " : "unfused: ") + "learnable parameter " + std::to_string(k);
      EXPECT_EQ(reported[k], 1) << what;
      EXPECT_EQ(when_ready[k], test::GetDiff(*params[k])) << what << ": reported before its gradient was complete";
    }
    // The Scale's gradients are not zero (the comparison could fail).
    const Blob& s = *net.layer_by_name("scale2")->blobs()[0];
    const std::vector<double> ds = test::GetDiff(s);
    EXPECT_TRUE(std::any_of(ds.begin(), ds.end(), [](double v) { return v != 0; }));
  }
}

// ---- fused against unfused ------------------------------------------------------------

TYPED_TEST(NetFusionTest, BatchNormResidualReLUMatchesUnfused) {
  for (const char* text : {kResidual, kResidualScale}) {
    NetPair n = Build<TypeParam>(text);
    EXPECT_EQ(FusedInto(*n.fused, "sum"), "bn2");
    Run<TypeParam>(&n);
    Compare<TypeParam>(n, 0);
  }
  // Without the ReLU, and without a gradient for the shortcut.
  const std::string residual = kResidual;
  NetPair plain_sum = Build<TypeParam>(residual.substr(0, residual.find("  layer { name: \"relu\"")));
  EXPECT_EQ(FusedInto(*plain_sum.fused, "sum"), "bn2");
  Run<TypeParam>(&plain_sum);
  Compare<TypeParam>(plain_sum, 0);
  NetPair no_shortcut_diff = Build<TypeParam>(
      Replaced(kResidual, "top: \"c\" }", "top: \"c\" propagate_down: false propagate_down: true }"));
  EXPECT_EQ(FusedInto(*no_shortcut_diff.fused, "sum"), "bn2");
  Run<TypeParam>(&no_shortcut_diff);
  Compare<TypeParam>(no_shortcut_diff, 0);
}

// The fused head writes the sum's blob before the Eltwise's own Reshape
// runs: when the batch grows between forwards (an input reshaped, no
// Net::Reshape), the head must size the sum itself. With the data plan
// the sum may share the shortcut's buffer, grown already; without it
// (the net's share_data: false) the sum has a buffer of its own.
TYPED_TEST(NetFusionTest, ResidualChainFollowsAGrowingBatch) {
  for (const char* share : {"true", "false"}) {
    NetPair n = Build<TypeParam>(kResidual, TRAIN, nullptr, str_cat("\nshare_data: ", share));
    ASSERT_EQ(FusedInto(*n.fused, "sum"), "bn2");
    Run<TypeParam>(&n, 1);
    for (Net* net : {n.fused.get(), n.plain.get()}) net->input_blobs()[0]->Reshape({6, 3, 6, 5});
    test::FillUniform(n.fused->input_blobs()[0], -1.5, 1.5, 29);
    test::SetData(n.plain->input_blobs()[0], test::GetData(*n.fused->input_blobs()[0]));
    Run<TypeParam>(&n, 1);
    EXPECT_EQ(n.fused->output_blobs()[0]->shape(), (std::vector<int>{6, 4, 6, 5})) << "share_data: " << share;
    Compare<TypeParam>(n, 0);
  }
}

TYPED_TEST(NetFusionTest, BatchNormScaleBiasReLUMatchesUnfused) {
  NetPair n = Build<TypeParam>(kBnScaleBias);
  Run<TypeParam>(&n);
  Compare<TypeParam>(n, 0);
}

TYPED_TEST(NetFusionTest, EltwiseSumReLUFourBottomsMatchesUnfused) {
  NetPair n = Build<TypeParam>(kEltwise3);
  EXPECT_EQ(FusedInto(*n.fused, "relu"), "sum");
  Run<TypeParam>(&n);
  Compare<TypeParam>(n, 0);
}

TYPED_TEST(NetFusionTest, BatchNormScaleReLUMatchesUnfused) {
  NetPair n = Build<TypeParam>(kBnScale);
  Run<TypeParam>(&n);
  Compare<TypeParam>(n, 0);
  // The fused Scale kept no copy of its input.
  auto* scale = n.fused->layer_by_name("scale");
  EXPECT_EQ(scale->blobs().size(), 2u);
}

TYPED_TEST(NetFusionTest, BatchNormNotInPlaceWithScaleMatchesUnfused) {
  std::string text = Replaced(kBnScale, "type: \"BatchNorm\" bottom: \"conv\" top: \"conv\"",
                              "type: \"BatchNorm\" bottom: \"conv\" top: \"bn\"");
  text = Replaced(text, "type: \"Scale\" bottom: \"conv\" top: \"conv\"", "type: \"Scale\" bottom: \"bn\" top: \"bn\"");
  text = Replaced(text, "type: \"ReLU\" bottom: \"conv\" top: \"conv\"", "type: \"ReLU\" bottom: \"bn\" top: \"bn\"");
  NetPair n = Build<TypeParam>(text);
  EXPECT_EQ(FusedInto(*n.fused, "scale"), "bn");
  EXPECT_EQ(FusedInto(*n.fused, "relu"), "bn");
  Run<TypeParam>(&n);
  Compare<TypeParam>(n, 0);
}

TYPED_TEST(NetFusionTest, EltwiseSumReLUMatchesUnfused) {
  NetPair n = Build<TypeParam>(kEltwise);
  Run<TypeParam>(&n);
  Compare<TypeParam>(n, 0);
}

TYPED_TEST(NetFusionTest, TestPhaseFusesAndMatchesUnfused) {
  // Global statistics: the running mean and variance of a few TRAIN passes.
  // The residual net's BatchNorm is in place: its copy of x keeps the input
  // that the sum's memory (x's, by the data plan) overwrites.
  struct Case {
    const char* text;
    const char* bn;
  };
  for (const Case c : {Case{kBnScaleBias, "bn"}, Case{kBnScale, "bn"}, Case{kResidualScale, "bn2"}}) {
    NetPair n = Build<TypeParam>(c.text, TEST, nullptr);
    EXPECT_EQ(FusedInto(*n.fused, "relu"), c.bn);
    for (Net* net : {n.fused.get(), n.plain.get()}) {
      auto& blobs = net->layer_by_name(c.bn)->blobs();
      test::FillUniform(blobs[0].get(), -0.5, 0.5, 5);
      test::FillUniform(blobs[1].get(), 0.5, 2, 6);
      test::SetData(blobs[2].get(), {1.5});
    }
    Run<TypeParam>(&n, 1);
    Compare<TypeParam>(n, 0);
  }
}

// ---- a few SGD steps -------------------------------------------------------------------

// Both chains of a ResNet block (BVLC style with a Scale, NVCaffe style with
// scale_bias) and the residual add, under a Euclidean loss.
const char* kBlock = R"(
  layer { name: "data" type: "DummyData" top: "data" top: "target"
    dummy_data_param { shape { dim: 4 dim: 3 dim: 6 dim: 6 } shape { dim: 4 dim: 3 }
                       data_filler { type: "gaussian" std: 1 } data_filler { type: "gaussian" std: 1 } } }
  layer { name: "conv1" type: "Convolution" bottom: "data" top: "a"
    convolution_param { num_output: 4 kernel_size: 3 pad: 1 weight_filler { type: "gaussian" std: 0.3 } } }
  layer { name: "bn1" type: "BatchNorm" bottom: "a" top: "a" }
  layer { name: "scale1" type: "Scale" bottom: "a" top: "a" scale_param { bias_term: true } }
  layer { name: "relu1" type: "ReLU" bottom: "a" top: "a" }
  layer { name: "conv2" type: "Convolution" bottom: "a" top: "b"
    convolution_param { num_output: 4 kernel_size: 3 pad: 1 weight_filler { type: "gaussian" std: 0.3 } } }
  layer { name: "bn2" type: "BatchNorm" bottom: "b" top: "b" batch_norm_param { scale_bias: true } }
  layer { name: "relu2" type: "ReLU" bottom: "b" top: "b" }
  layer { name: "sum" type: "Eltwise" bottom: "a" bottom: "b" top: "c" }
  layer { name: "relu3" type: "ReLU" bottom: "c" top: "c" }
  layer { name: "ip" type: "InnerProduct" bottom: "c" top: "ip"
    inner_product_param { num_output: 3 weight_filler { type: "gaussian" std: 0.1 } } }
  layer { name: "loss" type: "EuclideanLoss" bottom: "ip" bottom: "target" top: "loss" })";

template <typename P>
std::unique_ptr<Solver> BlockSolver(bool fuse, std::shared_ptr<const Context> ctx = nullptr) {
  SolverParameter sp;
  SourceInfo info;
  ParseTextProto("type: 'SGD' base_lr: 0.05 momentum: 0.9 lr_policy: 'fixed' max_iter: 100 random_seed: 1701 "
                 "weight_decay: 0.001 display: 0",
                 "solver.prototxt", &sp, &info);
  *sp.mutable_net_param() = MakeNet<P>(kBlock, fuse);
  sp.mutable_net_param()->set_force_backward(false);
  SolverSetup setup(std::move(ctx));
  return Solver::Create(sp, info, setup);
}

template <typename P>
void CompareTraining(double ulps, std::shared_ptr<const Context> ctx = nullptr) {
  // One after the other: each solver seeds the process RNG (random_seed)
  // when it is made, and DummyData draws from it every forward.
  std::unique_ptr<Solver> fused = BlockSolver<P>(true, ctx);
  EXPECT_EQ(FusedInto(*fused->net(), "scale1"), "bn1");
  EXPECT_EQ(FusedInto(*fused->net(), "relu1"), "bn1");
  EXPECT_EQ(FusedInto(*fused->net(), "relu2"), "bn2");
  EXPECT_EQ(FusedInto(*fused->net(), "relu3"), "sum");
  fused->Step(4);
  std::unique_ptr<Solver> plain = BlockSolver<P>(false, ctx);
  EXPECT_EQ(FusedInto(*plain->net(), "relu3"), "");
  plain->Step(4);
  const auto& a = fused->net()->learnable_params();
  const auto& b = plain->net()->learnable_params();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    ExpectSame<P>(test::GetData(*a[i]), test::GetData(*b[i]), ulps, "learned parameter " + std::to_string(i));
}

TYPED_TEST(NetFusionTest, SgdStepsMatchUnfused) { CompareTraining<TypeParam>(0); }

// ---- GPU: the fused kernels against the unfused layers' kernels ------------------------

// Within a few ulps: nvcc may contract multiply-adds differently in the two
// kernels; in FP16 a value one ulp apart can flip a ReLU at 0 only where it
// is 0 to begin with.
template <typename P>
void CompareOnGpu(const std::string& text, double ulps) {
#ifndef CORTADO_USE_CUDA
  (void)text; (void)ulps;
  GTEST_SKIP() << "no CUDA backend in this build";
#else
  if (!cuda::available()) GTEST_SKIP() << "no CUDA device available";
  std::shared_ptr<Context> gpu = Context::Create(0);
  test::RestoreStream restore;
  gpu->Activate();
  NetPair n = Build<P>(text, TRAIN, gpu);
  Run<P>(&n);
  gpu->Synchronize();
  Compare<P>(n, ulps);
#endif
}

double GpuUlps(bool half) { return half ? 8 : 64; }

TYPED_TEST(NetFusionTest, GpuBatchNormScaleBiasReLU) {
  CompareOnGpu<TypeParam>(kBnScaleBias, GpuUlps(test::is_half_pair<TypeParam>()));
}
TYPED_TEST(NetFusionTest, GpuBatchNormScaleReLU) {
  CompareOnGpu<TypeParam>(kBnScale, GpuUlps(test::is_half_pair<TypeParam>()));
}
TYPED_TEST(NetFusionTest, GpuEltwiseSumReLU) {
  CompareOnGpu<TypeParam>(kEltwise, GpuUlps(test::is_half_pair<TypeParam>()));
}
TYPED_TEST(NetFusionTest, GpuBatchNormResidualReLU) {
  CompareOnGpu<TypeParam>(kResidual, GpuUlps(test::is_half_pair<TypeParam>()));
  CompareOnGpu<TypeParam>(kResidualScale, GpuUlps(test::is_half_pair<TypeParam>()));
}
TYPED_TEST(NetFusionTest, GpuEltwiseSumReLUFourBottoms) {
  CompareOnGpu<TypeParam>(kEltwise3, GpuUlps(test::is_half_pair<TypeParam>()));
}
TYPED_TEST(NetFusionTest, GpuSgdStepsMatchUnfused) {
#ifndef CORTADO_USE_CUDA
  GTEST_SKIP() << "no CUDA backend in this build";
#else
  if (!cuda::available()) GTEST_SKIP() << "no CUDA device available";
  std::shared_ptr<Context> gpu = Context::Create(0);
  test::RestoreStream restore;
  CompareTraining<TypeParam>(test::is_half_pair<TypeParam>() ? 64 : 256, gpu);
#endif
}

}  // namespace
}  // namespace cortado
