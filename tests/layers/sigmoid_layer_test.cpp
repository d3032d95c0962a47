#include "cortado/layers/sigmoid_layer.hpp"

#include <cmath>

#include "test_util.hpp"

namespace cortado {
namespace {

template <typename P>
class SigmoidLayerTest : public ::testing::Test {};
TYPED_TEST_SUITE(SigmoidLayerTest, test::AllPairs, test::PairNames);

// float16 tolerances: the function is evaluated in float on rounded inputs
// and rounded once (half an ulp); the backward reads the rounded output.
const test::ReferenceTolerance kTol{1, 4};

double Fn(double v) { return 1 / (1 + std::exp(-v)); }
double Deriv(double v) {
  const double s = Fn(v);
  return s * (1 - s);
}

// Ulps: 1 forward; 8 backward, since the derivative is computed from the
// stored output.
TYPED_TEST(SigmoidLayerTest, ForwardBackwardValues) {
  test::CheckEltwiseValues<TypeParam>("name: 's' type: 'Sigmoid'", {2, 3}, {-3, -1, 0, 0.5, 2, 20},
                                      {1, -2, 0.5, 3, -1, 2}, Fn, Deriv, 1, 8);
}

TYPED_TEST(SigmoidLayerTest, InPlaceMatchesOutOfPlace) {
  test::CheckInPlaceMatchesOutOfPlace<TypeParam>("type: 'Sigmoid'", {4, 5}, -3, 3);
}

TYPED_TEST(SigmoidLayerTest, Gradient) {
  auto fill = [](int, Blob* b) { test::FillGaussian(b, 0, 1.5, 3); };
  test::CheckLayer<TypeParam>("type: 'Sigmoid'", {{2, 3, 4, 5}}, fill, test::GradientSettings().eltwise(), kTol);
}

// GPU against CPU: CUDA's expf and the host's differ by up to 2 ulps of
// math_t before the division and the rounding to the storage type.
TYPED_TEST(SigmoidLayerTest, GpuMatchesCpu) {
  auto fill = [](int, Blob* b) { test::FillGaussian(b, 0, 3, 13); };
  test::CheckGpuAgainstCpu<TypeParam>("type: 'Sigmoid'", {{2, 3, 4, 5}}, fill, test::GpuTolerance{4, 8});
}

}  // namespace
}  // namespace cortado
