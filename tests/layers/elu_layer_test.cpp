#include "cortado/layers/elu_layer.hpp"

#include <cmath>

#include "test_util.hpp"

namespace cortado {
namespace {

template <typename P>
class ELULayerTest : public ::testing::Test {};
TYPED_TEST_SUITE(ELULayerTest, test::AllPairs, test::PairNames);

// float16 tolerances: expm1 in float of a rounded input, one rounding: 1 eps
// forward; the backward uses the rounded output and rounds once more: 2 eps.
const test::ReferenceTolerance kTol{1, 2};

TYPED_TEST(ELULayerTest, ForwardBackwardValues) {
  auto f = [](double x) { return x > 0 ? x : 0.5 * (std::exp(x) - 1); };
  auto df = [](double x) { return x > 0 ? 1 : 0.5 * std::exp(x); };
  test::CheckEltwiseValues<TypeParam>("type: 'ELU' elu_param { alpha: 0.5 }", {5}, {-2, -0.5, 0, 0.75, 3},
                                      {1, -2, 0.5, 3, -1}, f, df, 1, 4);
}

TYPED_TEST(ELULayerTest, InPlaceMatchesOutOfPlace) {
  test::CheckInPlaceMatchesOutOfPlace<TypeParam>("type: 'ELU'", {3, 5}, -2, 2);
}

TYPED_TEST(ELULayerTest, Gradient) {
  auto fill = [](int, Blob* b) { test::FillUniform(b, -2, 2, 3); };
  test::CheckLayer<TypeParam>("type: 'ELU' elu_param { alpha: 0.7 }", {{2, 3, 4}}, fill,
                              test::GradientSettings().eltwise().kink(0, 2e-2), kTol);
}

TYPED_TEST(ELULayerTest, BadAlpha) {
  auto layer = test::NewLayer<TypeParam>("type: 'ELU' elu_param { alpha: nan }");
  test::Blobs bottom, top;
  bottom.add({2}, type_of<typename TypeParam::Ftype>());
  top.add(type_of<typename TypeParam::Ftype>());
  try {
    layer->SetUp(bottom.vec, top.vec);
    ADD_FAILURE() << "alpha nan accepted";
  } catch (const FieldError& e) {
    EXPECT_EQ(e.field(), "elu_param.alpha");
  }
}

// NVCaffe's lambda scales the output: SELU's constants, by hand. The
// derivative for x <= 0 is lambda * alpha * exp(x) (NVCaffe's backward,
// lambda * (alpha + y), would give lambda^2 * alpha * exp(x) + lambda * alpha *
// (1 - lambda) there).
TYPED_TEST(ELULayerTest, LambdaForwardBackwardValues) {
  const double a = static_cast<float>(1.6732632), l = static_cast<float>(1.0507010);  // the fields are float
  auto f = [=](double x) { return l * (x > 0 ? x : a * (std::exp(x) - 1)); };
  auto df = [=](double x) { return x > 0 ? l : l * a * std::exp(x); };
  test::CheckEltwiseValues<TypeParam>("type: 'ELU' elu_param { alpha: 1.6732632 lambda: 1.0507010 }", {5},
                                      {-2, -0.5, 0, 0.75, 3}, {1, -2, 0.5, 3, -1}, f, df, 2, 4);
}

TYPED_TEST(ELULayerTest, LambdaInPlaceMatchesOutOfPlace) {
  test::CheckInPlaceMatchesOutOfPlace<TypeParam>("type: 'ELU' elu_param { alpha: 0.5 lambda: 2.5 }", {3, 5}, -2, 2);
}

// A lambda far from 1, where a backward that is exact only for lambda = 1
// would fail the finite differences.
TYPED_TEST(ELULayerTest, LambdaGradient) {
  auto fill = [](int, Blob* b) { test::FillUniform(b, -2, 2, 7); };
  test::CheckLayer<TypeParam>("type: 'ELU' elu_param { alpha: 0.7 lambda: 3 }", {{2, 3, 4}}, fill,
                              test::GradientSettings().eltwise().kink(0, 2e-2), kTol);
}

TYPED_TEST(ELULayerTest, BadLambda) {
  for (const char* lambda : {"0", "-1", "inf"}) {
    auto layer = test::NewLayer<TypeParam>(std::string("type: 'ELU' elu_param { lambda: ") + lambda + " }");
    test::Blobs bottom, top;
    bottom.add({2}, type_of<typename TypeParam::Ftype>());
    top.add(type_of<typename TypeParam::Ftype>());
    try {
      layer->SetUp(bottom.vec, top.vec);
      ADD_FAILURE() << "lambda " << lambda << " accepted";
    } catch (const FieldError& e) {
      EXPECT_EQ(e.field(), "elu_param.lambda");
    }
  }
}

// GPU against CPU: expm1f on device and host differ by up to 2 ulps of math_t.
TYPED_TEST(ELULayerTest, GpuMatchesCpu) {
  auto fill = [](int, Blob* b) { test::FillUniform(b, -2, 2, 5); };
  test::CheckGpuAgainstCpu<TypeParam>("type: 'ELU' elu_param { alpha: 0.7 }", {{2, 3, 4}}, fill,
                                      test::GpuTolerance{4, 8});
}

TYPED_TEST(ELULayerTest, GpuMatchesCpuLambda) {
  auto fill = [](int, Blob* b) { test::FillUniform(b, -2, 2, 6); };
  test::CheckGpuAgainstCpu<TypeParam>("type: 'ELU' elu_param { alpha: 1.6732632 lambda: 1.0507010 }", {{2, 3, 4}},
                                      fill, test::GpuTolerance{4, 8});
}

}  // namespace
}  // namespace cortado
