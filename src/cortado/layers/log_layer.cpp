#include "cortado/layers/log_layer.hpp"

#include <cmath>

namespace cortado {

void LogOp::Setup(const LayerBase& layer) {
  const LogParameter& p = layer.layer_param().log_param();
  const double base = p.base();
  if (!(base == -1.0 || (base > 0 && base != 1 && std::isfinite(base)))) {
    layer.field_error("log_param.base", "must be -1 (for e) or a finite positive number other than 1, got ", base);
  }
  if (!std::isfinite(p.scale())) layer.field_error("log_param.scale", "must be finite, got ", p.scale());
  if (!std::isfinite(p.shift())) layer.field_error("log_param.shift", "must be finite, got ", p.shift());
  base_scale = base == -1.0 ? 1.0 : 1.0 / std::log(base);
  scale = p.scale();
  shift = p.shift();
}

CORTADO_INSTANTIATE_ELEMENTWISE(LogOp);

}  // namespace cortado
