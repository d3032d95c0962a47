// InnerProductLayer: hand-computed forward and backward (plain, transposed
// weights, axis 2), validation, finite differences for (double, double) and
// (float, float), float16 pairs against the (double, double) reference.

#include "cortado/layers/inner_product_layer.hpp"

#include <gtest/gtest.h>

#include <type_traits>

#include "test_util.hpp"

namespace cortado {
namespace {

template <typename P>
class InnerProductLayerTest : public ::testing::Test {
 protected:
  using F = typename P::Ftype;
  using B = typename P::Btype;

  void Init(const std::string& text, const std::vector<int>& shape, const std::vector<double>& x,
             const std::vector<double>& w, const std::vector<double>& b) {
    layer_ = std::make_unique<InnerProductLayer<F, B>>(test::MakeParam<P>(text));
    bottom_ = std::make_unique<Blob>(shape, type_of<F>());
    top_ = std::make_unique<Blob>(type_of<F>());
    test::SetData(bottom_.get(), x);
    layer_->SetUp({bottom_.get()}, {top_.get()});
    test::SetData(layer_->blobs()[0].get(), w);
    if (!b.empty()) test::SetData(layer_->blobs()[1].get(), b);
    layer_->Forward({bottom_.get()}, {top_.get()});
  }

  void Backward(const std::vector<double>& dy) {
    for (auto& p : layer_->blobs()) p->diff().set_zero();
    test::SetDiff(top_.get(), dy, type_of<B>());
    layer_->Backward({top_.get()}, {true}, {bottom_.get()});
  }

