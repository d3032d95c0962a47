#include "cortado/layers/sigmoid_cross_entropy_loss_layer.hpp"
#include "cortado/layers/loss_normalization.hpp"

#include <algorithm>
#include <cmath>

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

CORTADO_INSTANTIATE_LAYER(SigmoidCrossEntropyLossLayer);

}  // namespace cortado
