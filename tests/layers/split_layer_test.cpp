#include "cortado/layers/split_layer.hpp"

#include "test_util.hpp"

namespace cortado {
namespace {

template <typename P>
class SplitLayerTest : public ::testing::Test {};
TYPED_TEST_SUITE(SplitLayerTest, test::AllPairs, test::PairNames);

// float16 tolerances: the forward shares; the backward sums three rounded
// diffs in float and rounds once.
const test::ReferenceTolerance kTol{0, 1};

TYPED_TEST(SplitLayerTest, CopiesAndSums) {
  using F = typename TypeParam::Ftype;
  using B = typename TypeParam::Btype;
  auto layer = test::NewLayer<TypeParam>("type: 'Split'");
  test::Blobs bottom, top;
  bottom.add({2, 2}, type_of<F>(), {1, -2, 3.5, 4});
  for (int k = 0; k < 3; ++k) top.add(type_of<F>());
  layer->SetUp(bottom.vec, top.vec);
  layer->Forward(bottom.vec, top.vec);
  for (int k = 0; k < 3; ++k) {
    EXPECT_EQ(top[k]->shape(), (std::vector<int>{2, 2}));
    EXPECT_EQ(test::GetData(*top[k]), (std::vector<double>{1, -2, 3.5, 4}));
  }
  // The tops hold no copy: they share the bottom's values (the Net never
  // lets a consumer write a split top in place), and each has its own diff.
  for (int k = 0; k < 3; ++k) {
    EXPECT_EQ(&top[k]->data(), &bottom[0]->data()) << "top " << k;
    EXPECT_NE(&top[k]->diff(), &bottom[0]->diff()) << "top " << k;
  }
  test::SetData(bottom[0], {5, 6, 7, 8});
  layer->Reshape(bottom.vec, top.vec);
  layer->Forward(bottom.vec, top.vec);
  EXPECT_EQ(test::GetData(*top[2]), (std::vector<double>{5, 6, 7, 8}));
  test::SetDiff(top[0], {1, 2, 3, 4}, type_of<B>());
  test::SetDiff(top[1], {10, 20, 30, 40}, type_of<B>());
  test::SetDiff(top[2], {-1, 0.5, 0, 100}, type_of<B>());
  layer->Backward(top.vec, {true}, bottom.vec);
  EXPECT_EQ(test::GetDiff(*bottom[0]), (std::vector<double>{10, 22.5, 33, 144}));
}

TYPED_TEST(SplitLayerTest, InPlaceIsAnError) {
  using F = typename TypeParam::Ftype;
  auto layer = test::NewLayer<TypeParam>("name: 's' type: 'Split'");
  test::Blobs bottom;
  bottom.add({2}, type_of<F>());
  EXPECT_THROW(layer->SetUp(bottom.vec, bottom.vec), FieldError);
}

TYPED_TEST(SplitLayerTest, Gradient) {
  auto fill = [](int, Blob* b) { test::FillUniform(b, -1, 1, 3); };
  test::CheckLayer<TypeParam>("type: 'Split'", {{2, 3, 4}}, fill, test::GradientSettings(), kTol, {}, 3);
}

// GPU against CPU: copies forward; the backward sums in math_t in top order
// without fused operations, as the CPU does: identical.
TYPED_TEST(SplitLayerTest, GpuMatchesCpu) {
  auto fill = [](int, Blob* b) { test::FillUniform(b, -1, 1, 22); };
  test::CheckGpuAgainstCpu<TypeParam>("type: 'Split'", {{2, 3, 4}}, fill, test::GpuTolerance{0, 0}, {}, 1);
  test::CheckGpuAgainstCpu<TypeParam>("type: 'Split'", {{2, 3, 4}}, fill, test::GpuTolerance{0, 0}, {}, 3);
}

}  // namespace
}  // namespace cortado
