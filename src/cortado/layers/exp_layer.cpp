#include "cortado/layers/exp_layer.hpp"

#include <cmath>

namespace cortado {

void ExpOp::Setup(const LayerBase& layer) {
  const ExpParameter& p = layer.layer_param().exp_param();
  const double base = p.base();
  if (!(base == -1.0 || (base > 0 && std::isfinite(base)))) {
    layer.field_error("exp_param.base", "must be -1 (for e) or a finite positive number, got ", base);
  }
  if (!std::isfinite(p.scale())) layer.field_error("exp_param.scale", "must be finite, got ", p.scale());
  if (!std::isfinite(p.shift())) layer.field_error("exp_param.shift", "must be finite, got ", p.shift());
  const double log_base = base == -1.0 ? 1.0 : std::log(base);
  inner_scale = log_base * p.scale();
  outer_scale = p.shift() == 0 ? 1.0 : (base == -1.0 ? std::exp(double(p.shift())) : std::pow(base, double(p.shift())));
}

CORTADO_INSTANTIATE_ELEMENTWISE(ExpOp);

}  // namespace cortado
