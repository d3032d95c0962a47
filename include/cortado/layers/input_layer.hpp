#pragma once
// Declares the net's inputs, as Caffe's InputLayer: the tops are blobs the
// caller fills (a deploy net's "data"); the layer computes nothing.
//
// input_param.shape (repeated BlobShape): none (the tops keep whatever shape
// the caller gives them), one shape for every top, or one per top; dimensions
// must be >= 0. Tops: any number >= 1, shaped once at setup; Reshape leaves
// them alone so the caller may reshape an input and then the net. Forward and
// Backward: nothing. Not in place.
// GPU: nothing to do either; the caller's values move to the device when a
// consumer asks for them.

#include <vector>

#include "cortado/config.hpp"
#include "cortado/layer.hpp"

namespace cortado {

template <typename Ftype, typename Btype>
class InputLayer : public Layer<Ftype, Btype> {
 public:
  CORTADO_LAYER_HEAD(Layer, "Input", BlobRules().Bottoms(0).MinTops(1).NoForcedBackward())
  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override {}

 protected:
  CORTADO_LAYER_EMPTY_PASSES
};

}  // namespace cortado
