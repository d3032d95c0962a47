#include "cortado/layers/eltwise_layer.hpp"

#include <algorithm>
#include <numeric>
#include <random>

#include "test_util.hpp"

namespace cortado {
namespace {

template <typename P>
class EltwiseLayerTest : public ::testing::Test {
 protected:
  using F = typename P::Ftype;
  using B = typename P::Btype;
  // Three (2, 2) bottoms; returns the top and fills the bottom diffs for dy.
  std::vector<double> Run(const std::string& param, const std::vector<double>& dy) {
    auto layer = test::NewLayer<P>("name: 'e' type: 'Eltwise' eltwise_param { " + param + " }");
    bottom_ = test::Blobs();
    test::Blobs top;
    bottom_.add({2, 2}, type_of<F>(), {1, -2, 3, 0.5});
    bottom_.add({2, 2}, type_of<F>(), {2, 4, -1, 0.25});
    bottom_.add({2, 2}, type_of<F>(), {-3, 1, 3, 2});
    top.add(type_of<F>());
    layer->SetUp(bottom_.vec, top.vec);
    layer->Forward(bottom_.vec, top.vec);
    test::SetDiff(top[0], dy, type_of<B>());
    layer->Backward(top.vec, {true, true, true}, bottom_.vec);
    return test::GetData(*top[0]);
  }
  test::Blobs bottom_;
};
TYPED_TEST_SUITE(EltwiseLayerTest, test::AllPairs, test::PairNames);

// float16 tolerances: each output is accumulated in float over three rounded
// inputs and rounded once; PROD's gradient multiplies two rounded inputs.
const test::ReferenceTolerance kTol{1, 2};

// Every element of bottom i gets a distinct value from {-0.6, -0.2, 0.3, 0.7}
// (a per-element shuffle), so MAX has no near-ties for finite differences.
void FillSeparated(int i, Blob* b) {
  std::vector<double> v(b->count());
  const double levels[] = {-0.6, -0.2, 0.3, 0.7};
  for (size_t k = 0; k < v.size(); ++k) {
    std::vector<int> order(4);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), std::mt19937(static_cast<uint32_t>(k)));
    v[k] = levels[order[i]] + 0.01 * ((k * 7) % 5);
  }
  test::SetData(b, v);
}

TYPED_TEST(EltwiseLayerTest, Sum) {
  const std::vector<double> y = this->Run("operation: SUM", {1, 2, 3, 4});
  EXPECT_EQ(y, (std::vector<double>{0, 3, 5, 2.75}));
  for (int i = 0; i < 3; ++i) EXPECT_EQ(test::GetDiff(*this->bottom_[i]), (std::vector<double>{1, 2, 3, 4}));
}

TYPED_TEST(EltwiseLayerTest, SumWithCoefficients) {
  const std::vector<double> y = this->Run("operation: SUM coeff: 1 coeff: -0.5 coeff: 2", {1, 2, 3, 4});
  EXPECT_EQ(y, (std::vector<double>{-6, -2, 9.5, 4.375}));
  EXPECT_EQ(test::GetDiff(*this->bottom_[1]), (std::vector<double>{-0.5, -1, -1.5, -2}));
  EXPECT_EQ(test::GetDiff(*this->bottom_[2]), (std::vector<double>{2, 4, 6, 8}));
}

TYPED_TEST(EltwiseLayerTest, Prod) {
  for (const char* stable : {"true", "false"}) {
    SCOPED_TRACE(stable);
    const std::vector<double> y = this->Run(std::string("operation: PROD stable_prod_grad: ") + stable, {1, 2, 3, 4});
    EXPECT_EQ(y, (std::vector<double>{-6, -8, -9, 0.25}));
    EXPECT_EQ(test::GetDiff(*this->bottom_[0]), (std::vector<double>{-6, 8, -9, 2}));
    EXPECT_EQ(test::GetDiff(*this->bottom_[1]), (std::vector<double>{-3, -4, 27, 4}));
    EXPECT_EQ(test::GetDiff(*this->bottom_[2]), (std::vector<double>{2, -16, -9, 0.5}));
  }
}

