#pragma once
// Concat: joins bottoms along one axis.
//
//   top = [bottom_0, bottom_1, ...] along axis; backward slices dtop back
//   into each bottom's diff (where propagate_down).
//
// Bottoms: 1 or more, same number of axes and equal dimensions except on
// `axis`. Tops: 1, with the sum of the bottoms' `axis` dimensions.
// Fields: concat_param.axis (default 1; negative counts from the end);
// concat_param.concat_dim (legacy, default 1; used when axis is unset; not
// both). In place: no.
// Types: pure copies in Ftype (forward) and Btype (backward).
// GPU: each bottom is one strided device-to-device copy (cudaMemcpy2DAsync:
// outer rows of the bottom's slice into the top's rows), forward and
// backward; no kernel of its own.

#include "cortado/config.hpp"
#include "cortado/layer.hpp"

namespace cortado {

template <typename Ftype, typename Btype>
class ConcatLayer : public Layer<Ftype, Btype> {
 public:
  CORTADO_LAYER_HEAD(Layer, "Concat", BlobRules().MinBottoms(1).Tops(1))
  CORTADO_LAYER_SETUP

 protected:
  CORTADO_LAYER_PASSES

 private:
  int axis_ = 1;
  int64_t outer_ = 0, inner_ = 0;
};

}  // namespace cortado
