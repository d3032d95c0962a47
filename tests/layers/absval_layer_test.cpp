#include "cortado/layers/absval_layer.hpp"

#include "layers/in_place.hpp"
#include "test_util.hpp"

namespace cortado {
namespace {

template <typename P>
class AbsValLayerTest : public ::testing::Test {};
TYPED_TEST_SUITE(AbsValLayerTest, test::AllPairs, test::PairNames);

// float16 tolerances: forward and backward are exact on rounded inputs; the
// reference sees the same rounded inputs, so only the top diff rounding (half
// an ulp) remains.
const test::ReferenceTolerance kTol{0.5, 0.5};

TYPED_TEST(AbsValLayerTest, ForwardBackwardValues) {
  using F = typename TypeParam::Ftype;
  using B = typename TypeParam::Btype;
  auto layer = test::NewLayer<TypeParam>("type: 'AbsVal'");
  test::Blobs bottom, top;
  bottom.add({2, 2}, type_of<F>(), {-2, 0, 1.5, -0.25});
  top.add(type_of<F>());
  layer->SetUp(bottom.vec, top.vec);
  layer->Forward(bottom.vec, top.vec);
  test::ExpectNear<F>(test::GetData(*top[0]), {2, 0, 1.5, 0.25}, 0);
  test::SetDiff(top[0], {1, 2, 3, 4}, type_of<B>());
  layer->Backward(top.vec, {true}, bottom.vec);
  test::ExpectNear<B>(test::GetDiff(*bottom[0]), {-1, 0, 3, -4}, 0);
}

TYPED_TEST(AbsValLayerTest, Gradient) {
  auto fill = [](int, Blob* b) { test::FillUniform(b, -1, 1, 3); };
  test::CheckLayer<TypeParam>("type: 'AbsVal'", {{2, 3, 4}}, fill, test::GradientSettings().eltwise().kink(0, 2e-2),
                              kTol);
}

TYPED_TEST(AbsValLayerTest, InPlaceRejected) { test::ExpectInPlaceRejected<TypeParam>("type: 'AbsVal'"); }

// Same exact expression on both sides.
TYPED_TEST(AbsValLayerTest, GpuMatchesCpu) {
  auto fill = [](int, Blob* b) { test::FillUniform(b, -1, 1, 5); };
  test::CheckGpuAgainstCpu<TypeParam>("type: 'AbsVal'", {{2, 3, 4}}, fill, test::GpuTolerance{0, 0});
}

}  // namespace
}  // namespace cortado
