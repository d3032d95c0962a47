#pragma once
// Parameter: exposes one learnable blob as a top.
//
//   top = W;  dW += dtop  (accumulated, like every parameter diff).
//
// Bottoms: 0. Tops: 1, of W's shape. Params: W (blobs_[0]), of
// parameter_param.shape, zero unless loaded or shared (Caffe gives it no
// filler; a net that needs other initial values loads them).
// Fields: parameter_param.shape (required; every dim >= 0). A loaded or shared
// blob must have that shape. In place: no.
//
// Unlike Caffe, which makes the top share W's data and diff (so the top diff
// overwrites W's diff and gradients are not accumulated across iter_size
// passes), forward copies W into the top and backward adds the top diff to
// W's diff.
// Types: forward copies in Ftype; backward adds in math_t<Btype> (float for
// float16 and bfloat16) and rounds once into the Btype diff.
// GPU: the shared device copy and axpy (util/gpu_math.hpp); no kernel of its
// own.

#include "cortado/config.hpp"
#include "cortado/layer.hpp"

namespace cortado {

template <typename Ftype, typename Btype>
class ParameterLayer : public Layer<Ftype, Btype> {
 public:
  CORTADO_LAYER_HEAD(Layer, "Parameter", BlobRules().Bottoms(0).Tops(1))
  CORTADO_LAYER_SETUP

 protected:
  CORTADO_LAYER_PASSES
};

}  // namespace cortado
