#pragma once
// PReLU: parametric ReLU with learnable negative slopes.
//
//   forward:  y = x > 0 ? x : a_c * x   (c the channel, axis 1; a single a for
//             all channels when channel_shared)
//   backward: dx = dy * (x > 0 ? 1 : a_c)
//             da_c += sum over elements of channel c of dy * x * (x <= 0)
//
// Bottoms: 1, at least 2 axes (N, C, ...). Tops: 1, the bottom's shape.
// Parameters: blobs_[0], the slopes: shape {C}, or shape {} (one value) when
// channel_shared; stored in Ftype.
// Fields: prelu_param.filler (FillerParameter, default constant 0.25),
// prelu_param.channel_shared (bool, default false).
// In place: yes, as in Caffe: the forward then keeps a copy of x (in Ftype)
// for the backward.
// Types: forward reads x and a, writes y as Ftype; backward reads dy, x and a
// as Btype, writes dx as Btype and accumulates da in Btype; the per-channel
// sums for da are accumulated in float (double for double).
// GPU: prelu_layer.cu: one thread per element for y and dx; the slope
// gradient uses one block per slope, each reducing its elements in shared
// memory in math_t and adding once to da.

#include "cortado/config.hpp"
#include "cortado/layer.hpp"

namespace cortado {

template <typename Ftype, typename Btype>
class PReLULayer : public Layer<Ftype, Btype> {
 public:
  CORTADO_LAYER_HEAD(Layer, "PReLU", BlobRules().Bottoms(1).Tops(1))
  CORTADO_LAYER_SETUP

 protected:
  CORTADO_LAYER_PASSES

 private:
  bool channel_shared_ = false;
  int channels_ = 1;
  std::unique_ptr<Blob> bottom_memory_;  // copy of x when run in place
};

#ifdef CORTADO_USE_CUDA
namespace gpu {
/// y[i] = x[i] > 0 ? x[i] : a[c] * x[i], c = (i / dim) % channels / div
/// (div = channels when shared, else 1); x and y may alias.
template <typename T>
void prelu_forward(int64_t n, int channels, int64_t dim, int div, const T* x, const T* a, T* y, CUstream_st* stream);
/// dx[i] = dy[i] * (x[i] > 0 ? 1 : a[c]); dx may alias dy.
template <typename T>
void prelu_backward(int64_t n, int channels, int64_t dim, int div, const T* dy, const T* x, const T* a, T* dx,
                    CUstream_st* stream);
/// da[c] += sum of dy * x * (x <= 0) over the elements of slope c
/// (num_slopes = 1 for shared slopes, else channels).
template <typename T>
void prelu_param_backward(int64_t n, int channels, int64_t dim, int num_slopes, const T* dy, const T* x, T* da,
                          CUstream_st* stream);
}  // namespace gpu
#endif

}  // namespace cortado
