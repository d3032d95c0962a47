#include "cortado/layers/exp_layer.hpp"

#include <cmath>

#include "test_util.hpp"

namespace cortado {
namespace {

template <typename P>
class ExpLayerTest : public ::testing::Test {};
TYPED_TEST_SUITE(ExpLayerTest, test::AllPairs, test::PairNames);

// float16 tolerances: exp in float of a rounded input (relative error of the
// output up to |inner * x| half-ulps of the input, inputs in [-1, 1] with
// |inner| <= 1.5) and one rounding: 2 eps forward; the backward multiplies
// the rounded output by dy and rounds again: 4 eps.
const test::ReferenceTolerance kTol{2, 4};

TYPED_TEST(ExpLayerTest, ForwardBackwardValues) {
  using F = typename TypeParam::Ftype;
  using B = typename TypeParam::Btype;
  // y = 2 ^ (1 + 0.5 x)
  auto layer = test::NewLayer<TypeParam>("type: 'Exp' exp_param { base: 2 scale: 0.5 shift: 1 }");
  const std::vector<double> x = {-2, 0, 2, 4};
  test::Blobs bottom, top;
  bottom.add({4}, type_of<F>(), x);
  top.add(type_of<F>());
  layer->SetUp(bottom.vec, top.vec);
  layer->Forward(bottom.vec, top.vec);
  test::ExpectNear<F>(test::GetData(*top[0]), {1, 2, 4, 8}, 2);
  test::SetDiff(top[0], {1, 1, -1, 2}, type_of<B>());
  layer->Backward(top.vec, {true}, bottom.vec);
  const double c = 0.5 * std::log(2.0);
  test::ExpectNear<test::Coarser<TypeParam>>(test::GetDiff(*bottom[0]), {c, 2 * c, -4 * c, 16 * c}, 4);
}

TYPED_TEST(ExpLayerTest, NaturalBase) {
  using F = typename TypeParam::Ftype;
  auto layer = test::NewLayer<TypeParam>("type: 'Exp'");
  test::Blobs bottom, top;
  bottom.add({3}, type_of<F>(), {-1, 0, 1});
  top.add(type_of<F>());
  layer->SetUp(bottom.vec, top.vec);
  layer->Forward(bottom.vec, top.vec);
  test::ExpectNear<F>(test::GetData(*top[0]), {std::exp(-1.0), 1, std::exp(1.0)}, 2);
}

TYPED_TEST(ExpLayerTest, Gradient) {
  auto fill = [](int, Blob* b) { test::FillUniform(b, -1, 1, 3); };
  test::CheckLayer<TypeParam>("type: 'Exp'", {{2, 3, 4}}, fill, test::GradientSettings().eltwise(), kTol);
}

TYPED_TEST(ExpLayerTest, GradientBaseShiftScale) {
  auto fill = [](int, Blob* b) { test::FillUniform(b, -1, 1, 4); };
  test::CheckLayer<TypeParam>("type: 'Exp' exp_param { base: 3 scale: 1.2 shift: -0.5 }", {{2, 3, 4}}, fill,
                              test::GradientSettings().eltwise(), kTol);
}

TYPED_TEST(ExpLayerTest, BadBase) {
  auto layer = test::NewLayer<TypeParam>("type: 'Exp' exp_param { base: -2 }");
  test::Blobs bottom, top;
  bottom.add({2}, type_of<typename TypeParam::Ftype>());
  top.add(type_of<typename TypeParam::Ftype>());
  try {
    layer->SetUp(bottom.vec, top.vec);
    ADD_FAILURE() << "base -2 accepted";
  } catch (const FieldError& e) {
    EXPECT_EQ(e.field(), "exp_param.base");
  }
}

// GPU against CPU: expf on device and host differ by up to 2 ulps of math_t.
TYPED_TEST(ExpLayerTest, GpuMatchesCpu) {
  auto fill = [](int, Blob* b) { test::FillUniform(b, -1, 1, 5); };
  test::CheckGpuAgainstCpu<TypeParam>("type: 'Exp' exp_param { base: 3 scale: 1.2 shift: -0.5 }", {{2, 3, 4}}, fill,
                                      test::GpuTolerance{4, 8});
}

}  // namespace
}  // namespace cortado
