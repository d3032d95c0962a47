#pragma once
// ReLU: rectified linear unit, optionally leaky.
//
//   forward:  y = x > 0 ? x : negative_slope * x
//   backward: dx = x > 0 ? dy : negative_slope * dy
//
// Bottoms: 1, any shape. Tops: 1, the bottom's shape.
// Fields: relu_param.negative_slope (float, default 0, finite);
// relu_param.engine is accepted and ignored.
// In place: yes. Backward then tests the output's sign instead of the input's,
// which is the same test for negative_slope >= 0.
// Fusion: with negative_slope 0 and in place on the top of a BatchNorm (after
// its Scale) or an Eltwise SUM, the Net may fold it into that layer's pass
// (layer_fusion.hpp); it then does nothing itself.
// Types: forward reads x and writes y as Ftype; backward reads dy and x as
// Btype and writes dx as Btype; arithmetic in math_t.
// An elementwise op (elementwise_layer.hpp): the CPU loop is split over the
// cores; on the GPU one thread per element, the same expression, so GPU and
// CPU results are identical.

#include "cortado/layers/elementwise_layer.hpp"

namespace cortado {

struct ReLUOp : ElementwiseOp {
  static constexpr const char* kType = "ReLU";
  static constexpr ElementwiseReads kBackwardReads = ElementwiseReads::kX;
  static constexpr bool kInPlace = true;

  double negative_slope = 0;

  void Setup(const LayerBase& layer);
  /// Foldable into the pass of the layer before it (layer_fusion.hpp) only
  /// without a slope.
  FusionRole fusion_role() const { return negative_slope == 0 ? FusionRole::kReLU : FusionRole::kNone; }
  // The slope is converted outside the choice, so that the loops convert it once.
  template <typename M>
  CORTADO_HD M forward(M x) const {
    const M slope = static_cast<M>(negative_slope);
    return x > M(0) ? x : slope * x;
  }
  template <typename M>
  CORTADO_HD M backward(M x, M, M dy) const {
    const M slope = static_cast<M>(negative_slope);
    return x > M(0) ? dy : slope * dy;
  }
};

template <typename Ftype, typename Btype>
using ReLULayer = ElementwiseLayer<Ftype, Btype, ReLUOp>;
CORTADO_EXTERN_ELEMENTWISE(ReLUOp);

}  // namespace cortado
