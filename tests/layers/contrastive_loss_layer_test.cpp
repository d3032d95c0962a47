#include "cortado/layers/contrastive_loss_layer.hpp"

#include <cmath>

#include "test_util.hpp"

namespace cortado {
namespace {

template <typename P>
class ContrastiveLossLayerTest : public ::testing::Test {};
TYPED_TEST_SUITE(ContrastiveLossLayerTest, test::AllPairs, test::PairNames);

// float16: a and b rounded once, distances and loss in float; the gradient
// is one product rounded to Btype (the non-legacy scale has a division).
const test::ReferenceTolerance kTol{4, 4};

template <typename P>
test::GradientSettings Settings() {
  return test::GradientSettings().step(1e-3).threshold(std::is_same_v<typename P::Ftype, double> ? 1e-4 : 2e-3);
}

void Fill(int i, Blob* b) {
  if (i < 2) test::FillUniform(b, -0.6, 0.6, 15 + i);
  else test::FillLabels(b, 2, 17);
}

TYPED_TEST(ContrastiveLossLayerTest, ForwardBackwardValues) {
  using F = typename TypeParam::Ftype;
  using B = typename TypeParam::Btype;
  for (const bool legacy : {false, true}) {
    SCOPED_TRACE(legacy ? "legacy" : "current");
    auto layer = test::NewLayer<TypeParam>(str_cat("name: 'loss' type: 'ContrastiveLoss' contrastive_loss_param { "
                                                   "margin: 2 legacy_version: ", legacy ? "true" : "false", " }"));
    test::Blobs bottom, top;
    // pairs: n0 similar, d = (1, 0); n1 dissimilar, d = (0.5, 0.5); n2 dissimilar, d = (3, 0)
    bottom.add({3, 2, 1, 1}, type_of<F>(), {1, 0, 0.5, 0.5, 3, 1});
    bottom.add({3, 2, 1, 1}, type_of<F>(), {0, 0, 0, 0, 0, 1});
    bottom.add({3, 1, 1, 1}, type_of<F>(), {1, 0, 0});
    top.add(type_of<F>());
    layer->SetUp(bottom.vec, top.vec);
    EXPECT_EQ(layer->loss(0), 1.0);
    layer->Forward(bottom.vec, top.vec);
    const double d1 = std::sqrt(0.5);
    const double want = legacy ? (1 + (2 - 0.5) + 0) / 6 : (1 + (2 - d1) * (2 - d1) + 0) / 6;
    EXPECT_NEAR(test::GetData(*top[0])[0], want, 1e-6);
    test::SetDiff(top[0], {3}, type_of<B>());
    layer->Backward(top.vec, {true, true, false}, bottom.vec);
    const double alpha = 3.0 / 3;
    const double beta1 = legacy ? -alpha : -alpha * (2 - d1) / (d1 + 1e-4);
    const std::vector<double> da = {alpha, 0, beta1 * 0.5, beta1 * 0.5, 0, 0};
    std::vector<double> db(6);
    for (int k = 0; k < 6; ++k) db[k] = -da[k];
    test::ExpectNear<test::Coarser<TypeParam>>(test::GetDiff(*bottom[0]), da, 2);
    test::ExpectNear<test::Coarser<TypeParam>>(test::GetDiff(*bottom[1]), db, 2);
  }
}

TYPED_TEST(ContrastiveLossLayerTest, Gradient) {
  test::CheckLayer<TypeParam>("type: 'ContrastiveLoss'", {{5, 3, 1, 1}, {5, 3, 1, 1}, {5, 1, 1, 1}}, Fill,
                              Settings<TypeParam>(), kTol, {true, true, false});
}

TYPED_TEST(ContrastiveLossLayerTest, GradientLegacy) {
  test::CheckLayer<TypeParam>("type: 'ContrastiveLoss' contrastive_loss_param { legacy_version: true }",
                              {{5, 3, 1, 1}, {5, 3, 1, 1}, {5, 1, 1, 1}}, Fill, Settings<TypeParam>(), kTol,
                              {true, true, false});
}

TYPED_TEST(ContrastiveLossLayerTest, ShapeErrors) {
  using F = typename TypeParam::Ftype;
  const std::vector<std::pair<std::vector<std::vector<int>>, std::string>> cases = {
      {{{2, 3}, {2, 4}, {2}}, "bottom[1]"},
      {{{2, 3}, {2, 3}, {3}}, "bottom[2]"},
  };
  for (const auto& [shapes, field] : cases) {
    auto layer = test::NewLayer<TypeParam>("name: 'loss' type: 'ContrastiveLoss'");
    test::Blobs bottom, top;
    for (const auto& s : shapes) bottom.add(s, type_of<F>());
    top.add(type_of<F>());
    try {
      layer->SetUp(bottom.vec, top.vec);
      ADD_FAILURE() << "bad shapes accepted for " << field;
    } catch (const FieldError& e) {
      EXPECT_EQ(e.field(), field);
    }
  }
}

// GPU against CPU: each pair's distance is summed in the CPU's order with
// the same roundings (and sqrt and division are exact IEEE operations on
// both sides), so the gradients agree to the unit and the loss differs by
// the order of the float sum only. Both forms, margins that leave some
// dissimilar pairs inside and some outside, and a loss weight other than 1.
TYPED_TEST(ContrastiveLossLayerTest, GpuMatchesCpu) {
  for (const char* legacy : {"false", "true"}) {
    SCOPED_TRACE(str_cat("legacy_version: ", legacy));
    for (const char* margin : {"1", "0.5"}) {
      SCOPED_TRACE(str_cat("margin: ", margin));
      test::CheckGpuAgainstCpu<TypeParam>(str_cat("type: 'ContrastiveLoss' contrastive_loss_param { margin: ", margin,
                                                  " legacy_version: ", legacy, " }"),
                                          {{5, 3, 1, 1}, {5, 3, 1, 1}, {5, 1, 1, 1}}, Fill, test::GpuTolerance{4, 1},
                                          {true, true, false});
    }
    test::CheckGpuAgainstCpu<TypeParam>(
        str_cat("type: 'ContrastiveLoss' loss_weight: 0.5 contrastive_loss_param { legacy_version: ", legacy, " }"),
        {{4, 6}, {4, 6}, {4}}, Fill, test::GpuTolerance{4, 1}, {false, true, false});
  }
}

// Several blocks (four) of the GPU's two-stage sum (1000 pairs) and a second forward
// into the same buffers. The CPU's sequential float sum drifts from the exact
// one by ulps per hundred terms; the GPU's tree sum is close to exact.
TYPED_TEST(ContrastiveLossLayerTest, GpuMatchesCpuManyBlocks) {
  auto fill = [](int i, Blob* b) {
    if (i < 2) test::FillUniform(b, -0.5, 0.5, 34 + i);
    else test::FillLabels(b, 2, 36);
  };
  test::CheckGpuAgainstCpu<TypeParam>("type: 'ContrastiveLoss' contrastive_loss_param { margin: 1.2 }",
                                      {{1000, 8}, {1000, 8}, {1000}}, fill, test::GpuTolerance{128, 1},
                                      {true, true, false}, -1, 2);
}

}  // namespace
}  // namespace cortado
