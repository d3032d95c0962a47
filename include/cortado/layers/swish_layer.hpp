#pragma once
// Swish (BVLC Caffe's; SiLU when beta = 1).
//
//   forward:  s = sigmoid(beta * x), y = x * s
//   backward: dx = dy * (beta * y + s * (1 - beta * y))
//
// The backward reads y and the saved s, not x, so the layer works in place
// (as Caffe's does); s is kept in Btype, one value per element.
// Bottoms: 1, any shape. Tops: 1, the bottom's shape.
// Fields: swish_param.beta (float, default 1, finite).
// In place: yes.
// Types: forward reads x as Ftype, writes y as Ftype and s as Btype;
// backward reads dy, y and s as Btype, writes dx as Btype; arithmetic in
// math_t (exp included).
// Not of the elementwise family (elementwise_layer.hpp): its forward writes
// a second output, s, that the backward reads; it is written the same way:
// the CPU loops are split over the cores, and on the GPU one thread per
// element (swish_layer.cu), CUDA's expf/exp in math_t.

#include "cortado/config.hpp"
#include "cortado/layer.hpp"

namespace cortado {

template <typename Ftype, typename Btype>
class SwishLayer : public Layer<Ftype, Btype> {
 public:
  CORTADO_LAYER_HEAD(Layer, "Swish", BlobRules().Bottoms(1).Tops(1))
  CORTADO_LAYER_SETUP

 protected:
  CORTADO_LAYER_PASSES

 private:
  double beta_ = 1;
  Blob sigmoid_{type_of<Btype>()};  // s, the bottom's shape
};

#ifdef CORTADO_USE_CUDA
namespace gpu {
/// s[i] = sigmoid(beta * x[i]), y[i] = x[i] * s[i]; x and y may alias.
template <typename F, typename B>
void swish_forward(int64_t n, const F* x, F* y, B* s, double beta, CUstream_st* stream);
/// dx[i] = dy[i] * (beta * y[i] + s[i] * (1 - beta * y[i])); dx may alias dy.
template <typename T>
void swish_backward(int64_t n, const T* dy, const T* y, const T* s, T* dx, double beta, CUstream_st* stream);
}  // namespace gpu
#endif

}  // namespace cortado
