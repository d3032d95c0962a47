#include "cortado/layers/euclidean_loss_layer.hpp"

#include <algorithm>

namespace cortado {

template <typename Ftype, typename Btype>
void EuclideanLossLayer<Ftype, Btype>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  if (this->layer_param().loss_weight_size() == 0) this->param_.add_loss_weight(1.f);
}

template <typename Ftype, typename Btype>
void EuclideanLossLayer<Ftype, Btype>::Reshape(const BlobVec& bottom, const BlobVec& top) {
  if (bottom[0]->count() != bottom[1]->count()) {
    this->field_error("bottom[1]", "the two bottoms must have the same count, got ", bottom[0]->shape_string(),
                      " and ", bottom[1]->shape_string());
  }
  num_ = bottom[0]->num_axes() > 0 ? bottom[0]->shape(0) : 1;
  top[0]->Reshape(std::vector<int>{});
  diff_.resize(bottom[0]->count());
}

template <typename Ftype, typename Btype>
void EuclideanLossLayer<Ftype, Btype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  const Ftype* a = bottom[0]->cpu_data<Ftype>();
  const Ftype* b = bottom[1]->cpu_data<Ftype>();
  M sum = 0;
  for (size_t i = 0; i < diff_.size(); ++i) {
    diff_[i] = static_cast<M>(a[i]) - static_cast<M>(b[i]);
    sum += diff_[i] * diff_[i];
  }
  top[0]->mutable_cpu_data<float>()[0] = static_cast<float>(sum / (M(2) * std::max(1, num_)));
}

template <typename Ftype, typename Btype>
void EuclideanLossLayer<Ftype, Btype>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                                    const BlobVec& bottom) {
  using MB = math_t<Btype>;
  const double w = top[0]->cpu_diff<double>()[0];
  for (int k = 0; k < 2; ++k) {
    if (!propagate_down[k]) continue;
    const MB alpha = static_cast<MB>((k == 0 ? w : -w) / std::max(1, num_));
    Btype* dx = bottom[k]->mutable_cpu_diff<Btype>();
    for (size_t i = 0; i < diff_.size(); ++i) dx[i] = static_cast<Btype>(alpha * static_cast<MB>(diff_[i]));
  }
}

CORTADO_INSTANTIATE_LAYER(EuclideanLossLayer);

}  // namespace cortado
