// BatchNormLayer: hand-computed forward/backward with batch and global
// statistics (with and without scale_bias), the running-statistics update,
// the phase default, in place, finite differences for (double, double) and
// (float, float), float16 pairs against (double, double), GPU against CPU,
// field errors and the ParamSpecs the layer adds for its statistics.

#include "cortado/layers/batch_norm_layer.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <type_traits>

#include "test_util.hpp"

namespace cortado {
namespace {

template <typename P>
class BatchNormLayerTest : public ::testing::Test {
 protected:
  using F = typename P::Ftype;
  using B = typename P::Btype;

  void Init(const std::string& text, const std::vector<int>& shape, const std::vector<double>& x) {
    layer_ = std::make_unique<BatchNormLayer<F, B>>(test::MakeParam<P>(text));
    bottom_ = std::make_unique<Blob>(shape, type_of<F>());
    top_ = std::make_unique<Blob>(type_of<F>());
    test::SetData(bottom_.get(), x);
    layer_->SetUp({bottom_.get()}, {top_.get()});
  }
  void Forward() { layer_->Forward({bottom_.get()}, {top_.get()}); }
  void Backward(const std::vector<double>& dy) {
    for (auto& p : layer_->blobs()) p->diff().set_zero();
    test::SetDiff(top_.get(), dy, type_of<B>());
    layer_->Backward({top_.get()}, {true}, {bottom_.get()});
  }