TYPED_TEST(EltwiseLayerTest, Max) {
  // Element 2 ties between bottoms 0 and 2 (3 and 3): the first bottom wins.
  const std::vector<double> y = this->Run("operation: MAX", {1, 2, 3, 4});
  EXPECT_EQ(y, (std::vector<double>{2, 4, 3, 2}));
  EXPECT_EQ(test::GetDiff(*this->bottom_[0]), (std::vector<double>{0, 0, 3, 0}));
  EXPECT_EQ(test::GetDiff(*this->bottom_[1]), (std::vector<double>{1, 2, 0, 0}));
  EXPECT_EQ(test::GetDiff(*this->bottom_[2]), (std::vector<double>{0, 0, 0, 4}));
}

TYPED_TEST(EltwiseLayerTest, Errors) {
  using F = typename TypeParam::Ftype;
  struct Case { const char* param; std::vector<int> second; const char* field; };
  const Case cases[] = {
      {"operation: PROD coeff: 1 coeff: 2", {2, 3}, "eltwise_param.coeff"},
      {"operation: SUM coeff: 1", {2, 3}, "eltwise_param.coeff"},
      {"operation: SUM", {3, 2}, "bottom[1]"},
  };
  for (const Case& c : cases) {
    auto layer = test::NewLayer<TypeParam>(std::string("name: 'e' type: 'Eltwise' eltwise_param { ") + c.param + " }");
    test::Blobs bottom, top;
    bottom.add({2, 3}, type_of<F>());
    bottom.add(c.second, type_of<F>());
    top.add(type_of<F>());
    try {
      layer->SetUp(bottom.vec, top.vec);
      ADD_FAILURE() << c.param << " was accepted";
    } catch (const FieldError& e) {
      EXPECT_EQ(e.field(), c.field) << e.what();
    }
  }
}

TYPED_TEST(EltwiseLayerTest, GradientSum) {
  auto fill = [](int i, Blob* b) { test::FillUniform(b, -1, 1, 30 + i); };
  test::CheckLayer<TypeParam>("type: 'Eltwise' eltwise_param { operation: SUM coeff: 1 coeff: -2 coeff: 0.5 }",
                              {{2, 3, 4}, {2, 3, 4}, {2, 3, 4}}, fill, test::GradientSettings(), kTol);
}

TYPED_TEST(EltwiseLayerTest, GradientProd) {
  auto fill = [](int i, Blob* b) { test::FillUniform(b, 0.5, 1.5, 40 + i); };
  test::CheckLayer<TypeParam>("type: 'Eltwise' eltwise_param { operation: PROD }",
                              {{2, 3, 4}, {2, 3, 4}, {2, 3, 4}}, fill, test::GradientSettings(), kTol);
}

TYPED_TEST(EltwiseLayerTest, GradientProdUnstable) {
  auto fill = [](int i, Blob* b) { test::FillUniform(b, 0.5, 1.5, 50 + i); };
  test::CheckLayer<TypeParam>("type: 'Eltwise' eltwise_param { operation: PROD stable_prod_grad: false }",
                              {{2, 3, 4}, {2, 3, 4}}, fill, test::GradientSettings(), kTol);
}

TYPED_TEST(EltwiseLayerTest, GradientMax) {
  test::CheckLayer<TypeParam>("type: 'Eltwise' eltwise_param { operation: MAX }",
                              {{2, 3, 4}, {2, 3, 4}, {2, 3, 4}}, FillSeparated, test::GradientSettings(), kTol);
}

// GPU against CPU: the kernels round every product and sum on its own, in
// the CPU's order, so the results agree exactly unless the host compiler
// fuses a multiply-add (one ulp).
TYPED_TEST(EltwiseLayerTest, GpuMatchesCpu) {
  auto fill = [](int i, Blob* b) { test::FillUniform(b, -1, 1, 40 + i); };
  const std::vector<std::vector<int>> shapes = {{2, 3, 4}, {2, 3, 4}, {2, 3, 4}};
  const test::GpuTolerance tol{1, 1};
  for (const char* param : {"operation: SUM coeff: 1 coeff: -2 coeff: 0.5", "operation: PROD",
                            "operation: PROD stable_prod_grad: false", "operation: MAX"}) {
    SCOPED_TRACE(param);
    test::CheckGpuAgainstCpu<TypeParam>(str_cat("type: 'Eltwise' eltwise_param { ", param, " }"), shapes, fill, tol);
  }
  test::CheckGpuAgainstCpu<TypeParam>("type: 'Eltwise' eltwise_param { operation: MAX }", shapes, fill, tol,
                                      {true, false, true});
}

}  // namespace
}  // namespace cortado
