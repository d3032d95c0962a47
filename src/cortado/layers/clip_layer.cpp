#include "cortado/layers/clip_layer.hpp"

#include <cmath>

namespace cortado {

void ClipOp::Setup(const LayerBase& layer) {
  const ClipParameter& p = layer.layer_param().clip_param();
  if (!p.has_min()) layer.field_error("clip_param.min", "is required");
  if (!p.has_max()) layer.field_error("clip_param.max", "is required");
  if (!std::isfinite(p.min())) layer.field_error("clip_param.min", "must be finite, got ", p.min());
  if (!std::isfinite(p.max())) layer.field_error("clip_param.max", "must be finite, got ", p.max());
  if (p.min() > p.max()) layer.field_error("clip_param.max", "= ", p.max(), " is below clip_param.min = ", p.min());
  min_value = p.min();
  max_value = p.max();
}

CORTADO_INSTANTIATE_ELEMENTWISE(ClipOp);

}  // namespace cortado
