// ConvolutionLayer: hand-computed forwards (padding, stride, dilation, groups,
// the 1x1 path), parameter validation, im2col/col2im adjointness, finite
// differences for (double, double) and (float, float), and float16 pairs
// against the (double, double) reference.

#include "cortado/layers/convolution_layer.hpp"

#include <gtest/gtest.h>

#include <numeric>
#include <type_traits>

#include "cortado/layer_registry.hpp"
#include "cortado/layers/cudnn_convolution_layer.hpp"
#include "cortado/util/im2col.hpp"
#include "test_util.hpp"

namespace cortado {
namespace {

template <typename P>
class ConvolutionLayerTest : public ::testing::Test {
 protected:
  using F = typename P::Ftype;
  using B = typename P::Btype;

  // Builds the layer directly (not through the registry), sets it up on
  // `bottom`, overwrites the weights and bias, and runs forward.
  std::vector<double> Run(const std::string& text, const std::vector<int>& shape, const std::vector<double>& x,
                          const std::vector<double>& w, const std::vector<double>& b, std::vector<int>* top_shape) {
    layer_ = std::make_unique<ConvolutionLayer<F, B>>(test::MakeParam<P>(text));
    bottom_ = std::make_unique<Blob>(shape, type_of<F>());
    top_ = std::make_unique<Blob>(type_of<F>());
    test::SetData(bottom_.get(), x);
    layer_->SetUp({bottom_.get()}, {top_.get()});
    test::SetData(layer_->blobs()[0].get(), w);
    if (!b.empty()) test::SetData(layer_->blobs()[1].get(), b);
    layer_->Forward({bottom_.get()}, {top_.get()});
    *top_shape = top_->shape();
    return test::GetData(*top_);
  }