  std::unique_ptr<InnerProductLayer<F, B>> layer_;
  std::unique_ptr<Blob> bottom_, top_;
};

TYPED_TEST_SUITE(InnerProductLayerTest, test::AllPairs, test::PairNames);

void ExpectValues(const std::vector<double>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_DOUBLE_EQ(got[i], want[i]) << "index " << i;
}

// X = [1 2 3; 4 5 6], W = [1 0 -1; 2 1 0], b = (1, -1):
// Y = X W^T + b = [-1 3; -1 12]. Small integers: exact in every type.
const std::vector<double> kX{1, 2, 3, 4, 5, 6};
const std::vector<double> kW{1, 0, -1, 2, 1, 0};
const std::vector<double> kWt{1, 2, 0, 1, -1, 0};  // the same W stored (K, N)
const std::vector<double> kB{1, -1};

TYPED_TEST(InnerProductLayerTest, ForwardBackwardHandComputed) {
  this->Init("type: 'InnerProduct' inner_product_param { num_output: 2 }", {2, 3}, kX, kW, kB);
  EXPECT_EQ(this->top_->shape(), (std::vector<int>{2, 2}));
  ExpectValues(test::GetData(*this->top_), {-1, 3, -1, 12});
  // dY = [1 0; 0 2]: dX = dY W = [1 0 -1; 4 2 0], dW = dY^T X = [1 2 3; 8 10 12], db = (1, 2).
  this->Backward({1, 0, 0, 2});
  ExpectValues(test::GetDiff(*this->bottom_), {1, 0, -1, 4, 2, 0});
  ExpectValues(test::GetDiff(*this->layer_->blobs()[0]), {1, 2, 3, 8, 10, 12});
  ExpectValues(test::GetDiff(*this->layer_->blobs()[1]), {1, 2});
}

TYPED_TEST(InnerProductLayerTest, ForwardBackwardTransposed) {
  this->Init("type: 'InnerProduct' inner_product_param { num_output: 2 transpose: true }", {2, 3}, kX, kWt, kB);
  EXPECT_EQ(this->layer_->blobs()[0]->shape(), (std::vector<int>{3, 2}));
  ExpectValues(test::GetData(*this->top_), {-1, 3, -1, 12});
  this->Backward({1, 0, 0, 2});
  ExpectValues(test::GetDiff(*this->bottom_), {1, 0, -1, 4, 2, 0});
  ExpectValues(test::GetDiff(*this->layer_->blobs()[0]), {1, 8, 2, 10, 3, 12});  // (dY^T X)^T
}

TYPED_TEST(InnerProductLayerTest, AxisKeepsLeadingDims) {
  // bottom (1, 2, 3) with axis 2 (or -1): rows are the 2 vectors of 3; top (1, 2, 2).
  for (const char* axis : {"2", "-1"}) {
    this->Init(std::string("type: 'InnerProduct' inner_product_param { num_output: 2 bias_term: false axis: ") +
                    axis + " }",
                {1, 2, 3}, kX, kW, {});
    EXPECT_EQ(this->top_->shape(), (std::vector<int>{1, 2, 2}));
    EXPECT_EQ(this->layer_->blobs().size(), 1u);
    ExpectValues(test::GetData(*this->top_), {-2, 4, -2, 13});
  }
}

// float16 pairs: same rounded inputs in both runs, sums in float; only the
// final roundings differ: 2 eps forward, 4 eps backward.
const test::ReferenceTolerance kTol{2, 4};
const char* kFillers = " weight_filler { type: 'gaussian' std: 0.5 } bias_filler { type: 'uniform' min: -1 max: 1 }";
const auto kFill = [](int i, Blob* b) { test::FillGaussian(b, 0, 1, 5 + i); };

TYPED_TEST(InnerProductLayerTest, Gradient) {
  test::CheckLayer<TypeParam>(std::string("type: 'InnerProduct' inner_product_param { num_output: 5") + kFillers + " }",
                              {{3, 2, 2, 3}}, kFill, test::GradientSettings(), kTol);
}

TYPED_TEST(InnerProductLayerTest, GradientTransposedAxis2) {
  test::CheckLayer<TypeParam>(
      std::string("type: 'InnerProduct' inner_product_param { num_output: 4 transpose: true axis: 2") + kFillers + " }",
      {{2, 3, 5}}, kFill, test::GradientSettings(), kTol);
}

// ---- GPU against CPU ---------------------------------------------------------------

// cuBLAS sums in another order than the CPU GEMM (and FP16 storage rounds the
// GEMM output, then the bias add): float16 pairs 8 eps forward, 16 backward;
// float and double 64 eps (relative to max(1, |cpu|)).
template <typename P>
test::GpuTolerance IpGpuTolerance() {
  constexpr bool half = test::is_half_pair<P>();
  return half ? test::GpuTolerance{8, 16} : test::GpuTolerance{64, 64};
}

TYPED_TEST(InnerProductLayerTest, GpuMatchesCpu) {
  test::CheckGpuAgainstCpu<TypeParam>(
      std::string("type: 'InnerProduct' inner_product_param { num_output: 5") + kFillers + " }", {{3, 2, 2, 3}},
      kFill, IpGpuTolerance<TypeParam>());
}

TYPED_TEST(InnerProductLayerTest, GpuMatchesCpuTransposedAxis2) {
  test::CheckGpuAgainstCpu<TypeParam>(
      std::string("type: 'InnerProduct' inner_product_param { num_output: 4 transpose: true axis: 2") + kFillers + " }",
      {{2, 3, 5}}, kFill, IpGpuTolerance<TypeParam>());
}

// ---- validation ----------------------------------------------------------------

std::string SetUpError(const std::string& ip_param, const std::vector<int>& shape,
                       std::vector<std::vector<int>> loaded = {}) {
  InnerProductLayer<float, float> layer(test::MakeParam<test::TypePair<float, float>>(
      "name: 'fc' type: 'InnerProduct' inner_product_param { " + ip_param + " }"));
  for (const auto& s : loaded) layer.blobs().push_back(std::make_shared<Blob>(s, FLOAT));
  Blob bottom(shape, FLOAT), top(FLOAT);
  try {
    layer.SetUp({&bottom}, {&top});
  } catch (const FieldError& e) {
    return e.field() + " | " + e.message();
  }
  return "no error";
}

TEST(InnerProductLayerValidation, Fields) {
  EXPECT_EQ(SetUpError("bias_term: false", {2, 3}), "inner_product_param.num_output | is required");
  EXPECT_EQ(SetUpError("num_output: 0", {2, 3}), "inner_product_param.num_output | must be in 1..2147483647, got 0");
  EXPECT_EQ(SetUpError("num_output: 2 axis: 2", {2, 3}).substr(0, 26), "inner_product_param.axis |");
  EXPECT_EQ(SetUpError("num_output: 2 axis: -3", {2, 3}).substr(0, 26), "inner_product_param.axis |");
  EXPECT_EQ(SetUpError("num_output: 2 weight_filler { type: 'nonsense' }", {2, 3}).substr(0, 39),
            "inner_product_param.weight_filler.type ");
  // Loaded weights: (N, K) = (2, 3) fits; (3, 2) only with transpose; a wrong bias does not.
  EXPECT_EQ(SetUpError("num_output: 2", {2, 3}, {{2, 3}, {2}}), "no error");
  EXPECT_EQ(SetUpError("num_output: 2", {2, 3}, {{3, 2}, {2}}).substr(0, 8), "blobs | ");
  EXPECT_EQ(SetUpError("num_output: 2 transpose: true", {2, 3}, {{3, 2}, {2}}), "no error");
  EXPECT_EQ(SetUpError("num_output: 2", {2, 3}, {{2, 3}, {3}}).substr(0, 8), "blobs | ");
  EXPECT_EQ(SetUpError("num_output: 2", {2, 3}, {{2, 3}}).substr(0, 8), "blobs | ");
}

TEST(InnerProductLayerValidation, ReshapeKeepsInputSize) {
  InnerProductLayer<float, float> layer(test::MakeParam<test::TypePair<float, float>>(
      "name: 'fc' type: 'InnerProduct' inner_product_param { num_output: 2 }"));
  Blob bottom({2, 3}, FLOAT), top(FLOAT);
  layer.SetUp({&bottom}, {&top});
  bottom.Reshape({5, 3});
  layer.Reshape({&bottom}, {&top});
  EXPECT_EQ(top.shape(), (std::vector<int>{5, 2}));
  bottom.Reshape({5, 4});
  EXPECT_THROW(layer.Reshape({&bottom}, {&top}), FieldError);
}

}  // namespace
}  // namespace cortado
