// ParameterLayer: the blob's shape and zero start, forward copy, backward
// accumulation into the parameter diff, a loaded blob, the shape checks,
// finite differences for (double, double) and (float, float), 16-bit pairs
// against (double, double), GPU against CPU.

#include "cortado/layers/parameter_layer.hpp"

#include "test_util.hpp"

namespace cortado {
namespace {

template <typename P>
class ParameterLayerTest : public ::testing::Test {};
TYPED_TEST_SUITE(ParameterLayerTest, test::AllPairs, test::PairNames);

constexpr const char* kParam = "type: 'Parameter' parameter_param { shape { dim: 2 dim: 3 } }";

TYPED_TEST(ParameterLayerTest, ForwardBackward) {
  using F = typename TypeParam::Ftype;
  using B = typename TypeParam::Btype;
  auto layer = test::NewLayer<TypeParam>(kParam);
  test::Blobs bottom, top;
  top.add(type_of<F>());
  layer->SetUp(bottom.vec, top.vec);
  ASSERT_EQ(layer->blobs().size(), 1u);
  Blob* w = layer->blobs()[0].get();
  EXPECT_EQ(w->shape(), (std::vector<int>{2, 3}));
  EXPECT_EQ(top[0]->shape(), (std::vector<int>{2, 3}));
  EXPECT_EQ(test::GetData(*w), std::vector<double>(6, 0));  // no filler: zeros
  test::SetData(w, {1, -2, 3, -4, 5, -6});
  layer->Forward(bottom.vec, top.vec);
  EXPECT_EQ(test::GetData(*top[0]), (std::vector<double>{1, -2, 3, -4, 5, -6}));
  test::SetDiff(w, {10, 10, 10, 10, 10, 10}, type_of<B>());
  test::SetDiff(top[0], {1, 2, 3, 4, 5, 6}, type_of<B>());
  layer->Backward(top.vec, {}, bottom.vec);
  EXPECT_EQ(test::GetDiff(*w), (std::vector<double>{11, 12, 13, 14, 15, 16}));  // accumulated
}

TYPED_TEST(ParameterLayerTest, LoadedBlobIsKept) {
  using F = typename TypeParam::Ftype;
  auto layer = test::NewLayer<TypeParam>(std::string(kParam) +
                                         " blobs { shape { dim: 2 dim: 3 } data: [1, 2, 3, 4, 5, 6] }");
  test::Blobs bottom, top;
  top.add(type_of<F>());
  layer->SetUp(bottom.vec, top.vec);
  layer->Forward(bottom.vec, top.vec);
  EXPECT_EQ(test::GetData(*top[0]), (std::vector<double>{1, 2, 3, 4, 5, 6}));
}

TYPED_TEST(ParameterLayerTest, Errors) {
  using F = typename TypeParam::Ftype;
  struct Case { const char* text; const char* field; const char* message; };
  const Case cases[] = {
      {"", "parameter_param.shape", "is required"},
      {"parameter_param { }", "parameter_param.shape", "is required"},
      {"parameter_param { shape { dim: 2 dim: -1 } }", "parameter_param.shape", "dimension -1"},
      {"parameter_param { shape { dim: 2 dim: 3 } } blobs { shape { dim: 6 } data: [1, 2, 3, 4, 5, 6] }", "blobs",
       "of shape (6)"},
  };
  for (const Case& c : cases) {
    auto layer = test::NewLayer<TypeParam>(std::string("name: 'p' type: 'Parameter' ") + c.text);
    test::Blobs bottom, top;
    top.add(type_of<F>());
    try {
      layer->SetUp(bottom.vec, top.vec);
      ADD_FAILURE() << c.text << " was accepted";
    } catch (const FieldError& e) {
      EXPECT_EQ(e.field(), c.field) << e.what();
      EXPECT_NE(std::string(e.what()).find(c.message), std::string::npos) << e.what();
    }
  }
  auto layer = test::NewLayer<TypeParam>(kParam);
  test::Blobs bottom, top;
  bottom.add({2, 3}, type_of<F>());
  top.add(type_of<F>());
  try {
    layer->SetUp(bottom.vec, top.vec);
    ADD_FAILURE() << "a bottom was accepted";
  } catch (const FieldError& e) {
    EXPECT_EQ(e.field(), "bottom") << e.what();
  }
}

// Forward copies and backward adds the top diff to a zero diff: exact.
TYPED_TEST(ParameterLayerTest, Gradient) {
  auto fill = [](int, Blob*) {};
  test::CheckLayer<TypeParam>("type: 'Parameter' parameter_param { shape { dim: 3 dim: 1 dim: 2 } }", {}, fill,
                              test::GradientSettings(), test::ReferenceTolerance{0, 0});
}

TYPED_TEST(ParameterLayerTest, GpuMatchesCpu) {
  auto fill = [](int, Blob*) {};
  test::CheckGpuAgainstCpu<TypeParam>("type: 'Parameter' parameter_param { shape { dim: 4 dim: 5 } }", {}, fill,
                                      test::GpuTolerance{0, 0});
}

}  // namespace
}  // namespace cortado
