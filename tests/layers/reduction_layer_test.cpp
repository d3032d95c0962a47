#include "cortado/layers/reduction_layer.hpp"

#include "test_util.hpp"

namespace cortado {
namespace {

template <typename P>
class ReductionLayerTest : public ::testing::Test {};
TYPED_TEST_SUITE(ReductionLayerTest, test::AllPairs, test::PairNames);

TYPED_TEST(ReductionLayerTest, ForwardBackwardEachOperation) {
  using F = typename TypeParam::Ftype;
  using B = typename TypeParam::Btype;
  struct Case { const char* op; std::vector<double> top; std::vector<double> dx; };
  // x = (2, 3): rows {1, -2, 3} and {0, 4, -1}; coeff 2; dtop = {1, -0.5}.
  const Case cases[] = {
      {"SUM", {4, 6}, {2, 2, 2, -1, -1, -1}},
      {"ASUM", {12, 10}, {2, -2, 2, 0, -1, 1}},
      {"SUMSQ", {28, 34}, {4, -8, 12, 0, -8, 2}},
      {"MEAN", {4.0 / 3, 2}, {2.0 / 3, 2.0 / 3, 2.0 / 3, -1.0 / 3, -1.0 / 3, -1.0 / 3}},
  };
  for (const Case& c : cases) {
    auto layer = test::NewLayer<TypeParam>(std::string("type: 'Reduction' reduction_param { axis: 1 coeff: 2 operation: ") +
                                           c.op + " }");
    test::Blobs bottom, top;
    bottom.add({2, 3}, type_of<F>(), {1, -2, 3, 0, 4, -1});
    top.add(type_of<F>());
    layer->SetUp(bottom.vec, top.vec);
    layer->Forward(bottom.vec, top.vec);
    EXPECT_EQ(top[0]->shape(), (std::vector<int>{2})) << c.op;
    test::ExpectNear<F>(test::GetData(*top[0]), c.top, 1, c.op);
    test::SetDiff(top[0], {1, -0.5}, type_of<B>());
    layer->Backward(top.vec, {true}, bottom.vec);
    test::ExpectNear<B>(test::GetDiff(*bottom[0]), c.dx, 1, c.op);
  }
}

TYPED_TEST(ReductionLayerTest, DefaultAxisGivesScalar) {
  using F = typename TypeParam::Ftype;
  auto layer = test::NewLayer<TypeParam>("type: 'Reduction'");
  test::Blobs bottom, top;
  bottom.add({2, 2}, type_of<F>(), {1, 2, 3, 4});
  top.add(type_of<F>());
  layer->SetUp(bottom.vec, top.vec);
  layer->Forward(bottom.vec, top.vec);
  EXPECT_EQ(top[0]->num_axes(), 0);
  EXPECT_EQ(test::GetData(*top[0]), (std::vector<double>{10}));
}

TYPED_TEST(ReductionLayerTest, Errors) {
  using F = typename TypeParam::Ftype;
  for (const char* text : {"reduction_param { axis: 3 }", "reduction_param { axis: -4 }"}) {
    auto layer = test::NewLayer<TypeParam>(std::string("name: 'r' type: 'Reduction' ") + text);
    test::Blobs bottom, top;
    bottom.add({2, 3, 4}, type_of<F>());
    top.add(type_of<F>());
    try {
      layer->SetUp(bottom.vec, top.vec);
      ADD_FAILURE() << text << " was accepted";
    } catch (const FieldError& e) {
      EXPECT_EQ(e.field(), "reduction_param.axis") << e.what();
    }
  }
}

// Sums of 12 rounded values in float, stored once: forward 2 float16 epsilons
// relative to max(1, |ref|) (SUMSQ's squares are exact in float); backward
// one product: 2.
TYPED_TEST(ReductionLayerTest, Gradient) {
  auto fill = [](int i, Blob* b) { test::FillUniform(b, -1, 1, 10 + i); };
  for (const char* op : {"SUM", "ASUM", "SUMSQ", "MEAN"}) {
    SCOPED_TRACE(op);
    test::CheckLayer<TypeParam>(
        std::string("type: 'Reduction' reduction_param { axis: 1 coeff: 1.5 operation: ") + op + " }",
        {{2, 3, 4}}, fill, test::GradientSettings().kink(0, 2e-2), test::ReferenceTolerance{2, 2});
  }
}

TYPED_TEST(ReductionLayerTest, GpuMatchesCpu) {
  auto fill = [](int i, Blob* b) { test::FillUniform(b, -1, 1, 23 + i); };
  test::CheckGpuAgainstCpu<TypeParam>("type: 'Reduction' reduction_param { axis: 1 operation: SUMSQ coeff: 0.5 }",
                                      {{3, 2, 5}}, fill, test::GpuTolerance{2, 2});
}

}  // namespace
}  // namespace cortado
