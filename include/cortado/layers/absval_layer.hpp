#pragma once
// AbsVal: y = |x|, elementwise.
//
//   forward:  y = |x|
//   backward: dx = dy * sign(x)   (sign(0) = 0)
//
// Bottoms: 1, any shape. Tops: 1, the bottom's shape.
// Fields: none.
// In place: no (as in Caffe; the backward needs the sign of x, which y has
// lost): an in-place top is a field error on "top".
// Types: forward reads x, writes y as Ftype; backward reads dy and x as Btype,
// writes dx as Btype. Exact in every type.
// An elementwise op (elementwise_layer.hpp): the CPU loop is split over the
// cores; on the GPU one thread per element, identical results.

#include "cortado/layers/elementwise_layer.hpp"

namespace cortado {

struct AbsValOp : ElementwiseOp {
  static constexpr const char* kType = "AbsVal";
  static constexpr ElementwiseReads kBackwardReads = ElementwiseReads::kX;
  static constexpr bool kInPlace = false;

  // std::fabs: +0 for -0, a NaN's sign cleared.
  template <typename M>
  CORTADO_HD M forward(M x) const {
    return hd::fabs(x);
  }
  template <typename M>
  CORTADO_HD M backward(M x, M, M dy) const {
    const M s = x > M(0) ? M(1) : (x < M(0) ? M(-1) : M(0));
    return s * dy;
  }
};

template <typename Ftype, typename Btype>
using AbsValLayer = ElementwiseLayer<Ftype, Btype, AbsValOp>;
CORTADO_EXTERN_ELEMENTWISE(AbsValOp);

}  // namespace cortado
