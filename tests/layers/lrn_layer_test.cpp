#include "cortado/layers/lrn_layer.hpp"

#include <cmath>

#include "test_util.hpp"

namespace cortado {
namespace {

template <typename P>
class LRNLayerTest : public ::testing::Test {};
TYPED_TEST_SUITE(LRNLayerTest, test::AllPairs, test::PairNames);

// float16 tolerances: y = x * s^-beta with s summed in float from rounded
// inputs, rounded once: 2 eps forward. The backward reads y, x and dy rounded
// to float16 (each term of the window sum off by up to an eps relative) and
// rounds once: 8 eps.
const test::ReferenceTolerance kTol{2, 8};

TYPED_TEST(LRNLayerTest, AcrossChannelsValues) {
  using F = typename TypeParam::Ftype;
  using B = typename TypeParam::Btype;
  // size 3, alpha 3 (alpha / size = 1), beta 1, k 1: s = 1 + sum of squares.
  auto layer = test::NewLayer<TypeParam>("type: 'LRN' lrn_param { local_size: 3 alpha: 3 beta: 1 k: 1 }");
  test::Blobs bottom, top;
  bottom.add({1, 3, 1, 1}, type_of<F>(), {1, 2, 3});
  top.add(type_of<F>());
  layer->SetUp(bottom.vec, top.vec);
  layer->Forward(bottom.vec, top.vec);
  EXPECT_EQ(top[0]->shape(), (std::vector<int>{1, 3, 1, 1}));
  // s = {1 + 1 + 4, 1 + 1 + 4 + 9, 1 + 4 + 9}
  test::ExpectNear<F>(test::GetData(*top[0]), {1.0 / 6, 2.0 / 15, 3.0 / 14}, 2);
  // Backward with dy = (1, 0, 0): dx_i = dy_i / s_i - 2 x_i * sum_{j in W(i)} dy_j y_j / s_j;
  // only j = 0 contributes (y_0 / s_0 = 1/36), and W(2) = {1, 2} misses it, so dx_2 = 0.
  test::SetDiff(top[0], {1, 0, 0}, type_of<B>());
  layer->Backward(top.vec, {true}, bottom.vec);
  test::ExpectNear<test::Coarser<TypeParam>>(test::GetDiff(*bottom[0]),
                                             {1.0 / 6 - 2.0 / 36, -4.0 / 36, 0}, 4);
}

TYPED_TEST(LRNLayerTest, WithinChannelValues) {
  using F = typename TypeParam::Ftype;
  // size 3, alpha 9 (alpha / size^2 = 1), beta 1; k is not used in this mode.
  auto layer = test::NewLayer<TypeParam>(
      "type: 'LRN' lrn_param { local_size: 3 alpha: 9 beta: 1 k: 5 norm_region: WITHIN_CHANNEL }");
  test::Blobs bottom, top;
  bottom.add({1, 2, 2, 2}, type_of<F>(), {1, 2, 3, 4, 0.5, 0.5, 0.5, 0.5});
  top.add(type_of<F>());
  layer->SetUp(bottom.vec, top.vec);
  layer->Forward(bottom.vec, top.vec);
  // Each 3x3 window covers the whole 2x2 channel: s = 1 + 30 and 1 + 1.
  test::ExpectNear<F>(test::GetData(*top[0]), {1.0 / 31, 2.0 / 31, 3.0 / 31, 4.0 / 31, 0.25, 0.25, 0.25, 0.25}, 2);
}

TYPED_TEST(LRNLayerTest, GradientAcross) {
  auto fill = [](int, Blob* b) { test::FillGaussian(b, 0, 1, 3); };
  test::CheckLayer<TypeParam>("type: 'LRN'", {{2, 7, 3, 3}}, fill, test::GradientSettings(), kTol);
}

TYPED_TEST(LRNLayerTest, GradientAcrossLargeAlpha) {
  auto fill = [](int, Blob* b) { test::FillGaussian(b, 0, 1, 4); };
  test::CheckLayer<TypeParam>("type: 'LRN' lrn_param { local_size: 3 alpha: 2 beta: 0.6 k: 2 }", {{2, 4, 2, 3}},
                              fill, test::GradientSettings(), kTol);
}

TYPED_TEST(LRNLayerTest, GradientWithin) {
  auto fill = [](int, Blob* b) { test::FillGaussian(b, 0, 1, 5); };
  test::CheckLayer<TypeParam>("type: 'LRN' lrn_param { local_size: 3 alpha: 1.5 norm_region: WITHIN_CHANNEL }",
                              {{2, 2, 4, 5}}, fill, test::GradientSettings(), kTol);
}

TYPED_TEST(LRNLayerTest, BadFields) {
  using F = typename TypeParam::Ftype;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"lrn_param { local_size: 4 }", "lrn_param.local_size"},
      {"lrn_param { local_size: 0 }", "lrn_param.local_size"},
      {"lrn_param { beta: nan }", "lrn_param.beta"},
  };
  for (const auto& [text, field] : cases) {
    auto layer = test::NewLayer<TypeParam>("type: 'LRN' " + text);
    test::Blobs bottom, top;
    bottom.add({1, 3, 2, 2}, type_of<F>());
    top.add(type_of<F>());
    try {
      layer->SetUp(bottom.vec, top.vec);
      ADD_FAILURE() << text << " accepted";
    } catch (const FieldError& e) {
      EXPECT_EQ(e.field(), field) << text;
    }
  }
  auto layer = test::NewLayer<TypeParam>("type: 'LRN'");
  test::Blobs bottom, top;
  bottom.add({3, 2, 2}, type_of<F>());
  top.add(type_of<F>());
  try {
    layer->SetUp(bottom.vec, top.vec);
    ADD_FAILURE() << "3-axis bottom accepted";
  } catch (const FieldError& e) {
    EXPECT_EQ(e.field(), "bottom");
  }
  auto in_place = test::NewLayer<TypeParam>("type: 'LRN'");
  test::Blobs blobs;
  blobs.add({1, 3, 2, 2}, type_of<F>());
  try {
    in_place->SetUp(blobs.vec, blobs.vec);
    ADD_FAILURE() << "in-place LRN accepted";
  } catch (const FieldError& e) {
    EXPECT_EQ(e.field(), "top");
  }
}

// GPU against CPU: same sums in the same order; powf on device and host
// differ by an ulp or two of math_t.
TYPED_TEST(LRNLayerTest, GpuMatchesCpuAcross) {
  auto fill = [](int, Blob* b) { test::FillGaussian(b, 0, 1, 6); };
  test::CheckGpuAgainstCpu<TypeParam>("type: 'LRN'", {{2, 7, 3, 3}}, fill, test::GpuTolerance{4, 8});
}

TYPED_TEST(LRNLayerTest, GpuMatchesCpuWithin) {
  auto fill = [](int, Blob* b) { test::FillGaussian(b, 0, 1, 7); };
  test::CheckGpuAgainstCpu<TypeParam>("type: 'LRN' lrn_param { local_size: 3 norm_region: WITHIN_CHANNEL }",
                                      {{2, 2, 4, 5}}, fill, test::GpuTolerance{4, 8});
}

}  // namespace
}  // namespace cortado
