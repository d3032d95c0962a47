#pragma once
// AbsVal: y = |x|, elementwise.
//
//   forward:  y = |x|
//   backward: dx = dy * sign(x)   (sign(0) = 0)
//
// Bottoms: 1, any shape. Tops: 1, the bottom's shape.
// Fields: none.
// In place: no (as in Caffe; the backward needs the sign of x, which y has
// lost): an in-place top is a field error on "top".
// Types: forward reads x, writes y as Ftype; backward reads dy and x as Btype,
// writes dx as Btype. Exact in every type.
// GPU: one thread per element (absval_layer.cu), identical results.

#include "cortado/config.hpp"
#include "cortado/layer.hpp"

namespace cortado {

template <typename Ftype, typename Btype>
class AbsValLayer : public Layer<Ftype, Btype> {
 public:
  using Layer<Ftype, Btype>::Layer;
  const char* type() const override { return "AbsVal"; }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }

  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override {
    if (top[0] == bottom[0]) this->field_error("top", "AbsVal cannot run in place");
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
/// y[i] = |x[i]|.
template <typename T>
void absval_forward(int64_t n, const T* x, T* y, CUstream_st* stream);
/// dx[i] = dy[i] * sign(x[i]); dx may alias dy.
template <typename T>
void absval_backward(int64_t n, const T* dy, const T* x, T* dx, CUstream_st* stream);
}  // namespace gpu
#endif

}  // namespace cortado
