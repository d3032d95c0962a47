// PoolingLayer: hand-computed MAX (with the mask top) and AVE (Caffe's
// padding-inclusive divisor) on a 4x4 input, output sizes (CEIL and the
// last-window rule), global pooling, validation, finite differences for
// (double, double) and (float, float), float16 pairs against (double, double).

#include "cortado/layers/pooling_layer.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "cortado/layers/permute_layer.hpp"
#include "cortado/util/cuda.hpp"
#include "test_util.hpp"

namespace cortado {
namespace {

// 4x4 input; every value distinct so that each window has one maximum.
const std::vector<double> kX{1, 16, 2, 3,  //
                             4, 5, 15, 6,  //
                             14, 7, 8, 9,  //
                             10, 11, 12, 13};

template <typename P>
class PoolingLayerTest : public ::testing::Test {
 protected:
  using F = typename P::Ftype;
  using B = typename P::Btype;

  void Init(const std::string& pool_param, const std::vector<int>& shape, const std::vector<double>& x,
            int num_top = 1) {
    layer_ = std::make_unique<PoolingLayer<F, B>>(
        test::MakeParam<P>("type: 'Pooling' pooling_param { " + pool_param + " }"));
    bottom_ = std::make_unique<Blob>(shape, type_of<F>());
    test::SetData(bottom_.get(), x);
    top_.clear();
    for (int k = 0; k < num_top; ++k) top_.push_back(std::make_unique<Blob>(type_of<F>()));
    layer_->SetUp({bottom_.get()}, tops());
    layer_->Forward({bottom_.get()}, tops());
  }

  BlobVec tops() {
    BlobVec v;
    for (auto& t : top_) v.push_back(t.get());
    return v;
  }

  std::vector<double> BackwardOnes() {
    test::SetDiff(top_[0].get(), std::vector<double>(top_[0]->count(), 1.0), type_of<B>());
    layer_->Backward(tops(), {true}, {bottom_.get()});
    return test::GetDiff(*bottom_);
  }

  // Relative tolerance of one value rounded to the storage type.
  template <typename T>
  static double Tol(double v) {
    return (std::is_same_v<T, float16> ? 1e-3 : std::is_same_v<T, bfloat16> ? 8e-3 : 1e-6) * std::max(1.0, std::fabs(v));
  }

  void ExpectTop(const std::vector<double>& want) {
    const std::vector<double> got = test::GetData(*top_[0]);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], Tol<F>(want[i])) << "index " << i;
  }

  std::unique_ptr<PoolingLayer<F, B>> layer_;
  std::unique_ptr<Blob> bottom_;
  std::vector<std::unique_ptr<Blob>> top_;
};

TYPED_TEST_SUITE(PoolingLayerTest, test::AllPairs, test::PairNames);

TYPED_TEST(PoolingLayerTest, MaxHandComputedWithMask) {
  this->Init("pool: MAX kernel_size: 2 stride: 2", {1, 1, 4, 4}, kX, 2);
  EXPECT_EQ(this->top_[0]->shape(), (std::vector<int>{1, 1, 2, 2}));
  EXPECT_EQ(this->top_[1]->shape(), (std::vector<int>{1, 1, 2, 2}));
  this->ExpectTop({16, 15, 14, 13});
  EXPECT_EQ(test::GetData(*this->top_[1]), (std::vector<double>{1, 6, 8, 15}));
  std::vector<double> want(16, 0.0);
  for (int i : {1, 6, 8, 15}) want[i] = 1;
  EXPECT_EQ(this->BackwardOnes(), want);
}

TYPED_TEST(PoolingLayerTest, MaxPaddedOverlapping) {
  // kernel 3, stride 2, pad 1: OH = ceil((4 + 2 - 3) / 2) + 1 = 3; windows overlap.
  this->Init("pool: MAX kernel_size: 3 stride: 2 pad: 1", {1, 1, 4, 4}, kX);
  EXPECT_EQ(this->top_[0]->shape(), (std::vector<int>{1, 1, 3, 3}));
  this->ExpectTop({16, 16, 6, 14, 15, 13, 11, 13, 13});
  // Argmaxes 1, 1, 7, 8, 6, 15, 13, 15, 15: repeated ones collect every diff.
  std::vector<double> want(16, 0.0);
  want[1] = 2;
  want[6] = want[7] = want[8] = want[13] = 1;
  want[15] = 3;
  EXPECT_EQ(this->BackwardOnes(), want);
}