  std::unique_ptr<BatchNormLayer<F, B>> layer_;
  std::unique_ptr<Blob> bottom_, top_;
};

TYPED_TEST_SUITE(BatchNormLayerTest, test::AllPairs, test::PairNames);

// x (N=2, C=2, S=2): channel 0 holds {1, 3, 5, 7} (mean 4, var 5), channel 1
// holds {0, 0, 2, 2} (mean 1, var 1). Layout (n, c, s).
const std::vector<double> kX{1, 3, 0, 0, 5, 7, 2, 2};
constexpr double kEps = static_cast<double>(1e-5f);  // the proto field is a float

std::vector<double> Normalized(const std::vector<double>& gamma, const std::vector<double>& beta) {
  const double mean[2] = {4, 1}, var[2] = {5, 1};
  std::vector<double> y(kX.size());
  for (size_t j = 0; j < kX.size(); ++j) {
    const int c = static_cast<int>((j / 2) % 2);
    y[j] = gamma[c] * (kX[j] - mean[c]) / std::sqrt(var[c] + kEps) + beta[c];
  }
  return y;
}

TYPED_TEST(BatchNormLayerTest, BatchStatsForwardAndRunningStats) {
  using F = typename TestFixture::F;
  this->Init("type: 'BatchNorm' batch_norm_param { moving_average_fraction: 0.5 }", {2, 2, 2}, kX);
  ASSERT_EQ(this->layer_->blobs().size(), 3u);
  this->Forward();
  test::ExpectNear<F>(test::GetData(*this->top_), Normalized({1, 1}, {0, 0}), 4, "top");
  // factor = 0.5 * 0 + 1; mean sums = mean; variance sums = m/(m-1) var = 4/3 var.
  test::ExpectNear<float>(test::GetData(*this->layer_->blobs()[0]), {4, 1}, 4, "running mean");
  test::ExpectNear<float>(test::GetData(*this->layer_->blobs()[1]), {20.0 / 3, 4.0 / 3}, 4, "running var");
  test::ExpectNear<float>(test::GetData(*this->layer_->blobs()[2]), {1}, 0, "factor");
  this->Forward();
  test::ExpectNear<float>(test::GetData(*this->layer_->blobs()[0]), {6, 1.5}, 4, "running mean");
  test::ExpectNear<float>(test::GetData(*this->layer_->blobs()[2]), {1.5}, 0, "factor");
}

TYPED_TEST(BatchNormLayerTest, GlobalStatsForwardBackward) {
  using F = typename TestFixture::F;
  using B = typename TestFixture::B;
  // phase TEST: global statistics by default. mean = (8, 2)/2, var = (10, 2)/2.
  this->Init("type: 'BatchNorm' phase: TEST batch_norm_param { scale_bias: true }", {2, 2, 2}, kX);
  ASSERT_EQ(this->layer_->blobs().size(), 5u);
  test::SetData(this->layer_->blobs()[0].get(), {8, 2});
  test::SetData(this->layer_->blobs()[1].get(), {10, 2});
  test::SetData(this->layer_->blobs()[2].get(), {2});
  test::SetData(this->layer_->blobs()[3].get(), {2, 0.5});
  test::SetData(this->layer_->blobs()[4].get(), {1, -1});
  this->Forward();
  test::ExpectNear<F>(test::GetData(*this->top_), Normalized({2, 0.5}, {1, -1}), 4, "top");
  test::ExpectNear<float>(test::GetData(*this->layer_->blobs()[0]), {8, 2}, 0, "statistics untouched");
  // dx = gamma / sqrt(var + eps) * dy; dgamma = sum dy * xhat; dbeta = sum dy.
  const std::vector<double> dy{1, 0, 1, 1, 0, 2, -1, 1};
  this->Backward(dy);
  std::vector<double> dx(8);
  const double g[2] = {2 / std::sqrt(5 + kEps), 0.5 / std::sqrt(1 + kEps)};
  for (size_t j = 0; j < 8; ++j) dx[j] = g[(j / 2) % 2] * dy[j];
  test::ExpectNear<B>(test::GetDiff(*this->bottom_), dx, 4, "dx");
  const std::vector<double> xhat = Normalized({1, 1}, {0, 0});
  double dgamma[2] = {0, 0}, dbeta[2] = {0, 0};
  for (size_t j = 0; j < 8; ++j) {
    dgamma[(j / 2) % 2] += dy[j] * xhat[j];
    dbeta[(j / 2) % 2] += dy[j];
  }
  test::ExpectNear<B>(test::GetDiff(*this->layer_->blobs()[3]), {dgamma[0], dgamma[1]}, 8, "dgamma");
  test::ExpectNear<B>(test::GetDiff(*this->layer_->blobs()[4]), {dbeta[0], dbeta[1]}, 8, "dbeta");
  test::ExpectNear<B>(test::GetDiff(*this->layer_->blobs()[0]), {0, 0}, 0, "no gradient for statistics");
}

TYPED_TEST(BatchNormLayerTest, BatchStatsBackwardHandComputed) {
  using B = typename TestFixture::B;
  this->Init("type: 'BatchNorm'", {2, 2, 2}, kX);
  this->Forward();
  const std::vector<double> dy{1, 0, 1, 1, 0, 2, -1, 1};
  this->Backward(dy);
  const std::vector<double> xhat = Normalized({1, 1}, {0, 0});
  const double var[2] = {5, 1};
  double mdy[2] = {0, 0}, mdyx[2] = {0, 0};
  for (size_t j = 0; j < 8; ++j) {
    mdy[(j / 2) % 2] += dy[j] / 4;
    mdyx[(j / 2) % 2] += dy[j] * xhat[j] / 4;
  }
  std::vector<double> dx(8);
  for (size_t j = 0; j < 8; ++j) {
    const int c = static_cast<int>((j / 2) % 2);
    dx[j] = (dy[j] - mdy[c] - xhat[j] * mdyx[c]) / std::sqrt(var[c] + kEps);
  }
  test::ExpectNear<B>(test::GetDiff(*this->bottom_), dx, 8, "dx");
}

TYPED_TEST(BatchNormLayerTest, InPlaceMatchesOutOfPlace) {
  using F = typename TestFixture::F;
  using B = typename TestFixture::B;
  const std::string text = "type: 'BatchNorm' batch_norm_param { scale_bias: true scale_filler { type: 'uniform' } }";
  this->Init(text, {2, 2, 2}, kX);
  this->Forward();
  const std::vector<double> dy{1, 0, 1, 1, 0, 2, -1, 1};
  this->Backward(dy);
  BatchNormLayer<F, B> inplace(test::MakeParam<TypeParam>(text));
  Blob x({2, 2, 2}, type_of<F>());
  test::SetData(&x, kX);
  inplace.SetUp({&x}, {&x});
  test::SetData(inplace.blobs()[3].get(), test::GetData(*this->layer_->blobs()[3]));
  inplace.Forward({&x}, {&x});
  EXPECT_EQ(test::GetData(x), test::GetData(*this->top_));
  test::SetDiff(&x, dy, type_of<B>());
  inplace.Backward({&x}, {true}, {&x});
  EXPECT_EQ(test::GetDiff(x), test::GetDiff(*this->bottom_));
}

// Out of place, the backward reads x from the bottom (no copy); in place it
// keeps one, unless global statistics need no xhat. Each gives the results
// of the out-of-place layer.
TYPED_TEST(BatchNormLayerTest, KeepsACopyOfItsInputOnlyWhereTheBackwardNeedsIt) {
  using F = typename TestFixture::F;
  using B = typename TestFixture::B;
  const std::vector<double> dy{1, 0, 1, 1, 0, 2, -1, 1};
  for (const char* text : {"type: 'BatchNorm'", "type: 'BatchNorm' batch_norm_param { use_global_stats: true }",
                           "type: 'BatchNorm' batch_norm_param { use_global_stats: true scale_bias: true }"}) {
    SCOPED_TRACE(text);
    const bool global = std::string(text).find("global") != std::string::npos;
    const bool gamma = std::string(text).find("scale_bias") != std::string::npos;
    this->Init(text, {2, 2, 2}, kX);
    if (global) test::SetData(this->layer_->blobs()[2].get(), {1});  // running statistics mean 0, var 0
    this->Forward();
    EXPECT_FALSE(this->layer_->kept_copy()) << "out of place";
    this->Backward(dy);
    BatchNormLayer<F, B> inplace(test::MakeParam<TypeParam>(text));
    Blob x({2, 2, 2}, type_of<F>());
    test::SetData(&x, kX);
    inplace.SetUp({&x}, {&x});
    for (size_t k = 0; k < inplace.blobs().size(); ++k)
      test::SetData(inplace.blobs()[k].get(), test::GetData(*this->layer_->blobs()[k]));
    if (global) test::SetData(inplace.blobs()[2].get(), {1});
    inplace.Forward({&x}, {&x});
    EXPECT_EQ(inplace.kept_copy(), !global || gamma);
    EXPECT_EQ(test::GetData(x), test::GetData(*this->top_));
    for (auto& p : inplace.blobs()) p->diff().set_zero();
    test::SetDiff(&x, dy, type_of<B>());
    inplace.Backward({&x}, {true}, {&x});
    EXPECT_EQ(test::GetDiff(x), test::GetDiff(*this->bottom_));
    for (size_t k = 3; k < inplace.blobs().size(); ++k)
      EXPECT_EQ(test::GetDiff(*inplace.blobs()[k]), test::GetDiff(*this->layer_->blobs()[k])) << "blob " << k;
  }
}

// float16: statistics in float from the same rounded inputs; the results
// round once: 4 eps forward, 8 eps backward (relative to max(1, |ref|)).
const test::ReferenceTolerance kTol{4, 8};
const auto kFill = [](int, Blob* b) { test::FillGaussian(b, 0.5, 2, 11); };
const char* kScaleBias =
    "type: 'BatchNorm' batch_norm_param { scale_bias: true scale_filler { type: 'uniform' min: 0.5 max: 1.5 } "
    "bias_filler { type: 'gaussian' std: 0.5 } }";

TYPED_TEST(BatchNormLayerTest, GradientBatchStats) {
  test::CheckLayer<TypeParam>("type: 'BatchNorm'", {{3, 2, 2, 3}}, kFill, test::GradientSettings().threshold(2e-3),
                              kTol);
}

TYPED_TEST(BatchNormLayerTest, GradientBatchStatsScaleBias) {
  test::CheckLayer<TypeParam>(kScaleBias, {{4, 3, 5}}, kFill, test::GradientSettings().threshold(2e-3), kTol);
}

TYPED_TEST(BatchNormLayerTest, GradientTwoAxes) {
  // (N, C) bottom: S = 1.
  test::CheckLayer<TypeParam>(kScaleBias, {{6, 3}}, kFill, test::GradientSettings().threshold(2e-3), kTol);
}

// Global statistics: the statistics blobs influence the top but are not
// learned, so the shared checker (which checks every parameter) does not
// apply; central differences on the bottom and on gamma/beta here.
template <typename T>
void CheckGlobalStatsGradient() {
  using P = test::TypePair<T, T>;
  auto layer = test::NewLayer<P>(std::string(kScaleBias) + " phase: TEST");
  Blob x({2, 3, 4}, type_of<T>()), y(type_of<T>());
  kFill(0, &x);
  layer->SetUp({&x}, {&y});
  test::SetData(layer->blobs()[0].get(), {0.5, -1, 2});
  test::SetData(layer->blobs()[1].get(), {3, 0.5, 1.5});
  test::SetData(layer->blobs()[2].get(), {1.5});
  layer->Forward({&x}, {&y});
  const std::vector<double> w = test::RandomVector(y.count(), 3);
  for (auto& p : layer->blobs()) p->diff().set_zero();
  test::SetDiff(&y, w, type_of<T>());
  layer->Backward({&y}, {true}, {&x});
  auto objective = [&]() {
    layer->Forward({&x}, {&y});
    const std::vector<double> v = test::GetData(y);
    double l = 0;
    for (size_t j = 0; j < v.size(); ++j) l += w[j] * v[j];
    return l;
  };
  const double h = 1e-2;
  for (Blob* b : {&x, layer->blobs()[3].get(), layer->blobs()[4].get()}) {
    const std::vector<double> analytic = test::GetDiff(*b);
    std::vector<double> v = test::GetData(*b);
    for (size_t j = 0; j < v.size(); ++j) {
      const double saved = v[j];
      v[j] = saved + h;
      test::SetData(b, v);
      const double lp = objective();
      v[j] = saved - h;
      test::SetData(b, v);
      const double lm = objective();
      v[j] = saved;
      test::SetData(b, v);
      EXPECT_NEAR(analytic[j], (lp - lm) / (2 * h), 1e-3 * std::max(1.0, std::fabs(analytic[j]))) << j;
    }
  }
  test::ExpectNear<float>(test::GetData(*layer->blobs()[2]), {1.5}, 0, "factor untouched");
}

TEST(BatchNormLayerGlobal, GradientDouble) { CheckGlobalStatsGradient<double>(); }
TEST(BatchNormLayerGlobal, GradientFloat) { CheckGlobalStatsGradient<float>(); }

// ---- GPU against CPU ---------------------------------------------------------------

// The block reductions sum in another order than the CPU loops; the
// normalized values then differ by a few units of the math type: float16
// pairs 4 eps forward, 8 backward; float and double 64 and 256 ulps.
template <typename P>
test::GpuTolerance BnGpuTolerance() {
  constexpr bool half = test::is_half_pair<P>();
  return half ? test::GpuTolerance{4, 8} : test::GpuTolerance{64, 256};
}

TYPED_TEST(BatchNormLayerTest, GpuMatchesCpu) {
  test::CheckGpuAgainstCpu<TypeParam>(kScaleBias, {{4, 3, 5, 7}}, kFill, BnGpuTolerance<TypeParam>(), {}, -1, 2);
}

// Rows of 64 and 12 values: the GPU reductions read 16 and 8 bytes at a time
// (the rows of 35 above, one value at a time).
TYPED_TEST(BatchNormLayerTest, GpuMatchesCpuVectorRows) {
  for (const std::vector<int> shape : {std::vector<int>{2, 3, 8, 8}, std::vector<int>{4, 3, 2, 6}}) {
    SCOPED_TRACE(shape[2] * shape[3]);
    test::CheckGpuAgainstCpu<TypeParam>(kScaleBias, {shape}, kFill, BnGpuTolerance<TypeParam>(), {}, -1, 2);
  }
}

// A mean far from zero against the spread: the GPU's one-pass statistics
// (sums shifted by each channel's first value) against the CPU's two passes.
// The CPU's own mean of values near 60 summed in float is off by tens of
// float ulps of the output (seen: 39 in a float forward), so a float side
// gets the float pairs' 64 and 256 ulps; a 16-bit side keeps 4 and 8.
TYPED_TEST(BatchNormLayerTest, GpuMatchesCpuLargeMean) {
  using F = typename TypeParam::Ftype;
  using B = typename TypeParam::Btype;
  constexpr bool f16 = std::is_same_v<F, float16> || std::is_same_v<F, bfloat16>;
  constexpr bool b16 = std::is_same_v<B, float16> || std::is_same_v<B, bfloat16>;
  const test::GpuTolerance tol{f16 ? 4.0 : 64.0, b16 ? 8.0 : 256.0};
  const auto fill = [](int, Blob* b) { test::FillGaussian(b, 60, 1.5, 12); };
  test::CheckGpuAgainstCpu<TypeParam>(kScaleBias, {{4, 3, 4, 4}}, fill, tol, {}, -1, 2);
}

TYPED_TEST(BatchNormLayerTest, GpuMatchesCpuGlobalStats) {
  test::CheckGpuAgainstCpu<TypeParam>(std::string(kScaleBias) + " phase: TEST", {{2, 3, 4}}, kFill,
                                      BnGpuTolerance<TypeParam>());
}

// ---- validation and parameter specs ----------------------------------------------

std::string SetUpError(const std::string& text, const std::vector<int>& shape,
                       std::vector<std::vector<int>> loaded = {}) {
  BatchNormLayer<float, float> layer(
      test::MakeParam<test::TypePair<float, float>>("name: 'bn' type: 'BatchNorm' " + text));
  for (const auto& s : loaded) layer.blobs().push_back(std::make_shared<Blob>(s, FLOAT));
  Blob bottom(shape, FLOAT), top(FLOAT);
  try {
    layer.SetUp({&bottom}, {&top});
  } catch (const FieldError& e) {
    return e.field();
  }
  return "no error";
}

TEST(BatchNormLayerValidation, Fields) {
  EXPECT_EQ(SetUpError("batch_norm_param { eps: 0 }", {2, 3}), "batch_norm_param.eps");
  EXPECT_EQ(SetUpError("batch_norm_param { moving_average_fraction: 1.5 }", {2, 3}),
            "batch_norm_param.moving_average_fraction");
  EXPECT_EQ(SetUpError("batch_norm_param { scale_bias: true scale_filler { type: 'nonsense' } }", {2, 3}),
            "batch_norm_param.scale_filler.type");
  EXPECT_EQ(SetUpError("param { lr_mult: 1 }", {2, 3}), "param");
  EXPECT_EQ(SetUpError("param { lr_mult: 0 } param { lr_mult: 0 } param { lr_mult: 0 } param { lr_mult: 1 }", {2, 3}),
            "param");
  EXPECT_EQ(SetUpError("", {2, 3}, {{3}, {3}, {1}}), "no error");
  EXPECT_EQ(SetUpError("", {2, 3}, {{3}, {3}}), "blobs");
  EXPECT_EQ(SetUpError("", {2, 3}, {{4}, {3}, {1}}), "blobs");
}

TEST(BatchNormLayerValidation, StatisticsAreNotLearned) {
  BatchNormLayer<float16, float16> layer(test::MakeParam<test::TypePair<float16, float16>>(
      "name: 'bn' type: 'BatchNorm' batch_norm_param { scale_bias: true } param { lr_mult: 0 }"));
  Blob bottom({2, 3, 2}, FLOAT16), top(FLOAT16);
  layer.SetUp({&bottom}, {&top});
  ASSERT_EQ(layer.layer_param().param_size(), 3);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(layer.layer_param().param(i).lr_mult(), 0.f) << i;
    if (i > 0) EXPECT_EQ(layer.layer_param().param(i).decay_mult(), 0.f) << "added spec " << i;
    EXPECT_FALSE(layer.param_propagate_down(i)) << i;
    EXPECT_EQ(layer.blobs()[i]->data_type(), FLOAT) << "statistics are kept in float for float16";
  }
  EXPECT_TRUE(layer.param_propagate_down(3));
  EXPECT_TRUE(layer.param_propagate_down(4));
  // Default fillers: scale 1, bias 0.
  EXPECT_EQ(test::GetData(*layer.blobs()[3]), (std::vector<double>{1, 1, 1}));
  EXPECT_EQ(test::GetData(*layer.blobs()[4]), (std::vector<double>{0, 0, 0}));
}

}  // namespace
}  // namespace cortado
