#pragma once
// 2D convolution, as Caffe's ConvolutionLayer (im2col + GEMM).
//
// Math, per image n, output channel o, output position (y, x):
//   top[n,o,y,x] = bias[o] + sum_{c in group(o), ky, kx}
//       weight[o, c - c0(o), ky, kx] * bottom[n, c, y*SH - PH + ky*DH, x*SW - PW + kx*DW]
// where positions outside the image read 0 and group(o) is the block of C/group
// input channels that output o's group sees.
//
// Shapes:
//   bottom[i] (N, C, H, W); every bottom has the same shape.
//   top[i]    (N, num_output, OH, OW), one top per bottom,
//             OH = (H + 2*PH - (DH*(KH-1)+1)) / SH + 1, likewise OW.
//   blobs_[0] weight (num_output, C/group, KH, KW); blobs_[1] bias (num_output)
//             when bias_term. Loaded or shared blobs are kept if their shapes match.
//
// convolution_param fields (2D only; repeated fields take 1 value for both axes
// or 2 values for (h, w)):
//   num_output (required, > 0)
//   bias_term (default true)
//   kernel_size (repeated) or kernel_h + kernel_w: required, > 0
//   pad (repeated, default 0) or pad_h + pad_w
//   stride (repeated, default 1) or stride_h + stride_w; > 0
//   dilation (repeated, default 1); > 0
//   group (default 1): divides C and num_output
//   weight_filler, bias_filler (default constant 0)
//   axis (default 1): only 1 is implemented
//   engine, force_nd_im2col: accepted and ignored (one CPU engine, 2D only)
// The dilated kernel must fit the padded input. The window's fields, checks
// and output shape, and the per-image, per-group GEMMs of the im2col
// engines, are the family's (conv_geometry.hpp), shared with Deconvolution,
// cuDNN's engine and Im2col; the weight and bias blobs are set up as
// InnerProduct's and Embed's (param_blobs.hpp).
//
// Types: Forward reads bottom and parameters as Ftype and computes in
// math_t<Ftype> (float for float16, one rounding on the store). Backward reads
// the top diff, the weights and the bottom data as math_t<Btype>, sums the
// parameter gradients of the whole batch in math_t<Btype> and adds them once to
// the parameter diffs (Btype); bottom diffs are overwritten. In place: no.
//
// Fast paths: 1x1 kernels with stride 1 and pad 0 skip im2col (the GEMM reads
// the bottom itself). Depthwise convolutions (group == C, each input channel
// with its own num_output/C filters, MobileNet's layers) run a direct loop on
// the CPU and direct kernels in the CUDA engine instead of C tiny GEMMs per
// image: the same sums over the same terms, without im2col's copies.
//
// GPU (this class is the plain CUDA engine, engine: CAFFE; the factory picks
// CuDNNConvolutionLayer on a GPU otherwise): im2col_gpu + cuBLAS GEMM per
// image and group, in the storage type with compute type forward_math
// (forward) / backward_math (backward): FP16 storage with FLOAT math runs on
// Tensor Cores with FP32 accumulation; double and float compute in their own
// type. Bias add and bias gradient are Bias's kernels (bias_layer.hpp; the
// bias gradient sums the batch in float, double for double, and is added
// once per bottom). With
// float16 diffs and FLOAT math the weight gradient of the batch sums in an
// FP32 buffer and is added to the diff once per bottom, as on the CPU.

#include <cstdint>
#include <vector>

#include "cortado/layer.hpp"
#include "cortado/layers/conv_geometry.hpp"
#include "cortado/layers/layout_stand_in.hpp"
#include "cortado/util/math.hpp"

struct CUstream_st;
struct cublasContext;

namespace cortado {

/// The geometry of a depthwise convolution: `channels` input channels, each
/// with `mult` filters (output channel c * mult + m reads input channel c).
struct DepthwiseGeometry {
  int num, channels, mult, height, width, out_h, out_w, kh, kw, ph, pw, sh, sw, dh, dw;
};

template <typename Ftype, typename Btype>
class ConvolutionLayer : public Layer<Ftype, Btype> {
 public:
  CORTADO_LAYER_HEAD(Layer, "Convolution", BlobRules().MinBottoms(1).MinTops(1).TopsMatchBottoms())
  CORTADO_LAYER_SETUP

