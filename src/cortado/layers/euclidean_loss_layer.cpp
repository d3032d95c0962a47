#include "cortado/layers/euclidean_loss_layer.hpp"

#include <algorithm>

namespace cortado {

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
  const double w = this->LossWeight(top);
  for (int k = 0; k < 2; ++k) {
    if (!propagate_down[k]) continue;
    const MB alpha = static_cast<MB>((k == 0 ? w : -w) / std::max(1, num_));
    Btype* dx = bottom[k]->mutable_cpu_diff<Btype>();
    for (size_t i = 0; i < diff_.size(); ++i) dx[i] = static_cast<Btype>(alpha * static_cast<MB>(diff_[i]));
  }
}

#ifdef CORTADO_USE_CUDA
template <typename Ftype, typename Btype>
void EuclideanLossLayer<Ftype, Btype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  const int64_t n = static_cast<int64_t>(bottom[0]->count());
  // The divisor 2 N is exact in M, as the CPU path's M(2) * N is.
  gpu::euclidean_loss_forward(n, bottom[0]->gpu_data<Ftype>(), bottom[1]->gpu_data<Ftype>(),
                              this->Sized(&diff_gpu_, n)->template mutable_gpu_data<M>(), this->loss_partials(n),
                              2.0 * std::max(1, num_), top[0]->mutable_gpu_data<float>(), this->context().stream());
}

template <typename Ftype, typename Btype>
void EuclideanLossLayer<Ftype, Btype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                                    const BlobVec& bottom) {
  if (!propagate_down[0] && !propagate_down[1]) return;
  CORTADO_CHECK_EQ(diff_gpu_.count(), bottom[0]->count()) << "EuclideanLoss backward before a GPU forward";
  gpu::euclidean_loss_backward(static_cast<int64_t>(diff_gpu_.count()), diff_gpu_.gpu_data<M>(),
                               top[0]->gpu_diff<double>(), std::max(1, num_),
                               propagate_down[0] ? bottom[0]->mutable_gpu_diff<Btype>() : nullptr,
                               propagate_down[1] ? bottom[1]->mutable_gpu_diff<Btype>() : nullptr,
                               this->context().stream());
}
#endif

CORTADO_INSTANTIATE_LAYER(EuclideanLossLayer);

}  // namespace cortado
