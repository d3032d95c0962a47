#pragma once
// Exp: y = base ^ (shift + scale * x), elementwise (base e when base = -1).
//
//   forward:  y = outer * exp(inner * x), inner = scale * ln(base),
//             outer = base ^ shift   (ln(base) = 1 and outer = e^shift for base -1)
//   backward: dx = dy * inner * y   (from the output, so in place is allowed)
//
// Bottoms: 1, any shape. Tops: 1, the bottom's shape.
// Fields: exp_param.base (float, default -1 meaning e; otherwise must be > 0),
// exp_param.scale (float, default 1), exp_param.shift (float, default 0);
// all finite.
// In place: yes.
// Types: forward reads x, writes y as Ftype; backward reads dy and y as Btype,
// writes dx as Btype; arithmetic in math_t (inner/outer computed in double
// and rounded to math_t once).
// An elementwise op (elementwise_layer.hpp): the CPU loop is split over the
// cores; on the GPU one thread per element, CUDA's expf/exp in math_t.

#include "cortado/layers/elementwise_layer.hpp"

namespace cortado {

struct ExpOp : ElementwiseOp {
  static constexpr const char* kType = "Exp";
  static constexpr ElementwiseReads kBackwardReads = ElementwiseReads::kY;
  static constexpr bool kInPlace = true;

  double inner_scale = 1, outer_scale = 1;

  void Setup(const LayerBase& layer);
  template <typename M>
  CORTADO_HD M forward(M x) const {
    return static_cast<M>(outer_scale) * hd::exp(static_cast<M>(inner_scale) * x);
  }
  template <typename M>
  CORTADO_HD M backward(M, M y, M dy) const {
    return dy * static_cast<M>(inner_scale) * y;
  }
};

template <typename Ftype, typename Btype>
using ExpLayer = ElementwiseLayer<Ftype, Btype, ExpOp>;
CORTADO_EXTERN_ELEMENTWISE(ExpOp);

}  // namespace cortado
