#pragma once
// ReLU: rectified linear unit, optionally leaky.
//
//   forward:  y = x > 0 ? x : negative_slope * x
//   backward: dx = dy * (x > 0 ? 1 : negative_slope)
//
// Bottoms: 1, any shape. Tops: 1, the bottom's shape.
// Fields: relu_param.negative_slope (float, default 0); relu_param.engine is
// accepted and ignored on the CPU.
// In place: yes. Backward then tests the output's sign instead of the input's,
// which is the same test for negative_slope >= 0.
// Types: forward reads x and writes y as Ftype; backward reads dy and x as
// Btype and writes dx as Btype; arithmetic in math_t.
// GPU: one thread per element (relu_layer.cu), the same expression as the
// CPU path, so GPU and CPU results are identical.

#include "cortado/config.hpp"
#include "cortado/layer.hpp"

namespace cortado {

template <typename Ftype, typename Btype>
class ReLULayer : public Layer<Ftype, Btype> {
 public:
  using Layer<Ftype, Btype>::Layer;
  const char* type() const override { return "ReLU"; }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }

  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;

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
  double negative_slope_ = 0;
};

#ifdef CORTADO_USE_CUDA
namespace gpu {
/// y[i] = x[i] > 0 ? x[i] : slope * x[i], device pointers; x and y may alias.
template <typename T>
void relu_forward(int64_t n, const T* x, T* y, double slope, CUstream_st* stream);
/// dx[i] = x[i] > 0 ? dy[i] : slope * dy[i]; dx may alias dy.
template <typename T>
void relu_backward(int64_t n, const T* dy, const T* x, T* dx, double slope, CUstream_st* stream);
}  // namespace gpu
#endif

}  // namespace cortado
