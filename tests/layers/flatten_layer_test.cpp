#include "cortado/layers/flatten_layer.hpp"

#include "test_util.hpp"

namespace cortado {
namespace {

template <typename P>
class FlattenLayerTest : public ::testing::Test {
 protected:
  using F = typename P::Ftype;
  std::vector<int> TopShape(const std::string& param, const std::vector<int>& shape) {
    auto layer = test::NewLayer<P>("name: 'f' type: 'Flatten' " + param);
    test::Blobs bottom, top;
    bottom.add(shape, type_of<F>());
    top.add(type_of<F>());
    layer->SetUp(bottom.vec, top.vec);
    return top[0]->shape();
  }
};
TYPED_TEST_SUITE(FlattenLayerTest, test::AllPairs, test::PairNames);

TYPED_TEST(FlattenLayerTest, Shapes) {
  EXPECT_EQ(this->TopShape("", {2, 3, 6, 5}), (std::vector<int>{2, 90}));
  EXPECT_EQ(this->TopShape("flatten_param { axis: 2 }", {2, 3, 6, 5}), (std::vector<int>{2, 3, 30}));
  EXPECT_EQ(this->TopShape("flatten_param { end_axis: -2 }", {2, 3, 6, 5}), (std::vector<int>{2, 18, 5}));
  EXPECT_EQ(this->TopShape("flatten_param { axis: 0 end_axis: 1 }", {2, 3, 6, 5}), (std::vector<int>{6, 6, 5}));
  EXPECT_EQ(this->TopShape("flatten_param { axis: -1 }", {2, 3}), (std::vector<int>{2, 3}));
}

TYPED_TEST(FlattenLayerTest, SharesDataAndDiff) {
  using F = typename TypeParam::Ftype;
  using B = typename TypeParam::Btype;
  auto layer = test::NewLayer<TypeParam>("type: 'Flatten'");
  test::Blobs bottom, top;
  bottom.add({2, 2, 2}, type_of<F>(), {1, 2, 3, 4, 5, 6, 7, 8});
  top.add(type_of<F>());
  layer->SetUp(bottom.vec, top.vec);
  layer->Forward(bottom.vec, top.vec);
  EXPECT_EQ(test::GetData(*top[0]), (std::vector<double>{1, 2, 3, 4, 5, 6, 7, 8}));
  test::SetData(bottom[0], {8, 7, 6, 5, 4, 3, 2, 1});  // no copy: the top sees it
  EXPECT_EQ(test::GetData(*top[0]), (std::vector<double>{8, 7, 6, 5, 4, 3, 2, 1}));
  test::SetDiff(top[0], {1, 0, 1, 0, 1, 0, 1, 0}, type_of<B>());
  layer->Backward(top.vec, {true}, bottom.vec);
  EXPECT_EQ(test::GetDiff(*bottom[0]), (std::vector<double>{1, 0, 1, 0, 1, 0, 1, 0}));
}

TYPED_TEST(FlattenLayerTest, BadAxes) {
  for (const char* param : {"flatten_param { axis: 4 }", "flatten_param { end_axis: -5 }",
                            "flatten_param { axis: 2 end_axis: 1 }"}) {
    try {
      this->TopShape(param, {2, 3, 6, 5});
      ADD_FAILURE() << param << " was accepted";
    } catch (const FieldError& e) {
      EXPECT_EQ(e.field().rfind("flatten_param.", 0), 0u) << e.what();
    }
  }
}

TYPED_TEST(FlattenLayerTest, Gradient) {
  auto fill = [](int, Blob* b) { test::FillUniform(b, -1, 1, 3); };
  test::CheckLayer<TypeParam>("type: 'Flatten' flatten_param { axis: 1 end_axis: 2 }", {{2, 3, 2, 2}}, fill,
                              test::GradientSettings(), test::ReferenceTolerance{0, 0});
}

// GPU against CPU: the shared buffers carry the values; nothing to compute.
TYPED_TEST(FlattenLayerTest, GpuMatchesCpu) {
  auto fill = [](int, Blob* b) { test::FillUniform(b, -1, 1, 60); };
  test::CheckGpuAgainstCpu<TypeParam>("type: 'Flatten'", {{2, 3, 2, 2}}, fill, test::GpuTolerance{0, 0});
}

}  // namespace
}  // namespace cortado
