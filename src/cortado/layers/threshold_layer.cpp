#include "cortado/layers/threshold_layer.hpp"

#include <cmath>

namespace cortado {

void ThresholdOp::Setup(const LayerBase& layer) {
  const float t = layer.layer_param().threshold_param().threshold();
  if (!std::isfinite(t)) layer.field_error("threshold_param.threshold", "must be finite, got ", t);
  threshold = t;
}

CORTADO_INSTANTIATE_ELEMENTWISE(ThresholdOp);

}  // namespace cortado
