#include "cortado/layers/argmax_layer.hpp"

#include "test_util.hpp"

namespace cortado {
namespace {

template <typename P>
class ArgMaxLayerTest : public ::testing::Test {};
TYPED_TEST_SUITE(ArgMaxLayerTest, test::AllPairs, test::PairNames);

template <typename P>
std::vector<double> RunArgMax(const std::string& param, const std::vector<int>& shape, const std::vector<double>& x,
                              std::vector<int>* top_shape) {
  auto layer = test::NewLayer<P>("type: 'ArgMax' argmax_param { " + param + " }");
  test::Blobs bottom, top;
  bottom.add(shape, type_of<typename P::Ftype>(), x);
  top.add(type_of<typename P::Ftype>());
  layer->SetUp(bottom.vec, top.vec);
  layer->Forward(bottom.vec, top.vec);
  *top_shape = top[0]->shape();
  return test::GetData(*top[0]);
}

TYPED_TEST(ArgMaxLayerTest, FlattenedTopKWithValues) {
  const std::vector<double> x = {0.5, 3, -1, 2, 0.25, 3, 1, -2};  // (2, 4)
  std::vector<int> shape;
  EXPECT_EQ(RunArgMax<TypeParam>("top_k: 2", {2, 4}, x, &shape), (std::vector<double>{1, 3, 1, 2}));
  EXPECT_EQ(shape, (std::vector<int>{2, 1, 2}));
  EXPECT_EQ(RunArgMax<TypeParam>("top_k: 2 out_max_val: true", {2, 4}, x, &shape),
            (std::vector<double>{1, 3, 3, 2, 1, 2, 3, 1}));
  EXPECT_EQ(shape, (std::vector<int>{2, 2, 2}));
  EXPECT_EQ(RunArgMax<TypeParam>("", {2, 2, 2}, {0, 0, 1, 0, 5, 4, 3, 2}, &shape), (std::vector<double>{2, 0}));
  EXPECT_EQ(RunArgMax<TypeParam>("", {1, 2, 2}, {0, 0, 0, 0}, &shape), (std::vector<double>{3}));
}

TYPED_TEST(ArgMaxLayerTest, AlongAxis) {
  // (2, 3, 2): search along axis 1 for every (n, w).
  const std::vector<double> x = {1, 6, 5, 2, 3, 4, -1, -2, -3, -6, -5, -4};
  std::vector<int> shape;
  EXPECT_EQ(RunArgMax<TypeParam>("axis: 1", {2, 3, 2}, x, &shape), (std::vector<double>{1, 0, 0, 0}));
  EXPECT_EQ(shape, (std::vector<int>{2, 1, 2}));
  EXPECT_EQ(RunArgMax<TypeParam>("axis: -2 top_k: 2 out_max_val: true", {2, 3, 2}, x, &shape),
            (std::vector<double>{5, 6, 3, 4, -1, -2, -3, -4}));
  EXPECT_EQ(shape, (std::vector<int>{2, 2, 2}));
}

// Indexes past float16's exact range (2048) stay exact: the top is float.
TYPED_TEST(ArgMaxLayerTest, LargeIndexExact) {
  std::vector<double> x(3001, 0);
  x[3000] = 1;
  std::vector<int> shape;
  EXPECT_EQ(RunArgMax<TypeParam>("", {1, 3001}, x, &shape), (std::vector<double>{3000}));
}

TYPED_TEST(ArgMaxLayerTest, Errors) {
  using F = typename TypeParam::Ftype;
  struct Case { const char* text; const char* field; const char* message; };
  const Case cases[] = {
      {"argmax_param { top_k: 0 }", "argmax_param.top_k", "got 0"},
      {"argmax_param { top_k: 13 }", "argmax_param.top_k", "[1, 12]"},
      {"argmax_param { axis: 1 top_k: 4 }", "argmax_param.top_k", "[1, 3]"},
      {"argmax_param { axis: 3 }", "argmax_param.axis", "got 3"},
  };
  for (const Case& c : cases) {
    auto layer = test::NewLayer<TypeParam>(std::string("name: 'a' type: 'ArgMax' ") + c.text);
    test::Blobs bottom, top;
    bottom.add({2, 3, 4}, type_of<F>());
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

// No backward. Inputs are rounded to Ftype for both runs, so the float16 run
// picks the same indexes and values as the double run: exact.
TYPED_TEST(ArgMaxLayerTest, MatchesDouble) {
  auto fill = [](int i, Blob* b) { test::FillUniform(b, -1, 1, 10 + i); };
  test::CheckAgainstDouble<TypeParam>("type: 'ArgMax' argmax_param { top_k: 3 out_max_val: true }", {{2, 3, 4}},
                                      fill, test::ReferenceTolerance{0, 0}, {false});
  test::CheckAgainstDouble<TypeParam>("type: 'ArgMax' argmax_param { axis: 1 top_k: 2 }", {{2, 3, 4}}, fill,
                                      test::ReferenceTolerance{0, 0}, {false});
}

TYPED_TEST(ArgMaxLayerTest, GpuMatchesCpu) {
  auto fill = [](int i, Blob* b) { test::FillUniform(b, -1, 1, 23 + i); };
  test::CheckGpuAgainstCpu<TypeParam>("type: 'ArgMax' argmax_param { axis: 2 top_k: 2 out_max_val: true }",
                                      {{2, 3, 5}}, fill, test::GpuTolerance{0, 0}, {false});
}

}  // namespace
}  // namespace cortado
