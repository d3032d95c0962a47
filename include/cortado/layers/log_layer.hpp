#pragma once
// Log: y = log_base(shift + scale * x), elementwise (natural log when base = -1).
//
//   forward:  y = ln(shift + scale * x) * base_scale, base_scale = 1 / ln(base)
//             (1 for base -1)
//   backward: dx = dy * scale * base_scale / (shift + scale * x)
//
// Bottoms: 1, any shape. Tops: 1, the bottom's shape.
// Fields: log_param.base (float, default -1 meaning e; otherwise must be > 0
// and != 1), log_param.scale (float, default 1), log_param.shift (float,
// default 0); all finite.
// In place: no (the backward reads x): a field error on "top".
// Types: forward reads x, writes y as Ftype; backward reads dy and x as Btype,
// writes dx as Btype; arithmetic in math_t.
// GPU: one thread per element (log_layer.cu), logf/log in math_t.

#include "cortado/config.hpp"
#include "cortado/layer.hpp"

namespace cortado {

template <typename Ftype, typename Btype>
class LogLayer : public Layer<Ftype, Btype> {
 public:
  using Layer<Ftype, Btype>::Layer;
  const char* type() const override { return "Log"; }
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
  double base_scale_ = 1, scale_ = 1, shift_ = 0;
};

#ifdef CORTADO_USE_CUDA
namespace gpu {
/// y[i] = ln(shift + scale * x[i]) * base_scale.
template <typename T>
void log_forward(int64_t n, const T* x, T* y, double base_scale, double scale, double shift, CUstream_st* stream);
/// dx[i] = dy[i] * scale * base_scale / (shift + scale * x[i]); dx may alias dy.
template <typename T>
void log_backward(int64_t n, const T* dy, const T* x, T* dx, double base_scale, double scale, double shift,
                  CUstream_st* stream);
}  // namespace gpu
#endif

}  // namespace cortado
