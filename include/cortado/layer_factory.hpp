#pragma once
// Creates layers by their prototxt type string. The registry is one explicit,
// sorted table in layer_registry.cpp (no static constructors). The pair comes
// from param.forward_type()/backward_type(), which the Net fills from the
// net's defaults when the layer leaves them unset.

#include <memory>
#include <string>
#include <vector>

#include "cortado/layer.hpp"

namespace cortado {

/// Throws FieldError naming the layer and listing the known types if the type
/// is unknown, or if the (forward, backward) pair is not instantiated. `ctx`
/// (may be null: the CPU) lets a type pick its engine, e.g. cuDNN on a GPU.
std::unique_ptr<LayerBase> CreateLayer(const LayerParameter& param, const Context* ctx = nullptr);
std::vector<std::string> LayerTypes();
bool IsKnownLayerType(const std::string& type);

/// Used by layer_registry.cpp: makes L<F, B> for the param's pair.
template <template <typename, typename> class L>
std::unique_ptr<LayerBase> MakeLayer(const LayerParameter& p, const Context* = nullptr) {
  const Type f = p.forward_type(), b = p.backward_type();
  if (f == DOUBLE && b == DOUBLE) return std::make_unique<L<double, double>>(p);
  if (f == FLOAT && b == FLOAT) return std::make_unique<L<float, float>>(p);
  if (f == FLOAT && b == FLOAT16) return std::make_unique<L<float, float16>>(p);
  if (f == FLOAT16 && b == FLOAT) return std::make_unique<L<float16, float>>(p);
  if (f == FLOAT16 && b == FLOAT16) return std::make_unique<L<float16, float16>>(p);
  return nullptr;
}

}  // namespace cortado
