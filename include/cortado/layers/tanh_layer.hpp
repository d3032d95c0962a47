#pragma once
// TanH: elementwise tanh.
//
//   forward:  y = tanh(x)
//   backward: dx = dy * (1 - y^2)   (from the output, so in place is allowed)
//
// Bottoms: 1, any shape. Tops: 1, the bottom's shape.
// Fields: tanh_param.engine is accepted and ignored.
// In place: yes.
// Types: forward reads x and writes y as Ftype (tanh evaluated in math_t);
// backward reads dy and y as Btype and writes dx as Btype.
// An elementwise op (elementwise_layer.hpp): the CPU loop is split over the
// cores; on the GPU one thread per element with CUDA's tanhf/tanh in math_t,
// within 2 ulps of the host library before rounding to the storage type.

#include "cortado/layers/elementwise_layer.hpp"

namespace cortado {

struct TanHOp : ElementwiseOp {
  static constexpr const char* kType = "TanH";
  static constexpr ElementwiseReads kBackwardReads = ElementwiseReads::kY;
  static constexpr bool kInPlace = true;

  template <typename M>
  CORTADO_HD M forward(M x) const {
    return hd::tanh(x);
  }
  template <typename M>
  CORTADO_HD M backward(M, M y, M dy) const {
    return dy * (M(1) - y * y);
  }
};

template <typename Ftype, typename Btype>
using TanHLayer = ElementwiseLayer<Ftype, Btype, TanHOp>;
CORTADO_EXTERN_ELEMENTWISE(TanHOp);

}  // namespace cortado