TYPED_TEST(PoolingLayerTest, MaxFloorRoundMode) {
  // As MaxPaddedOverlapping, rounded down: OH = floor((4 + 2 - 3) / 2) + 1 = 2,
  // the first two windows of each row and column of the CEIL output.
  for (const char* mode : {"round_mode: FLOOR", "torch_pooling: true"}) {
    SCOPED_TRACE(mode);
    this->Init(std::string("pool: MAX kernel_size: 3 stride: 2 pad: 1 ") + mode, {1, 1, 4, 4}, kX);
    EXPECT_EQ(this->top_[0]->shape(), (std::vector<int>{1, 1, 2, 2}));
    this->ExpectTop({16, 16, 14, 15});
    std::vector<double> want(16, 0.0);
    want[1] = 2;
    want[8] = want[6] = 1;
    EXPECT_EQ(this->BackwardOnes(), want);
  }
}

TYPED_TEST(PoolingLayerTest, AvePaddedCaffeDivisor) {
  // The divisor counts the window clipped to the padded image [-1, 5): 9 in
  // the interior, 6 on the last row/column (2 rows fit), 4 in the corner.
  this->Init("pool: AVE kernel_size: 3 stride: 2 pad: 1", {1, 1, 4, 4}, kX);
  EXPECT_EQ(this->top_[0]->shape(), (std::vector<int>{1, 1, 3, 3}));
  this->ExpectTop({26.0 / 9, 47.0 / 9, 9.0 / 6, 51.0 / 9, 86.0 / 9, 28.0 / 6, 21.0 / 6, 36.0 / 6, 13.0 / 4});
  const std::vector<double> dx = this->BackwardOnes();
  using B = typename TestFixture::B;
  const double want00 = 1.0 / 9, want11 = 4.0 / 9, want33 = 1.0 / 9 + 2.0 / 6 + 1.0 / 4;
  EXPECT_NEAR(dx[0], want00, TestFixture::template Tol<B>(want00));
  EXPECT_NEAR(dx[5], want11, TestFixture::template Tol<B>(want11));
  EXPECT_NEAR(dx[15], want33, TestFixture::template Tol<B>(want33));
}

TYPED_TEST(PoolingLayerTest, AveNoPad) {
  this->Init("pool: AVE kernel_h: 2 kernel_w: 4 stride_h: 2 stride_w: 1", {1, 1, 4, 4}, kX);
  EXPECT_EQ(this->top_[0]->shape(), (std::vector<int>{1, 1, 2, 1}));
  this->ExpectTop({52.0 / 8, 84.0 / 8});
}

TYPED_TEST(PoolingLayerTest, Global) {
  std::vector<double> x = kX;
  for (double v : kX) x.push_back(2 * v);  // channel 1 = 2 * channel 0
  this->Init("pool: AVE global_pooling: true", {1, 2, 4, 4}, x);
  EXPECT_EQ(this->top_[0]->shape(), (std::vector<int>{1, 2, 1, 1}));
  this->ExpectTop({8.5, 17});
  this->Init("pool: MAX global_pooling: true", {1, 2, 4, 4}, x);
  this->ExpectTop({16, 32});
}

std::vector<int> OutShape(const std::string& pool_param, const std::vector<int>& shape) {
  PoolingLayer<float, float> layer(test::MakeParam<test::TypePair<float, float>>(
      "name: 'p' type: 'Pooling' pooling_param { " + pool_param + " }"));
  Blob bottom(shape, FLOAT), top(FLOAT);
  layer.SetUp({&bottom}, {&top});
  return top.shape();
}

