#pragma once
// Clip (BVLC Caffe's): clamps every value into [min, max].
//
//   forward:  y = min(max(x, clip_min), clip_max)
//   backward: dx = dy where lo < y < hi, else 0, with lo and hi the bounds
//             as a clipped y holds them (rounded to Ftype, then read as
//             Btype)
//
// The gradient passes on the open interval, as ReLU's does for x > 0 and
// PyTorch's hardtanh (ReLU6) does (BVLC Caffe also passes it at x equal to a
// bound, a set of measure zero). Reading y instead of x gives the same
// answer (a clipped y equals a rounded bound, an unclipped one lies strictly
// between them; up to a y that Btype rounds onto a bound when it is coarser
// than Ftype), so the layer works in place, as ReLU6 usually is written.
// Bottoms: 1, any shape. Tops: 1, the bottom's shape.
// Fields: clip_param.min and clip_param.max (float, both required, finite,
// min <= max).
// In place: yes.
// Types: forward reads x, writes y as Ftype; backward reads dy and y as
// Btype, writes dx as Btype; comparisons in math_t.
// GPU: one thread per element (clip_layer.cu).

#include "cortado/config.hpp"
#include "cortado/layer.hpp"

namespace cortado {

template <typename Ftype, typename Btype>
class ClipLayer : public Layer<Ftype, Btype> {
 public:
  using Layer<Ftype, Btype>::Layer;
  const char* type() const override { return "Clip"; }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }

  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override { top[0]->ReshapeLike(*bottom[0]); }

 protected:
  void Forward_cpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;
#ifdef CORTADO_USE_CUDA
 public:
  bool HasGpuPath() const override { return true; }

 protected:
  void Forward_gpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;
#endif

 private:
  double min_ = 0, max_ = 0;    // the fields
  double bwd_lo_ = 0, bwd_hi_ = 0;  // the bounds as Btype reads a clipped y
};

#ifdef CORTADO_USE_CUDA
namespace gpu {
/// y[i] = min(max(x[i], lo), hi); x and y may alias.
template <typename T>
void clip_forward(int64_t n, const T* x, T* y, double lo, double hi, CUstream_st* stream);
/// dx[i] = lo < y[i] < hi ? dy[i] : 0; dx may alias dy.
template <typename T>
void clip_backward(int64_t n, const T* dy, const T* y, T* dx, double lo, double hi, CUstream_st* stream);
}  // namespace gpu
#endif

}  // namespace cortado
