// The convolution family's shared geometry and GEMMs (layers/conv_geometry.hpp):
// output extents, the kernel-fit error in both forms, ConvGemm's three
// products against a direct convolution and its adjoint, and the parameter
// blob checks Convolution and Deconvolution share (param_blobs.hpp).

#include "cortado/layers/conv_geometry.hpp"

#include <string>
#include <vector>

#include "cortado/layers/deconvolution_layer.hpp"
#include "test_util.hpp"

namespace cortado {
namespace {

using P = test::TypePair<double, double>;

TEST(ConvGeometry, OutputExtents) {
  ConvWindow w;
  w.kh = 3, w.kw = 2, w.ph = 1, w.pw = 0, w.sh = 2, w.sw = 1, w.dh = 2, w.dw = 3;
  EXPECT_EQ(w.dilated_h(), 5);
  EXPECT_EQ(w.dilated_w(), 4);
  EXPECT_EQ(w.conv_out_h(9), (9 + 2 - 5) / 2 + 1);
  EXPECT_EQ(w.conv_out_w(7), 7 - 4 + 1);
  EXPECT_EQ(w.deconv_out_h(4), 2 * 3 + 5 - 2);
  EXPECT_EQ(w.deconv_out_w(4), 3 + 4);
  // A deconvolution undoes a convolution's shape where the stride divides evenly.
  EXPECT_EQ(w.conv_out_h(w.deconv_out_h(4)), 4);
  EXPECT_FALSE(w.is_1x1());
  ConvWindow one;
  one.kh = one.kw = 1;
  EXPECT_TRUE(one.is_1x1());
}

// The Convolution and Im2col layers raise CheckKernelFits' two forms.
std::string SetUpError(const std::string& text, const std::vector<int>& shape) {
  auto layer = test::NewLayer<P>("name: 'c' " + text);
  test::Blobs bottom, top;
  bottom.add(shape, DOUBLE);
  top.add(DOUBLE);
  try {
    layer->SetUp(bottom.vec, top.vec);
  } catch (const FieldError& e) {
    return e.field() + " | " + e.message();
  }
  return "no error";
}

TEST(ConvGeometry, KernelFitMessages) {
  EXPECT_EQ(SetUpError("type: 'Convolution' convolution_param { num_output: 1 kernel_size: 4 }", {1, 1, 3, 3}),
            "convolution_param.kernel_size | kernel 4 (dilated 4) is larger than the padded input 3x3 (pad 0)");
  EXPECT_EQ(SetUpError("type: 'Im2col' convolution_param { kernel_size: 4 }", {1, 1, 3, 3}),
            "convolution_param.kernel_size | kernel 4x4 (dilated 4x4) is larger than the padded input 3x3 (pad 0x0)");
  // Given as kernel_h and kernel_w, the error points at kernel_h.
  EXPECT_EQ(SetUpError("type: 'Im2col' convolution_param { kernel_h: 2 kernel_w: 5 pad_w: 1 }", {1, 1, 3, 2}),
            "convolution_param.kernel_h | kernel 2x5 (dilated 2x5) is larger than the padded input 3x4 (pad 0x1)");
  EXPECT_EQ(SetUpError("type: 'Deconvolution' convolution_param { num_output: 1 kernel_size: 1 pad: 1 }",
                       {1, 1, 2, 2}),
            "convolution_param.pad | pad 1x1 leaves an empty output (0x0) for input 2x2");
}

// A direct grouped convolution of one image, (C, H, W) -> (O, OH, OW), weights (O, C/G, KH, KW).
std::vector<double> DirectConv(const std::vector<double>& x, const std::vector<double>& w, int c, int h, int wd,
                               int o, int g, const ConvWindow& win) {
  const int oh = win.conv_out_h(h), ow = win.conv_out_w(wd), cg = c / g, og = o / g;
  std::vector<double> y(static_cast<size_t>(o) * oh * ow, 0.0);
  for (int oc = 0; oc < o; ++oc)
    for (int yy = 0; yy < oh; ++yy)
      for (int xx = 0; xx < ow; ++xx) {
        double s = 0;
        for (int ci = 0; ci < cg; ++ci)
          for (int ky = 0; ky < win.kh; ++ky)
            for (int kx = 0; kx < win.kw; ++kx) {
              const int iy = yy * win.sh - win.ph + ky * win.dh, ix = xx * win.sw - win.pw + kx * win.dw;
              if (iy < 0 || iy >= h || ix < 0 || ix >= wd) continue;
              const int in_c = oc / og * cg + ci;
              s += w[((static_cast<size_t>(oc) * cg + ci) * win.kh + ky) * win.kw + kx] *
                   x[(static_cast<size_t>(in_c) * h + iy) * wd + ix];
            }
        y[(static_cast<size_t>(oc) * oh + yy) * ow + xx] = s;
      }
  return y;
}

double Dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

TEST(ConvGeometry, GemmsMatchADirectConvolutionAndTheirAdjoints) {
  ConvWindow win;
  win.kh = 3, win.kw = 2, win.ph = 1, win.pw = 1, win.sh = 2, win.sw = 1, win.dh = 1, win.dw = 2;
  const int c = 4, h = 5, wd = 6, o = 6, g = 2;
  const ConvImage im{c, h, wd, win};
  const int oh = win.conv_out_h(h), ow = win.conv_out_w(wd);
  const ConvGemm gm{g, o / g, c / g * win.kh * win.kw, oh * ow};
  // Small integers: every product and sum is exact in double.
  auto ints = [](size_t n, int seed) {
    std::vector<double> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = static_cast<double>((i * 7 + seed * 13) % 9) - 4;
    return v;
  };
  const std::vector<double> x = ints(static_cast<size_t>(c) * h * wd, 1);
  const std::vector<double> w = ints(static_cast<size_t>(o) * gm.k, 2);
  const std::vector<double> dy = ints(static_cast<size_t>(o) * gm.n, 3);
  auto gemm = [](int, Trans ta, Trans tb, int rows, int cols, int inner, const double* a, const double* b,
                 float beta, double* out) { cpu_gemm<double>(ta, tb, rows, cols, inner, 1.0, a, b, beta, out); };

  std::vector<double> col(static_cast<size_t>(g) * gm.k * gm.n), y(static_cast<size_t>(o) * gm.n);
  im.im2col_cpu(x.data(), col.data());
  gm.Forward(gemm, w.data(), col.data(), y.data());
  EXPECT_EQ(y, DirectConv(x, w, c, h, wd, o, g, win));

  // Backward + col2im is the adjoint of im2col + Forward: <conv(x), dy> = <x, conv^T(dy)>.
  std::vector<double> dcol(col.size()), dx(x.size());
  gm.Backward(gemm, w.data(), dy.data(), dcol.data());
  im.col2im_cpu(dcol.data(), dx.data());
  EXPECT_EQ(Dot(y, dy), Dot(x, dx));

  // Weight accumulates: twice the same image gives twice <conv_w(x), dy> = dW . w.
  std::vector<double> dw(w.size(), 0.0);
  gm.Weight(gemm, dy.data(), col.data(), dw.data());
  EXPECT_EQ(Dot(dw, w), Dot(y, dy));
  gm.Weight(gemm, dy.data(), col.data(), dw.data());
  EXPECT_EQ(Dot(dw, w), 2 * Dot(y, dy));
}

// Loaded blobs are checked against each shape on its own (Deconvolution's
// weight is (C, num_output/group, KH, KW)).
TEST(ConvGeometry, LoadedBlobShapes) {
  auto layer = test::NewLayer<P>("name: 'd' type: 'Deconvolution' convolution_param { num_output: 2 kernel_size: 2 }");
  layer->blobs().push_back(std::make_shared<Blob>(std::vector<int>{3, 2, 2, 2}, DOUBLE));
  layer->blobs().push_back(std::make_shared<Blob>(std::vector<int>{3}, DOUBLE));
  test::Blobs bottom, top;
  bottom.add({1, 3, 2, 2}, DOUBLE);
  top.add(DOUBLE);
  try {
    layer->SetUp(bottom.vec, top.vec);
    ADD_FAILURE() << "a bias of 3 values for 2 outputs was accepted";
  } catch (const FieldError& e) {
    EXPECT_EQ(e.field(), "blobs");
    EXPECT_EQ(e.message(), "bias shape (3) does not match the expected (2)");
  }
  layer->blobs()[0] = std::make_shared<Blob>(std::vector<int>{2, 3, 2, 2}, DOUBLE);
  try {
    layer->SetUp(bottom.vec, top.vec);
    ADD_FAILURE() << "a convolution's weight shape was accepted by a deconvolution";
  } catch (const FieldError& e) {
    EXPECT_EQ(e.message(), "weight shape (2, 3, 2, 2) does not match the expected (3, 2, 2, 2) "
                           "(C, num_output/group, KH, KW)");
  }
}

}  // namespace
}  // namespace cortado
