#pragma once
// ELU: exponential linear unit.
//
//   forward:  y = lambda * (x > 0 ? x : alpha * (exp(x) - 1))   (expm1 in math_t)
//   backward: dx = x > 0 ? dy * lambda : dy * (y + lambda * alpha)
//             (the exact derivative: lambda * alpha * exp(x) = y + lambda * alpha
//             for x <= 0. NVCaffe multiplies its lambda = 1 formula by lambda,
//             lambda * (alpha + y), which is exact only for lambda = 1.)
//
// Bottoms: 1, any shape. Tops: 1, the bottom's shape.
// Fields: elu_param.alpha (float, default 1, finite);
//   elu_param.lambda (float, default 1, finite and > 0; NVCaffe's scale:
//   alpha 1.6733 and lambda 1.0507 make SELU).
// In place: yes. The backward then tests the output's sign instead of the
// input's, the same test for alpha >= 0 (as in Caffe).
// Types: forward reads x, writes y as Ftype; backward reads dy, x and y as
// Btype, writes dx as Btype; arithmetic in math_t (lambda * alpha computed in
// double and rounded to math_t once).
// An elementwise op (elementwise_layer.hpp): the CPU loop is split over the
// cores; on the GPU one thread per element, CUDA's expm1f/expm1 in math_t.

#include "cortado/layers/elementwise_layer.hpp"

namespace cortado {

struct ELUOp : ElementwiseOp {
  static constexpr const char* kType = "ELU";
  static constexpr ElementwiseReads kBackwardReads = ElementwiseReads::kXY;
  static constexpr bool kInPlace = true;

  double alpha = 1, lambda = 1;

  void Setup(const LayerBase& layer);
  template <typename M>
  CORTADO_HD M forward(M x) const {
    const M l = static_cast<M>(lambda), a = static_cast<M>(alpha);
    return l * (x > M(0) ? x : a * hd::expm1(x));
  }
  template <typename M>
  CORTADO_HD M backward(M x, M y, M dy) const {
    const M l = static_cast<M>(lambda), la = static_cast<M>(lambda * alpha);
    return x > M(0) ? dy * l : dy * (y + la);
  }
};

template <typename Ftype, typename Btype>
using ELULayer = ElementwiseLayer<Ftype, Btype, ELUOp>;
CORTADO_EXTERN_ELEMENTWISE(ELUOp);

}  // namespace cortado
