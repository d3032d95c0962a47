#include "cortado/layers/clip_layer.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "test_util.hpp"

namespace cortado {
namespace {

template <typename P>
class ClipLayerTest : public ::testing::Test {};
TYPED_TEST_SUITE(ClipLayerTest, test::AllPairs, test::PairNames);

// 16-bit tolerances: the forward returns an input or a bound, rounded once
// (1 eps for a bound the type does not hold); the backward copies dy.
const test::ReferenceTolerance kTol{1, 0};

TYPED_TEST(ClipLayerTest, ForwardBackwardValues) {
  // ReLU6: the gradient passes strictly inside [0, 6], not at the bounds.
  auto f = [](double x) { return std::min(std::max(x, 0.0), 6.0); };
  auto df = [](double x) { return x > 0 && x < 6 ? 1.0 : 0.0; };
  test::CheckEltwiseValues<TypeParam>("type: 'Clip' clip_param { min: 0 max: 6 }", {7}, {-3, 0, 0.5, 2, 6, 6.5, 100},
                                      {1, 2, 3, -4, 5, 6, 7}, f, df, 0, 0);
}

// A bound no 16-bit type holds: a clipped value is stored as the rounded
// bound (0.1 is 0.0999756 in float16), and its gradient must still be 0.
TYPED_TEST(ClipLayerTest, InexactBoundsStopTheGradient) {
  // The fields are floats: the bounds are float(-0.3) and float(0.1).
  const double lo = static_cast<float>(-0.3), hi = static_cast<float>(0.1);
  auto f = [=](double x) { return std::min(std::max(x, lo), hi); };
  auto df = [=](double x) { return x > lo && x < hi ? 1.0 : 0.0; };
  test::CheckEltwiseValues<TypeParam>("type: 'Clip' clip_param { min: -0.3 max: 0.1 }", {6},
                                      {-2, -0.35, -0.1, 0.05, 0.125, 7}, {1, 2, 3, -4, 5, 6}, f, df, 1, 0);
  test::CheckInPlaceMatchesOutOfPlace<TypeParam>("type: 'Clip' clip_param { min: -0.3 max: 0.1 }", {4, 5}, -1, 1);
}

TYPED_TEST(ClipLayerTest, InPlaceMatchesOutOfPlace) {
  test::CheckInPlaceMatchesOutOfPlace<TypeParam>("type: 'Clip' clip_param { min: -0.5 max: 1 }", {3, 5}, -2, 2);
}

TYPED_TEST(ClipLayerTest, Gradient) {
  // Values kept 0.05 away from the bounds, where the derivative jumps.
  auto fill = [](int, Blob* b) {
    test::FillUniform(b, -2, 2, 3);
    std::vector<double> v = test::GetData(*b);
    for (double& x : v)
      for (double bound : {-1.0, 1.25})
        if (std::fabs(x - bound) < 0.05) x = bound + (x < bound ? -0.05 : 0.05);
    test::SetData(b, v);
  };
  test::CheckLayer<TypeParam>("type: 'Clip' clip_param { min: -1 max: 1.25 }", {{2, 3, 4}}, fill,
                              test::GradientSettings().eltwise(), kTol);
}

TYPED_TEST(ClipLayerTest, BadBounds) {
  auto expect_error = test::ExpectSetUpFieldError<TypeParam>;
  expect_error("type: 'Clip'", "clip_param.min");
  expect_error("type: 'Clip' clip_param { min: 0 }", "clip_param.max");
  expect_error("type: 'Clip' clip_param { min: 2 max: 1 }", "clip_param.max");
  expect_error("type: 'Clip' clip_param { min: -inf max: 1 }", "clip_param.min");
  expect_error("type: 'Clip' clip_param { min: 0 max: nan }", "clip_param.max");
}

TYPED_TEST(ClipLayerTest, GpuMatchesCpu) {
  auto fill = [](int, Blob* b) { test::FillUniform(b, -2, 2, 5); };
  test::CheckGpuAgainstCpu<TypeParam>("type: 'Clip' clip_param { min: -0.75 max: 1.5 }", {{2, 3, 4}}, fill,
                                      test::GpuTolerance{0, 0});
}

}  // namespace
}  // namespace cortado
