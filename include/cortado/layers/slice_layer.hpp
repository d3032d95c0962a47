#pragma once
// Slice: splits one bottom into several tops along one axis (inverse of Concat).
//
//   top_k = bottom[..., p_k : p_{k+1}, ...] along axis; backward copies each
//   top's diff back into its range of the bottom's diff.
//
// Bottoms: 1. Tops: 1 or more.
// Fields: slice_param.axis (default 1; negative counts from the end);
// slice_param.slice_dim (legacy, default 1; used when set; not together with
// axis); slice_param.slice_point (repeated; exactly num_tops - 1 strictly
// increasing points in (0, dim); when absent the axis is split into num_tops
// equal parts, which must divide it). In place: no.
// Types: pure copies in Ftype (forward) and Btype (backward).
// GPU: one strided device-to-device copy per top (cudaMemcpy2DAsync), both
// passes; no kernel of its own.

#include <vector>

#include "cortado/config.hpp"
#include "cortado/layer.hpp"

namespace cortado {

template <typename Ftype, typename Btype>
class SliceLayer : public Layer<Ftype, Btype> {
 public:
  CORTADO_LAYER_HEAD(Layer, "Slice", BlobRules().Bottoms(1).MinTops(1))
  CORTADO_LAYER_SETUP

 protected:
  CORTADO_LAYER_PASSES

 private:
  int axis_ = 1;
  std::vector<int> points_;  // slice_param.slice_point as given (may be empty)
  std::vector<int> sizes_;   // per top, along axis_
  int64_t outer_ = 0, inner_ = 0;
};

}  // namespace cortado
