#include "cortado/layers/slice_layer.hpp"

#include "test_util.hpp"

namespace cortado {
namespace {

template <typename P>
class SliceLayerTest : public ::testing::Test {};
TYPED_TEST_SUITE(SliceLayerTest, test::AllPairs, test::PairNames);

TYPED_TEST(SliceLayerTest, ForwardBackwardSlicePoints) {
  using F = typename TypeParam::Ftype;
  using B = typename TypeParam::Btype;
  auto layer = test::NewLayer<TypeParam>("type: 'Slice' slice_param { axis: 1 slice_point: 1 }");
  test::Blobs bottom, top;
  bottom.add({2, 3, 2}, type_of<F>(), {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  top.add(type_of<F>());
  top.add(type_of<F>());
  layer->SetUp(bottom.vec, top.vec);
  layer->Forward(bottom.vec, top.vec);
  EXPECT_EQ(top[0]->shape(), (std::vector<int>{2, 1, 2}));
  EXPECT_EQ(top[1]->shape(), (std::vector<int>{2, 2, 2}));
  EXPECT_EQ(test::GetData(*top[0]), (std::vector<double>{1, 2, 7, 8}));
  EXPECT_EQ(test::GetData(*top[1]), (std::vector<double>{3, 4, 5, 6, 9, 10, 11, 12}));
  test::SetDiff(top[0], {-1, -2, -7, -8}, type_of<B>());
  test::SetDiff(top[1], {-3, -4, -5, -6, -9, -10, -11, -12}, type_of<B>());
  layer->Backward(top.vec, {true}, bottom.vec);
  EXPECT_EQ(test::GetDiff(*bottom[0]), (std::vector<double>{-1, -2, -3, -4, -5, -6, -7, -8, -9, -10, -11, -12}));
}

TYPED_TEST(SliceLayerTest, EqualSplitAndLegacySliceDim) {
  using F = typename TypeParam::Ftype;
  for (const char* text : {"type: 'Slice' slice_param { axis: 0 }", "type: 'Slice' slice_param { slice_dim: 0 }",
                           "type: 'Slice' slice_param { axis: -2 }"}) {
    auto layer = test::NewLayer<TypeParam>(text);
    test::Blobs bottom, top;
    bottom.add({3, 2}, type_of<F>(), {1, 2, 3, 4, 5, 6});
    for (int i = 0; i < 3; ++i) top.add(type_of<F>());
    layer->SetUp(bottom.vec, top.vec);
    layer->Forward(bottom.vec, top.vec);
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(top[i]->shape(), (std::vector<int>{1, 2})) << text;
      EXPECT_EQ(test::GetData(*top[i]), (std::vector<double>{2.0 * i + 1, 2.0 * i + 2})) << text;
    }
  }
}

TYPED_TEST(SliceLayerTest, Errors) {
  using F = typename TypeParam::Ftype;
  struct Case { const char* text; int tops; const char* field; const char* message; };
  const Case cases[] = {
      {"slice_param { axis: 1 }", 2, "slice_param.slice_point", "do not divide dimension 3"},
      {"slice_param { axis: 3 }", 2, "slice_param.axis", "got 3"},
      {"slice_param { axis: 1 slice_dim: 1 }", 3, "slice_param.slice_dim", "axis only"},
      {"slice_param { slice_point: 1 }", 3, "slice_param.slice_point", "one point fewer"},
      {"slice_param { slice_point: 2 slice_point: 2 }", 3, "slice_param.slice_point", "strictly increasing"},
      {"slice_param { slice_point: 3 }", 2, "slice_param.slice_point", "got 3"},
  };
  for (const Case& c : cases) {
    auto layer = test::NewLayer<TypeParam>(std::string("name: 's' type: 'Slice' ") + c.text);
    test::Blobs bottom, top;
    bottom.add({2, 3, 4}, type_of<F>());
    for (int i = 0; i < c.tops; ++i) top.add(type_of<F>());
    try {
      layer->SetUp(bottom.vec, top.vec);
      ADD_FAILURE() << c.text << " was accepted";
    } catch (const FieldError& e) {
      EXPECT_EQ(e.field(), c.field) << e.what();
      EXPECT_NE(std::string(e.what()).find(c.message), std::string::npos) << e.what();
    }
  }
}

// Pure copies: float16 pairs match the double run exactly.
TYPED_TEST(SliceLayerTest, Gradient) {
  auto fill = [](int i, Blob* b) { test::FillUniform(b, -1, 1, 10 + i); };
  test::CheckLayer<TypeParam>("type: 'Slice' slice_param { axis: 1 slice_point: 1 slice_point: 3 }", {{2, 4, 3}},
                              fill, test::GradientSettings(), test::ReferenceTolerance{0, 0}, {}, 3);
  test::CheckLayer<TypeParam>("type: 'Slice' slice_param { axis: -1 }", {{2, 2, 4}}, fill, test::GradientSettings(),
                              test::ReferenceTolerance{0, 0}, {}, 2);
}

TYPED_TEST(SliceLayerTest, GpuMatchesCpu) {
  auto fill = [](int i, Blob* b) { test::FillUniform(b, -1, 1, 23 + i); };
  test::CheckGpuAgainstCpu<TypeParam>("type: 'Slice' slice_param { slice_point: 1 slice_point: 3 }", {{2, 4, 2, 2}},
                                      fill, test::GpuTolerance{0, 0}, {}, 3);
}

}  // namespace
}  // namespace cortado
