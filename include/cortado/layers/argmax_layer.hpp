#pragma once
// ArgMax: the indexes (and optionally the values) of the top_k largest inputs.
//
// Without argmax_param.axis, each item n of the batch is flattened to
// dim = count(1) values and the top has shape (N, 1 or 2, top_k) (at least
// 3 axes, 1 elsewhere): channel 0 holds the indexes, largest first; with
// out_max_val channel 1 holds the values.
// With axis: the search runs along that axis for every other index; the top
// has the bottom's shape with shape[axis] = top_k, and holds the indexes, or
// with out_max_val the values instead of the indexes.
// Ties: of equal values, the larger index ranks first (Caffe's order).
//
// Bottoms: 1. Tops: 1.
// Fields: argmax_param.out_max_val (default false); argmax_param.top_k
// (default 1; at least 1 and at most the searched dimension);
// argmax_param.axis (unset by default; negative counts from the end).
// In place: no.
// Types: values compared in math_t<Ftype>; the top is written as float
// whatever Ftype is, so that indexes stay exact (float16 would round indexes
// past 2048). No backward: Backward does nothing and force_backward does not
// apply.
// GPU (argmax_layer.cu): one thread per searched row, top_k passes, each
// finding the largest (value, index) pair below the previous one.

#include "cortado/config.hpp"
#include "cortado/layer.hpp"

namespace cortado {

template <typename Ftype, typename Btype>
class ArgMaxLayer : public Layer<Ftype, Btype> {
 public:
  CORTADO_LAYER_HEAD(Layer, "ArgMax", BlobRules().Bottoms(1).Tops(1).NoForcedBackward())
  CORTADO_LAYER_SETUP

 protected:
  CORTADO_LAYER_FORWARD_PASSES

 private:
  bool out_max_val_ = false;
  bool has_axis_ = false;
  int top_k_ = 1;
  int axis_ = 0;
  int64_t num_ = 0, dim_ = 0, stride_ = 1;  // rows searched, their length, the step between their values
};

#ifdef CORTADO_USE_CUDA
namespace gpu {
/// For each of the num rows r (values x[(r / stride * dim + j) * stride + r % stride], j < dim):
/// the top_k largest, written as float. mode 0: indexes at
/// y[(r / stride * top_k + k) * stride + r % stride]; mode 1: values there;
/// mode 2 (no axis, stride 1): indexes at y[2 r top_k + k], values at
/// y[2 r top_k + top_k + k].
template <typename T>
void argmax_forward(int64_t num, int64_t dim, int64_t stride, int top_k, int mode, const T* x, float* y,
                    CUstream_st* stream);
}  // namespace gpu
#endif

}  // namespace cortado
