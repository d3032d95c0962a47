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
#define CORTADO_MAKE_PAIR_(L, F, B) \
  if (f == type_of<F>() && b == type_of<B>()) return std::make_unique<L<F, B>>(p);
  CORTADO_FOR_EACH_PAIR(CORTADO_MAKE_PAIR_, L)
#undef CORTADO_MAKE_PAIR_
  return nullptr;
}

}  // namespace cortado