TEST(PoolingLayerShape, CeilAndLastWindowRule) {
  // CEIL: a partial last window is kept (rows 4 of 5).
  EXPECT_EQ(OutShape("kernel_size: 2 stride: 2", {1, 1, 5, 5}), (std::vector<int>{1, 1, 3, 3}));
  // ceil((4 + 4 - 3) / 3) + 1 = 3, but the third window starts at 4 >= H: dropped.
  EXPECT_EQ(OutShape("kernel_size: 3 stride: 3 pad: 2", {1, 1, 4, 4}), (std::vector<int>{1, 1, 2, 2}));
  // Without padding too (Caffe would emit a window at 6, outside the 5 rows).
  EXPECT_EQ(OutShape("kernel_size: 1 stride: 3", {1, 1, 5, 7}), (std::vector<int>{1, 1, 2, 3}));
  EXPECT_EQ(OutShape("kernel_h: 3 kernel_w: 1 pad_h: 1 stride_h: 2 stride_w: 1", {2, 3, 6, 2}),
            (std::vector<int>{2, 3, 4, 2}));
}

TEST(PoolingLayerShape, FloorRoundMode) {
  // (6 - 3) / 2 = 1.5: CEIL gives 3 windows, FLOOR (and torch_pooling) 2.
  EXPECT_EQ(OutShape("kernel_size: 3 stride: 2", {1, 1, 6, 6}), (std::vector<int>{1, 1, 3, 3}));
  EXPECT_EQ(OutShape("kernel_size: 3 stride: 2 round_mode: FLOOR", {1, 1, 6, 6}), (std::vector<int>{1, 1, 2, 2}));
  EXPECT_EQ(OutShape("kernel_size: 3 stride: 2 torch_pooling: true", {1, 1, 6, 6}), (std::vector<int>{1, 1, 2, 2}));
  EXPECT_EQ(OutShape("kernel_size: 3 stride: 2 round_mode: CEIL", {1, 1, 6, 6}), (std::vector<int>{1, 1, 3, 3}));
  // Exact division: both modes agree.
  EXPECT_EQ(OutShape("kernel_size: 3 stride: 2 round_mode: FLOOR", {1, 1, 7, 7}), (std::vector<int>{1, 1, 3, 3}));
  // Rectangular, padded: H (5 + 2 - 3) / 2 = 2 -> 3 either way; W (9 - 2) / 4 = 1.75 -> 2 (FLOOR) or 3 (CEIL).
  EXPECT_EQ(OutShape("kernel_h: 3 kernel_w: 2 pad_h: 1 stride_h: 2 stride_w: 4 round_mode: FLOOR", {2, 3, 5, 9}),
            (std::vector<int>{2, 3, 3, 2}));
  EXPECT_EQ(OutShape("kernel_h: 3 kernel_w: 2 pad_h: 1 stride_h: 2 stride_w: 4", {2, 3, 5, 9}),
            (std::vector<int>{2, 3, 3, 3}));
  // A ResNet pool1 on a 112 x 112 map (kernel 3, stride 2): 55 rounded down, 56 up.
  EXPECT_EQ(OutShape("kernel_size: 3 stride: 2 torch_pooling: true", {1, 1, 112, 112}),
            (std::vector<int>{1, 1, 55, 55}));
  EXPECT_EQ(OutShape("kernel_size: 3 stride: 2", {1, 1, 112, 112}), (std::vector<int>{1, 1, 56, 56}));
}

std::string SetUpError(const std::string& pool_param, const std::vector<int>& shape) {
  PoolingLayer<float, float> layer(test::MakeParam<test::TypePair<float, float>>(
      "name: 'p' type: 'Pooling' pooling_param { " + pool_param + " }"));
  Blob bottom(shape, FLOAT), top(FLOAT);
  try {
    layer.SetUp({&bottom}, {&top});
  } catch (const FieldError& e) {
    return e.field() + " | " + e.message();
  }
  return "no error";
}

