#include "cortado/layers/softmax_layer.hpp"

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "test_util.hpp"

namespace cortado {
namespace {

template <typename P>
class SoftmaxLayerTest : public ::testing::Test {};
TYPED_TEST_SUITE(SoftmaxLayerTest, test::AllPairs, test::PairNames);

// float16 tolerances: probabilities are computed in float and rounded once
// (half an ulp, relative to max(1, |p|)); the backward reads rounded
// probabilities and sums C products in float.
const test::ReferenceTolerance kTol{1, 4};

// Finite differences: in double a small step and a tight threshold (the
// truncation error is ~step^2); in float the defaults.
template <typename P>
test::GradientSettings Settings() {
  if (std::is_same_v<typename P::Ftype, double>) return test::GradientSettings().step(1e-3).threshold(1e-6);
  return test::GradientSettings();
}

TYPED_TEST(SoftmaxLayerTest, ForwardValues) {
  using F = typename TypeParam::Ftype;
  auto layer = test::NewLayer<TypeParam>("name: 's' type: 'Softmax'");
  test::Blobs bottom, top;
  // (2, 3): the second row is the first shifted by 1000 (max subtraction).
  bottom.add({2, 3}, type_of<F>(), {1, 2, 3, 1001, 1002, 1003});
  top.add(type_of<F>());
  layer->SetUp(bottom.vec, top.vec);
  layer->Forward(bottom.vec, top.vec);
  // From the inputs as stored: bfloat16 (ulp 4 at 1000) holds the second
  // row as {1000, 1000, 1004}.
  const std::vector<double> x = test::GetData(*bottom[0]);
  std::vector<double> want(6);
  for (int r = 0; r < 2; ++r) {
    const double* row = &x[3 * r];
    const double m = std::max({row[0], row[1], row[2]});
    const double s = std::exp(row[0] - m) + std::exp(row[1] - m) + std::exp(row[2] - m);
    for (int c = 0; c < 3; ++c) want[3 * r + c] = std::exp(row[c] - m) / s;
  }
  if (!std::is_same_v<F, bfloat16>) {  // the shift by 1000 is exact: both rows alike
    for (int c = 0; c < 3; ++c) EXPECT_EQ(want[c], want[3 + c]);
  }
  test::ExpectNear<F>(test::GetData(*top[0]), want, 1);
}

TYPED_TEST(SoftmaxLayerTest, AxisSumsToOne) {
  using F = typename TypeParam::Ftype;
  auto layer = test::NewLayer<TypeParam>("type: 'Softmax' softmax_param { axis: -2 }");
  test::Blobs bottom, top;
  test::FillUniform(bottom.add({2, 4, 5, 3}, type_of<F>()), -4, 4, 7);
  top.add(type_of<F>());
  layer->SetUp(bottom.vec, top.vec);
  layer->Forward(bottom.vec, top.vec);
  const std::vector<double> x = test::GetData(*bottom[0]), y = test::GetData(*top[0]);
  for (int n = 0; n < 8; ++n) {
    for (int i = 0; i < 3; ++i) {
      double z = 0, sum = 0;
      for (int c = 0; c < 5; ++c) z += std::exp(x[n * 15 + c * 3 + i]);
      for (int c = 0; c < 5; ++c) {
        const double p = std::exp(x[n * 15 + c * 3 + i]) / z;
        EXPECT_NEAR(y[n * 15 + c * 3 + i], p, type_epsilon<F>()) << n << " " << c << " " << i;
        sum += y[n * 15 + c * 3 + i];
      }
      EXPECT_NEAR(sum, 1, 5 * type_epsilon<F>());
    }
  }
}

TYPED_TEST(SoftmaxLayerTest, BadAxis) {
  using F = typename TypeParam::Ftype;
  auto layer = test::NewLayer<TypeParam>("name: 's' type: 'Softmax' softmax_param { axis: 2 }");
  test::Blobs bottom, top;
  bottom.add({2, 3}, type_of<F>());
  top.add(type_of<F>());
  try {
    layer->SetUp(bottom.vec, top.vec);
    ADD_FAILURE() << "axis 2 of a 2-axis bottom was accepted";
  } catch (const FieldError& e) {
    EXPECT_EQ(e.field(), "softmax_param.axis");
    EXPECT_NE(std::string(e.what()).find("got 2"), std::string::npos) << e.what();
  }
}

TYPED_TEST(SoftmaxLayerTest, InPlaceMatchesOutOfPlace) {
  using F = typename TypeParam::Ftype;
  using B = typename TypeParam::Btype;
  auto a = test::NewLayer<TypeParam>("type: 'Softmax'");
  auto b = test::NewLayer<TypeParam>("type: 'Softmax'");
  test::Blobs x, y, z;
  test::FillUniform(x.add({3, 4, 2}, type_of<F>()), -2, 2, 11);
  test::FillUniform(z.add({3, 4, 2}, type_of<F>()), -2, 2, 11);
  y.add(type_of<F>());
  a->SetUp(x.vec, y.vec);
  b->SetUp(z.vec, z.vec);
  a->Forward(x.vec, y.vec);
  b->Forward(z.vec, z.vec);
  EXPECT_EQ(test::GetData(*y[0]), test::GetData(*z[0]));
  const std::vector<double> d = test::RandomVector(24, 5);
  test::SetDiff(y[0], d, type_of<B>());
  test::SetDiff(z[0], d, type_of<B>());
  a->Backward(y.vec, {true}, x.vec);
  b->Backward(z.vec, {true}, z.vec);
  EXPECT_EQ(test::GetDiff(*x[0]), test::GetDiff(*z[0]));
}

TYPED_TEST(SoftmaxLayerTest, Gradient) {
  auto fill = [](int, Blob* b) { test::FillGaussian(b, 0, 1, 5); };
  test::CheckLayer<TypeParam>("type: 'Softmax'", {{2, 4, 2, 3}}, fill, Settings<TypeParam>(), kTol);
}

TYPED_TEST(SoftmaxLayerTest, GradientLastAxis) {
  auto fill = [](int, Blob* b) { test::FillGaussian(b, 0, 2, 6); };
  test::CheckLayer<TypeParam>("type: 'Softmax' softmax_param { axis: -1 }", {{3, 7}}, fill,
                              Settings<TypeParam>(), kTol);
}

// GPU against CPU, both kernels: rows (inner == 1, one warp per row, more
// channels than lanes) and columns (inner > 1). expf and the summation order
// differ from the host's: a few ulps of math_t.
TYPED_TEST(SoftmaxLayerTest, GpuMatchesCpu) {
  auto fill = [](int, Blob* b) { test::FillGaussian(b, 0, 2, 15); };
  test::CheckGpuAgainstCpu<TypeParam>("type: 'Softmax' softmax_param { axis: -1 }", {{5, 77}}, fill,
                                      test::GpuTolerance{16, 32});
  test::CheckGpuAgainstCpu<TypeParam>("type: 'Softmax'", {{2, 6, 3, 5}}, fill, test::GpuTolerance{16, 32});
}

}  // namespace
}  // namespace cortado
