#pragma once
// Threshold: y = x > threshold ? 1 : 0, elementwise.
//
// Bottoms: 1, any shape. Tops: 1, the bottom's shape.
// Fields: threshold_param.threshold (float, default 0, finite).
// In place: yes.
// No backward, as in Caffe: the step has no useful gradient. Backward with
// propagate_down false does nothing; with propagate_down true it throws
// (Caffe's NOT_IMPLEMENTED); force_backward does not apply.
// Types: reads x and writes y as Ftype; the comparison is in math_t.
// GPU: one thread per element (threshold_layer.cu), identical results.

#include "cortado/config.hpp"
#include "cortado/layer.hpp"

namespace cortado {

template <typename Ftype, typename Btype>
class ThresholdLayer : public Layer<Ftype, Btype> {
 public:
  using Layer<Ftype, Btype>::Layer;
  const char* type() const override { return "Threshold"; }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }
  bool AllowForceBackward(int bottom_index) const override { return false; }

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
  void Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override {
    Backward_cpu(top, propagate_down, bottom);
  }
#endif

 private:
  double threshold_ = 0;
};

#ifdef CORTADO_USE_CUDA
namespace gpu {
/// y[i] = x[i] > threshold ? 1 : 0; x and y may alias.
template <typename T>
void threshold_forward(int64_t n, const T* x, T* y, double threshold, CUstream_st* stream);
}  // namespace gpu
#endif

}  // namespace cortado
