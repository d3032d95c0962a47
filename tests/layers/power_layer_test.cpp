#include "cortado/layers/power_layer.hpp"

#include <cmath>

#include "layers/in_place.hpp"
#include "test_util.hpp"

namespace cortado {
namespace {

template <typename P>
class PowerLayerTest : public ::testing::Test {};
TYPED_TEST_SUITE(PowerLayerTest, test::AllPairs, test::PairNames);

// float16 tolerances: pow evaluated in float on rounded inputs and rounded
// once; values up to ~4 in magnitude (relative tolerance), so 2 eps forward
// and 4 eps backward (the backward multiplies rounded dy by a rounded power).
const test::ReferenceTolerance kTol{2, 4};

TYPED_TEST(PowerLayerTest, ForwardBackwardValues) {
  using F = typename TypeParam::Ftype;
  using B = typename TypeParam::Btype;
  auto layer = test::NewLayer<TypeParam>("type: 'Power' power_param { power: 1.5 scale: 0.5 shift: 1 }");
  const std::vector<double> x = {0, 1, 2, 4, -1, 6};
  test::Blobs bottom, top;
  bottom.add({2, 3}, type_of<F>(), x);
  top.add(type_of<F>());
  layer->SetUp(bottom.vec, top.vec);
  layer->Forward(bottom.vec, top.vec);
  std::vector<double> want, dwant;
  const std::vector<double> dy = {1, -2, 0.5, 3, -1, 2};
  for (size_t i = 0; i < x.size(); ++i) {
    const double b = 1 + 0.5 * x[i];
    want.push_back(std::pow(b, 1.5));
    dwant.push_back(dy[i] * 1.5 * 0.5 * std::pow(b, 0.5));
  }
  test::ExpectNear<F>(test::GetData(*top[0]), want, 2);
  test::SetDiff(top[0], dy, type_of<B>());
  layer->Backward(top.vec, {true}, bottom.vec);
  test::ExpectNear<test::Coarser<TypeParam>>(test::GetDiff(*bottom[0]), dwant, 4);
}

TYPED_TEST(PowerLayerTest, SquareAndZeroPower) {
  using F = typename TypeParam::Ftype;
  using B = typename TypeParam::Btype;
  for (const char* text : {"type: 'Power' power_param { power: 2 scale: 2 shift: -1 }",
                           "type: 'Power' power_param { power: 0 scale: 3 shift: 2 }"}) {
    const bool square = std::string(text).find("power: 2") != std::string::npos;
    auto layer = test::NewLayer<TypeParam>(text);
    test::Blobs bottom, top;
    bottom.add({3}, type_of<F>(), {-1, 0.5, 2});
    top.add(type_of<F>());
    layer->SetUp(bottom.vec, top.vec);
    layer->Forward(bottom.vec, top.vec);
    test::ExpectNear<F>(test::GetData(*top[0]), square ? std::vector<double>{9, 0, 9} : std::vector<double>{1, 1, 1},
                        1);
    test::SetDiff(top[0], {1, 1, -1}, type_of<B>());
    layer->Backward(top.vec, {true}, bottom.vec);
    // d/dx (2x - 1)^2 = 4 (2x - 1)
    test::ExpectNear<B>(test::GetDiff(*bottom[0]), square ? std::vector<double>{-12, 0, -12} : std::vector<double>{0, 0, 0},
                        1);
  }
}

TYPED_TEST(PowerLayerTest, Gradient) {
  auto fill = [](int, Blob* b) { test::FillUniform(b, 0.2, 2, 3); };
  test::CheckLayer<TypeParam>("type: 'Power' power_param { power: 0.37 scale: 0.83 shift: 0.5 }", {{2, 3, 4}}, fill,
                              test::GradientSettings().eltwise(), kTol);
}

TYPED_TEST(PowerLayerTest, GradientSquare) {
  auto fill = [](int, Blob* b) { test::FillUniform(b, -1, 1, 4); };
  test::CheckLayer<TypeParam>("type: 'Power' power_param { power: 2 scale: 0.83 shift: -0.3 }", {{2, 3, 4}}, fill,
                              test::GradientSettings().eltwise(), kTol);
}

TYPED_TEST(PowerLayerTest, BadField) {
  auto layer = test::NewLayer<TypeParam>("type: 'Power' power_param { power: inf }");
  test::Blobs bottom, top;
  bottom.add({2}, type_of<typename TypeParam::Ftype>());
  top.add(type_of<typename TypeParam::Ftype>());
  try {
    layer->SetUp(bottom.vec, top.vec);
    ADD_FAILURE() << "infinite power accepted";
  } catch (const FieldError& e) {
    EXPECT_EQ(e.field(), "power_param.power");
  }
}

// GPU against CPU: powf on the device and the host differ by an ulp or two.
// In place only where the backward needs no x: a scaling (power 1) runs in
// place with the right gradient; a square is refused.
TYPED_TEST(PowerLayerTest, InPlaceOnlyWhenTheBackwardNeedsNoX) {
  test::ExpectInPlaceRejected<TypeParam>("type: 'Power' power_param { power: 2 }");
  using F = typename TypeParam::Ftype;
  using B = typename TypeParam::Btype;
  auto layer = test::NewLayer<TypeParam>("type: 'Power' power_param { power: 1 scale: 0.5 shift: 1 }");
  test::Blobs blobs;
  blobs.add({3}, type_of<F>());
  F* x = blobs[0]->template mutable_cpu_data<F>();
  x[0] = F(2.0f), x[1] = F(-4.0f), x[2] = F(0.0f);
  layer->SetUp(blobs.vec, blobs.vec);
  layer->Forward(blobs.vec, blobs.vec);
  EXPECT_EQ(test::GetData(*blobs[0]), (std::vector<double>{2.0, -1.0, 1.0}));
  B* dy = blobs[0]->template mutable_cpu_diff<B>();
  dy[0] = B(1.0f), dy[1] = B(2.0f), dy[2] = B(-4.0f);
  layer->Backward(blobs.vec, {true}, blobs.vec);
  const B* dx = blobs[0]->template cpu_diff<B>();
  EXPECT_EQ(static_cast<double>(dx[0]), 0.5);
  EXPECT_EQ(static_cast<double>(dx[1]), 1.0);
  EXPECT_EQ(static_cast<double>(dx[2]), -2.0);
}

TYPED_TEST(PowerLayerTest, GpuMatchesCpu) {
  auto fill = [](int, Blob* b) { test::FillUniform(b, 0.2, 2, 5); };
  test::CheckGpuAgainstCpu<TypeParam>("type: 'Power' power_param { power: 0.37 scale: 0.83 shift: 0.5 }",
                                      {{2, 3, 4}}, fill, test::GpuTolerance{4, 8});
}

}  // namespace
}  // namespace cortado