 protected:
  CORTADO_LAYER_PASSES

  /// Reads and checks convolution_param (every field but those that need
  /// the bottom's shape).
  void ReadGeometry();
  DepthwiseGeometry depthwise_geometry() const {
    return {num_, channels_, num_output_ / group_, height_, width_, out_h_, out_w_, win_.kh, win_.kw, win_.ph,
            win_.pw, win_.sh, win_.sw, win_.dh, win_.dw};
  }
  /// The bottoms' axes and shapes, the group against the channels, and the
  /// spatial size against the window (the kernel fits; a deconvolution's
  /// output is not empty).
  void CheckBottoms(const BlobVec& bottom) const;
  /// One image's GEMMs and the image im2col reads: the bottom's for a
  /// convolution, the top's for a deconvolution (conv_geometry.hpp).
  ConvGemm gemm() const {
    const int kk = win_.kh * win_.kw;
    if (transposed_) return {group_, channels_ / group_, num_output_ / group_ * kk, height_ * width_};
    return {group_, num_output_ / group_, channels_ / group_ * kk, out_h_ * out_w_};
  }
  ConvImage col_image() const {
    if (transposed_) return {num_output_, out_h_, out_w_, win_};
    return {channels_, height_, width_, win_};
  }
  /// Values per image: of the bottom (C, H, W), of the top (num_output, OH,
  /// OW), and of its im2col columns.
  int64_t bottom_size() const { return int64_t{channels_} * height_ * width_; }
  int64_t top_size() const { return int64_t{num_output_} * out_h_ * out_w_; }
  size_t col_size() const {
    const ConvGemm g = gemm();
    return static_cast<size_t>(g.group) * g.k * g.n;
  }

  // Compute types of the GPU GEMMs / cuDNN calls (see the header comment):
  // gpu_math_type: forward_math / backward_math for float16 storage (FLOAT
  // unless FLOAT16 is asked for), FLOAT for bfloat16, the storage type
  // itself for float and double.
  Type forward_math_ = FLOAT, backward_math_ = FLOAT;

  bool transposed_ = false;  // Deconvolution: weights (C, num_output/group, KH, KW), the output shape
  int num_output_ = 0;
  int group_ = 1;
  bool bias_term_ = true;
  ConvWindow win_;
  bool is_1x1_ = false;
  bool depthwise_ = false;  // group_ == channels_ > 1 (a convolution): the direct path
  int channels_ = 0;  // C of the bottom at setup; the weights depend on it
  int num_ = 0, height_ = 0, width_ = 0, out_h_ = 0, out_w_ = 0;

  /// The im2col passes' NCHW stand-ins for channels-last blobs (net_layout.hpp).
  NchwPasses nchw_;
};

#ifdef CORTADO_USE_CUDA
namespace gpu {
// Launchers of convolution_layer.cu (device pointers, enqueued on `stream`).

/// Row-major C (M, N) (FP32) += op(A) op(B) with A, B in T (float or
/// float16): FP32 accumulation, Tensor Cores for float16; on the handle's stream.
template <typename T>
void gemm_accumulate_f32(cublasContext* handle, Trans ta, Trans tb, int M, int N, int K, const T* A, const T* B,
                         float* C);
/// dst[i] = T(dst[i] + src[i]), computed in float.
template <typename T>
void add_f32(int64_t n, const float* src, T* dst, CUstream_st* stream);
/// Depthwise convolution of the whole batch: y = conv(x, w) without bias
/// (one thread per output); dx = the adjoint, overwritten (one thread per
/// input); dw += the weight gradient of the batch (one block per weight,
/// summed in float, double for double, and added with one rounding).
template <typename T>
void depthwise_forward(const DepthwiseGeometry& g, const T* x, const T* w, T* y, CUstream_st* stream);
template <typename T>
void depthwise_backward_data(const DepthwiseGeometry& g, const T* w, const T* dy, T* dx, CUstream_st* stream);
template <typename T>
void depthwise_backward_weight(const DepthwiseGeometry& g, const T* x, const T* dy, T* dw, CUstream_st* stream);
}  // namespace gpu
#endif  // CORTADO_USE_CUDA

}  // namespace cortado
