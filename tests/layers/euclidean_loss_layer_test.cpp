#include "cortado/layers/euclidean_loss_layer.hpp"

#include "test_util.hpp"

namespace cortado {
namespace {

template <typename P>
class EuclideanLossLayerTest : public ::testing::Test {};
TYPED_TEST_SUITE(EuclideanLossLayerTest, test::AllPairs, test::PairNames);

// float16: the inputs are rounded once, the sum stays float, the gradient
// (a - b) * w / N is rounded once to Btype.
const test::ReferenceTolerance kTol{2, 2};

template <typename P>
test::GradientSettings Settings() {
  return test::GradientSettings().threshold(std::is_same_v<typename P::Ftype, double> ? 1e-4 : 1e-3);
}

TYPED_TEST(EuclideanLossLayerTest, ForwardBackwardValues) {
  using F = typename TypeParam::Ftype;
  using B = typename TypeParam::Btype;
  auto layer = test::NewLayer<TypeParam>("name: 'loss' type: 'EuclideanLoss'");
  test::Blobs bottom, top;
  bottom.add({2, 2}, type_of<F>(), {1, 2, 3, 4});
  bottom.add({2, 2, 1}, type_of<F>(), {0.5, 2, 5, 3});
  top.add(type_of<F>());
  layer->SetUp(bottom.vec, top.vec);
  EXPECT_EQ(layer->loss(0), 1.0);
  const double loss = layer->Forward(bottom.vec, top.vec);
  // d = (0.5, 0, -2, 1): sum d^2 = 5.25; / (2 * 2)
  EXPECT_EQ(top[0]->shape(), std::vector<int>{});
  EXPECT_NEAR(test::GetData(*top[0])[0], 5.25 / 4, 1e-6);
  EXPECT_NEAR(loss, 5.25 / 4, 1e-6);
  test::SetDiff(top[0], {2}, type_of<B>());
  layer->Backward(top.vec, {true, true}, bottom.vec);
  test::ExpectNear<B>(test::GetDiff(*bottom[0]), {0.5, 0, -2, 1}, 1);
  test::ExpectNear<B>(test::GetDiff(*bottom[1]), {-0.5, 0, 2, -1}, 1);
}

TYPED_TEST(EuclideanLossLayerTest, Gradient) {
  auto fill = [](int i, Blob* b) { test::FillGaussian(b, 0, 1, 3 + i); };
  test::CheckLayer<TypeParam>("type: 'EuclideanLoss'", {{4, 3, 2}, {4, 3, 2}}, fill, Settings<TypeParam>(), kTol);
}

TYPED_TEST(EuclideanLossLayerTest, CountMismatch) {
  using F = typename TypeParam::Ftype;
  auto layer = test::NewLayer<TypeParam>("name: 'loss' type: 'EuclideanLoss'");
  test::Blobs bottom, top;
  bottom.add({2, 3}, type_of<F>());
  bottom.add({2, 2}, type_of<F>());
  top.add(type_of<F>());
  try {
    layer->SetUp(bottom.vec, top.vec);
    ADD_FAILURE() << "bottoms of 6 and 4 values were accepted";
  } catch (const FieldError& e) {
    EXPECT_EQ(e.field(), "bottom[1]");
  }
}

// GPU against CPU: d = a - b is the same on both sides and the gradient is
// one rounded product, so the diffs agree to the unit; the loss differs only
// by the order of the float sum (few terms here: a few ulps). Bottoms of
// different shapes and one count, and a loss weight other than 1.
TYPED_TEST(EuclideanLossLayerTest, GpuMatchesCpu) {
  auto fill = [](int i, Blob* b) { test::FillGaussian(b, 0, 1, 20 + i); };
  test::CheckGpuAgainstCpu<TypeParam>("type: 'EuclideanLoss'", {{4, 5}, {4, 5, 1}}, fill, test::GpuTolerance{4, 1});
  test::CheckGpuAgainstCpu<TypeParam>("type: 'EuclideanLoss' loss_weight: 0.5", {{3, 2, 2}, {3, 4}}, fill,
                                      test::GpuTolerance{4, 1}, {true, true}, -1, 2);
}

// Enough elements for many blocks of the GPU's two-stage sum (and a second
// forward into the same buffers). The CPU adds the 3840 terms one after the
// other in float, which drifts from the exact sum by tens of ulps; the
// GPU's tree sum is close to exact.
TYPED_TEST(EuclideanLossLayerTest, GpuMatchesCpuManyBlocks) {
  auto fill = [](int i, Blob* b) { test::FillGaussian(b, 0, 1, 22 + i); };
  test::CheckGpuAgainstCpu<TypeParam>("type: 'EuclideanLoss'", {{16, 15, 4, 4}, {16, 240}}, fill,
                                      test::GpuTolerance{256, 1}, {true, true}, -1, 2);
}

// Only the second bottom receives a gradient (its sign is the negated one).
TYPED_TEST(EuclideanLossLayerTest, GpuMatchesCpuOneBottom) {
  auto fill = [](int i, Blob* b) { test::FillGaussian(b, 0, 1, 24 + i); };
  test::CheckGpuAgainstCpu<TypeParam>("type: 'EuclideanLoss'", {{4, 5}, {4, 5}}, fill, test::GpuTolerance{4, 1},
                                      {false, true});
}

}  // namespace
}  // namespace cortado
