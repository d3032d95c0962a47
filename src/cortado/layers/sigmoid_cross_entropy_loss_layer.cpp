#include "cortado/layers/sigmoid_cross_entropy_loss_layer.hpp"

#include <algorithm>
#include <cmath>

namespace cortado {

template <typename Ftype, typename Btype>
void SigmoidCrossEntropyLossLayer<Ftype, Btype>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  LossLayer<Ftype, Btype>::LayerSetUp(bottom, top);
  this->ReadLossParam();
}

template <typename Ftype, typename Btype>
void SigmoidCrossEntropyLossLayer<Ftype, Btype>::Reshape(const BlobVec& bottom, const BlobVec& top) {
  if (bottom[0]->count() != bottom[1]->count()) {
    this->field_error("bottom[1]", "the targets must have the prediction's count: got ", bottom[1]->shape_string(),
                      " for ", bottom[0]->shape_string());
  }
  outer_ = bottom[0]->num_axes() > 0 ? bottom[0]->shape(0) : 1;
  top[0]->Reshape(std::vector<int>{});
}

template <typename Ftype, typename Btype>
void SigmoidCrossEntropyLossLayer<Ftype, Btype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  const Ftype* x = bottom[0]->cpu_data<Ftype>();
  const float* t = bottom[1]->cpu_data<float>();
  const size_t n = bottom[0]->count();
  M loss = 0;
  size_t valid = 0;
  for (size_t i = 0; i < n; ++i) {
    if (this->IgnoredTarget(t[i])) continue;
    const M v = static_cast<M>(x[i]);
    loss += std::max(v, M(0)) - v * static_cast<M>(t[i]) + std::log1p(std::exp(-std::fabs(v)));
    ++valid;
  }
  this->normalizer_ = this->Normalizer(static_cast<double>(n), static_cast<double>(valid), outer_);
  top[0]->mutable_cpu_data<float>()[0] = static_cast<float>(loss / static_cast<M>(this->normalizer_));
}

template <typename Ftype, typename Btype>
void SigmoidCrossEntropyLossLayer<Ftype, Btype>::Backward_cpu(const BlobVec& top,
                                                              const std::vector<bool>& propagate_down,
                                                              const BlobVec& bottom) {
  this->NoGradientTo(propagate_down, 1, "target");
  if (!propagate_down[0]) return;
  using MB = math_t<Btype>;
  const MB scale = static_cast<MB>(this->LossWeight(top) / this->normalizer_);
  const Ftype* x = bottom[0]->cpu_data<Ftype>();
  const float* t = bottom[1]->cpu_data<float>();
  Btype* dx = bottom[0]->mutable_cpu_diff<Btype>();
  for (size_t i = 0; i < bottom[0]->count(); ++i) {
    if (this->IgnoredTarget(t[i])) {
      dx[i] = static_cast<Btype>(0.f);
      continue;
    }
    const MB v = static_cast<MB>(static_cast<M>(x[i]));
    const MB s = MB(1) / (MB(1) + std::exp(-v));
    dx[i] = static_cast<Btype>(scale * (s - static_cast<MB>(t[i])));
  }
}

#ifdef CORTADO_USE_CUDA
template <typename Ftype, typename Btype>
void SigmoidCrossEntropyLossLayer<Ftype, Btype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  const int64_t n = static_cast<int64_t>(bottom[0]->count());
  gpu::sigmoid_cross_entropy_loss_forward(n, bottom[0]->gpu_data<Ftype>(), bottom[1]->gpu_data<float>(),
                                          this->has_ignore_label_, this->ignore_label_,
                                          this->FixedNormalizer(static_cast<double>(n), outer_),
                                          this->loss_partials(n), this->valid_partials(n),
                                          top[0]->mutable_gpu_data<float>(),
                                          this->Sized(&this->norm_gpu_, 1)->template mutable_gpu_data<double>(),
                                          this->context().stream());
}

template <typename Ftype, typename Btype>
void SigmoidCrossEntropyLossLayer<Ftype, Btype>::Backward_gpu(const BlobVec& top,
                                                              const std::vector<bool>& propagate_down,
                                                              const BlobVec& bottom) {
  this->NoGradientTo(propagate_down, 1, "target");
  if (!propagate_down[0]) return;
  CORTADO_CHECK_EQ(this->norm_gpu_.count(), 1u) << "SigmoidCrossEntropyLoss backward before a GPU forward";
  gpu::sigmoid_cross_entropy_loss_backward(static_cast<int64_t>(bottom[0]->count()), bottom[0]->gpu_data<Ftype>(),
                                           bottom[1]->gpu_data<float>(), this->has_ignore_label_, this->ignore_label_,
                                           top[0]->gpu_diff<double>(), this->norm_gpu_.template gpu_data<double>(),
                                           bottom[0]->mutable_gpu_diff<Btype>(), this->context().stream());
}
#endif

CORTADO_INSTANTIATE_LAYER(SigmoidCrossEntropyLossLayer);

}  // namespace cortado
