#pragma once
// TanH: elementwise tanh.
//
//   forward:  y = tanh(x)
//   backward: dx = dy * (1 - y^2)   (from the output, so in place is allowed)
//
// Bottoms: 1, any shape. Tops: 1, the bottom's shape.
// Fields: tanh_param.engine is accepted and ignored on the CPU.
// In place: yes.
// Types: forward reads x and writes y as Ftype (exp/tanh evaluated in
// math_t); backward reads dy and y as Btype and writes dx as Btype.
// GPU: one thread per element (tanh_layer.cu) with CUDA's tanhf/tanh in math_t,
// within 2 ulps of the host library before rounding to the storage type.

#include "cortado/config.hpp"
#include "cortado/layer.hpp"

namespace cortado {

template <typename Ftype, typename Btype>
class TanHLayer : public Layer<Ftype, Btype> {
 public:
  using Layer<Ftype, Btype>::Layer;
  const char* type() const override { return "TanH"; }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }

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
};

#ifdef CORTADO_USE_CUDA
namespace gpu {
/// y[i] = tanh(x[i]), device pointers; x and y may alias.
template <typename T>
void tanh_forward(int64_t n, const T* x, T* y, CUstream_st* stream);
/// dx = dy * (1 - y^2) elementwise; dx may alias dy.
template <typename T>
void tanh_backward(int64_t n, const T* dy, const T* y, T* dx, CUstream_st* stream);
}  // namespace gpu
#endif

}  // namespace cortado
