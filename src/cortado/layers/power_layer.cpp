#include "cortado/layers/power_layer.hpp"

#include <cmath>

namespace cortado {

void PowerOp::Setup(const LayerBase& layer) {
  const PowerParameter& p = layer.layer_param().power_param();
  if (!std::isfinite(p.power())) layer.field_error("power_param.power", "must be finite, got ", p.power());
  if (!std::isfinite(p.scale())) layer.field_error("power_param.scale", "must be finite, got ", p.scale());
  if (!std::isfinite(p.shift())) layer.field_error("power_param.shift", "must be finite, got ", p.shift());
  power = p.power();
  scale = p.scale();
  shift = p.shift();
}

CORTADO_INSTANTIATE_ELEMENTWISE(PowerOp);

}  // namespace cortado
