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

TYPED_TEST(SigmoidLayerTest, ForwardBackwardValues) {
  using F = typename TypeParam::Ftype;
  using B = typename TypeParam::Btype;
  auto layer = test::NewLayer<TypeParam>("name: 's' type: 'Sigmoid'");
  const std::vector<double> x = {-3, -1, 0, 0.5, 2, 20};
  test::Blobs bottom, top;
  bottom.add({2, 3}, type_of<F>(), x);
  top.add(type_of<F>());
  layer->SetUp(bottom.vec, top.vec);
  layer->Forward(bottom.vec, top.vec);
  std::vector<double> want(x.size()), dwant(x.size()), dy = {1, -2, 0.5, 3, -1, 2};
  for (size_t i = 0; i < x.size(); ++i) {
    want[i] = Fn(x[i]);
    dwant[i] = dy[i] * Deriv(x[i]);
  }
  test::ExpectNear<F>(test::GetData(*top[0]), want, 1);
  test::SetDiff(top[0], dy, type_of<B>());
  layer->Backward(top.vec, {true}, bottom.vec);
  // The derivative is computed from the stored output: a few ulps of F.
  test::ExpectNear<test::Coarser<TypeParam>>(test::GetDiff(*bottom[0]), dwant, 8);
}

TYPED_TEST(SigmoidLayerTest, InPlaceMatchesOutOfPlace) {
  using F = typename TypeParam::Ftype;
  using B = typename TypeParam::Btype;
  auto a = test::NewLayer<TypeParam>("type: 'Sigmoid'");
  auto b = test::NewLayer<TypeParam>("type: 'Sigmoid'");
  test::Blobs x, y, z;
  test::FillUniform(x.add({4, 5}, type_of<F>()), -3, 3, 11);
  test::FillUniform(z.add({4, 5}, type_of<F>()), -3, 3, 11);
  y.add(type_of<F>());
  a->SetUp(x.vec, y.vec);
  b->SetUp(z.vec, z.vec);
  a->Forward(x.vec, y.vec);
  b->Forward(z.vec, z.vec);
  EXPECT_EQ(test::GetData(*y[0]), test::GetData(*z[0]));
  const std::vector<double> d = test::RandomVector(20, 5);
  test::SetDiff(y[0], d, type_of<B>());
  test::SetDiff(z[0], d, type_of<B>());
  a->Backward(y.vec, {true}, x.vec);
  b->Backward(z.vec, {true}, z.vec);
  EXPECT_EQ(test::GetDiff(*x[0]), test::GetDiff(*z[0]));
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
