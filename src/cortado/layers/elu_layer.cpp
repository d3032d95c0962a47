#include "cortado/layers/elu_layer.hpp"

#include <cmath>

namespace cortado {

void ELUOp::Setup(const LayerBase& layer) {
  const float a = layer.layer_param().elu_param().alpha();
  if (!std::isfinite(a)) layer.field_error("elu_param.alpha", "must be finite, got ", a);
  alpha = a;
  const float l = layer.layer_param().elu_param().lambda();
  if (!(std::isfinite(l) && l > 0.f)) layer.field_error("elu_param.lambda", "must be positive and finite, got ", l);
  lambda = l;
}

CORTADO_INSTANTIATE_ELEMENTWISE(ELUOp);

}  // namespace cortado