TEST(PoolingLayerValidation, Fields) {
  const std::vector<int> x{1, 1, 4, 4};
  EXPECT_EQ(SetUpError("kernel_size: 2 pad: 2", x), "pooling_param.pad | pad 2x2 must be smaller than the kernel 2x2");
  EXPECT_EQ(SetUpError("kernel_h: 3 kernel_w: 2 pad_w: 2", x),
            "pooling_param.pad | pad 0x2 must be smaller than the kernel 3x2");
  EXPECT_EQ(SetUpError("pool: AVE", x).substr(0, 27), "pooling_param.kernel_size |");
  EXPECT_EQ(SetUpError("kernel_size: 0", x).substr(0, 27), "pooling_param.kernel_size |");
  EXPECT_EQ(SetUpError("kernel_h: 2", x).substr(0, 24), "pooling_param.kernel_w |");
  EXPECT_EQ(SetUpError("kernel_size: 2 stride: 0", x).substr(0, 22), "pooling_param.stride |");
  EXPECT_EQ(SetUpError("global_pooling: true kernel_size: 2", x).substr(0, 27), "pooling_param.kernel_size |");
  EXPECT_EQ(SetUpError("global_pooling: true stride: 2", x).substr(0, 22), "pooling_param.stride |");
  EXPECT_EQ(SetUpError("kernel_size: 5", x),
            "pooling_param.kernel_size | kernel 5x5 is larger than the padded input 4x4 (pad 0x0)");
  EXPECT_EQ(SetUpError("kernel_size: 2", {4, 4}).substr(0, 8), "bottom |");
  EXPECT_EQ(SetUpError("kernel_size: 5 pad: 1", x), "no error");
  EXPECT_EQ(SetUpError("pool: STOCHASTIC kernel_size: 3 pad: 1", x),
            "pooling_param.pad | STOCHASTIC pooling takes no padding, got 1x1");
  EXPECT_EQ(SetUpError("pool: STOCHASTIC kernel_size: 2", x), "no error");
  EXPECT_EQ(SetUpError("kernel_size: 2 torch_pooling: true round_mode: CEIL", x).substr(0, 29),
            "pooling_param.torch_pooling |");
  EXPECT_EQ(SetUpError("kernel_size: 2 torch_pooling: true round_mode: FLOOR", x), "no error");
}

// ---- gradients -------------------------------------------------------------------

// Distinct values 1/16 apart (exact in float16), shuffled: a perturbation of
// 1e-2 never changes which element of a window is the maximum.
void FillDistinct(int i, Blob* b) {
  std::vector<double> v(b->count());
  for (size_t j = 0; j < v.size(); ++j) v[j] = (static_cast<double>(j) - v.size() / 2.0) / 16;
  std::shuffle(v.begin(), v.end(), std::mt19937(11 + i));
  test::SetData(b, v);
}

// float16 pairs: inputs are the same rounded values; MAX is exact and AVE
// sums in float, so only the final roundings differ.
const test::ReferenceTolerance kTol{2, 4};

TYPED_TEST(PoolingLayerTest, GradientMaxPadded) {
  test::CheckLayer<TypeParam>("type: 'Pooling' pooling_param { pool: MAX kernel_size: 3 stride: 2 pad: 1 }",
                              {{2, 2, 5, 5}}, FillDistinct, test::GradientSettings(), kTol);
}

TYPED_TEST(PoolingLayerTest, GradientMaxWithMaskTop) {
  test::CheckLayer<TypeParam>("type: 'Pooling' pooling_param { pool: MAX kernel_h: 2 kernel_w: 3 stride: 2 }",
                              {{2, 1, 4, 5}}, FillDistinct, test::GradientSettings(), kTol, {}, 2);
}

TYPED_TEST(PoolingLayerTest, GradientAvePaddedRectangular) {
  test::CheckLayer<TypeParam>("type: 'Pooling' pooling_param { pool: AVE kernel_h: 3 kernel_w: 2 "
                              "stride_h: 2 stride_w: 1 pad_h: 1 pad_w: 1 }",
                              {{2, 2, 5, 4}}, FillDistinct, test::GradientSettings(), kTol);
}

TYPED_TEST(PoolingLayerTest, GradientGlobalAve) {
  test::CheckLayer<TypeParam>("type: 'Pooling' pooling_param { pool: AVE global_pooling: true }", {{2, 3, 3, 4}},
                              FillDistinct, test::GradientSettings(), kTol);
}

// ---- GPU against CPU ---------------------------------------------------------------

// The GPU kernels visit windows and covering outputs in the CPU's order and
// sum in the same type, so MAX (values, argmax, routed diffs) is exact; AVE
// may differ by the last bit (1 eps).
const test::GpuTolerance kMaxGpuTol{0, 0};
const test::GpuTolerance kAveGpuTol{1, 1};

