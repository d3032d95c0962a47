#pragma once
// ELU: exponential linear unit.
//
//   forward:  y = lambda * (x > 0 ? x : alpha * (exp(x) - 1))   (expm1 in math_t)
//   backward: dx = dy * (x > 0 ? lambda : y + lambda * alpha)
//             (the exact derivative: lambda * alpha * exp(x) = y + lambda * alpha
//             for x <= 0. NVCaffe multiplies its lambda = 1 formula by lambda,
//             lambda * (alpha + y), which is exact only for lambda = 1.)
//
// Bottoms: 1, any shape. Tops: 1, the bottom's shape.
// Fields: elu_param.alpha (float, default 1, finite);
//   elu_param.lambda (float, default 1, finite and > 0; NVCaffe's scale:
//   alpha 1.6733 and lambda 1.0507 make SELU).
// In place: yes. The backward then tests the output's sign instead of the
// input's, the same test for alpha >= 0 (as in Caffe).
// Types: forward reads x, writes y as Ftype; backward reads dy, x and y as
// Btype, writes dx as Btype; arithmetic in math_t.
// GPU: one thread per element (elu_layer.cu), expm1f/expm1 in math_t.

#include "cortado/config.hpp"
#include "cortado/layer.hpp"

namespace cortado {

template <typename Ftype, typename Btype>
class ELULayer : public Layer<Ftype, Btype> {
 public:
  using Layer<Ftype, Btype>::Layer;
  const char* type() const override { return "ELU"; }
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
  double alpha_ = 1;
  double lambda_ = 1;
};

#ifdef CORTADO_USE_CUDA
namespace gpu {
/// y[i] = lambda * (x[i] > 0 ? x[i] : alpha * expm1(x[i])); x and y may alias.
template <typename T>
void elu_forward(int64_t n, const T* x, T* y, double alpha, double lambda, CUstream_st* stream);
/// dx[i] = dy[i] * (x[i] > 0 ? lambda : y[i] + lambda * alpha); dx may alias dy.
template <typename T>
void elu_backward(int64_t n, const T* dy, const T* x, const T* y, T* dx, double alpha, double lambda,
                  CUstream_st* stream);
}  // namespace gpu
#endif

}  // namespace cortado
