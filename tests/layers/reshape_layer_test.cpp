#include "cortado/layers/reshape_layer.hpp"

#include "test_util.hpp"

namespace cortado {
namespace {

template <typename P>
class ReshapeLayerTest : public ::testing::Test {
 protected:
  using F = typename P::Ftype;
  std::vector<int> TopShape(const std::string& param, const std::vector<int>& shape) {
    auto layer = test::NewLayer<P>("name: 'r' type: 'Reshape' reshape_param { " + param + " }");
    test::Blobs bottom, top;
    bottom.add(shape, type_of<F>());
    top.add(type_of<F>());
    layer->SetUp(bottom.vec, top.vec);
    return top[0]->shape();
  }
  void ExpectError(const std::string& param, const std::vector<int>& shape, const std::string& field,
                   const std::string& text) {
    try {
      TopShape(param, shape);
      ADD_FAILURE() << param << " was accepted";
    } catch (const FieldError& e) {
      EXPECT_EQ(e.field(), field) << e.what();
      EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
    }
  }
};
TYPED_TEST_SUITE(ReshapeLayerTest, test::AllPairs, test::PairNames);

TYPED_TEST(ReshapeLayerTest, Shapes) {
  const std::vector<int> in = {2, 3, 6, 5};
  EXPECT_EQ(this->TopShape("shape { dim: 6 dim: 30 }", in), (std::vector<int>{6, 30}));
  EXPECT_EQ(this->TopShape("shape { dim: 0 dim: -1 }", in), (std::vector<int>{2, 90}));
  EXPECT_EQ(this->TopShape("shape { dim: 0 dim: 0 dim: -1 dim: 2 }", in), (std::vector<int>{2, 3, 15, 2}));
  EXPECT_EQ(this->TopShape("shape { dim: -1 }", in), (std::vector<int>{180}));
  // Replace only axis 1 ... 2.
  EXPECT_EQ(this->TopShape("axis: 1 num_axes: 2 shape { dim: 18 }", in), (std::vector<int>{2, 18, 5}));
  // Insert axes: num_axes 0 at the end (axis -1 = after the last axis) and at the front.
  EXPECT_EQ(this->TopShape("axis: -1 num_axes: 0 shape { dim: 1 dim: 1 }", in), (std::vector<int>{2, 3, 6, 5, 1, 1}));
  EXPECT_EQ(this->TopShape("axis: 0 num_axes: 0 shape { dim: 1 }", in), (std::vector<int>{1, 2, 3, 6, 5}));
  // 0 copies the bottom dimension at the same position inside the range.
  EXPECT_EQ(this->TopShape("axis: 2 shape { dim: 0 dim: -1 }", in), (std::vector<int>{2, 3, 6, 5}));
  EXPECT_EQ(this->TopShape("axis: -3 shape { dim: -1 dim: 0 }", in), (std::vector<int>{2, 3, 6, 5}));
}

TYPED_TEST(ReshapeLayerTest, SharesDataAndDiff) {
  using F = typename TypeParam::Ftype;
  using B = typename TypeParam::Btype;
  auto layer = test::NewLayer<TypeParam>("type: 'Reshape' reshape_param { shape { dim: 3 dim: 2 } }");
  test::Blobs bottom, top;
  bottom.add({2, 3}, type_of<F>(), {1, 2, 3, 4, 5, 6});
  top.add(type_of<F>());
  layer->SetUp(bottom.vec, top.vec);
  layer->Forward(bottom.vec, top.vec);
  EXPECT_EQ(top[0]->shape(), (std::vector<int>{3, 2}));
  EXPECT_EQ(test::GetData(*top[0]), (std::vector<double>{1, 2, 3, 4, 5, 6}));
  test::SetDiff(top[0], {6, 5, 4, 3, 2, 1}, type_of<B>());
  layer->Backward(top.vec, {true}, bottom.vec);
  EXPECT_EQ(test::GetDiff(*bottom[0]), (std::vector<double>{6, 5, 4, 3, 2, 1}));
}

TYPED_TEST(ReshapeLayerTest, Errors) {
  const std::vector<int> in = {2, 3, 6, 5};
  this->ExpectError("shape { dim: -1 dim: -1 }", in, "reshape_param.shape", "more than one -1");
  this->ExpectError("shape { dim: 7 dim: -1 }", in, "reshape_param.shape", "not a multiple of 7");
  this->ExpectError("shape { dim: 2 dim: 3 }", in, "reshape_param.shape", "holds 180");
  this->ExpectError("shape { dim: -2 }", in, "reshape_param.shape", "-2");
  this->ExpectError("axis: 4 num_axes: 0 shape { dim: 0 }", in, "reshape_param.shape", "no bottom axis");
  this->ExpectError("axis: 5 shape { dim: 1 }", in, "reshape_param.axis", "got 5");
  this->ExpectError("axis: 2 num_axes: 3 shape { dim: 1 }", in, "reshape_param.num_axes", "only 2");
  this->ExpectError("num_axes: -2 shape { dim: 1 }", in, "reshape_param.num_axes", "-2");
}

TYPED_TEST(ReshapeLayerTest, Gradient) {
  auto fill = [](int, Blob* b) { test::FillUniform(b, -1, 1, 3); };
  test::CheckLayer<TypeParam>("type: 'Reshape' reshape_param { shape { dim: 0 dim: -1 } }", {{2, 3, 4}}, fill,
                              test::GradientSettings(), test::ReferenceTolerance{0, 0});
}

// GPU against CPU: the shared buffers carry the values; nothing to compute.
TYPED_TEST(ReshapeLayerTest, GpuMatchesCpu) {
  auto fill = [](int, Blob* b) { test::FillUniform(b, -1, 1, 61); };
  test::CheckGpuAgainstCpu<TypeParam>("type: 'Reshape' reshape_param { shape { dim: 0 dim: -1 } }", {{2, 3, 4}}, fill,
                                      test::GpuTolerance{0, 0});
}

}  // namespace
}  // namespace cortado
