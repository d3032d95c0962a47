#include "cortado/layers/permute_layer.hpp"

#include "test_util.hpp"

namespace cortado {
namespace {

template <typename P>
class PermuteLayerTest : public ::testing::Test {};
TYPED_TEST_SUITE(PermuteLayerTest, test::AllPairs, test::PairNames);

std::vector<double> Iota(int n) {
  std::vector<double> v(n);
  for (int i = 0; i < n; ++i) v[i] = i;
  return v;
}

// NCHW (1, 2, 2, 3) to NHWC: top[0, h, w, c] = bottom[0, c, h, w].
TYPED_TEST(PermuteLayerTest, NchwToNhwc) {
  using F = typename TypeParam::Ftype;
  using B = typename TypeParam::Btype;
  auto layer = test::NewLayer<TypeParam>("type: 'Permute' permute_param { order: 0 order: 2 order: 3 order: 1 }");
  test::Blobs bottom, top;
  bottom.add({1, 2, 2, 3}, type_of<F>(), Iota(12));
  top.add(type_of<F>());
  layer->SetUp(bottom.vec, top.vec);
  layer->Forward(bottom.vec, top.vec);
  EXPECT_EQ(top[0]->shape(), (std::vector<int>{1, 2, 3, 2}));
  EXPECT_EQ(test::GetData(*top[0]), (std::vector<double>{0, 6, 1, 7, 2, 8, 3, 9, 4, 10, 5, 11}));
  // The backward moves each diff back to its element.
  test::SetDiff(top[0], {0, 6, 1, 7, 2, 8, 3, 9, 4, 10, 5, 11}, type_of<B>());
  layer->Backward(top.vec, {true}, bottom.vec);
  EXPECT_EQ(test::GetDiff(*bottom[0]), Iota(12));
}

// Batch-major (N, T, I) to time-major (T, N, I), the RNN/LSTM layout: the
// axes not listed follow in order.
TYPED_TEST(PermuteLayerTest, SwapFirstTwoAxes) {
  using F = typename TypeParam::Ftype;
  auto layer = test::NewLayer<TypeParam>("type: 'Permute' permute_param { order: 1 }");
  test::Blobs bottom, top;
  bottom.add({2, 3, 2}, type_of<F>(), Iota(12));
  top.add(type_of<F>());
  layer->SetUp(bottom.vec, top.vec);
  layer->Forward(bottom.vec, top.vec);
  EXPECT_EQ(top[0]->shape(), (std::vector<int>{3, 2, 2}));
  EXPECT_EQ(test::GetData(*top[0]), (std::vector<double>{0, 1, 6, 7, 2, 3, 8, 9, 4, 5, 10, 11}));
}

TYPED_TEST(PermuteLayerTest, Gradient) {
  auto fill = [](int i, Blob* b) { test::FillUniform(b, -1, 1, 60 + i); };
  test::CheckLayer<TypeParam>("type: 'Permute' permute_param { order: 2 order: 0 order: 3 }", {{2, 3, 2, 2}}, fill,
                              test::GradientSettings(), test::ReferenceTolerance{0, 0});
}

TYPED_TEST(PermuteLayerTest, Errors) {
  using F = typename TypeParam::Ftype;
  for (const char* order : {"order: 4", "order: 1 order: 1"}) {
    auto layer = test::NewLayer<TypeParam>(std::string("name: 'p' type: 'Permute' permute_param { ") + order + " }");
    test::Blobs bottom, top;
    bottom.add({2, 3, 2, 2}, type_of<F>());
    top.add(type_of<F>());
    try {
      layer->SetUp(bottom.vec, top.vec);
      ADD_FAILURE() << order << " was accepted";
    } catch (const FieldError& e) {
      EXPECT_EQ(e.field(), "permute_param.order") << e.what();
    }
  }
}

TYPED_TEST(PermuteLayerTest, GpuMatchesCpu) {
  auto fill = [](int i, Blob* b) { test::FillUniform(b, -1, 1, 70 + i); };
  test::CheckGpuAgainstCpu<TypeParam>("type: 'Permute' permute_param { order: 0 order: 2 order: 3 order: 1 }",
                                      {{2, 3, 4, 5}}, fill, test::GpuTolerance{0, 0});
}

}  // namespace
}  // namespace cortado
