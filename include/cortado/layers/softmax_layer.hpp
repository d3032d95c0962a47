#pragma once
// Softmax over one axis.
//
//   forward:  y_c = exp(x_c - max_k x_k) / sum_k exp(x_k - max_k x_k)
//   backward: dx_c = y_c * (dy_c - sum_k dy_k * y_k)
//
// The bottom is viewed as (outer, C, inner) around `axis`; every (outer,
// inner) column is normalized on its own.
// Bottoms: 1, at least axis+1 axes. Tops: 1, the bottom's shape.
// Fields: softmax_param.axis (default 1; negative counts from the end);
// softmax_param.engine is accepted and ignored on the CPU.
// In place: yes.
// Types: forward reads x as Ftype, computes max, exp and the sum in math_t
// (float for float16) and rounds once on the store; backward reads dy and y as
// Btype and computes the dot product in math_t.
// GPU (softmax_layer.cu): with inner == 1 one warp per row, otherwise one
// thread per (outer, inner) column; max, exp and sum in math_t as on the
// CPU. The sum's order and CUDA's expf differ from the host's, so GPU and
// CPU agree to a few ulps of math_t before rounding to the storage type.

#include <algorithm>
#include <cmath>
#include <vector>

#include "cortado/config.hpp"
#include "cortado/layer.hpp"

namespace cortado {

/// Softmax of one (outer, inner) column, computed in M with the maximum
/// subtracted: y[c * stride] for c < channels. Shared with SoftmaxWithLoss
/// (which keeps its probabilities in M). The column is read entirely before
/// any store, so x and y may alias.
template <typename In, typename M, typename Out>
void softmax_column(const In* x, int channels, int stride, M* scratch, Out* y) {
  M mx = static_cast<M>(x[0]);
  for (int c = 1; c < channels; ++c) mx = std::max(mx, static_cast<M>(x[c * stride]));
  M sum = 0;
  for (int c = 0; c < channels; ++c) {
    scratch[c] = std::exp(static_cast<M>(x[c * stride]) - mx);
    sum += scratch[c];
  }
  for (int c = 0; c < channels; ++c) y[c * stride] = static_cast<Out>(scratch[c] / sum);
}

template <typename Ftype, typename Btype>
class SoftmaxLayer : public Layer<Ftype, Btype> {
 public:
  CORTADO_LAYER_HEAD(Layer, "Softmax", BlobRules().Bottoms(1).Tops(1))
  CORTADO_LAYER_SETUP

 protected:
  CORTADO_LAYER_PASSES

 private:
  int axis_ = 1;
  int outer_ = 0, channels_ = 0, inner_ = 0;
  std::vector<math_t<Ftype>> scratch_;  // (C) one column in math_t
};

#ifdef CORTADO_USE_CUDA
namespace gpu {
/// y = softmax(x) over `channels` for every (outer, inner) column, device
/// pointers, computed in math_t<In> (float for the 16-bit types); x and y may
/// alias. Instantiated for (double, double), (float, float), (float16,
/// float16), (bfloat16, bfloat16), and (float16, float) and (bfloat16, float)
/// (SoftmaxWithLoss keeps float probabilities).
template <typename In, typename Out>
void softmax_forward(int outer, int channels, int inner, const In* x, Out* y, CUstream_st* stream);
/// dx = y * (dy - sum_c dy_c * y_c) per column, in math_t<T>; dx may alias dy.
template <typename T>
void softmax_backward(int outer, int channels, int inner, const T* y, const T* dy, T* dx, CUstream_st* stream);
}  // namespace gpu
#endif

}  // namespace cortado
