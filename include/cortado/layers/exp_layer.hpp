#pragma once
// Exp: y = base ^ (shift + scale * x), elementwise (base e when base = -1).
//
//   forward:  y = outer * exp(inner * x), inner = scale * ln(base),
//             outer = base ^ shift   (ln(base) = 1 and outer = e^shift for base -1)
//   backward: dx = dy * inner * y   (from the output, so in place is allowed)
//
// Bottoms: 1, any shape. Tops: 1, the bottom's shape.
// Fields: exp_param.base (float, default -1 meaning e; otherwise must be > 0),
// exp_param.scale (float, default 1), exp_param.shift (float, default 0);
// all finite.
// In place: yes.
// Types: forward reads x, writes y as Ftype; backward reads dy and y as Btype,
// writes dx as Btype; arithmetic in math_t (inner/outer computed in double
// and rounded to math_t once).
// GPU: one thread per element (exp_layer.cu), expf/exp in math_t.

#include "cortado/config.hpp"
#include "cortado/layer.hpp"

namespace cortado {

template <typename Ftype, typename Btype>
class ExpLayer : public Layer<Ftype, Btype> {
 public:
  using Layer<Ftype, Btype>::Layer;
  const char* type() const override { return "Exp"; }
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
  double inner_scale_ = 1, outer_scale_ = 1;
};

#ifdef CORTADO_USE_CUDA
namespace gpu {
/// y[i] = outer * exp(inner * x[i]); x and y may alias.
template <typename T>
void exp_forward(int64_t n, const T* x, T* y, double inner, double outer, CUstream_st* stream);
/// dx[i] = dy[i] * inner * y[i]; dx may alias dy.
template <typename T>
void exp_backward(int64_t n, const T* dy, const T* y, T* dx, double inner, CUstream_st* stream);
}  // namespace gpu
#endif

}  // namespace cortado