// Values on a coarse grid: many ties inside a window, so the first-maximum
// rule is exercised.
void FillTies(int i, Blob* b) {
  std::vector<double> v = test::RandomVector(b->count(), 23 + i);
  for (double& x : v) x = std::round(x * 2) / 2;
  test::SetData(b, v);
}

TYPED_TEST(PoolingLayerTest, GpuMatchesCpuMaxPaddedWithMaskTop) {
  test::CheckGpuAgainstCpu<TypeParam>("type: 'Pooling' pooling_param { pool: MAX kernel_size: 3 stride: 2 pad: 1 }",
                                      {{2, 3, 7, 6}}, FillDistinct, kMaxGpuTol, {}, 2);
}

TYPED_TEST(PoolingLayerTest, GpuMatchesCpuMaxTiesOverlapping) {
  test::CheckGpuAgainstCpu<TypeParam>("type: 'Pooling' pooling_param { pool: MAX kernel_h: 3 kernel_w: 2 "
                                      "stride_h: 1 stride_w: 2 }",
                                      {{2, 2, 6, 7}}, FillTies, kMaxGpuTol, {}, 2);
}

TYPED_TEST(PoolingLayerTest, GpuMatchesCpuAvePaddedRectangular) {
  test::CheckGpuAgainstCpu<TypeParam>("type: 'Pooling' pooling_param { pool: AVE kernel_h: 3 kernel_w: 2 "
                                      "stride_h: 2 stride_w: 1 pad_h: 1 pad_w: 1 }",
                                      {{2, 2, 7, 5}}, FillDistinct, kAveGpuTol);
}

TYPED_TEST(PoolingLayerTest, GpuMatchesCpuFloorRoundMode) {
  test::CheckGpuAgainstCpu<TypeParam>("type: 'Pooling' pooling_param { pool: MAX kernel_size: 3 stride: 2 pad: 1 "
                                      "round_mode: FLOOR }",
                                      {{2, 3, 8, 6}}, FillDistinct, kMaxGpuTol, {}, 2);
}

TYPED_TEST(PoolingLayerTest, GradientAveFloor) {
  test::CheckLayer<TypeParam>("type: 'Pooling' pooling_param { pool: AVE kernel_size: 3 stride: 2 pad: 1 "
                              "torch_pooling: true }",
                              {{2, 2, 6, 5}}, FillDistinct, test::GradientSettings(), kTol);
}

TYPED_TEST(PoolingLayerTest, GpuMatchesCpuGlobalAve) {
  test::CheckGpuAgainstCpu<TypeParam>("type: 'Pooling' pooling_param { pool: AVE global_pooling: true }",
                                      {{2, 3, 7, 7}}, FillDistinct, kAveGpuTol);
}

TYPED_TEST(PoolingLayerTest, GpuMatchesCpuGlobalMax) {
  test::CheckGpuAgainstCpu<TypeParam>("type: 'Pooling' pooling_param { pool: MAX global_pooling: true }",
                                      {{2, 3, 7, 7}}, FillTies, kMaxGpuTol);
}

