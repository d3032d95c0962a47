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
  using F = typename TypeParam::Ftype;
  using B = typename TypeParam::Btype;
  auto layer = test::NewLayer<TypeParam>("type: 'ELU' elu_param { alpha: 0.5 }");
  const std::vector<double> x = {-2, -0.5, 0, 0.75, 3};
  test::Blobs bottom, top;
  bottom.add({5}, type_of<F>(), x);
  top.add(type_of<F>());
  layer->SetUp(bottom.vec, top.vec);
  layer->Forward(bottom.vec, top.vec);
  std::vector<double> want, dwant;
  const std::vector<double> dy = {1, -2, 0.5, 3, -1};
  for (size_t i = 0; i < x.size(); ++i) {
    want.push_back(x[i] > 0 ? x[i] : 0.5 * (std::exp(x[i]) - 1));
    dwant.push_back(dy[i] * (x[i] > 0 ? 1 : 0.5 * std::exp(x[i])));
  }
  test::ExpectNear<F>(test::GetData(*top[0]), want, 1);
  test::SetDiff(top[0], dy, type_of<B>());
  layer->Backward(top.vec, {true}, bottom.vec);
  test::ExpectNear<test::Coarser<TypeParam>>(test::GetDiff(*bottom[0]), dwant, 4);
}

TYPED_TEST(ELULayerTest, InPlaceMatchesOutOfPlace) {
  using F = typename TypeParam::Ftype;
  using B = typename TypeParam::Btype;
  auto a = test::NewLayer<TypeParam>("type: 'ELU'");
  auto b = test::NewLayer<TypeParam>("type: 'ELU'");
  test::Blobs x, y, z;
  test::FillUniform(x.add({3, 5}, type_of<F>()), -2, 2, 11);
  test::FillUniform(z.add({3, 5}, type_of<F>()), -2, 2, 11);
  y.add(type_of<F>());
  a->SetUp(x.vec, y.vec);
  b->SetUp(z.vec, z.vec);
  a->Forward(x.vec, y.vec);
  b->Forward(z.vec, z.vec);
  EXPECT_EQ(test::GetData(*y[0]), test::GetData(*z[0]));
  const std::vector<double> d = test::RandomVector(15, 5);
  test::SetDiff(y[0], d, type_of<B>());
  test::SetDiff(z[0], d, type_of<B>());
  a->Backward(y.vec, {true}, x.vec);
  b->Backward(z.vec, {true}, z.vec);
  EXPECT_EQ(test::GetDiff(*x[0]), test::GetDiff(*z[0]));
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

// GPU against CPU: expm1f on device and host differ by up to 2 ulps of math_t.
TYPED_TEST(ELULayerTest, GpuMatchesCpu) {
  auto fill = [](int, Blob* b) { test::FillUniform(b, -2, 2, 5); };
  test::CheckGpuAgainstCpu<TypeParam>("type: 'ELU' elu_param { alpha: 0.7 }", {{2, 3, 4}}, fill,
                                      test::GpuTolerance{4, 8});
}

}  // namespace
}  // namespace cortado
