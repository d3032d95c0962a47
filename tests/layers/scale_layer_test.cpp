// ScaleLayer: hand-computed forward/backward (learnable scale with bias,
// second-bottom scale, scalar scale), default filler, in place, finite
// differences for (double, double) and (float, float), float16 pairs against
// (double, double), GPU against CPU, field errors.

#include "cortado/layers/scale_layer.hpp"

#include <gtest/gtest.h>

#include <type_traits>

#include "test_util.hpp"

namespace cortado {
namespace {

template <typename P>
class ScaleLayerTest : public ::testing::Test {
 protected:
  using F = typename P::Ftype;
  using B = typename P::Btype;
};

TYPED_TEST_SUITE(ScaleLayerTest, test::AllPairs, test::PairNames);

// x (2, 3) = [1 2 3; 4 5 6], s = (1, -2, 0.5), b = (1, 0, -1):
// y = [2 -4 0.5; 5 -10 2]. dy = [1 0 2; -1 1 4]:
// dx = [1 0 1; -1 -2 2], ds = (1*1 - 1*4, 0 + 5, 6 + 24) = (-3, 5, 30), db = (0, 1, 6).
TYPED_TEST(ScaleLayerTest, ForwardBackwardHandComputed) {
  using F = typename TestFixture::F;
  using B = typename TestFixture::B;
  ScaleLayer<F, B> layer(test::MakeParam<TypeParam>("type: 'Scale' scale_param { bias_term: true }"));
  Blob x({2, 3}, type_of<F>()), y(type_of<F>());
  test::SetData(&x, {1, 2, 3, 4, 5, 6});
  layer.SetUp({&x}, {&y});
  ASSERT_EQ(layer.blobs().size(), 2u);
  EXPECT_EQ(test::GetData(*layer.blobs()[0]), (std::vector<double>{1, 1, 1}));  // default filler: 1
  EXPECT_EQ(test::GetData(*layer.blobs()[1]), (std::vector<double>{0, 0, 0}));
  test::SetData(layer.blobs()[0].get(), {1, -2, 0.5});
  test::SetData(layer.blobs()[1].get(), {1, 0, -1});
  layer.Forward({&x}, {&y});
  EXPECT_EQ(test::GetData(y), (std::vector<double>{2, -4, 0.5, 5, -10, 2}));
  for (auto& p : layer.blobs()) p->diff().set_zero();
  test::SetDiff(&y, {1, 0, 2, -1, 1, 4}, type_of<B>());
  layer.Backward({&y}, {true}, {&x});
  EXPECT_EQ(test::GetDiff(x), (std::vector<double>{1, 0, 1, -1, -2, 2}));
  EXPECT_EQ(test::GetDiff(*layer.blobs()[0]), (std::vector<double>{-3, 5, 30}));
  EXPECT_EQ(test::GetDiff(*layer.blobs()[1]), (std::vector<double>{0, 1, 6}));
}

TYPED_TEST(ScaleLayerTest, SecondBottomAndInPlace) {
  using F = typename TestFixture::F;
  using B = typename TestFixture::B;
  // x (1, 2, 2) scaled along axis 1 by bottom[1] = (2, -1), in place.
  ScaleLayer<F, B> layer(test::MakeParam<TypeParam>("type: 'Scale'"));
  Blob x({1, 2, 2}, type_of<F>()), s({2}, type_of<F>());
  test::SetData(&x, {1, 2, 3, 4});
  test::SetData(&s, {2, -1});
  layer.SetUp({&x, &s}, {&x});
  EXPECT_TRUE(layer.blobs().empty());
  layer.Forward({&x, &s}, {&x});
  EXPECT_EQ(test::GetData(x), (std::vector<double>{2, 4, -3, -4}));
  test::SetDiff(&x, {1, 1, 2, 0}, type_of<B>());
  test::SetDiff(&s, {7, 7}, type_of<B>());  // overwritten, not accumulated
  layer.Backward({&x}, {true, true}, {&x, &s});
  EXPECT_EQ(test::GetDiff(x), (std::vector<double>{2, 2, -2, 0}));
  EXPECT_EQ(test::GetDiff(s), (std::vector<double>{3, 6}));  // the original x: (1+2, 2*3)
}

// In place, the forward keeps a copy of x only for the scale's gradient: a
// frozen scale (lr_mult 0, as the Net sets it) needs none, and both give the
// out-of-place results.
TYPED_TEST(ScaleLayerTest, InPlaceKeepsACopyOnlyForALearnedScale) {
  using F = typename TestFixture::F;
  using B = typename TestFixture::B;
  const char* text = "type: 'Scale' scale_param { bias_term: true filler { type: 'constant' value: 2 } }";
  for (bool learned : {true, false}) {
    SCOPED_TRACE(learned ? "learned scale" : "frozen scale");
    ScaleLayer<F, B> out(test::MakeParam<TypeParam>(text)), in(test::MakeParam<TypeParam>(text));
    Blob x({2, 3}, type_of<F>()), y(type_of<F>()), z({2, 3}, type_of<F>());
    test::SetData(&x, {1, -2, 3, 0.5, 4, -1});
    test::SetData(&z, {1, -2, 3, 0.5, 4, -1});
    out.SetUp({&x}, {&y});
    in.SetUp({&z}, {&z});
    out.set_param_propagate_down(0, learned);
    in.set_param_propagate_down(0, learned);
    out.Forward({&x}, {&y});
    in.Forward({&z}, {&z});
    EXPECT_FALSE(out.kept_copy());
    EXPECT_EQ(in.kept_copy(), learned);
    EXPECT_EQ(test::GetData(z), test::GetData(y));
    for (auto* l : {&out, &in})
      for (auto& p : l->blobs()) p->diff().set_zero();
    test::SetDiff(&y, {1, 2, -1, 0, 3, 1}, type_of<B>());
    test::SetDiff(&z, {1, 2, -1, 0, 3, 1}, type_of<B>());
    out.Backward({&y}, {true}, {&x});
    in.Backward({&z}, {true}, {&z});
    EXPECT_EQ(test::GetDiff(z), test::GetDiff(x));
    for (size_t k = 0; k < out.blobs().size(); ++k)
      EXPECT_EQ(test::GetDiff(*in.blobs()[k]), test::GetDiff(*out.blobs()[k])) << "blob " << k;
  }
}

TYPED_TEST(ScaleLayerTest, ScalarAndTrailingAxes) {
  using F = typename TestFixture::F;
  using B = typename TestFixture::B;
  ScaleLayer<F, B> scalar(test::MakeParam<TypeParam>(
      "type: 'Scale' scale_param { num_axes: 0 filler { type: 'constant' value: 3 } }"));
  Blob x({2, 2}, type_of<F>()), y(type_of<F>());
  test::SetData(&x, {1, 2, 3, 4});
  scalar.SetUp({&x}, {&y});
  EXPECT_EQ(scalar.blobs()[0]->count(), 1u);
  scalar.Forward({&x}, {&y});
  EXPECT_EQ(test::GetData(y), (std::vector<double>{3, 6, 9, 12}));
  ScaleLayer<F, B> trailing(test::MakeParam<TypeParam>("type: 'Scale' scale_param { axis: -1 num_axes: -1 }"));
  trailing.SetUp({&x}, {&y});
  EXPECT_EQ(trailing.blobs()[0]->shape(), (std::vector<int>{2}));
}

// float16: products rounded once (twice with the bias add in float, once
// stored): 2 eps forward; sums in float rounded once: 4 eps backward.
const test::ReferenceTolerance kTol{2, 4};
const auto kFill = [](int i, Blob* b) { test::FillGaussian(b, 0, 1, 21 + i); };

TYPED_TEST(ScaleLayerTest, Gradient) {
  test::CheckLayer<TypeParam>(
      "type: 'Scale' scale_param { filler { type: 'gaussian' } bias_term: true bias_filler { type: 'gaussian' } }",
      {{2, 3, 4}}, kFill, test::GradientSettings(), kTol);
}

TYPED_TEST(ScaleLayerTest, GradientTwoAxesFromAxis0) {
  test::CheckLayer<TypeParam>("type: 'Scale' scale_param { axis: 0 num_axes: 2 filler { type: 'gaussian' } }",
                              {{2, 3, 4}}, kFill, test::GradientSettings(), kTol);
}

TYPED_TEST(ScaleLayerTest, GradientSecondBottom) {
  test::CheckLayer<TypeParam>("type: 'Scale' scale_param { bias_term: true bias_filler { type: 'gaussian' } }",
                              {{2, 3, 4}, {3, 4}}, kFill, test::GradientSettings(), kTol);
}

// Block sums in another order than the CPU loop: float16 pairs 2 eps forward,
// 8 backward; float and double 4 and 64 ulps.
template <typename P>
test::GpuTolerance ScaleGpuTolerance() {
  constexpr bool half = test::is_half_pair<P>();
  return half ? test::GpuTolerance{2, 8} : test::GpuTolerance{4, 64};
}

TYPED_TEST(ScaleLayerTest, GpuMatchesCpu) {
  test::CheckGpuAgainstCpu<TypeParam>(
      "type: 'Scale' scale_param { filler { type: 'gaussian' } bias_term: true bias_filler { type: 'gaussian' } }",
      {{4, 5, 6, 7}}, kFill, ScaleGpuTolerance<TypeParam>());
}

// The channels-last form (inner 1, what an NHWC blob is for the layer): V
// neighbouring channels a thread where the channel count is a multiple of V
// (24, 48), the scalar kernel where not (5).
TYPED_TEST(ScaleLayerTest, GpuMatchesCpuInnerOne) {
  test::CheckGpuAgainstCpu<TypeParam>("type: 'Scale' scale_param { axis: 2 filler { type: 'gaussian' } bias_term: true bias_filler { type: 'gaussian' } }", {{3, 5, 24}}, kFill, ScaleGpuTolerance<TypeParam>());
  test::CheckGpuAgainstCpu<TypeParam>("type: 'Scale' scale_param { axis: 2 filler { type: 'gaussian' } bias_term: true bias_filler { type: 'gaussian' } }", {{3, 4, 5}}, kFill, ScaleGpuTolerance<TypeParam>());
  test::CheckGpuAgainstCpu<TypeParam>("type: 'Scale'", {{4, 2, 24}, {2, 24}}, kFill, ScaleGpuTolerance<TypeParam>());
}

TYPED_TEST(ScaleLayerTest, GpuMatchesCpuSecondBottom) {
  test::CheckGpuAgainstCpu<TypeParam>("type: 'Scale'", {{4, 5, 6}, {5, 6}}, kFill, ScaleGpuTolerance<TypeParam>());
}

std::string SetUpError(const std::string& text, const std::vector<std::vector<int>>& shapes) {
  ScaleLayer<float, float> layer(test::MakeParam<test::TypePair<float, float>>("name: 's' type: 'Scale' " + text));
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

TEST(ScaleLayerValidation, Fields) {
  EXPECT_EQ(SetUpError("scale_param { num_axes: -2 }", {{2, 3}}), "scale_param.num_axes");
  EXPECT_EQ(SetUpError("scale_param { axis: 2 }", {{2, 3}}), "scale_param.axis");
  EXPECT_EQ(SetUpError("scale_param { axis: 1 num_axes: 2 }", {{2, 3}}), "scale_param.num_axes");
  EXPECT_EQ(SetUpError("scale_param { filler { type: 'nonsense' } }", {{2, 3}}), "scale_param.filler.type");
  EXPECT_EQ(SetUpError("scale_param { bias_term: true bias_filler { type: 'nonsense' } }", {{2, 3}}),
            "scale_param.bias_filler.type");
  EXPECT_EQ(SetUpError("", {{2, 3, 4}, {3, 5}}), "scale_param.axis");
  EXPECT_EQ(SetUpError("", {{2, 3, 4}, {3, 4}}), "no error");
  EXPECT_EQ(SetUpError("scale_param { axis: -1 }", {{2, 3, 4}, {4}}), "no error");
}

}  // namespace
}  // namespace cortado
