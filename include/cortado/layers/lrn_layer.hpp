#pragma once
// LRN: local response normalization.
//
//   forward:  s_i = k' + (alpha / N) * sum_{j in W(i)} x_j^2,  y_i = x_i * s_i^(-beta)
//   backward: dx_i = dy_i * s_i^(-beta)
//                    - (2 alpha beta / N) * x_i * sum_{j in W(i)} dy_j * y_j / s_j
//
// Regions (lrn_param.norm_region):
//   ACROSS_CHANNELS (default): W(i) = the local_size channels centred on i's
//     channel at the same (n, h, w), clipped at the channel ends; N =
//     local_size; k' = lrn_param.k.
//   WITHIN_CHANNEL: W(i) = the local_size x local_size square centred on
//     (h, w) in i's channel, clipped at the borders; N = local_size^2 (the
//     clipped part counts as zeros, as Caffe's padded average pooling does);
//     k' = 1: like BVLC Caffe, lrn_param.k is not used in this mode.
// Bottoms: 1, 4 axes (N, C, H, W). Tops: 1, the bottom's shape.
// Fields: lrn_param.local_size (uint, default 5, odd), lrn_param.alpha
// (float, default 1), lrn_param.beta (float, default 0.75), lrn_param.k
// (float, default 1), lrn_param.norm_region (default ACROSS_CHANNELS),
// lrn_param.engine (accepted, ignored). alpha, beta, k must be finite.
// In place: no (the backward reads x and y): a field error on "top".
// Types: x and y in Ftype, dy and dx in Btype; the scale s is computed and
// kept in float (double for double): a member blob reused by the backward;
// window sums in that type.
// GPU: lrn_layer.cu: one thread per element computes s_i from its window,
// then one thread per element y_i; the backward one thread per element sums
// its window of dy_j * y_j / s_j in math_t. Same order of summation as the
// CPU path, so differences come from powf/pow only.

#include <memory>

#include "cortado/config.hpp"
#include "cortado/layer.hpp"

namespace cortado {

template <typename Ftype, typename Btype>
class LRNLayer : public Layer<Ftype, Btype> {
 public:
  CORTADO_LAYER_HEAD(Layer, "LRN", BlobRules().Bottoms(1).Tops(1))
  CORTADO_LAYER_SETUP

 protected:
  CORTADO_LAYER_PASSES

 private:
  using M = math_t<Ftype>;
  int size_ = 5;
  bool within_ = false;
  double alpha_ = 1, beta_ = 0.75, k_ = 1;
  std::unique_ptr<Blob> scale_;  // s, in M
};

#ifdef CORTADO_USE_CUDA
namespace gpu {
/// Geometry and constants of an LRN launch. within: square window in each
/// channel, else across channels. norm = alpha / N.
struct LRNShape {
  int num, channels, height, width, size;
  bool within;
  double k, norm, beta;
};
/// scale[i] = k + norm * window sum of x^2; y[i] = x[i] * scale[i]^-beta.
template <typename T>
void lrn_forward(const LRNShape& s, const T* x, math_t<T>* scale, T* y, CUstream_st* stream);
/// dx[i] = dy[i] * scale[i]^-beta - 2 norm beta x[i] * window sum of dy y / scale.
template <typename T>
void lrn_backward(const LRNShape& s, const T* x, const T* y, const math_t<T>* scale, const T* dy, T* dx,
                  CUstream_st* stream);
}  // namespace gpu
#endif

}  // namespace cortado
