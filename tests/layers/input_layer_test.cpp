// InputLayer: shapes its tops from input_param.shape (none, one, one per top),
// leaves their values alone, and reports bad shapes.

#include "cortado/layers/input_layer.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "test_util.hpp"

namespace cortado {
namespace {

template <typename P>
class InputLayerTest : public ::testing::Test {
 protected:
  using F = typename P::Ftype;
  using B = typename P::Btype;
  using L = InputLayer<F, B>;

  std::unique_ptr<L> Make(const std::string& text) {
    return std::make_unique<L>(test::MakeParam<P>("name: 'in' type: 'Input' " + text));
  }
};

TYPED_TEST_SUITE(InputLayerTest, test::AllPairs, test::PairNames);

TYPED_TEST(InputLayerTest, OneShapeForEveryTopAndOnePerTop) {
  using F = typename TypeParam::Ftype;
  test::Blobs top;
  top.add(type_of<F>());
  top.add(type_of<F>());
  auto layer = this->Make("input_param { shape { dim: 2 dim: 3 dim: 4 dim: 5 } }");
  layer->SetUp({}, top.vec);
  EXPECT_EQ(top[0]->shape(), (std::vector<int>{2, 3, 4, 5}));
  EXPECT_EQ(top[1]->shape(), (std::vector<int>{2, 3, 4, 5}));

  auto layer2 = this->Make("input_param { shape { dim: 7 } shape { dim: 1 dim: 9 } }");
  layer2->SetUp({}, top.vec);
  EXPECT_EQ(top[0]->shape(), (std::vector<int>{7}));
  EXPECT_EQ(top[1]->shape(), (std::vector<int>{1, 9}));
}

TYPED_TEST(InputLayerTest, ForwardLeavesValuesAndReshapeLeavesShapes) {
  using F = typename TypeParam::Ftype;
  test::Blobs top;
  top.add(type_of<F>());
  auto layer = this->Make("input_param { shape { dim: 2 dim: 3 } }");
  layer->SetUp({}, top.vec);
  test::FillUniform(top[0], -1, 1, 42);
  const std::vector<double> before = test::GetData(*top[0]);
  // The caller may reshape an input (a deploy net with another batch size).
  layer->Forward({}, top.vec);
  EXPECT_EQ(test::GetData(*top[0]), before);
  top[0]->Reshape({4, 3});
  layer->Forward({}, top.vec);
  EXPECT_EQ(top[0]->shape(), (std::vector<int>{4, 3}));
}

TYPED_TEST(InputLayerTest, NoShapeKeepsTheTopsShape) {
  using F = typename TypeParam::Ftype;
  test::Blobs top;
  top.add({3, 1}, type_of<F>());
  auto layer = this->Make("");
  layer->SetUp({}, top.vec);
  EXPECT_EQ(top[0]->shape(), (std::vector<int>{3, 1}));
}

TEST(InputLayerErrorTest, BadShapes) {
  using L = InputLayer<float, float>;
  using P = test::TypePair<float, float>;
  test::Blobs top;
  for (int i = 0; i < 3; ++i) top.add(FLOAT);
  auto expect_field = [&](const std::string& text, const std::string& field) {
    L layer(test::MakeParam<P>("name: 'in' type: 'Input' " + text));
    try {
      layer.SetUp({}, top.vec);
      ADD_FAILURE() << "no error for " << text;
    } catch (const FieldError& e) {
      EXPECT_EQ(e.field(), field) << e.what();
      EXPECT_EQ(e.layer(), "in");
    }
  };
  expect_field("input_param { shape { dim: 1 } shape { dim: 2 } }", "input_param.shape");
  expect_field("input_param { shape { dim: 2 dim: -1 } }", "input_param.shape");
  L layer(test::MakeParam<P>("name: 'in' type: 'Input' input_param { shape { dim: 1 } }"));
  test::Blobs bottom;
  bottom.add({1}, FLOAT);
  EXPECT_THROW(layer.SetUp(bottom.vec, top.vec), FieldError);
}

// GPU against CPU: nothing to compute; the tops keep their shapes and zeros.
TYPED_TEST(InputLayerTest, GpuMatchesCpu) {
  auto fill = [](int, Blob*) {};
  test::CheckGpuAgainstCpu<TypeParam>("type: 'Input' input_param { shape { dim: 2 dim: 3 } }", {}, fill,
                                      test::GpuTolerance{0, 0}, {}, 2);
}

}  // namespace
}  // namespace cortado
