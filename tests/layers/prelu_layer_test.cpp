#include "cortado/layers/prelu_layer.hpp"

#include "test_util.hpp"

namespace cortado {
namespace {

template <typename P>
class PReLULayerTest : public ::testing::Test {};
TYPED_TEST_SUITE(PReLULayerTest, test::AllPairs, test::PairNames);

// float16 tolerances: y and dx are one product rounded once (1 eps); the
// slope gradient sums 2 * 4 * 5 = 40 products per channel in float, each
// with a float16-rounded dy and x, then rounds: 8 eps relative to
// max(1, |sum|).
const test::ReferenceTolerance kTol{1, 8};

TYPED_TEST(PReLULayerTest, DefaultSlopeAndShapes) {
  using F = typename TypeParam::Ftype;
  auto layer = test::NewLayer<TypeParam>("type: 'PReLU'");
  test::Blobs bottom, top;
  bottom.add({2, 3, 2}, type_of<F>());
  top.add(type_of<F>());
  layer->SetUp(bottom.vec, top.vec);
  ASSERT_EQ(layer->blobs().size(), 1u);
  EXPECT_EQ(layer->blobs()[0]->shape(), (std::vector<int>{3}));
  test::ExpectNear<F>(test::GetData(*layer->blobs()[0]), {0.25, 0.25, 0.25}, 0);
  auto shared = test::NewLayer<TypeParam>("type: 'PReLU' prelu_param { channel_shared: true }");
  shared->SetUp(bottom.vec, top.vec);
  EXPECT_EQ(shared->blobs()[0]->count(), 1u);
}

TYPED_TEST(PReLULayerTest, ForwardBackwardValues) {
  using F = typename TypeParam::Ftype;
  using B = typename TypeParam::Btype;
  auto layer = test::NewLayer<TypeParam>("type: 'PReLU'");
  test::Blobs bottom, top;
  // N = 2, C = 2, dim = 2
  bottom.add({2, 2, 2}, type_of<F>(), {-1, 2, -4, 3, 1, -2, -0.5, -8});
  top.add(type_of<F>());
  layer->SetUp(bottom.vec, top.vec);
  test::SetData(layer->blobs()[0].get(), {0.5, 0.25});
  layer->Forward(bottom.vec, top.vec);
  test::ExpectNear<F>(test::GetData(*top[0]), {-0.5, 2, -1, 3, 1, -1, -0.125, -2}, 0);
  test::SetDiff(top[0], {1, 1, 2, 1, 1, 3, 4, -1}, type_of<B>());
  layer->blobs()[0]->diff().set_zero();
  layer->Backward(top.vec, {true}, bottom.vec);
  test::ExpectNear<B>(test::GetDiff(*bottom[0]), {0.5, 1, 0.5, 1, 1, 1.5, 1, -0.25}, 0);
  // channel 0: dy*x at x<=0: 1*-1 + 3*-2 = -7; channel 1: 2*-4 + 4*-0.5 + -1*-8 = -2
  test::ExpectNear<B>(test::GetDiff(*layer->blobs()[0]), {-7, -2}, 0);
}

TYPED_TEST(PReLULayerTest, InPlaceMatchesOutOfPlace) {
  using F = typename TypeParam::Ftype;
  using B = typename TypeParam::Btype;
  auto a = test::NewLayer<TypeParam>("type: 'PReLU'");
  auto b = test::NewLayer<TypeParam>("type: 'PReLU'");
  test::Blobs x, y, z;
  test::FillUniform(x.add({2, 3, 4}, type_of<F>()), -1, 1, 11);
  test::FillUniform(z.add({2, 3, 4}, type_of<F>()), -1, 1, 11);
  y.add(type_of<F>());
  a->SetUp(x.vec, y.vec);
  b->SetUp(z.vec, z.vec);
  test::SetData(a->blobs()[0].get(), {0.1, -0.3, 0.7});
  test::SetData(b->blobs()[0].get(), {0.1, -0.3, 0.7});
  a->Forward(x.vec, y.vec);
  b->Forward(z.vec, z.vec);
  EXPECT_EQ(test::GetData(*y[0]), test::GetData(*z[0]));
  const std::vector<double> d = test::RandomVector(24, 5);
  test::SetDiff(y[0], d, type_of<B>());
  test::SetDiff(z[0], d, type_of<B>());
  a->blobs()[0]->diff().set_zero();
  b->blobs()[0]->diff().set_zero();
  a->Backward(y.vec, {true}, x.vec);
  b->Backward(z.vec, {true}, z.vec);
  EXPECT_EQ(test::GetDiff(*x[0]), test::GetDiff(*z[0]));
  EXPECT_EQ(test::GetDiff(*a->blobs()[0]), test::GetDiff(*b->blobs()[0]));
}

TYPED_TEST(PReLULayerTest, Gradient) {
  auto fill = [](int, Blob* b) { test::FillUniform(b, -1, 1, 3); };
  test::CheckLayer<TypeParam>("type: 'PReLU' prelu_param { filler { type: 'uniform' min: -0.5 max: 0.5 } }",
                              {{2, 3, 4, 5}}, fill, test::GradientSettings().eltwise().kink(0, 2e-2), kTol);
}

TYPED_TEST(PReLULayerTest, GradientShared) {
  auto fill = [](int, Blob* b) { test::FillUniform(b, -1, 1, 4); };
  // One slope summing all 120 products: float16 pairs get 16 eps.
  test::CheckLayer<TypeParam>("type: 'PReLU' prelu_param { channel_shared: true }", {{2, 3, 4, 5}}, fill,
                              test::GradientSettings().eltwise().kink(0, 2e-2), test::ReferenceTolerance{1, 16});
}

TYPED_TEST(PReLULayerTest, BadBottom) {
  auto layer = test::NewLayer<TypeParam>("type: 'PReLU'");
  test::Blobs bottom, top;
  bottom.add({5}, type_of<typename TypeParam::Ftype>());
  top.add(type_of<typename TypeParam::Ftype>());
  try {
    layer->SetUp(bottom.vec, top.vec);
    ADD_FAILURE() << "1-axis bottom accepted";
  } catch (const FieldError& e) {
    EXPECT_EQ(e.field(), "bottom");
  }
}

TYPED_TEST(PReLULayerTest, KeepsGivenSlopes) {
  using F = typename TypeParam::Ftype;
  auto layer = test::NewLayer<TypeParam>("type: 'PReLU'");
  test::Blobs bottom, top;
  bottom.add({1, 2, 1}, type_of<F>(), {-1, -2});
  top.add(type_of<F>());
  layer->SetUp(bottom.vec, top.vec);
  test::SetData(layer->blobs()[0].get(), {0.5, 2});
  layer->SetUp(bottom.vec, top.vec);  // a second SetUp (weights loaded) keeps the slopes
  layer->Forward(bottom.vec, top.vec);
  test::ExpectNear<F>(test::GetData(*top[0]), {-0.5, -4}, 0);
  test::Blobs wider;
  wider.add({1, 3, 1}, type_of<F>());
  try {
    layer->SetUp(wider.vec, top.vec);
    ADD_FAILURE() << "2 slopes accepted for 3 channels";
  } catch (const FieldError& e) {
    EXPECT_EQ(e.field(), "prelu_param.channel_shared");
  }
}

// GPU against CPU: y and dx are the same expression (exact); the slope sums
// are reduced in a different order (a few ulps of the sum).
TYPED_TEST(PReLULayerTest, GpuMatchesCpu) {
  auto fill = [](int, Blob* b) { test::FillUniform(b, -1, 1, 5); };
  test::CheckGpuAgainstCpu<TypeParam>("type: 'PReLU' prelu_param { filler { type: 'uniform' min: -0.5 max: 0.5 } }",
                                      {{2, 3, 4, 5}}, fill, test::GpuTolerance{0, 16});
}

}  // namespace
}  // namespace cortado
