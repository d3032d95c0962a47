#pragma once
// Adds a broadcast bias, as Caffe's BiasLayer.
//
// The bottom x is seen as (outer, dim, inner) around the bias b (dim values):
// b's shape must equal x.shape[axis, axis + b.num_axes()); outer = count of
// the axes before `axis`, inner = count of the axes after the bias's.
//   y[o, d, i] = x[o, d, i] + b[d]
// Backward: dx = dy; db[d] = sum over o, i of dy[o, d, i] (accumulated into
// the parameter diff; written, not accumulated, into a second bottom's diff).
//
// Bottoms: x, and optionally b as a second bottom. With one bottom b is the
// learnable blobs_[0], of shape x.shape[axis, axis + num_axes) (num_axes -1:
// to the last axis; 0: a scalar bias, axis then unused).
//
// bias_param fields:
//   axis (default 1; negative counts from the end)
//   num_axes (default 1; >= -1; one-bottom form only)
//   filler (default constant 0; one-bottom form only)
//
// Types: forward reads x and b as Ftype, computes in math_t<Ftype>; backward
// reads dy as Btype, sums in math_t<Btype> (float for float16). In place: yes.
// GPU: elementwise forward; the bias gradient is one block per bias value
// summing over (outer, inner) in float (double for double).
// The parameter's axes, the (outer, dim, inner) view and their checks are
// shared with Scale (broadcast_param.hpp).

#include <cstdint>
#include <vector>

#include "cortado/layer.hpp"
#include "cortado/layers/layout_stand_in.hpp"

struct CUstream_st;

namespace cortado {

template <typename Ftype, typename Btype>
class BiasLayer : public Layer<Ftype, Btype> {
 public:
  CORTADO_LAYER_HEAD(Layer, "Bias", BlobRules().Bottoms(1, 2).Tops(1))
  CORTADO_LAYER_SETUP

 protected:
  CORTADO_LAYER_PASSES

 private:
  /// The bias's shape for the one-bottom form.
  std::vector<int> ParamShape(const Blob& x) const;
  Blob* bias(const BlobVec& bottom) const { return bottom.size() > 1 ? bottom[1] : this->blobs_[0].get(); }

  int64_t outer_ = 0, dim_ = 0, inner_ = 0;
  // Channels last (net_layout.hpp; a (C) parameter on axis 1): the GPU
  // kernels see (outer * inner, dim, 1); the CPU path computes on NCHW stand-ins.
  bool channels_last_ = false;
  int64_t gpu_outer() const { return channels_last_ ? outer_ * inner_ : outer_; }
  int64_t gpu_inner() const { return channels_last_ ? 1 : inner_; }
  NchwPasses nchw_;
};

#ifdef CORTADO_USE_CUDA
namespace gpu {
// Launchers of bias_layer.cu; x, y are (outer, dim, inner).

/// y = x + b[d] (y may be x).
template <typename T>
void bias_forward(int64_t outer, int64_t dim, int64_t inner, const T* x, const T* b, T* y, CUstream_st* stream);
/// db[d] = (accumulate ? db[d] : 0) + sum over o, i of dy[o, d, i]; one block per d.
template <typename T>
void bias_backward(int64_t outer, int64_t dim, int64_t inner, const T* dy, bool accumulate, T* db,
                   CUstream_st* stream);
}  // namespace gpu
#endif  // CORTADO_USE_CUDA

}  // namespace cortado
