#pragma once
// Split: hands one bottom to several consumers. The Net inserts it where a
// blob feeds more than one layer.
//
//   forward:  top_k = x for every k: the tops share the bottom's data (no
//             copy, as in Caffe); a consumer never computes in place on a
//             split top, because the Net's split insertion renames only
//             bottoms, so such a layer writes a new top blob
//             (net.hpp, InsertSplits)
//   backward: dx = sum_k dtop_k, accumulated in math_t and rounded once
//
// Bottoms: 1, any shape. Tops: 1 or more, each the bottom's shape.
// Fields: none. In place: no.
// GPU: the forward does nothing; the backward sums the top
// diffs in one kernel (split_layer.cu) in math_t, in the CPU path's order,
// rounding once (for more than 64 tops, once per 64).

#include "cortado/config.hpp"
#include "cortado/layer.hpp"

namespace cortado {

template <typename Ftype, typename Btype>
class SplitLayer : public Layer<Ftype, Btype> {
 public:
  CORTADO_LAYER_HEAD(Layer, "Split", BlobRules().Bottoms(1).MinTops(1))
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;

 protected:
  CORTADO_LAYER_PASSES
};

#ifdef CORTADO_USE_CUDA
namespace gpu {
/// dx[i] = sum_k dy[k][i] over count device arrays, summed in math_t in order k = 0, 1, ...
/// and rounded once per 64 arrays.
template <typename T>
void split_backward(int64_t n, const T* const* dy, int count, T* dx, CUstream_st* stream);
}  // namespace gpu
#endif

}  // namespace cortado
