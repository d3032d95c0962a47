#pragma once
// Filter: keeps the items (rows along axis 0) whose selector is non-zero.
//
//   With S = the ascending list of i such that selector[i] != 0:
//   top_t[r, ...] = bottom_t[S[r], ...]                for r in [0, |S|);
//   dbottom_t[S[r], ...] = dtop_t[r, ...]; rows not in S get 0.
//   The selector gets no gradient: back-propagating to it is an error (as in
//   Caffe).
//
// Bottoms: K + 1 (K >= 1): K data blobs (N, ...), then the selector, shape
// (N) or (N, 1, ...) (every axis after the first 1), values read as float.
// Every data bottom must have the selector's N. Tops: K, top_t (|S|, ...)
// with bottom_t's other axes. No fields. In place: no.
//
// Shapes: the tops' first axis depends on the selector's values, so Reshape
// (which every Forward calls) reads the selector on the host; on a GPU that
// waits for the stream (as Caffe's Filter does). Exception, as in Caffe: the
// Reshape of SetUp gives the tops the full N, because a selector is not
// meaningful before the net's first forward.
// No item selected: the tops get shape (0, ...) (a valid, empty blob; Caffe
// errors here). Backward then writes zeros into every data diff. Layers
// after it must accept an empty batch (a loss normalized by the batch size
// divides by zero).
//
// Types: pure copies, forward in Ftype and backward in Btype.
// GPU: the row gather of BatchReindex (RowGather, batch_reindex_layer.cu):
// forward one thread per top element, backward one thread per bottom element
// (its row's top row or 0). The selected rows are uploaded once per Forward
// with one asynchronous copy.

#include <vector>

#include "cortado/config.hpp"
#include "cortado/layer.hpp"
#include "cortado/layers/batch_reindex_layer.hpp"

namespace cortado {

template <typename Ftype, typename Btype>
class FilterLayer : public Layer<Ftype, Btype> {
 public:
  // force_backward does not reach the selector, the last bottom.
  CORTADO_LAYER_HEAD(Layer, "Filter",
                     BlobRules().MinBottoms(2).MinTops(1).NoForcedBackwardTo(this->layer_param().bottom_size() - 1))

  CORTADO_LAYER_SETUP

 protected:
  CORTADO_LAYER_PASSES

 private:
  /// Throws if propagate_down asks for the selector.
  void CheckPropagate(const std::vector<bool>& propagate_down, size_t num_bottoms) const;

  bool setup_reshape_ = false;  // the next Reshape is SetUp's: full N
  RowGather gather_;            // the selected rows
};

}  // namespace cortado
