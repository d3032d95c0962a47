#include "cortado/layers/contrastive_loss_layer.hpp"

#include <algorithm>
#include <cmath>

namespace cortado {

template <typename Ftype, typename Btype>
void ContrastiveLossLayer<Ftype, Btype>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  LossLayer<Ftype, Btype>::LayerSetUp(bottom, top);
  const LayerParameter& p = this->layer_param();
  margin_ = p.contrastive_loss_param().margin();
  if (!std::isfinite(margin_)) {
    this->field_error("contrastive_loss_param.margin", "must be finite, got ", margin_);
  }
  legacy_ = p.contrastive_loss_param().legacy_version();
}

template <typename Ftype, typename Btype>
void ContrastiveLossLayer<Ftype, Btype>::Reshape(const BlobVec& bottom, const BlobVec& top) {
  if (bottom[0]->num_axes() < 1) this->field_error("bottom[0]", "needs at least one axis (N, C, ...)");
  if (bottom[0]->shape() != bottom[1]->shape()) {
    this->field_error("bottom[1]", "must have bottom[0]'s shape ", bottom[0]->shape_string(), ", got ",
                      bottom[1]->shape_string());
  }
  num_ = bottom[0]->shape(0);
  dim_ = num_ > 0 ? static_cast<int>(bottom[0]->count() / num_) : 0;
  if (bottom[2]->count() != static_cast<size_t>(num_)) {
    this->field_error("bottom[2]", "the similarity bottom holds ", bottom[2]->count(), " values (shape ",
                      bottom[2]->shape_string(), ") but ", num_, " pairs need ", num_);
  }
  top[0]->Reshape(std::vector<int>{});
  diff_.resize(bottom[0]->count());
  dist_sq_.resize(num_);
}

template <typename Ftype, typename Btype>
void ContrastiveLossLayer<Ftype, Btype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  const Ftype* a = bottom[0]->cpu_data<Ftype>();
  const Ftype* b = bottom[1]->cpu_data<Ftype>();
  const float* y = bottom[2]->cpu_data<float>();
  const M margin = static_cast<M>(margin_);
  M loss = 0;
  for (int n = 0; n < num_; ++n) {
    M d2 = 0;
    for (int c = 0; c < dim_; ++c) {
      const int64_t k = static_cast<int64_t>(n) * dim_ + c;
      diff_[k] = static_cast<M>(a[k]) - static_cast<M>(b[k]);
      d2 += diff_[k] * diff_[k];
    }
    dist_sq_[n] = d2;
    if (static_cast<int>(y[n]) != 0) {
      loss += d2;
    } else if (legacy_) {
      loss += std::max(margin - d2, M(0));
    } else {
      const M m = std::max(margin - std::sqrt(d2), M(0));
      loss += m * m;
    }
  }
  top[0]->mutable_cpu_data<float>()[0] = static_cast<float>(loss / (M(2) * static_cast<M>(std::max(1, num_))));
}

template <typename Ftype, typename Btype>
void ContrastiveLossLayer<Ftype, Btype>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                                      const BlobVec& bottom) {
  this->NoGradientTo(propagate_down, 2, "similarity");
  using MB = math_t<Btype>;
  const double w = this->LossWeight(top);
  const float* y = bottom[2]->cpu_data<float>();
  const MB margin = static_cast<MB>(margin_);
  for (int i = 0; i < 2; ++i) {
    if (!propagate_down[i]) continue;
    const MB alpha = static_cast<MB>((i == 0 ? w : -w) / std::max(1, num_));
    Btype* dx = bottom[i]->mutable_cpu_diff<Btype>();
    for (int n = 0; n < num_; ++n) {
      const MB d2 = static_cast<MB>(dist_sq_[n]);
      MB beta = 0;
      if (static_cast<int>(y[n]) != 0) {
        beta = alpha;
      } else if (legacy_) {
        beta = margin - d2 > MB(0) ? -alpha : MB(0);
      } else {
        const MB dist = std::sqrt(d2);
        const MB m = margin - dist;
        beta = m > MB(0) ? -alpha * m / (dist + MB(1e-4)) : MB(0);
      }
      for (int c = 0; c < dim_; ++c) {
        const int64_t k = static_cast<int64_t>(n) * dim_ + c;
        dx[k] = static_cast<Btype>(beta * static_cast<MB>(diff_[k]));
      }
    }
  }
}

#ifdef CORTADO_USE_CUDA
template <typename Ftype, typename Btype>
void ContrastiveLossLayer<Ftype, Btype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  const int64_t count = static_cast<int64_t>(num_) * dim_;
  gpu::contrastive_loss_forward(num_, dim_, bottom[0]->gpu_data<Ftype>(), bottom[1]->gpu_data<Ftype>(),
                                bottom[2]->gpu_data<float>(), margin_, legacy_,
                                this->Sized(&diff_gpu_, count)->template mutable_gpu_data<M>(),
                                this->Sized(&dist_sq_gpu_, num_)->template mutable_gpu_data<M>(),
                                this->loss_partials(num_), top[0]->mutable_gpu_data<float>(),
                                this->context().stream());
}

template <typename Ftype, typename Btype>
void ContrastiveLossLayer<Ftype, Btype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                                      const BlobVec& bottom) {
  this->NoGradientTo(propagate_down, 2, "similarity");
  if (!propagate_down[0] && !propagate_down[1]) return;
  CORTADO_CHECK_EQ(diff_gpu_.count(), bottom[0]->count()) << "ContrastiveLoss backward before a GPU forward";
  gpu::contrastive_loss_backward(num_, dim_, diff_gpu_.gpu_data<M>(), dist_sq_gpu_.gpu_data<M>(),
                                 bottom[2]->gpu_data<float>(), margin_, legacy_, top[0]->gpu_diff<double>(),
                                 propagate_down[0] ? bottom[0]->mutable_gpu_diff<Btype>() : nullptr,
                                 propagate_down[1] ? bottom[1]->mutable_gpu_diff<Btype>() : nullptr,
                                 this->context().stream());
}
#endif

CORTADO_INSTANTIATE_LAYER(ContrastiveLossLayer);

}  // namespace cortado
