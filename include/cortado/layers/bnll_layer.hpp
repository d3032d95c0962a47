#pragma once
// BNLL: binomial normal log likelihood, softplus y = ln(1 + e^x).
//
//   forward:  y = x > 0 ? x + log1p(exp(-x)) : log1p(exp(x))   (no overflow)
//   backward: dx = dy * e / (1 + e), e = exp(min(x, 50))       (sigmoid of x)
//
// Bottoms: 1, any shape. Tops: 1, the bottom's shape.
// Fields: none.
// In place: no (the backward reads x): a field error on "top".
// Types: forward reads x, writes y as Ftype; backward reads dy and x as Btype,
// writes dx as Btype; arithmetic in math_t.
// GPU: one thread per element (bnll_layer.cu), expf/log1pf in math_t.

#include "cortado/config.hpp"
#include "cortado/layer.hpp"

namespace cortado {

template <typename Ftype, typename Btype>
class BNLLLayer : public Layer<Ftype, Btype> {
 public:
  using Layer<Ftype, Btype>::Layer;
  const char* type() const override { return "BNLL"; }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }

  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override {
    if (top[0] == bottom[0]) this->field_error("top", "BNLL cannot run in place (its backward reads x)");
  }
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
/// y[i] = ln(1 + exp(x[i])).
template <typename T>
void bnll_forward(int64_t n, const T* x, T* y, CUstream_st* stream);
/// dx[i] = dy[i] * sigmoid(x[i]); dx may alias dy.
template <typename T>
void bnll_backward(int64_t n, const T* dy, const T* x, T* dx, CUstream_st* stream);
}  // namespace gpu
#endif

}  // namespace cortado
