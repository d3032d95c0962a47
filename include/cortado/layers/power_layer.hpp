#pragma once
// Power: y = (shift + scale * x) ^ power, elementwise.
//
//   forward:  y = (shift + scale * x) ^ power   (shift ^ power for any x when scale = 0)
//   backward: dx = power * scale * (shift + scale * x) ^ (power - 1) * dy
//             (dx = 0 when power * scale == 0; dx = power * scale * dy when power == 1)
//
// Bottoms: 1, any shape. Tops: 1, the bottom's shape.
// Fields: power_param.power (float, default 1), power_param.scale (float,
// default 1), power_param.shift (float, default 0); all must be finite.
// In place: only when the backward needs no x (power 1, or power * scale 0);
// otherwise a field error on "top".
// Types: forward reads x and writes y as Ftype; backward reads dy and x as
// Btype and writes dx as Btype; arithmetic and pow in math_t.
// An elementwise op (elementwise_layer.hpp): the CPU loop is split over the
// cores; on the GPU one thread per element, CUDA's powf/pow in math_t and
// shift + scale * x rounded as on the CPU (no fused multiply-add: near
// shift = -scale * x a fused one would differ by far more than an ulp).

#include "cortado/layers/elementwise_layer.hpp"

namespace cortado {

struct PowerOp : ElementwiseOp {
  static constexpr const char* kType = "Power";
  static constexpr ElementwiseReads kBackwardReads = ElementwiseReads::kX;
  static constexpr bool kInPlace = false;

  double power = 1, scale = 1, shift = 0;

  void Setup(const LayerBase& layer);
  /// A scaling (power 1) or a constant (power * scale 0) may run in place.
  bool backward_ignores_x() const { return power == 1 || power * scale == 0; }

  // scale 0 gives the constant shift^power whatever x holds (Inf or NaN
  // included), as Caffe does.
  template <typename M>
  CORTADO_HD M forward(M x) const {
    const M p = static_cast<M>(power), s = static_cast<M>(scale), t = static_cast<M>(shift);
    const M b = s == M(0) ? t : hd::add_rn(t, hd::mul_rn(s, x));
    return p == M(1) ? b : hd::pow(b, p);
  }
  template <typename M>
  CORTADO_HD M backward(M x, M, M dy) const {
    const M p = static_cast<M>(power), s = static_cast<M>(scale), t = static_cast<M>(shift);
    const M diff_scale = p * s;
    if (diff_scale == M(0)) return M(0);
    if (p == M(1)) return diff_scale * dy;
    const M b = hd::add_rn(t, hd::mul_rn(s, x));
    return diff_scale * (p == M(2) ? b : hd::pow(b, p - M(1))) * dy;
  }
};

template <typename Ftype, typename Btype>
using PowerLayer = ElementwiseLayer<Ftype, Btype, PowerOp>;
CORTADO_EXTERN_ELEMENTWISE(PowerOp);

}  // namespace cortado
