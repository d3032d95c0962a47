#include "cortado/layers/bnll_layer.hpp"

#include <cmath>

#include "layers/in_place.hpp"
#include "test_util.hpp"

namespace cortado {
namespace {

template <typename P>
class BNLLLayerTest : public ::testing::Test {};
TYPED_TEST_SUITE(BNLLLayerTest, test::AllPairs, test::PairNames);

// float16 tolerances: softplus in float of a rounded input, one rounding:
// 1 eps forward; the backward (sigmoid times rounded dy) rounds once: 2 eps.
const test::ReferenceTolerance kTol{1, 2};

TYPED_TEST(BNLLLayerTest, ForwardBackwardValues) {
  using F = typename TypeParam::Ftype;
  using B = typename TypeParam::Btype;
  auto layer = test::NewLayer<TypeParam>("type: 'BNLL'");
  const std::vector<double> x = {-3, -0.5, 0, 1, 4, 60};
  test::Blobs bottom, top;
  bottom.add({6}, type_of<F>(), x);
  top.add(type_of<F>());
  layer->SetUp(bottom.vec, top.vec);
  layer->Forward(bottom.vec, top.vec);
  std::vector<double> want, dwant;
  const std::vector<double> dy = {1, -2, 0.5, 3, -1, 2};
  for (size_t i = 0; i < x.size(); ++i) {
    want.push_back(x[i] > 30 ? x[i] : std::log(1 + std::exp(x[i])));
    dwant.push_back(dy[i] / (1 + std::exp(-x[i])));
  }
  test::ExpectNear<F>(test::GetData(*top[0]), want, 1);
  test::SetDiff(top[0], dy, type_of<B>());
  layer->Backward(top.vec, {true}, bottom.vec);
  test::ExpectNear<B>(test::GetDiff(*bottom[0]), dwant, 2);
}

TYPED_TEST(BNLLLayerTest, Gradient) {
  auto fill = [](int, Blob* b) { test::FillGaussian(b, 0, 2, 3); };
  test::CheckLayer<TypeParam>("type: 'BNLL'", {{2, 3, 4}}, fill, test::GradientSettings().eltwise(), kTol);
}

// GPU against CPU: expf/log1pf on device and host differ by up to 2 ulps.
TYPED_TEST(BNLLLayerTest, InPlaceRejected) { test::ExpectInPlaceRejected<TypeParam>("type: 'BNLL'"); }

TYPED_TEST(BNLLLayerTest, GpuMatchesCpu) {
  auto fill = [](int, Blob* b) { test::FillGaussian(b, 0, 3, 5); };
  test::CheckGpuAgainstCpu<TypeParam>("type: 'BNLL'", {{2, 3, 4}}, fill, test::GpuTolerance{4, 8});
}

}  // namespace
}  // namespace cortado
