#include "cortado/layers/concat_layer.hpp"

#include "test_util.hpp"

namespace cortado {
namespace {

template <typename P>
class ConcatLayerTest : public ::testing::Test {};
TYPED_TEST_SUITE(ConcatLayerTest, test::AllPairs, test::PairNames);

TYPED_TEST(ConcatLayerTest, ForwardBackwardAxis1) {
  using F = typename TypeParam::Ftype;
  using B = typename TypeParam::Btype;
  auto layer = test::NewLayer<TypeParam>("type: 'Concat'");
  test::Blobs bottom, top;
  bottom.add({2, 1, 2}, type_of<F>(), {1, 2, 3, 4});
  bottom.add({2, 2, 2}, type_of<F>(), {5, 6, 7, 8, 9, 10, 11, 12});
  top.add(type_of<F>());
  layer->SetUp(bottom.vec, top.vec);
  layer->Forward(bottom.vec, top.vec);
  EXPECT_EQ(top[0]->shape(), (std::vector<int>{2, 3, 2}));
  EXPECT_EQ(test::GetData(*top[0]), (std::vector<double>{1, 2, 5, 6, 7, 8, 3, 4, 9, 10, 11, 12}));
  test::SetDiff(top[0], {-1, -2, -5, -6, -7, -8, -3, -4, -9, -10, -11, -12}, type_of<B>());
  layer->Backward(top.vec, {true, true}, bottom.vec);
  EXPECT_EQ(test::GetDiff(*bottom[0]), (std::vector<double>{-1, -2, -3, -4}));
  EXPECT_EQ(test::GetDiff(*bottom[1]), (std::vector<double>{-5, -6, -7, -8, -9, -10, -11, -12}));
}

TYPED_TEST(ConcatLayerTest, Axis0AndLegacyConcatDim) {
  using F = typename TypeParam::Ftype;
  for (const char* text : {"type: 'Concat' concat_param { axis: 0 }", "type: 'Concat' concat_param { concat_dim: 0 }",
                           "type: 'Concat' concat_param { axis: -2 }"}) {
    auto layer = test::NewLayer<TypeParam>(text);
    test::Blobs bottom, top;
    bottom.add({1, 3}, type_of<F>(), {1, 2, 3});
    bottom.add({2, 3}, type_of<F>(), {4, 5, 6, 7, 8, 9});
    top.add(type_of<F>());
    layer->SetUp(bottom.vec, top.vec);
    layer->Forward(bottom.vec, top.vec);
    EXPECT_EQ(top[0]->shape(), (std::vector<int>{3, 3})) << text;
    EXPECT_EQ(test::GetData(*top[0]), (std::vector<double>{1, 2, 3, 4, 5, 6, 7, 8, 9})) << text;
  }
}

TYPED_TEST(ConcatLayerTest, Errors) {
  using F = typename TypeParam::Ftype;
  struct Case { const char* text; std::vector<int> second; const char* field; const char* message; };
  const Case cases[] = {
      {"concat_param { axis: 1 }", {2, 4, 5}, "bottom[1]", "shape (2, 4, 5) does not match"},
      {"concat_param { axis: 1 }", {2, 4}, "bottom[1]", "all dimensions but axis 1"},
      {"concat_param { axis: 3 }", {2, 3, 4}, "concat_param.axis", "got 3"},
      {"concat_param { axis: 1 concat_dim: 1 }", {2, 3, 4}, "concat_param.concat_dim", "axis only"},
  };
  for (const Case& c : cases) {
    auto layer = test::NewLayer<TypeParam>(std::string("name: 'c' type: 'Concat' ") + c.text);
    test::Blobs bottom, top;
    bottom.add({2, 3, 4}, type_of<F>());
    bottom.add(c.second, type_of<F>());
    top.add(type_of<F>());
    try {
      layer->SetUp(bottom.vec, top.vec);
      ADD_FAILURE() << c.text << " was accepted";
    } catch (const FieldError& e) {
      EXPECT_EQ(e.field(), c.field) << e.what();
      EXPECT_NE(std::string(e.what()).find(c.message), std::string::npos) << e.what();
    }
  }
}

TYPED_TEST(ConcatLayerTest, Gradient) {
  auto fill = [](int i, Blob* b) { test::FillUniform(b, -1, 1, 10 + i); };
  test::CheckLayer<TypeParam>("type: 'Concat' concat_param { axis: 1 }", {{2, 3, 2}, {2, 1, 2}, {2, 2, 2}}, fill,
                              test::GradientSettings(), test::ReferenceTolerance{0, 0});
}

TYPED_TEST(ConcatLayerTest, GradientOneBottomNotPropagated) {
  auto fill = [](int i, Blob* b) { test::FillUniform(b, -1, 1, 20 + i); };
  test::CheckLayer<TypeParam>("type: 'Concat' concat_param { axis: -1 }", {{2, 3, 2}, {2, 3, 1}}, fill,
                              test::GradientSettings(), test::ReferenceTolerance{0, 0}, {false, true});
}

// GPU against CPU: strided copies both ways, identical; one bottom not
// propagated.
TYPED_TEST(ConcatLayerTest, GpuMatchesCpu) {
  auto fill = [](int i, Blob* b) { test::FillUniform(b, -1, 1, 23 + i); };
  test::CheckGpuAgainstCpu<TypeParam>("type: 'Concat'", {{2, 3, 2, 2}, {2, 1, 2, 2}, {2, 2, 2, 2}}, fill,
                                      test::GpuTolerance{0, 0});
  test::CheckGpuAgainstCpu<TypeParam>("type: 'Concat' concat_param { axis: 0 }", {{2, 3}, {1, 3}}, fill,
                                      test::GpuTolerance{0, 0}, {false, true});
}

}  // namespace
}  // namespace cortado
