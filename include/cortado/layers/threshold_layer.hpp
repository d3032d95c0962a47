#pragma once
// Threshold: y = x > threshold ? 1 : 0, elementwise.
//
// Bottoms: 1, any shape. Tops: 1, the bottom's shape.
// Fields: threshold_param.threshold (float, default 0, finite).
// In place: yes.
// No backward, as in Caffe: the step has no useful gradient. Backward with
// propagate_down false does nothing; with propagate_down true it throws
// (Caffe's NOT_IMPLEMENTED); force_backward does not apply.
// Types: reads x and writes y as Ftype; the comparison is in math_t.
// An elementwise op without a backward (elementwise_layer.hpp): the CPU loop
// is split over the cores; on the GPU one thread per element, identical
// results.

#include "cortado/layers/elementwise_layer.hpp"

namespace cortado {

struct ThresholdOp : ElementwiseOp {
  static constexpr const char* kType = "Threshold";
  static constexpr ElementwiseReads kBackwardReads = ElementwiseReads::kNone;
  static constexpr bool kInPlace = true;

  double threshold = 0;

  void Setup(const LayerBase& layer);
  template <typename M>
  CORTADO_HD M forward(M x) const {
    return x > static_cast<M>(threshold) ? M(1) : M(0);
  }
};

template <typename Ftype, typename Btype>
using ThresholdLayer = ElementwiseLayer<Ftype, Btype, ThresholdOp>;
CORTADO_EXTERN_ELEMENTWISE(ThresholdOp);

}  // namespace cortado
