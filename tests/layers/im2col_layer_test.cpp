// Im2colLayer: hand-computed columns (plain, padded and strided over two
// images and two channels, dilated, rectangular), col2im as the backward,
// the field checks, finite differences for (double, double) and (float,
// float), 16-bit pairs against (double, double), GPU against CPU.

#include "cortado/layers/im2col_layer.hpp"

#include "test_util.hpp"

namespace cortado {
namespace {

template <typename P>
class Im2colLayerTest : public ::testing::Test {
 protected:
  using F = typename P::Ftype;
  using B = typename P::Btype;

  // Runs the layer on a bottom of `shape` holding x; returns the top.
  std::vector<double> Run(const std::string& conv, const std::vector<int>& shape, const std::vector<double>& x,
                          std::vector<int>* top_shape) {
    layer_ = test::NewLayer<P>("type: 'Im2col' convolution_param { " + conv + " }");
    bottom_ = test::Blobs();
    top_ = test::Blobs();
    bottom_.add(shape, type_of<F>(), x);
    top_.add(type_of<F>());
    layer_->SetUp(bottom_.vec, top_.vec);
    layer_->Forward(bottom_.vec, top_.vec);
    *top_shape = top_[0]->shape();
    return test::GetData(*top_[0]);
  }

  std::unique_ptr<LayerBase> layer_;
  test::Blobs bottom_, top_;
};
TYPED_TEST_SUITE(Im2colLayerTest, test::AllPairs, test::PairNames);

std::vector<double> Iota(int n, double start) {
  std::vector<double> v(n);
  for (int i = 0; i < n; ++i) v[i] = start + i;
  return v;
}

TYPED_TEST(Im2colLayerTest, ForwardBackward) {
  std::vector<int> shape;
  // 3x3 image 1..9, 2x2 kernel: rows are the taps (0,0), (0,1), (1,0), (1,1).
  const auto y = this->Run("kernel_size: 2", {1, 1, 3, 3}, Iota(9, 1), &shape);
  EXPECT_EQ(shape, (std::vector<int>{1, 4, 2, 2}));
  EXPECT_EQ(y, (std::vector<double>{1, 2, 4, 5, 2, 3, 5, 6, 4, 5, 7, 8, 5, 6, 8, 9}));
  test::SetDiff(this->bottom_[0], std::vector<double>(9, 7), type_of<typename TestFixture::B>());  // overwritten
  test::SetDiff(this->top_[0], std::vector<double>(16, 1), type_of<typename TestFixture::B>());
  this->layer_->Backward(this->top_.vec, {true}, this->bottom_.vec);
  // Each pixel's diff counts the taps that read it.
  EXPECT_EQ(test::GetDiff(*this->bottom_[0]), (std::vector<double>{1, 2, 1, 2, 4, 2, 1, 2, 1}));
}

TYPED_TEST(Im2colLayerTest, PadStrideTwoImagesTwoChannels) {
  std::vector<double> x = Iota(9, 1);                      // image 0, channel 0
  for (double v : Iota(9, 11)) x.push_back(v);             // image 0, channel 1
  for (double v : Iota(18, 101)) x.push_back(v);           // image 1
  std::vector<int> shape;
  const auto y = this->Run("kernel_size: 2 pad: 1 stride: 2", {2, 2, 3, 3}, x, &shape);
  EXPECT_EQ(shape, (std::vector<int>{2, 8, 2, 2}));
  // Output (oy, ox) of tap (ky, kx) reads pixel (2*oy - 1 + ky, 2*ox - 1 + kx).
  const std::vector<double> image0{0, 0, 0, 5,  0, 0, 4, 6,  0, 2, 0, 8,  1, 3, 7, 9,
                                   0, 0, 0, 15, 0, 0, 14, 16, 0, 12, 0, 18, 11, 13, 17, 19};
  const std::vector<double> image1{0, 0, 0, 105, 0, 0, 104, 106, 0, 102, 0, 108, 101, 103, 107, 109,
                                   0, 0, 0, 114, 0, 0, 113, 115, 0, 111, 0, 117, 110, 112, 116, 118};
  std::vector<double> want = image0;
  want.insert(want.end(), image1.begin(), image1.end());
  EXPECT_EQ(y, want);
  // Stride 2 with a 2x2 kernel reads every pixel once: backward is a permutation.
  std::vector<double> d(64);
  for (size_t i = 0; i < d.size(); ++i) d[i] = want[i] == 0 ? 50 : want[i];  // padding taps are dropped
  test::SetDiff(this->top_[0], d, type_of<typename TestFixture::B>());
  this->layer_->Backward(this->top_.vec, {true}, this->bottom_.vec);
  EXPECT_EQ(test::GetDiff(*this->bottom_[0]), x);
}

TYPED_TEST(Im2colLayerTest, DilationAndRectangularKernel) {
  std::vector<int> shape;
  auto y = this->Run("kernel_size: 2 dilation: 2", {1, 1, 3, 3}, Iota(9, 1), &shape);
  EXPECT_EQ(shape, (std::vector<int>{1, 4, 1, 1}));
  EXPECT_EQ(y, (std::vector<double>{1, 3, 7, 9}));
  y = this->Run("kernel_h: 1 kernel_w: 3", {1, 1, 2, 3}, Iota(6, 1), &shape);
  EXPECT_EQ(shape, (std::vector<int>{1, 3, 2, 1}));
  EXPECT_EQ(y, (std::vector<double>{1, 4, 2, 5, 3, 6}));
  y = this->Run("kernel_size: [1, 2] stride: [1, 2]", {1, 1, 2, 4}, Iota(8, 1), &shape);
  EXPECT_EQ(shape, (std::vector<int>{1, 2, 2, 2}));
  EXPECT_EQ(y, (std::vector<double>{1, 3, 5, 7, 2, 4, 6, 8}));
}

TYPED_TEST(Im2colLayerTest, Errors) {
  using F = typename TypeParam::Ftype;
  struct Case { const char* text; std::vector<int> shape; const char* field; const char* message; };
  const Case cases[] = {
      {"", {1, 1, 3, 3}, "convolution_param.kernel_size", "is required"},
      {"kernel_size: 0", {1, 1, 3, 3}, "convolution_param.kernel_size", "must be positive"},
      {"kernel_size: [1, 2, 3]", {1, 1, 3, 3}, "convolution_param.kernel_size", "1 or 2 values"},
      {"kernel_size: 2 kernel_h: 2 kernel_w: 2", {1, 1, 3, 3}, "convolution_param.kernel_size", "not both"},
      {"kernel_h: 2", {1, 1, 3, 3}, "convolution_param.kernel_w", "together"},
      {"kernel_size: 2 stride: 0", {1, 1, 3, 3}, "convolution_param.stride", "must be positive"},
      {"kernel_size: 2 dilation: 0", {1, 1, 3, 3}, "convolution_param.dilation", "must be positive"},
      {"kernel_size: 2 axis: 2", {1, 1, 3, 3}, "convolution_param.axis", "got 2"},
      {"kernel_size: 4", {1, 1, 3, 3}, "convolution_param.kernel_size", "larger than the padded input"},
      {"kernel_size: 2 dilation: 3", {1, 1, 3, 3}, "convolution_param.kernel_size", "dilated 4x4"},
      {"kernel_size: 2", {1, 3, 3}, "bottom", "4 axes"},
  };
  for (const Case& c : cases) {
    auto layer =
        test::NewLayer<TypeParam>(std::string("name: 'i' type: 'Im2col' convolution_param { ") + c.text + " }");
    test::Blobs bottom, top;
    bottom.add(c.shape, type_of<F>());
    top.add(type_of<F>());
    try {
      layer->SetUp(bottom.vec, top.vec);
      ADD_FAILURE() << c.text << " was accepted";
    } catch (const FieldError& e) {
      EXPECT_EQ(e.field(), c.field) << c.text << ": " << e.what();
      EXPECT_NE(std::string(e.what()).find(c.message), std::string::npos) << e.what();
    }
  }
}

// Forward copies (exact); col2im sums the overlapping taps in float and
// rounds once: within one unit of the coarser type.
TYPED_TEST(Im2colLayerTest, Gradient) {
  auto fill = [](int i, Blob* b) { test::FillUniform(b, -1, 1, 17 + i); };
  test::CheckLayer<TypeParam>("type: 'Im2col' convolution_param { kernel_size: 3 stride: 2 pad: 1 }",
                              {{2, 2, 5, 4}}, fill, test::GradientSettings(), test::ReferenceTolerance{0, 1});
  test::CheckLayer<TypeParam>("type: 'Im2col' convolution_param { kernel_h: 2 kernel_w: 3 dilation: 2 pad_w: 1 }",
                              {{1, 2, 5, 5}}, fill, test::GradientSettings(), test::ReferenceTolerance{0, 1});
}

// The GPU col2im gathers a pixel's taps in its own order: one unit.
TYPED_TEST(Im2colLayerTest, GpuMatchesCpu) {
  auto fill = [](int i, Blob* b) { test::FillUniform(b, -1, 1, 29 + i); };
  test::CheckGpuAgainstCpu<TypeParam>("type: 'Im2col' convolution_param { kernel_size: 3 stride: 1 pad: 1 }",
                                      {{2, 3, 6, 5}}, fill, test::GpuTolerance{0, 1});
}

}  // namespace
}  // namespace cortado
