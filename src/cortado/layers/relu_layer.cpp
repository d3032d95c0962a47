#include "cortado/layers/relu_layer.hpp"

#include <cmath>

namespace cortado {

void ReLUOp::Setup(const LayerBase& layer) {
  const float slope = layer.layer_param().relu_param().negative_slope();
  if (!std::isfinite(slope)) layer.field_error("relu_param.negative_slope", "must be finite, got ", slope);
  negative_slope = slope;
}

CORTADO_INSTANTIATE_ELEMENTWISE(ReLUOp);

}  // namespace cortado