// Channels last on the GPU (the layout plan's pooling, NHWC blobs) against
// the CPU on NCHW blobs with the same values: MAX exact (values and routed
// diffs, ties and overlapping padded windows included), AVE within its
// unit. 16 and 24 channels take the vector kernels of MAX (8 float16, 4
// float or 2 double channels a thread), 5 the scalar ones.
TYPED_TEST(PoolingLayerTest, GpuChannelsLastMatchesCpu) {
  if (!test::HaveDevice()) GTEST_SKIP() << "no CUDA device";
  using F = typename TypeParam::Ftype;
  using B = typename TypeParam::Btype;
  const char* const kParams[] = {"pool: MAX kernel_size: 3 stride: 2 pad: 1", "pool: MAX kernel_size: 2 stride: 2",
                                 "pool: MAX kernel_h: 3 kernel_w: 2 stride_h: 1 stride_w: 2",
                                 "pool: AVE kernel_size: 3 stride: 2 pad: 1"};
  for (const int c : {16, 24, 5}) {
    for (const char* param : kParams) {
      const std::string what = std::string(param) + ", " + std::to_string(c) + " channels";
      const bool max = std::string(param).find("MAX") != std::string::npos;
      const std::vector<int> shape{2, c, 9, 8};
      test::ActiveGpuContext gpu;
      const std::string text = std::string("type: 'Pooling' pooling_param { ") + param + " }";
      auto cpu_layer = test::NewLayer(test::MakeParam<TypeParam>(text));
      std::unique_ptr<LayerBase> gpu_layer = CreateLayer(test::MakeParam<TypeParam>(text), gpu.ctx.get());
      cpu_layer->set_context(Context::Cpu());
      gpu_layer->set_context(gpu.ctx);
      Blob cb(shape, type_of<F>()), ct(type_of<F>()), gb(shape, type_of<F>()), gt(type_of<F>());
      FillTies(c, &cb);
      gb.set_layout(Layout::NHWC);
      gt.set_layout(Layout::NHWC);
      // Values in NCHW order (what GetData/SetData see) moved to NHWC and back on the host.
      auto to_nhwc = [](const std::vector<double>& v, const std::vector<int>& s) {
        std::vector<double> out(v.size());
        CopyLayout(s, Layout::NCHW, Layout::NHWC, DOUBLE, v.data(), out.data(), false, nullptr);
        return out;
      };
      auto to_nchw = [](const std::vector<double>& v, const std::vector<int>& s) {
        std::vector<double> out(v.size());
        CopyLayout(s, Layout::NHWC, Layout::NCHW, DOUBLE, v.data(), out.data(), false, nullptr);
        return out;
      };
      test::SetData(&gb, to_nhwc(test::GetData(cb), shape));
      Context::Cpu()->Activate();
      cpu_layer->SetUp({&cb}, {&ct});
      cpu_layer->Forward({&cb}, {&ct});
      gpu.ctx->Activate();
      gpu_layer->SetUp({&gb}, {&gt});
      gpu_layer->Forward({&gb}, {&gt});
      gpu.ctx->Synchronize();
      ASSERT_EQ(gt.shape(), ct.shape()) << what;
      const std::vector<double> top = to_nchw(test::GetData(gt), gt.shape()), want = test::GetData(ct);
      const std::vector<double> d = test::RandomVector(ct.count(), 41 + c);
      test::SetDiff(&ct, d, type_of<B>());
      test::SetDiff(&gt, to_nhwc(d, ct.shape()), type_of<B>());
      Context::Cpu()->Activate();
      cpu_layer->Backward({&ct}, {true}, {&cb});
      gpu.ctx->Activate();
      gpu_layer->Backward({&gt}, {true}, {&gb});
      gpu.ctx->Synchronize();
      const std::vector<double> dx = to_nchw(test::GetDiff(gb), shape), dx_want = test::GetDiff(cb);
      const double unit = max ? 0 : 2 * std::max(type_epsilon<F>(), type_epsilon<B>());
      for (size_t i = 0; i < want.size(); ++i)
        ASSERT_NEAR(top[i], want[i], unit * std::max(1.0, std::fabs(want[i]))) << what << " top " << i;
      for (size_t i = 0; i < dx_want.size(); ++i)
        ASSERT_NEAR(dx[i], dx_want[i], unit * std::max(1.0, std::fabs(dx_want[i]))) << what << " bottom diff " << i;
    }
  }
}

// ---- STOCHASTIC ------------------------------------------------------------------------

// TEST: sum(x^2) / sum(x) per window; backward its derivative (2 x - top) / sum(x).
TYPED_TEST(PoolingLayerTest, StochasticTestWeightedAverage) {
  using F = typename TypeParam::Ftype;
  using B = typename TypeParam::Btype;
  auto layer = std::make_unique<PoolingLayer<F, B>>(
      test::MakeParam<TypeParam>("type: 'Pooling' phase: TEST pooling_param { pool: STOCHASTIC kernel_size: 2 stride: 2 }"));
  Blob bottom({1, 1, 2, 4}, type_of<F>()), top(type_of<F>());
  test::SetData(&bottom, {1, 3, 0, 0, 2, 2, 0, 0});
  layer->SetUp({&bottom}, {&top});
  layer->Forward({&bottom}, {&top});
  // window 0: S = 8, Q = 1 + 9 + 4 + 4 = 18 -> 2.25; window 1: all zero -> 0.
  test::ExpectNear<F>(test::GetData(top), {2.25, 0}, 1);
  test::SetDiff(&top, {1, 1}, type_of<B>());
  layer->Backward({&top}, {true}, {&bottom});
  test::ExpectNear<test::Coarser<TypeParam>>(
      test::GetDiff(bottom), {(2 - 2.25) / 8, (6 - 2.25) / 8, 0, 0, (4 - 2.25) / 8, (4 - 2.25) / 8, 0, 0}, 2);
}

