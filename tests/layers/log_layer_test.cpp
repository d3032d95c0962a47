#include "cortado/layers/log_layer.hpp"

#include <cmath>

#include "layers/in_place.hpp"
#include "test_util.hpp"

namespace cortado {
namespace {

template <typename P>
class LogLayerTest : public ::testing::Test {};
TYPED_TEST_SUITE(LogLayerTest, test::AllPairs, test::PairNames);

// float16 tolerances: inputs in [0.5, 2] so shift + scale * x stays >= 0.75;
// log in float of a rounded input, one rounding: 2 eps forward; the backward
// divides rounded dy by the rounded argument: 4 eps.
const test::ReferenceTolerance kTol{2, 4};

TYPED_TEST(LogLayerTest, ForwardBackwardValues) {
  using F = typename TypeParam::Ftype;
  using B = typename TypeParam::Btype;
  // y = log2(1 + 0.5 x)
  auto layer = test::NewLayer<TypeParam>("type: 'Log' log_param { base: 2 scale: 0.5 shift: 1 }");
  test::Blobs bottom, top;
  bottom.add({4}, type_of<F>(), {-1, 0, 2, 6});
  top.add(type_of<F>());
  layer->SetUp(bottom.vec, top.vec);
  layer->Forward(bottom.vec, top.vec);
  test::ExpectNear<F>(test::GetData(*top[0]), {-1, 0, 1, 2}, 2);
  test::SetDiff(top[0], {1, 1, -1, 2}, type_of<B>());
  layer->Backward(top.vec, {true}, bottom.vec);
  // dy * 0.5 / ln2 / (1 + 0.5 x)
  const double c = 0.5 / std::log(2.0);
  test::ExpectNear<test::Coarser<TypeParam>>(test::GetDiff(*bottom[0]), {2 * c, c, -c / 2, 2 * c / 4}, 4);
}

TYPED_TEST(LogLayerTest, NaturalBase) {
  using F = typename TypeParam::Ftype;
  auto layer = test::NewLayer<TypeParam>("type: 'Log'");
  test::Blobs bottom, top;
  bottom.add({3}, type_of<F>(), {0.5, 1, 4});
  top.add(type_of<F>());
  layer->SetUp(bottom.vec, top.vec);
  layer->Forward(bottom.vec, top.vec);
  test::ExpectNear<F>(test::GetData(*top[0]), {std::log(0.5), 0, std::log(4.0)}, 2);
}

TYPED_TEST(LogLayerTest, Gradient) {
  auto fill = [](int, Blob* b) { test::FillUniform(b, 0.5, 2, 3); };
  test::CheckLayer<TypeParam>("type: 'Log'", {{2, 3, 4}}, fill, test::GradientSettings().eltwise(), kTol);
}

TYPED_TEST(LogLayerTest, GradientBaseShiftScale) {
  auto fill = [](int, Blob* b) { test::FillUniform(b, 0.5, 2, 4); };
  test::CheckLayer<TypeParam>("type: 'Log' log_param { base: 3 scale: 0.8 shift: 0.35 }", {{2, 3, 4}}, fill,
                              test::GradientSettings().eltwise(), kTol);
}

TYPED_TEST(LogLayerTest, BadBase) {
  auto layer = test::NewLayer<TypeParam>("type: 'Log' log_param { base: 1 }");
  test::Blobs bottom, top;
  bottom.add({2}, type_of<typename TypeParam::Ftype>());
  top.add(type_of<typename TypeParam::Ftype>());
  try {
    layer->SetUp(bottom.vec, top.vec);
    ADD_FAILURE() << "base 1 accepted";
  } catch (const FieldError& e) {
    EXPECT_EQ(e.field(), "log_param.base");
  }
}

// GPU against CPU: logf on device and host differ by up to 2 ulps of math_t.
TYPED_TEST(LogLayerTest, InPlaceRejected) { test::ExpectInPlaceRejected<TypeParam>("type: 'Log'"); }

TYPED_TEST(LogLayerTest, GpuMatchesCpu) {
  auto fill = [](int, Blob* b) { test::FillUniform(b, 0.5, 2, 5); };
  test::CheckGpuAgainstCpu<TypeParam>("type: 'Log' log_param { base: 3 scale: 0.8 shift: 0.35 }", {{2, 3, 4}}, fill,
                                      test::GpuTolerance{4, 8});
}

}  // namespace
}  // namespace cortado
