#pragma once
// Clip (BVLC Caffe's): clamps every value into [min, max].
//
//   forward:  y = min(max(x, clip_min), clip_max)
//   backward: dx = dy where lo < y < hi, else 0, with lo and hi the bounds
//             as a clipped y holds them (rounded to Ftype, then read as
//             Btype)
//
// The gradient passes on the open interval, as ReLU's does for x > 0 and
// PyTorch's hardtanh (ReLU6) does (BVLC Caffe also passes it at x equal to a
// bound, a set of measure zero). Reading y instead of x gives the same
// answer (a clipped y equals a rounded bound, an unclipped one lies strictly
// between them; up to a y that Btype rounds onto a bound when it is coarser
// than Ftype), so the layer works in place, as ReLU6 usually is written.
// Bottoms: 1, any shape. Tops: 1, the bottom's shape.
// Fields: clip_param.min and clip_param.max (float, both required, finite,
// min <= max).
// In place: yes.
// Types: forward reads x, writes y as Ftype; backward reads dy and y as
// Btype, writes dx as Btype; comparisons in math_t.
// An elementwise op (elementwise_layer.hpp): the CPU loop is split over the
// cores; on the GPU one thread per element, identical results.

#include "cortado/layers/elementwise_layer.hpp"

namespace cortado {

struct ClipOp : ElementwiseOp {
  static constexpr const char* kType = "Clip";
  static constexpr ElementwiseReads kBackwardReads = ElementwiseReads::kY;
  static constexpr bool kInPlace = true;

  double min_value = 0, max_value = 0;  // the fields
  double bwd_lo = 0, bwd_hi = 0;          // the bounds as Btype reads a clipped y

  void Setup(const LayerBase& layer);
  template <typename Ftype, typename Btype>
  void SetTypes() {
    auto as_clipped = [](double bound) {
      const Ftype y = static_cast<Ftype>(static_cast<math_t<Ftype>>(bound));
      return static_cast<double>(static_cast<math_t<Btype>>(static_cast<Btype>(static_cast<math_t<Ftype>>(y))));
    };
    bwd_lo = as_clipped(min_value);
    bwd_hi = as_clipped(max_value);
  }
  // std::min(std::max(x, lo), hi), in std's order: a NaN x stays NaN.
  template <typename M>
  CORTADO_HD M forward(M x) const {
    const M lo = static_cast<M>(min_value), hi = static_cast<M>(max_value);
    const M a = x < lo ? lo : x;
    return hi < a ? hi : a;
  }
  template <typename M>
  CORTADO_HD M backward(M, M y, M dy) const {
    const M lo = static_cast<M>(bwd_lo), hi = static_cast<M>(bwd_hi);
    return lo < y && y < hi ? dy : M(0);
  }
};

template <typename Ftype, typename Btype>
using ClipLayer = ElementwiseLayer<Ftype, Btype, ClipOp>;
CORTADO_EXTERN_ELEMENTWISE(ClipOp);

}  // namespace cortado
