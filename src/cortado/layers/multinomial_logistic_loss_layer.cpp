#include "cortado/layers/multinomial_logistic_loss_layer.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace cortado {

namespace {
constexpr double kLogThreshold = 1e-20;  // the GPU kernels use the same clamp
}

template <typename Ftype, typename Btype>
void MultinomialLogisticLossLayer<Ftype, Btype>::Reshape(const BlobVec& bottom, const BlobVec& top) {
  this->ReshapeSamples(bottom, top, &num_, &dim_);
}

template <typename Ftype, typename Btype>
void MultinomialLogisticLossLayer<Ftype, Btype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  const Ftype* p = bottom[0]->cpu_data<Ftype>();
  const float* label = bottom[1]->cpu_data<float>();
  M loss = 0;
  for (int n = 0; n < num_; ++n) {
    const int l = this->Label(label[n], n);
    const M v = static_cast<M>(p[static_cast<int64_t>(n) * dim_ + l]);
    loss -= std::log(std::max(v, static_cast<M>(kLogThreshold)));
  }
  top[0]->mutable_cpu_data<float>()[0] = static_cast<float>(loss / static_cast<M>(std::max(1, num_)));
}

template <typename Ftype, typename Btype>
void MultinomialLogisticLossLayer<Ftype, Btype>::Backward_cpu(const BlobVec& top,
                                                              const std::vector<bool>& propagate_down,
                                                              const BlobVec& bottom) {
  this->NoGradientTo(propagate_down, 1, "label");
  if (!propagate_down[0]) return;
  using MB = math_t<Btype>;
  const MB scale = static_cast<MB>(this->LossWeight(top) / std::max(1, num_));
  const Ftype* p = bottom[0]->cpu_data<Ftype>();
  const float* label = bottom[1]->cpu_data<float>();
  Btype* dx = bottom[0]->mutable_cpu_diff<Btype>();
  std::fill(dx, dx + bottom[0]->count(), static_cast<Btype>(0.f));
  for (int n = 0; n < num_; ++n) {
    const int64_t k = static_cast<int64_t>(n) * dim_ + this->Label(label[n], n);
    const MB v = static_cast<MB>(static_cast<M>(p[k]));
    dx[k] = static_cast<Btype>(-scale / std::max(v, static_cast<MB>(kLogThreshold)));
  }
}

#ifdef CORTADO_USE_CUDA
template <typename Ftype, typename Btype>
void MultinomialLogisticLossLayer<Ftype, Btype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  this->CheckGpuLabelError();
  gpu::multinomial_logistic_loss_forward(num_, dim_, bottom[0]->gpu_data<Ftype>(), bottom[1]->gpu_data<float>(),
                                         this->loss_partials(num_), top[0]->mutable_gpu_data<float>(),
                                         this->gpu_label_error(), this->context().stream());
}

template <typename Ftype, typename Btype>
void MultinomialLogisticLossLayer<Ftype, Btype>::Backward_gpu(const BlobVec& top,
                                                              const std::vector<bool>& propagate_down,
                                                              const BlobVec& bottom) {
  this->NoGradientTo(propagate_down, 1, "label");
  this->CheckGpuLabelError();
  if (!propagate_down[0]) return;
  gpu::multinomial_logistic_loss_backward(num_, dim_, bottom[0]->gpu_data<Ftype>(), bottom[1]->gpu_data<float>(),
                                          top[0]->gpu_diff<double>(), bottom[0]->mutable_gpu_diff<Btype>(),
                                          this->context().stream());
}
#endif

CORTADO_INSTANTIATE_LAYER(MultinomialLogisticLossLayer);

}  // namespace cortado
