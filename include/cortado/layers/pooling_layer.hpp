#pragma once
// 2D max, average or stochastic pooling, as Caffe's PoolingLayer.
//
// Windows: output (y, x) covers rows [y*SH - PH, y*SH - PH + KH) and columns
// likewise, clipped to the image.
//   MAX: top = max over the clipped window; the argmax (h*W + w inside its
//        plane, first one on ties) is kept for backward, which routes each top
//        diff to its argmax (bottom diff = sum of the diffs routed to it).
//   AVE: top = sum over the clipped window / pool size, where the pool size
//        counts the window clipped to the PADDED image [-PH, H+PH) (Caffe's
//        divisor: padding cells count as zeros, cells beyond the padding do
//        not). Backward spreads top diff / pool size over the clipped window.
//   STOCHASTIC (Zeiler & Fergus; activations expected non-negative, e.g.
//        after ReLU; no padding): TRAIN draws u in [0, 1] per output from the
//        process RNG on the host (so the CPU and GPU paths sample the same
//        positions) and takes the first position of the window, in row-major
//        order, whose running sum reaches u * sum(window); top = its value,
//        backward routes the top diff to it like MAX. TEST: top =
//        sum(x^2) / sum(x) (0 when sum(x) <= 0); backward the exact
//        derivative (2 x - top) / sum(x) (Caffe has none).
//
// Shapes:
//   bottom (N, C, H, W).
//   top[0] (N, C, OH, OW), OH = ceil((H + 2*PH - KH) / SH) + 1 (round_mode
//          CEIL, Caffe's default) or floor((H + 2*PH - KH) / SH) + 1 (round_mode
//          FLOOR, or NVCaffe's torch_pooling), then reduced by one if the last
//          window would start at or beyond H + PH (Caffe's rule; Cortado
//          applies it with PH = 0 too, where Caffe would emit a window that
//          lies outside the image). Likewise OW. The CPU and GPU paths share
//          this shape (Reshape).
//   top[1] (MAX only, optional) same shape: the argmax index as a number,
//          written as float whatever Ftype (float16 holds integers exactly
//          only up to 2048).
//
// pooling_param fields:
//   pool (default MAX): MAX, AVE or STOCHASTIC (pad must be 0)
//   kernel_size, or kernel_h + kernel_w: required unless global_pooling; > 0
//   pad (default 0), or pad_h / pad_w: must be < the kernel
//   stride (default 1), or stride_h + stride_w; > 0
//   global_pooling (default false): the kernel is the whole H x W (kernel,
//     pad and stride must not be set)
//   round_mode (default CEIL): CEIL or FLOOR, the rounding of the output size
//   torch_pooling (default false; NVCaffe's): true rounds down, as FLOOR
//     (with round_mode: CEIL given explicitly, an error)
//   engine: accepted and ignored.
// The kernel must fit the padded input.
//
// Layout: the Net's layout plan (net_layout.hpp) may hand MAX and AVE
// pooling (one top) channels-last blobs: the GPU kernels index them in
// place; the CPU path computes through NCHW stand-ins.
//
// Types: Forward reads the bottom as math_t<Ftype> and stores the top in
// Ftype; Backward reads the top diff as math_t<Btype>, sums into the bottom
// diff in math_t<Btype> and stores it in Btype (overwritten). In place: no.
//
// GPU: own kernels (no cuDNN), the same windows, tie rule and divisor as the
// CPU path. Forward: one thread per top element (MAX keeps its argmax in a
// device int mask). Backward: one thread per bottom element gathering the
// diffs of the outputs whose windows cover it, summed in float (double for
// double): no atomics, deterministic. STOCHASTIC TRAIN copies the host draws
// to the device (cudaMemcpyAsync from pageable memory), picks in a kernel
// and reuses MAX's routing backward; TEST has its own forward and gather
// backward kernels.

#include <cstdint>
#include <memory>
#include <vector>