// TRAIN: each output is one value of its window, picked with probability
// proportional to it; the diff goes back to the picked position only.
TYPED_TEST(PoolingLayerTest, StochasticTrainSamplesProportionally) {
  using F = typename TypeParam::Ftype;
  using B = typename TypeParam::Btype;
  auto layer = std::make_unique<PoolingLayer<F, B>>(
      test::MakeParam<TypeParam>("type: 'Pooling' pooling_param { pool: STOCHASTIC kernel_size: 2 stride: 2 }"));
  // 64 windows of (1, 3, 0, 0) and one of (0, 0, 5, 0): a zero is never picked.
  const int planes = 65;
  Blob bottom({planes, 1, 2, 2}, type_of<F>()), top(type_of<F>());
  std::vector<double> x;
  for (int p = 0; p < planes - 1; ++p) x.insert(x.end(), {1, 3, 0, 0});
  x.insert(x.end(), {0, 0, 5, 0});
  test::SetData(&bottom, x);
  layer->SetUp({&bottom}, {&top});
  set_random_seed(1701);
  int threes = 0;
  const int rounds = 20;
  for (int r = 0; r < rounds; ++r) {
    layer->Forward({&bottom}, {&top});
    const std::vector<double> y = test::GetData(top);
    for (int p = 0; p < planes - 1; ++p) {
      ASSERT_TRUE(y[p] == 1 || y[p] == 3) << y[p];
      threes += y[p] == 3;
    }
    ASSERT_EQ(y[planes - 1], 5);
  }
  // P(3) = 0.75 over 1280 draws: the standard deviation of the share is 0.012.
  EXPECT_NEAR(threes / (rounds * 64.0), 0.75, 0.05);
  // Backward routes each top diff to the position that was picked.
  const std::vector<double> y = test::GetData(top);
  std::vector<double> dy(planes), want(x.size(), 0.0);
  for (int p = 0; p < planes; ++p) {
    dy[p] = 0.5 + p / 128.0;
    want[p * 4 + (p == planes - 1 ? 2 : (y[p] == 3 ? 1 : 0))] = dy[p];
  }
  test::SetDiff(&top, dy, type_of<B>());
  layer->Backward({&top}, {true}, {&bottom});
  test::ExpectNear<B>(test::GetDiff(bottom), want, 0);
}

// Positive inputs (as after a ReLU); the TEST form is smooth in them.
void FillPositive(int i, Blob* b) { test::FillUniform(b, 0.1, 1.0, 31 + i); }

TYPED_TEST(PoolingLayerTest, GradientStochasticTest) {
  test::CheckLayer<TypeParam>("type: 'Pooling' phase: TEST pooling_param { pool: STOCHASTIC kernel_size: 3 stride: 2 }",
                              {{2, 2, 5, 5}}, FillPositive, test::GradientSettings(), kTol);
}

// TRAIN draws the same host numbers on both paths (the helper reseeds the
// process RNG for each run), so the picks and routed diffs agree exactly.
TYPED_TEST(PoolingLayerTest, GpuMatchesCpuStochastic) {
  test::CheckGpuAgainstCpu<TypeParam>("type: 'Pooling' pooling_param { pool: STOCHASTIC kernel_size: 3 stride: 2 }",
                                      {{2, 3, 7, 6}}, FillPositive, kMaxGpuTol);
  test::CheckGpuAgainstCpu<TypeParam>(
      "type: 'Pooling' phase: TEST pooling_param { pool: STOCHASTIC kernel_h: 3 kernel_w: 2 stride: 1 }",
      {{2, 2, 5, 6}}, FillPositive, test::GpuTolerance{2, 4});
}

}  // namespace
}  // namespace cortado
