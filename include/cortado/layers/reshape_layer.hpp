#pragma once
// Reshape: gives the bottom a new shape without touching its values.
//
// Axes [axis, axis + num_axes) of the bottom are replaced by reshape_param.shape:
//   a dimension 0 copies the bottom's dimension at the same position
//   (bottom axis `axis + i`, which must exist); a dimension -1 (at most one) is inferred so that
//   the count is unchanged. Axes outside the range are kept.
// The top shares the bottom's data and diff (Blob::ShareData/ShareDiff).
// Bottoms: 1. Tops: 1.
// Fields:
//   reshape_param.shape (required): dims, each -1, 0 or positive
//   reshape_param.axis (default 0): first replaced axis; negative counts from
//     the end, with -1 meaning "after the last axis"
//   reshape_param.num_axes (default -1 = all axes from `axis` on); >= -1
// Errors: a count that does not match, a -1 that cannot divide, a 0 with no
// bottom axis to copy, an axis or num_axes out of range.
// In place: no.
// GPU: nothing to do either (the shared buffers move on their own), so the
// GPU path is the same no-op.

#include <vector>

#include "cortado/config.hpp"
#include "cortado/layer.hpp"

namespace cortado {

template <typename Ftype, typename Btype>
class ReshapeLayer : public Layer<Ftype, Btype> {
 public:
  CORTADO_LAYER_HEAD(Layer, "Reshape", BlobRules().Bottoms(1).Tops(1))
  CORTADO_LAYER_SETUP

 protected:
  CORTADO_LAYER_EMPTY_PASSES

 private:
  std::vector<int> copy_axes_;  // positions in shape that are 0
  int inferred_axis_ = -1;      // position in shape that is -1, or -1
};

}  // namespace cortado
