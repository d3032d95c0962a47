#pragma once
// Log: y = log_base(shift + scale * x), elementwise (natural log when base = -1).
//
//   forward:  y = ln(shift + scale * x) * base_scale, base_scale = 1 / ln(base)
//             (1 for base -1)
//   backward: dx = dy * (scale * base_scale) / (shift + scale * x)
//
// Bottoms: 1, any shape. Tops: 1, the bottom's shape.
// Fields: log_param.base (float, default -1 meaning e; otherwise must be > 0
// and != 1), log_param.scale (float, default 1), log_param.shift (float,
// default 0); all finite.
// In place: no (the backward reads x): a field error on "top".
// Types: forward reads x, writes y as Ftype; backward reads dy and x as Btype,
// writes dx as Btype; arithmetic in math_t.
// An elementwise op (elementwise_layer.hpp): the CPU loop is split over the
// cores; on the GPU one thread per element, CUDA's logf/log in math_t and
// shift + scale * x rounded as on the CPU (no fused multiply-add).

#include "cortado/layers/elementwise_layer.hpp"

namespace cortado {

struct LogOp : ElementwiseOp {
  static constexpr const char* kType = "Log";
  static constexpr ElementwiseReads kBackwardReads = ElementwiseReads::kX;
  static constexpr bool kInPlace = false;

  double base_scale = 1, scale = 1, shift = 0;

  void Setup(const LayerBase& layer);
  template <typename M>
  CORTADO_HD M forward(M x) const {
    return hd::log(hd::add_rn(static_cast<M>(shift), hd::mul_rn(static_cast<M>(scale), x))) *
           static_cast<M>(base_scale);
  }
  template <typename M>
  CORTADO_HD M backward(M x, M, M dy) const {
    const M s = static_cast<M>(scale);
    return dy * (s * static_cast<M>(base_scale)) / hd::add_rn(static_cast<M>(shift), hd::mul_rn(s, x));
  }
};

template <typename Ftype, typename Btype>
using LogLayer = ElementwiseLayer<Ftype, Btype, LogOp>;
CORTADO_EXTERN_ELEMENTWISE(LogOp);

}  // namespace cortado