#include "cortado/layer.hpp"
#include "cortado/layers/layout_stand_in.hpp"

struct CUstream_st;

namespace cortado {

template <typename Ftype, typename Btype>
class PoolingLayer : public Layer<Ftype, Btype> {
 public:
  // MAX pooling may give a second top, the argmax mask.
  CORTADO_LAYER_HEAD(Layer, "Pooling", BlobRules().Bottoms(1).Tops(1, max_pool() ? 2 : 1))
  CORTADO_LAYER_SETUP

 protected:
  CORTADO_LAYER_PASSES

 private:
  bool max_pool() const { return this->layer_param().pooling_param().pool() == PoolingParameter::MAX; }
  bool train() const { return this->layer_param().phase() == TRAIN; }

  bool max_ = true;
  bool stochastic_ = false;
  std::vector<float> rand_;  // (N, C, OH, OW) STOCHASTIC TRAIN: the uniform draws of the last forward
  bool global_ = false;
  bool floor_ = false;  // the output size rounds down (round_mode FLOOR, torch_pooling)
  int kh_ = 0, kw_ = 0, ph_ = 0, pw_ = 0, sh_ = 1, sw_ = 1;
  int num_ = 0, channels_ = 0, height_ = 0, width_ = 0, out_h_ = 0, out_w_ = 0;
  std::vector<int> mask_;  // (N, C, OH, OW) argmax of MAX, or the STOCHASTIC TRAIN pick
  NchwPasses nchw_;  // the CPU path's stand-ins for channels-last blobs
#ifdef CORTADO_USE_CUDA
  // The device copy of the argmax (GPU path), from the caching allocator.
  std::unique_ptr<void, void (*)(void*)> gpu_mask_{nullptr, nullptr};
  size_t gpu_mask_count_ = 0;
  std::unique_ptr<void, void (*)(void*)> gpu_rand_{nullptr, nullptr};  // STOCHASTIC draws on the device
  size_t gpu_rand_count_ = 0;
#endif
};

#ifdef CORTADO_USE_CUDA
namespace gpu {
// Launchers of pooling_layer.cu (device pointers, enqueued on `stream`).
// `planes` = N*C; x/dx are (planes, height, width), y/dy/mask (planes, out_h, out_w).
struct PoolWindow {
  int height, width, out_h, out_w, kh, kw, ph, pw, sh, sw;
  int channels = 0;  // > 0: x, y, dx, dy and the mask channels last (NHWC), C channels (MAX and AVE only)
};
/// mask_top (may be null) gets the argmax as float.
template <typename T>
void max_pool_forward(int64_t planes, PoolWindow g, const T* x, T* y, int* mask, float* mask_top,
                      CUstream_st* stream);
template <typename T>
void ave_pool_forward(int64_t planes, PoolWindow g, const T* x, T* y, CUstream_st* stream);
/// dx is overwritten.
template <typename T>
void max_pool_backward(int64_t planes, PoolWindow g, const T* dy, const int* mask, T* dx, CUstream_st* stream);
/// STOCHASTIC: with rand (device, one uniform per output) the sampled value and its index in mask;
/// without (TEST) the weighted average sum(x^2) / sum(x).
template <typename T>
void stochastic_pool_forward(int64_t planes, PoolWindow g, const T* x, T* y, const float* rand, int* mask,
                             CUstream_st* stream);
/// STOCHASTIC TEST backward: dx = sum over covering windows of dy * (2 x - Q / S) / S; overwritten.
template <typename T>
void stochastic_pool_test_backward(int64_t planes, PoolWindow g, const T* x, const T* dy, T* dx, CUstream_st* stream);
/// dx is overwritten.
template <typename T>
void ave_pool_backward(int64_t planes, PoolWindow g, const T* dy, T* dx, CUstream_st* stream);
}  // namespace gpu
#endif  // CORTADO_USE_CUDA

}  // namespace cortado
