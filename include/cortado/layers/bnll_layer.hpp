#pragma once
// BNLL: binomial normal log likelihood, softplus y = ln(1 + e^x).
//
//   forward:  y = x > 0 ? x + log1p(exp(-x)) : log1p(exp(x))   (no overflow)
//   backward: dx = dy * e / (e + 1), e = exp(min(x, 50))       (sigmoid of x)
//
// Bottoms: 1, any shape. Tops: 1, the bottom's shape.
// Fields: none.
// In place: no (the backward reads x): a field error on "top".
// Types: forward reads x, writes y as Ftype; backward reads dy and x as Btype,
// writes dx as Btype; arithmetic in math_t.
// An elementwise op (elementwise_layer.hpp): the CPU loop is split over the
// cores; on the GPU one thread per element, CUDA's expf/log1pf in math_t.

#include "cortado/layers/elementwise_layer.hpp"

namespace cortado {

struct BNLLOp : ElementwiseOp {
  static constexpr const char* kType = "BNLL";
  static constexpr ElementwiseReads kBackwardReads = ElementwiseReads::kX;
  static constexpr bool kInPlace = false;

  template <typename M>
  CORTADO_HD M forward(M x) const {
    return x > M(0) ? x + hd::log1p(hd::exp(-x)) : hd::log1p(hd::exp(x));
  }
  // std::min(x, 50)'s order: a NaN x stays NaN.
  template <typename M>
  CORTADO_HD M backward(M x, M, M dy) const {
    const M e = hd::exp(M(50) < x ? M(50) : x);
    return dy * e / (e + M(1));
  }
};

template <typename Ftype, typename Btype>
using BNLLLayer = ElementwiseLayer<Ftype, Btype, BNLLOp>;
CORTADO_EXTERN_ELEMENTWISE(BNLLOp);

}  // namespace cortado
