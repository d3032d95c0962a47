#include "cortado/layers/sigmoid_cross_entropy_loss_layer.hpp"
#include "cortado/layers/loss_normalization.hpp"

#include <algorithm>
#include <cmath>

#ifdef CORTADO_USE_CUDA
#include "cortado/util/cuda.hpp"
#endif

namespace cortado {

template <typename Ftype, typename Btype>
void SigmoidCrossEntropyLossLayer<Ftype, Btype>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const LayerParameter& p = this->layer_param();
  has_ignore_label_ = p.loss_param().has_ignore_label();
  ignore_label_ = p.loss_param().ignore_label();
  normalization_ = NormalizationMode(p.loss_param());
  if (p.loss_weight_size() == 0) this->param_.add_loss_weight(1.f);
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
    if (has_ignore_label_ && t[i] == static_cast<float>(ignore_label_)) continue;
    const M v = static_cast<M>(x[i]);
    loss += std::max(v, M(0)) - v * static_cast<M>(t[i]) + std::log1p(std::exp(-std::fabs(v)));
    ++valid;
  }
  normalizer_ = LossNormalizer(normalization_, static_cast<double>(n), static_cast<double>(valid), outer_);
  top[0]->mutable_cpu_data<float>()[0] = static_cast<float>(loss / static_cast<M>(normalizer_));
}

template <typename Ftype, typename Btype>
void SigmoidCrossEntropyLossLayer<Ftype, Btype>::Backward_cpu(const BlobVec& top,
                                                              const std::vector<bool>& propagate_down,
                                                              const BlobVec& bottom) {
  if (propagate_down.size() > 1 && propagate_down[1]) {
    this->field_error("propagate_down", "cannot back-propagate to the target bottom");
  }
  if (!propagate_down[0]) return;
  using MB = math_t<Btype>;
  const MB scale = static_cast<MB>(top[0]->cpu_diff<double>()[0] / normalizer_);
  const Ftype* x = bottom[0]->cpu_data<Ftype>();
  const float* t = bottom[1]->cpu_data<float>();
  Btype* dx = bottom[0]->mutable_cpu_diff<Btype>();
  for (size_t i = 0; i < bottom[0]->count(); ++i) {
    if (has_ignore_label_ && t[i] == static_cast<float>(ignore_label_)) {
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
  const size_t blocks = static_cast<size_t>(cuda::blocks_for(n));
  if (partial_gpu_.count() != blocks) partial_gpu_.resize(blocks);
  if (valid_gpu_.count() != blocks) valid_gpu_.resize(blocks);
  if (norm_gpu_.count() != 1) norm_gpu_.resize(1);
  // The normalizer, or -1: the valid count, known on the device only. Without
  // an ignore_label every element is valid.
  double fixed = 1;
  switch (normalization_) {
    case LossParameter::FULL: fixed = static_cast<double>(n); break;
    case LossParameter::VALID: fixed = has_ignore_label_ ? -1.0 : static_cast<double>(n); break;
    case LossParameter::BATCH_SIZE: fixed = outer_; break;
    case LossParameter::NONE: fixed = 1; break;
  }
  gpu::sigmoid_cross_entropy_loss_forward(n, bottom[0]->gpu_data<Ftype>(), bottom[1]->gpu_data<float>(),
                                          has_ignore_label_, ignore_label_, fixed, partial_gpu_.mutable_gpu_data<M>(),
                                          valid_gpu_.mutable_gpu_data<double>(), top[0]->mutable_gpu_data<float>(),
                                          norm_gpu_.mutable_gpu_data<double>(), this->context().stream());
}

template <typename Ftype, typename Btype>
void SigmoidCrossEntropyLossLayer<Ftype, Btype>::Backward_gpu(const BlobVec& top,
                                                              const std::vector<bool>& propagate_down,
                                                              const BlobVec& bottom) {
  if (propagate_down.size() > 1 && propagate_down[1]) {
    this->field_error("propagate_down", "cannot back-propagate to the target bottom");
  }
  if (!propagate_down[0]) return;
  CORTADO_CHECK_EQ(norm_gpu_.count(), 1u) << "SigmoidCrossEntropyLoss backward before a GPU forward";
  gpu::sigmoid_cross_entropy_loss_backward(static_cast<int64_t>(bottom[0]->count()), bottom[0]->gpu_data<Ftype>(),
                                           bottom[1]->gpu_data<float>(), has_ignore_label_, ignore_label_,
                                           top[0]->gpu_diff<double>(), norm_gpu_.gpu_data<double>(),
                                           bottom[0]->mutable_gpu_diff<Btype>(), this->context().stream());
}
#endif

CORTADO_INSTANTIATE_LAYER(SigmoidCrossEntropyLossLayer);

}  // namespace cortado
