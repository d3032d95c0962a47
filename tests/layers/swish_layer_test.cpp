#include "cortado/layers/swish_layer.hpp"

#include <cmath>

#include "test_util.hpp"

namespace cortado {
namespace {

template <typename P>
class SwishLayerTest : public ::testing::Test {};
TYPED_TEST_SUITE(SwishLayerTest, test::AllPairs, test::PairNames);

// 16-bit tolerances: x s in float of a rounded input, rounded once: 2 eps
// forward; the backward reads the rounded y and s and rounds once more.
const test::ReferenceTolerance kTol{2, 8};

TYPED_TEST(SwishLayerTest, ForwardBackwardValues) {
  const double beta = 1.5;
  auto sig = [beta](double x) { return 1 / (1 + std::exp(-beta * x)); };
  auto f = [sig](double x) { return x * sig(x); };
  auto df = [sig, beta](double x) { return sig(x) + beta * x * sig(x) * (1 - sig(x)); };
  test::CheckEltwiseValues<TypeParam>("type: 'Swish' swish_param { beta: 1.5 }", {6}, {-6, -1, -0.25, 0, 0.5, 3},
                                      {1, -2, 0.5, 3, -1, 2}, f, df, 2, 8);
}

TYPED_TEST(SwishLayerTest, InPlaceMatchesOutOfPlace) {
  test::CheckInPlaceMatchesOutOfPlace<TypeParam>("type: 'Swish'", {3, 5}, -3, 3);
}

TYPED_TEST(SwishLayerTest, Gradient) {
  auto fill = [](int, Blob* b) { test::FillUniform(b, -3, 3, 3); };
  test::CheckLayer<TypeParam>("type: 'Swish' swish_param { beta: 0.75 }", {{2, 3, 4}}, fill,
                              test::GradientSettings().eltwise(), kTol);
}

TYPED_TEST(SwishLayerTest, BadBeta) {
  test::ExpectSetUpFieldError<TypeParam>("type: 'Swish' swish_param { beta: inf }", "swish_param.beta");
}

// GPU against CPU: expf on device and host differ by up to 2 ulps of math_t.
TYPED_TEST(SwishLayerTest, GpuMatchesCpu) {
  auto fill = [](int, Blob* b) { test::FillUniform(b, -3, 3, 5); };
  test::CheckGpuAgainstCpu<TypeParam>("type: 'Swish' swish_param { beta: 1.25 }", {{2, 3, 4}}, fill,
                                      test::GpuTolerance{4, 8});
}

}  // namespace
}  // namespace cortado
