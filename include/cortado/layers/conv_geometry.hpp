#pragma once
// The convolution family's shared geometry and GEMM plumbing: Convolution,
// Deconvolution (its transpose), cuDNN's Convolution and Im2col read, check
// and size their windows here, and the im2col + GEMM engines (CPU and plain
// CUDA) run their per-image, per-group GEMMs through ConvGemm.
//
// Window (convolution_param, 2D): kernel_size / kernel_h + kernel_w
// (required, > 0), pad / pad_h + pad_w (default 0), stride / stride_h +
// stride_w (default 1, > 0), dilation (default 1, > 0); a repeated field
// takes 1 value for both axes or 2 for (h, w). Output extent along an axis
// of extent H, dilated kernel E = D (K - 1) + 1:
//   convolution   (H + 2 P - E) / S + 1   (the kernel must fit the padded input)
//   deconvolution S (H - 1) + E - 2 P     (must be positive)
//
// GEMMs of one image (Caffe's BaseConvolutionLayer), for a convolution from
// an image of Cin channels to Cout channels at N output positions, in
// `group` groups, with col = im2col(input) of (Cin K_h K_w, N) rows by
// columns and the weights (Cout, Cin/group K_h K_w):
//   Forward   out_g (M, N)  = W_g (M, K) col_g (K, N)
//   Backward  col_g (K, N)  = W_g^T out_g               (then col2im)
//   Weight    dW_g (M, K)  += out_g col_g^T
// with M = Cout/group and K = Cin/group K_h K_w. A convolution's forward is
// Forward, its backward Backward and Weight; a deconvolution runs the same
// three with the roles of its bottom and top exchanged (its forward is
// Backward, its data gradient Forward). The caller's gemm does the multiply
// (cpu_gemm, cuBLAS, a packed bfloat16 kernel, FP32 accumulation) so the
// arithmetic of every engine stays its own.

#include <cstddef>
#include <cstdint>

#include "cortado/config.hpp"
#include "cortado/layer.hpp"
#include "cortado/util/im2col.hpp"
#include "cortado/util/math.hpp"

namespace cortado {

/// The 2-D window of a convolution_param: kernel, pad, stride and dilation.
struct ConvWindow {
  int kh = 0, kw = 0, ph = 0, pw = 0, sh = 1, sw = 1, dh = 1, dw = 1;

  int64_t dilated_h() const { return int64_t{dh} * (kh - 1) + 1; }
  int64_t dilated_w() const { return int64_t{dw} * (kw - 1) + 1; }
  /// The output extents of a convolution of an h x w input.
  int conv_out_h(int h) const { return static_cast<int>((h + 2 * int64_t{ph} - dilated_h()) / sh + 1); }
  int conv_out_w(int w) const { return static_cast<int>((w + 2 * int64_t{pw} - dilated_w()) / sw + 1); }
  /// The output extents of a deconvolution of an h x w input.
  int deconv_out_h(int h) const { return static_cast<int>(int64_t{sh} * (h - 1) + dilated_h() - 2 * int64_t{ph}); }
  int deconv_out_w(int w) const { return static_cast<int>(int64_t{sw} * (w - 1) + dilated_w() - 2 * int64_t{pw}); }
  /// A 1x1 kernel with stride 1 and no padding: the columns are the image.
  bool is_1x1() const { return kh == 1 && kw == 1 && sh == 1 && sw == 1 && ph == 0 && pw == 0; }
};

/// Reads and checks the layer's window: the kernel is required and
/// positive, stride and dilation positive; a bad value is a field error
/// naming the field (convolution_layer.cpp).
ConvWindow ReadConvWindow(const LayerBase& layer);
/// convolution_param.axis must be 1 (N, C, H, W).
void CheckConvAxis(const LayerBase& layer);
/// The field error of a kernel that does not fit an h x w input padded by
/// the window, if it does not: "kernel KHxKW (dilated EHxEW) is larger than
/// the padded input HPxWP (pad PHxPW)"; with square_short and a square
/// window, "kernel K (dilated E) is larger than the padded input HPxWP (pad
/// P)". The field is kernel_size, or kernel_h when the kernel was given as
/// kernel_h/kernel_w.
void CheckKernelFits(const LayerBase& layer, const ConvWindow& win, int h, int w, bool square_short);

/// An image of `channels` x height x width seen through a window: its
/// im2col columns (channels kh kw, out_h out_w) and their adjoint.
struct ConvImage {
  int channels, height, width;
  ConvWindow win;

  template <typename T>
  void im2col_cpu(const T* im, T* col) const {
    cortado::im2col_cpu<T>(im, channels, height, width, win.kh, win.kw, win.ph, win.pw, win.sh, win.sw, win.dh,
                           win.dw, col);
  }
  template <typename T>
  void col2im_cpu(const T* col, T* im) const {
    cortado::col2im_cpu<T>(col, channels, height, width, win.kh, win.kw, win.ph, win.pw, win.sh, win.sw, win.dh,
                           win.dw, im);
  }
#ifdef CORTADO_USE_CUDA
  template <typename T>
  void im2col_gpu(const T* im, T* col, CUstream_st* stream) const {
    cortado::im2col_gpu<T>(im, channels, height, width, win.kh, win.kw, win.ph, win.pw, win.sh, win.sw, win.dh,
                           win.dw, col, stream);
  }
  template <typename T>
  void col2im_gpu(const T* col, T* im, CUstream_st* stream) const {
    cortado::col2im_gpu<T>(col, channels, height, width, win.kh, win.kw, win.ph, win.pw, win.sh, win.sw, win.dh,
                           win.dw, im, stream);
  }
#endif
};

/// The per-group GEMMs of one image (see the header comment). gemm is
/// called as gemm(g, ta, tb, rows, cols, inner, A, B, beta, C) for
/// C (rows, cols) = op(A) op(B) + beta C, row-major, beta 0 or 1.
struct ConvGemm {
  int group, m, k, n;  // groups; per group: M output channels, K column rows, N positions

  size_t w_offset(int g) const { return static_cast<size_t>(g) * m * k; }
  size_t col_offset(int g) const { return static_cast<size_t>(g) * k * n; }
  size_t out_offset(int g) const { return static_cast<size_t>(g) * m * n; }

  /// out_g = W_g col_g.
  template <typename Gemm, typename W, typename C, typename O>
  void Forward(Gemm&& gemm, const W* w, const C* col, O* out) const {
    for (int g = 0; g < group; ++g) {
      gemm(g, Trans::No, Trans::No, m, n, k, w + w_offset(g), col + col_offset(g), 0.f, out + out_offset(g));
    }
  }
  /// col_g = W_g^T out_g.
  template <typename Gemm, typename W, typename O, typename C>
  void Backward(Gemm&& gemm, const W* w, const O* out, C* col) const {
    for (int g = 0; g < group; ++g) {
      gemm(g, Trans::Yes, Trans::No, k, n, m, w + w_offset(g), out + out_offset(g), 0.f, col + col_offset(g));
    }
  }
  /// dW_g += out_g col_g^T.
  template <typename Gemm, typename O, typename C, typename W>
  void Weight(Gemm&& gemm, const O* out, const C* col, W* dw) const {
    for (int g = 0; g < group; ++g) {
      gemm(g, Trans::No, Trans::Yes, m, k, n, out + out_offset(g), col + col_offset(g), 1.f, dw + w_offset(g));
    }
  }
};

}  // namespace cortado
