#pragma once
// Flatten: merges axes [axis, end_axis] into one.
//
//   (d0, ..., d_{a-1}, d_a, ..., d_e, d_{e+1}, ...) -> (d0, ..., d_{a-1}, d_a * ... * d_e, d_{e+1}, ...)
//
// The top shares the bottom's data and diff (Blob::ShareData/ShareDiff):
// forward and backward copy nothing.
// Bottoms: 1. Tops: 1.
// Fields: flatten_param.axis (default 1), flatten_param.end_axis (default -1);
// negative values count from the end; axis <= end_axis after that.
// In place: no.
// GPU: nothing to do either (the shared buffers move on their own), so the
// GPU path is the same no-op.

#include "cortado/config.hpp"
#include "cortado/layer.hpp"

namespace cortado {

template <typename Ftype, typename Btype>
class FlattenLayer : public Layer<Ftype, Btype> {
 public:
  CORTADO_LAYER_HEAD(Layer, "Flatten", BlobRules().Bottoms(1).Tops(1))
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;

 protected:
  CORTADO_LAYER_EMPTY_PASSES
};

}  // namespace cortado
