// BiasLayer: hand-computed forward/backward (learnable bias, second-bottom
// bias, in place), finite differences for (double, double) and (float,
// float), float16 pairs against (double, double), GPU against CPU, field errors.

#include "cortado/layers/bias_layer.hpp"

#include <gtest/gtest.h>

#include <type_traits>

#include "test_util.hpp"

namespace cortado {
namespace {

template <typename P>
class BiasLayerTest : public ::testing::Test {
 protected:
  using F = typename P::Ftype;
  using B = typename P::Btype;
};

TYPED_TEST_SUITE(BiasLayerTest, test::AllPairs, test::PairNames);

// x (2, 3, 1) = [1 2 3; 4 5 6], b = (1, -2, 0.5): y = [2 0 3.5; 5 3 6.5].
// dy = [1 0 2; -1 1 4]: dx = dy, db = (0, 1, 6).
TYPED_TEST(BiasLayerTest, ForwardBackwardHandComputed) {
  using F = typename TestFixture::F;
  using B = typename TestFixture::B;
  BiasLayer<F, B> layer(test::MakeParam<TypeParam>("type: 'Bias'"));
  Blob x({2, 3, 1}, type_of<F>()), y(type_of<F>());
  test::SetData(&x, {1, 2, 3, 4, 5, 6});
  layer.SetUp({&x}, {&y});
  ASSERT_EQ(layer.blobs().size(), 1u);
  EXPECT_EQ(test::GetData(*layer.blobs()[0]), (std::vector<double>{0, 0, 0}));  // default filler: 0
  test::SetData(layer.blobs()[0].get(), {1, -2, 0.5});
  layer.Forward({&x}, {&y});
  EXPECT_EQ(test::GetData(y), (std::vector<double>{2, 0, 3.5, 5, 3, 6.5}));
  test::SetDiff(layer.blobs()[0].get(), {1, 1, 1}, type_of<B>());  // accumulated into
  test::SetDiff(&y, {1, 0, 2, -1, 1, 4}, type_of<B>());
  layer.Backward({&y}, {true}, {&x});
  EXPECT_EQ(test::GetDiff(x), (std::vector<double>{1, 0, 2, -1, 1, 4}));
  EXPECT_EQ(test::GetDiff(*layer.blobs()[0]), (std::vector<double>{1, 2, 7}));
}

TYPED_TEST(BiasLayerTest, SecondBottomInPlace) {
  using F = typename TestFixture::F;
  using B = typename TestFixture::B;
  BiasLayer<F, B> layer(test::MakeParam<TypeParam>("type: 'Bias' bias_param { axis: 0 }"));
  Blob x({2, 2}, type_of<F>()), b({2}, type_of<F>());
  test::SetData(&x, {1, 2, 3, 4});
  test::SetData(&b, {10, -1});
  layer.SetUp({&x, &b}, {&x});
  EXPECT_TRUE(layer.blobs().empty());
  layer.Forward({&x, &b}, {&x});
  EXPECT_EQ(test::GetData(x), (std::vector<double>{11, 12, 2, 3}));
  test::SetDiff(&x, {1, 2, 3, 5}, type_of<B>());
  test::SetDiff(&b, {9, 9}, type_of<B>());  // overwritten
  layer.Backward({&x}, {true, true}, {&x, &b});
  EXPECT_EQ(test::GetDiff(x), (std::vector<double>{1, 2, 3, 5}));
  EXPECT_EQ(test::GetDiff(b), (std::vector<double>{3, 8}));
}

// float16: one rounding of a float sum: 1 eps forward, 4 eps backward.
const test::ReferenceTolerance kTol{1, 4};
const auto kFill = [](int i, Blob* b) { test::FillGaussian(b, 0, 1, 31 + i); };

TYPED_TEST(BiasLayerTest, Gradient) {
  test::CheckLayer<TypeParam>("type: 'Bias' bias_param { filler { type: 'gaussian' } }", {{2, 3, 4}}, kFill,
                              test::GradientSettings(), kTol);
}

TYPED_TEST(BiasLayerTest, GradientTrailingAxes) {
  test::CheckLayer<TypeParam>("type: 'Bias' bias_param { axis: 1 num_axes: -1 filler { type: 'gaussian' } }",
                              {{2, 3, 4}}, kFill, test::GradientSettings(), kTol);
}

TYPED_TEST(BiasLayerTest, GradientSecondBottom) {
  test::CheckLayer<TypeParam>("type: 'Bias'", {{2, 3, 4}, {3}}, kFill, test::GradientSettings(), kTol);
}

template <typename P>
test::GpuTolerance BiasGpuTolerance() {
  constexpr bool half = test::is_half_pair<P>();
  return half ? test::GpuTolerance{1, 8} : test::GpuTolerance{1, 64};
}

TYPED_TEST(BiasLayerTest, GpuMatchesCpu) {
  test::CheckGpuAgainstCpu<TypeParam>("type: 'Bias' bias_param { filler { type: 'gaussian' } }", {{4, 5, 6, 7}}, kFill,
                                      BiasGpuTolerance<TypeParam>());
}

// The channels-last form (inner 1, what an NHWC blob is for the layer): V
// neighbouring channels a thread where the channel count is a multiple of V
// (24, 48), the scalar kernel where not (5).
TYPED_TEST(BiasLayerTest, GpuMatchesCpuInnerOne) {
  test::CheckGpuAgainstCpu<TypeParam>("type: 'Bias' bias_param { axis: 2 filler { type: 'gaussian' } }", {{3, 5, 24}}, kFill, BiasGpuTolerance<TypeParam>());
  test::CheckGpuAgainstCpu<TypeParam>("type: 'Bias' bias_param { axis: 2 filler { type: 'gaussian' } }", {{3, 4, 5}}, kFill, BiasGpuTolerance<TypeParam>());
  test::CheckGpuAgainstCpu<TypeParam>("type: 'Bias'", {{4, 2, 24}, {2, 24}}, kFill, BiasGpuTolerance<TypeParam>());
}

TYPED_TEST(BiasLayerTest, GpuMatchesCpuSecondBottom) {
  test::CheckGpuAgainstCpu<TypeParam>("type: 'Bias'", {{4, 5, 6}, {5, 6}}, kFill, BiasGpuTolerance<TypeParam>());
}

std::string SetUpError(const std::string& text, const std::vector<std::vector<int>>& shapes) {
  BiasLayer<float, float> layer(test::MakeParam<test::TypePair<float, float>>("name: 'b' type: 'Bias' " + text));
  test::Blobs bottom, top;
  for (const auto& s : shapes) bottom.add(s, FLOAT);
  top.add(FLOAT);
  try {
    layer.SetUp(bottom.vec, top.vec);
  } catch (const FieldError& e) {
    return e.field();
  }
  return "no error";
}

TEST(BiasLayerValidation, Fields) {
  EXPECT_EQ(SetUpError("bias_param { num_axes: -2 }", {{2, 3}}), "bias_param.num_axes");
  EXPECT_EQ(SetUpError("bias_param { axis: -3 }", {{2, 3}}), "bias_param.axis");
  EXPECT_EQ(SetUpError("bias_param { num_axes: 3 }", {{2, 3}}), "bias_param.num_axes");
  EXPECT_EQ(SetUpError("bias_param { filler { type: 'nonsense' } }", {{2, 3}}), "bias_param.filler.type");
  EXPECT_EQ(SetUpError("", {{2, 3, 4}, {4}}), "bias_param.axis");
  EXPECT_EQ(SetUpError("bias_param { num_axes: 0 }", {{2, 3}}), "no error");
}

}  // namespace
}  // namespace cortado
