#pragma once
// Sigmoid: elementwise logistic sigmoid.
//
//   forward:  y = 1 / (1 + exp(-x))   (exp overflows for very negative x only
//             to give 1/Inf = 0, the right limit, so no branch is needed)
//   backward: dx = dy * y * (1 - y)   (from the output, so in place is allowed)
//
// Bottoms: 1, any shape. Tops: 1, the bottom's shape.
// Fields: sigmoid_param.engine is accepted and ignored.
// In place: yes.
// Types: forward reads x and writes y as Ftype (exp evaluated in math_t);
// backward reads dy and y as Btype and writes dx as Btype.
// An elementwise op (elementwise_layer.hpp): the CPU loop is split over the
// cores; on the GPU one thread per element with CUDA's expf/exp in math_t,
// within 2 ulps of the host library before rounding to the storage type.

#include "cortado/layers/elementwise_layer.hpp"

namespace cortado {

struct SigmoidOp : ElementwiseOp {
  static constexpr const char* kType = "Sigmoid";
  static constexpr ElementwiseReads kBackwardReads = ElementwiseReads::kY;
  static constexpr bool kInPlace = true;

  template <typename M>
  CORTADO_HD M forward(M x) const {
    return M(1) / (M(1) + hd::exp(-x));
  }
  template <typename M>
  CORTADO_HD M backward(M, M y, M dy) const {
    return dy * y * (M(1) - y);
  }
};

template <typename Ftype, typename Btype>
using SigmoidLayer = ElementwiseLayer<Ftype, Btype, SigmoidOp>;
CORTADO_EXTERN_ELEMENTWISE(SigmoidOp);

}  // namespace cortado
