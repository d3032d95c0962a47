#include "cortado/layers/mvn_layer.hpp"

#include <cmath>
#include <vector>

namespace cortado {

template <typename Ftype, typename Btype>
void MVNLayer<Ftype, Btype>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const MVNParameter& p = this->layer_param().mvn_param();
  if (!(p.eps() >= 0)) this->field_error("mvn_param.eps", "must be >= 0, got ", p.eps());
  normalize_variance_ = p.normalize_variance();
  across_channels_ = p.across_channels();
  eps_ = p.eps();
  sigma_ = std::make_unique<Blob>(type_of<S>());
}

template <typename Ftype, typename Btype>
void MVNLayer<Ftype, Btype>::Reshape(const BlobVec& bottom, const BlobVec& top) {
  const int need = across_channels_ ? 1 : 2;
  if (bottom[0]->num_axes() < need) {
    this->field_error("bottom[0]", "needs at least ", need, " axes (mvn_param.across_channels ", across_channels_,
                      "), got shape ", bottom[0]->shape_string());
  }
  top[0]->ReshapeLike(*bottom[0]);
  dim_ = static_cast<int64_t>(bottom[0]->count(across_channels_ ? 1 : 2));
  num_ = dim_ > 0 ? static_cast<int64_t>(bottom[0]->count()) / dim_ : 0;
  sigma_->Reshape(std::vector<int>{static_cast<int>(num_)});
}

template <typename Ftype, typename Btype>
void MVNLayer<Ftype, Btype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  const Ftype* x = bottom[0]->cpu_data<Ftype>();
  Ftype* y = top[0]->mutable_cpu_data<Ftype>();
  S* sigma = sigma_->mutable_cpu_data<S>();
  for (int64_t r = 0; r < num_; ++r) {
    const Ftype* xr = x + r * dim_;
    Ftype* yr = y + r * dim_;
    S sum = 0;
    for (int64_t d = 0; d < dim_; ++d) sum += static_cast<S>(xr[d]);
    const S mu = sum / static_cast<S>(dim_);
    S sq = 0;
    for (int64_t d = 0; d < dim_; ++d) {
      const S c = static_cast<S>(xr[d]) - mu;
      sq += c * c;
    }
    sigma[r] = std::sqrt(sq / static_cast<S>(dim_));
    const S scale = normalize_variance_ ? S(1) / (sigma[r] + static_cast<S>(eps_)) : S(1);
    for (int64_t d = 0; d < dim_; ++d) yr[d] = static_cast<Ftype>((static_cast<S>(xr[d]) - mu) * scale);
  }
}

template <typename Ftype, typename Btype>
void MVNLayer<Ftype, Btype>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                          const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  using M = math_t<Btype>;
  const Btype* dy = top[0]->cpu_diff<Btype>();
  const Btype* y = top[0]->cpu_data<Btype>();
  const S* sigma = sigma_->cpu_data<S>();
  Btype* dx = bottom[0]->mutable_cpu_diff<Btype>();
  for (int64_t r = 0; r < num_; ++r) {
    const Btype* gr = dy + r * dim_;
    const Btype* yr = y + r * dim_;
    Btype* dxr = dx + r * dim_;
    M sum_g = 0, sum_gy = 0;
    for (int64_t d = 0; d < dim_; ++d) {
      sum_g += static_cast<M>(gr[d]);
      sum_gy += static_cast<M>(gr[d]) * static_cast<M>(yr[d]);
    }
    const M mean_g = sum_g / static_cast<M>(dim_);
    const M mean_gy = normalize_variance_ ? sum_gy / static_cast<M>(dim_) : M(0);
    const M scale = normalize_variance_ ? M(1) / (static_cast<M>(sigma[r]) + static_cast<M>(eps_)) : M(1);
    for (int64_t d = 0; d < dim_; ++d) {
      dxr[d] = static_cast<Btype>((static_cast<M>(gr[d]) - mean_g - static_cast<M>(yr[d]) * mean_gy) * scale);
    }
  }
}

#ifdef CORTADO_USE_CUDA
template <typename Ftype, typename Btype>
void MVNLayer<Ftype, Btype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  const Ftype* x = bottom[0]->gpu_data<Ftype>();
  Ftype* y = top[0]->mutable_gpu_data<Ftype>();
  gpu::mvn_forward(num_, dim_, normalize_variance_, eps_, x, y, sigma_->mutable_gpu_data<S>(),
                   this->context().stream());
}

template <typename Ftype, typename Btype>
void MVNLayer<Ftype, Btype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                          const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  const Btype* dy = top[0]->gpu_diff<Btype>();
  const Btype* y = top[0]->gpu_data<Btype>();
  Btype* dx = bottom[0]->mutable_gpu_diff<Btype>();
  gpu::mvn_backward(num_, dim_, normalize_variance_, eps_, y, dy, sigma_->gpu_data<S>(), dx,
                    this->context().stream());
}
#endif

CORTADO_INSTANTIATE_LAYER(MVNLayer);

}  // namespace cortado
