#include "cortado/layers/silence_layer.hpp"

#include "test_util.hpp"

namespace cortado {
namespace {

template <typename P>
class SilenceLayerTest : public ::testing::Test {};
TYPED_TEST_SUITE(SilenceLayerTest, test::AllPairs, test::PairNames);

TYPED_TEST(SilenceLayerTest, NoTopsAndZeroDiffs) {
  using F = typename TypeParam::Ftype;
  using B = typename TypeParam::Btype;
  auto layer = test::NewLayer<TypeParam>("type: 'Silence'");
  EXPECT_EQ(layer->ExactNumTopBlobs(), 0);
  test::Blobs bottom, top;
  bottom.add({2, 3}, type_of<F>(), {1, 2, 3, 4, 5, 6});
  bottom.add({4}, type_of<F>(), {1, 2, 3, 4});
  layer->SetUp(bottom.vec, top.vec);
  EXPECT_EQ(layer->Forward(bottom.vec, top.vec), 0.0);
  EXPECT_EQ(test::GetData(*bottom[0]), (std::vector<double>{1, 2, 3, 4, 5, 6}));
  test::SetDiff(bottom[0], std::vector<double>(6, 7.0), type_of<B>());
  test::SetDiff(bottom[1], std::vector<double>(4, 7.0), type_of<B>());
  layer->Backward(top.vec, {true, false}, bottom.vec);
  EXPECT_EQ(test::GetDiff(*bottom[0]), std::vector<double>(6, 0.0));
  EXPECT_EQ(test::GetDiff(*bottom[1]), std::vector<double>(4, 7.0));  // not asked for
}

TYPED_TEST(SilenceLayerTest, RejectsTops) {
  using F = typename TypeParam::Ftype;
  auto layer = test::NewLayer<TypeParam>("name: 's' type: 'Silence'");
  test::Blobs bottom, top;
  bottom.add({2}, type_of<F>());
  top.add(type_of<F>());
  EXPECT_THROW(layer->SetUp(bottom.vec, top.vec), FieldError);
}

// GPU against CPU: the diffs are zeroed on the device.
TYPED_TEST(SilenceLayerTest, GpuMatchesCpu) {
  auto fill = [](int i, Blob* b) { test::FillUniform(b, -1, 1, 50 + i); };
  test::CheckGpuAgainstCpu<TypeParam>("type: 'Silence'", {{2, 3}, {4}}, fill, test::GpuTolerance{0, 0}, {true, false});
}

}  // namespace
}  // namespace cortado