  std::unique_ptr<ConvolutionLayer<F, B>> layer_;
  std::unique_ptr<Blob> bottom_, top_;
};

TYPED_TEST_SUITE(ConvolutionLayerTest, test::AllPairs, test::PairNames);

std::vector<double> Iota(int n, double start = 1) {
  std::vector<double> v(n);
  std::iota(v.begin(), v.end(), start);
  return v;
}

void ExpectValues(const std::vector<double>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_DOUBLE_EQ(got[i], want[i]) << "index " << i;
}

// All values below are small integers: exact in every storage type.
TYPED_TEST(ConvolutionLayerTest, ForwardHandComputed) {
  std::vector<int> shape;
  // x = [1 2 3; 4 5 6; 7 8 9], w = [1 2; 3 4], bias 1.
  auto y = this->Run("type: 'Convolution' convolution_param { num_output: 1 kernel_size: 2 }", {1, 1, 3, 3},
                     Iota(9), {1, 2, 3, 4}, {1}, &shape);
  EXPECT_EQ(shape, (std::vector<int>{1, 1, 2, 2}));
  ExpectValues(y, {38, 48, 68, 78});
  // pad 1, stride 2: windows start at -1 and 1.
  y = this->Run("type: 'Convolution' convolution_param { num_output: 1 kernel_size: 2 pad: 1 stride: 2 }",
                {1, 1, 3, 3}, Iota(9), {1, 2, 3, 4}, {1}, &shape);
  EXPECT_EQ(shape, (std::vector<int>{1, 1, 2, 2}));
  ExpectValues(y, {5, 19, 37, 78});
}

TYPED_TEST(ConvolutionLayerTest, ForwardDilationRectangularNoBias) {
  std::vector<int> shape;
  // Dilation 2: the 2x2 kernel taps the corners of the 3x3 image.
  auto y = this->Run("type: 'Convolution' convolution_param { num_output: 1 kernel_size: 2 dilation: 2 bias_term: false }",
                     {1, 1, 3, 3}, Iota(9), {1, 2, 3, 4}, {}, &shape);
  EXPECT_EQ(shape, (std::vector<int>{1, 1, 1, 1}));
  ExpectValues(y, {1 * 1 + 2 * 3 + 3 * 7 + 4 * 9});
  // kernel_h/kernel_w 1x3 with stride_h 2, stride_w 1 on a 3x3 image: rows 0 and 2.
  y = this->Run("type: 'Convolution' convolution_param { num_output: 1 kernel_h: 1 kernel_w: 3 "
                "stride_h: 2 stride_w: 1 bias_term: false }",
                {1, 1, 3, 3}, Iota(9), {1, 0, -1}, {}, &shape);
  EXPECT_EQ(shape, (std::vector<int>{1, 1, 2, 1}));
  ExpectValues(y, {1 - 3, 7 - 9});
}

TYPED_TEST(ConvolutionLayerTest, ForwardGroupsAndOneByOne) {
  std::vector<int> shape;
  // 4 input channels, 2 groups, 2 outputs, 1x1 (the path without im2col):
  // output 0 = 1*c0 + 2*c1, output 1 = -1*c2 + 3*c3; bias (10, 20). Batch 2.
  std::vector<double> x(2 * 4 * 2);
  for (int n = 0; n < 2; ++n) {
    for (int c = 0; c < 4; ++c) {
      for (int j = 0; j < 2; ++j) x[(n * 4 + c) * 2 + j] = (n + 1) * (c + 1) + j;
    }
  }
  auto y = this->Run("type: 'Convolution' convolution_param { num_output: 2 kernel_size: 1 group: 2 }",
                     {2, 4, 1, 2}, x, {1, 2, -1, 3}, {10, 20}, &shape);
  EXPECT_EQ(shape, (std::vector<int>{2, 2, 1, 2}));
  std::vector<double> want;
  for (int n = 0; n < 2; ++n) {
    auto at = [&](int c, int j) { return x[(n * 4 + c) * 2 + j]; };
    for (int j = 0; j < 2; ++j) want.push_back(10 + at(0, j) + 2 * at(1, j));
    for (int j = 0; j < 2; ++j) want.push_back(20 - at(2, j) + 3 * at(3, j));
  }
  ExpectValues(y, want);
}

// Depthwise (group == C, the direct path): against the convolution formula
// summed here in double, with C = 3 channels and 2 filters each, stride 2,
// pad 1, and a dilated rectangular kernel. Small integers: exact in every type.
void DepthwiseReference(const std::vector<int>& xs, int mult, int kh, int kw, int ph, int pw, int sh, int sw,
                        int dh, int dw, const std::vector<double>& x, const std::vector<double>& w,
                        const std::vector<double>& b, std::vector<double>* y, std::vector<int>* yshape) {
  const int N = xs[0], C = xs[1], H = xs[2], W = xs[3];
  const int OH = (H + 2 * ph - (dh * (kh - 1) + 1)) / sh + 1, OW = (W + 2 * pw - (dw * (kw - 1) + 1)) / sw + 1;
  *yshape = {N, C * mult, OH, OW};
  y->assign(static_cast<size_t>(N) * C * mult * OH * OW, 0);
  for (int n = 0; n < N; ++n)
    for (int o = 0; o < C * mult; ++o)
      for (int oy = 0; oy < OH; ++oy)
        for (int ox = 0; ox < OW; ++ox) {
          double sum = b[o];
          for (int ky = 0; ky < kh; ++ky)
            for (int kx = 0; kx < kw; ++kx) {
              const int iy = oy * sh - ph + ky * dh, ix = ox * sw - pw + kx * dw;
              if (iy >= 0 && iy < H && ix >= 0 && ix < W)
                sum += w[(o * kh + ky) * kw + kx] * x[((n * C + o / mult) * H + iy) * W + ix];
            }
          (*y)[((n * C * mult + o) * OH + oy) * OW + ox] = sum;
        }
}

std::vector<double> SmallInts(size_t n, int seed) {
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<double>((i * 7 + seed * 3) % 5) - 2;  // -2..2
  return v;
}

TYPED_TEST(ConvolutionLayerTest, ForwardDepthwiseAgainstDirectSum) {
  struct Case {
    const char* params;
    std::vector<int> xs;
    int mult, kh, kw, ph, pw, sh, sw, dh, dw;
  };
  const Case cases[] = {
      {"num_output: 6 group: 3 kernel_size: 3 pad: 1 stride: 2", {2, 3, 5, 6}, 2, 3, 3, 1, 1, 2, 2, 1, 1},
      {"num_output: 3 group: 3 kernel_h: 2 kernel_w: 3 pad_h: 1 pad_w: 2 dilation: 2", {2, 3, 4, 5}, 1, 2, 3, 1, 2,
       1, 1, 2, 2},
  };
  for (const Case& c : cases) {
    const size_t nx = static_cast<size_t>(c.xs[0]) * c.xs[1] * c.xs[2] * c.xs[3];
    const size_t nw = static_cast<size_t>(c.xs[1]) * c.mult * c.kh * c.kw;
    const std::vector<double> x = SmallInts(nx, 1), w = SmallInts(nw, 2), b = SmallInts(c.xs[1] * c.mult, 3);
    std::vector<double> want;
    std::vector<int> want_shape, shape;
    DepthwiseReference(c.xs, c.mult, c.kh, c.kw, c.ph, c.pw, c.sh, c.sw, c.dh, c.dw, x, w, b, &want, &want_shape);
    auto y = this->Run(std::string("type: 'Convolution' convolution_param { ") + c.params + " }", c.xs, x, w, b,
                       &shape);
    EXPECT_EQ(shape, want_shape) << c.params;
    ExpectValues(y, want);
  }
}

TYPED_TEST(ConvolutionLayerTest, BackwardHandComputed) {
  std::vector<int> shape;
  this->Run("type: 'Convolution' convolution_param { num_output: 1 kernel_size: 2 }", {1, 1, 3, 3}, Iota(9),
            {1, 2, 3, 4}, {1}, &shape);
  auto& layer = *this->layer_;
  for (auto& p : layer.blobs()) p->diff().set_zero();
  test::SetDiff(this->top_.get(), {1, 1, 1, 1}, type_of<typename TestFixture::B>());
  layer.Backward({this->top_.get()}, {true}, {this->bottom_.get()});
  // dx = full correlation of ones (2x2) with w.
  ExpectValues(test::GetDiff(*this->bottom_), {1, 3, 2, 4, 10, 6, 3, 7, 4});
  // dw[i][j] = sum of the 2x2 block of x starting at (i, j); db = 4.
  ExpectValues(test::GetDiff(*layer.blobs()[0]), {12, 16, 24, 28});
  ExpectValues(test::GetDiff(*layer.blobs()[1]), {4});
  // Parameter diffs accumulate.
  layer.Backward({this->top_.get()}, {false}, {this->bottom_.get()});
  ExpectValues(test::GetDiff(*layer.blobs()[1]), {8});
}

const auto kGaussianFill = [](int i, Blob* b) { test::FillGaussian(b, 0, 1, 17 + i); };
const char* kFillers = " weight_filler { type: 'gaussian' std: 0.5 } bias_filler { type: 'uniform' min: -1 max: 1 }";

// float16 pairs: inputs and parameters are the same rounded values in both
// runs and every sum runs in float, so the only differences are the final
// roundings to half: 2 eps forward, 4 eps backward (relative, 1 below 1).
const test::ReferenceTolerance kTol{2, 4};

TYPED_TEST(ConvolutionLayerTest, Gradient) {
  test::CheckLayer<TypeParam>(std::string("type: 'Convolution' convolution_param { num_output: 3 kernel_size: 3 "
                                          "pad: 1 stride: 2") + kFillers + " }",
                              {{2, 2, 5, 4}}, kGaussianFill, test::GradientSettings(), kTol);
}

TYPED_TEST(ConvolutionLayerTest, GradientGroupsDilationRectangular) {
  test::CheckLayer<TypeParam>(std::string("type: 'Convolution' convolution_param { num_output: 4 group: 2 "
                                          "kernel_h: 2 kernel_w: 3 pad_h: 1 pad_w: 0 stride: 1 dilation: 2") +
                                  kFillers + " }",
                              {{2, 4, 5, 6}}, kGaussianFill, test::GradientSettings(), kTol);
}

TYPED_TEST(ConvolutionLayerTest, GradientOneByOneTwoBottoms) {
  test::CheckLayer<TypeParam>(std::string("type: 'Convolution' convolution_param { num_output: 3 kernel_size: 1") +
                                  kFillers + " }",
                              {{2, 2, 3, 3}, {2, 2, 3, 3}}, kGaussianFill, test::GradientSettings(), kTol, {}, 2);
}

TYPED_TEST(ConvolutionLayerTest, GradientDepthwise) {
  test::CheckLayer<TypeParam>(std::string("type: 'Convolution' convolution_param { num_output: 6 group: 3 "
                                          "kernel_size: 3 pad: 1 stride: 2") + kFillers + " }",
                              {{2, 3, 5, 4}}, kGaussianFill, test::GradientSettings(), kTol);
}

TYPED_TEST(ConvolutionLayerTest, GradientDepthwiseDilatedTwoBottoms) {
  test::CheckLayer<TypeParam>(std::string("type: 'Convolution' convolution_param { num_output: 4 group: 4 "
                                          "kernel_h: 2 kernel_w: 3 pad_h: 1 pad_w: 2 dilation: 2") + kFillers + " }",
                              {{2, 4, 4, 5}, {2, 4, 4, 5}}, kGaussianFill, test::GradientSettings(), kTol, {}, 2);
}

// ---- GPU against CPU ---------------------------------------------------------------

// The GPU computes the same sums in another order (cuBLAS, cuDNN algorithms:
// implicit GEMM, Winograd, FFT), and with float16 diffs the column matrix of
// the plain path is rounded to half before col2im sums it. Tolerances in
// units of the storage epsilon, relative to max(1, |cpu|): float16 pairs 8
// forward and 16 backward; float and double 256 (FFT and Winograd lose a few
// bits against a direct sum; a bug is off by O(1)).
template <typename P>
test::GpuTolerance ConvGpuTolerance() {
  constexpr bool half = test::is_half_pair<P>();
  return half ? test::GpuTolerance{8, 16} : test::GpuTolerance{256, 256};
}

// engine DEFAULT: the factory gives the cuDNN engine on a GPU context.
TYPED_TEST(ConvolutionLayerTest, GpuMatchesCpu) {
  test::CheckGpuAgainstCpu<TypeParam>(std::string("type: 'Convolution' convolution_param { num_output: 3 "
                                                  "kernel_size: 3 pad: 1 stride: 2") + kFillers + " }",
                                      {{2, 2, 5, 4}}, kGaussianFill, ConvGpuTolerance<TypeParam>());
}

TYPED_TEST(ConvolutionLayerTest, GpuMatchesCpuGroupsDilationRectangular) {
  test::CheckGpuAgainstCpu<TypeParam>(std::string("type: 'Convolution' convolution_param { num_output: 4 group: 2 "
                                                  "kernel_h: 2 kernel_w: 3 pad_h: 1 pad_w: 0 dilation: 2") +
                                          kFillers + " }",
                                      {{2, 4, 5, 6}}, kGaussianFill, ConvGpuTolerance<TypeParam>());
}

TYPED_TEST(ConvolutionLayerTest, GpuMatchesCpuOneByOneTwoBottoms) {
  test::CheckGpuAgainstCpu<TypeParam>(std::string("type: 'Convolution' convolution_param { num_output: 3 "
                                                  "kernel_size: 1") + kFillers + " }",
                                      {{2, 2, 3, 3}, {2, 2, 3, 3}}, kGaussianFill, ConvGpuTolerance<TypeParam>(), {},
                                      2);
}

// engine CAFFE: im2col + cuBLAS on the GPU.
TYPED_TEST(ConvolutionLayerTest, GpuMatchesCpuEngineCaffe) {
  test::CheckGpuAgainstCpu<TypeParam>(std::string("type: 'Convolution' convolution_param { engine: CAFFE "
                                                  "num_output: 3 kernel_size: 3 pad: 1 stride: 2") + kFillers + " }",
                                      {{2, 2, 5, 4}}, kGaussianFill, ConvGpuTolerance<TypeParam>());
}

TYPED_TEST(ConvolutionLayerTest, GpuMatchesCpuEngineCaffeGroupsDilation) {
  test::CheckGpuAgainstCpu<TypeParam>(std::string("type: 'Convolution' convolution_param { engine: CAFFE "
                                                  "num_output: 4 group: 2 kernel_h: 2 kernel_w: 3 pad_h: 1 "
                                                  "pad_w: 0 dilation: 2") + kFillers + " }",
                                      {{2, 4, 5, 6}}, kGaussianFill, ConvGpuTolerance<TypeParam>());
}

TYPED_TEST(ConvolutionLayerTest, GpuMatchesCpuEngineCaffeOneByOne) {
  test::CheckGpuAgainstCpu<TypeParam>(std::string("type: 'Convolution' convolution_param { engine: CAFFE "
                                                  "num_output: 3 kernel_size: 1") + kFillers + " }",
                                      {{2, 2, 3, 3}, {2, 2, 3, 3}}, kGaussianFill, ConvGpuTolerance<TypeParam>(), {},
                                      2);
}

TYPED_TEST(ConvolutionLayerTest, GpuMatchesCpuDepthwise) {
  for (const char* engine : {"", "engine: CAFFE "}) {
    SCOPED_TRACE(engine);
    test::CheckGpuAgainstCpu<TypeParam>(std::string("type: 'Convolution' convolution_param { ") + engine +
                                            "num_output: 6 group: 3 kernel_size: 3 pad: 1 stride: 2" + kFillers + " }",
                                        {{2, 3, 7, 6}}, kGaussianFill, ConvGpuTolerance<TypeParam>());
    test::CheckGpuAgainstCpu<TypeParam>(std::string("type: 'Convolution' convolution_param { ") + engine +
                                            "num_output: 4 group: 4 kernel_h: 2 kernel_w: 3 pad_h: 1 pad_w: 2 "
                                            "dilation: 2" + kFillers + " }",
                                        {{2, 4, 4, 5}}, kGaussianFill, ConvGpuTolerance<TypeParam>());
  }
}

// The factory's engine choice: im2col + GEMM on the CPU whatever the engine;
// on a GPU, cuDNN unless engine: CAFFE.
TEST(ConvolutionLayerEngine, FactoryChoice) {
  using Conv = ConvolutionLayer<float, float>;
  auto param = [](const std::string& engine) {
    return test::MakeParam<test::TypePair<float, float>>(
        "type: 'Convolution' convolution_param { num_output: 2 kernel_size: 3 " + engine + " }");
  };
  for (const char* engine : {"", "engine: CAFFE", "engine: CUDNN"}) {
    auto none = CreateLayer(param(engine), nullptr);
    auto cpu = CreateLayer(param(engine), Context::Cpu().get());
    EXPECT_TRUE(dynamic_cast<Conv*>(none.get()) != nullptr) << engine;
    EXPECT_TRUE(dynamic_cast<Conv*>(cpu.get()) != nullptr) << engine;
#ifdef CORTADO_USE_CUDA
    using CuConv = CuDNNConvolutionLayer<float, float>;
    EXPECT_TRUE(dynamic_cast<CuConv*>(none.get()) == nullptr) << engine;
    EXPECT_TRUE(dynamic_cast<CuConv*>(cpu.get()) == nullptr) << engine;
#endif
  }
#ifndef CORTADO_USE_CUDA
  GTEST_SKIP() << "no CUDA backend in this build";
#else
  if (!cuda::available()) GTEST_SKIP() << "no CUDA device available";
  using CuConv = CuDNNConvolutionLayer<float, float>;
  auto gpu = Context::Create(0);
  EXPECT_TRUE(dynamic_cast<CuConv*>(CreateLayer(param(""), gpu.get()).get()) != nullptr);
  EXPECT_TRUE(dynamic_cast<CuConv*>(CreateLayer(param("engine: CUDNN"), gpu.get()).get()) != nullptr);
  auto caffe = CreateLayer(param("engine: CAFFE"), gpu.get());
  EXPECT_TRUE(dynamic_cast<Conv*>(caffe.get()) != nullptr);
  EXPECT_TRUE(dynamic_cast<CuConv*>(caffe.get()) == nullptr);
#endif
}

// ---- validation ----------------------------------------------------------------

std::string SetUpError(const std::string& conv_param, const std::vector<std::vector<int>>& shapes) {
  ConvolutionLayer<float, float> layer(
      test::MakeParam<test::TypePair<float, float>>("name: 'c' type: 'Convolution' convolution_param { " + conv_param + " }"));
  test::Blobs bottom, top;
  for (const auto& s : shapes) {
    bottom.add(s, FLOAT);
    top.add(FLOAT);
  }
  try {
    layer.SetUp(bottom.vec, top.vec);
  } catch (const FieldError& e) {
    return e.field() + " | " + e.message();
  }
  return "no error";
}

TEST(ConvolutionLayerValidation, Fields) {
  const std::vector<std::vector<int>> x{{1, 4, 5, 5}};
  EXPECT_EQ(SetUpError("kernel_size: 3", x), "convolution_param.num_output | is required");
  EXPECT_EQ(SetUpError("num_output: 0 kernel_size: 3", x), "convolution_param.num_output | must be positive, got 0");
  EXPECT_EQ(SetUpError("num_output: 2", x).substr(0, 30), "convolution_param.kernel_size ");
  EXPECT_EQ(SetUpError("num_output: 2 kernel_size: 0", x).substr(0, 30), "convolution_param.kernel_size ");
  EXPECT_EQ(SetUpError("num_output: 2 kernel_h: 3", x).substr(0, 27), "convolution_param.kernel_w ");
  EXPECT_EQ(SetUpError("num_output: 2 kernel_size: 3 stride: 0", x).substr(0, 25), "convolution_param.stride ");
  EXPECT_EQ(SetUpError("num_output: 3 kernel_size: 3 group: 2", x),
            "convolution_param.group | = 2 does not divide num_output 3");
  EXPECT_EQ(SetUpError("num_output: 6 kernel_size: 3 group: 3", x),
            "convolution_param.group | = 3 does not divide the 4 input channels");
  EXPECT_EQ(SetUpError("num_output: 2 kernel_size: 7", x),
            "convolution_param.kernel_size | kernel 7 (dilated 7) is larger than the padded input 5x5 (pad 0)");
  EXPECT_EQ(SetUpError("num_output: 2 kernel_size: 3 dilation: 3", x),
            "convolution_param.kernel_size | kernel 3 (dilated 7) is larger than the padded input 5x5 (pad 0)");
  EXPECT_EQ(SetUpError("num_output: 2 kernel_size: 3 dilation: 3 pad: 1", x), "no error");
  EXPECT_EQ(SetUpError("num_output: 2 kernel_size: 3 axis: 2", x).substr(0, 24), "convolution_param.axis |");
  EXPECT_EQ(SetUpError("num_output: 2 kernel_size: 3 weight_filler { type: 'nonsense' }", x).substr(0, 37),
            "convolution_param.weight_filler.type ");
  EXPECT_EQ(SetUpError("num_output: 2 kernel_size: 3", {{4, 5, 5}}).substr(0, 8), "bottom |");
  EXPECT_EQ(SetUpError("num_output: 2 kernel_size: 3", {{1, 4, 5, 5}, {1, 4, 5, 6}}).substr(0, 8), "bottom |");
  EXPECT_EQ(SetUpError("num_output: 2 kernel_size: 3", {{1, 4, 5, 5}, {1, 4, 5, 5}}), "no error");
}

TEST(ConvolutionLayerValidation, LoadedWeightsMustMatch) {
  ConvolutionLayer<float, float> layer(test::MakeParam<test::TypePair<float, float>>(
      "name: 'c' type: 'Convolution' convolution_param { num_output: 2 kernel_size: 3 }"));
  layer.blobs().push_back(std::make_shared<Blob>(std::vector<int>{2, 3, 3, 3}, FLOAT));
  layer.blobs().push_back(std::make_shared<Blob>(std::vector<int>{2}, FLOAT));
  Blob bottom({1, 4, 5, 5}, FLOAT), top(FLOAT);
  try {
    layer.SetUp({&bottom}, {&top});
    ADD_FAILURE() << "expected a FieldError";
  } catch (const FieldError& e) {
    EXPECT_EQ(e.field(), "blobs");
  }
}

// ---- im2col / col2im ---------------------------------------------------------------

// col2im is the adjoint of im2col: <im2col(x), c> == <x, col2im(c)>, with
// padding, stride and dilation; and the column matrix is right at one entry.
TEST(Im2col, AdjointAndLayout) {
  const int C = 2, H = 5, W = 4, KH = 3, KW = 2, PH = 1, PW = 2, SH = 2, SW = 1, DH = 1, DW = 2;
  const int OH = (H + 2 * PH - (DH * (KH - 1) + 1)) / SH + 1, OW = (W + 2 * PW - (DW * (KW - 1) + 1)) / SW + 1;
  const std::vector<double> x = test::RandomVector(C * H * W, 3);
  const std::vector<double> c = test::RandomVector(C * KH * KW * OH * OW, 4);
  std::vector<double> col(c.size()), im(x.size());
  im2col_cpu<double>(x.data(), C, H, W, KH, KW, PH, PW, SH, SW, DH, DW, col.data());
  col2im_cpu<double>(c.data(), C, H, W, KH, KW, PH, PW, SH, SW, DH, DW, im.data());
  double a = 0, b = 0;
  for (size_t i = 0; i < c.size(); ++i) a += col[i] * c[i];
  for (size_t i = 0; i < x.size(); ++i) b += x[i] * im[i];
  EXPECT_NEAR(a, b, 1e-12);
  // Row (c=1, ky=2, kx=1), output (y=1, x=2): image (1*2-1+2, 2*1-2+1*2) = (3, 2).
  const int row = (1 * KH + 2) * KW + 1;
  EXPECT_EQ(col[(row * OH + 1) * OW + 2], x[(1 * H + 3) * W + 2]);
  // Output (0, 0) of tap (ky=0, kx=0) reads the padding.
  EXPECT_EQ(col[0], 0.0);

  // float16 col2im sums in float. 1x1 image, 1x3 kernel, pad_w 2: three
  // outputs, and taps (kx=0, x=2), (1, 1), (2, 0) all land on the pixel, in
  // that order: 2048 + 1 + 1 is 2050 in float, 2048 if summed in half.
  std::vector<float16> hc(9, float16(0.0f)), him(1);
  hc[2] = float16(2048.0f);
  hc[4] = float16(1.0f);
  hc[6] = float16(1.0f);
  col2im_cpu<float16>(hc.data(), 1, 1, 1, 1, 3, 0, 2, 1, 1, 1, 1, him.data());
  EXPECT_EQ(static_cast<float>(him[0]), 2050.0f);
}

// im2col and col2im (which copy a row of taps at a time) against the
// definition, one value at a time, over geometries where the padding covers
// whole rows, both ends of a row, or more than the image, with strides and
// dilations of 1 to 3.
TEST(Im2col, MatchesTheDefinition) {
  int checked = 0;
  for (int W : {1, 4, 7}) {
    for (int KW : {1, 2, 3}) {
      for (int PW : {0, 1, 3}) {
        for (int SW : {1, 2, 3}) {
          for (int DW : {1, 3}) {
            const int C = 2, H = 3, KH = 2, PH = 2, SH = 2, DH = 1;
            if (W + 2 * PW < DW * (KW - 1) + 1) continue;
            const int OH = (H + 2 * PH - (DH * (KH - 1) + 1)) / SH + 1;
            const int OW = (W + 2 * PW - (DW * (KW - 1) + 1)) / SW + 1;
            const std::vector<double> x = test::RandomVector(C * H * W, 7);
            const std::vector<double> c = test::RandomVector(C * KH * KW * OH * OW, 8);
            std::vector<double> col(c.size(), -99), im(x.size(), -99), want_col(c.size()), want_im(x.size(), 0);
            for (int ch = 0; ch < C; ++ch)
              for (int ky = 0; ky < KH; ++ky)
                for (int kx = 0; kx < KW; ++kx)
                  for (int y = 0; y < OH; ++y)
                    for (int xo = 0; xo < OW; ++xo) {
                      const int iy = y * SH - PH + ky * DH, ix = xo * SW - PW + kx * DW;
                      const size_t at = ((static_cast<size_t>(ch * KH + ky) * KW + kx) * OH + y) * OW + xo;
                      const bool in = iy >= 0 && iy < H && ix >= 0 && ix < W;
                      want_col[at] = in ? x[(ch * H + iy) * W + ix] : 0.0;
                      if (in) want_im[(ch * H + iy) * W + ix] += c[at];
                    }
            im2col_cpu<double>(x.data(), C, H, W, KH, KW, PH, PW, SH, SW, DH, DW, col.data());
            col2im_cpu<double>(c.data(), C, H, W, KH, KW, PH, PW, SH, SW, DH, DW, im.data());
            SCOPED_TRACE(::testing::Message() << "W=" << W << " KW=" << KW << " PW=" << PW << " SW=" << SW
                                              << " DW=" << DW);
            for (size_t i = 0; i < col.size(); ++i) ASSERT_EQ(col[i], want_col[i]) << "col " << i;
            for (size_t i = 0; i < im.size(); ++i) ASSERT_NEAR(im[i], want_im[i], 1e-12) << "im " << i;
            ++checked;
          }
        }
      }
    }
  }
  EXPECT_GT(checked, 100);
}

// im2col_gpu / col2im_gpu give the CPU's results: the same column matrix,
// bit for bit, and col2im within a few double ulps (another summation order);
// float16 col2im sums in float on the GPU too.
TEST(Im2col, GpuMatchesCpu) {
#ifndef CORTADO_USE_CUDA
  GTEST_SKIP() << "no CUDA backend in this build";
#else
  if (!cuda::available()) GTEST_SKIP() << "no CUDA device available";
  const int C = 3, H = 6, W = 5, KH = 3, KW = 2, PH = 1, PW = 2, SH = 2, SW = 1, DH = 2, DW = 1;
  const int OH = (H + 2 * PH - (DH * (KH - 1) + 1)) / SH + 1, OW = (W + 2 * PW - (DW * (KW - 1) + 1)) / SW + 1;
  const int ncol = C * KH * KW * OH * OW;
  Blob im({C, H, W}, DOUBLE), col({ncol}, DOUBLE), back({C, H, W}, DOUBLE);
  test::SetData(&im, test::RandomVector(C * H * W, 5));
  test::SetData(&back, test::RandomVector(C * H * W, 6));
  im2col_gpu<double>(im.gpu_data<double>(), C, H, W, KH, KW, PH, PW, SH, SW, DH, DW, col.mutable_gpu_data<double>(),
                     cuda::stream());
  std::vector<double> want_col(ncol), want_im(C * H * W);
  im2col_cpu<double>(im.cpu_data<double>(), C, H, W, KH, KW, PH, PW, SH, SW, DH, DW, want_col.data());
  EXPECT_EQ(test::GetData(col), want_col);
  col2im_gpu<double>(col.gpu_data<double>(), C, H, W, KH, KW, PH, PW, SH, SW, DH, DW, back.mutable_gpu_data<double>(),
                     cuda::stream());
  col2im_cpu<double>(want_col.data(), C, H, W, KH, KW, PH, PW, SH, SW, DH, DW, want_im.data());
  const std::vector<double> got = test::GetData(back);
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want_im[i], 1e-14) << "index " << i;

  // The 2048 + 1 + 1 case of AdjointAndLayout: 2050 only if summed in float.
  Blob hcol({9}, FLOAT16), him({1}, FLOAT16);
  test::SetData(&hcol, {0, 0, 2048, 0, 1, 0, 1, 0, 0});
  col2im_gpu<float16>(hcol.gpu_data<float16>(), 1, 1, 1, 1, 3, 0, 2, 1, 1, 1, 1, him.mutable_gpu_data<float16>(),
                      cuda::stream());
  EXPECT_EQ(test::GetData(him)[0], 2050.0);
#endif
}

}  // namespace
}  // namespace cortado
