#include "cortado/layers/threshold_layer.hpp"

#include <cmath>

namespace cortado {

template <typename Ftype, typename Btype>
void ThresholdLayer<Ftype, Btype>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const float t = this->layer_param().threshold_param().threshold();
  if (!std::isfinite(t)) this->field_error("threshold_param.threshold", "must be finite, got ", t);
  threshold_ = t;
}

template <typename Ftype, typename Btype>
void ThresholdLayer<Ftype, Btype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  using M = math_t<Ftype>;
  Ftype* y = top[0]->mutable_cpu_data<Ftype>();
  const Ftype* x = bottom[0]->cpu_data<Ftype>();
  const M t = static_cast<M>(threshold_);
  const int64_t n = static_cast<int64_t>(bottom[0]->count());
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<Ftype>(static_cast<M>(x[i]) > t ? M(1) : M(0));
}

template <typename Ftype, typename Btype>
void ThresholdLayer<Ftype, Btype>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                                const BlobVec& bottom) {
  if (propagate_down.empty() || !propagate_down[0]) return;
  throw Error("layer '" + this->layer_param().name() + "' (Threshold): no backward (not differentiable)");
}

#ifdef CORTADO_USE_CUDA
template <typename Ftype, typename Btype>
void ThresholdLayer<Ftype, Btype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  Ftype* y = top[0]->mutable_gpu_data<Ftype>();
  const Ftype* x = bottom[0]->gpu_data<Ftype>();
  gpu::threshold_forward(static_cast<int64_t>(bottom[0]->count()), x, y, threshold_, this->context().stream());
}
#endif

CORTADO_INSTANTIATE_LAYER(ThresholdLayer);

}  // namespace cortado
