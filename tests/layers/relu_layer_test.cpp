#include "cortado/layers/relu_layer.hpp"

#include "test_util.hpp"

namespace cortado {
namespace {

template <typename P>
class ReLULayerTest : public ::testing::Test {};
TYPED_TEST_SUITE(ReLULayerTest, test::AllPairs, test::PairNames);

// float16 tolerances: the forward is exact up to the rounding of
// negative_slope * x (half an ulp); the backward likewise.
const test::ReferenceTolerance kTol{1, 1};

TYPED_TEST(ReLULayerTest, ForwardValues) {
  using F = typename TypeParam::Ftype;
  auto layer = test::NewLayer<TypeParam>("name: 'r' type: 'ReLU' relu_param { negative_slope: 0.25 }");
  test::Blobs bottom, top;
  bottom.add({2, 3}, type_of<F>(), {-2, -0.5, 0, 1.5, 3, -8});
  top.add(type_of<F>());
  layer->SetUp(bottom.vec, top.vec);
  layer->Forward(bottom.vec, top.vec);
  EXPECT_EQ(top[0]->shape(), (std::vector<int>{2, 3}));
  test::ExpectNear<F>(test::GetData(*top[0]), {-0.5, -0.125, 0, 1.5, 3, -2}, 0.5);
}

TYPED_TEST(ReLULayerTest, BackwardValues) {
  using F = typename TypeParam::Ftype;
  using B = typename TypeParam::Btype;
  auto layer = test::NewLayer<TypeParam>("type: 'ReLU'");
  test::Blobs bottom, top;
  bottom.add({4}, type_of<F>(), {-1, 2, -3, 4});
  top.add(type_of<F>());
  layer->SetUp(bottom.vec, top.vec);
  layer->Forward(bottom.vec, top.vec);
  test::ExpectNear<F>(test::GetData(*top[0]), {0, 2, 0, 4}, 0);
  test::SetDiff(top[0], {10, 20, 30, 40}, type_of<B>());
  layer->Backward(top.vec, {true}, bottom.vec);
  test::ExpectNear<B>(test::GetDiff(*bottom[0]), {0, 20, 0, 40}, 0);
}

TYPED_TEST(ReLULayerTest, InPlaceMatchesOutOfPlace) {
  using F = typename TypeParam::Ftype;
  using B = typename TypeParam::Btype;
  const std::string text = "type: 'ReLU' relu_param { negative_slope: 0.1 }";
  auto a = test::NewLayer<TypeParam>(text);
  auto b = test::NewLayer<TypeParam>(text);
  test::Blobs x, y, z;
  test::FillUniform(x.add({3, 5}, type_of<F>()), -1, 1, 11);
  test::FillUniform(z.add({3, 5}, type_of<F>()), -1, 1, 11);  // same values, computed in place
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

TYPED_TEST(ReLULayerTest, Gradient) {
  auto fill = [](int, Blob* b) { test::FillUniform(b, -1, 1, 1); };
  test::CheckLayer<TypeParam>("type: 'ReLU'", {{2, 3, 4, 5}}, fill,
                              test::GradientSettings().eltwise().kink(0, 2e-2), kTol);
}

TYPED_TEST(ReLULayerTest, LeakyGradient) {
  auto fill = [](int, Blob* b) { test::FillUniform(b, -1, 1, 2); };
  test::CheckLayer<TypeParam>("type: 'ReLU' relu_param { negative_slope: 0.01 }", {{2, 3, 4, 5}}, fill,
                              test::GradientSettings().eltwise().kink(0, 2e-2), kTol);
}

// The GPU computes the same float expression per element: exact.
TYPED_TEST(ReLULayerTest, GpuMatchesCpu) {
  auto fill = [](int, Blob* b) { test::FillUniform(b, -1, 1, 3); };
  test::CheckGpuAgainstCpu<TypeParam>("type: 'ReLU' relu_param { negative_slope: 0.1 }", {{2, 3, 4, 5}}, fill,
                                      test::GpuTolerance{0, 0});
}

}  // namespace
}  // namespace cortado
