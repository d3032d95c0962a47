#pragma once
// Multiplies by a broadcast scale and optionally adds a bias, as Caffe's
// ScaleLayer.
//
// The bottom x is seen as (outer, dim, inner) around the scale s (dim values):
// s's shape must equal x.shape[axis, axis + s.num_axes()); outer = count of
// the axes before `axis`, inner = count of the axes after the scale's.
//   y[o, d, i] = x[o, d, i] * s[d] (+ b[d] with bias_term)
// Backward: dx = dy * s[d]; ds[d] = sum over o, i of dy * x; db[d] = sum of dy.
// Parameter diffs are accumulated; a second bottom's diff is written.
//
// Bottoms: x, and optionally s as a second bottom. With one bottom s is the
// learnable blobs_[0], of shape x.shape[axis, axis + num_axes) (num_axes -1:
// to the last axis; 0: a scalar). The bias b (bias_term) has s's shape and is
// the next parameter blob (blobs_[1] with one bottom, blobs_[0] with two).
//
// scale_param fields:
//   axis (default 1; negative counts from the end)
//   num_axes (default 1; >= -1; one-bottom form only)
//   filler (default constant 1; one-bottom form only)
//   bias_term (default false), bias_filler (default constant 0)
//
// Types: forward in math_t<Ftype>, backward sums in math_t<Btype> (float for
// float16). In place: yes (the forward then keeps a copy of x for ds, when
// the scale is learned or is a second bottom).
// GPU: elementwise forward and dx; ds and db are one block per scale value
// summing over (outer, inner) in float (double for double).
// The parameter's axes, the (outer, dim, inner) view and their checks are
// shared with Bias (broadcast_param.hpp).
// Fusion: with one bottom, axis 1 and a (C) scale, in place after a BatchNorm
// without scale_bias, the Net may fold it into BatchNorm's pass
// (layer_fusion.hpp, role kChannelAffine): BatchNorm then computes y = xhat *
// s + b with this layer's blobs and accumulates their gradients, and this
// layer's Forward and Backward do nothing.

#include <cstdint>
#include <vector>

#include "cortado/layer.hpp"
#include "cortado/layers/layout_stand_in.hpp"
#include "cortado/layers/layer_fusion.hpp"

struct CUstream_st;

namespace cortado {

template <typename Ftype, typename Btype>
class ScaleLayer : public Layer<Ftype, Btype>, public FusableLayer {
 public:
  CORTADO_LAYER_HEAD(Layer, "Scale", BlobRules().Bottoms(1, 2).Tops(1))
  FusionRole fusion_role() const override {
    return channel_affine_ ? FusionRole::kChannelAffine : FusionRole::kNone;
  }

  CORTADO_LAYER_SETUP
  /// Whether the last forward kept a copy of its input (tests, diagnostics).
  bool kept_copy() const { return copied_; }

 protected:
  CORTADO_LAYER_PASSES

 private:
  std::vector<int> ParamShape(const Blob& x) const;
  Blob* scale(const BlobVec& bottom) const { return bottom.size() > 1 ? bottom[1] : this->blobs_[0].get(); }
  Blob* bias_blob(const BlobVec& bottom) const {
    return bias_term_ ? this->blobs_[bottom.size() > 1 ? 0 : 1].get() : nullptr;
  }
  int bias_index(const BlobVec& bottom) const { return bottom.size() > 1 ? 0 : 1; }
  /// Whether the forward keeps a copy of x: in place, and the scale learned
  /// (or a second bottom).
  bool KeepsCopy(const BlobVec& bottom, const BlobVec& top) const;
  /// x as seen by the backward: the bottom, or the copy kept when in place.
  const Blob& saved_x(const BlobVec& bottom, const BlobVec& top) const {
    return top[0] == bottom[0] ? x_copy_ : *bottom[0];
  }

  bool bias_term_ = false;
  bool channel_affine_ = false;  // one bottom, axis 1, a (C) scale: fusable after BatchNorm
  int64_t outer_ = 0, dim_ = 0, inner_ = 0;
  // Channels last (net_layout.hpp; a (C) parameter on axis 1): the GPU
  // kernels see (outer * inner, dim, 1); the CPU path computes on NCHW stand-ins.
  bool channels_last_ = false;
  int64_t gpu_outer() const { return channels_last_ ? outer_ * inner_ : outer_; }
  int64_t gpu_inner() const { return channels_last_ ? 1 : inner_; }
  NchwPasses nchw_;
  bool copied_ = false;  // whether the last forward filled x_copy_
  Blob x_copy_{type_of<Ftype>()};
};

#ifdef CORTADO_USE_CUDA
namespace gpu {
// Launchers of scale_layer.cu; x, y are (outer, dim, inner).

/// y = x * s[d] (+ b[d] when b is not null); y may be x.
template <typename T>
void scale_forward(int64_t outer, int64_t dim, int64_t inner, const T* x, const T* s, const T* b, T* y,
                   CUstream_st* stream);
/// dx = dy * s[d] (dx may be dy).
template <typename T>
void scale_backward_dx(int64_t outer, int64_t dim, int64_t inner, const T* dy, const T* s, T* dx,
                       CUstream_st* stream);
/// One block per d. With ds: ds[d] = (accumulate_s ? ds[d] : 0) + sum dy * x;
/// with db: db[d] += sum dy. Either may be null. x is in the forward's type
/// X (an FP32 forward's input is not rounded to a float16 gradient's type).
template <typename T, typename X>
void scale_backward_params(int64_t outer, int64_t dim, int64_t inner, const T* dy, const X* x, T* ds,
                           bool accumulate_s, T* db, CUstream_st* stream);
}  // namespace gpu
#endif  // CORTADO_USE_CUDA

}  // namespace cortado
