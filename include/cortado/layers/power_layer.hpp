#pragma once
// Power: y = (shift + scale * x) ^ power, elementwise.
//
//   forward:  y = (shift + scale * x) ^ power   (shift ^ power for any x when scale = 0)
//   backward: dx = dy * power * scale * (shift + scale * x) ^ (power - 1)
//             (dx = 0 when power * scale == 0; dx = dy * scale when power == 1)
//
// Bottoms: 1, any shape. Tops: 1, the bottom's shape.
// Fields: power_param.power (float, default 1), power_param.scale (float,
// default 1), power_param.shift (float, default 0); all must be finite.
// In place: only when the backward needs no x (power 1, or power * scale 0);
// otherwise a field error on "top".
// Types: forward reads x and writes y as Ftype; backward reads dy and x as
// Btype and writes dx as Btype; arithmetic and pow in math_t.
// GPU: one thread per element (power_layer.cu), powf/pow in math_t.

#include "cortado/config.hpp"
#include "cortado/layer.hpp"

namespace cortado {

template <typename Ftype, typename Btype>
class PowerLayer : public Layer<Ftype, Btype> {
 public:
  using Layer<Ftype, Btype>::Layer;
  const char* type() const override { return "Power"; }
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
  double power_ = 1, scale_ = 1, shift_ = 0;
};

#ifdef CORTADO_USE_CUDA
namespace gpu {
/// y[i] = (shift + scale * x[i]) ^ power, device pointers.
template <typename T>
void power_forward(int64_t n, const T* x, T* y, double power, double scale, double shift, CUstream_st* stream);
/// dx[i] = dy[i] * power * scale * (shift + scale * x[i]) ^ (power - 1); dx may alias dy.
template <typename T>
void power_backward(int64_t n, const T* dy, const T* x, T* dx, double power, double scale, double shift,
                    CUstream_st* stream);
}  // namespace gpu
#endif

}  // namespace cortado
