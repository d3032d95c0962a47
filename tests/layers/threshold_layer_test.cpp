#include "cortado/layers/threshold_layer.hpp"

#include "test_util.hpp"

namespace cortado {
namespace {

template <typename P>
class ThresholdLayerTest : public ::testing::Test {};
TYPED_TEST_SUITE(ThresholdLayerTest, test::AllPairs, test::PairNames);

TYPED_TEST(ThresholdLayerTest, ForwardValues) {
  using F = typename TypeParam::Ftype;
  auto layer = test::NewLayer<TypeParam>("type: 'Threshold' threshold_param { threshold: 0.5 }");
  test::Blobs bottom, top;
  bottom.add({2, 3}, type_of<F>(), {-1, 0.25, 0.5, 0.625, 2, 0});
  top.add(type_of<F>());
  layer->SetUp(bottom.vec, top.vec);
  layer->Forward(bottom.vec, top.vec);
  EXPECT_EQ(top[0]->shape(), (std::vector<int>{2, 3}));
  test::ExpectNear<F>(test::GetData(*top[0]), {0, 0, 0, 1, 1, 0}, 0);
}

TYPED_TEST(ThresholdLayerTest, InPlace) {
  using F = typename TypeParam::Ftype;
  auto layer = test::NewLayer<TypeParam>("type: 'Threshold'");
  test::Blobs blobs;
  blobs.add({4}, type_of<F>(), {-1, 0, 0.001, 3});
  layer->SetUp(blobs.vec, blobs.vec);
  layer->Forward(blobs.vec, blobs.vec);
  test::ExpectNear<F>(test::GetData(*blobs[0]), {0, 0, 1, 1}, 0);
}

TYPED_TEST(ThresholdLayerTest, NoBackward) {
  using F = typename TypeParam::Ftype;
  auto layer = test::NewLayer<TypeParam>("type: 'Threshold'");
  test::Blobs bottom, top;
  bottom.add({2}, type_of<F>(), {-1, 1});
  top.add(type_of<F>());
  layer->SetUp(bottom.vec, top.vec);
  layer->Forward(bottom.vec, top.vec);
  EXPECT_FALSE(layer->AllowForceBackward(0));
  layer->Backward(top.vec, {false}, bottom.vec);  // nothing to do
  EXPECT_THROW(layer->Backward(top.vec, {true}, bottom.vec), Error);
}

// float16 pairs against double: the output is exactly 0 or 1 on the same
// rounded inputs (inputs kept away from the threshold by the fill).
TYPED_TEST(ThresholdLayerTest, AgainstDouble) {
  auto fill = [](int, Blob* b) { test::FillUniform(b, -1, 1, 3); };
  test::CheckAgainstDouble<TypeParam>("type: 'Threshold' threshold_param { threshold: 0.1 }", {{2, 3, 4}}, fill,
                                      test::ReferenceTolerance{0, 0}, {false});
}

TYPED_TEST(ThresholdLayerTest, BadThreshold) {
  auto layer = test::NewLayer<TypeParam>("type: 'Threshold' threshold_param { threshold: inf }");
  test::Blobs bottom, top;
  bottom.add({2}, type_of<typename TypeParam::Ftype>());
  top.add(type_of<typename TypeParam::Ftype>());
  try {
    layer->SetUp(bottom.vec, top.vec);
    ADD_FAILURE() << "infinite threshold accepted";
  } catch (const FieldError& e) {
    EXPECT_EQ(e.field(), "threshold_param.threshold");
  }
}

// Same comparison on both sides: exact (forward only).
TYPED_TEST(ThresholdLayerTest, GpuMatchesCpu) {
  auto fill = [](int, Blob* b) { test::FillUniform(b, -1, 1, 5); };
  test::CheckGpuAgainstCpu<TypeParam>("type: 'Threshold' threshold_param { threshold: 0.1 }", {{2, 3, 4}}, fill,
                                      test::GpuTolerance{0, 0}, {false});
}

}  // namespace
}  // namespace cortado
